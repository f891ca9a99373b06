/**
 * MXNet RecordIO framing, as SageMaker's Pipe mode writes it (`RecordWrapperType: RecordIO`).
 *
 * A frame is:
 *   magic   uint32 LE 0xced7230a
 *   lrecord uint32 LE (cflag << 29) | length      length < 2^29
 *   data    `length` bytes
 *   pad     zero bytes up to the next multiple of 4
 *
 * A record no longer than RECORDIO_MAX_LENGTH is one frame with cflag 0. A longer
 * record is split into frames: cflag 1 (first), 2 (middle), 3 (last); the reader
 * concatenates their data. This is the convention of SageMaker's own reader
 * (sagemaker-tensorflow-extensions' RecordIOReader). dmlc-core's reader instead
 * re-inserts the magic word between the parts (its writer splits only where the
 * data holds the magic); it cannot read records of 2^29 bytes or more anyway, so
 * the two agree on every record it can read. We never split a record shorter than
 * 2^29 bytes: such a record is always one cflag-0 frame, which every reader accepts.
 *
 * Encoding is streaming: `frameKnownLength` writes the header before the data
 * arrives (the object size is known from the listing); `frameUnknownLength`
 * (decompressed objects) holds data, in memory and then in a spill file, until the
 * record ends or reaches the format's limit.
 * The decoder (`RecordIODecoder`, `decodeRecordIO`) is incremental and rejects
 * bad magic, bad flags and truncated input with RecordIOError.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, open, unlink, type FileHandle } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { RecordIOError } from '../errors.js';

/** The magic word of every frame, little-endian on the wire. */
export const RECORDIO_MAGIC = 0xced7230a;
/** The largest data length one frame holds: the length field is the low 29 bits of lrecord. */
export const RECORDIO_MAX_LENGTH = 2 ** 29 - 1;
/** Bytes of magic + lrecord before each frame's data. */
export const RECORDIO_HEADER_BYTES = 8;

/** cflag values: a whole record, or the first, a middle, and the last part of a split one. */
export const CFLAG_WHOLE = 0;
export const CFLAG_FIRST = 1;
export const CFLAG_MIDDLE = 2;
export const CFLAG_LAST = 3;

/**
 * Data bytes per frame when a record is split: the largest multiple of 4 that fits,
 * so that only the last frame carries padding (readers that ignore per-part padding
 * still read the parts right).
 */
export const RECORDIO_SPLIT_LENGTH = RECORDIO_MAX_LENGTH - (RECORDIO_MAX_LENGTH % 4);

const ZEROS = Buffer.alloc(4);

/** The 8-byte frame header. */
export function encodeHeader(cflag: number, length: number): Buffer {
  if (!Number.isInteger(cflag) || cflag < 0 || cflag > 3) throw new RangeError(`RecordIO cflag must be 0..3, got ${cflag}`);
  if (!Number.isInteger(length) || length < 0 || length > RECORDIO_MAX_LENGTH) {
    throw new RangeError(`RecordIO frame length must be 0..${RECORDIO_MAX_LENGTH}, got ${length}`);
  }
  const header = Buffer.allocUnsafe(RECORDIO_HEADER_BYTES);
  header.writeUInt32LE(RECORDIO_MAGIC, 0);
  header.writeUInt32LE(((cflag << 29) | length) >>> 0, 4);
  return header;
}

/** Zero bytes that pad `length` data bytes to a multiple of 4 (empty when aligned). */
export function paddingFor(length: number): Buffer {
  const pad = (4 - (length % 4)) % 4;
  return pad === 0 ? Buffer.alloc(0) : ZEROS.subarray(0, pad);
}

/** Bytes on the wire for a record of `length` data bytes (headers and padding included). */
export function framedLength(length: number): number {
  const frames = Math.max(1, Math.ceil(length / RECORDIO_SPLIT_LENGTH));
  const lastLength = length - (frames - 1) * RECORDIO_SPLIT_LENGTH;
  return frames * RECORDIO_HEADER_BYTES + length + paddingFor(lastLength).length;
}

/** The (cflag, length) of each frame of a record of `length` bytes, in order. */
function frameLayout(length: number): { cflag: number; length: number }[] {
  if (length <= RECORDIO_MAX_LENGTH) return [{ cflag: CFLAG_WHOLE, length }];
  const frames: { cflag: number; length: number }[] = [];
  for (let at = 0; at < length; at += RECORDIO_SPLIT_LENGTH) {
    const n = Math.min(RECORDIO_SPLIT_LENGTH, length - at);
    const cflag = at === 0 ? CFLAG_FIRST : at + n >= length ? CFLAG_LAST : CFLAG_MIDDLE;
    frames.push({ cflag, length: n });
  }
  return frames;
}

