/**
 * Pipe mode end to end: the real S3 client against the real local S3 server
 * (s3rver in a child process), FIFOs read by child processes. Compared with
 * sha256 of the source bytes.
 */
import t from 'tap';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { createGzip, gzipSync } from 'node:zlib';
import { spawn } from 'node:child_process';
import { shuffled } from '../../src/channels/shuffle.js';
import { seedDataset, sourceBytes, type SeededObject } from '../../src/local/dataset.js';
import { startLocalS3, type LocalS3 } from '../../src/local/s3-server.js';
import { setLogLevel } from '../../src/log.js';
import { startPipeChannel, type PipeChannel, type PipeChannelOptions, type PipeItem } from '../../src/pipe/pipe-channel.js';
import { decodeRecordIO } from '../../src/pipe/recordio.js';
import type { ObjectClient, ObjectInfo } from '../../src/s3/object-client.js';
import { createObjectClient } from '../../src/s3/s3-client.js';
import { readFifo, tempDir, waitFor } from '../helpers/pipe.js';

setLogLevel('warn');

const BUCKET = 'pipe-test';
/** Odd size over several 256 KiB parts, so ranged GETs and their seams are exercised. */
const LARGE = 2 * 1024 * 1024 + 13;

let s3: LocalS3;
let client: ObjectClient;
let seeded: SeededObject[];
let listed: ObjectInfo[];

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

t.before(async () => {
  s3 = await startLocalS3();
  await s3.createBucket(BUCKET);
  seeded = await seedDataset(s3, BUCKET, 'train/', {
    smallFiles: { count: 40, size: 1001, folders: 4 }, largeFiles: { count: 2, size: LARGE }, seed: 9,
  });
  client = createObjectClient({
    bucket: BUCKET, endpoint: s3.endpoint, region: 'us-east-1', pathStyle: true, credentials: s3.credentials, maxAttempts: 3,
  });
  listed = [];
  for await (const o of client.list('train/')) listed.push(o);
  listed.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
});
t.teardown(async () => {
  await client?.close();
  await s3?.stop();
});

const itemsOf = (infos: ObjectInfo[]): PipeItem[] => infos.map((info) => ({ kind: 'object', info }));
const sourceOf = (key: string): Buffer => sourceBytes(seeded.find((o) => o.key === key)!);

async function start(t: { teardown(fn: () => unknown): void }, o: Partial<PipeChannelOptions> & Pick<PipeChannelOptions, 'itemsForEpoch'>): Promise<PipeChannel> {
  const ch = await startPipeChannel({
    client, channel: 'train', dataDir: await tempDir(t), recordWrapper: 'None', compression: 'None', partSize: 256 * 1024, ...o,
  });
  t.teardown(() => ch.stop());
  return ch;
}

async function readEpoch(ch: PipeChannel, epoch: number, limit?: number): Promise<Buffer> {
  await waitFor(() => existsSync(ch.fifoPath(epoch)), 60_000, `FIFO of epoch ${epoch}`);
  return readFifo(ch.fifoPath(epoch), limit === undefined ? {} : { limit });
}

t.test('the listing is what was seeded', async (t) => {
  t.equal(listed.length, seeded.length);
});

t.test('epochs 0..2 in key order: pipe bytes are the objects concatenated (sha256)', async (t) => {
  const ch = await start(t, { epochs: 3, itemsForEpoch: () => itemsOf(listed) });
  const expected = sha(Buffer.concat(listed.map((o) => sourceOf(o.key))));
  for (let e = 0; e < 3; e++) t.equal(sha(await readEpoch(ch, e)), expected, `epoch ${e}`);
  await ch.done;
});

t.test('epochs 0..2 shuffled with a seed: each in its order; same seed same order; epochs differ', async (t) => {
  const order = (e: number) => shuffled(listed, 7, e);
  t.same(order(1).map((o) => o.key), shuffled(listed, 7, 1).map((o) => o.key), 'same seed and epoch: same order');
  const ch = await start(t, { epochs: 3, itemsForEpoch: (e) => itemsOf(order(e)) });
  const got: string[] = [];
  for (let e = 0; e < 3; e++) {
    const bytes = await readEpoch(ch, e);
    got.push(sha(bytes));
    t.equal(got[e], sha(Buffer.concat(order(e).map((o) => sourceOf(o.key)))), `epoch ${e} in its shuffled order`);
  }
  t.not(got[0], got[1], 'epoch 0 and 1 differ');
  await ch.done;
});

