/**
 * Ordered, parallel read-ahead of one epoch's items, so that the pipe never waits
 * on a single GET.
 *
 * The epoch is cut into parts: an object of size S becomes ceil(S / partSize)
 * ranged GETs (one GET without a range when it fits in one part, none when it is
 * empty); an inline item is one ready part. Parts are started strictly in pipe
 * order, as far ahead of the writer as two bounds allow:
 *   - bytes held (requested and not yet taken by the writer) <= maxInflightBytes,
 *     except that the next part always starts when nothing is held, so one part
 *     larger than the budget cannot stall the pipe;
 *   - GETs in flight <= maxRequests.
 * The byte bound ramps up: it starts at RAMP_START_PARTS parts and doubles with every
 * part the consumer had to wait for, up to maxInflightBytes. A consumer slower than S3
 * (the usual case: the training script reads slower than the link) never waits, so the
 * window stays at a few parts: fewer slabs to allocate and map, less memory held, the
 * same throughput. A consumer that waits is starved, and the window grows until it is not.
 * "Waits" is the consumer's to define (`starved`): a FIFO writer still holding a queued part
 * when it has to wait for the next one is not starved (its reader still has seconds of
 * data), and it is the usual case, because parts started together share the link and
 * finish together. Measured: counting every wait as starving let a 270 MB/s reader of a
 * 512 MiB object ramp the window to 120 MiB (15 slabs mapped, ~0.2 CPU s/GB); counting
 * only a writer that ran dry kept it at a few parts. A doubling must also pay: past the second,
 * the window doubles again only if the last doubling raised the rate at which parts were taken
 * by RAMP_GAIN (the first is free: one part's time to first byte says nothing of the link; the
 * second measures the rate the third is judged by); otherwise the link, not the window, is
 * the limit (a local or CPU-bound server, a saturated NIC) and more parts in flight would only
 * map more slabs. Measured (scripts/bulk-receive-bench.mjs, s3rver, a sha256sum reader at
 * ~150 MB/s, load ~5): the window went to 120 MiB (17 slabs of 8 MiB first touched, ~0.3 CPU s
 * on this VM, about a third of the daemon's CPU for a 512 MiB epoch) for no gain in MB/s.
 * A window's take rate is measured from the moment the parts held when it began have all been
 * taken, over at least a window's bytes: those parts were fetched under the window before, and
 * the new window's slabs are mapped in that span. The rate test alone judges the doubling just
 * made, never the next one, so it let a link that 5 parts fill take the window to 16
 * (test/pipe/readahead.ts). So before a doubling the GETs are asked too, as TCP Vegas asks
 * round-trip times: whole-part GETs started under the window in force must take on average no
 * more than 1 / RAMP_QUEUE_Q times the best average of an earlier window of the epoch. Longer,
 * and they already queue for a full link: twice the GETs would share it, for the same rate and
 * twice the slabs (BENCHMARKS.md "t11-pipe-ramp"). A doubling refused either way waits
 * RAMP_REPROBE_WINDOWS windows of bytes before it is tried again, so a link that gets faster
 * later in a long epoch is still used. Without the ramp, the first take() of an epoch
 * would start the whole window at once (16 parts of 8 MiB), every GET would share
 * the link, and the first part (which the reader waits for) would complete only
 * when about half the window had arrived: seconds of time to first byte.
 * take() hands parts back in the same order. Taking a part frees its bytes from the
 * budget, which starts the next parts. Small objects therefore download many at a
 * time, and a large object downloads as several ranges at once.
 *
 * A part is one ranged GET. With `recycleParts` it is offered a slab of a per-epoch
 * BufferPool (../memory/buffer-pool.ts, bounded by the byte window) as the stream's `into`:
 * the S3 client lands the body there straight from the socket (../s3/wire.ts) and yields
 * it as one buffer, and the writer gives the slab back (Part.release) once its bytes are in
 * the pipe, so it carries a later part. A client that ignores `into` yields chunks of its
 * own, kept as received (no copy). Measured before (4 x 64 MiB, 16 GETs at once): ~10.5
 * CPU s/GB with a fresh part buffer per part (a page fault per 4 KiB), ~8 with undici's
 * body chunks kept as received, ~5 with pooled getRange buffers; BENCHMARKS.md "Bulk
 * receive path (issue 11)" has the figures of this path. The pool's slabs come from the
 * addon's allocPrefaulted (native.ts), mapped in one call, their whole 2 MiB blocks in huge
 * pages (the kernel's copies into and out of them cost less: native/binding.c). A malloc'd slab instead
 * faults once per 4 KiB on its first fill, inside the socket read: measured 0.6 CPU s per
 * 136 MiB window here (0.02 prefaulted), about 0.45 of Pipe mode's daemon CPU s/GB on a
 * 512 MiB object. Without `recycleParts` (a
 * consumer that may hold the bytes longer, e.g. gunzip) no slab is offered. A part must
 * come to exactly its range's length (BadRangeReplyError otherwise); the client pins the
 * ETag of every GET (If-Match, and the reply's ETag checked), on retries too.
 *
 * Errors: a failed GET (after the client's own retries) is thrown by the take()
 * that reaches it, never earlier; parts started ahead keep a handler attached so
 * that their failures are never unhandled. close() aborts every GET in flight.
 */
