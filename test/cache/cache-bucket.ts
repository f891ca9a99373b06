/**
 * The cache bucket (--cache-bucket, issue 48) against the local S3 server: two FastFile mounts
 * ("nodes") with separate disk tiers share one cache bucket; the second sends at most 5% of the
 * first's GETs to the source. A cache object corrupted in place, one holding another block
 * (foreign) and one that is garbage are detected and the bytes come from the source, then the
 * object is written right again. With a fake cache that never finishes a PUT, a read still
 * settles and the queued bytes stay within the write budget. Every byte read is compared with
 * its source.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import type { Test } from '../helpers/tap.js';

import { CACHE_BLOCK, CacheBucketClient, decodeCacheObject, withCacheBucket, type CacheStore } from '../../src/cache/cache-bucket.js';
import { mountFastFile } from '../../src/fuse/fastfile.js';
import { seedDataset, sourceBytes, type SeededObject } from '../../src/local/dataset.js';
import { startLocalS3, type LocalS3 } from '../../src/local/s3-server.js';
import { setLogLevel } from '../../src/log.js';
import { S3ObjectClient } from '../../src/s3/s3-client.js';
import { FakeObjectClient } from '../helpers/fake-client.js';
import { metricSum } from '../helpers/metrics.js';
import { tempMountpoint } from '../helpers/fuse.js';
import { testMountOptions, useLocalCredentials } from '../helpers/mount-options.js';
import '../helpers/exit-watch.js';
import { childRead } from '../helpers/child-read.js';

setLogLevel('error');

const MiB = 1024 * 1024;
const SOURCE = 'source';
const CACHE = 'shared-cache';
const PREFIX = 'ds/';
const CACHE_URI = `s3://${CACHE}/blocks/`;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const sourceGets = () => metricSum('sluice_s3_requests_total', { operation: 'get' });
const misses = (reason: string) => metricSum('sluice_cache_bucket_misses_total', { reason });

let s3: LocalS3;
let objects: SeededObject[];
let cacheStore: S3ObjectClient;

t.before(async () => {
  s3 = await startLocalS3();
  useLocalCredentials(s3.credentials);
  await s3.createBucket(SOURCE);
  await s3.createBucket(CACHE);
  objects = await seedDataset(s3, SOURCE, PREFIX, { smallFiles: { count: 24, size: 30_000, folders: 3 }, largeFiles: { count: 2, size: 3 * MiB + 4321 }, seed: 48 });
  cacheStore = new S3ObjectClient({ bucket: CACHE, endpoint: s3.endpoint, region: 'us-east-1', pathStyle: true, maxAttempts: 2 });
});
t.teardown(async () => {
  await cacheStore?.close();
  await s3?.stop();
});

async function tempDir(t: Test, name: string): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), `sluice-${name}-`));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** One node: mounts with its own disk tier and the shared cache bucket, reads every file through the kernel, checks sha256, unmounts. Source GETs made. */
async function node(t: Test, name: string): Promise<number> {
  const cacheDir = await tempDir(t, `cb-${name}`);
  const mnt = await tempMountpoint(t, `cb-${name}`);
  const m = await mountFastFile({ uri: `s3://${SOURCE}/${PREFIX}`, mountpoint: mnt, options: testMountOptions(s3.endpoint, { cacheDir, cacheBucket: CACHE_URI }) });
  const before = await sourceGets();
  try {
    await m.listed;
    const files = objects.map((o) => path.join(mnt, o.key.slice(PREFIX.length)));
    const got = await childRead(files, 60_000);
    const bad = objects.filter((o, i) => got[files[i]!] !== o.sha256).map((o) => o.key);
    t.same(bad, [], `node ${name}: every file's sha256 matches (${objects.length} files)`);
  } finally {
    await m.unmount(); // closes the client: the queued PUTs are flushed
  }
  return (await sourceGets()) - before;
}

/** The cache bucket client of one node without a mount (for reading single blocks). */
function direct(): CacheBucketClient {
  const source = new S3ObjectClient({ bucket: SOURCE, endpoint: s3.endpoint, region: 'us-east-1', pathStyle: true });
  return withCacheBucket(source, { ...testMountOptions(s3.endpoint), cacheBucket: CACHE_URI }, PREFIX) as CacheBucketClient;
}

const large = () => objects.find((o) => o.size > CACHE_BLOCK)!;

t.test('two nodes with separate disk tiers share one cache bucket: the second reads <= 5% of the first\'s GETs from the source', async (t) => {
  const written0 = await metricSum('sluice_cache_bucket_writes_total', { result: 'written' });
  const g1 = await node(t, 'a');
  const written = (await metricSum('sluice_cache_bucket_writes_total', { result: 'written' })) - written0;
  t.ok(g1 > 0, `node a read from the source (${g1} GETs)`);
  t.ok(written >= objects.length, `node a PUT its blocks to the cache bucket (${written})`);
  const hits0 = await metricSum('sluice_cache_bucket_hits_total');
  const g2 = await node(t, 'b');
  const hits = (await metricSum('sluice_cache_bucket_hits_total')) - hits0;
  t.ok(g2 <= 0.05 * g1, `node b sent ${g2} GETs to the source, node a ${g1} (at most 5%)`);
  t.ok(hits >= objects.length, `node b read ${hits} blocks from the cache bucket`);
});

