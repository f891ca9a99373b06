/**
 * `sluice run` channel behaviour end to end (issue 12): File mode holds exactly this
 * run's objects, empty prefixes fail alike in every mode, and channels share one budget.
 * The built CLI (node dist/cli.js) against the local S3 server.
 */
import t from 'tap';
import { createHash } from 'node:crypto';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { seedDataset, type SeededObject } from '../../src/local/dataset.js';
import { startLocalS3, type LocalS3 } from '../../src/local/s3-server.js';
import { CLI, runCli } from '../helpers/cli.js';
import { cleanupMount } from '../helpers/fuse.js';
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

async function tmpRoot(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-run-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

// NODE_NO_WARNINGS: the AWS SDK warns about Node 20 on stderr, which is not sluice's output.
const env = () => ({ ...process.env, NODE_NO_WARNINGS: '1', AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_REGION: 'us-east-1', SLUICE_LOG_LEVEL: 'warn' });
const common = () => ['--endpoint', s3.endpoint, '--path-style', '--metrics-port=-1', '--max-attempts', '3'];

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

  // kill -9 in the middle of a download (every GET held 4 s by the proxy), then run again.
  const proxy = await startFaultProxy(s3.port);
  t.teardown(() => proxy.close());
  proxy.set({ latencyMs: 4000 });
  const killed = await tmpRoot(t);
  const kchan = path.join(killed, 'input', 'data', 'train');
  const args = ['run', '--channel', 'train=s3://bkt/train/', '--root', killed, '--endpoint', proxy.endpoint, '--path-style', '--metrics-port=-1', '--progress', 'log',
    '--', process.execPath, '-e', 'process.exit(0)'];
  const child = spawn(process.execPath, [CLI, ...args], { env: { ...env(), SLUICE_LOG_LEVEL: 'info' }, stdio: ['ignore', 'ignore', 'ignore'] });
  t.teardown(() => { child.kill('SIGKILL'); });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let partial: string[] = [];
  for (let i = 0; i < 600 && partial.length === 0; i++) {
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

t.test('an empty or mistyped prefix fails with the same one line in File, FastFile and Pipe; --allow-empty-channel starts it empty', async (t) => {
  await s3.putObject('bkt', 'only-markers/', Buffer.alloc(0));
  await s3.putObject('bkt', 'only-markers/sub/', Buffer.alloc(0));
  for (const prefix of ['trian/', 'only-markers/']) {
    const lines: string[] = [];
    for (const mode of ['File', 'FastFile', 'Pipe']) {
      const root = await tmpRoot(t);
      t.teardown(() => cleanupMount(path.join(root, 'input', 'data', 'train')));
      const marker = path.join(root, 'started');
      const r = await runCli(['run', '--channel', `train=s3://bkt/${prefix},mode=${mode}`, '--root', root, ...common(),
        '--', process.execPath, '-e', `require('fs').writeFileSync(${JSON.stringify(marker)}, 'x')`], { ...env(), SLUICE_LOG_LEVEL: 'silent' });
      t.equal(r.code, 2, `${prefix} ${mode}: exit 2`);
      t.equal(r.stderr.trim().split('\n').length, 1, `${prefix} ${mode}: one line: ${r.stderr}`);
      t.notOk(existsSync(marker), `${prefix} ${mode}: the script never started`);
      lines.push(r.stderr.trim());
    }
    t.match(lines[0], new RegExp(`^sluice: channel "train": no objects under s3://bkt/${prefix}\\. .*--allow-empty-channel`));
    t.same(lines, [lines[0], lines[0], lines[0]], `${prefix}: the same line in every mode`);
  }
  for (const mode of ['File', 'FastFile']) {
    const root = await tmpRoot(t);
    const dir = path.join(root, 'input', 'data', 'train');
    t.teardown(() => cleanupMount(dir));
    const r = await runCli(['run', '--channel', `train=s3://bkt/trian/,mode=${mode}`, '--allow-empty-channel', '--root', root, ...common(),
      '--', process.execPath, '-e', 'process.stdout.write(JSON.stringify(require("fs").readdirSync(process.env.SM_CHANNEL_TRAIN)))'], env());
    t.equal(r.code, 0, `${mode} with --allow-empty-channel: ${r.stderr}`);
    t.equal(r.stdout, '[]', `${mode}: the script sees an empty channel`);
  }
});

t.test('Pipe skips folder markers: RecordIO holds only data objects, and sharding counts only them', async (t) => {
  for (const k of ['pm/', 'pm/a', 'pm/sub/', 'pm/sub/b', 'pm/sub/c', 'pm/z/']) await s3.putObject('bkt', k, Buffer.from(k.endsWith('/') ? '' : `data of ${k}`));
  // Counts RecordIO records (MXNet framing: magic, cflag<<29|length, data, padding to 4) and returns their text.
  const script = `
    const fs = require('fs');
    const b = fs.readFileSync(process.env.SM_CHANNEL_TRAIN + '_0');
    const out = [];
    for (let at = 0; at < b.length;) {
      if (b.readUInt32LE(at) !== 0xced7230a) throw new Error('bad magic');
      const len = b.readUInt32LE(at + 4) & ((1 << 29) - 1);
      out.push(b.subarray(at + 8, at + 8 + len).toString());
      at += 8 + len + ((4 - (len % 4)) % 4);
    }
    process.stdout.write(JSON.stringify(out));`;
  const one = await runCli(['run', '--channel', 'train=s3://bkt/pm/,mode=Pipe,wrapper=RecordIO', '--epochs', '1', '--root', await tmpRoot(t), ...common(),
    '--', process.execPath, '-e', script], env());
  t.equal(one.code, 0, one.stderr);
  t.same(JSON.parse(one.stdout), ['data of pm/a', 'data of pm/sub/b', 'data of pm/sub/c'], 'no empty record for a marker');
  const counts: number[] = [];
  for (const h of [1, 2]) {
    const r = await runCli(['run', '--channel', 'train=s3://bkt/pm/,mode=Pipe,wrapper=RecordIO,distribution=ShardedByS3Key', '--epochs', '1',
      '--current-host', `algo-${h}`, '--host-count', '2', '--root', await tmpRoot(t), ...common(), '--', process.execPath, '-e', script], env());
    t.equal(r.code, 0, r.stderr);
    counts.push((JSON.parse(r.stdout) as string[]).length);
  }
  t.same(counts.sort(), [1, 2], '3 data objects over 2 hosts: 2 and 1 (markers not counted)');
});