/** One record, whole, as the list of buffers to write (headers, data slices, padding). */
export function encodeRecord(data: Buffer): Buffer[] {
  const out: Buffer[] = [];
  const frames = frameLayout(data.length);
  let at = 0;
  for (const f of frames) {
    out.push(encodeHeader(f.cflag, f.length));
    if (f.length > 0) out.push(data.subarray(at, at + f.length));
    at += f.length;
  }
  const pad = paddingFor(frames.at(-1)!.length);
  if (pad.length > 0) out.push(pad);
  return out;
}

/**
 * Frame a record whose length is known up front, streaming: the header goes out
 * before the data. Throws RecordIOError when the source yields more or fewer
 * bytes than `length` (the frame would be corrupt).
 */
export async function* frameKnownLength(chunks: AsyncIterable<Buffer>, length: number): AsyncGenerator<Buffer> {
  const frames = frameLayout(length);
  let frame = 0;
  let leftInFrame = frames[0]!.length;
  let total = 0;
  yield encodeHeader(frames[0]!.cflag, frames[0]!.length);
  for await (let chunk of chunks) {
    total += chunk.length;
    if (total > length) throw new RecordIOError(`record source yielded more than its declared ${length} bytes`);
    while (chunk.length > 0) {
      if (leftInFrame === 0) {
        frame += 1;
        leftInFrame = frames[frame]!.length;
        yield encodeHeader(frames[frame]!.cflag, leftInFrame);
      }
      const n = Math.min(leftInFrame, chunk.length);
      yield chunk.subarray(0, n);
      chunk = chunk.subarray(n);
      leftInFrame -= n;
    }
  }
  if (total !== length) throw new RecordIOError(`record source ended after ${total} of its declared ${length} bytes`);
  const pad = paddingFor(frames.at(-1)!.length);
  if (pad.length > 0) yield pad;
}

export interface UnknownLengthOptions {
  /** Bytes of a record held in memory (default: all of it up to the split length); a longer record spills to disk. */
  holdLimit?: number;
  /** Folder of spill files (default: the OS temp folder). Each is unlinked as soon as it is made. */
  spillDir?: string;
  /** Data bytes per frame of a split record: RECORDIO_SPLIT_LENGTH; tests pass less. A multiple of 4. */
  splitLength?: number;
}

/** Bytes read back from a spill file per yield: large enough for few syscalls, small against the pipe's buffers. */
const SPILL_READ_BYTES = 256 * 1024;

/**
 * Frame a record whose length is known only at its end (a decompressed object).
 * Data is collected until the record ends, then written as one cflag-0 frame, however
 * long (up to RECORDIO_MAX_LENGTH, the format's own limit): an object is one record.
 * Memory stays bounded: the first `holdLimit` bytes are held in memory; past that the
 * record is written to a spill file (opened, then unlinked at once, so a killed process
 * leaves nothing behind) and read back from it once its length is known. Only a record
 * longer than `splitLength` (RECORDIO_SPLIT_LENGTH) is split: each full `splitLength`
 * bytes go out as a cflag-1 (first) or cflag-2 (middle) frame as soon as a byte beyond
 * them arrives, and the rest as the cflag-3 frame, so the spill file never holds more
 * than one frame. Memory: at most about `holdLimit` plus one chunk, and one
 * SPILL_READ_BYTES buffer being read back.
 */
export async function* frameUnknownLength(chunks: AsyncIterable<Buffer>, opts: UnknownLengthOptions = {}): AsyncGenerator<Buffer> {
  const split = opts.splitLength ?? RECORDIO_SPLIT_LENGTH;
  if (!(Number.isSafeInteger(split) && split >= 4 && split % 4 === 0 && split <= RECORDIO_SPLIT_LENGTH)) {
    throw new RangeError(`RecordIO split length must be a multiple of 4 in 4..${RECORDIO_SPLIT_LENGTH}, got ${split}`);
  }
  const seg = new FrameData(Math.max(0, opts.holdLimit ?? split), opts.spillDir ?? os.tmpdir());
  let frames = 0;
  try {
    for await (let chunk of chunks) {
      while (chunk.length > 0) {
        // A full frame followed by more data: the record is longer than one frame.
        if (seg.bytes === split) {
          yield* seg.emit(frames === 0 ? CFLAG_FIRST : CFLAG_MIDDLE);
          frames++;
        }
        const n = Math.min(chunk.length, split - seg.bytes);
        await seg.append(n === chunk.length ? chunk : chunk.subarray(0, n));
        chunk = chunk.subarray(n);
      }
    }
    yield* seg.emit(frames === 0 ? CFLAG_WHOLE : CFLAG_LAST);
  } finally {
    await seg.discard();
  }
}

