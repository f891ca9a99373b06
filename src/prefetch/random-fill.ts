/**
 * Random fill: when a small file is read at random offsets, fetch the rest of it into the
 * block cache in the background, so that after one pass over the link every read is a
 * cache hit (what s3fs and rclone's full VFS cache do with their disk cache).
 *
 * Why: a random read that misses costs one GET, at least S3's time to first byte (~25 ms),
 * so N threads reading at random can never exceed N / 25 ms reads per second while each
 * read fetches only its own block. A file read at random is usually read all over (an
 * index, a memory-mapped array, an LMDB or HDF5 file, a shuffled record file); once it is
 * resident, reads cost memory copies only.
 *
 * Algorithm:
 *  - A read cursor that classifies a read as random (./read-cursor.ts) asks for a fill of
 *    its file (`request()`), and keeps asking at each random read until it holds a ticket.
 *    Only a file of at most `maxFileSize` bytes is filled (by default half of the
 *    block cache: see src/fs/core.ts); larger files keep fetching only the blocks read.
 *    Handles of the same file version share one fill.
 *  - Fills run one file after another, oldest first (finishing one file makes all its reads
 *    hits; spreading GETs over many files would make none of them resident sooner). A fill
 *    starts only while the files being filled add up to at most `maxFileSize` bytes, so
 *    fills together never push more than that out of the cache (LRU): the rest of the
 *    cache keeps everyone else's working set.
 *  - Each fill GET covers up to `getSize` bytes of blocks neither resident nor in flight
 *    (demand reads already fetched some), within the in-flight budget as prefetch of kind
 *    'random_fill'. At most `maxGets` fill GETs are in flight at once, over all files.
 *  - Low priority: demand reads never wait for the fill. They bypass the in-flight budget,
 *    and fill GETs take at most `maxGets` of the S3 client's connections (src/fs/core.ts
 *    keeps that at most half of --max-connections), so a demand GET finds a connection
 *    free. While readers' own GETs are in flight, the fill starts a GET only while its GETs
 *    and the readers' add up to less than `sharedGets` (one fill GET at least, so it goes
 *    on; those above it finish, and it tops up once the readers' GETs are done): fill bytes
 *    are received, copied and mapped into fresh pages by the same event loop, proxy and
 *    link as the readers' bytes, and 16 fill GETs in flight made four random readers wait
 *    behind them (decision 0033). A read of a block that a fill GET is fetching waits for that GET (single
 *    flight, as for any prefetch); `getSize` is kept small so that wait is about one GET.
 *  - Keeps: a handle holding a ticket does not retire the blocks it has read sequentially
 *    (a second pass of the same handle), nor does a later handle of a file whose fill
 *    completed and that is still whole in the cache (`keeps()`): retiring them would make
 *    the next pass fetch the file again.
 *  - Stops: when every ticket of a file is released (its handles closed), or on `close()`,
 *    no new GET starts (those in flight complete into the cache), and when a fill GET
 *    fails (the reads that need those blocks fetch them again and see the error).
 *
 * Memory: fill GETs are in-flight budget claims, and their blocks are cache blocks, so the
 * bound --cache-size + --max-inflight holds. Used and wasted bytes are counted by the block
 * cache under the kind 'random_fill'.
 */
import { fillFetchedBytes, fillFiles } from '../metrics/metrics.js';
import type { BlockFetcher, FileRef } from './block-fetcher.js';

export interface RandomFillOptions {
  /** Largest file filled, and the most bytes of files being filled at once; 0 disables. */
  maxFileSize: number;
  /** Fill GETs in flight at once, over all files (>= 1). */
  maxGets: number;
  /** Fill GETs plus readers' own GETs in flight at once, while any reader's GET is (the fill keeps one at least; >= 1; default no such bound). */
  sharedGets?: number;
  /** Bytes of one fill GET (rounded down to whole blocks, at least one). */
  getSize: number;
}

/** A handle's hold on a fill: release it when the handle closes. Idempotent. */
export interface FillTicket {
  release(): void;
}

export interface RandomFillStats {
  /** Fills started. */
  started: number;
  /** Fills whose GETs cover the whole file (all started). */
  completed: number;
  /** Fills stopped early (tickets released, a failed GET, or close()). */
  stopped: number;
  /** Fill GETs started, and their bytes. */
  gets: number;
  bytes: number;
}

interface Fill {
  file: FileRef;
  id: string;
  /** Next block index to look at. */
  next: number;
  /** Index of the file's last block. */
  last: number;
  /** Tickets not yet released. */
  holders: number;
}

/**
 * Files whose fill completed that are remembered (keeps()): 1024, far more than fit the cache at
 * once (each is at least a block, and the fill's files are usually large); the oldest is forgotten
 * first, and a forgotten file is only retired by a later sequential reader as any other file is.
 */
const FILLED_MEMORY = 1024;