import { setMaxListeners } from 'node:events';
import { performance } from 'node:perf_hooks';
import type { ObjectClient, ObjectInfo } from '../s3/object-client.js';
import { AbortedError, BadRangeReplyError } from '../errors.js';
import type { BufferPool } from '../memory/buffer-pool.js';
import { slabPool } from '../memory/slab-pool.js';

/** One thing to write to a pipe: an S3 object, or bytes given inline (augmented manifest attributes). */
export type PipeItem =
  | { kind: 'object'; info: ObjectInfo; client?: ObjectClient }
  | { kind: 'inline'; data: Buffer };

/** A piece of an item's bytes, in pipe order. */
export interface Part {
  /** Index of the item in the epoch's list. */
  itemIndex: number;
  /** The part's bytes in order: its GET's body chunks as received, or the inline item's buffer. Empty for an empty item. */
  chunks: readonly Buffer[];
  /** Total length of `chunks`. */
  bytes: number;
  /** True on the item's last part (an empty item has exactly one, empty, part). */
  last: boolean;
  /** Gives the part's buffer back for reuse; call only once none of its bytes is referenced any more. */
  release(): void;
}

export interface ReadaheadOptions {
  /** The client for object items that carry none. */
  client: ObjectClient;
  /** Bytes of one ranged GET. */
  partSize: number;
  /** Bound on bytes requested or received but not yet taken. */
  maxInflightBytes: number;
  /** Bound on GETs in flight at once. */
  maxRequests: number;
  /** Aborts every GET (stop()). */
  signal?: AbortSignal;
  /** Recycle part buffers (Part.release()); only for a consumer that is done with a part's bytes when it releases it. */
  recycleParts?: boolean;
  /**
   * Asked when take() had to wait for its part: true when the consumer ran out of bytes
   * meanwhile (the window then doubles). Default: every wait counts.
   */
  starved?: () => boolean;
  /** A pool for the part buffers, shared across epochs (recycleParts only); default: one of the read-ahead's own. */
  pool?: BufferPool;
}

interface Fetched {
  chunks: readonly Buffer[];
  release(): void;
}

interface Task {
  itemIndex: number;
  last: boolean;
  bytes: number;
  result: Promise<Fetched>;
  /** The GET has settled: take() gets the part without waiting. */
  ready: boolean;
}

const NOTHING_TO_RELEASE = (): void => {};

/**
 * Parts in flight when an epoch starts: the part the reader needs first plus one
 * behind it, so the first part gets about half the link instead of 1/16th, while
 * the link never idles between the two.
 */
export const RAMP_START_PARTS = 2;
/**
 * 1.25: a doubling that raised the take rate by less did not pay. Doubling the GETs of a
 * latency-bound link about doubles the rate; on a saturated link the rate moves by the noise of
 * a loaded machine (+-10-20% measured), which this stays above.
 */
