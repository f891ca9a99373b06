/**
 * The read cursor of one open file handle: classifies each read as sequential or
 * random, and reads ahead while the reader is sequential (after mountpoint-s3's
 * prefetch.rs and gcsfuse's read_type_classifier).
 *
 * Algorithm, per read [position, end):
 *  1. Classify. Reads reach the daemon out of order: libfuse answers the kernel's
 *     readahead requests on several worker threads, so a plain `cat` often shows a
 *     handle its read at 512 KiB before its read at 0. Classification therefore never
 *     depends on the order of reads within the reorder span R (the larger of the
 *     SEEK_*_TOLERANCE constants and the mount's kernel readahead window):
 *      - the first read of a handle is sequential when it starts at 0, random when
 *        it starts FIRST_READ_SPAN (or the kernel readahead window, if larger) or more
 *        into the file (a reader that opens and seeks is random-access), and
 *        undecided in between: it fetches only its own blocks
 *        (no read-ahead, no random fill), and the next read decides for both: within
 *        R of it, in either direction, the handle is sequential from the file's start
 *        (so the gap below the first read is fetched as whole parts too);
 *      - a sequential cursor stays sequential while each read starts anywhere inside
 *        what this sequential run has requested (from the run's first read to what it
 *        requested ahead), or no more than R behind or past the furthest end read so
 *        far (the frontier). A kernel request can reach the daemon after many later
 *        ones (measured: 2.6 MiB behind the frontier at read_ahead_kb 1024), so the
 *        run, not the last read, is the reference. Any other seek makes the cursor
 *        random and drops the window;
 *      - a random cursor turns sequential when a read starts exactly where one of the
 *        last RECENT_ENDS reads ended (contiguous, whatever came in between).
 *  2. Demand. The blocks covering [position, end) are looked up in the cache; the
 *     missing ones are fetched at once (never waiting on the in-flight budget).
 *  3. Read ahead, while sequential. The window starts at FIRST_WINDOW (or at the mount's
 *     kernel readahead window when that is larger: the kernel asks that far ahead of the
 *     reader anyway, and a smaller window would leave its requests to demand-fetch odd
 *     pieces of parts) and grows by RAMP_GROWTH each time a new batch is issued, up to
 *     maxPrefetch. A sequential read that starts past what was requested ahead is read
 *     ahead of (from where the requests stopped) before its own blocks are demanded, so it
 *     is served by the batch's GETs instead of cutting a part with a GET of its own. A
 *     handle given a carried window (a sibling file was just read sequentially to its end,
 *     see CARRY_MS in fs/core.ts) starts its first run from offset 0 at that window
 *     instead: a loader reading large files one after another keeps its parallel GETs from
 *     one file to the next, instead of ramping up from single small GETs at every file. A
 *     batch is issued when less than half a window is requested ahead of the reader, and
 *     covers up to end + window, as part-aligned parallel GETs within the in-flight
 *     budget; a batch the budget refuses is retried on the next read. After a whole batch,
 *     the next one waits until the frontier has reached a block it had not reached then
 *     (progressAt): the window grows with what the reader consumes, not with how many reads
 *     it makes. A reader of 1 byte at a time (fio's ttfb job: O_DIRECT, 1 byte, 10 loops,
 *     reaching offsets 0..9) used to grow the window at every read and have 75 MiB in
 *     flight for its 10 bytes, the GETs' CPU delaying the reads (cache hits) that issued
 *     them: now it has the first batch only. Reads of 128 KiB or more (the kernel's) cross
 *     a block every read or two, so a streaming reader ramps as before. Once the window is
 *     at least a part, a batch ends on a part boundary, so read-ahead GETs are whole
 *     parts: one GET length recurs, and its buffers are recycled (block cache pool).
 *     Random reads fetch only the blocks they touch: no read-ahead of the window kind. A
 *     random read of a file that fits the fill's threshold asks the random fill
 *     (./random-fill.ts) to fetch the rest of the file in the background, after its own
 *     blocks' GET has started; the cursor holds the fill's ticket until close(). A
 *     read that starts more than twice the reorder span behind the furthest read, on a
 *     block that is not fetched-ahead-and-unread (a second pass: fio's time_based, or an
 *     epoch loop on one open handle; it may still be sequential, inside the run; a late
 *     kernel readahead request lands on unread blocks instead) asks for the fill too.
 *  4. Retire, while sequential: blocks more than R behind the
 *     read are dropped from the block cache (BlockCache.retire) once their whole GET is
 *     behind it. The kernel's page cache keeps what was read, and the recycled buffers
 *     carry the next parts, so a sequential reader needs about one window of memory.
 *     A handle closed after its sequential run read the file to the end retires the
 *     blocks still behind it too (measured: 19-20 receive slabs first touched for four
 *     128 MiB files read in turn, 17 with this; each fresh 8 MiB slab costs ~18 ms here).
 *     Random readers keep their blocks (they are what the cache is for), and so does a
 *     handle that holds its file's random fill (it read at random, or came back to an
 *     earlier offset: a second pass, step 3), whether it reads sequentially or not: the
 *     fill makes the file whole in the cache so that later passes are served from memory,
 *     and retiring what one pass has passed would make the next pass fetch it again. A
 *     later handle of a file whose fill completed, still whole, keeps its blocks too.
 *  5. Copy the blocks' bytes into the caller's buffer. A read settles when its
 *     blocks do; a caller's AbortSignal settles it early (the shared GETs go on).
 *     The blocks' pooled buffers are pinned from lookup until the copy is done (or
 *     the read gave up), so they cannot be recycled under it. A caller that can send
 *     the bytes from where they are (the FUSE adapter: the kernel copies a reply from
 *     the block cache's buffer itself) passes a ReadView: a read inside one buffer is
 *     then not copied, and its pins pass to the caller until the bytes were sent.
 *  6. Lend, while sequential (lend()): between two reads that have work to do here, a
 *     sequential reader's reads are only copies out of resident blocks. So the cursor can
 *     hand out the resident blocks from its frontier on, with the largest read end it can
 *     do without seeing: one byte short of where its next batch is due (step 3's rule
 *     solved for the frontier, batchDueAt), or the end of the file once everything is
 *     requested. Reads answered from such a lend elsewhere (the FUSE thread,
 *     native/src/fuse_lend.c) are reported back with servedTo(end) before the cursor's
 *     next read, which moves the frontier as if the cursor had seen each of them: the
 *     classification, the batches and the retirement go on exactly as in steps 1-4, only
 *     decided at fewer reads. The lent blocks are pinned until the lend ends, and count as
 *     read (a hit; a prefetched one used) once servedTo reports reads that reached them, as
 *     a lookup counts a block at its first read: so a lent block no read reached stays
 *     unread, protected from retirement and in the ahead budget (block-cache.ts).
 */
