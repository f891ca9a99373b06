import t from 'tap';
import fc from 'fast-check';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { RecordIOError } from '../../src/errors.js';
import {
  decodeRecordIO, encodeHeader, encodeRecord, frameKnownLength, frameUnknownLength, framedLength,
  RECORDIO_MAGIC, RECORDIO_MAX_LENGTH, RECORDIO_SPLIT_LENGTH, RecordIODecoder,
} from '../../src/pipe/recordio.js';

async function collect(gen: AsyncIterable<Buffer>): Promise<Buffer> {
  const out: Buffer[] = [];
  for await (const c of gen) out.push(c);
  return Buffer.concat(out);
}

async function* chunksOf(buf: Buffer, size: number): AsyncGenerator<Buffer> {
  for (let i = 0; i < buf.length; i += size) yield buf.subarray(i, i + size);
}

t.test('a record is magic, lrecord, data and zero padding to 4 bytes (little-endian)', async (t) => {
  const framed = Buffer.concat(encodeRecord(Buffer.from('hello')));
  t.same([...framed.subarray(0, 4)], [0x0a, 0x23, 0xd7, 0xce], 'magic 0xced7230a little-endian');
  t.equal(framed.readUInt32LE(4), 5, 'cflag 0, length 5');
  t.equal(framed.subarray(8, 13).toString(), 'hello');
  t.same([...framed.subarray(13)], [0, 0, 0], 'padded to 16 bytes with zeros');
  t.equal(framed.length, framedLength(5));
});

t.test('lengths 0..9 and multiples of 4 round-trip, one frame each', async (t) => {
  for (const n of [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1000, 1023]) {
    const data = Buffer.alloc(n, n % 251);
    const framed = Buffer.concat(encodeRecord(data));
    t.equal(framed.length % 4, 0, `${n}: aligned`);
    t.equal(framed.length, framedLength(n), `${n}: framedLength`);
    t.same(decodeRecordIO(framed), [data], `${n}: decodes back`);
  }
});

t.test('many records round-trip, whatever the chunking of the input (property)', async (t) => {
  fc.assert(fc.property(
    fc.array(fc.uint8Array({ maxLength: 64 }), { maxLength: 20 }),
    fc.integer({ min: 1, max: 50 }),
    (records, chunk) => {
      const bufs = records.map((r) => Buffer.from(r));
      const wire = Buffer.concat(bufs.flatMap((b) => encodeRecord(b)));
      const decoder = new RecordIODecoder();
      const out: Buffer[] = [];
      for (let i = 0; i < wire.length; i += chunk) out.push(...decoder.push(wire.subarray(i, i + chunk)));
      decoder.end();
      return out.length === bufs.length && out.every((b, i) => b.equals(bufs[i]!));
    },
  ), { numRuns: 200 });
  t.pass('property held');
});

t.test('frameKnownLength streams the same bytes as encodeRecord', async (t) => {
  for (const n of [0, 3, 4, 4097]) {
    const data = Buffer.alloc(n, 7);
    t.same(await collect(frameKnownLength(chunksOf(data, 1000), n)), Buffer.concat(encodeRecord(data)), `length ${n}`);
  }
});

t.test('frameKnownLength rejects a source longer or shorter than declared', async (t) => {
  await t.rejects(collect(frameKnownLength(chunksOf(Buffer.alloc(10), 3), 9)), RecordIOError);
  await t.rejects(collect(frameKnownLength(chunksOf(Buffer.alloc(8), 3), 9)), RecordIOError);
});

t.test('frameKnownLength splits a record longer than 2^29-1 into cflag 1 and 3 frames', async (t) => {
  const length = RECORDIO_MAX_LENGTH + 9; // 2^29 + 8
  const zeros = Buffer.alloc(8 * 1024 * 1024); // one shared buffer: the test holds no 512 MiB
  async function* source(): AsyncGenerator<Buffer> {
    let left = length;
    while (left > 0) {
      const n = Math.min(left, zeros.length);
      yield zeros.subarray(0, n);
      left -= n;
    }
  }
  const headers: { cflag: number; length: number }[] = [];
  let data = 0;
  let total = 0;
  for await (const c of frameKnownLength(source(), length)) {
    total += c.length;
    if (c.length === 8 && c.readUInt32LE(0) === RECORDIO_MAGIC) {
      const l = c.readUInt32LE(4);
      headers.push({ cflag: l >>> 29, length: l & RECORDIO_MAX_LENGTH });
    } else {
      data += c.length;
    }
  }
  t.same(headers, [{ cflag: 1, length: RECORDIO_SPLIT_LENGTH }, { cflag: 3, length: length - RECORDIO_SPLIT_LENGTH }]);
  t.equal(RECORDIO_SPLIT_LENGTH % 4, 0, 'the first part needs no padding');
  t.equal(total, framedLength(length));
  t.equal(data, length + (total - 16 - length), 'data plus the final padding');
});

