/**
 * Host identity: which host of the job this is, and who the others are.
 *
 * The first source present wins (issue 4):
 *  1. an existing resourceconfig.json (`--host-config PATH`, else <root>/input/config/
 *     resourceconfig.json), as SageMaker writes it: {"current_host", "hosts", ...}.
 *     A file that sluice itself wrote on an earlier run is recognised by its sidecar
 *     (.resourceconfig.sluice.json holds the exact text written) and is not a source:
 *     it would otherwise pin the identity of the first run forever;
 *  2. RANK and WORLD_SIZE (torchrun, Kubeflow PyTorchJob): host algo-(RANK+1) of WORLD_SIZE;
 *  3. JOB_COMPLETION_INDEX (Kubernetes Indexed Job) with --host-count / SLUICE_HOST_COUNT
 *     (the Job's `completions`);
 *  4. flags: --current-host with --hosts a,b,c or --host-count N (hosts algo-1..algo-N);
 *  5. otherwise a single host, "algo-1", as on a one-instance SageMaker job.
 * Generated names follow SageMaker's: algo-1, algo-2, ... The host index is the position
 * of current_host in `hosts` as listed (every host reads the same list, so the same index).
 */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError } from '../errors.js';

export interface HostIdentity {
  currentHost: string;
  hosts: string[];
  /** 0-based position of currentHost in hosts. */
  hostIndex: number;
  hostCount: number;
  /** Where the identity came from, for the log. */
  source: 'resourceconfig' | 'torchrun' | 'indexed-job' | 'flags' | 'default';
  /** The resourceconfig.json it was read from, when source is 'resourceconfig'. */
  configFile?: string;
  /** That file's object, whose fields sluice keeps when it writes resourceconfig.json. */
  resourceConfig?: Record<string, unknown>;
}

export interface HostFlags {
  /** Path of a resourceconfig.json to read instead of <root>/input/config/resourceconfig.json. */
  hostConfig?: string;
  currentHost?: string;
  /** Comma-separated host names. */
  hosts?: string;
  hostCount?: number;
}

export const RESOURCE_CONFIG = 'resourceconfig.json';
const SIDECAR = '.resourceconfig.sluice.json';

export function hostNames(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `algo-${i + 1}`);
}

function identity(currentHost: string, hosts: string[], source: HostIdentity['source'], what: string): HostIdentity {
  if (hosts.length === 0) throw new ConfigError(`${what}: the host list is empty`, { hint: 'List at least one host' });
  if (hosts.some((h) => h === '')) throw new ConfigError(`${what}: a host name is empty`, { hint: 'Remove the empty name' });
  if (new Set(hosts).size !== hosts.length) throw new ConfigError(`${what}: a host is listed twice`, { hint: 'List every host once' });
  const hostIndex = hosts.indexOf(currentHost);
  if (hostIndex < 0) throw new ConfigError(`${what}: current host ${JSON.stringify(currentHost)} is not in hosts ${JSON.stringify(hosts)}`, { hint: 'Make the current host one of the hosts' });
  return { currentHost, hosts, hostIndex, hostCount: hosts.length, source };
}

function intFrom(v: string, what: string, hint: string): number {
  if (!/^\d+$/.test(v.trim())) throw new ConfigError(`${what} ${JSON.stringify(v)} is not a non-negative integer`, { hint });
  return Number(v.trim());
}

/** Reads resourceconfig.json at `file`; undefined when absent or written by sluice itself. */
async function fromResourceConfig(file: string, explicit: boolean): Promise<HostIdentity | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' && !explicit) return undefined;
    throw new ConfigError(`cannot read host config ${file}: ${(err as Error).message}`, { hint: 'Pass the path of a resourceconfig.json to --host-config' });
  }
  if (!explicit) {
    const ours = await readFile(path.join(path.dirname(file), SIDECAR), 'utf8').catch(() => undefined);
    if (ours !== undefined && ours === text) return undefined;
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new ConfigError(`host config ${file} is not valid JSON`, { hint: 'Write {"current_host": "algo-1", "hosts": ["algo-1", "algo-2"]}' });
  }
  const o = json as { current_host?: unknown; hosts?: unknown };
  if (typeof o !== 'object' || o === null || typeof o.current_host !== 'string' || !Array.isArray(o.hosts) || !o.hosts.every((h) => typeof h === 'string')) {
    throw new ConfigError(`host config ${file} needs "current_host" (a string) and "hosts" (a list of strings)`, { hint: 'Write {"current_host": "algo-1", "hosts": ["algo-1", "algo-2"]}' });
  }
  return { ...identity(o.current_host, o.hosts as string[], 'resourceconfig', `host config ${file}`), configFile: path.resolve(file), resourceConfig: o as Record<string, unknown> };
}