import type { Slab } from '../memory/buffer-pool.js';
import { AbortedError, BadRangeReplyError } from '../errors.js';
import type { AheadShare } from './ahead-share.js';
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
 * Growth of the window per batch: 4 (it doubled until 2026-12-05; mountpoint-s3's
 * sequential_prefetch_multiplier is 8, from a smaller first request). While the window is
 * below a part, a batch is one GET on one connection, so each step costs a round trip at one
 * connection's speed while the reader waits; above it, each step adds parts in flight, and
 * until there are enough of them for the link the reader waits too. With doubling, a 128 MiB
 * file read from 0 spent its first ~150 ms in five steps before two parts were in flight and
 * reached a full 64 MiB window after seven; by 4 that takes three (1.125 -> 4.5 -> 18 -> 64
 * MiB). Measured on the s3-like shape (a one-off script, retired; docs/decisions/0013: 4 files of 128 MiB read in turn
 * by one `dd`, a new daemon per round, 10 rounds each, alternated): the first file 239 -> 291
 * MB/s, all four 358 -> 375 (docs/decisions/0013-shared-readahead-budget.md; 4 below a part and 2 above was in
 * between). The cost: the window gets large sooner, so a reader that stops early may leave up
 * to a window fetched and unread, and a new daemon maps its receive slabs sooner;
 * --max-prefetch bounds both.
 */
export const RAMP_GROWTH = 4;

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