/** The data of the frame being collected: in memory up to a limit, then in an unlinked spill file. */
class FrameData {
  bytes = 0;
  private mem: Buffer[] = [];
  private file: FileHandle | undefined;

  constructor(private readonly holdLimit: number, private readonly spillDir: string) {}

  async append(buf: Buffer): Promise<void> {
    if (this.file === undefined && this.bytes + buf.length <= this.holdLimit) {
      this.mem.push(buf);
      this.bytes += buf.length;
      return;
    }
    if (this.file === undefined) {
      await mkdir(this.spillDir, { recursive: true });
      const file = path.join(this.spillDir, `sluice-record-${process.pid}-${randomBytes(6).toString('hex')}.spill`);
      this.file = await open(file, 'w+', 0o600);
      await unlink(file); // the open handle keeps the data; nothing is left after a crash
      let at = 0;
      for (const b of this.mem) at += await writeAll(this.file, b, at);
      this.mem = [];
    }
    await writeAll(this.file, buf, this.bytes);
    this.bytes += buf.length;
  }

  /** The frame (header, data, padding), then empty again. */
  async *emit(cflag: number): AsyncGenerator<Buffer> {
    const length = this.bytes;
    yield encodeHeader(cflag, length);
    if (this.file === undefined) {
      yield* this.mem;
    } else {
      for (let at = 0; at < length;) {
        // A fresh buffer each time: the writer may still hold the previous one.
        const buf = Buffer.allocUnsafe(Math.min(SPILL_READ_BYTES, length - at));
        const { bytesRead } = await this.file.read(buf, 0, buf.length, at);
        if (bytesRead === 0) throw new RecordIOError(`spill file ended after ${at} of ${length} bytes`);
        yield bytesRead === buf.length ? buf : buf.subarray(0, bytesRead);
        at += bytesRead;
      }
      await this.discard();
    }
    this.mem = [];
    this.bytes = 0;
    const pad = paddingFor(length);
    if (pad.length > 0) yield pad;
  }

  async discard(): Promise<void> {
    const f = this.file;
    this.file = undefined;
    this.mem = [];
    await f?.close().catch(() => {});
  }
}

async function writeAll(fh: FileHandle, buf: Buffer, position: number): Promise<number> {
  for (let done = 0; done < buf.length;) {
    const { bytesWritten } = await fh.write(buf, done, buf.length - done, position + done);
    done += bytesWritten;
  }
  return buf.length;
}

/**
 * Incremental decoder: push() bytes as they come, get back the records completed
 * so far; end() checks that the input stopped at a record boundary.
 */
export class RecordIODecoder {
  /** Input not yet decoded, as received (joined only when a whole frame is there). */
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** Header of the frame being read, once its 8 bytes have arrived. */
  private frame: { cflag: number; length: number; total: number } | undefined;
  /** Parts of a split record read so far (cflag 1 seen, cflag 3 not yet). */
  private parts: Buffer[] | undefined;
  /** Byte offset of the first pending byte in the whole input, for error messages. */
  private offset = 0;

  push(chunk: Buffer): Buffer[] {
    if (chunk.length > 0) {
      this.pending.push(chunk);
      this.pendingBytes += chunk.length;
    }
    const records: Buffer[] = [];
    for (;;) {
      if (this.frame === undefined) {
        if (this.pendingBytes < RECORDIO_HEADER_BYTES) break;
        this.frame = this.readHeader(this.joined());
      }
      const { cflag, length, total } = this.frame;
      if (this.pendingBytes < total) break;
      const all = this.joined();
      const data = Buffer.from(all.subarray(RECORDIO_HEADER_BYTES, RECORDIO_HEADER_BYTES + length));
      const rest = all.subarray(total);
      this.pending = rest.length > 0 ? [rest] : [];
      this.pendingBytes = rest.length;
      this.offset += total;
      this.frame = undefined;
      if (cflag === CFLAG_WHOLE) records.push(data);
      else if (cflag === CFLAG_FIRST) this.parts = [data];
      else this.parts!.push(data);
      if (cflag === CFLAG_LAST) {
        records.push(Buffer.concat(this.parts!));
        this.parts = undefined;
      }
    }
    return records;
  }

  /** Throws RecordIOError when the input ended inside a frame or a split record. */
  end(): void {
    if (this.pendingBytes > 0) {
      throw new RecordIOError(`truncated RecordIO input: ${this.pendingBytes} bytes of an incomplete frame at byte ${this.offset}`);
    }
    if (this.parts !== undefined) {
      throw new RecordIOError('truncated RecordIO input: a split record has no last part (cflag 3)');
    }
  }

