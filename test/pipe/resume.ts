/**
 * Pipe resume (issue 48): a channel started at epoch E, object N (record R) delivers the
 * uninterrupted run's epoch E from there on, byte for byte; the progress file is consistent
 * with what went into the FIFO; bad resume points fail at once with one line.
 * Real S3 client against the local S3 server (s3rver), real FIFOs read by child processes.
 */
import t from 'tap';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { open, readFile } from 'node:fs/promises';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { shuffled } from '../../src/channels/shuffle.js';
import { InvalidArgumentError, RecordIOError } from '../../src/errors.js';
import { generateBytes } from '../../src/local/dataset.js';
import { startLocalS3, type LocalS3 } from '../../src/local/s3-server.js';
import { setLogLevel } from '../../src/log.js';
import { startPipeChannel, type PipeChannel, type PipeChannelOptions, type PipeItem } from '../../src/pipe/pipe-channel.js';
import { encodeHeader, framedLength, paddingFor, skipRecords } from '../../src/pipe/recordio.js';
import { DeliveryTracker, parseResume, progressFilePath, resumeEnvName, type PipeProgress } from '../../src/pipe/resume.js';
import type { ObjectClient, ObjectInfo } from '../../src/s3/object-client.js';
import { createObjectClient } from '../../src/s3/s3-client.js';
import { readFifo, tempDir, waitFor } from '../helpers/pipe.js';

setLogLevel('silent');

const BUCKET = 'resume-test';
const SEED = 7;
/** Sizes: odd, some over the 64 KiB part size used here, one empty. */
const SIZES = [1001, 70_000, 5, 0, 140_003, 333, 65_536, 9_999, 200_001, 17, 4096, 123_457];

let s3: LocalS3;
let client: ObjectClient;
const bodies = new Map<string, Buffer>();
let plain: ObjectInfo[] = [];
let gz: ObjectInfo[] = [];
let rec: ObjectInfo[] = [];
/** More bytes than a pipe buffer holds (1 MiB with the addon's F_SETPIPE_SZ): a reader that stops leaves the writer mid-epoch. */
let big: ObjectInfo[] = [];
const BIG_SIZE = 300_007;
/** The records inside each RecordIO-file object (rec/), by key. */
const recRecords = new Map<string, Buffer[]>();

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

/** One RecordIO frame (cflag 0), written here from the format, independent of the encoder under test. */
const frame = (data: Buffer): Buffer => Buffer.concat([encodeHeader(0, data.length), data, paddingFor(data.length)]);

async function put(key: string, body: Buffer): Promise<ObjectInfo> {
  await s3.putObject(BUCKET, key, body);
  bodies.set(key, body);
  return client.head(key);
}

t.before(async () => {
  s3 = await startLocalS3();
  await s3.createBucket(BUCKET);
  client = createObjectClient({ bucket: BUCKET, endpoint: s3.endpoint, region: 'us-east-1', pathStyle: true, credentials: s3.credentials, maxAttempts: 3 });
  for (const [i, size] of SIZES.entries()) {
    const key = `plain/obj-${String(i).padStart(2, '0')}`;
    plain.push(await put(key, generateBytes(key, size)));
  }
  for (const [i, size] of SIZES.slice(0, 6).entries()) {
    gz.push(await put(`gz/obj-${i}.gz`, gzipSync(generateBytes(`gz/${i}`, size))));
  }
  for (let i = 0; i < 8; i++) big.push(await put(`big/obj-${i}`, generateBytes(`big/${i}`, BIG_SIZE)));
  // Objects that are RecordIO files themselves (as im2rec writes them): 5..13 records each.
  for (let i = 0; i < 6; i++) {
    const key = `rec/part-${i}.rec`;
    const records = Array.from({ length: 5 + ((i * 5) % 9) }, (_, j) => generateBytes(`${key}#${j}`, 1 + ((i * 7919 + j * 104_729) % 30_000)));
    recRecords.set(key, records);
    rec.push(await put(key, Buffer.concat(records.map(frame))));
  }
});
t.teardown(async () => {
  await client?.close();
  await s3?.stop();
});

const order = (infos: ObjectInfo[], epoch: number): ObjectInfo[] => shuffled(infos, SEED, epoch);
const itemsFor = (infos: ObjectInfo[]) => (epoch: number): PipeItem[] => order(infos, epoch).map((info) => ({ kind: 'object', info }));

