/**
 * `sluice run` File mode on a reused root (issue 12): the channel holds exactly this run's
 * objects after another host's run and after a kill -9.
 * The built CLI (node dist/cli.js) against the local S3 server.
 */
import t from 'tap';
import { createHash } from 'node:crypto';
import { spawn } from 'node:child_process';
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { seedDataset, type SeededObject } from '../../src/local/dataset.js';
import { startLocalS3, type LocalS3 } from '../../src/local/s3-server.js';
import { runEnv, s3Flags, tmpRoot } from '../helpers/run.js';
import { CLI, runCli } from '../helpers/cli.js';
import { startFaultProxy } from '../helpers/fault-proxy.js';

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

let s3: LocalS3;
let seeded: SeededObject[];

t.before(async () => {
  s3 = await startLocalS3();
  await s3.createBucket('bkt');
  seeded = await seedDataset(s3, 'bkt', 'train/', { smallFiles: { count: 12, size: 3000, folders: 3 }, largeFiles: { count: 1, size: 300_000 }, seed: 5 });
});
t.teardown(() => s3?.stop());

const env = runEnv;
const common = () => s3Flags(s3);

/** Every entry below `dir`, relative, folders with a trailing '/'. */
async function tree(dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true, withFileTypes: true }))
    .map((d) => path.relative(dir, path.join(d.parentPath, d.name)) + (d.isDirectory() ? '/' : '')).sort();
}

t.test('File mode on a reused root holds only this run\'s shard: algo-1 then algo-2, and after a kill -9', async (t) => {
  const shardArgs = (root: string, host: number) => ['run', '--channel', 'train=s3://bkt/train/,distribution=ShardedByS3Key', '--root', root,
    '--current-host', `algo-${host}`, '--host-count', '2', ...common(), '--', process.execPath, '-e', 'process.exit(0)'];
  // Reference: algo-2's shard on a fresh root.
  const fresh = await tmpRoot(t);
  const ref = await runCli(shardArgs(fresh, 2), env());
  t.equal(ref.code, 0, ref.stderr);
  const expected = await tree(path.join(fresh, 'input', 'data', 'train'));
  t.ok(expected.some((e) => !e.endsWith('/')), 'algo-2 has a share');

  const root = await tmpRoot(t);
  const chan = path.join(root, 'input', 'data', 'train');
  const r1 = await runCli(shardArgs(root, 1), env());
  t.equal(r1.code, 0, r1.stderr);
  t.notSame(await tree(chan), expected, 'algo-1 holds another shard');
  const r2 = await runCli(shardArgs(root, 2), env());
  t.equal(r2.code, 0, r2.stderr);
  t.same(await tree(chan), expected, 'after algo-2 the channel holds exactly algo-2\'s shard');
  t.same(await readdir(path.join(root, 'input', 'data')), ['train'], 'input/data holds only channels (the ETag record is elsewhere)');

  // kill -9 in the middle of a download, then run again. Every request is held 4 s by the
  // proxy, and the 300 kB object is fetched as 5 parts of 64 KiB one at a time: its
  // ".sluice-part" file stays for the ~16 s between its first and last part (a part is
  // written only once its GET has landed whole, so parallel parts would leave no window).
  const proxy = await startFaultProxy(s3.port);
  t.teardown(() => proxy.close());
  proxy.set({ latencyMs: 4000 });
  const killed = await tmpRoot(t);
  const kchan = path.join(killed, 'input', 'data', 'train');
  const args = ['run', '--channel', 'train=s3://bkt/train/', '--root', killed, '--endpoint', proxy.endpoint, '--path-style', '--metrics-port=-1', '--progress', 'log',
    '--part-size', '64KiB', '--max-connections', '1',
    '--', process.execPath, '-e', 'process.exit(0)'];
  const child = spawn(process.execPath, [CLI, ...args], { env: { ...env(), SLUICE_LOG_LEVEL: 'info' }, stdio: ['ignore', 'ignore', 'ignore'] });
  t.teardown(() => { child.kill('SIGKILL'); });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let partial: string[] = [];
  // Up to 90 s: every request (the listing's too) is held 4 s, and a loaded machine (the CI
  // suite runs two files at once) has taken over 30 s to reach the first part.
  for (let i = 0; i < 1800 && partial.length === 0; i++) {
    await new Promise((r) => setTimeout(r, 50));
    partial = (await readdir(kchan, { recursive: true }).catch(() => [])).map(String).filter((f) => f.endsWith('.sluice-part'));
  }
  child.kill('SIGKILL');
  await exited;
  t.ok(partial.length > 0, `the killed run left partial files (${partial.join(', ')})`);
  const again = await runCli(['run', '--channel', 'train=s3://bkt/train/', '--root', killed, ...common(), '--', process.execPath, '-e', 'process.exit(0)'], env());
  t.equal(again.code, 0, again.stderr);
  const all = await tree(kchan);
  t.notOk(all.some((f) => f.endsWith('.sluice-part')), 'no partial file left');
  t.same(all.filter((f) => !f.endsWith('/')), seeded.map((o) => o.key.slice('train/'.length)).sort(), 'exactly the objects');
  for (const o of seeded) t.equal(sha256(await readFile(path.join(kchan, o.key.slice('train/'.length)))), o.sha256, o.key);
});
