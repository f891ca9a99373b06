/**
 * S3ObjectClient through the fault-injecting proxy (test/helpers/fault-proxy.ts) in front
 * of a real s3rver: every fault still yields exactly the source bytes (or a typed error
 * once attempts run out), and sluice_s3_retries_total counts the retries by reason.
 */
import t from 'tap';
import { startLocalS3, type LocalS3 } from '../../src/local/s3-server.js';
import { seedDataset, sourceBytes, type SeededObject } from '../../src/local/dataset.js';
import { createObjectClient, type S3ClientOptions } from '../../src/s3/s3-client.js';
import type { ObjectClient } from '../../src/s3/object-client.js';
import { AbortedError, EndpointUnreachableError, MalformedReplyError, RetriesExhaustedError, TimeoutError } from '../../src/errors.js';
import { s3Retries } from '../../src/metrics/metrics.js';
import { startFaultProxy, type FaultProxy } from '../helpers/fault-proxy.js';

const BUCKET = 'sluice-faults';
let s3: LocalS3;
let proxy: FaultProxy;
let objects: SeededObject[];
let large: SeededObject;
const clients: ObjectClient[] = [];

function client(extra: Partial<S3ClientOptions> = {}): ObjectClient {
  const c = createObjectClient({
    bucket: BUCKET, endpoint: proxy.endpoint, region: 'us-east-1', pathStyle: true, credentials: s3.credentials,
    // Generous: a stall test sets its own short timeout; elsewhere a loaded CI box must not time out.
    maxAttempts: 10, requestTimeoutMs: 30_000, maxConnections: 4, ...extra,
  });
  clients.push(c);
  return c;
}

async function retries(operation: string, ...reasons: string[]): Promise<number> {
  const values = (await s3Retries.get()).values;
  return values.filter((v) => v.labels.operation === operation && (reasons.length === 0 || reasons.includes(String(v.labels.reason))))
    .reduce((a, v) => a + v.value, 0);
}

async function drain(it: AsyncIterable<Buffer>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const b of it) parts.push(b);
  return Buffer.concat(parts);
}

t.before(async () => {
  s3 = await startLocalS3();
  await s3.createBucket(BUCKET);
  objects = await seedDataset(s3, BUCKET, 'f/', { smallFiles: { count: 30, size: 100, folders: 3 }, largeFiles: { count: 1, size: 1024 * 1024 + 3 }, seed: 5 });
  large = objects.find((o) => o.key.includes('/large/'))!;
  proxy = await startFaultProxy(s3.port);
});
t.teardown(async () => {
  for (const c of clients) await c.close();
  await proxy?.close();
  await s3?.stop();
});
t.afterEach(() => proxy.set({ latencyMs: 0, fail503: 0, resetMidBody: 0, truncateBody: 0, stall: 0, down: false }));

t.test('a 503 SlowDown burst is retried and yields exactly the bytes', async (t) => {
  const c = client();
  const before = await retries('get', 'throttled');
  proxy.set({ fail503: 3 });
  const got = await c.getRange(large.key, 1000, 900_000, large.etag);
  t.ok(got.equals(sourceBytes(large, 1000, 900_000)), 'exact bytes');
  t.equal(proxy.counts.fail503, 3, 'the proxy sent 3 SlowDowns');
  t.equal(await retries('get', 'throttled') - before, 3, 'three throttled retries counted');
});

t.test('a connection reset mid-body resumes from the bytes received', async (t) => {
  const c = client();
  const before = await retries('get', 'reset', 'short_body');
  const fired = proxy.counts.resetMidBody!;
  proxy.set({ resetMidBody: 2 });
  const got = await c.getRange(large.key, 0, large.size, large.etag);
  t.ok(got.equals(sourceBytes(large)), 'exact bytes');
  t.equal(proxy.counts.resetMidBody! - fired, 2, 'two resets injected');
  t.ok(await retries('get', 'reset', 'short_body') - before >= 2, 'both retries counted');
});

t.test('a truncated body (Content-Length kept, connection closed) is completed', async (t) => {
  const c = client();
  const before = await retries('get', 'short_body', 'reset');
  const fired = proxy.counts.truncateBody!;
  proxy.set({ truncateBody: 3 });
  const got = await c.getRange(large.key, 17, large.size - 5, large.etag);
  t.ok(got.equals(sourceBytes(large, 17, large.size - 5)), 'exact bytes');
  t.equal(proxy.counts.truncateBody! - fired, 3, 'three truncations injected');
  t.ok(await retries('get', 'short_body', 'reset') - before >= 3, 'all three retries counted');
  t.ok(await retries('get', 'short_body') > 0, 'labelled short_body');
});

t.test('getStream survives truncation and resets mid-stream', async (t) => {
  const c = client();
  proxy.set({ truncateBody: 1, resetMidBody: 1 });
  const got = await drain(c.getStream(large.key, large.etag, { size: large.size }));
  t.ok(got.equals(sourceBytes(large)), 'exact bytes');
});