  /** All pending bytes as one buffer (joins them once, then keeps the join). */
  private joined(): Buffer {
    if (this.pending.length > 1) this.pending = [Buffer.concat(this.pending, this.pendingBytes)];
    return this.pending[0]!;
  }

  private readHeader(buf: Buffer): { cflag: number; length: number; total: number } {
    const magic = buf.readUInt32LE(0);
    if (magic !== RECORDIO_MAGIC) {
      throw new RecordIOError(`bad RecordIO magic 0x${magic.toString(16).padStart(8, '0')} at byte ${this.offset} (expected 0xced7230a)`, {
        hint: 'The input is not RecordIO, or is out of step: read it from the start of a record',
      });
    }
    const lrecord = buf.readUInt32LE(4);
    const cflag = lrecord >>> 29;
    const length = lrecord & RECORDIO_MAX_LENGTH;
    if (cflag > CFLAG_LAST) throw new RecordIOError(`bad RecordIO cflag ${cflag} at byte ${this.offset}`);
    const inSplit = this.parts !== undefined;
    if ((cflag === CFLAG_WHOLE || cflag === CFLAG_FIRST) && inSplit) {
      throw new RecordIOError(`RecordIO record at byte ${this.offset} starts inside a split record (cflag ${cflag} before the cflag-3 part)`);
    }
    if ((cflag === CFLAG_MIDDLE || cflag === CFLAG_LAST) && !inSplit) {
      throw new RecordIOError(`RecordIO continuation frame (cflag ${cflag}) at byte ${this.offset} without a first part`);
    }
    return { cflag, length, total: RECORDIO_HEADER_BYTES + length + paddingFor(length).length };
  }
}

/** Decode a whole RecordIO byte string into its records. */
export function decodeRecordIO(input: Buffer): Buffer[] {
  const decoder = new RecordIODecoder();
  const records = decoder.push(input);
  decoder.end();
  return records;
}

/**
 * `chunks` without its first `count` RecordIO records (Pipe resume mid-object, resume.ts):
 * frame headers are read as they stream by (a header may straddle chunks), the frames of
 * the skipped records (a split record's cflag 1/2/3 frames count as one) are dropped,
 * and everything after the last of them is passed on as it came, unparsed. Throws
 * RecordIOError on a bad header, or when the input ends before `count` records.
 */
export async function* skipRecords(chunks: AsyncIterable<Buffer>, count: number): AsyncGenerator<Buffer> {
  let left = count;
  let header = Buffer.alloc(0); // the bytes of a header that straddles chunks
  let dropFrame = 0; // bytes of the current frame's data and padding still to drop
  let inSplit = false;
  let offset = 0; // input bytes seen, for error messages
  for await (let chunk of chunks) {
    while (left > 0 && chunk.length > 0) {
      if (dropFrame > 0) {
        const n = Math.min(dropFrame, chunk.length);
        dropFrame -= n;
        chunk = chunk.subarray(n);
        offset += n;
        if (dropFrame === 0 && !inSplit) left--;
        continue;
      }
      const need = RECORDIO_HEADER_BYTES - header.length;
      header = Buffer.concat([header, chunk.subarray(0, need)]);
      chunk = chunk.subarray(Math.min(need, chunk.length));
      if (header.length < RECORDIO_HEADER_BYTES) break;
      const at = offset;
      offset += RECORDIO_HEADER_BYTES;
      const magic = header.readUInt32LE(0);
      if (magic !== RECORDIO_MAGIC) {
        throw new RecordIOError(`cannot skip ${count} records to resume: bad RecordIO magic 0x${magic.toString(16).padStart(8, '0')} at byte ${at} of the object`, {
          hint: 'Resume with EPOCH:OBJECT (no record count) unless the objects are RecordIO files',
        });
      }
      const lrecord = header.readUInt32LE(4);
      header = Buffer.alloc(0);
      const cflag = lrecord >>> 29;
      const length = lrecord & RECORDIO_MAX_LENGTH;
      if (cflag > CFLAG_LAST || (cflag <= CFLAG_FIRST) === inSplit) throw new RecordIOError(`cannot skip ${count} records to resume: RecordIO frame with cflag ${cflag} out of place at byte ${at} of the object`);
      inSplit = cflag === CFLAG_FIRST || cflag === CFLAG_MIDDLE;
      dropFrame = length + paddingFor(length).length;
      if (dropFrame === 0 && !inSplit) left--;
    }
    if (left === 0 && chunk.length > 0) yield chunk;
  }
  if (left > 0) throw new RecordIOError(`cannot skip ${count} records to resume: the object holds only ${count - left} (resume point past its end)`, { hint: 'Resume at the next object: EPOCH:OBJECT+1' });
}
