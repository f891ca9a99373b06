/**
 * Turns "I need blocks i..j of this object" into ranged GETs through the block cache.
 *
 * Blocks already resident or in flight are shared (single-flight). Missing blocks
 * are grouped into runs of contiguous blocks that never cross a part boundary
 * (part p covers blocks [p * blocksPerPart, (p + 1) * blocksPerPart)), and each run
 * is one GET: a long read-ahead becomes parallel, part-aligned GETs of --part-size,
 * and a short read becomes one small GET.
 *
 * Two callers:
 *  - `demand()`, for a reader: always starts its GETs (the in-flight budget is
 *    charged but never refuses it);
 *  - `prefetch()`, for read-ahead: starts GETs only within the in-flight budget,
 *    and reports how far it got so the caller can resume later.
 * Read-ahead also stays within what the cache can keep unread (BlockCache.roomAhead,
 * AHEAD_SHARE of --cache-size): a prefetch the cache has no room for is refused like one
 * the budget refuses, and `onRoom()` tells the waiting prefetchers when either frees up.
 * A GET reads into a recycled buffer when the cache has a pool (the client is given
 * it as `into`); a reader's blocks are pinned through `pins` (see the block cache).
 * A sequential reader's GET shorter than a part (its window ramping up from FIRST_WINDOW,
 * or a first read fetching its own blocks) reads into a part-long slab, at its place in
 * the part, when the file goes on for at least one more whole part after the GET's own;
 * the short GETs of one part share that slab (BlockCache.fill). The pool reuses only slabs
 * of the same length, and a slab of the ramp's own length (0.5, 1.25, 2.25, 3.25 MiB...)
 * was never asked for again. Measured with 4 readers of 128 MiB on a new daemon: 31-40 MiB
 * of such slabs sat idle for the whole read, mapped for one GET each; a slab per short GET
 * instead mapped 16 part-long slabs for the first 30 MiB (BENCHMARKS.md "t11-ramp"). The
 * part's slab is then taken up by the reader's whole-part GETs.
 * A random reader's GETs keep slabs of their own length: the cache may keep their few
 * blocks for long, and a part-long slab behind each would hold far more memory than
 * the cache counts.
 * Each sequential read-ahead GET of one whole part reports its duration to `onPartTimed`
 * (the channel's shared read-ahead budget, ./ahead-share.ts, learns from it), unless the
 * client answered some of it locally (RangeOptions.onLocal: the disk tier).
 */
import { performance } from 'node:perf_hooks';
import type { ObjectClient, RangeOptions } from '../s3/object-client.js';
import { BadRangeReplyError } from '../errors.js';
import type { BlockCache, PrefetchKind } from '../cache/block-cache.js';
import type { Slab } from '../memory/buffer-pool.js';
import type { InflightBudget } from './inflight-budget.js';

/** An object version as the reader pinned it. */
export interface FileRef {
  key: string;
  etag: string;
  size: number;
}

export interface FetcherStats {
  gets: number;
  bytes: number;
}

export class BlockFetcher {
  readonly blockSize: number;
  readonly blocksPerPart: number;
  readonly stats: FetcherStats = { gets: 0, bytes: 0 };
  /** Readers' GETs (demand()) in flight now: the random fill gives way to them (./random-fill.ts). */
  demandGets = 0;
  /** Told the milliseconds each successful sequential read-ahead GET of a whole part took. */
  onPartTimed: ((ms: number) => void) | undefined;

  constructor(
    private readonly client: ObjectClient,
    readonly cache: BlockCache,
    readonly budget: InflightBudget,
    partSize: number,
  ) {
    this.blockSize = cache.blockSize;
    this.blocksPerPart = Math.max(1, Math.floor(partSize / this.blockSize));
  }

  /** Number of blocks of a file (0 for an empty file). */
  blockCount(file: FileRef): number {
    return Math.ceil(file.size / this.blockSize);
  }

  /** Whether every block of `file` is in the memory cache now (a non-empty file). */
  cachedWhole(file: FileRef): boolean {
    const n = this.blockCount(file);
    if (n === 0) return false;
    for (let i = 0; i < n; i++) if (!this.has(file, i)) return false;
    return true;
  }

  /**
   * A reader's blocks first..last (inclusive): each resident (a Buffer) or on its way
   * (a promise shared with any fetch already in flight). Counts cache hits and misses.
   * Pooled buffers behind the blocks get a reference pushed to `pins`; the caller must
   * unref each once it has copied the bytes out (or given up).
   */
  demand(file: FileRef, first: number, last: number, pins?: Slab[], ramp = false): Array<Buffer | Promise<Buffer>> {
    const out: Array<Buffer | Promise<Buffer>> = [];
    let runStart = -1;
    const flush = (endExclusive: number) => {
      if (runStart < 0) return;
      const promises = this.startRun(file, runStart, endExclusive - runStart, undefined, undefined, pins, ramp);
      for (let i = 0; i < promises.length; i++) out[runStart - first + i] = promises[i]!;
      runStart = -1;
    };
    for (let i = first; i <= last; i++) {
      const hit = this.cache.lookup({ key: file.key, etag: file.etag, index: i }, pins);
      if (hit !== undefined) {
        flush(i);
        out[i - first] = hit;
        continue;
      }
      if (runStart >= 0 && this.part(i) !== this.part(runStart)) flush(i);
      if (runStart < 0) runStart = i;
    }
    flush(last + 1);
    return out;
  }