/**
 * A handle's first read that starts this far into the file, or further, is random; nearer,
 * it may be the kernel's first readahead request overtaking the read at 0 (measured: at
 * 512 KiB), so the next read decides. The kernel's first readahead window is at most its
 * read_ahead_kb (the cursor is told it), and 1 MiB covers the kernel default's 128 KiB
 * and sluice's default 1024 KiB alike.
 */
export const FIRST_READ_SPAN = MiB;

/**
 * Ends of recent reads a random cursor remembers: a read contiguous with any of them
 * starts a sequential run. 8 covers the dozen or so kernel requests libfuse has in
 * flight at once, interleaved, while keeping the check a short scan.
 */
export const RECENT_ENDS = 8;

const SEQUENTIAL = 0;
const RANDOM = 1;
const UNDECIDED = 2;
type ReadKind = typeof SEQUENTIAL | typeof RANDOM | typeof UNDECIDED;

export interface ReadResult {
  bytes: number;
  /** True when the read had to wait for at least one block still being fetched. */
  waited: boolean;
}

/**
 * A read answered without a copy (readNow's `view`, step 5): the caller passes an empty one;
 * when the read's bytes lie in one buffer, `bytes` is set to them and `pins` to the pooled
 * buffers they stay valid by. The caller then owns those pins (unref each once the bytes were
 * used, e.g. written to the kernel) and keeps `bytes` referenced until then.
 */
export interface ReadView {
  bytes?: Buffer;
  pins?: Slab[];
}

/** Ends a view's hold: unrefs its pins (once; a view with none, or already released, is left as it is). */
export function releaseView(view: ReadView | undefined): void {
  if (!view?.pins) return;
  unpin(view.pins);
  view.pins = undefined;
}

/** Resident blocks lent to reads answered outside readNow() (step 6). */
export interface CursorLend {
  /** File offset of blocks[0]; the blocks are contiguous in the file from here. */
  start: number;
  /** The largest read end that may be answered from the lend without the cursor seeing the read. */
  stop: number;
  blocks: Buffer[];
  /** The blocks' pooled buffers, pinned: unref each once the lend has ended. */
  pins: Slab[];
}

export interface CursorStats {
  sequentialReads: number;
  randomReads: number;
}

export class ReadCursor {
  readonly stats: CursorStats = { sequentialReads: 0, randomReads: 0 };
  /** Current read-ahead window in bytes; 0 while the reader is random. */
  private window = 0;
  /** The window batches use: `window`, or less while the channel's shared budget caps it (step 3). */
  private eff = 0;
  /** Furthest end of a read in this sequential run (or of the last read while random); undefined before the first read. */
  private frontier: number | undefined;
  /** Ends of the last RECENT_ENDS reads, a ring (random cursors look for contiguity here). */
  private readonly recentEnds: number[] = [];
  private recentAt = 0;
  /** Reorder span R (see step 1), behind and ahead of the frontier. */
  private readonly spanBack: number;
  private readonly spanAhead: number;
  private readonly firstSpan: number;
  /** A run's first window: FIRST_WINDOW, or the kernel readahead window when larger (step 3). */
  private readonly firstWindow: number;
  /** Where the current sequential run started (its first read, or 0). */
  private runStart = 0;
  /** The first read started inside the reorder span, not at 0: the next read decides (step 1). */
  private undecided = false;
  /** Blocks before this byte offset were requested ahead (or demanded) by this cursor. */
  private aheadTo = 0;
  /** No new batch until the frontier reaches this: the first byte past the block the frontier was in at the last whole batch (step 3). */
  private progressAt = 0;
  /** Blocks before this index were offered to the cache's retire(). */
  private retiredTo = 0;
  /** This handle asked the channel's shared budget for a share (step 3): it goes on asking until it closes. */
  private sharing = false;
  /** Of the last lend's blocks (step 6), the first and last index no reported read has reached yet (none when next > last). */
  private lentNext = 0;
  private lentLast = -1;
  /** Window for the first sequential run from offset 0 (a carried window); 0 after use or when none. */
  private startWindow: number;
  /** This handle's hold on its file's random fill, once it has one. */
  private fillTicket: FillTicket | undefined;
  /** The last read started more than the reorder span behind the furthest read so far (step 3: a re-read). */
  private reread = false;
  /** The file was filled whole and still is (RandomFill.keeps): never retire its blocks (step 4). */
  private readonly keepWhole: boolean;
  private closed = false;

