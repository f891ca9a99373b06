/**
 * Issue 45: defaults from the container's memory limit (src/config/memory.ts), and a mount
 * inside a real 2 GiB memory cgroup (v2 memory.max or v1 memory.limit_in_bytes, whichever
 * this machine has) that sizes its cache from the limit, not from the host.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, rmdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { defaultCacheSize, defaultMaxInflight } from '../../src/config/options.js';
import { memoryLimit, memoryWarning } from '../../src/config/memory.js';
import { seedDataset } from '../../src/local/dataset.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { CLI } from '../helpers/cli.js';
import { tempMountpoint } from '../helpers/fuse.js';
import { skip } from '../helpers/tap.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

t.test('the limit: the cgroup when lower than the host, else the host', async (t) => {
  t.same(memoryLimit(2 * GiB, 64 * GiB), { bytes: 2 * GiB, source: 'cgroup' });
  t.same(memoryLimit(0, 64 * GiB), { bytes: 64 * GiB, source: 'host' }, '0: unknown');
  t.same(memoryLimit(2 ** 64, 64 * GiB), { bytes: 64 * GiB, source: 'host' }, 'no limit (cgroup v2 "max")');
  t.same(memoryLimit(9223372036854771712, 64 * GiB), { bytes: 64 * GiB, source: 'host' }, 'no limit (cgroup v1)');
  t.equal(defaultCacheSize(16 * GiB), 2 * GiB, 'a 16 GiB pod: 2 GiB of cache, whatever the host');
  t.equal(defaultMaxInflight(2 * GiB), 256 * MiB);
  t.equal(defaultMaxInflight(64 * GiB), 512 * MiB);
  t.equal(defaultMaxInflight(256 * MiB), 64 * MiB);
});

t.test('a --cache-size above half the limit (with --max-inflight) is warned about, in one line', async (t) => {
  const pod = { bytes: 2 * GiB, source: 'cgroup' as const };
  t.equal(memoryWarning(defaultCacheSize(pod.bytes), defaultMaxInflight(pod.bytes), pod), undefined, 'the defaults are not');
  const w = memoryWarning(1536 * MiB, 256 * MiB, pod);
  t.match(w, /--cache-size 1536 MiB plus --max-inflight 256 MiB is more than half of the container's memory limit \(2048 MiB\)/);
  t.notMatch(w, /\n/);
});

/** A child memory cgroup of our own with `limit` bytes, or why not; its remover. */
async function memoryCgroup(limit: number): Promise<{ dir: string; remove(): Promise<void> } | string> {
  const self = readFileSync('/proc/self/cgroup', 'utf8').split('\n');
  const name = `sluice-test-${process.pid}`;
  const v1 = self.find((l) => /^\d+:memory:/.test(l));
  let dir: string;
  let file: string;
  if (v1 !== undefined && existsSync('/sys/fs/cgroup/memory')) {
    dir = path.join('/sys/fs/cgroup/memory', v1.split(':')[2]!, name);
    file = 'memory.limit_in_bytes';
  } else {
    const v2 = self.find((l) => l.startsWith('0::'));
    if (v2 === undefined || !existsSync('/sys/fs/cgroup/cgroup.controllers')) return 'no memory cgroup';
    const parent = path.join('/sys/fs/cgroup', v2.slice(3));
    if (!readFileSync(path.join(parent, 'cgroup.subtree_control'), 'utf8').includes('memory')) return 'the memory controller is not enabled for child cgroups';
    dir = path.join(parent, name);
    file = 'memory.max';
  }
  try {
    await mkdir(dir);
    await writeFile(path.join(dir, file), String(limit));
  } catch (err) {
    await rmdir(dir).catch(() => undefined);
    return `cannot create a memory cgroup (${(err as NodeJS.ErrnoException).code})`;
  }
  // rmdir succeeds once no process is left in it; the mount has exited by then.
  return { dir, remove: () => rmdir(dir).catch(() => undefined) };
}

t.test('a mount inside a 2 GiB memory cgroup sizes its cache from 2 GiB, not from the host', async (t) => {
  if (os.totalmem() <= 4 * GiB || defaultCacheSize(2 * GiB) === defaultCacheSize(os.totalmem())) return skip(t, 'the host is too small to tell 2 GiB apart');
  const cg = await memoryCgroup(2 * GiB);
  if (typeof cg === 'string') return skip(t, cg);
  t.teardown(() => cg.remove());
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket('memcg');
  await seedDataset(s3, 'memcg', 'd/', { smallFiles: { count: 2, size: 1000, folders: 1 } });
  const dir = await tempMountpoint(t, 'memcg');
  const env: NodeJS.ProcessEnv = {
    ...process.env, AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey,
    AWS_REGION: 'us-east-1', SLUICE_LOG_LEVEL: 'info', SLUICE_LOG_FORMAT: 'json', NODE_NO_WARNINGS: '1',
  };
  for (const k of ['SLUICE_CACHE_SIZE', 'SLUICE_MAX_INFLIGHT']) delete env[k];
  // A mount started inside the cgroup (the shell moves itself in, then becomes the mount),
  // waited for until it prints "ready" (or exits), killed in teardown at the latest.
  const mountInCgroup = async (extra: string[]) => {
    const child = spawn('sh', ['-c', `echo $$ > ${path.join(cg.dir, 'cgroup.procs')} && exec "$0" "$@"`, process.execPath, CLI,
      'mount', 's3://memcg/d/', dir, '--endpoint', s3.endpoint, '--metrics-port=-1', ...extra], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const io = { out: '', err: '' };
    child.stdout.on('data', (b: Buffer) => { io.out += b; });
    child.stderr.on('data', (b: Buffer) => { io.err += b; });
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    t.teardown(() => { child.kill('SIGKILL'); return exited; });
    const deadline = Date.now() + 60_000;
    // The memory plan is logged just after "ready" goes to stdout (src/commands/mount.ts), on
    // stderr: wait for both, or a loaded machine reads stderr before the line is there.
    while (!(/^ready /m.test(io.out) && io.err.includes('"memoryLimit"')) && child.exitCode === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    return { child, io, exited };
  };
  const first = await mountInCgroup([]);
  const err = first.io.err;
  t.match(first.io.out, /^ready /m, `mounted: ${err.slice(0, 500)}`);
  const line = err.split('\n').find((l) => l.includes('"memoryLimit"'));
  const plan = line === undefined ? undefined : JSON.parse(line) as { memoryLimit: number; memoryLimitSource: string; cacheSize: number; maxInflight: number };
  t.equal(plan?.memoryLimitSource, 'cgroup', 'the limit came from the cgroup');
  t.equal(plan?.memoryLimit, 2 * GiB);
  t.equal(plan?.cacheSize, defaultCacheSize(2 * GiB), `cache ${defaultCacheSize(2 * GiB) / MiB} MiB, not the host's ${defaultCacheSize(os.totalmem()) / MiB} MiB`);
  t.equal(plan?.maxInflight, defaultMaxInflight(2 * GiB));
  t.notMatch(err, /more than half/, 'no warning for the defaults');
  first.child.kill('SIGTERM');
  t.equal(await first.exited, 0, 'unmounted cleanly');
  // Asked for more than half of the limit: one warning line.
  const over = await mountInCgroup(['--cache-size', '1536MiB']);
  over.child.kill('SIGTERM');
  await over.exited;
  const err2 = over.io.err;
  t.equal(err2.split('\n').filter((l) => l.includes('more than half')).length, 1, 'one warning line');
});
