/**
 * Issue 6, items 1 and 2: S3 goes away under a real FUSE mount (`node dist/cli.js mount`
 * through the fault proxy), and the deadline chain holds:
 *  - mount A (--request-timeout 10000 --max-attempts 3: a 30.3 s request deadline) has a
 *    read waiting while S3 is down for 20 s; the read completes with the right bytes once
 *    S3 is back. It waited longer than fuse-native's 15 s default timer, so it did not fail
 *    on that timer while the retries were under way (deadline.ts sets it past the chain);
 *  - mount B (--request-timeout 1000 --max-attempts 3: a 3.3 s deadline) fails its read with
 *    EIO after its deadline, stays up (stat, readdir, /healthz answer), and reads correct
 *    bytes once S3 is back.
 * Needs a build (dist/).
 */
import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { s3DeadlineMs } from '../../src/fuse/deadline.js';
import { mountAt } from '../../src/fuse/mountpoint.js';
import { seedDataset, type SeededObject } from '../../src/local/dataset.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { startCli, waitExit, type RunningCli } from '../helpers/cli.js';
import { startFaultProxy } from '../helpers/fault-proxy.js';
import { tempMountpoint } from '../helpers/fuse.js';

const BUCKET = 'outage';
/** How long S3 stays down: longer than fuse-native's default 15 s per-operation timer. */
const OUTAGE_MS = 20_000;
/** fuse-native's default per-operation timeout, which sluice must not fail on. */
const FUSE_NATIVE_DEFAULT_TIMEOUT_MS = 15_000;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

t.test('S3 down for 20 s, and down past the deadline, under a real mount', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket(BUCKET);
  const objects = await seedDataset(s3, BUCKET, 'p/', { smallFiles: { count: 6, size: 40_000, folders: 1 }, largeFiles: { count: 2, size: 2 * 1024 * 1024 + 5 }, seed: 9 });
  const proxy = await startFaultProxy(s3.port);
  t.teardown(() => proxy.close());
  const env: NodeJS.ProcessEnv = {
    ...process.env, NODE_NO_WARNINGS: '1', AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey,
    AWS_REGION: 'us-east-1', SLUICE_LOG_LEVEL: 'info',
  };
  delete env.AWS_PROFILE;
  const common = ['--endpoint', proxy.endpoint, '--path-style', '--metrics-port', '0', '--cache-size', '16MiB', '--part-size', '1MiB',
    '--max-prefetch', '2MiB', '--cross-file-prefetch', '0'];
  const started: RunningCli[] = [];
  t.teardown(() => { for (const r of started) r.child.kill('SIGKILL'); });
  const dirA = await tempMountpoint(t, 'outage-a');
  const dirB = await tempMountpoint(t, 'outage-b');
  const chainA = { requestTimeoutMs: 10_000, maxAttempts: 3 };
  const chainB = { requestTimeoutMs: 1000, maxAttempts: 3 };
  const [a, b] = await Promise.all([
    startCli(['mount', `s3://${BUCKET}/p/`, dirA, ...common, '--request-timeout', String(chainA.requestTimeoutMs), '--max-attempts', String(chainA.maxAttempts)], env),
    startCli(['mount', `s3://${BUCKET}/p/`, dirB, ...common, '--request-timeout', String(chainB.requestTimeoutMs), '--max-attempts', String(chainB.maxAttempts)], env),
  ]);
  started.push(a, b);
  const file = (dir: string, o: SeededObject) => path.join(dir, o.key.slice('p/'.length));
  const [first, large0, large1] = [objects[0]!, objects.find((o) => o.key.endsWith('large-0.bin'))!, objects.find((o) => o.key.endsWith('large-1.bin'))!];
  t.equal(sha(await readFile(file(dirA, first))), first.sha256, 'A reads before the outage');
  t.equal(sha(await readFile(file(dirB, first))), first.sha256, 'B reads before the outage');
  // The outage comes after both listings are done (a mount answers lookups while it lists, and
  // a listing that S3's outage makes fail stops its mount: SEMANTICS.md). readdir waits for it.
  t.ok((await readdir(dirA)).includes('large'), 'A is listed before the outage');
  t.ok((await readdir(dirB)).includes('large'), 'B is listed before the outage');

  const deadlineB = s3DeadlineMs(chainB);
  t.ok(s3DeadlineMs(chainA) > OUTAGE_MS, `A's request deadline (${s3DeadlineMs(chainA)} ms) outlasts the outage`);
  const down = Date.now();
  proxy.set({ down: true });
  const readA = readFile(file(dirA, large0)).then((buf) => ({ buf, ms: Date.now() - down }));
  const readB = readFile(file(dirB, large1)).then(() => ({ code: 'none', ms: Date.now() - down }), (err: NodeJS.ErrnoException) => ({ code: err.code, ms: Date.now() - down }));
  readA.catch(() => undefined);

  const failed = await readB;
  t.equal(failed.code, 'EIO', 'B: the read fails with EIO once its deadline has passed');
  t.ok(failed.ms >= deadlineB * 0.9, `B: not before its ${deadlineB} ms deadline (failed after ${failed.ms} ms)`);
  t.comment(`B: EIO after ${failed.ms} ms (documented deadline ${deadlineB} ms)`);
  t.equal(b.child.exitCode, null, 'B: the daemon is still running');
  t.ok((await stat(dirB)).isDirectory(), 'B: the mount still answers stat');
  t.ok((await readdir(dirB)).includes('large'), 'B: and readdir');
  const urlB = /"url":"(http:\/\/127\.0\.0\.1:\d+)\/metrics"/.exec(b.stderr())?.[1];
  if (urlB) t.equal((await fetch(`${urlB}/healthz`)).status, 200, 'B: /healthz answers');

  await new Promise((r) => setTimeout(r, Math.max(0, OUTAGE_MS - (Date.now() - down))));
  proxy.set({ down: false });
  const upAt = Date.now() - down;
  const got = await readA;
  t.equal(sha(got.buf), large0.sha256, 'A: the read that waited through the outage completes with the right bytes');
  t.ok(got.ms > FUSE_NATIVE_DEFAULT_TIMEOUT_MS, `A: it waited ${got.ms} ms, past fuse-native's 15 s default, without failing on that timer`);
  t.comment(`A: read completed ${got.ms} ms after S3 went down (back up at ${upAt} ms)`);
  t.equal(sha(await readFile(file(dirB, large1))), large1.sha256, 'B: reads correct bytes again once S3 is back');
  for (const o of objects) {
    t.equal(sha(await readFile(file(dirA, o))), o.sha256, `A: ${o.key}`);
    t.equal(sha(await readFile(file(dirB, o))), o.sha256, `B: ${o.key}`);
  }

  a.child.kill('SIGTERM');
  b.child.kill('SIGTERM');
  t.equal((await waitExit(a)).code, 0, 'A exits 0 on SIGTERM');
  t.equal((await waitExit(b)).code, 0, 'B exits 0 on SIGTERM');
  t.equal(await mountAt(dirA), undefined);
  t.equal(await mountAt(dirB), undefined);
});