export const RAMP_GAIN = 1.25;
/** After a doubling that did not pay, try once more when this many windows of bytes were taken since. */
export const RAMP_REPROBE_WINDOWS = 16;
/**
 * 0.8: GETs that take a quarter longer than the best window's (q = best / now < 0.8) queue for
 * the link. On a link with room a GET takes as long however many run (its time to first byte and
 * its own transfer), so q stays near 1; on a full one, twice the GETs take twice as long. The
 * margin is for the noise of an average over a window's GETs (S3's time to first byte varies
 * from 10 to 100 ms). It is tighter than the FastFile budget's GROW_Q (0.7, which judges a step of
 * one part, src/prefetch/ahead-share.ts), because a doubling wrongly allowed here maps a whole
 * window of slabs. Measured on a simulated link that 6 parts fill (test/pipe/readahead.ts's
 * SharedLink), 8 parts in flight gave q 0.74.
 */
export const RAMP_QUEUE_Q = 0.8;
/**
 * Whole-part GETs a window's average needs before it counts: 4, a round of the smallest window
 * judged. The first window (2 parts) never has that many: its doubling comes at its first part.
 */
const RAMP_QUEUE_MIN_GETS = 4;

export class Readahead {
  private readonly items: readonly PipeItem[];
  private readonly opts: ReadaheadOptions;
  private readonly abort = new AbortController();
  /** Started tasks not yet taken, in pipe order. INVARIANT: heldBytes is the sum of their `bytes`. */
  private readonly queue: Task[] = [];
  private heldBytes = 0;
  private activeRequests = 0;
  /** Next part to start: item index and part index within it. */
  private nextItem = 0;
  private nextPart = 0;
  private closed = false;
  /** The byte bound in force: ramps from RAMP_START_PARTS parts up to maxInflightBytes. */
  private window: number;
  /** Bytes taken so far. */
  private takenBytes = 0;
  /**
   * The take rate under the window in force is measured from `measureFrom` (RAMP_GAIN): set once
   * the bytes held when the window last changed (`flushAt`) have been taken.
   */
  private flushAt = 0;
  private measureFrom: { time: number; taken: number } | undefined;
  /** Whole-part GETs started under the window in force (`windowSerial`) that completed, and their summed times (RAMP_QUEUE_Q). */
  private windowSerial = 0;
  private windowGets = { n: 0, ms: 0 };
  /** The shortest average GET time of a window before the one in force, in ms. */
  private bestGetMs = Infinity;
  /** The window an epoch starts with (its first doubling is free). */
  private readonly firstWindow: number;
  /** Take rate (bytes/ms) under the window before the last doubling; undefined until one was measured. */
  private rateBefore: number | undefined;
  /** The last doubling did not pay: no more until `takenBytes` reaches this (a re-probe). */
  private plateauUntil = -1;
  private readonly onOuterAbort = (): void => this.close();
  /** Part buffers, when recycled: bounded by the byte window plus the one part that may exceed it. */
  private readonly pool: BufferPool | undefined;

  constructor(items: readonly PipeItem[], opts: ReadaheadOptions) {
    if (!(opts.partSize > 0) || !(opts.maxInflightBytes > 0) || !(opts.maxRequests >= 1)) {
      throw new RangeError('Readahead needs partSize > 0, maxInflightBytes > 0 and maxRequests >= 1');
    }
    this.items = items;
    this.opts = opts;
    this.window = Math.min(opts.maxInflightBytes, RAMP_START_PARTS * opts.partSize);
    this.firstWindow = this.window;
    // The window, plus the part the FIFO writer is writing and the next one queued behind it
    // (fifo-writer.ts WRITE_AHEAD_BYTES): both are taken out of the window but not yet released.
    this.pool = !opts.recycleParts ? undefined : opts.pool ?? slabPool(opts.maxInflightBytes + 2 * opts.partSize, opts.partSize);
    // Every GET in flight listens on this signal; more than Node's default 10 is expected, not a leak.
    setMaxListeners(opts.maxRequests + 10, this.abort.signal);
    if (opts.signal?.aborted) this.close();
    else opts.signal?.addEventListener('abort', this.onOuterAbort, { once: true });
  }