export class RandomFill {
  readonly stats: RandomFillStats = { started: 0, completed: 0, stopped: 0, gets: 0, bytes: 0 };
  /** Fills with GETs left to start, oldest first. INVARIANT: activeBytes is the sum of their files' sizes. */
  private readonly fills = new Map<string, Fill>();
  /** Ids of files whose fill completed, oldest first (at most FILLED_MEMORY). */
  private readonly filled = new Set<string>();
  private activeBytes = 0;
  /** Fill GETs in flight, over all fills (including stopped ones). */
  private running = 0;
  /** The budget refused a GET: retry when it releases bytes. */
  private refused = false;
  private readonly blocksPerGet: number;
  private readonly sharedGets: number;
  private readonly unsubscribe: () => void;
  private closed = false;

  constructor(private readonly fetcher: BlockFetcher, private readonly opts: RandomFillOptions) {
    if (!(Number.isSafeInteger(opts.maxGets) && opts.maxGets >= 1)) throw new RangeError('random fill: maxGets must be a whole number >= 1');
    if (opts.sharedGets !== undefined && !(Number.isSafeInteger(opts.sharedGets) && opts.sharedGets >= 1)) throw new RangeError('random fill: sharedGets must be a whole number >= 1');
    this.sharedGets = opts.sharedGets ?? Infinity;
    this.blocksPerGet = Math.max(1, Math.floor(opts.getSize / fetcher.blockSize));
    this.unsubscribe = fetcher.onRoom(() => {
      if (this.refused) this.pump();
    });
  }

  /** Bytes of files whose fill is under way. */
  get fillingBytes(): number {
    return this.activeBytes;
  }

  /** Fill GETs in flight. */
  get inflightGets(): number {
    return this.running;
  }

  /**
   * A reader of `file` reads at random: starts (or joins) the file's fill. Returns the
   * handle's ticket, or undefined when the file is not filled now (too large, empty, the
   * fill is disabled or closed, or other fills take the room: ask again later).
   */
  request(file: FileRef): FillTicket | undefined {
    if (this.closed || file.size <= 0 || file.size > this.opts.maxFileSize) return undefined;
    const id = `${file.key}\0${file.etag}`;
    let f = this.fills.get(id);
    if (!f) {
      if (this.activeBytes + file.size > this.opts.maxFileSize) return undefined;
      f = { file, id, next: 0, last: this.fetcher.blockCount(file) - 1, holders: 0 };
      this.fills.set(id, f);
      this.activeBytes += file.size;
      this.stats.started++;
      fillFiles.inc({ outcome: 'started' });
    }
    f.holders++;
    const fill = f;
    let released = false;
    const ticket: FillTicket = {
      release: () => {
        if (released) return;
        released = true;
        fill.holders--;
        if (fill.holders === 0 && this.fills.get(fill.id) === fill) this.stop(fill);
      },
    };
    this.pump();
    return ticket;
  }

  /**
   * Whether a new handle of `file` should keep its blocks (no retirement by a sequential reader,
   * ./read-cursor.ts step 4): its fill completed and every block is still in the cache, so the
   * file is being read again and again. A file no longer whole is forgotten.
   */
  keeps(file: FileRef): boolean {
    const id = `${file.key}\0${file.etag}`;
    if (!this.filled.has(id)) return false;
    if (this.fetcher.cachedWhole(file)) return true;
    this.filled.delete(id);
    return false;
  }

  /** Stops every fill (GETs in flight complete into the cache). Idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.unsubscribe();
    for (const f of [...this.fills.values()]) this.stop(f);
  }

  /** Starts fill GETs, oldest fill first, while GET slots and the budget allow. */
  private pump(): void {
    this.refused = false;
    // While readers wait on GETs of their own, the fill keeps readers' and fill GETs together to sharedGets, one at least (module comment: Low priority).
    const demand = this.fetcher.demandGets;
    const limit = demand > 0 ? Math.max(1, Math.min(this.opts.maxGets, this.sharedGets - demand)) : this.opts.maxGets;
    while (!this.closed && this.running < limit) {
      const f = this.fills.values().next().value as Fill | undefined;
      if (!f) return;
      const r = this.fetcher.prefetchOne(f.file, f.next, f.last, this.blocksPerGet, 'random_fill');
      f.next = r.next;
      if (r.refused) {
        this.refused = true;
        return;
      }
      if (r.done) {
        this.stats.gets++;
        this.stats.bytes += r.bytes ?? 0;
        fillFetchedBytes.inc(r.bytes ?? 0);
        this.running++;
        void r.done.then((ok) => this.onDone(f, ok));
      }
      if (f.next > f.last) this.finish(f);
    }
  }

  private onDone(f: Fill, ok: boolean): void {
    this.running--;
    if (!ok && this.fills.get(f.id) === f) this.stop(f);
    this.pump();
  }

  /** Every GET of the fill has started (or its blocks were there already). */
  private finish(f: Fill): void {
    this.fills.delete(f.id);
    this.activeBytes -= f.file.size;
    this.stats.completed++;
    fillFiles.inc({ outcome: 'completed' });
    this.filled.delete(f.id);
    this.filled.add(f.id);
    if (this.filled.size > FILLED_MEMORY) this.filled.delete(this.filled.values().next().value as string);
  }

  private stop(f: Fill): void {
    this.fills.delete(f.id);
    this.activeBytes -= f.file.size;
    this.stats.stopped++;
    fillFiles.inc({ outcome: 'stopped' });
  }
}
