/**
 * Issue 6, item 1: faults injected by the proxy (test/helpers/fault-proxy.ts) in front of
 * the real local S3 server, read through the whole FastFile core (SluiceFs: read cursors,
 * block cache, prefetch, the real S3 client). Every read is compared byte for byte with
 * the source; every fault must end in the right bytes or a typed error, never a crash.
 * (The same faults at the bare client level: test/s3/s3-client-faults.ts. Outages through a
 * real mount: ./outage.ts.)
 */
import t from 'tap';
import { TimeoutError } from '../../src/errors.js';
import { SluiceFs } from '../../src/fs/core.js';
import { seedDataset, sourceBytes, type SeededObject } from '../../src/local/dataset.js';
import { startLocalS3, type LocalS3 } from '../../src/local/s3-server.js';
import { s3ConcurrencyLimit, s3Retries } from '../../src/metrics/metrics.js';
import { createObjectClient, S3ObjectClient, type S3ClientOptions } from '../../src/s3/s3-client.js';
import { startFaultProxy, type FaultProxy } from '../helpers/fault-proxy.js';

const BUCKET = 'reliability';
const KiB = 1024;
const MiB = 1024 * KiB;
/** Connections of the client under the SlowDown storm: the limiter's ceiling. */
const MAX_CONNECTIONS = 8;

let s3: LocalS3;
let proxy: FaultProxy;
let objects: SeededObject[];
let verified = 0;
const closers: Array<() => Promise<void>> = [];

t.before(async () => {
  s3 = await startLocalS3();
  await s3.createBucket(BUCKET);
  objects = await seedDataset(s3, BUCKET, 'd/', { smallFiles: { count: 24, size: 20 * KiB, folders: 2 }, largeFiles: { count: 4, size: 3 * MiB + 17 }, seed: 6 });
  proxy = await startFaultProxy(s3.port);
});
t.teardown(async () => {
  for (const c of closers.reverse()) await c().catch(() => undefined);
  await proxy?.close();
  await s3?.stop();
});
t.afterEach(() => proxy.set({ latencyMs: 0, fail503: 0, resetMidBody: 0, truncateBody: 0, stall: 0, down: false }));

async function mountCore(extra: Partial<S3ClientOptions> = {}): Promise<{ fs: SluiceFs; client: S3ObjectClient }> {
  const client = createObjectClient({
    bucket: BUCKET, endpoint: proxy.endpoint, region: 'us-east-1', pathStyle: true, credentials: s3.credentials,
    maxAttempts: 12, requestTimeoutMs: 20_000, maxConnections: MAX_CONNECTIONS, ...extra,
  }) as S3ObjectClient;
  const fs = await SluiceFs.create({
    client, prefix: 'd/', cacheSize: 8 * MiB, partSize: 512 * KiB, maxPrefetch: 2 * MiB, maxInflight: 4 * MiB,
    crossFilePrefetch: 0, crossFileMaxSize: 64 * KiB,
  });
  closers.push(async () => { await fs.close(); await client.close(); });
  return { fs, client };
}

/** Reads the whole file through the core in `chunk`-byte reads and checks every byte. */
async function readWhole(fs: SluiceFs, o: SeededObject, chunk = 128 * KiB): Promise<boolean> {
  const fh = await fs.open('/' + o.key.slice(2), 0);
  try {
    const want = sourceBytes(o);
    const buf = Buffer.alloc(chunk);
    for (let pos = 0; pos < o.size;) {
      const n = await fs.read(fh, buf, chunk, pos);
      if (n === 0 || !buf.subarray(0, n).equals(want.subarray(pos, pos + n))) return false;
      pos += n;
      verified += n;
    }
    return true;
  } finally {
    await fs.release(fh);
  }
}

async function retries(reason: string): Promise<number> {
  return (await s3Retries.get()).values.filter((v) => v.labels.operation === 'get' && v.labels.reason === reason).reduce((a, v) => a + v.value, 0);
}

