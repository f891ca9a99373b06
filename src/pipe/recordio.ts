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
 * (decompressed objects) holds data until the record ends or it must split.
 * The decoder (`RecordIODecoder`, `decodeRecordIO`) is incremental and rejects
 * bad magic, bad flags and truncated input with RecordIOError.
 */
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

/**
 * Frame a record whose length is known only at its end (a decompressed object).
 * Data is held until the record ends, then written as one cflag-0 frame; if more
 * than `holdLimit` bytes arrive first (at most RECORDIO_SPLIT_LENGTH, rounded down
 * to a multiple of 4), the held bytes go out as a cflag-1 frame and the rest
 * follows in cflag-2 frames and a final cflag-3 frame. Memory: at most about
 * `holdLimit` plus one chunk.
 */
export async function* frameUnknownLength(chunks: AsyncIterable<Buffer>, holdLimit = RECORDIO_SPLIT_LENGTH): AsyncGenerator<Buffer> {
  const limit = Math.max(4, Math.min(RECORDIO_SPLIT_LENGTH, holdLimit - (holdLimit % 4)));
  let held: Buffer[] = [];
  let heldBytes = 0;
  let split = false;
  const take = (n: number): Buffer => {
    const all = held.length === 1 ? held[0]! : Buffer.concat(held, heldBytes);
    const out = all.subarray(0, n);
    const rest = all.subarray(n);
    held = rest.length > 0 ? [rest] : [];
    heldBytes = rest.length;
    return out;
  };
  for await (const chunk of chunks) {
    if (chunk.length === 0) continue;
    held.push(chunk);
    heldBytes += chunk.length;
    // Strictly more than the limit: exactly `limit` bytes may still be the whole record.
    while (heldBytes > limit) {
      const data = take(limit);
      yield encodeHeader(split ? CFLAG_MIDDLE : CFLAG_FIRST, data.length);
      yield data;
      split = true;
    }
  }
  const data = take(heldBytes);
  yield encodeHeader(split ? CFLAG_LAST : CFLAG_WHOLE, data.length);
  if (data.length > 0) yield data;
  const pad = paddingFor(data.length);
  if (pad.length > 0) yield pad;
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