t.test('a stalled request times out and is retried', async (t) => {
  const c = client({ requestTimeoutMs: 1500 }); // short enough to retry soon, long enough for a loaded box
  const before = await retries('get', 'timeout');
  proxy.set({ stall: 1 });
  const o = objects[0]!;
  const got = await c.getRange(o.key, 0, o.size, o.etag);
  t.ok(got.equals(sourceBytes(o)), 'exact bytes');
  t.ok(await retries('get', 'timeout') - before >= 1, 'timeout retry counted');
  const listBefore = await retries('list', 'timeout');
  proxy.set({ stall: 1 });
  const keys: string[] = [];
  for await (const info of c.list('f/small/')) keys.push(info.key);
  t.equal(keys.length, 30, 'a stalled listing page is retried');
  t.ok(await retries('list', 'timeout') - listBefore >= 1, 'list timeout retry counted');
});

t.test('a request that stalls every time ends in TimeoutError', async (t) => {
  const c = client({ requestTimeoutMs: 200, maxAttempts: 2 });
  proxy.set({ stall: 2 });
  const err = await c.getRange(objects[1]!.key, 0, 10, objects[1]!.etag).catch((e: unknown) => e);
  t.type(err, TimeoutError);
  t.match((err as Error).message, /made no progress for 200 ms, 2 times/);
});

t.test('throttling that does not stop ends in RetriesExhaustedError naming the object', async (t) => {
  const c = client({ maxAttempts: 3 });
  proxy.set({ fail503: 3 });
  const err = await c.getRange(large.key, 0, 10, large.etag).catch((e: unknown) => e);
  t.type(err, RetriesExhaustedError);
  t.match((err as RetriesExhaustedError).oneLine(), /s3:\/\/sluice-faults\/f\/large\/large-0\.bin failed 3 times \(last: throttled.*throttling/);
});

t.test('listing and HEAD retry through a 503 burst and latency', async (t) => {
  const c = client();
  const listBefore = await retries('list', 'throttled');
  proxy.set({ fail503: 2, latencyMs: 20 });
  const keys: string[] = [];
  for await (const o of c.list('f/')) keys.push(o.key);
  t.same(keys.sort(), objects.map((o) => o.key).sort(), 'every key once');
  t.equal(await retries('list', 'throttled') - listBefore, 2, 'list retries counted');
  const headBefore = await retries('head', 'throttled');
  proxy.set({ fail503: 1 });
  t.equal((await c.head(large.key)).etag, large.etag);
  t.equal(await retries('head', 'throttled') - headBefore, 1, 'head retry counted');
});

t.test('a down endpoint is unreachable; once up again, reads work', async (t) => {
  const c = client({ maxAttempts: 2 });
  proxy.set({ down: true });
  const err = await c.getRange(large.key, 0, 10, large.etag).catch((e: unknown) => e);
  t.type(err, EndpointUnreachableError);
  t.match((err as Error).message, `cannot reach S3 endpoint ${proxy.endpoint}`);
  proxy.set({ down: false });
  const c2 = client({ maxAttempts: 10 });
  t.ok((await c2.getRange(large.key, 0, 10, large.etag)).equals(sourceBytes(large, 0, 10)), 'reads again');
});

t.test('an AbortSignal stops a stalled read with AbortedError', async (t) => {
  const c = client({ requestTimeoutMs: 60_000 });
  proxy.set({ stall: 1 });
  const ctrl = new AbortController();
  const p = c.getRange(objects[2]!.key, 0, 10, objects[2]!.etag, { signal: ctrl.signal });
  setTimeout(() => ctrl.abort(), 100);
  await t.rejects(p, AbortedError);
});

t.test('a listing reply that is not a listing names the listing and what to check, once (not retried)', async (t) => {
  const { createServer } = await import('node:http');
  let lists = 0;
  const xml = '<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix>p/</Prefix><KeyCount>1</KeyCount><IsTruncated>false</IsTruncated><Contents><Key>p/a</Key><Size>1</Size></Contents></ListBucketResult>';
  // Framed right (a whole Content-Length), the XML cut half-way: what a proxy that alters replies could send.
  const server = createServer((req, res) => {
    lists++;
    const body = xml.slice(0, Math.floor(xml.length / 2));
    res.writeHead(200, { 'content-type': 'application/xml', 'content-length': Buffer.byteLength(body) }).end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const port = (server.address() as { port: number }).port;
  const c = client({ endpoint: `http://127.0.0.1:${port}`, bucket: 'b' });
  const err = await (async () => { try { for await (const _ of c.list('p/')) { /* none */ } return undefined; } catch (e) { return e as MalformedReplyError; } })();
  t.ok(err instanceof MalformedReplyError, 'MalformedReplyError');
  t.match(err?.message ?? '', /S3 listing of s3:\/\/b\/p\/ got a reply that is not a listing \(malformed XML/, 'names the listing and the XML fault');
  t.match(err?.hint ?? '', /--endpoint/, 'and what to check');
  t.equal(lists, 1, 'not retried: the server would send it again');
});