t.test('RecordIO: the pipe parses back to the objects', async (t) => {
  const some = [...listed.slice(0, 5), ...listed.filter((o) => o.size === LARGE)];
  const ch = await start(t, { epochs: 1, recordWrapper: 'RecordIO', itemsForEpoch: () => itemsOf(some) });
  const records = decodeRecordIO(await readEpoch(ch, 0));
  t.same(records.map(sha), some.map((o) => sha(sourceOf(o.key))));
  await ch.done;
});

t.test('Gzip objects are decompressed; RecordIO frames the decompressed bytes', async (t) => {
  const plain = [sourceOf(listed[0]!.key), sourceOf(listed.find((o) => o.size === LARGE)!.key), Buffer.alloc(0)];
  const infos: ObjectInfo[] = [];
  for (const [i, body] of plain.entries()) {
    const key = `gz/obj-${i}.gz`;
    await s3.putObject(BUCKET, key, i === 2 ? body : gzipSync(body));
    infos.push(await client.head(key));
  }
  const raw = await start(t, { epochs: 1, compression: 'Gzip', itemsForEpoch: () => itemsOf(infos) });
  t.equal(sha(await readEpoch(raw, 0)), sha(Buffer.concat(plain)));
  await raw.done;
  const framed = await start(t, { epochs: 1, compression: 'Gzip', recordWrapper: 'RecordIO', itemsForEpoch: () => itemsOf(infos) });
  t.same(decodeRecordIO(await readEpoch(framed, 0)).map(sha), plain.map(sha));
  await framed.done;
});

t.test('a reader that closes early gets the next epoch whole; stop() leaves no FIFO', async (t) => {
  const dataDir = await tempDir(t);
  const ch = await start(t, { dataDir, itemsForEpoch: () => itemsOf(listed) });
  t.equal((await readEpoch(ch, 0, 5000)).length, 5000);
  t.equal(sha(await readEpoch(ch, 1)), sha(Buffer.concat(listed.map((o) => sourceOf(o.key)))));
  await waitFor(() => ch.currentEpoch === 2, 30_000, 'epoch 2');
  await ch.stop();
  await ch.done;
  t.same(await readdir(dataDir), []);
});

/**
 * A RecordIO reader written from MXNet's format description, independent of src/:
 * each frame is uint32 LE magic 0xced7230a, uint32 LE lrecord = cflag << 29 | length,
 * `length` data bytes, zero padding to a multiple of 4. It streams (never holds a
 * record) and prints, per frame, its cflag, length and the sha256 of its data.
 */
const MXNET_READER = `
const fs = require('fs'), crypto = require('crypto');
const out = [];
let header = Buffer.alloc(0), left = 0, pad = 0, hash, cur;
fs.createReadStream(process.argv[1], { highWaterMark: 1 << 20 }).on('data', (chunk) => {
  while (chunk.length > 0) {
    if (left > 0) {
      const n = Math.min(left, chunk.length);
      hash.update(chunk.subarray(0, n)); chunk = chunk.subarray(n); left -= n;
      if (left === 0) { cur.sha256 = hash.digest('hex'); out.push(cur); }
      continue;
    }
    if (pad > 0) { const n = Math.min(pad, chunk.length); chunk = chunk.subarray(n); pad -= n; continue; }
    const need = 8 - header.length;
    header = Buffer.concat([header, chunk.subarray(0, need)]); chunk = chunk.subarray(need);
    if (header.length < 8) continue;
    if (header.readUInt32LE(0) !== 0xced7230a) { console.error('bad magic'); process.exit(3); }
    const lrecord = header.readUInt32LE(4);
    cur = { cflag: lrecord >>> 29, length: lrecord & ((1 << 29) - 1) };
    header = Buffer.alloc(0);
    left = cur.length; pad = (4 - (cur.length % 4)) % 4; hash = crypto.createHash('sha256');
    if (left === 0) { cur.sha256 = hash.digest('hex'); out.push(cur); }
  }
}).on('end', () => {
  if (left > 0 || header.length > 0) { console.error('truncated'); process.exit(4); }
  process.stdout.write(JSON.stringify(out));
});
`;

