/**
 * The disk tier's whole-file readers: what DiskCache.openWhole() hands FastFile for a file
 * all of whose blocks are on disk, so that its reads are answered with no memory cache, no
 * prefetcher and no S3 client.
 *
 * Reads take few syscalls: a cache file's two fds stay open in this process (HANDLES_KEPT
 * objects, more while in use); a range of present blocks is one pread (entries: one small
 * pread of the sidecar). openWhole() is the whole-file fast path FastFile uses for a file
 * all of whose blocks are present: a ring of RING_WINDOWS buffers of WINDOW bytes, each
 * filled by one pread through the libuv pool and checked block by block (CRC) before any
 * byte of it is served, kept RING_AHEAD windows ahead of the reader and RING_BEHIND behind
 * (the kernel's readahead reads arrive out of order); a read whose window is in answers
 * synchronously, a copy with no promise, like a memory-cache hit. No memory cache, no
 * prefetcher, no S3 client (see WholeReader for the order rules and the measurements).
 * A file of one block (SMALL_FILE_MAX) takes openSmall() instead: read whole and checked
 * at open into a recycled buffer (SmallBuffers), its fds given back at once, every read a
 * copy. A folder of small files then costs per file two preads (entry, bytes), one CRC and
 * no allocation beyond a small reader object.
 *
 *
 * Invariants: no byte of a window is served before every block of it passed its CRC
 * (OpenFiles.verifyWindow); a ring slot is never given another window while a pread writes
 * into it; the reader's fds and buffers go back only after its last pread settled.
 */
import { read } from 'node:fs';
import { AbortedError } from '../errors.js';
import type { OpenFiles } from './tier-files.js';
import { DISK_BLOCK_SIZE, preadFullSync, type Handle, type WholeFile, type WholeStats } from './tier-layout.js';

/**
 * openWhole's window, its unit of read and verification: 1 MiB (4 blocks), one pread and 4
 * CRCs per 8 kernel reads of 128 KiB. Larger windows gained nothing measurable
 * (BENCHMARKS.md "Disk tier v2"); smaller ones cost a trip through the libuv pool per
 * fewer bytes.
 */
export const WINDOW = 4 * DISK_BLOCK_SIZE;
/**
 * Windows a reader keeps behind the furthest window it has been asked for, for reads
 * that arrive late. The kernel sends a FUSE file system at most max_background (12)
 * readahead requests at once, of 128 KiB each, and libfuse's threads hand them to us in
 * any order: a read can trail the furthest one by up to 12 x 128 KiB = 1.5 MiB, whatever
 * the readahead size. 2 windows cover that; a read further behind is still served (alone,
 * one pread of its blocks), just not from the ring.
 */
export const RING_BEHIND = 2;
/**
 * Windows read ahead of the furthest one asked for: 5 MiB. At 1 GB/s a window lasts ~1 ms,
 * and a 1 MiB pread through the pool takes 0.1-0.3 ms from the page cache and ~0.5-1 ms
 * from NVMe, so five in hand keep a sequential reader from ever waiting on the disk, and
 * all four pool threads can be busy at once when a stream starts.
 */
export const RING_AHEAD = 5;
/** A large file's ring: behind + the current window + ahead = 8 windows, 8 MiB. */
export const RING_WINDOWS = RING_BEHIND + 1 + RING_AHEAD;
/** The smallest ring worth having when the budget is short: 1 window ahead. Below that the file is read the usual way. */
export const RING_MIN = RING_BEHIND + 2;
/**
 * Window buffers of all openWhole() files together (in use and kept for reuse): 64 MiB,
 * 8 large files read at full ring at once (then rings of RING_MIN, 16 files); past it a
 * file is read the usual way (memory cache, from the tier block by block).
 */
export const WHOLE_BUFFER_BYTES = 64 * 1024 * 1024;
/**
 * Idle window buffers kept for the next large file (two rings): a new buffer costs a page
 * fault per 4 KiB on first touch, ~0.1 CPU s per GB of new buffer on this VM, which a
 * reader opening file after file would pay per byte read. Beyond this they go to the GC.
 */
export const WINDOW_POOL_KEEP = 2 * RING_WINDOWS;
/**
 * A window this small is read synchronously: a page-cache-hot 256 KiB pread takes ~20 us
 * on the event loop, less than a trip through the libuv pool and a promise. Larger
 * windows go through the pool, read ahead of the reader.
 */
const SYNC_READ_MAX = DISK_BLOCK_SIZE;
/**
 * openWhole's small-file branch (openSmall): a file of at most one block is read whole at
 * open, synchronously (one pread of at most SYNC_READ_MAX, its one CRC), into a pooled
 * buffer, and its reads are copies from it: no window, no fd held while it is open.
 */
