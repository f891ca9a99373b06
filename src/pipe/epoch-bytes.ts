/**
 * The bytes of one epoch of a Pipe channel, in order: each item's parts, taken
 * from the read-ahead, through Gzip decompression (objects only, when the channel
 * asks for it) and RecordIO framing (when asked), concatenated. A part comes as
 * the one buffer its GET landed in (readahead.ts) and goes on as it is (RecordIO
 * hands on slices of it); once the writer has written it, it is released for reuse.
 *
 * Framing streams: an object's length is known from its listing, so its header
 * goes out before its first byte. A decompressed object's length is known only at
 * its end, so it is held (up to `recordHoldLimit` bytes in memory, the rest in a
 * spill file under `spillDir`) and goes out as one record; only a record past the
 * format's 2^29-byte limit is split into cflag 1/2/3 frames (see recordio.ts). Inline items are written as they are, framed
 * when RecordIO, never decompressed. An empty object decompresses to nothing
 * (zero bytes are not a gzip stream, but they plainly hold no data).
 * A resumed epoch may leave out the first records of its first item (skipRecordsOfFirst):
 * the item's bytes, which are RecordIO themselves, are parsed up to there (recordio.ts).
 */
import { pipeline, Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { DecompressionError, SluiceError } from '../errors.js';
import type { PipeItem, Readahead } from './readahead.js';
import { frameKnownLength, frameUnknownLength, skipRecords } from './recordio.js';

export type RecordWrapper = 'None' | 'RecordIO';
export type Compression = 'None' | 'Gzip';

export interface EpochBytesOptions {
  recordWrapper: RecordWrapper;
  compression: Compression;
  /** Most bytes of one decompressed record held in memory; the rest spills to disk (RecordIO + Gzip only). */
  recordHoldLimit: number;
  /** Folder of spill files (default: the OS temp folder). */
  spillDir?: string;
  /** Bucket of object items that carry no client of their own (for error messages). */
  bucket: string;
  /** Called when an item's last byte has been handed on. */
  onItemDone?(index: number): void;
  /**
   * Resolves once every byte handed on so far has been consumed for good (written to the
   * pipe). When given, a part's buffer is released for reuse after it (Part.release),
   * without waiting for it here: the next part is handed on while this one is written.
   */
  afterWritten?(): Promise<void>;
  /**
   * RecordIO records of the first item to leave out (Pipe resume mid-object, resume.ts): its
   * bytes (decompressed) are RecordIO already, so recordWrapper must be None.
   */
  skipRecordsOfFirst?: number;
}

/** A short, loggable name for an item (never its bytes). */
export function describeItem(item: PipeItem, index: number, bucket: string): string {
  return item.kind === 'object' ? `s3://${item.client?.bucket ?? bucket}/${item.info.key}` : `inline item #${index}`;
}

export async function* epochBytes(items: readonly PipeItem[], ra: Readahead, opts: EpochBytesOptions): AsyncGenerator<Buffer> {
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!;
    const size = item.kind === 'object' ? item.info.size : item.data.length;
    // A decompressor may hold a part's bytes after asking for the next: never recycle under it.
    let body: AsyncIterable<Buffer> = itemParts(ra, i, opts.compression === 'Gzip' ? undefined : opts.afterWritten);
    const decompress = opts.compression === 'Gzip' && item.kind === 'object';
    if (decompress) body = size === 0 ? drain(body) : gunzip(body, describeItem(item, i, opts.bucket));
    if (i === 0 && (opts.skipRecordsOfFirst ?? 0) > 0) {
      if (opts.recordWrapper !== 'None') throw new Error('skipRecordsOfFirst needs recordWrapper None: a wrapped object is one record');
      body = skipRecords(body, opts.skipRecordsOfFirst!);
    }
    if (opts.recordWrapper === 'RecordIO') {
      body = decompress ? frameUnknownLength(body, { holdLimit: opts.recordHoldLimit, ...(opts.spillDir !== undefined ? { spillDir: opts.spillDir } : {}) }) : frameKnownLength(body, size);
    }
    yield* body;
    opts.onItemDone?.(i);
  }
  const tail = await ra.take();
  if (tail !== undefined) throw new Error(`pipe read-ahead yielded a part of item ${tail.itemIndex} after the last item`);
}

/** The parts of item `index`, which must be next in the read-ahead. */
async function* itemParts(ra: Readahead, index: number, afterWritten?: () => Promise<void>): AsyncGenerator<Buffer> {
  for (;;) {
    const part = await ra.take();
    if (part === undefined || part.itemIndex !== index) {
      throw new Error(`pipe read-ahead out of step: expected item ${index}, got ${part === undefined ? 'the end' : `item ${part.itemIndex}`}`);
    }
    yield* part.chunks;
    // The consumer has queued every chunk of the part by now (it asked for the next one).
    if (afterWritten) void afterWritten().then(() => part.release());
    if (part.last) return;
  }
}

/** Consume `body` and yield nothing. */
async function* drain(body: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  for await (const _ of body) { /* empty object: its single part is empty */ }
}

/** Gunzip `body` (one or more concatenated gzip members); zlib errors become DecompressionError. */
async function* gunzip(body: AsyncIterable<Buffer>, what: string): AsyncGenerator<Buffer> {
  const z = createGunzip();
  pipeline(Readable.from(body, { objectMode: false }), z, () => { /* errors surface through the iteration below */ });
  try {
    for await (const chunk of z) yield chunk as Buffer;
  } catch (err) {
    if (err instanceof SluiceError) throw err;
    const e = err as NodeJS.ErrnoException;
    if (typeof e.code === 'string' && e.code.startsWith('Z_')) throw new DecompressionError(what, e.message, { cause: err });
    throw err;
  } finally {
    z.destroy();
  }
}