t.test('a 503 SlowDown storm: concurrency halves, then grows back; bytes correct', async (t) => {
  const { fs, client } = await mountCore();
  const large = objects.filter((o) => o.key.includes('/large/'));
  t.equal(client.limiter.limit, MAX_CONNECTIONS, 'starts at --max-connections');
  let low = client.limiter.limit;
  const sampler = setInterval(() => { low = Math.min(low, client.limiter.limit); }, 2);
  t.teardown(() => clearInterval(sampler));
  const throttledBefore = await retries('throttled');
  proxy.set({ fail503: 30 });
  const ok = await Promise.all(large.map((o) => readWhole(fs, o)));
  low = Math.min(low, client.limiter.limit);
  t.same(ok, large.map(() => true), 'every large file correct through the storm');
  t.equal(proxy.counts.fail503, 30, 'the proxy sent 30 SlowDowns');
  t.ok(await retries('throttled') - throttledBefore >= 30, 'each was retried');
  t.ok(low < MAX_CONNECTIONS, `the limit backed off (lowest ${low} of ${MAX_CONNECTIONS})`);
  // Recovery: a window of successes at each limit adds one, up to the ceiling.
  const small = objects.filter((o) => o.key.includes('/small/'));
  let good = 0;
  for (let i = 0; i < 200 && client.limiter.limit < MAX_CONNECTIONS; i++) {
    const o = small[i % small.length]!;
    t.ok((await client.getRange(o.key, 0, o.size, o.etag)).equals(sourceBytes(o)), `GET ${o.key} correct`);
    good++;
    verified += o.size;
  }
  t.comment(`${good} more GETs were needed to reach the ceiling again`);
  t.comment(`SlowDown storm: limit ${MAX_CONNECTIONS} -> ${low} -> ${client.limiter.limit}`);
  t.equal(client.limiter.limit, MAX_CONNECTIONS, 'grew back to the ceiling');
  t.equal((await s3ConcurrencyLimit.get()).values[0]?.value, client.limiter.limit, 'sluice_s3_concurrency_limit shows it');
});

t.test('connection resets and truncated bodies mid-read: bytes correct', async (t) => {
  const { fs } = await mountCore();
  const before = (await retries('reset')) + (await retries('short_body'));
  proxy.set({ resetMidBody: 3, truncateBody: 3 });
  const files = objects.filter((o) => o.key.includes('/large/')).concat(objects.slice(0, 6));
  const ok = await Promise.all(files.map((o) => readWhole(fs, o, 100_000)));
  t.same(ok, files.map(() => true), 'every file correct');
  t.equal(proxy.counts.resetMidBody! + proxy.counts.truncateBody!, 6, 'six mid-body faults injected');
  t.equal((await retries('reset')) + (await retries('short_body')) - before, 6, 'each retried once');
});

t.test('a stalling server: the per-attempt deadline fires and the read is retried', async (t) => {
  const { fs } = await mountCore({ requestTimeoutMs: 500 });
  const before = await retries('timeout');
  proxy.set({ stall: 2 });
  const o = objects.find((x) => x.key.includes('/large/'))!;
  t.ok(await readWhole(fs, o), 'correct bytes after two stalled attempts');
  t.equal(proxy.counts.stall, 2);
  t.ok(await retries('timeout') - before >= 2, 'timeouts counted as retries');
});

t.test('a server that stalls on every attempt: the read fails with TimeoutError, and the core still works', async (t) => {
  const { fs } = await mountCore({ requestTimeoutMs: 300, maxAttempts: 2 });
  const stalled = proxy.counts.stall!;
  proxy.set({ stall: 2 });
  const o = objects[10]!;
  const fh = await fs.open('/' + o.key.slice(2), 0);
  const err = await Promise.resolve().then(() => fs.read(fh, Buffer.alloc(4096), 4096, 0)).catch((e: unknown) => e);
  t.type(err, TimeoutError, 'typed error (ETIMEDOUT through FUSE)');
  t.equal(proxy.counts.stall! - stalled, 2, 'both attempts stalled');
  t.ok(await readWhole(fs, o), 'the next read of the same bytes works');
  await fs.release(fh);
});

t.test('figures', async (t) => {
  t.comment(`faults test: ${verified} bytes verified against the source`);
  t.ok(verified > 0);
});
