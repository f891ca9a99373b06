/**
 * startPipeChannel() against an in-memory client, read by child processes
 * (`cat`, `head -c`) as a training script reads its FIFO. The same scenarios
 * against the real local S3 server are in test/pipe/pipe-channel-s3.ts.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { createHash } from 'node:crypto';
import { BadRangeReplyError, DecompressionError, InvalidArgumentError, NoSuchKeyError } from '../../src/errors.js';
import { channelEpoch, channelObjects, pipeEmptySeconds, pipeFullSeconds, servedBytes } from '../../src/metrics/metrics.js';
import { createLogger, setLogLevel } from '../../src/log.js';
import { Writable } from 'node:stream';
import { NO_NATIVE_ENV } from '../../src/native/addon.js';
import { startPipeChannel, type PipeChannel, type PipeChannelOptions, type PipeItem } from '../../src/pipe/pipe-channel.js';
import { decodeRecordIO } from '../../src/pipe/recordio.js';
import type { StreamOptions } from '../../src/s3/object-client.js';
import { bytesFor, MemoryClient, readFifo, tempDir, waitFor } from '../helpers/pipe.js';

setLogLevel('silent');

/** A seeded Fisher-Yates shuffle, different per epoch (the channels engineer's shuffle is tested on its own). */
function shuffledFor<T>(items: T[], seed: number, epoch: number): T[] {
  const out = [...items];
  let x = (seed * 7919 + epoch * 104729 + 1) >>> 0;
  for (let i = out.length - 1; i > 0; i--) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    const j = x % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

function dataset(client: MemoryClient, sizes: number[]): { items: PipeItem[]; bodies: Map<string, Buffer> } {
  const bodies = new Map<string, Buffer>();
  const items: PipeItem[] = sizes.map((size, i) => {
    const key = `train/part-${String(i).padStart(3, '0')}`;
    const body = bytesFor(key, size);
    bodies.set(key, body);
    return { kind: 'object', info: client.put(key, body) };
  });
  return { items, bodies };
}

function bodyOf(item: PipeItem, bodies: Map<string, Buffer>): Buffer {
  return item.kind === 'inline' ? item.data : bodies.get(item.info.key)!;
}

type Teardown = { teardown(fn: () => unknown): void };

async function start(t: Teardown, o: Partial<PipeChannelOptions> & Pick<PipeChannelOptions, 'client' | 'itemsForEpoch'>): Promise<PipeChannel> {
  const dataDir = o.dataDir ?? (await tempDir(t));
  const ch = await startPipeChannel({ channel: 'train', dataDir, recordWrapper: 'None', compression: 'None', ...o });
  t.teardown(() => ch.stop());
  return ch;
}

/** Read epoch `epoch`'s FIFO once it exists. */
async function readEpoch(ch: PipeChannel, epoch: number, limit?: number): Promise<Buffer> {
  await waitFor(() => existsSync(ch.fifoPath(epoch)), 30_000, `FIFO of epoch ${epoch}`);
  return readFifo(ch.fifoPath(epoch), limit === undefined ? {} : { limit });
}

t.test('epochs 0..2 in key order: each epoch is the objects concatenated in order; then done, no FIFO left', async (t) => {
  const client = new MemoryClient();
  const { items, bodies } = dataset(client, [10, 0, 4096, 70_000, 3, 1]);
  const asked: number[] = [];
  const dataDir = await tempDir(t);
  const ch = await start(t, { client, dataDir, epochs: 3, itemsForEpoch: (e) => { asked.push(e); return items; } });
  t.equal(ch.fifoPath(0), path.join(dataDir, 'train_0'));
  t.ok(existsSync(ch.fifoPath(0)), 'epoch 0 FIFO exists when startPipeChannel resolves');
  const expected = Buffer.concat(items.map((i) => bodyOf(i, bodies)));
  for (let e = 0; e < 3; e++) {
    const got = await readEpoch(ch, e);
    t.equal(got.length, expected.length, `epoch ${e}: length`);
    t.ok(got.equals(expected), `epoch ${e}: bytes`);
  }
  await ch.done;
  t.same(asked, [0, 1, 2]);
  t.same(await readdir(dataDir), [], 'every FIFO removed');
});

t.test('with a shuffle: each epoch follows its own order, and the orders differ', async (t) => {
  const client = new MemoryClient();
  const { items, bodies } = dataset(client, Array.from({ length: 12 }, (_, i) => 500 + i * 37));
  const orders = [0, 1, 2].map((e) => shuffledFor(items, 7, e));
  t.notSame(orders[0]!.map((i) => (i as { info: { key: string } }).info.key), orders[1]!.map((i) => (i as { info: { key: string } }).info.key), 'the test orders differ');
  const ch = await start(t, { client, epochs: 3, itemsForEpoch: (e) => shuffledFor(items, 7, e) });
  const got: Buffer[] = [];
  for (let e = 0; e < 3; e++) got.push(await readEpoch(ch, e));
  for (let e = 0; e < 3; e++) {
    t.ok(got[e]!.equals(Buffer.concat(orders[e]!.map((i) => bodyOf(i, bodies)))), `epoch ${e} in its shuffled order`);
  }
  t.notOk(got[0]!.equals(got[1]!), 'epoch 0 and epoch 1 differ in order');
  await ch.done;
});

t.test('RecordIO: the pipe parses back to the objects (empty, lengths not a multiple of 4, inline items)', async (t) => {
  const client = new MemoryClient();
  const { items, bodies } = dataset(client, [0, 1, 5, 8, 1001, 100_003]);
  items.splice(2, 0, { kind: 'inline', data: Buffer.from('{"label": 3}') });
  const ch = await start(t, { client, epochs: 1, recordWrapper: 'RecordIO', itemsForEpoch: () => items, partSize: 4096 });
  const records = decodeRecordIO(await readEpoch(ch, 0));
  t.equal(records.length, items.length);
  items.forEach((item, i) => t.ok(records[i]!.equals(bodyOf(item, bodies)), `record ${i} (${bodyOf(item, bodies).length} bytes)`));
  await ch.done;
});

t.test('Gzip: objects are decompressed (multi-member too); inline items are not', async (t) => {
  const client = new MemoryClient();
  const plain = [bytesFor('a', 5000), Buffer.from('hello\n'), bytesFor('c', 200_000), Buffer.alloc(0)];
  const stored = [
    gzipSync(plain[0]!),
    Buffer.concat([gzipSync(Buffer.from('hel')), gzipSync(Buffer.from('lo\n'))]), // two gzip members
    gzipSync(plain[2]!),
    Buffer.alloc(0), // an empty object holds nothing
  ];
  const items: PipeItem[] = stored.map((b, i) => ({ kind: 'object', info: client.put(`g${i}.gz`, b) }));
  items.push({ kind: 'inline', data: Buffer.from('as-is') });
  const ch = await start(t, { client, epochs: 2, compression: 'Gzip', itemsForEpoch: () => items, partSize: 8192 });
  const got = await readEpoch(ch, 0);
  t.ok(got.equals(Buffer.concat([...plain, Buffer.from('as-is')])), 'decompressed concatenation');
  await readEpoch(ch, 1);
  await ch.done;
});

t.test('RecordIO + Gzip: each decompressed object is one record', async (t) => {
  const client = new MemoryClient();
  const plain = [bytesFor('x', 3), bytesFor('y', 70_001), Buffer.alloc(0)];
  const items: PipeItem[] = plain.map((b, i) => ({ kind: 'object', info: client.put(`r${i}.gz`, gzipSync(b)) }));
  const ch = await start(t, { client, epochs: 1, compression: 'Gzip', recordWrapper: 'RecordIO', itemsForEpoch: () => items });
  const records = decodeRecordIO(await readEpoch(ch, 0));
  t.same(records.map((r) => r.length), plain.map((p) => p.length));
  t.ok(records.every((r, i) => r.equals(plain[i]!)));
  await ch.done;
});

t.test('RecordIO + Gzip: a record larger than the hold limit (maxInflight) is still one cflag-0 record (spilled to disk)', async (t) => {
  const client = new MemoryClient();
  const plain = bytesFor('big', 200_001);
  const items: PipeItem[] = [{ kind: 'object', info: client.put('big.gz', gzipSync(plain)) }];
  const spillDir = await tempDir(t);
  const ch = await start(t, { client, epochs: 1, compression: 'Gzip', recordWrapper: 'RecordIO', maxInflight: 64 * 1024, partSize: 16 * 1024, spillDir, itemsForEpoch: () => items });
  const wire = await readEpoch(ch, 0);
  t.equal(wire.readUInt32LE(4), plain.length, 'one frame: cflag 0, the whole length');
  const records = decodeRecordIO(wire);
  t.equal(records.length, 1);
  t.ok(records[0]!.equals(plain));
  await ch.done;
  t.same(await readdir(spillDir), [], 'no spill file left');
});

t.test('an object that is not gzip fails the channel with DecompressionError; stop() cleans up', async (t) => {
  const client = new MemoryClient();
  const items: PipeItem[] = [{ kind: 'object', info: client.put('bad.gz', Buffer.from('not gzip at all')) }];
  const ch = await start(t, { client, compression: 'Gzip', itemsForEpoch: () => items });
  const reader = readEpoch(ch, 0);
  await t.rejects(ch.done, DecompressionError);
  await t.rejects(ch.done, { message: /s3:\/\/bucket\/bad\.gz is not valid gzip data/ });
  t.ok(existsSync(ch.fifoPath(0)), 'the FIFO stays (the reader must not take a cut-off epoch for a whole one)');
  await ch.stop();
  t.notOk(existsSync(ch.fifoPath(0)), 'removed by stop()');
  await reader; // the reader got EOF once stopped
});

t.test('a GET that fails makes done reject with its error', async (t) => {
  const client = new MemoryClient();
  const { items } = dataset(client, [100, 100]);
  client.fail = (key) => (key.endsWith('001') ? new NoSuchKeyError('bucket', key) : undefined);
  const ch = await start(t, { client, itemsForEpoch: () => items });
  const reader = readEpoch(ch, 0);
  await t.rejects(ch.done, NoSuchKeyError);
  await ch.stop();
  t.equal((await reader).length, 100, 'the reader got the first object, then EOF at stop()');
});

t.test('a GET that fails while the reader holds the pipe unread still makes done reject', async (t) => {
  // Object 000 (2 MiB) fills the 1 MiB pipe, and the writer queues the rest; object 001
  // fails. What was queued cannot enter the pipe, as nobody reads: the failure must be
  // reported anyway, after a bounded wait, not once the reader reads.
  const client = new MemoryClient();
  const { items } = dataset(client, [2 * 1024 * 1024, 100]);
  client.fail = (key) => (key.endsWith('001') ? new NoSuchKeyError('bucket', key) : undefined);
  const ch = await start(t, { client, itemsForEpoch: () => items, partSize: 256 * 1024 });
  const holder = spawn('sh', ['-c', `exec 3<"${ch.fifoPath(0)}"; sleep 60`], { stdio: 'ignore' });
  t.teardown(() => { if (holder.exitCode === null) holder.kill('SIGKILL'); });
  await t.rejects(ch.done, NoSuchKeyError);
  await ch.stop();
  t.notOk(existsSync(ch.fifoPath(0)), 'FIFO removed by stop()');
  holder.kill('SIGKILL');
});

t.test('a reader that closes early moves the channel to the next epoch (EPIPE handled)', async (t) => {
  const client = new MemoryClient();
  const { items, bodies } = dataset(client, Array.from({ length: 8 }, (_, i) => 400_000 + i));
  const ch = await start(t, { client, epochs: 3, itemsForEpoch: () => items, partSize: 64 * 1024 });
  const head = await readEpoch(ch, 0, 1000);
  t.equal(head.length, 1000);
  t.ok(head.equals(bodyOf(items[0]!, bodies).subarray(0, 1000)), 'the first bytes were right');
  const full = await readEpoch(ch, 1);
  t.ok(full.equals(Buffer.concat(items.map((i) => bodyOf(i, bodies)))), 'epoch 1 complete');
  t.notOk(existsSync(ch.fifoPath(0)), 'epoch 0 FIFO removed');
  await readEpoch(ch, 2, 10); // the last epoch closed early too
  await ch.done;
});

t.test('a script that opens each next epoch at once (no waiting) always finds its FIFO', async (t) => {
  const client = new MemoryClient();
  const { items, bodies } = dataset(client, [70_000, 5, 3000]);
  const dataDir = await tempDir(t);
  const ch = await start(t, { client, dataDir, epochs: 4, itemsForEpoch: () => items });
  const f = (e: number) => JSON.stringify(ch.fifoPath(e));
  // Epoch 0 read whole, epoch 1 quit after 10 bytes, epochs 2 and 3 whole: as a training loop would.
  const script = `cat ${f(0)} && head -c 10 ${f(1)} && cat ${f(2)} && cat ${f(3)}`;
  const out = await new Promise<Buffer>((resolve, reject) => {
    const child = spawn('sh', ['-c', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    let err = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.stdout.on('data', (c: Buffer) => chunks.push(c));
    child.stderr.on('data', (c: Buffer) => { err += String(c); });
    child.on('close', (code) => { clearTimeout(timer); code === 0 ? resolve(Buffer.concat(chunks)) : reject(new Error(`exit ${code}: ${err}`)); });
  });
  const whole = Buffer.concat(items.map((i) => bodyOf(i, bodies)));
  t.ok(out.equals(Buffer.concat([whole, whole.subarray(0, 10), whole, whole])), 'every epoch found and read');
  await ch.done;
  t.same(await readdir(dataDir), []);
});

t.test('the next FIFO is made once the reader connects, never after the last epoch', async (t) => {
  const client = new MemoryClient();
  const { items } = dataset(client, [3 * 1024 * 1024]);
  const ch = await start(t, { client, epochs: 2, itemsForEpoch: () => items, partSize: 256 * 1024 });
  t.notOk(existsSync(ch.fifoPath(1)), 'not before a reader came');
  const reading = readEpoch(ch, 0);
  await waitFor(() => existsSync(ch.fifoPath(1)), 30_000, 'the FIFO of epoch 1');
  await reading;
  const last = readEpoch(ch, 1);
  await waitFor(() => ch.currentEpoch === 1 && client.gets >= 24, 30_000, 'epoch 1 streaming');
  t.notOk(existsSync(ch.fifoPath(2)), 'no FIFO beyond the last epoch');
  await last;
  await ch.done;
});

t.test('stop() cancels a pending open and removes the FIFO; done resolves', async (t) => {
  const client = new MemoryClient();
  const { items } = dataset(client, [10]);
  const ch = await start(t, { client, itemsForEpoch: () => items });
  await new Promise((r) => setTimeout(r, 30));
  t.equal(ch.currentEpoch, 0);
  await ch.stop();
  await ch.done;
  t.notOk(existsSync(ch.fifoPath(0)));
  await ch.stop(); // idempotent
});

t.test('stop() while the reader holds the pipe without reading: write end closed, FIFO removed', async (t) => {
  const client = new MemoryClient();
  const { items } = dataset(client, [3 * 1024 * 1024]);
  const ch = await start(t, { client, itemsForEpoch: () => items, partSize: 256 * 1024 });
  // Opens the FIFO and never reads: the pipe fills up and the channel waits.
  const holder = spawn('sh', ['-c', `exec 3<"${ch.fifoPath(0)}"; sleep 60`], { stdio: 'ignore' });
  t.teardown(() => { if (holder.exitCode === null) holder.kill('SIGKILL'); });
  await waitFor(() => client.gets > 0, 10_000, 'the first GET');
  await new Promise((r) => setTimeout(r, 100));
  await ch.stop();
  t.notOk(existsSync(ch.fifoPath(0)));
  holder.kill('SIGKILL');
});

t.test('after unlimited epochs are stopped, no FIFO is left, whatever epoch was current', async (t) => {
  const client = new MemoryClient();
  const { items } = dataset(client, [100]);
  const dataDir = await tempDir(t);
  const ch = await start(t, { client, dataDir, itemsForEpoch: () => items });
  await readEpoch(ch, 0);
  await readEpoch(ch, 1);
  await waitFor(() => ch.currentEpoch === 2, 10_000, 'epoch 2');
  await ch.stop();
  t.same(await readdir(dataDir), []);
});

t.test('large objects go through as parallel ranged GETs within the byte budget', async (t) => {
  const client = new MemoryClient();
  const { items, bodies } = dataset(client, [2_000_000, 1_500_000]);
  client.delayMs = () => 3;
  const ch = await start(t, { client, epochs: 1, itemsForEpoch: () => items, partSize: 100_000, maxInflight: 400_000 });
  const got = await readEpoch(ch, 0);
  t.ok(got.equals(Buffer.concat(items.map((i) => bodyOf(i, bodies)))));
  t.ok(client.maxInflight > 1 && client.maxInflight <= 4, `parallel GETs within budget (max ${client.maxInflight})`);
  t.equal(client.gets, 35, '20 + 15 parts');
  await ch.done;
});

/** A MemoryClient whose streams come as chunks of 1 to 9,000 odd sizes, and whose range ending at `shortAt` lacks its last byte. */
class ChunkyClient extends MemoryClient {
  shortAt: number | undefined;
  override async *getStream(key: string, etag: string, opts: StreamOptions = {}): AsyncIterable<Buffer> {
    const got: Buffer[] = [];
    for await (const c of super.getStream(key, etag, opts)) got.push(c);
    let body = Buffer.concat(got);
    if (opts.end !== undefined && opts.end === this.shortAt) body = body.subarray(0, body.length - 1);
    for (let at = 0, i = 0; at < body.length; i++) {
      const n = 1 + ((i * 7919) % 9000);
      yield body.subarray(at, at + n);
      at += n;
    }
  }
}

const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

t.test('parts that arrive as many chunks are written to the pipe exactly (sha256), plain and RecordIO', async (t) => {
  for (const recordWrapper of ['None', 'RecordIO'] as const) {
    const client = new ChunkyClient();
    const { items, bodies } = dataset(client, [1_000_001, 5, 0, 333_333]);
    items.splice(2, 0, { kind: 'inline', data: Buffer.from('{"label":7}') });
    client.delayMs = () => 2;
    const ch = await start(t, { client, recordWrapper, epochs: 1, itemsForEpoch: () => items, partSize: 100_000, maxInflight: 300_000 });
    const got = await readEpoch(ch, 0);
    await ch.done;
    const expected = items.map((i) => bodyOf(i, bodies));
    if (recordWrapper === 'None') {
      t.equal(sha256(got), sha256(Buffer.concat(expected)), 'plain: sha256 of the pipe is that of the items in order');
    } else {
      const records = decodeRecordIO(got);
      t.same(records.map((r) => sha256(r)), expected.map((b) => sha256(b)), 'RecordIO: each record\'s sha256 is its item\'s');
    }
  }
});

t.test('a part that arrives one byte short fails the channel with BadRangeReplyError', async (t) => {
  const client = new ChunkyClient();
  const { items } = dataset(client, [250_000]);
  client.shortAt = 200_000; // the second of three parts
  const ch = await start(t, { client, itemsForEpoch: () => items, partSize: 100_000, maxInflight: 300_000 });
  const reader = readEpoch(ch, 0);
  await t.rejects(ch.done, BadRangeReplyError);
  await ch.stop();
  t.ok((await reader).length <= 100_000, 'the reader got at most the first part, then EOF at stop()');
});

t.test('metrics: served bytes (mode Pipe), objects and the current epoch, per channel', async (t) => {
  const client = new MemoryClient();
  const { items } = dataset(client, [1000, 2000, 3]);
  const value = async (m: { get(): Promise<{ values: { labels: Record<string, unknown>; value: number }[] }> }, labels: Record<string, string>) =>
    (await m.get()).values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value ?? 0;
  const ch = await start(t, { client, channel: 'metrics', epochs: 2, itemsForEpoch: () => items });
  await readEpoch(ch, 0);
  await readEpoch(ch, 1);
  await ch.done;
  t.equal(await value(servedBytes, { channel: 'metrics', mode: 'Pipe' }), 2 * 3003);
  t.equal(await value(channelObjects, { channel: 'metrics', mode: 'Pipe' }), 6);
  t.equal(await value(channelEpoch, { channel: 'metrics', mode: 'Pipe' }), 1);
});

t.test('metrics: a slow reader shows as pipe-full time, a slow S3 as pipe-empty time', async (t) => {
  const client = new MemoryClient();
  const { items, bodies } = dataset(client, [3 * 1024 * 1024, 10]);
  client.delayMs = (key) => (key.endsWith('001') ? 100 : 0); // the second object is slow to come
  const value = async (m: typeof pipeFullSeconds) => (await m.get()).values.find((v) => v.labels.channel === 'slowness')?.value ?? 0;
  const ch = await start(t, { client, channel: 'slowness', epochs: 1, itemsForEpoch: () => items, partSize: 512 * 1024 });
  // Opens the FIFO, lets it fill up, then reads it all.
  const reader = spawn('sh', ['-c', `exec 3<"${ch.fifoPath(0)}"; sleep 0.5; cat <&3`], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => { if (reader.exitCode === null) reader.kill('SIGKILL'); });
  const chunks: Buffer[] = [];
  reader.stdout.on('data', (c: Buffer) => chunks.push(c));
  await new Promise((r) => reader.on('close', r));
  await ch.done;
  t.ok(Buffer.concat(chunks).equals(Buffer.concat(items.map((i) => bodyOf(i, bodies)))), 'bytes');
  t.ok((await value(pipeFullSeconds)) > 0, 'pipe-full time counted');
  t.ok((await value(pipeEmptySeconds)) > 0, 'pipe-empty time counted');
});

t.test(`the fallback backend (${NO_NATIVE_ENV}=1) serves the same bytes`, async (t) => {
  process.env[NO_NATIVE_ENV] = '1';
  t.teardown(() => { delete process.env[NO_NATIVE_ENV]; });
  const client = new MemoryClient();
  const { items, bodies } = dataset(client, [300_000, 7]);
  const ch = await start(t, { client, epochs: 1, itemsForEpoch: () => items });
  t.ok((await readEpoch(ch, 0)).equals(Buffer.concat(items.map((i) => bodyOf(i, bodies)))));
  await ch.done;
});

t.test('bad options are one-line InvalidArgumentErrors', async (t) => {
  const client = new MemoryClient();
  const dataDir = await tempDir(t);
  const base = { client, channel: 'train', dataDir, itemsForEpoch: () => [], recordWrapper: 'None', compression: 'None' } as PipeChannelOptions;
  await t.rejects(startPipeChannel({ ...base, channel: '../evil' }), InvalidArgumentError);
  await t.rejects(startPipeChannel({ ...base, epochs: 0 }), { message: /epochs must be a whole number >= 1/ });
  await t.rejects(startPipeChannel({ ...base, recordWrapper: 'Tar' as 'None' }), { message: /RecordWrapperType "Tar"/ });
  await t.rejects(startPipeChannel({ ...base, compression: 'Zstd' as 'None' }), { message: /CompressionType "Zstd"/ });
  await t.rejects(startPipeChannel({ ...base, maxInflight: -1 }), { message: /maxInflight/ });
  t.same(await readdir(dataDir), [], 'nothing created');
});

t.test('a data folder where no FIFO can be made is a one-line error', async (t) => {
  const client = new MemoryClient();
  const dir = await tempDir(t);
  const file = path.join(dir, 'a-file');
  await writeFile(file, 'x');
  const base = { client, channel: 'train', itemsForEpoch: () => [], recordWrapper: 'None', compression: 'None' } as const;
  await t.rejects(startPipeChannel({ ...base, dataDir: path.join(file, 'data') }), { code: 'SLUICE_INVALID_ARGUMENT', message: /cannot create the data folder .*ENOTDIR/ });
  await t.rejects(startPipeChannel({ ...base, dataDir: '/proc/self' }), { code: 'SLUICE_INVALID_ARGUMENT', message: /cannot create the FIFO \/proc\/self\/train_0/ });
  await writeFile(path.join(dir, 'train_0'), 'user data');
  await t.rejects(startPipeChannel({ ...base, dataDir: dir }), { message: /train_0 exists and is not a FIFO/ });
});

/** A logger whose lines land in an array (parsed JSON). */
function captureLog(): { logger: ReturnType<typeof createLogger>; lines: { msg: string; [k: string]: unknown }[] } {
  const lines: { msg: string }[] = [];
  const stream = new Writable({ write(chunk, _enc, cb) { for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l)); cb(); } });
  return { logger: createLogger(stream, 'warn'), lines };
}

t.test('a FIFO nobody opens is reported after the configured wait, then at doubling intervals; stop() still works', async (t) => {
  const client = new MemoryClient();
  const { items } = dataset(client, [1000]);
  const { logger, lines } = captureLog();
  const ch = await start(t, { client, itemsForEpoch: () => items, waitWarningMs: 100, logger });
  await waitFor(() => lines.length >= 3, 30_000, 'three warnings');
  t.match(lines[0]!.msg, `no reader has opened ${ch.fifoPath(0)} for 0 s; the training script must open it to receive epoch 0`);
  const waited = lines.slice(0, 3).map((l) => l.waitedSeconds as number);
  t.ok(lines.slice(0, 3).every((l) => l.fifo === ch.fifoPath(0) && l.epoch === 0), 'each names the FIFO and epoch');
  t.ok(waited[0]! <= waited[1]! && waited[1]! <= waited[2]!, `growing waits ${waited.join(', ')}`);
  await ch.stop();
  t.notOk(existsSync(ch.fifoPath(0)));
});

t.test('a script that opens <ch>_1 while holding <ch>_0 unread is named in the log; the daemon stays responsive', async (t) => {
  const client = new MemoryClient();
  // More than the pipe buffer (1 MiB) and the socket's: the writer of epoch 0 must wait.
  const { items } = dataset(client, [4 * 1024 * 1024]);
  const { logger, lines } = captureLog();
  const ch = await start(t, { client, epochs: 2, itemsForEpoch: () => items, partSize: 256 * 1024, waitWarningMs: 200, logger });
  // Holds epoch 0 open without reading it, then opens epoch 1 (which blocks until a writer is there).
  const script = `
    const fs = require('fs');
    const a = fs.openSync(process.argv[1], 'r');
    // The next FIFO is made once epoch 0's reader is connected: wait for it to exist.
    while (!fs.existsSync(process.argv[2])) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
    const b = fs.openSync(process.argv[2], 'r');
    process.stdout.write('opened both\\n');
    setInterval(() => {}, 1000);`;
  await waitFor(() => existsSync(ch.fifoPath(0)), 10_000, 'FIFO 0');
  const holder = spawn(process.execPath, ['-e', script, ch.fifoPath(0), ch.fifoPath(1)], { stdio: ['ignore', 'pipe', 'ignore'] });
  t.teardown(() => { if (holder.exitCode === null) holder.kill('SIGKILL'); });
  let out = '';
  holder.stdout!.on('data', (b: Buffer) => { out += b; });
  await waitFor(() => lines.some((l) => l.msg.includes('while still holding')), 30_000, 'the warning about holding epoch 0')
    .catch((err: Error) => { throw new Error(`${err.message}: ${JSON.stringify(lines)}`); });
  const w = lines.find((l) => l.msg.includes('while still holding'))!;
  t.match(w.msg, `the training script opened ${ch.fifoPath(1)} while still holding ${ch.fifoPath(0)} open without reading it`);
  t.match(w.msg, 'it must read');
  t.equal(w.next, ch.fifoPath(1));
  await waitFor(() => out.includes('opened both'), 10_000, "the script's open of epoch 1 to return");
  t.equal(ch.currentEpoch, 0, 'still serving epoch 0');
  // Not deadlocked: stop() closes both write ends and removes both FIFOs.
  await ch.stop();
  t.notOk(existsSync(ch.fifoPath(0)));
  t.notOk(existsSync(ch.fifoPath(1)));
  holder.kill('SIGKILL');
});

t.test('a slow reader is not reported while it keeps within the wait; a stalled one is (without the next-epoch hint)', async (t) => {
  const client = new MemoryClient();
  const { items, bodies } = dataset(client, [3 * 1024 * 1024]);
  const { logger, lines } = captureLog();
  const ch = await start(t, { client, epochs: 1, itemsForEpoch: () => items, partSize: 256 * 1024, waitWarningMs: 300, logger });
  // Reads 64 KiB, sleeps 1 s once, then reads the rest at once.
  const script = `
    const fs = require('fs');
    const fd = fs.openSync(process.argv[1], 'r');
    const buf = Buffer.alloc(65536);
    fs.readSync(fd, buf);
    setTimeout(() => { let n; const out = []; out.push(buf); while ((n = fs.readSync(fd, Buffer.alloc(1 << 20))) > 0) out.push(n); process.stdout.write('done'); }, 1000);`;
  await waitFor(() => existsSync(ch.fifoPath(0)), 10_000, 'FIFO 0');
  const reader = spawn(process.execPath, ['-e', script, ch.fifoPath(0)], { stdio: ['ignore', 'pipe', 'ignore'] });
  t.teardown(() => { if (reader.exitCode === null) reader.kill('SIGKILL'); });
  await ch.done;
  const stalled = lines.filter((l) => l.msg.includes('nothing has been read from it'));
  t.ok(stalled.length >= 1, 'the 1 s stall was reported');
  t.notOk(lines.some((l) => l.msg.includes('while still holding')), 'no next-epoch hint: there is no next epoch');
  t.ok(bodies.size === 1);
});