  constructor(
    readonly file: FileRef,
    private readonly fetcher: BlockFetcher,
    private readonly maxPrefetch: number,
    /** Fills small files read at random (./random-fill.ts); absent: no fill. */
    private readonly randomFill?: RandomFill,
    /** The mount's kernel readahead window in bytes (read_ahead_kb * 1024); widens the reorder span. */
    kernelReadahead = 0,
    /** A carried window (step 3): the first sequential run from offset 0 starts at it; 0: FIRST_WINDOW. */
    startWindow = 0,
    /** The channel's read-ahead budget shared by its sequential readers (./ahead-share.ts); absent: no cap. */
    private readonly share?: AheadShare,
  ) {
    this.startWindow = startWindow;
    this.keepWhole = randomFill?.keeps(file) ?? false;
    this.spanBack = Math.max(SEEK_BACKWARD_TOLERANCE, kernelReadahead);
    this.spanAhead = Math.max(SEEK_FORWARD_TOLERANCE, kernelReadahead);
    this.firstSpan = Math.max(FIRST_READ_SPAN, kernelReadahead);
    this.firstWindow = Math.max(FIRST_WINDOW, kernelReadahead);
  }

  /** The handle is closed: lets go of the random fill (its GETs in flight still land in the cache). Idempotent. */
  close(): void {
    this.closed = true;
    this.share?.leave(this);
    const filled = this.fillTicket !== undefined || this.keepWhole;
    this.fillTicket?.release();
    this.fillTicket = undefined;
    // A file kept whole by its fill stays whole for the next handle's pass (step 4).
    if (filled) return;
    // A sequential run that read its file to the end retires its last blocks too (step 4):
    // nothing behind the reader is read again through this handle, and left in the cache
    // they would hold their pooled buffers, so the next file's GETs would map fresh ones.
    if (this.window > 0 && this.frontier !== undefined && this.frontier >= this.file.size) this.retireBehind(this.file.size + this.spanBack);
  }

  get currentWindow(): number {
    return this.window;
  }

  /**
   * The window to carry to the next file (step 3): the current one when this handle is
   * still sequential and has read its file to the end, else 0. `read`: whether it read at all.
   */
  carry(): { window: number; read: boolean } {
    const read = this.frontier !== undefined;
    return { window: this.window > 0 && read && this.frontier! >= this.file.size ? this.window : 0, read };
  }

  /** Reads up to `length` bytes at `position` into dst[0..); fewer only at end of file. */
  async read(dst: Buffer, length: number, position: number, signal?: AbortSignal): Promise<ReadResult> {
    const r = this.readNow(dst, length, position, signal);
    return typeof r === 'number' ? { bytes: r, waited: false } : r;
  }