async function start(t: { teardown(fn: () => unknown): void }, o: Partial<PipeChannelOptions> & Pick<PipeChannelOptions, 'itemsForEpoch'>): Promise<PipeChannel> {
  const ch = await startPipeChannel({
    client, channel: 'train', dataDir: await tempDir(t), recordWrapper: 'None', compression: 'None', partSize: 64 * 1024, maxInflight: 512 * 1024, ...o,
  });
  t.teardown(() => ch.stop());
  return ch;
}

async function readEpoch(ch: PipeChannel, epoch: number): Promise<Buffer> {
  await waitFor(() => existsSync(ch.fifoPath(epoch)), 60_000, `FIFO of epoch ${epoch}`);
  return readFifo(ch.fifoPath(epoch));
}

/** Epochs 0..epochs-1 of an uninterrupted channel. */
async function uninterrupted(t: Parameters<typeof start>[0], o: Partial<PipeChannelOptions> & Pick<PipeChannelOptions, 'itemsForEpoch'>, epochs: number): Promise<Buffer[]> {
  const ch = await start(t, { ...o, epochs });
  const out: Buffer[] = [];
  for (let e = 0; e < epochs; e++) out.push(await readEpoch(ch, e));
  await ch.done;
  return out;
}

async function readProgress(dataDir: string): Promise<PipeProgress> {
  return JSON.parse(await readFile(progressFilePath(dataDir, 'train'), 'utf8')) as PipeProgress;
}

t.test('resume point syntax, environment name, one-line errors', async (t) => {
  t.same(parseResume('3:1200', 'x'), { epoch: 3, object: 1200, record: 0 });
  t.same(parseResume(' 0:2:5 ', 'x'), { epoch: 0, object: 2, record: 5 });
  for (const bad of ['', '3', '3:', '-1:0', '1:2:3:4', '1.5:0', 'a:b', '99999999999999999999:0', 3]) {
    t.throws(() => parseResume(bad, 'SLUICE_RESUME_TRAIN'), /^SLUICE_RESUME_TRAIN .* is not a resume point$/, `${JSON.stringify(bad)} refused`);
  }
  t.equal(resumeEnvName('train-v2.x'), 'SLUICE_RESUME_TRAIN_V2_X');
});

t.test('DeliveryTracker: an object counts once every byte up to its end was written', async (t) => {
  const d = new DeliveryTracker(5);
  d.onHanded(10); d.onObjectHanded(); // object 5 ends at 10
  d.onObjectHanded(); // object 6 is empty: ends at 10 too
  d.onHanded(7); d.onObjectHanded(); // object 7 ends at 17
  t.equal(d.delivered, 5);
  d.onWritten(9);
  t.equal(d.delivered, 5, 'one byte of object 5 not written');
  d.onWritten(1);
  t.equal(d.delivered, 7, 'objects 5 and 6 (empty) are in the pipe');
  d.onWritten(7);
  t.equal(d.delivered, 8);
});

t.test('skipRecords: leaves out the first records, split records counted once, headers across chunk seams', async (t) => {
  const a = Buffer.from('first'), b = Buffer.from('second record'), c = Buffer.from('third!');
  // b as a split record: cflag 1 then 3.
  const stream = Buffer.concat([frame(a), encodeHeader(1, 4), b.subarray(0, 4), encodeHeader(3, b.length - 4), b.subarray(4), paddingFor(b.length - 4), frame(c)]);
  for (const chunkSize of [1, 3, 7, stream.length]) {
    async function* chunks(): AsyncGenerator<Buffer> { for (let i = 0; i < stream.length; i += chunkSize) yield stream.subarray(i, i + chunkSize); }
    const out = async (n: number): Promise<Buffer> => { const got: Buffer[] = []; for await (const x of skipRecords(chunks(), n)) got.push(x); return Buffer.concat(got); };
    t.same(await out(0), stream, `chunks of ${chunkSize}: 0 skipped`);
    t.same(await out(2), frame(c), `chunks of ${chunkSize}: 2 skipped (the split one counted once)`);
    t.same(await out(3), Buffer.alloc(0), `chunks of ${chunkSize}: all 3 skipped`);
    await t.rejects(out(4), RecordIOError, `chunks of ${chunkSize}: 4 is past the end`);
  }
  async function* notRecordIO(): AsyncGenerator<Buffer> { yield Buffer.from('plain text, not RecordIO'); }
  await t.rejects((async () => { for await (const _ of skipRecords(notRecordIO(), 1)) { /* */ } })(), /bad RecordIO magic/);
});

