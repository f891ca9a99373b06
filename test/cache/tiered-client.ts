/**
 * TieredClient.getRange settles only once every writer into the caller's buffer has stopped
 * (issue 43, defect 1).
 *
 * A range of object A whose middle block is on disk becomes two GETs (block 0, block 2). Block
 * 0 answers 412 (A was overwritten); block 2 answers with A's old bytes after a pause. Before
 * the fix getRange rejected at the 412 while block 2's GET still held the caller's buffer: the
 * block cache gave that slab back to its pool, object M's blocks were fetched into it, and the
 * late GET then wrote A's block 2 over M's. A real HTTP server on 127.0.0.1 and the real S3
 * client (its own socket reads land bytes in the buffer) make the late write real.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';

import { BlockCache } from '../../src/cache/block-cache.js';
import { DiskCache } from '../../src/cache/disk-cache.js';
import { DISK_BLOCK_SIZE } from '../../src/cache/tier-layout.js';
import { TieredClient } from '../../src/cache/tiered-client.js';
import { ObjectChangedError } from '../../src/errors.js';
import { setLogLevel } from '../../src/log.js';
import { createObjectClient } from '../../src/s3/s3-client.js';
import type { ObjectClient } from '../../src/s3/object-client.js';

setLogLevel('error');

const B = DISK_BLOCK_SIZE;
const BUCKET = 'bkt';
/** Bytes of object `seed`: distinct per object and per position. */
const bytesOf = (seed: number, n: number) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 31 + seed * 97 + (i >> 10)) & 0xff));
/** Two objects overwritten since they were listed, one per test (a run that succeeds leaves its blocks on disk). */
const A1 = { key: 'a1.bin', etag: '"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1"', body: bytesOf(1, 3 * B) };
const A2 = { key: 'a2.bin', etag: '"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa2"', body: bytesOf(3, 3 * B) };
const CHANGED = [A1, A2];
const M = { key: 'm.bin', etag: '"mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm"', body: bytesOf(2, 3 * B) };
/** How long block 2 of A waits before it answers: long enough for the 412 and M's GET to come first. */
const SLOW_MS = 300;

/** Settles once the server has answered block 2 of A (or its GET was given up): armed per test by expectSlow(). */
let slowDone: Promise<void> = Promise.resolve();
let slowSettled: () => void = () => undefined;
function expectSlow(): void {
  slowDone = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('block 2 was never asked for')), 10 * SLOW_MS);
    slowSettled = () => { clearTimeout(timer); resolve(); };
  });
}
const server = http.createServer((req, res) => {
  const key = decodeURIComponent((req.url ?? '').split('?')[0]!.replace(`/${BUCKET}/`, ''));
  const obj = [...CHANGED, M].find((o) => o.key === key);
  const m = /^bytes=(\d+)-(\d+)$/.exec(String(req.headers.range));
  if (!obj || !m) { res.writeHead(404).end(); return; }
  const [a, b] = [Number(m[1]), Number(m[2])];
  const send = () => {
    res.writeHead(206, { etag: obj.etag, 'content-range': `bytes ${a}-${b}/${obj.body.length}`, 'content-length': b - a + 1 });
    res.end(obj.body.subarray(a, b + 1));
  };
  if (obj !== M && a === 0) {
    // A was overwritten: If-Match no longer matches.
    res.writeHead(412, { 'content-type': 'application/xml' });
    res.end('<?xml version="1.0" encoding="UTF-8"?><Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did not hold</Message></Error>');
  } else if (obj !== M && a >= 2 * B) {
    // An earlier GET of the old version, still streaming.
    const timer = setTimeout(() => { if (!res.destroyed) send(); }, SLOW_MS);
    res.on('close', () => { clearTimeout(timer); slowSettled(); });
  } else {
    send();
  }
});

let dir: string;
let tier: DiskCache;
let inner: ObjectClient;
let client: TieredClient;
const NS = 'test\0bkt';

t.before(async () => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-tiered-'));
  tier = await DiskCache.open({ dir, maxBytes: 64 * 1024 * 1024, writeBytesPerSec: 1024 * 1024 * 1024 });
  inner = createObjectClient({ bucket: BUCKET, endpoint, region: 'us-east-1', pathStyle: true, credentials: { accessKeyId: 'x', secretAccessKey: 'y' }, maxAttempts: 1, requestTimeoutMs: 5_000 });
  client = new TieredClient(inner, tier, NS);
  // Block 1 of each changed object is on disk.
  for (const A of CHANGED) tier.writeRun({ ns: NS, key: A.key, etag: A.etag, index: 1 }, Buffer.from(A.body.subarray(B, 2 * B)), { owned: true });
  await tier.flush();
});

t.teardown(async () => {
  await client?.close();
  await tier?.close();
  await new Promise<void>((r) => server.close(() => r()));
  server.closeAllConnections();
  await rm(dir, { recursive: true, force: true });
});

t.test('issue 43: a failed run of a tiered getRange leaves no GET writing into the slab the cache reuses', async (t) => {
  const A = A1;
  expectSlow();
  const cache = new BlockCache({ capacityBytes: 32 * B, blockSize: B, poolBytes: 32 * B });
  t.teardown(() => cache.close());
  // A's three blocks: one GET of the tier, into a pooled slab of 3 blocks.
  const aBlocks = cache.fill(A.key, A.etag, 0, 3, (into) => client.getRange(A.key, 0, 3 * B, A.etag, into ? { into } : {}), undefined, { bytes: 3 * B });
  await t.rejects(aBlocks[0]!, ObjectChangedError);
  // The slab is back in the pool: M's three blocks land in it (same length).
  const mBlocks = cache.fill(M.key, M.etag, 0, 3, (into) => inner.getRange(M.key, 0, 3 * B, M.etag, into ? { into } : {}), undefined, { bytes: 3 * B });
  const got = await Promise.all(mBlocks);
  t.equal(Buffer.compare(Buffer.concat(got), M.body), 0, 'M is read right');
  // Block 2 of A was answered (or its GET given up): whatever it wrote has landed by now.
  await slowDone;
  await new Promise((r) => setTimeout(r, 100));
  for (let i = 0; i < 3; i++) {
    const block = cache.get({ key: M.key, etag: M.etag, index: i });
    t.ok(block, `block ${i} of M is resident`);
    t.equal(block && Buffer.compare(block, M.body.subarray(i * B, (i + 1) * B)), 0, `block ${i} of M holds M's bytes, byte for byte`);
  }
});

t.test('issue 43: a tiered getRange into a caller buffer settles after every GET into it stopped', async (t) => {
  const A = A2;
  expectSlow();
  const into = Buffer.alloc(3 * B);
  await t.rejects(client.getRange(A.key, 0, 3 * B, A.etag, { into }), ObjectChangedError);
  // The caller owns `into` again: it writes its own bytes, which must stay.
  M.body.copy(into);
  await slowDone;
  await new Promise((r) => setTimeout(r, 100));
  t.equal(Buffer.compare(into, M.body), 0, 'nothing wrote into the buffer after getRange rejected');
});
