/**
 * S3ObjectClient against a real S3-compatible server (s3rver in a child process).
 */
import t from 'tap';
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import { startLocalS3, type LocalS3 } from '../../src/local/s3-server.js';
import { seedDataset, sourceBytes, type SeededObject } from '../../src/local/dataset.js';
import { createObjectClient, S3ObjectClient, type S3ClientOptions } from '../../src/s3/s3-client.js';
import type { ObjectClient, ObjectInfo } from '../../src/s3/object-client.js';
import {
  EndpointUnreachableError, InvalidArgumentError, InvalidCredentialsError, MissingCredentialsError,
  NoSuchBucketError, NoSuchKeyError, ObjectChangedError,
} from '../../src/errors.js';
import { registry, s3Requests } from '../../src/metrics/metrics.js';

const BUCKET = 'sluice-test';
const LARGE = 3 * 1024 * 1024 + 17; // odd size: ranges cross no convenient boundary

let s3: LocalS3;
let objects: SeededObject[];
const clients: ObjectClient[] = [];

function client(extra: Partial<S3ClientOptions> = {}): ObjectClient {
  const c = createObjectClient({
    bucket: BUCKET, endpoint: s3.endpoint, region: 'us-east-1', pathStyle: true, credentials: s3.credentials,
    maxAttempts: 3, requestTimeoutMs: 10_000, ...extra,
  });
  clients.push(c);
  return c;
}

async function collect(it: AsyncIterable<ObjectInfo>): Promise<ObjectInfo[]> {
  const out: ObjectInfo[] = [];
  for await (const o of it) out.push(o);
  return out;
}

/** Deterministic pseudo-random numbers (mulberry32), so a failure reproduces. */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

t.before(async () => {
  s3 = await startLocalS3();
  await s3.createBucket(BUCKET);
  objects = await seedDataset(s3, BUCKET, 'data/', {
    smallFiles: { count: 1200, size: 16, folders: 40 }, largeFiles: { count: 2, size: LARGE }, specialNames: true, seed: 42,
  });
});
t.teardown(async () => {
  for (const c of clients) await c.close();
  await s3?.stop();
});

t.test('lists more than 1,000 keys, each exactly once, in parallel and flat', async (t) => {
  for (const listConcurrency of [16, 1]) {
    const listed = await collect(client({ listConcurrency }).list('data/'));
    const keys = listed.map((o) => o.key);
    t.equal(keys.length, objects.length, `count (concurrency ${listConcurrency})`);
    t.equal(new Set(keys).size, keys.length, 'no duplicates');
    t.same([...keys].sort(), objects.map((o) => o.key).sort(), 'every key');
    const byKey = new Map(listed.map((o) => [o.key, o]));
    t.ok(objects.every((o) => byKey.get(o.key)!.etag === o.etag && byKey.get(o.key)!.size === o.size), 'sizes and ETags');
    t.ok(listed.every((o) => o.lastModified instanceof Date), 'lastModified');
  }
  const sub = await collect(client().list('data/small/d01/'));
  t.same(sub.map((o) => o.key).sort(), objects.filter((o) => o.key.startsWith('data/small/d01/')).map((o) => o.key).sort(), 'a sub-prefix');
  t.same(await collect(client().list('nothing-here/')), [], 'an empty prefix');
});

t.test('stopping a listing early is clean', async (t) => {
  let n = 0;
  for await (const _ of client().list('data/')) if (++n === 5) break;
  t.equal(n, 5);
});