/** Rewrites the cache object of block `index` of `o` with `edit(body)`; returns its key. */
async function tamper(c: CacheBucketClient, o: SeededObject, index: number, edit: (body: Buffer) => Buffer): Promise<string> {
  const { objectKey } = c.blockKey(o.key, o.etag, index);
  const body = await cacheStore.getObject(objectKey);
  if (!body) throw new Error(`no cache object ${objectKey}: the first test did not fill the cache`);
  await s3.putObject(CACHE, objectKey, edit(Buffer.from(body)));
  return objectKey;
}

/** Reads block `index` of `o` through a fresh client; checks it byte for byte, the miss reason, the source GET, and that the object was written right again. */
async function readsSourceInstead(t: Test, o: SeededObject, index: number, reason: string, objectKey: string): Promise<void> {
  const c = direct();
  try {
    const [m0, g0] = [await misses(reason), await sourceGets()];
    const start = index * CACHE_BLOCK;
    const end = Math.min(o.size, start + CACHE_BLOCK);
    const got = await c.getRange(o.key, start, end, o.etag);
    t.equal(sha(got), sha(sourceBytes(o, start, end)), 'the bytes are the source\'s');
    t.equal((await misses(reason)) - m0, 1, `counted as ${reason}`);
    t.equal((await sourceGets()) - g0, 1, 'the block was read from the source');
    await c.flush();
    const again = await cacheStore.getObject(objectKey);
    const { identity } = c.blockKey(o.key, o.etag, index);
    t.ok(again && Buffer.isBuffer(decodeCacheObject(again, identity, end - start)), 'the cache object was written right again');
  } finally {
    await c.close();
  }
}

t.test('a cache object corrupted in place is detected and the block read from the source', async (t) => {
  const o = large();
  const c = direct();
  const key = await tamper(c, o, 1, (b) => { b[b.length - 100]! ^= 0x40; return b; });
  await c.close();
  await readsSourceInstead(t, o, 1, 'corrupt', key);
});

t.test('a foreign cache object (another block\'s, valid) is detected and the block read from the source', async (t) => {
  const o = large();
  const c = direct();
  const other = (await cacheStore.getObject(c.blockKey(o.key, o.etag, 0).objectKey))!;
  const key = await tamper(c, o, 2, () => other);
  await c.close();
  await readsSourceInstead(t, o, 2, 'foreign', key);
});

t.test('garbage and a truncated cache object are corrupt, never bytes', async (t) => {
  const o = large();
  const c = direct();
  const key = await tamper(c, o, 0, () => Buffer.from('not a cache object'));
  await c.close();
  await readsSourceInstead(t, o, 0, 'corrupt', key);
  const c2 = direct();
  const key3 = await tamper(c2, o, 3, (b) => b.subarray(0, b.length - 1));
  await c2.close();
  await readsSourceInstead(t, o, 3, 'corrupt', key3);
});

t.test('a read never waits on a PUT, and queued bytes stay within the write budget (a fake cache that holds every PUT)', async (t) => {
  const inner = new FakeObjectClient();
  const body = Buffer.alloc(80 * MiB, 7);
  const etag = inner.put('big', body);
  const held: (() => void)[] = [];
  let answer = false; // PUTs hang until the reads are done, then succeed at once
  const store: CacheStore = {
    bucket: 'fake-cache',
    getObject: async () => undefined,
    putObject: () => new Promise<void>((resolve) => { if (answer) resolve(); else held.push(resolve); }),
    close: async () => undefined,
  };
  const c = new CacheBucketClient(inner, store, '', 'test-ns');
  const d0 = await metricSum('sluice_cache_bucket_writes_total', { result: 'dropped' });
  for (let at = 0; at < body.length; at += 8 * MiB) {
    const got = await c.getRange('big', at, at + 8 * MiB, etag);
    if (!got.equals(body.subarray(at, at + 8 * MiB))) t.fail(`bytes at ${at}`);
  }
  const pending = await metricSum('sluice_cache_bucket_pending_bytes');
  t.ok(pending > 0 && pending <= 64 * MiB, `queued bytes ${pending} within the 64 MiB budget`);
  t.ok((await metricSum('sluice_cache_bucket_writes_total', { result: 'dropped' })) - d0 > 0, 'blocks past the budget were dropped');
  t.equal(held.length, 8, 'at most 8 PUTs in flight');
  answer = true;
  for (const r of held.splice(0)) r();
  const closing = c.close();
  await closing;
  t.equal(await metricSum('sluice_cache_bucket_pending_bytes'), 0, 'nothing pending after close');
});