export const SMALL_FILE_MAX = DISK_BLOCK_SIZE;
/**
 * Buffers of small files open at once, in use and kept for reuse together: 16 MiB (256
 * files of 40 KB, 64 of one block). Past it a file is read the usual way.
 */
export const SMALL_BUFFER_BYTES = 16 * 1024 * 1024;
/** Smallest pooled buffer (a page); classes double up to SMALL_FILE_MAX, so a file wastes less than half its buffer. */
const SMALL_MIN_BUFFER = 4096;

/** One window of a WholeReader: the bytes of window `win` (-1: none), once read and verified. */
interface RingSlot {
  win: number;
  readonly buf: Buffer;
  /** A pread is writing into buf (it must not be given another window until it is done). */
  filling: boolean;
  /** Every block of the window passed its CRC (meaningful once !filling). */
  ok: boolean;
  /** Reads waiting for the fill in flight. */
  waiters: (() => void)[];
}

/** Reads until `bytes` are in buf or the file ends, through the libuv pool; no promise. */
function preadWindow(fd: number, buf: Buffer, bytes: number, pos: number, cb: (err: Error | null, got: number) => void, done = 0): void {
  read(fd, buf, done, bytes - done, pos + done, (err, n) => {
    if (err) cb(err, done);
    else if (n === 0 || done + n >= bytes) cb(null, done + n);
    else preadWindow(fd, buf, bytes, pos, cb, done + n);
  });
}

/**
 * openWhole()'s reader. The file is cut into windows of `windowBytes` (block-aligned);
 * window w lives in slot w % K of a ring of K buffers (K = 1 for a file of one window).
 * A window is read with one pread and every block of it checked against its CRC before
 * any byte of it is served; from then on reads inside it are copies, answered
 * synchronously (a number, no promise). Verified bytes stay in memory, so a block that
 * goes bad on disk later is caught when it is next read from disk, never served.
 *
 * Order: the kernel's readahead reaches us as up to 12 reads of 128 KiB at once, in any
 * order (libfuse's threads race). The reader follows one stream: `hi`, the furthest
 * window asked for. A read from a ring behind it to RING_AHEAD + 1 past it continues the
 * stream (a later hi moves it on); any other is a jump, which starts a new stream there.
 * The live span is [hi - RING_BEHIND, hi + ahead] (ahead = RING_AHEAD for a full ring).
 * Each time hi moves on, windows hi + 1 .. hi + ahead are read ahead through the pool (a
 * slot is reused only for a window outside the live span, and never while a pread writes
 * into it), so a sequential reader finds its window ready. A stream that
 * starts mid-file reads ahead only once it has moved on by a window (a random reader
 * costs one window per read, not six). A read whose window is being read waits for it
 * (a promise); a read whose slot holds a window still live (it lags more than
 * RING_BEHIND) is served alone: one pread of its blocks, verified, into a buffer of its own.
 * Windows no larger than SYNC_READ_MAX are read synchronously, so a small file is
 * answered without a promise even on its first read.
 */
export class WholeReader implements WholeFile {
  readonly stats: WholeStats = { reads: 0, bytes: 0, waited: 0, strays: 0, preadBytes: 0 };
  private readonly ring: RingSlot[];
  private readonly lastWin: number;
  /** Windows read ahead of hi: RING_AHEAD for a full ring. */
  private readonly ahead: number;
  /** The stream: its furthest window, and the window it started at. */
  private hi = -1;
  private start = 0;
  /** Preads in flight: the fds and buffers go back after the last one settles. */
  private inflight = 0;
  private failed = false;
  private closed = false;
  private released = false;

  constructor(
    private readonly files: OpenFiles, private readonly h: Handle, private readonly ents: Buffer,
    private readonly size: number, private readonly windowBytes: number, bufs: Buffer[], private readonly onClose: (stats: WholeStats) => void,
  ) {
    this.ring = bufs.map((buf) => ({ win: -1, buf, filling: false, ok: false, waiters: [] }));
    this.lastWin = Math.ceil(size / windowBytes) - 1;
    // A ring that holds the whole file reads all of it ahead; a smaller one keeps RING_BEHIND windows for late reads.
    this.ahead = bufs.length > this.lastWin ? this.lastWin : bufs.length - 1 - RING_BEHIND;
  }