  /** Start fetching as far ahead as the bounds allow (take() also does this). */
  start(): void {
    this.fill();
  }

  /** The next part in pipe order, or undefined after the last one. Throws the part's fetch error. */
  async take(): Promise<Part | undefined> {
    if (this.closed) throw new AbortedError('pipe read-ahead closed');
    this.fill();
    const task = this.queue.shift();
    if (task === undefined) return undefined; // fill() queues a task whenever one remains
    const waited = !task.ready;
    try {
      const { chunks, release } = await task.result;
      return { itemIndex: task.itemIndex, chunks, bytes: task.bytes, last: task.last, release };
    } finally {
      if (!this.closed) {
        this.heldBytes -= task.bytes;
        this.takenBytes += task.bytes;
        if (this.measureFrom === undefined && this.takenBytes >= this.flushAt) this.measureFrom = { time: performance.now(), taken: this.takenBytes };
        if (waited && this.window < this.opts.maxInflightBytes && (this.opts.starved?.() ?? true)) this.grow();
        this.fill();
      }
    }
  }

  /** The consumer starved: double the window, if it may pay (see the module comment). */
  private grow(): void {
    const now = performance.now();
    if (this.window > this.firstWindow) {
      if (this.takenBytes < this.plateauUntil) return;
      const from = this.measureFrom;
      if (from === undefined) return; // parts started under the window before are still being taken
      const since = this.takenBytes - from.taken;
      if (since < this.window) return; // too few bytes under this window to judge it yet
      const rate = since / Math.max(1, now - from.time);
      const reprobe = this.plateauUntil >= 0;
      const paid = reprobe || this.rateBefore === undefined || rate >= this.rateBefore * RAMP_GAIN;
      if (!paid || this.getsQueue()) {
        // Stay, and try once more after RAMP_REPROBE_WINDOWS. The window does not change, so the
        // re-probe's rate and GET times are those from now on.
        this.plateauUntil = this.takenBytes + RAMP_REPROBE_WINDOWS * this.window;
        this.measureFrom = { time: now, taken: this.takenBytes };
        this.newWindowGets();
        return;
      }
      this.plateauUntil = -1;
      this.rateBefore = rate;
    } // else the first doubling, free: the first window's rate is mostly the first part's time to first byte
    this.window = Math.min(this.opts.maxInflightBytes, this.window * 2);
    this.flushAt = this.takenBytes + this.heldBytes;
    this.measureFrom = undefined;
    this.newWindowGets();
  }

  /** Whole-part GETs of the window in force take so much longer than the best window's that they queue (RAMP_QUEUE_Q). */
  private getsQueue(): boolean {
    const { n, ms } = this.windowGets;
    return n >= RAMP_QUEUE_MIN_GETS && this.bestGetMs / (ms / n) < RAMP_QUEUE_Q;
  }

  /** The window in force is done with (changed, or judged): its GETs' average may become the best. */
  private newWindowGets(): void {
    const { n, ms } = this.windowGets;
    if (n >= RAMP_QUEUE_MIN_GETS) this.bestGetMs = Math.min(this.bestGetMs, ms / n);
    this.windowSerial += 1;
    this.windowGets = { n: 0, ms: 0 };
  }

  /** A GET of a whole part, started under window `serial`, took `ms`. */
  private sampleGet(serial: number, ms: number): void {
    if (serial !== this.windowSerial) return; // started under a window no longer in force
    this.windowGets.n += 1;
    this.windowGets.ms += ms;
  }

  /** Slabs allocated and reused (undefined when parts are not recycled), and the window reached. */
  stats(): { slabsAllocated?: number; slabsReused?: number; windowBytes: number } {
    return { ...(this.pool ? { slabsAllocated: this.pool.stats.allocated, slabsReused: this.pool.stats.reused } : {}), windowBytes: this.window };
  }