  /**
   * read() without a promise when it need not wait: the byte count when every block was
   * in the cache (copied already), else a promise of the result once the blocks land.
   * With `view`, a read whose bytes lie in one buffer is not copied: `view` gets that
   * buffer's bytes and the pins that keep them (step 5).
   */
  readNow(dst: Buffer, length: number, position: number, signal?: AbortSignal, view?: ReadView): number | Promise<ReadResult> {
    const end = Math.min(this.file.size, position + Math.min(length, dst.length));
    if (!(position >= 0) || position >= end) return 0;
    const kind = this.classify(position, end);
    const sequential = kind === SEQUENTIAL;
    const bs = this.fetcher.blockSize;
    const first = Math.floor(position / bs);
    const last = Math.floor((end - 1) / bs);
    // INVARIANT: every pooled buffer behind `blocks` is pinned until it is copied out (or the read gave up).
    const pins: Slab[] = [];
    let blocks: (Buffer | Promise<Buffer>)[];
    try {
      // A sequential read that starts past what was requested ahead (a kernel readahead
      // request overtook the window while it ramps up) is read ahead of first, from where
      // the requests stopped: it then finds its blocks in the batch's part-aligned GETs
      // instead of splitting a part with a GET of its own. Otherwise its own blocks are
      // demanded first, so the first byte comes back as fast as it can.
      const overtook = sequential && position > this.aheadTo;
      // Retire first (step 4): the buffers of parts already passed go back to the pool before
      // a batch asks it for the next parts', so they carry those instead of new memory.
      if (sequential) this.retireBehind(position);
      if (overtook) this.readAhead(position, this.frontier!);
      blocks = this.fetcher.demand(this.file, first, last, pins, kind !== RANDOM);
      if (sequential && !overtook) this.readAhead(position, this.frontier!);
      else if (kind === RANDOM) {
        if (this.aheadTo < end) this.aheadTo = end;
      }
      // A random read, or a sequential one back over what this handle has read (a second pass), asks for the fill (step 3).
      if ((kind === RANDOM || this.reread) && this.randomFill && !this.fillTicket && !this.closed) this.fillTicket = this.randomFill.request(this.file);
    } catch (err) {
      unpin(pins);
      throw err;
    }
    if (blocks.every((b): b is Buffer => Buffer.isBuffer(b))) {
      let kept = false;
      try {
        const n = this.copyOut(blocks, dst, first, position, end, view);
        if (view?.bytes) kept = keep(view, pins);
        return n;
      } finally {
        if (!kept) unpin(pins);
      }
    }
    return settleWithin(Promise.all(blocks), signal).then(
      (ready) => {
        let kept = false;
        try {
          const bytes = this.copyOut(ready, dst, first, position, end, view);
          if (view?.bytes) kept = keep(view, pins);
          return { bytes, waited: true };
        } finally {
          if (!kept) unpin(pins);
        }
      },
      (err: unknown) => {
        unpin(pins);
        throw err;
      },
    );
  }

  /**
   * Step 5: copies [position, end) out of the blocks from `first` on; returns the byte count.
   * With `view`, when the blocks are one run of one buffer (slices of one GET's), nothing is
   * copied: view.bytes is the read's span of that buffer, set once every block was checked
   * (readNow sets view.pins).
   */
  private copyOut(ready: Buffer[], dst: Buffer, first: number, position: number, end: number, view?: ReadView): number {
    const bs = this.fetcher.blockSize;
    let oneRun = view !== undefined;
    for (let i = 0; i < ready.length; i++) {
      const data = ready[i]!;
      const expected = Math.min(bs, this.file.size - (first + i) * bs);
      if (data.length !== expected) throw new BadRangeReplyError(`block ${first + i} of ${this.file.key} has ${data.length} bytes, expected ${expected}`);
      if (i > 0) {
        const prev = ready[i - 1]!;
        if (data.buffer !== prev.buffer || data.byteOffset !== prev.byteOffset + prev.length) oneRun = false;
      }
    }
    const skip = position - first * bs;
    if (oneRun) {
      const head = ready[0]!;
      view!.bytes = Buffer.from(head.buffer, head.byteOffset + skip, end - position);
      return end - position;
    }
    for (let i = 0; i < ready.length; i++) {
      const blockStart = (first + i) * bs;
      const from = Math.max(position, blockStart);
      const to = Math.min(end, blockStart + bs);
      ready[i]!.copy(dst, from - position, from - blockStart, to - blockStart);
    }
    return end - position;
  }

