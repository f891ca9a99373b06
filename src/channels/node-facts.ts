/**
 * Facts about this node that SageMaker's container contract reports: accelerator and CPU
 * counts, instance type, network interface. Each is read from local files (no network:
 * the EC2 metadata service is not asked, so start-up never waits on it).
 *
 *  - GPUs: the NVIDIA device nodes /dev/nvidia0, /dev/nvidia1, ... The toolkit counts the
 *    "GPU n" lines of `nvidia-smi --list-gpus`; the device nodes are the same set (the
 *    container runtime exposes only the GPUs given to the container), without running a
 *    program that can take seconds. 0 when there are none.
 *  - CPUs: os.cpus().length, the online CPUs, as Python's multiprocessing.cpu_count().
 *  - Neuron cores: as the toolkit: 64 on a trn2.48xlarge, else the sum of `nc_count` in
 *    `neuron-ls -j` when neuron-ls is installed, else 0.
 *  - Instance type: on an EC2 Nitro instance the DMI product name (/sys/devices/virtual/
 *    dmi/id/product_name, vendor "Amazon EC2") is the instance type; SageMaker names it
 *    with an "ml." prefix, so "p4d.24xlarge" becomes "ml.p4d.24xlarge". Elsewhere
 *    "local", the toolkit's own value when the type is unknown (and SageMaker local mode's).
 *  - Network interface: the interface of the default route (/proc/net/route), else "eth0",
 *    SageMaker's and the toolkit's default.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/** The toolkit's value when the instance type is unknown; also SageMaker local mode's. */
export const UNKNOWN_INSTANCE_TYPE = 'local';
/** SageMaker's network interface name, and the toolkit's default. */
export const DEFAULT_INTERFACE = 'eth0';
/** The toolkit's fixed Neuron core count for this instance type (environment.num_neurons). */
const TRN2_48XL_CORES = 64;
/** neuron-ls answers in well under a second; a hung driver must not hold up the job. */
const NEURON_LS_TIMEOUT_MS = 10_000;

export async function countGpus(devDir = '/dev'): Promise<number> {
  const names = await readdir(devDir).catch(() => [] as string[]);
  return names.filter((n) => /^nvidia\d+$/.test(n)).length;
}

export function countCpus(): number {
  return os.cpus().length;
}

function onPath(cmd: string, env: NodeJS.ProcessEnv): boolean {
  return (env.PATH ?? '/usr/bin:/bin').split(':').some((d) => d !== '' && existsSync(path.join(d, cmd)));
}

export async function countNeuronCores(instanceType: string, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  if (instanceType.includes('trn2.48xlarge')) return TRN2_48XL_CORES;
  if (!onPath('neuron-ls', env)) return 0;
  const out = await new Promise<string | undefined>((resolve) => {
    execFile('neuron-ls', ['-j'], { timeout: NEURON_LS_TIMEOUT_MS, env }, (err, stdout) => resolve(err ? undefined : stdout));
  });
  try {
    const list = JSON.parse(out ?? '[]') as { nc_count?: unknown }[];
    return Array.isArray(list) ? list.reduce((n, d) => n + (typeof d?.nc_count === 'number' ? d.nc_count : 0), 0) : 0;
  } catch {
    return 0;
  }
}

/** "ml.<type>" on an EC2 instance that names its type in DMI; undefined elsewhere. */
export async function instanceTypeFromDmi(dmiDir = '/sys/devices/virtual/dmi/id'): Promise<string | undefined> {
  const read = (f: string) => readFile(path.join(dmiDir, f), 'utf8').then((s) => s.trim(), () => '');
  if ((await read('sys_vendor')) !== 'Amazon EC2') return undefined;
  const product = await read('product_name');
  return /^[a-z][a-z0-9-]*\.[a-z0-9-]+$/.test(product) ? `ml.${product}` : undefined;
}

/** The interface of the IPv4 default route, or DEFAULT_INTERFACE. */
export async function defaultInterface(routeFile = '/proc/net/route'): Promise<string> {
  const text = await readFile(routeFile, 'utf8').catch(() => '');
  for (const line of text.split('\n').slice(1)) {
    const [iface, destination] = line.trim().split(/\s+/);
    if (iface && destination === '00000000') return iface;
  }
  return DEFAULT_INTERFACE;
}

/** Whether `cmd` is an executable on PATH (the toolkit runs `which smddprun`). */
export function installed(cmd: string, env: NodeJS.ProcessEnv = process.env): boolean {
  return onPath(cmd, env);
}