// Before any test that streams: it checks that this process has not loaded undici yet.
t.test('ranged GETs never load undici; the first stream does', async (t) => {
  // undici is a CommonJS package, so Node's require cache holds it once anything imports it.
  const undiciLoaded = () => Object.keys(createRequire(import.meta.url).cache).some((f) => f.includes(`${path.sep}node_modules${path.sep}undici${path.sep}`));
  t.notOk(undiciLoaded(), 'not loaded before the first GET');
  const c = client();
  const o = objects.find((o) => o.key.includes('/large/'))!;
  const src = sourceBytes(o);
  t.ok((await c.getRange(o.key, 0, o.size, o.etag)).equals(src), 'a whole object by getRange');
  const into = Buffer.alloc(1_000_000);
  const streamed: Buffer[] = [];
  for await (const b of c.getStream(o.key, o.etag, { size: o.size, start: 17, end: 1_000_017, into })) streamed.push(b);
  t.ok(Buffer.concat(streamed).equals(src.subarray(17, 1_000_017)), 'a range streamed into a buffer');
  t.notOk(undiciLoaded(), 'not loaded by GETs into buffers');
  streamed.length = 0;
  for await (const b of c.getStream(o.key, o.etag, { size: o.size })) streamed.push(b);
  t.ok(Buffer.concat(streamed).equals(src), 'a stream without a buffer');
  t.ok(undiciLoaded(), 'loaded by the first stream without a buffer');
});

t.test('200 random ranges over the large objects equal the source bytes', async (t) => {
  const c = client();
  const large = objects.filter((o) => o.key.includes('/large/'));
  const sources = new Map(large.map((o) => [o.key, sourceBytes(o)]));
  const random = rng(7);
  let bad = 0;
  for (let i = 0; i < 200; i++) {
    const o = large[i % large.length]!;
    const start = Math.floor(random() * o.size);
    const len = 1 + Math.floor(random() * Math.min(256 * 1024, o.size - start));
    const got = await c.getRange(o.key, start, start + len, o.etag);
    if (!got.equals(sources.get(o.key)!.subarray(start, start + len))) bad++;
  }
  t.equal(bad, 0, 'every range matches');
  const whole = await c.getRange(large[0]!.key, 0, LARGE, large[0]!.etag);
  t.equal(createHash('sha256').update(whole).digest('hex'), large[0]!.sha256, 'whole object sha256');
});

t.test('edge ranges: first byte (bytes=0-0), last byte, empty, whole small file', async (t) => {
  const c = client();
  for (const o of objects.filter((o) => o.key.includes('/large/') || o.key.includes('/special/'))) {
    const src = sourceBytes(o);
    t.ok((await c.getRange(o.key, 0, 1, o.etag)).equals(src.subarray(0, 1)), `first byte of ${o.key}`);
    t.ok((await c.getRange(o.key, o.size - 1, o.size, o.etag)).equals(src.subarray(o.size - 1)), `last byte of ${o.key}`);
    t.ok((await c.getRange(o.key, 1, 2, o.etag)).equals(src.subarray(1, 2)), `second byte of ${o.key}`);
  }
  const small = objects[0]!;
  t.ok((await c.getRange(small.key, 0, small.size, small.etag)).equals(sourceBytes(small)));
  t.equal((await c.getRange(small.key, 3, 3, small.etag)).length, 0, 'empty range');
  await t.rejects(c.getRange(small.key, 5, 2, small.etag), InvalidArgumentError);
  await t.rejects(c.getRange(small.key, -1, 2, small.etag), InvalidArgumentError);
});

t.test('keys with spaces, non-ASCII, + and % round-trip', async (t) => {
  const c = client();
  for (const o of objects.filter((o) => o.key.includes('/special/'))) {
    const info = await c.head(o.key);
    t.equal(info.etag, o.etag, `head ${o.key}`);
    t.equal(info.size, o.size);
    t.ok((await c.getRange(o.key, 0, o.size, o.etag)).equals(sourceBytes(o)), `get ${o.key}`);
  }
});