  /** Updates the window for a read [position, end); returns its kind (step 1). */
  private classify(position: number, end: number): ReadKind {
    const frontier = this.frontier;
    let sequential: boolean;
    let runStart = position;
    if (frontier === undefined) {
      if (position > 0 && position < this.firstSpan) {
        this.undecided = true;
        this.frontier = end;
        this.remember(end);
        return UNDECIDED;
      }
      sequential = position === 0;
    } else if (this.undecided) {
      this.undecided = false;
      sequential = position >= frontier - this.spanBack && position <= frontier + this.spanAhead;
      runStart = 0;
      // The first read is counted now, as what its successor showed it to be.
      if (sequential) this.stats.sequentialReads++;
      else this.stats.randomReads++;
    } else if (this.window === 0) {
      sequential = this.recentEnds.includes(position);
    } else {
      sequential = position >= Math.min(this.runStart, frontier - this.spanBack) && position <= Math.max(frontier + this.spanAhead, this.aheadTo);
    }
    this.remember(end);
    // Back more than twice the reorder span behind the furthest read, onto a block no read has
    // reached yet: bytes read before, read again. A straggler (a kernel readahead request that
    // libfuse hands over late, step 1) lands on blocks the window fetched ahead and nobody read;
    // the distance alone does not tell them apart: at read_ahead_kb 4096 the kernel keeps
    // several 4 MiB windows queued and stragglers came 12 MiB behind the frontier, and a fill
    // started by one in a first pass (fio seq_read on 1 GiB, decision 0033) competed with the
    // read-ahead, kept every block and fetched the passed ones again.
    this.reread = frontier !== undefined && position + 2 * this.spanBack < frontier
      && !this.fetcher.cache.unreadAhead(this.file.key, this.file.etag, Math.floor(position / this.fetcher.blockSize));
    if (sequential) {
      this.stats.sequentialReads++;
      if (this.window === 0) {
        this.window = Math.min(Math.max(this.firstWindow, runStart === 0 ? this.startWindow : 0), this.maxPrefetch);
        this.eff = this.window;
        this.startWindow = 0;
        this.frontier = Math.max(end, frontier ?? 0);
        this.runStart = runStart;
        // Read-ahead starts at the run's start; blocks already resident or in flight are skipped.
        if (runStart === 0) this.aheadTo = 0;
        this.progressAt = 0;
        // Only blocks read in this sequential run are retired, never earlier random reads'.
        this.retiredTo = Math.max(this.retiredTo, Math.floor(runStart / this.fetcher.blockSize));
      } else if (end > frontier!) {
        this.frontier = end;
      }
      return SEQUENTIAL;
    }
    this.stats.randomReads++;
    this.window = 0;
    this.frontier = end;
    this.aheadTo = end;
    return RANDOM;
  }

  private remember(end: number): void {
    this.recentEnds[this.recentAt] = end;
    this.recentAt = (this.recentAt + 1) % RECENT_ENDS;
  }

  /**
   * Step 6: the resident blocks from the block of the frontier on, up to `maxBytes` and no
   * further than where a read would have work to do here; undefined when every read must
   * come here (random, undecided, before the first read, closed) or nothing is resident.
   */
  lend(maxBytes: number): CursorLend | undefined {
    const frontier = this.frontier;
    if (this.closed || this.window === 0 || this.undecided || frontier === undefined) return undefined;
    const size = this.file.size;
    // A batch is due once the frontier reaches both batchDueAt() and progressAt (step 3).
    const due = this.aheadTo >= size ? size + 1 : Math.max(this.batchDueAt(), this.progressAt);
    const bs = this.fetcher.blockSize;
    const start = Math.floor(frontier / bs) * bs;
    const stop = Math.min(due - 1, size, start + maxBytes);
    if (stop <= frontier) return undefined;
    const pins: Slab[] = [];
    const blocks = this.fetcher.cache.residentRun(this.file.key, this.file.etag, start / bs, Math.floor((stop - 1) / bs), pins);
    if (blocks.length === 0) return undefined;
    this.lentNext = start / bs;
    this.lentLast = start / bs + blocks.length - 1;
    return { start, stop: Math.min(stop, start + blocks.length * bs), blocks, pins };
  }

  /** Step 6: reads answered from a lend reached file offset `end`: the lent blocks up to it count as read, and the frontier moves there (while sequential). */
  servedTo(end: number): void {
    // The lent blocks those reads reached count as read now (see step 6), each once.
    const upTo = Math.min(this.lentLast, Math.floor((end - 1) / this.fetcher.blockSize));
    if (end > 0 && upTo >= this.lentNext) {
      this.fetcher.cache.markRead(this.file.key, this.file.etag, this.lentNext, upTo);
      this.lentNext = upTo + 1;
    }
    if (this.window > 0 && this.frontier !== undefined && end > this.frontier) {
      this.frontier = Math.min(end, this.file.size);
      // Those reads passed the blocks behind them (step 4), as if each had been seen: retired now,
      // their buffers are free for the batch the next read may issue. The last read started up to
      // one read before `end`, so the span is counted from a whole span before it.
      this.retireBehind(this.frontier - this.spanBack);
    }
  }