t.test('Gzip + RecordIO: a 300 MB (decompressed) object is one record, read back by an MXNet-format reader, memory bounded', async (t) => {
  // Compressible, not constant: 4 KiB of random bytes repeated, each 64 KiB block rotated
  // by its index and stamped with it. gzip level 1 makes ~300 MB into a few MB quickly.
  const SIZE = 300 * 1000 * 1000;
  const BLOCK = 64 * 1024;
  const base = Buffer.alloc(4096);
  for (let i = 0; i < base.length; i++) base[i] = (Math.imul(i + 1, 2654435761) >>> 13) & 0xff;
  const plainSha = createHash('sha256');
  const gz = createGzip({ level: 1 });
  const compressed: Buffer[] = [];
  gz.on('data', (c: Buffer) => compressed.push(c));
  const gzDone = new Promise((resolve, reject) => { gz.on('end', resolve); gz.on('error', reject); });
  for (let at = 0, i = 0; at < SIZE; at += BLOCK, i++) {
    const n = Math.min(BLOCK, SIZE - at);
    const block = Buffer.allocUnsafe(n);
    // The pattern rotated by r: every byte written (allocUnsafe memory is never left in the data).
    const r = (i * 13) % 4096;
    for (let o = 0; o < n; o += 4096) { base.copy(block, o, r); base.copy(block, o + 4096 - r, 0, r); }
    block.writeUInt32LE(i, 0);
    plainSha.update(block);
    if (!gz.write(block)) await new Promise((r) => gz.once('drain', r));
  }
  gz.end();
  await gzDone;
  const body = Buffer.concat(compressed);
  t.ok(body.length < 50_000_000, `compressed to ${body.length} bytes`);
  const info = { ...(await (async () => { await s3.putObject(BUCKET, 'big/huge.gz', body); return client.head('big/huge.gz'); })()) };
  const spillDir = await tempDir(t);
  const rss0 = process.memoryUsage().rss;
  let peak = rss0;
  let peakAb = 0;
  const sampler = setInterval(() => { const m = process.memoryUsage(); peak = Math.max(peak, m.rss); peakAb = Math.max(peakAb, m.arrayBuffers); }, 50);
  t.teardown(() => clearInterval(sampler));
  const ch = await start(t, {
    epochs: 1, compression: 'Gzip', recordWrapper: 'RecordIO', maxInflight: 8 * 1024 * 1024, partSize: 1024 * 1024, spillDir,
    itemsForEpoch: () => [{ kind: 'object', info }],
  });
  const reader = spawn(process.execPath, ['-e', MXNET_READER, ch.fifoPath(0)], { stdio: ['ignore', 'pipe', 'pipe'] });
  const timer = setTimeout(() => reader.kill('SIGKILL'), 300_000); // a bound, not an assertion on speed
  let stdout = '';
  let stderr = '';
  reader.stdout.on('data', (b: Buffer) => { stdout += b; });
  reader.stderr.on('data', (b: Buffer) => { stderr += b; });
  const code = await new Promise((resolve) => reader.once('exit', resolve));
  clearTimeout(timer);
  clearInterval(sampler);
  await ch.done;
  t.equal(code, 0, stderr);
  const frames = JSON.parse(stdout) as { cflag: number; length: number; sha256: string }[];
  t.same(frames, [{ cflag: 0, length: SIZE, sha256: plainSha.digest('hex') }], 'one cflag-0 record of 300 MB, sha256 equal to the source');
  t.same(await readdir(spillDir), [], 'no spill file left');
  const grew = peak - rss0;
  // Buffers (arrayBuffers) are where a held record would be: 300 MB at least. RSS also
  // counts the heap and allocator slack, so it is reported, not asserted.
  t.comment(`peak Buffer memory ${(peakAb / 1e6).toFixed(0)} MB, RSS grew by ${(grew / 1e6).toFixed(0)} MB while streaming the 300 MB record`);
  t.ok(peakAb < SIZE, `memory bounded: at most ${(peakAb / 1e6).toFixed(0)} MB of Buffers at once (garbage included), less than the record: it is never held whole`);
});