t.test('getStream yields the exact bytes, whole or partial, with or without size', async (t) => {
  const c = client();
  const o = objects.find((o) => o.key.includes('/large/'))!;
  const src = sourceBytes(o);
  const read = async (it: AsyncIterable<Buffer>) => { const parts: Buffer[] = []; for await (const b of it) parts.push(b); return Buffer.concat(parts); };
  t.ok((await read(c.getStream(o.key, o.etag))).equals(src), 'whole, size from HEAD');
  t.ok((await read(c.getStream(o.key, o.etag, { size: o.size }))).equals(src), 'whole, size given');
  t.ok((await read(c.getStream(o.key, o.etag, { start: 1000, end: 2_000_001 }))).equals(src.subarray(1000, 2_000_001)), 'partial');
  t.equal((await read(c.getStream(o.key, o.etag, { start: 5, end: 5 }))).length, 0, 'empty');
});

t.test('an overwritten key gives ObjectChangedError, never the new bytes', async (t) => {
  const c = client();
  const key = 'mutable/file.bin';
  const v1 = Buffer.alloc(4096, 1);
  const v2 = Buffer.alloc(4096, 2);
  const etag1 = await s3.putObject(BUCKET, key, v1);
  t.ok((await c.getRange(key, 0, 4096, etag1)).equals(v1));
  const etag2 = await s3.putObject(BUCKET, key, v2);
  t.not(etag2, etag1);
  const err = await c.getRange(key, 0, 4096, etag1).then(() => undefined, (e: unknown) => e);
  t.type(err, ObjectChangedError);
  t.match((err as ObjectChangedError).message, /s3:\/\/sluice-test\/mutable\/file\.bin changed/);
  t.equal((err as ObjectChangedError).actualEtag, etag2);
  await t.rejects(c.getRange(key, 0, 1, etag1), ObjectChangedError, 'bytes=0-0 too');
  await t.rejects((async () => { for await (const _ of c.getStream(key, etag1)) { /* drain */ } })(), ObjectChangedError, 'getStream (HEAD check)');
  await t.rejects((async () => { for await (const _ of c.getStream(key, etag1, { size: 4096 })) { /* drain */ } })(), ObjectChangedError, 'getStream (GET check)');
  t.ok((await c.getRange(key, 0, 4096, etag2)).equals(v2), 'the new version under its own ETag');
});

t.test('head and get of a missing key give NoSuchKeyError', async (t) => {
  const c = client();
  await t.rejects(c.head('data/missing'), NoSuchKeyError);
  const err = await c.getRange('data/missing', 0, 1, '"x"').catch((e: unknown) => e);
  t.type(err, NoSuchKeyError);
  t.match((err as Error).message, 's3://sluice-test/data/missing');
});

t.test('a missing bucket gives NoSuchBucketError naming it', async (t) => {
  const c = client({ bucket: 'no-such-bucket' });
  const err = await collect(c.list('')).catch((e: unknown) => e);
  t.type(err, NoSuchBucketError);
  t.match((err as NoSuchBucketError).oneLine(), /bucket "no-such-bucket" does not exist\. Check the bucket name/);
  await t.rejects(c.getRange('k', 0, 1, '"e"'), NoSuchBucketError);
});

t.test('wrong credentials give InvalidCredentialsError', async (t) => {
  const c = client({ credentials: { accessKeyId: 'WRONG', secretAccessKey: 'WRONG' } });
  const err = await collect(c.list('data/')).catch((e: unknown) => e);
  t.type(err, InvalidCredentialsError);
  t.match((err as InvalidCredentialsError).oneLine(), /S3 rejected the credentials for s3:\/\/sluice-test\/.*InvalidAccessKeyId.*Check AWS_ACCESS_KEY_ID/);
  await t.rejects(c.getRange(objects[0]!.key, 0, 1, objects[0]!.etag), InvalidCredentialsError);
  // (s3rver checks only the access key id, not SigV4 signatures: test/s3/signing.ts covers those.)
});