  /**
   * Read-ahead of blocks first..last (inclusive) within the in-flight budget.
   * Returns the index of the first block not covered: last + 1 when every block is
   * now resident or in flight, less when the budget refused a GET.
   */
  prefetch(file: FileRef, first: number, last: number, kind: PrefetchKind): number {
    let i = first;
    while (i <= last) {
      if (this.has(file, i)) {
        i++;
        continue;
      }
      let j = i;
      while (j + 1 <= last && this.part(j + 1) === this.part(i) && !this.has(file, j + 1)) j++;
      const bytes = this.runBytes(file, i, j - i + 1);
      if (!this.cache.roomAhead(bytes)) return i;
      const release = this.budget.tryAcquire(bytes, kind);
      if (!release) return i;
      this.startRun(file, i, j - i + 1, kind, release, undefined, kind === 'sequential');
      i = j + 1;
    }
    return last + 1;
  }

  /**
   * One read-ahead GET, for callers that pace their own GETs (./random-fill.ts): from
   * block `first`, skips blocks resident or in flight, then fetches the run of missing
   * blocks that follows, ending before a block already present, at a part boundary,
   * after `maxBlocks` blocks, or at `last` (inclusive). Within the in-flight budget.
   * Returns `next`, where to resume (last + 1 when nothing from `first` on is missing),
   * the GET's `bytes`, and `done`, which settles with true/false (the GET succeeded /
   * failed) once it has;
   * no `done` means no GET was started: nothing was missing, or the budget refused it
   * (then `next` is the first missing block and `refused` is true).
   */
  prefetchOne(file: FileRef, first: number, last: number, maxBlocks: number, kind: PrefetchKind): { next: number; bytes?: number; done?: Promise<boolean>; refused?: boolean } {
    let i = first;
    while (i <= last && this.has(file, i)) i++;
    if (i > last) return { next: last + 1 };
    let j = i;
    while (j + 1 <= last && j + 1 - i < maxBlocks && this.part(j + 1) === this.part(i) && !this.has(file, j + 1)) j++;
    const bytes = this.runBytes(file, i, j - i + 1);
    const release = this.cache.roomAhead(bytes) ? this.budget.tryAcquire(bytes, kind) : undefined;
    if (!release) return { next: i, refused: true };
    const blocks = this.startRun(file, i, j - i + 1, kind, release);
    // Every block's promise settles with the one GET; the first stands for all.
    return { next: j + 1, bytes, done: blocks[0]!.then(() => true, () => false) };
  }

  /** Drops the blocks of `file` fetched ahead and never read (BlockCache.discardUnread); returns whether any was. */
  discardUnread(file: FileRef): boolean {
    let any = false;
    const n = this.blockCount(file);
    for (let i = 0; i < n; i++) if (this.cache.discardUnread(file.key, file.etag, i)) any = true;
    return any;
  }

  /** Calls `fn` when the in-flight budget releases bytes or the cache frees room ahead; returns the unsubscribe function. */
  onRoom(fn: () => void): () => void {
    const a = this.budget.onRelease(fn);
    const b = this.cache.onAheadFreed(fn);
    return () => { a(); b(); };
  }

  private has(file: FileRef, index: number): boolean {
    return this.cache.has({ key: file.key, etag: file.etag, index });
  }

  private part(index: number): number {
    return Math.floor(index / this.blocksPerPart);
  }

  private runBytes(file: FileRef, first: number, count: number): number {
    const start = first * this.blockSize;
    return Math.min(file.size, start + count * this.blockSize) - start;
  }

  private startRun(file: FileRef, first: number, count: number, kind: PrefetchKind | undefined, release?: () => void, pins?: Slab[], ramp = false): Promise<Buffer>[] {
    const start = first * this.blockSize;
    const end = start + this.runBytes(file, first, count);
    // A sequential reader's GET shorter than a part, in a file that goes on for at least one
    // more whole part: read into a part's slab (see the module comment).
    const partBytes = this.blocksPerPart * this.blockSize;
    const slabBytes = ramp && count < this.blocksPerPart && end - start === count * this.blockSize && file.size >= (this.part(first) + 2) * partBytes ? partBytes : undefined;
    const done = release ?? this.budget.acquireDemand(end - start);
    this.stats.gets++;
    this.stats.bytes += end - start;
    const timed = kind === 'sequential' && count === this.blocksPerPart && end - start === count * this.blockSize ? this.onPartTimed : undefined;
    const run = async (into?: Buffer, slab?: Slab): Promise<Buffer> => {
      const t0 = timed ? performance.now() : 0;
      let local = false;
      if (kind === undefined) this.demandGets++;
      try {
        const opts: RangeOptions = {};
        if (into) {
          opts.into = into;
          // hold: the disk tier writes the bytes from this buffer in the background, holding a reference instead of copying.
          if (slab) opts.hold = () => { slab.ref(); return () => slab.unref(); };
        }
        if (timed) opts.onLocal = () => { local = true; };
        const buf = await this.client.getRange(file.key, start, end, file.etag, into || timed ? opts : undefined);
        // The client's contract says exact length; check anyway, since a short block
        // would otherwise be cached and served as if it were the object's bytes.
        if (buf.length !== end - start) {
          throw new BadRangeReplyError(`GET ${file.key} bytes ${start}-${end - 1} returned ${buf.length} bytes, expected ${end - start}`);
        }
        if (timed && !local) timed(performance.now() - t0);
        return buf;
      } finally {
        if (kind === undefined) this.demandGets--;
        done();
      }
    };
    return this.cache.fill(file.key, file.etag, first, count, run, kind, { bytes: end - start, pins, slabBytes });
  }
}