  read(dst: Buffer, length: number, position: number, signal?: AbortSignal): number | Promise<number> {
    if (this.failed || this.closed) return -1;
    const n = Math.max(0, Math.min(length, this.size - position));
    if (n === 0) return 0;
    const W = this.windowBytes;
    const w = Math.floor(position / W);
    const s = this.ring[w % this.ring.length]!;
    const moved = w !== this.hi && this.follow(w);
    // Its own window first (before any read-ahead queues behind it in the pool).
    if (s.win !== w && !s.filling && !this.live(s.win)) this.fill(s, w);
    if (moved) this.readAhead();
    if (s.win !== w || s.filling) return this.readSlow(dst, n, position, signal);
    if (!s.ok) return this.fail();
    const off = position - w * W;
    const inWin = Math.min(n, W - off);
    s.buf.copy(dst, 0, off, off + inWin);
    if (inWin < n) {
      // Across a window's end (a read larger than, or not aligned to, the kernel's 128 KiB).
      const rest = this.read(dst.subarray(inWin), n - inWin, position + inWin, signal);
      if (typeof rest === 'number') return rest < 0 ? rest : inWin + rest;
      return rest.then((r) => (r < 0 ? r : inWin + r));
    }
    this.stats.reads++;
    this.stats.bytes += n;
    return n;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    // A pread still in flight writes into its buffer: give the fds and buffers back once it settles.
    if (this.inflight === 0) this.release();
  }

  /**
   * Moves the stream to window w (a read of a window other than hi); true when hi moved on
   * and read-ahead is due. Up to a ring behind and RING_AHEAD + 1 ahead is the same stream
   * (late reads, the kernel's readahead running ahead); anything else is a jump.
   */
  private follow(w: number): boolean {
    if (this.hi >= 0 && w >= this.hi - this.ring.length && w <= this.hi + RING_AHEAD + 1) {
      if (w < this.hi) return false;
      this.hi = w;
      return true;
    }
    this.hi = w;
    this.start = w;
    return w === 0; // a file read from its start is read through: read ahead at once
  }

  /** Whether window x is still wanted by the stream (its slot must not be given to another window). */
  private live(x: number): boolean {
    return x >= 0 && x >= this.hi - RING_BEHIND && x <= this.hi + this.ahead;
  }

  /** Starts reading windows hi + 1 .. hi + ahead that are neither read nor being read. */
  private readAhead(): void {
    if (this.hi === this.start && this.start !== 0) return;
    const K = this.ring.length;
    const last = Math.min(this.lastWin, this.hi + this.ahead);
    for (let t = this.hi + 1; t <= last; t++) {
      const s = this.ring[t % K]!;
      if (s.win !== t && !s.filling && !this.live(s.win)) this.fill(s, t);
    }
  }

  /** Reads window x into slot s: synchronously when small, else through the pool (s.filling until verified). */
  private fill(s: RingSlot, x: number): void {
    const B = this.files.blockSize;
    const at = x * this.windowBytes;
    const bytes = Math.min(this.windowBytes, this.size - at);
    const first = at / B;
    const count = Math.ceil(bytes / B);
    s.win = x;
    s.ok = false;
    this.stats.preadBytes += bytes;
    if (bytes <= SYNC_READ_MAX) {
      try {
        s.ok = this.files.verifyWindow(this.h, this.ents, first, count, s.buf, preadFullSync(this.h.data, s.buf.subarray(0, bytes), at), this.size);
      } catch {
        s.ok = false;
      }
      return;
    }
    s.filling = true;
    this.inflight++;
    preadWindow(this.h.data, s.buf, bytes, at, (err, got) => {
      this.inflight--;
      s.filling = false;
      s.ok = !err && !this.closed && this.files.verifyWindow(this.h, this.ents, first, count, s.buf, got, this.size);
      if (this.closed && this.inflight === 0) this.release();
      const waiters = s.waiters;
      if (waiters.length > 0) {
        s.waiters = [];
        for (const wake of waiters) wake();
      }
    });
  }

  /**
   * A read whose window is not ready: waits for it, or is served alone when its slot holds a
   * window still live. Once `signal` fires it rejects with AbortedError and copies nothing more
   * into dst (issue 43: the caller has answered and may reuse dst); it is checked after each wait.
   */
  private async readSlow(dst: Buffer, n: number, position: number, signal: AbortSignal | undefined): Promise<number> {
    const W = this.windowBytes;
    let waited = false;
    let done = 0;
    while (done < n) {
      if (signal?.aborted) throw new AbortedError('read aborted', { cause: signal.reason });
      if (this.failed || this.closed) return -1;
      const at = position + done;
      const x = Math.floor(at / W);
      const take = Math.min(n - done, (x + 1) * W - at);
      const s = this.ring[x % this.ring.length]!;
      if (s.win === x && !s.filling) {
        if (!s.ok) return this.fail();
        s.buf.copy(dst, done, at - x * W, at - x * W + take);
        done += take;
        continue;
      }
      // Wait (once) for its window: being read, or read now into a slot nobody needs.
      if (!waited && (s.win === x || (!s.filling && !this.live(s.win)))) {
        if (s.win !== x) this.fill(s, x);
        if (s.filling) {
          waited = true;
          await new Promise<void>((wake) => s.waiters.push(wake));
        }
        continue;
      }
      const r = await this.readAlone(dst.subarray(done, done + take), at, signal);
      if (r < 0) return r;
      done += take;
    }
    if (waited) this.stats.waited++;
    this.stats.reads++;
    this.stats.bytes += n;
    return n;
  }