t.test('frameUnknownLength: one cflag-0 frame whatever the hold limit (spilling to disk); cflag 1/2/3 only past the split length', async (t) => {
  const spillDir = await mkdtemp(path.join(os.tmpdir(), 'sluice-spill-'));
  t.teardown(() => rm(spillDir, { recursive: true, force: true }));
  const small = Buffer.from('abcdefghij');
  const one = await collect(frameUnknownLength(chunksOf(small, 3), { holdLimit: 64, spillDir }));
  t.same(one, Buffer.concat(encodeRecord(small)), 'fits: same as encodeRecord');
  const exact = Buffer.alloc(64, 1);
  t.same(await collect(frameUnknownLength(chunksOf(exact, 5), { holdLimit: 64, spillDir })), Buffer.concat(encodeRecord(exact)), 'exactly the limit: one frame');

  // Far past the hold limit: still one record (held on disk, not split), every byte in place.
  const big = Buffer.from(Array.from({ length: 150_003 }, (_, i) => (i * 7) & 0xff));
  const spilled = await collect(frameUnknownLength(chunksOf(big, 4099), { holdLimit: 64, spillDir }));
  t.same(spilled, Buffer.concat(encodeRecord(big)), 'one cflag-0 frame, same as encodeRecord');
  t.same(await readdir(spillDir), [], 'the spill file is unlinked at once: nothing left');
  t.same(await collect(frameUnknownLength(chunksOf(big, 4099), { holdLimit: 0, spillDir })), spilled, 'hold limit 0: everything spills, same bytes');

  // The format's own limit, scaled down: a record longer than the split length is split.
  const framed = await collect(frameUnknownLength(chunksOf(big.subarray(0, 150), 7), { holdLimit: 16, spillDir, splitLength: 64 }));
  const flags: number[] = [];
  for (let at = 0; at < framed.length;) {
    const l = framed.readUInt32LE(at + 4);
    flags.push(l >>> 29);
    const len = l & RECORDIO_MAX_LENGTH;
    at += 8 + len + ((4 - (len % 4)) % 4);
  }
  t.same(flags, [1, 2, 3], 'split into first, middle, last');
  t.same(decodeRecordIO(framed), [big.subarray(0, 150)], 'the parts concatenate back to the record');
  t.same((await collect(frameUnknownLength(chunksOf(big.subarray(0, 128), 7), { splitLength: 64 }))).length, 8 + 64 + 8 + 64, 'exactly two frames: first and last, no empty frame');
  t.same(decodeRecordIO(await collect(frameUnknownLength(chunksOf(Buffer.alloc(0), 1), { holdLimit: 64 }))), [Buffer.alloc(0)], 'empty record');
  await t.rejects(frameUnknownLength(chunksOf(small, 1), { splitLength: 6 }).next(), RangeError);
});

t.test('the decoder rejects bad magic, bad flags and truncated input with RecordIOError', async (t) => {
  const good = Buffer.concat(encodeRecord(Buffer.from('abcde')));
  const badMagic = Buffer.from(good);
  badMagic.writeUInt32LE(0xdeadbeef, 0);
  t.throws(() => decodeRecordIO(badMagic), RecordIOError, 'bad magic');
  t.throws(() => decodeRecordIO(badMagic), { code: 'SLUICE_RECORDIO', message: /magic 0xdeadbeef at byte 0/ });
  t.throws(() => decodeRecordIO(good.subarray(0, 6)), { message: /truncated/ }, 'truncated header');
  t.throws(() => decodeRecordIO(good.subarray(0, 12)), { message: /truncated/ }, 'truncated data');
  t.throws(() => decodeRecordIO(good.subarray(0, 14)), { message: /truncated/ }, 'truncated padding');
  const bad4 = Buffer.from(good);
  bad4.writeUInt32LE(((4 << 29) | 5) >>> 0, 4);
  t.throws(() => decodeRecordIO(bad4), { message: /cflag 4/ });
  t.throws(() => decodeRecordIO(Buffer.concat([encodeHeader(3, 0)])), { message: /without a first part/ }, 'cflag 3 alone');
  t.throws(() => decodeRecordIO(Buffer.concat([encodeHeader(1, 0), encodeHeader(0, 0)])), { message: /inside a split record/ });
  t.throws(() => decodeRecordIO(encodeHeader(1, 0)), { message: /no last part/ }, 'split record cut off');
  t.throws(() => decodeRecordIO(Buffer.concat([good, badMagic])), { message: /at byte 16/ }, 'offset of the second record');
});

t.test('encodeHeader checks its arguments', async (t) => {
  t.throws(() => encodeHeader(4, 0), RangeError);
  t.throws(() => encodeHeader(0, RECORDIO_MAX_LENGTH + 1), RangeError);
  t.throws(() => encodeHeader(0, -1), RangeError);
});