/** Decide this host's identity; `configDir` is <root>/input/config. */
export async function resolveHosts(configDir: string, flags: HostFlags = {}, env: NodeJS.ProcessEnv = process.env): Promise<HostIdentity> {
  const explicit = flags.hostConfig !== undefined;
  const fromFile = await fromResourceConfig(flags.hostConfig ?? path.join(configDir, RESOURCE_CONFIG), explicit);
  if (fromFile) return fromFile;

  const rank = env.RANK;
  const world = env.WORLD_SIZE;
  if (rank !== undefined || world !== undefined) {
    if (rank === undefined || world === undefined) throw new ConfigError(`${rank === undefined ? 'WORLD_SIZE' : 'RANK'} is set without ${rank === undefined ? 'RANK' : 'WORLD_SIZE'}`, { hint: 'Set both (torchrun sets both), or neither' });
    const r = intFrom(rank, 'RANK', 'RANK is this host\'s 0-based index');
    const w = intFrom(world, 'WORLD_SIZE', 'WORLD_SIZE is the number of hosts');
    if (w < 1 || r >= w) throw new ConfigError(`RANK ${r} is not below WORLD_SIZE ${w}`, { hint: 'RANK counts from 0 to WORLD_SIZE - 1' });
    const hosts = hostNames(w);
    return identity(hosts[r]!, hosts, 'torchrun', 'RANK/WORLD_SIZE');
  }

  const jobIndex = env.JOB_COMPLETION_INDEX;
  if (jobIndex !== undefined && jobIndex !== '') {
    const i = intFrom(jobIndex, 'JOB_COMPLETION_INDEX', 'Kubernetes sets it in Indexed Jobs');
    if (flags.hostCount === undefined) throw new ConfigError('JOB_COMPLETION_INDEX is set but the host count is not', { hint: 'Pass --host-count N or set SLUICE_HOST_COUNT to the Job\'s completions' });
    if (flags.hostCount < 1 || i >= flags.hostCount) throw new ConfigError(`JOB_COMPLETION_INDEX ${i} is not below the host count ${flags.hostCount}`, { hint: 'Set --host-count (SLUICE_HOST_COUNT) to the Job\'s completions' });
    const hosts = hostNames(flags.hostCount);
    return identity(hosts[i]!, hosts, 'indexed-job', 'JOB_COMPLETION_INDEX');
  }

  if (flags.currentHost !== undefined || flags.hosts !== undefined || flags.hostCount !== undefined) {
    if (flags.hosts !== undefined && flags.hostCount !== undefined) throw new ConfigError('--hosts and --host-count are both given', { hint: 'Pass one: the host names, or their count' });
    if (flags.currentHost === undefined) throw new ConfigError('--hosts or --host-count is given without --current-host', { hint: 'Pass --current-host NAME (e.g. algo-2)' });
    if (flags.hostCount !== undefined && flags.hostCount < 1) throw new ConfigError(`--host-count ${flags.hostCount} must be at least 1`, { hint: 'Pass the number of hosts' });
    const hosts = flags.hosts !== undefined ? flags.hosts.split(',').map((h) => h.trim())
      : flags.hostCount !== undefined ? hostNames(flags.hostCount) : [flags.currentHost];
    return identity(flags.currentHost, hosts, 'flags', '--current-host/--hosts');
  }
  return identity('algo-1', ['algo-1'], 'default', 'default host');
}

/** The group name SageMaker gives a job without instance groups (and the toolkit's default). */
export const HOMOGENEOUS_GROUP = 'homogeneousCluster';

/** What resourceconfig.json says beyond the host identity. */
export interface ResourceFacts {
  /** SageMaker's instance type name, e.g. ml.p4d.24xlarge ("local" when unknown). */
  instanceType: string;
  networkInterfaceName: string;
}

/**
 * resourceconfig.json in SageMaker's shape (the "Distributed Training Configuration" of
 * the SageMaker developer guide): every host in one instance group, as on a job without
 * heterogeneous clusters, all of the same instance type. When the identity came from a
 * resourceconfig.json (--host-config), that file's fields win over these.
 */
export function resourceConfigJson(id: HostIdentity, facts: ResourceFacts): Record<string, unknown> {
  return {
    current_host: id.currentHost,
    current_instance_type: facts.instanceType,
    current_group_name: HOMOGENEOUS_GROUP,
    hosts: id.hosts,
    instance_groups: [{ instance_group_name: HOMOGENEOUS_GROUP, instance_type: facts.instanceType, hosts: id.hosts }],
    network_interface_name: facts.networkInterfaceName,
    ...id.resourceConfig,
  };
}

/**
 * Write <configDir>/resourceconfig.json unless it was the source (SageMaker's own file stays
 * untouched), and the sidecar that marks it as sluice's.
 */
export async function writeResourceConfig(configDir: string, id: HostIdentity, facts: ResourceFacts): Promise<void> {
  const file = path.resolve(configDir, RESOURCE_CONFIG);
  if (id.configFile === file) return;
  const text = JSON.stringify(resourceConfigJson(id, facts));
  await writeFile(file, text);
  await writeFile(path.join(configDir, SIDECAR), text);
}