t.test('no credentials anywhere gives MissingCredentialsError', async (t) => {
  const saved = { ...process.env };
  t.teardown(() => { process.env = saved; });
  for (const k of Object.keys(process.env)) if (k.startsWith('AWS_')) delete process.env[k];
  Object.assign(process.env, {
    AWS_EC2_METADATA_DISABLED: 'true', // never reach for 169.254.169.254 from a test
    AWS_SHARED_CREDENTIALS_FILE: '/nonexistent/credentials', AWS_CONFIG_FILE: '/nonexistent/config',
  });
  const c = createObjectClient({ bucket: BUCKET, endpoint: s3.endpoint, region: 'us-east-1', pathStyle: true, maxAttempts: 2 });
  clients.push(c);
  const err = await collect(c.list('data/')).catch((e: unknown) => e);
  t.type(err, MissingCredentialsError);
  t.match((err as MissingCredentialsError).oneLine(), /no AWS credentials found\. Set AWS_ACCESS_KEY_ID/);
  await t.rejects(c.getRange(objects[0]!.key, 0, 1, objects[0]!.etag), MissingCredentialsError);
});

t.test('an unreachable endpoint gives EndpointUnreachableError naming it', async (t) => {
  const port = await new Promise<number>((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(p));
    });
  });
  const endpoint = `http://127.0.0.1:${port}`;
  const c = client({ endpoint, maxAttempts: 2 });
  const err = await collect(c.list('')).catch((e: unknown) => e);
  t.type(err, EndpointUnreachableError);
  t.match((err as Error).message, `cannot reach S3 endpoint ${endpoint}`);
  await t.rejects(c.getRange('k', 0, 1, '"e"'), EndpointUnreachableError);
  await t.rejects(c.head('k'), EndpointUnreachableError);
});

t.test('options are checked at construction', async (t) => {
  t.throws(() => new S3ObjectClient({ bucket: '' }), InvalidArgumentError);
  t.throws(() => new S3ObjectClient({ bucket: 'b', maxConnections: 0 }), InvalidArgumentError);
  t.throws(() => new S3ObjectClient({ bucket: 'b', maxAttempts: 0 }), InvalidArgumentError);
  t.throws(() => new S3ObjectClient({ bucket: 'b', endpoint: 'ftp://x' }), InvalidArgumentError);
  t.throws(() => new S3ObjectClient({ bucket: 'b', endpoint: 'not a url' }), InvalidArgumentError);
});

t.test('requests are recorded in the metrics', async (t) => {
  const c = client();
  const o = objects[0]!;
  await c.head(o.key);
  await c.getRange(o.key, 0, o.size, o.etag);
  const values = (await s3Requests.get()).values;
  const count = (op: string, status: string) => values.filter((v) => v.labels.operation === op && v.labels.status === status).reduce((a, v) => a + v.value, 0);
  t.ok(count('get', '206') > 0, 'get 206');
  t.ok(count('head', '200') > 0, 'head 200');
  t.ok(count('list', '200') > 0, 'list 200');
  const text = await registry.metrics();
  for (const name of ['sluice_s3_received_bytes_total', 'sluice_s3_first_byte_seconds_bucket', 'sluice_s3_request_seconds_bucket', 'sluice_s3_inflight_requests', 'sluice_inflight_bytes']) {
    t.match(text, name);
  }
  t.match(text, /sluice_inflight_bytes 0\n/, 'no bytes left in flight');
});

t.test('GetBucketVersioning is counted as operation "versioning", not "list"', async (t) => {
  const c = client() as S3ObjectClient;
  const count = async (op: string) => (await s3Requests.get()).values.filter((v) => v.labels.operation === op).reduce((a, v) => a + v.value, 0);
  const list0 = await count('list');
  const ver0 = await count('versioning');
  await c.versioning(); // s3rver answers with a listing (no Status): unversioned
  t.equal(await count('versioning') - ver0, 1, 'one versioning request');
  t.equal(await count('list') - list0, 0, 'no list request counted for it');
  t.match(await registry.metrics(), /sluice_s3_requests_total\{operation="versioning",status="200"\}/);
});