for (const recordWrapper of ['None', 'RecordIO'] as const) {
  t.test(`${recordWrapper}: resumed at 1:5, the channel delivers the uninterrupted epoch 1 from object 5 on, byte for byte`, async (t) => {
    const full = await uninterrupted(t, { recordWrapper, itemsForEpoch: itemsFor(plain) }, 3);
    const dataDir = await tempDir(t);
    const ch = await start(t, { dataDir, recordWrapper, epochs: 3, itemsForEpoch: itemsFor(plain), resumeFrom: { epoch: 1, object: 5, record: 0 }, progressFile: progressFilePath(dataDir, 'train') });
    t.equal(ch.currentEpoch, 1);
    t.notOk(existsSync(ch.fifoPath(0)), 'epoch 0 is not served');
    const got = await readEpoch(ch, 1);
    const sizeOnWire = (o: ObjectInfo): number => (recordWrapper === 'RecordIO' ? framedLength(o.size) : o.size);
    const skipped = order(plain, 1).slice(0, 5).reduce((s, o) => s + sizeOnWire(o), 0);
    t.ok(got.length > 0 && skipped > 0);
    t.equal(got.length, full[1]!.length - skipped, 'exactly the first 5 objects are left out');
    t.equal(sha(got), sha(full[1]!.subarray(skipped)), 'the rest is the uninterrupted epoch 1, byte for byte');
    await waitFor(async () => (await readProgress(dataDir)).epochDone === true || ch.currentEpoch === 2, 10_000, 'epoch 1 reported done');
    t.equal(sha(await readEpoch(ch, 2)), sha(full[2]!), 'epoch 2 whole, in its own seeded order');
    await ch.done;
    await ch.stop();
    const p = await readProgress(dataDir);
    t.match(p, { channel: 'train', epoch: 2, objectsInEpoch: plain.length, objectsDelivered: plain.length, bytesDelivered: full[2]!.length, epochDone: true, resume: '3:0', resumedFrom: '1:5' });
  });
}

t.test('Gzip + RecordIO: resumed at 0:2, the decompressed records from object 2 on', async (t) => {
  const o = { recordWrapper: 'RecordIO' as const, compression: 'Gzip' as const, itemsForEpoch: itemsFor(gz) };
  const [full] = await uninterrupted(t, o, 1);
  const ch = await start(t, { ...o, epochs: 1, resumeFrom: { epoch: 0, object: 2, record: 0 } });
  const got = await readEpoch(ch, 0);
  t.ok(got.length > 0);
  t.equal(sha(got), sha(full!.subarray(full!.length - got.length)), 'a tail of the uninterrupted epoch');
  const plainSize = (x: ObjectInfo): number => SIZES[Number(/obj-(\d+)/.exec(x.key)![1])]!;
  const skipped = order(gz, 0).slice(0, 2).reduce((s, x) => s + framedLength(plainSize(x)), 0);
  t.equal(got.length, full!.length - skipped, 'the first two records left out');
  await ch.done;
});

t.test('objects that are RecordIO files: resumed at 0:2:3, the uninterrupted bytes from record 3 of object 2 on', async (t) => {
  const [full] = await uninterrupted(t, { itemsForEpoch: itemsFor(rec) }, 1);
  const ord = order(rec, 0);
  const third = recRecords.get(ord[2]!.key)!;
  t.ok(third.length > 3, 'object 2 holds more than 3 records');
  const skipped = ord.slice(0, 2).reduce((s, x) => s + x.size, 0) + third.slice(0, 3).reduce((s, r) => s + frame(r).length, 0);
  const ch = await start(t, { epochs: 1, itemsForEpoch: itemsFor(rec), resumeFrom: { epoch: 0, object: 2, record: 3 } });
  const got = await readEpoch(ch, 0);
  t.equal(got.length, full!.length - skipped);
  t.equal(sha(got), sha(full!.subarray(skipped)), 'byte for byte');
  await ch.done;
});