  /**
   * Step 6: the smallest frontier at which readAhead() issues the run's next batch: its
   * target, the frontier + the window (rounded up to a part once the window is a part or
   * more), reaches half a window past aheadTo, or the end of the file. Call only while
   * aheadTo < the file's size.
   */
  private batchDueAt(): number {
    const w = this.eff;
    const reach = Math.min(this.aheadTo + w / 2, this.file.size);
    const partSize = this.fetcher.blocksPerPart * this.fetcher.blockSize;
    // ceil((e + w) / P) * P >= reach  <=>  e + w > (ceil(reach / P) - 1) * P
    if (w >= partSize) return Math.max(0, (Math.ceil(reach / partSize) - 1) * partSize - w + 1);
    return Math.max(0, Math.ceil(reach - w));
  }

  /** Step 4: offers the cache every block wholly before `position - R` (R: the reorder span). */
  private retireBehind(position: number): void {
    // A handle that holds its file's fill keeps every block: the file is read again (step 4).
    if (this.fillTicket || this.keepWhole) return;
    const before = Math.floor((position - this.spanBack) / this.fetcher.blockSize);
    if (before <= this.retiredTo) return;
    for (let i = this.retiredTo; i < before; i++) this.fetcher.cache.retire(this.file.key, this.file.etag, i, before);
    this.retiredTo = before;
  }

  /** Step 3 for a sequential read at `position`, the run's frontier at `end`. */
  private readAhead(position: number, end: number): void {
    const size = this.file.size;
    // A read that overlaps what was requested demands its own blocks (see readNow), so the
    // batch starts past it; one that overtook the requests leaves the gap to the batch.
    if (this.aheadTo < end && position <= this.aheadTo) this.aheadTo = end;
    // A window of a part or more ends on a part boundary: whole-part GETs (see step 3).
    const partSize = this.fetcher.blocksPerPart * this.fetcher.blockSize;
    // The window this batch may use: the cursor's own, within its share of the channel's budget.
    // A handle with no more to request than the smallest share (a small file) cannot be
    // capped, so it does not ask. A large file's reader asks to the end of its file, and
    // so stays counted until it closes: near its end it used to stop asking, fetch all the
    // rest of its file past its share, and leave the others' shares to grow while the
    // parts it still held were not free yet. 4 readers in step then held 152-160 MiB ahead
    // against a budget of 64-96 MiB, in new slabs (BENCHMARKS.md "t11-ramp").
    let cap = Infinity;
    if (this.share && (this.sharing || size - this.aheadTo > this.share.minShare)) {
      this.sharing = true;
      cap = this.share.limit(this);
    }
    if (this.window > cap) this.share!.wantMore();
    const w = (this.eff = Math.min(this.window, cap));
    // The reader has not reached a new block since the last whole batch (step 3).
    if (end < this.progressAt) return;
    let target = Math.min(size, end + w);
    if (w >= partSize) target = Math.min(size, Math.ceil(target / partSize) * partSize);
    if (target <= this.aheadTo) return;
    // Batch: wait until at least half a window is missing (or the rest of the file is short).
    if (target - this.aheadTo < w / 2 && target < size) return;
    const bs = this.fetcher.blockSize;
    const firstBlock = Math.floor(this.aheadTo / bs);
    const lastBlock = Math.floor((target - 1) / bs);
    const next = this.fetcher.prefetch(this.file, firstBlock, lastBlock, 'sequential');
    this.aheadTo = Math.max(this.aheadTo, Math.min(size, next * bs));
    if (next > lastBlock) {
      this.progressAt = (Math.floor((end - 1) / bs) + 1) * bs + 1;
      this.window = Math.min(this.window * RAMP_GROWTH, this.maxPrefetch);
      this.eff = Math.min(this.window, cap);
    }
  }
}

function unpin(pins: Slab[]): void {
  for (const p of pins) p.unref();
}

/** The read's pins go to its view: they are the view's caller's to unpin once its bytes are used. */
function keep(view: ReadView, pins: Slab[]): true {
  view.pins = pins;
  return true;
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
