/**
 * The read cursor of one open file handle: classifies each read as sequential or
 * random, and reads ahead while the reader is sequential (after mountpoint-s3's
 * prefetch.rs and gcsfuse's read_type_classifier).
 *
 * Algorithm, per read [position, end):
 *  1. Classify. The first read of a handle is sequential when it starts at 0 (files
 *     are read from the start; a reader that opens and seeks is random-access).
 *     A random cursor turns sequential when a read starts exactly where the last
 *     one ended. A sequential cursor stays sequential while each read starts within
 *     SEEK_BACKWARD_TOLERANCE before, or SEEK_FORWARD_TOLERANCE after, the last
 *     read's end (or anywhere inside what it already requested ahead); any other
 *     seek makes it random and drops the window.
 *  2. Demand. The blocks covering [position, end) are looked up in the cache; the
 *     missing ones are fetched at once (never waiting on the in-flight budget).
 *  3. Read ahead, while sequential. The window starts at FIRST_WINDOW and doubles
 *     up to maxPrefetch each time a new batch is issued. A batch is issued when less
 *     than half a window is requested ahead of the reader, and covers up to
 *     end + window, as part-aligned parallel GETs within the in-flight budget; a
 *     batch the budget refuses is retried on the next read. Once the window is at
 *     least a part, a batch ends on a part boundary, so read-ahead GETs are whole
 *     parts: one GET length recurs, and its buffers are recycled (block cache pool).
 *     Random reads fetch only the blocks they touch: no read-ahead of the window kind.
 *     A random read of a small file asks the random fill (./random-fill.ts) to fetch the
 *     rest of the file in the background, after its own blocks' GET has started; the
 *     cursor holds the fill's ticket until close().
 *  4. Retire, while sequential: blocks more than SEEK_BACKWARD_TOLERANCE behind the
 *     read are dropped from the block cache (BlockCache.retire) once their whole GET is
 *     behind it. The kernel's page cache keeps what was read, and the recycled buffers
 *     carry the next parts, so a sequential reader needs about one window of memory.
 *     Random readers keep their blocks (they are what the cache is for).
 *  5. Copy the blocks' bytes into the caller's buffer. A read settles when its
 *     blocks do; a caller's AbortSignal settles it early (the shared GETs go on).
 *     The blocks' pooled buffers are pinned from lookup until the copy is done (or
 *     the read gave up), so they cannot be recycled under it.
 */
import type { Slab } from '../cache/buffer-pool.js';
import { AbortedError, BadRangeReplyError } from '../errors.js';
import type { BlockFetcher, FileRef } from './block-fetcher.js';
import type { FillTicket, RandomFill } from './random-fill.js';

const KiB = 1024;
const MiB = 1024 * KiB;

/**
 * First read-ahead window: 1 MiB + 128 KiB, as in mountpoint-s3. Small, so the first
 * GETs come back fast (time to first byte), yet larger than the kernel's default
 * 128 KiB readahead, so the kernel's next readahead requests are absorbed by it
 * instead of each waiting on its own GET.
 */
export const FIRST_WINDOW = MiB + 128 * KiB;

/**
 * How far behind the last read a read may start and still count as sequential.
 * FUSE answers several kernel readahead requests at once (max_background = 12 of
 * 128 KiB each, 1.5 MiB), and they can arrive out of order; 2 MiB covers that.
 */
export const SEEK_BACKWARD_TOLERANCE = 2 * MiB;

/**
 * How far past the last read's end a read may start and still count as sequential:
 * the same out-of-order readahead span, plus the gaps a reader leaves when the
 * kernel page cache answers some pages itself. A jump into bytes this cursor has
 * already requested ahead is always tolerated: those bytes are coming anyway.
 */
export const SEEK_FORWARD_TOLERANCE = 2 * MiB;

export interface ReadResult {
  bytes: number;
  /** True when the read had to wait for at least one block still being fetched. */
  waited: boolean;
}

export interface CursorStats {
  sequentialReads: number;
  randomReads: number;
}

export class ReadCursor {
  readonly stats: CursorStats = { sequentialReads: 0, randomReads: 0 };
  /** Current read-ahead window in bytes; 0 while the reader is random. */
  private window = 0;
  /** End of the last read; undefined before the first read. */
  private lastEnd: number | undefined;
  /** Blocks before this byte offset were requested ahead (or demanded) by this cursor. */
  private aheadTo = 0;
  /** Blocks before this index were offered to the cache's retire(). */
  private retiredTo = 0;
  /** This handle's hold on its file's random fill, once it has one. */
  private fillTicket: FillTicket | undefined;
  private closed = false;

  constructor(
    readonly file: FileRef,
    private readonly fetcher: BlockFetcher,
    private readonly maxPrefetch: number,
    /** Fills small files read at random (./random-fill.ts); absent: no fill. */
    private readonly randomFill?: RandomFill,
  ) {}

  /** The handle is closed: lets go of the random fill (its GETs in flight still land in the cache). Idempotent. */
  close(): void {
    this.closed = true;
    this.fillTicket?.release();
    this.fillTicket = undefined;
  }

  get currentWindow(): number {
    return this.window;
  }

  /** Reads up to `length` bytes at `position` into dst[0..); fewer only at end of file. */
  async read(dst: Buffer, length: number, position: number, signal?: AbortSignal): Promise<ReadResult> {
    const r = this.readNow(dst, length, position, signal);
    return typeof r === 'number' ? { bytes: r, waited: false } : r;
  }

