/**
 * Issue 6, item 4: crash safety of `sluice run` with a FastFile channel (the same for
 * `sluice mount` is in test/commands/mount.ts: kill -9, then the next mount recovers).
 *  - kill -9 of `sluice run` leaves a dead FUSE mount at ROOT/input/data/train
 *    ("Transport endpoint is not connected"); the next `sluice run` on the same root
 *    recovers the mount point and its command reads correct bytes.
 *  - SIGTERM: the training command is signalled (it records that it was), the FastFile
 *    mount is gone, the Pipe channel's FIFO is removed, and sluice exits 128 + 15.
 * Needs a build (dist/).
 */
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { mountAt } from '../../src/fuse/mountpoint.js';
import { seedDataset } from '../../src/local/dataset.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { runCli, startCli, waitExit, type RunningCli } from '../helpers/cli.js';
import { cleanupMount } from '../helpers/fuse.js';

t.test('sluice run with a FastFile channel: kill -9, then SIGTERM', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket('crash');
  const objects = await seedDataset(s3, 'crash', 'train/', { smallFiles: { count: 8, size: 10_000, folders: 2 }, largeFiles: { count: 1, size: 1_500_000 }, seed: 3 });
  await s3.putObject('crash', 'val/a', Buffer.from('pipe bytes\n'));
  const root = await mkdtemp(path.join(os.tmpdir(), 'sluice-test-crash-'));
  const mnt = path.join(root, 'input', 'data', 'train');
  const started: RunningCli[] = [];
  const pids: number[] = [];
  t.teardown(async () => {
    for (const r of started) r.child.kill('SIGKILL');
    for (const p of pids) { try { process.kill(p, 'SIGKILL'); } catch { /* gone */ } }
    await cleanupMount(mnt);
    await rm(root, { recursive: true, force: true });
  });
  const env: NodeJS.ProcessEnv = { ...process.env, NODE_NO_WARNINGS: '1', AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_REGION: 'us-east-1', SLUICE_LOG_LEVEL: 'warn' };
  const common = ['--endpoint', s3.endpoint, '--path-style', '--metrics-port=-1', '--root', root, '--cache-size', '16MiB', '--part-size', '1MiB'];
  const fastfile = ['--channel', 'train=s3://crash/train/,mode=FastFile'];
  // The handler goes in before "ready" is printed: the test signals as soon as it reads that
  // line, and a command descheduled between the two (a loaded CI machine) died of the default
  // SIGTERM without writing its marker.
  const waiter = (marker: string) => `process.on('SIGTERM', () => { require('fs').writeFileSync(${JSON.stringify(marker)}, 'SIGTERM'); process.exit(143); });
    console.log('ready ' + process.pid); setInterval(() => {}, 1000);`;

  // 1. kill -9 while the training command runs.
  const first = await startCli(['run', ...common, ...fastfile, '--', process.execPath, '-e', waiter(path.join(root, 'unused'))], env);
  started.push(first);
  pids.push(Number(/^ready (\d+)$/m.exec(first.stdout())![1]));
  t.equal((await mountAt(mnt))?.fstype, 'fuse.sluice', 'the channel is mounted while the command runs');
  first.child.kill('SIGKILL');
  await waitExit(first);
  process.kill(pids[0]!, 'SIGKILL'); // the orphaned training command
  const dead = await readdir(mnt).then(() => 'readable', (e: NodeJS.ErrnoException) => e.code);
  t.match(dead, /^(ENOTCONN|ECONNABORTED)$/, `kill -9 left a dead mount behind (${dead})`);

  // 2. The next run recovers the mount point, and its command reads correct bytes.
  const check = `const fs = require('fs'), crypto = require('crypto'), path = require('path');
    const want = JSON.parse(process.argv[1]);
    for (const [rel, sha] of Object.entries(want)) {
      const got = crypto.createHash('sha256').update(fs.readFileSync(path.join(process.env.SM_CHANNEL_TRAIN, rel))).digest('hex');
      if (got !== sha) { console.error('mismatch ' + rel); process.exit(1); }
    }`;
  const want = Object.fromEntries(objects.map((o) => [o.key.slice('train/'.length), o.sha256]));
  const second = await runCli(['run', ...common, ...fastfile, '--', process.execPath, '-e', check, JSON.stringify(want)], env);
  t.equal(second.code, 0, `the next sluice run recovers the mount point and reads correct bytes (${second.stderr.trim()})`);
  t.equal(await mountAt(mnt), undefined, 'and unmounts when its command exits');

  // 3. SIGTERM: the child is signalled, the mount is gone, the FIFO removed.
  const marker = path.join(root, 'got-sigterm');
  const third = await startCli(['run', ...common, ...fastfile, '--channel', 'val=s3://crash/val/,mode=Pipe', '--', process.execPath, '-e', waiter(marker)], env);
  started.push(third);
  pids.push(Number(/^ready (\d+)$/m.exec(third.stdout())![1]));
  const fifo = path.join(root, 'input', 'data', 'val_0');
  t.ok(existsSync(fifo), 'the Pipe FIFO exists while the command runs');
  t.ok(await mountAt(mnt), 'the FastFile channel is mounted');
  third.child.kill('SIGTERM');
  const { code } = await waitExit(third);
  t.equal(code, 143, 'sluice exits 128 + 15');
  t.equal(await readFile(marker, 'utf8').catch(() => 'not signalled'), 'SIGTERM', 'the training command got SIGTERM');
  t.equal(await mountAt(mnt), undefined, 'the mount is gone');
  t.notOk(existsSync(fifo), 'the FIFO is removed');
});