  /** Abort every GET in flight and drop what was fetched ahead. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.opts.signal?.removeEventListener('abort', this.onOuterAbort);
    this.abort.abort(new AbortedError('pipe read-ahead closed'));
    // Parts never taken give their slabs back once their GETs have settled (a pool shared
    // across epochs would otherwise count them as held for good).
    for (const task of this.queue) task.result.then((f) => f.release(), () => {});
    this.queue.length = 0;
    this.heldBytes = 0;
  }

  private fill(): void {
    while (!this.closed && this.nextItem < this.items.length) {
      const item = this.items[this.nextItem]!;
      const size = item.kind === 'inline' ? item.data.length : item.info.size;
      const parts = item.kind === 'inline' ? 1 : Math.max(1, Math.ceil(size / this.opts.partSize));
      const start = this.nextPart * this.opts.partSize;
      const end = item.kind === 'inline' ? size : Math.min(size, start + this.opts.partSize);
      const bytes = end - start;
      const needsRequest = item.kind === 'object' && bytes > 0;
      if (this.heldBytes > 0 && this.heldBytes + bytes > this.window) return;
      if (needsRequest && this.activeRequests >= this.opts.maxRequests) return;
      const last = this.nextPart === parts - 1;
      const task: Task = { itemIndex: this.nextItem, last, bytes, result: this.fetch(item, start, end), ready: false };
      task.result.then(() => { task.ready = true; }, () => { task.ready = true; });
      this.queue.push(task);
      this.heldBytes += bytes;
      if (last) {
        this.nextItem += 1;
        this.nextPart = 0;
      } else {
        this.nextPart += 1;
      }
    }
  }

  private fetch(item: PipeItem, start: number, end: number): Promise<Fetched> {
    if (item.kind === 'inline') return Promise.resolve({ chunks: item.data.length > 0 ? [item.data] : [], release: NOTHING_TO_RELEASE });
    if (end === start) return Promise.resolve({ chunks: [], release: NOTHING_TO_RELEASE });
    const client = item.client ?? this.opts.client;
    const { key, etag, size } = item.info;
    const signal = this.abort.signal;
    this.activeRequests += 1;
    const slab = this.pool?.acquire(end - start);
    let released = false;
    const release = (): void => {
      if (!released && slab) { released = true; slab.unref(); }
    };
    // Timed after the slab is acquired (a new one is mapped first), for RAMP_QUEUE_Q.
    const serial = end - start === this.opts.partSize ? this.windowSerial : -1;
    const startedAt = serial >= 0 ? performance.now() : 0;
    const stream = client.getStream(key, etag, { size, start, end, signal, ...(slab ? { into: slab.buf } : {}) });
    const request = receive(stream, start, end, key).then(
      (chunks): Fetched => {
        if (serial >= 0) this.sampleGet(serial, performance.now() - startedAt);
        return { chunks, release };
      },
      (err: unknown) => {
        release(); // the GET has settled: nothing writes to the slab any more
        throw err;
      },
    );
    const result = request.finally(() => {
      this.activeRequests -= 1;
      this.fill();
    });
    result.catch(() => {}); // a part fetched ahead may fail before take() reaches it; take() rethrows
    return result;
  }
}

/** The chunks of `stream`, which must come to exactly the `end - start` bytes of the range (else BadRangeReplyError). */
async function receive(stream: AsyncIterable<Buffer>, start: number, end: number, key: string): Promise<Buffer[]> {
  const chunks: Buffer[] = [];
  const want = end - start;
  let n = 0;
  for await (const chunk of stream) {
    n += chunk.length;
    if (n > want) break; // leaving the loop ends the GET
    if (chunk.length > 0) chunks.push(chunk);
  }
  if (n !== want) throw new BadRangeReplyError(`GET ${key} bytes ${start}-${end - 1} returned ${n > want ? 'at least ' : ''}${n} bytes, expected ${want} (the listed size and the range)`);
  return chunks;
}