  /**
   * read() without a promise when it need not wait: the byte count when every block was
   * in the cache (copied already), else a promise of the result once the blocks land.
   */
  readNow(dst: Buffer, length: number, position: number, signal?: AbortSignal): number | Promise<ReadResult> {
    const end = Math.min(this.file.size, position + Math.min(length, dst.length));
    if (!(position >= 0) || position >= end) return 0;
    const sequential = this.classify(position, end);
    const bs = this.fetcher.blockSize;
    const first = Math.floor(position / bs);
    const last = Math.floor((end - 1) / bs);
    // INVARIANT: every pooled buffer behind `blocks` is pinned until it is copied out (or the read gave up).
    const pins: Slab[] = [];
    let blocks: (Buffer | Promise<Buffer>)[];
    try {
      blocks = this.fetcher.demand(this.file, first, last, pins);
      if (sequential) this.readAhead(end);
      else {
        if (this.aheadTo < end) this.aheadTo = end;
        if (this.randomFill && !this.fillTicket && !this.closed) this.fillTicket = this.randomFill.request(this.file);
      }
    } catch (err) {
      unpin(pins);
      throw err;
    }
    if (blocks.every((b): b is Buffer => Buffer.isBuffer(b))) {
      try {
        return this.copyOut(blocks, dst, first, position, end, sequential);
      } finally {
        unpin(pins);
      }
    }
    return settleWithin(Promise.all(blocks), signal).then(
      (ready) => {
        try {
          return { bytes: this.copyOut(ready, dst, first, position, end, sequential), waited: true };
        } finally {
          unpin(pins);
        }
      },
      (err: unknown) => {
        unpin(pins);
        throw err;
      },
    );
  }

  /** Step 5: copies [position, end) out of the blocks from `first` on; returns the byte count. */
  private copyOut(ready: Buffer[], dst: Buffer, first: number, position: number, end: number, sequential: boolean): number {
    const bs = this.fetcher.blockSize;
    for (let i = 0; i < ready.length; i++) {
      const index = first + i;
      const data = ready[i]!;
      const blockStart = index * bs;
      const expected = Math.min(bs, this.file.size - blockStart);
      if (data.length !== expected) throw new BadRangeReplyError(`block ${index} of ${this.file.key} has ${data.length} bytes, expected ${expected}`);
      const from = Math.max(position, blockStart);
      const to = Math.min(end, blockStart + bs);
      data.copy(dst, from - position, from - blockStart, to - blockStart);
    }
    if (sequential) this.retireBehind(position);
    return end - position;
  }

  /** Updates the window for a read [position, end); returns whether it is sequential. */
  private classify(position: number, end: number): boolean {
    const last = this.lastEnd;
    this.lastEnd = end;
    let sequential: boolean;
    if (last === undefined) sequential = position === 0;
    else if (this.window === 0) sequential = position === last;
    else sequential = position >= last - SEEK_BACKWARD_TOLERANCE && position <= Math.max(last + SEEK_FORWARD_TOLERANCE, this.aheadTo);
    if (sequential) {
      this.stats.sequentialReads++;
      if (this.window === 0) {
        this.window = Math.min(FIRST_WINDOW, this.maxPrefetch);
        // Only blocks read in this sequential run are retired, never earlier random reads'.
        this.retiredTo = Math.max(this.retiredTo, Math.floor(position / this.fetcher.blockSize));
      }
    } else {
      this.stats.randomReads++;
      this.window = 0;
      this.aheadTo = end;
    }
    return sequential;
  }

  /** Step 4: offers the cache every block wholly before `position - SEEK_BACKWARD_TOLERANCE`. */
  private retireBehind(position: number): void {
    const before = Math.floor((position - SEEK_BACKWARD_TOLERANCE) / this.fetcher.blockSize);
    if (before <= this.retiredTo) return;
    for (let i = this.retiredTo; i < before; i++) this.fetcher.cache.retire(this.file.key, this.file.etag, i, before);
    this.retiredTo = before;
  }

  private readAhead(end: number): void {
    const size = this.file.size;
    if (this.aheadTo < end) this.aheadTo = end;
    // A window of a part or more ends on a part boundary: whole-part GETs (see step 3).
    const partSize = this.fetcher.blocksPerPart * this.fetcher.blockSize;
    let target = Math.min(size, end + this.window);
    if (this.window >= partSize) target = Math.min(size, Math.ceil(target / partSize) * partSize);
    if (target <= this.aheadTo) return;
    // Batch: wait until at least half a window is missing (or the rest of the file is short).
    if (target - this.aheadTo < this.window / 2 && target < size) return;
    const bs = this.fetcher.blockSize;
    const firstBlock = Math.floor(this.aheadTo / bs);
    const lastBlock = Math.floor((target - 1) / bs);
    const next = this.fetcher.prefetch(this.file, firstBlock, lastBlock, 'sequential');
    this.aheadTo = Math.max(this.aheadTo, Math.min(size, next * bs));
    if (next > lastBlock) this.window = Math.min(this.window * 2, this.maxPrefetch);
  }
}

function unpin(pins: Slab[]): void {
  for (const p of pins) p.unref();
}

/** Resolves or rejects with `p`, or rejects with AbortedError once `signal` aborts. */
function settleWithin<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return p;
  if (signal.aborted) return Promise.reject(new AbortedError('read aborted', { cause: signal.reason }));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new AbortedError('read aborted', { cause: signal.reason }));
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => { signal.removeEventListener('abort', onAbort); resolve(v); },
      (e: unknown) => { signal.removeEventListener('abort', onAbort); reject(e); },
    );
  });
}