t.test('progress while streaming: objects entirely written, bytes written, consistent with each other and with what was read', async (t) => {
  const dataDir = await tempDir(t);
  const ord = order(big, 0);
  const ch = await start(t, { dataDir, epochs: 1, itemsForEpoch: itemsFor(big), progressFile: progressFilePath(dataDir, 'train'), resumeFrom: { epoch: 0, object: 1, record: 0 } });
  await waitFor(() => existsSync(ch.fifoPath(0)), 30_000, 'FIFO');
  // A reader that reads a little and then holds the pipe: the writer stops where the pipe is full.
  const fh = await open(ch.fifoPath(0), 'r');
  try {
    const { bytesRead } = await fh.read(Buffer.alloc(3000), 0, 3000);
    t.ok(bytesRead > 0);
    let p: PipeProgress | undefined;
    let last = '';
    // Settled: the same values on two reads PROGRESS_INTERVAL_MS apart (the writer is blocked on the full pipe).
    await waitFor(async () => {
      if (!existsSync(progressFilePath(dataDir, 'train'))) return false;
      p = await readProgress(dataDir);
      const now = `${p.objectsDelivered}/${p.bytesDelivered}`;
      const same = now === last;
      last = now;
      if (!same) await new Promise((r) => setTimeout(r, 600));
      return same && p.bytesDelivered > 0;
    }, 30_000, 'settled progress');
    t.equal(p!.epoch, 0);
    t.equal(p!.epochDone, false);
    t.equal(p!.resumedFrom, '0:1');
    t.ok(p!.bytesDelivered >= bytesRead, 'at least what the reader read is delivered');
    // Objects 1..objectsDelivered-1 fit in the delivered bytes; one more would not.
    const ends: number[] = [];
    for (let i = 1, at = 0; i < ord.length; i++) { at += ord[i]!.size; ends[i] = at; }
    const k = p!.objectsDelivered;
    t.ok(k >= 1 && k < ord.length, `objects delivered ${k}`);
    if (k > 1) t.ok(ends[k - 1]! <= p!.bytesDelivered, 'the delivered objects are entirely in the pipe');
    t.ok(ends[k]! > p!.bytesDelivered, 'the next object is not entirely in the pipe');
    t.equal(p!.resume, `0:${k}`);
  } finally {
    await fh.close();
  }
  await ch.stop();
});

t.test('bad resume points fail before the first FIFO, with one line', async (t) => {
  const dataDir = await tempDir(t);
  const cases: [Partial<PipeChannelOptions>, RegExp][] = [
    [{ resumeFrom: { epoch: 0, object: 13, record: 0 } }, /resume point 0:13 is past the end of epoch 0, which has 12 objects/],
    [{ resumeFrom: { epoch: 0, object: 12, record: 1 } }, /past the end/],
    [{ resumeFrom: { epoch: 2, object: 0, record: 0 }, epochs: 2 }, /only epochs 0\.\.1 are served \(--epochs 2\)/],
    [{ resumeFrom: { epoch: 0, object: 1, record: 1 }, recordWrapper: 'RecordIO' }, /each object is one record/],
  ];
  for (const [o, re] of cases) {
    const err = await startPipeChannel({ client, channel: 'train', dataDir, recordWrapper: 'None', compression: 'None', itemsForEpoch: itemsFor(plain), ...o }).then(() => undefined, (e: unknown) => e);
    t.ok(err instanceof InvalidArgumentError, `${re}: InvalidArgumentError`);
    t.match((err as InvalidArgumentError).oneLine(), re);
    t.notOk((err as InvalidArgumentError).oneLine().includes('\n'), 'one line');
  }
  t.same(existsSync(path.join(dataDir, 'train_0')), false, 'no FIFO left');
  // 0:12 (every object consumed) is a valid point: an empty epoch 0, then epoch 1 whole.
  const ch = await start(t, { epochs: 2, itemsForEpoch: itemsFor(plain), resumeFrom: { epoch: 0, object: 12, record: 0 } });
  t.equal((await readEpoch(ch, 0)).length, 0);
  t.equal((await readEpoch(ch, 1)).length, SIZES.reduce((a, b) => a + b, 0));
  await ch.done;
});