  /** Serves dst.length bytes at `at` outside the ring: one pread of the blocks holding them, verified, into a buffer of its own (copied to dst unless `signal` fired). */
  private readAlone(dst: Buffer, at: number, signal: AbortSignal | undefined): Promise<number> {
    const B = this.files.blockSize;
    const first = Math.floor(at / B);
    const from = first * B;
    const bytes = Math.min(this.size, Math.ceil((at + dst.length) / B) * B) - from;
    const buf = Buffer.allocUnsafe(bytes);
    this.stats.strays++;
    this.stats.preadBytes += bytes;
    this.inflight++;
    return new Promise((resolve, reject) => preadWindow(this.h.data, buf, bytes, from, (err, got) => {
      this.inflight--;
      const ok = !err && !this.closed && this.files.verifyWindow(this.h, this.ents, first, Math.ceil(bytes / B), buf, got, this.size);
      if (this.closed && this.inflight === 0) this.release();
      if (!ok) return resolve(this.closed ? -1 : this.fail());
      if (signal?.aborted) return reject(new AbortedError('read aborted', { cause: signal.reason }));
      buf.copy(dst, 0, at - from, at - from + dst.length);
      resolve(dst.length);
    }));
  }

  /** A block failed its check: from now on -1 (the caller reads the usual way), and the fds and buffers go back. */
  private fail(): number {
    this.failed = true;
    this.close();
    return -1;
  }

  private release(): void {
    if (this.released) return;
    this.released = true;
    this.onClose(this.stats);
  }
}

/** openSmall()'s reader: the verified bytes of the whole file, in a pooled buffer; every read is a copy. */
export class SmallFile implements WholeFile {
  private closed = false;

  constructor(private readonly buf: Buffer, private readonly size: number, private readonly pool: SmallBuffers) {}

  get bytes(): Buffer | undefined {
    if (this.closed) return undefined;
    return this.size === this.buf.length ? this.buf : this.buf.subarray(0, this.size);
  }

  read(dst: Buffer, length: number, position: number): number {
    if (this.closed) return -1;
    const n = Math.max(0, Math.min(length, this.size - position));
    if (n > 0) this.buf.copy(dst, 0, position, position + n);
    return n;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.pool.give(this.buf);
  }
}

/**
 * Buffers for openSmall(), in classes of powers of two from SMALL_MIN_BUFFER to
 * SMALL_FILE_MAX, recycled: a folder of small files read epoch after epoch allocates a
 * few buffers once, not one per open (fresh memory per open costs page faults, and
 * V8 collects garbage for the external memory). Buffers in use and kept free together
 * stay within `maxBytes`; when a class has none free and the bound is reached, free
 * buffers of other classes are let go first.
 */
export class SmallBuffers {
  private readonly free: Buffer[][] = [];
  /** Bytes of buffers in use and free. */
  private bytes = 0;
  private freeBytes = 0;

  constructor(private readonly maxBytes: number) {}

  /** A buffer of at least `size` bytes (size <= SMALL_FILE_MAX), or undefined when the bound is reached. */
  take(size: number): Buffer | undefined {
    let cls = 0;
    while (SMALL_MIN_BUFFER << cls < size) cls++;
    const got = this.free[cls]?.pop();
    if (got) {
      this.freeBytes -= got.length;
      return got;
    }
    const len = SMALL_MIN_BUFFER << cls;
    for (let c = this.free.length - 1; c >= 0 && this.bytes + len > this.maxBytes; c--) {
      const list = this.free[c];
      while (list && list.length > 0 && this.bytes + len > this.maxBytes) {
        const b = list.pop()!;
        this.bytes -= b.length;
        this.freeBytes -= b.length;
      }
    }
    if (this.bytes + len > this.maxBytes) return undefined;
    this.bytes += len;
    return Buffer.allocUnsafeSlow(len);
  }

  /** Takes back a buffer from take(). */
  give(buf: Buffer): void {
    let cls = 0;
    while (SMALL_MIN_BUFFER << cls < buf.length) cls++;
    (this.free[cls] ??= []).push(buf);
    this.freeBytes += buf.length;
  }

  /** Bytes of buffers in use (for tests). */
  get inUse(): number {
    return this.bytes - this.freeBytes;
  }

  /** Bytes of buffers allocated, in use or free (for tests). */
  get allocated(): number {
    return this.bytes;
  }
}
