/**
 * AheadShare: one read-ahead budget for all the sequential readers of a channel. It
 * grows only while GETs still run at close to their best speed, after TCP Vegas, which
 * compares the rate it gets with the best rate it has seen.
 *
 * Why: each reader's window (./read-cursor.ts, step 3) grows (x4 per batch) up to --max-prefetch,
 * whatever the other readers do, so N readers hold N full windows ahead. On a link that
 * one window already fills, the extra windows add no throughput. They only add
 * memory, and in a new daemon that memory is new to the process. t11-lend measured 4
 * readers of 128 MiB each: 60 receive slabs of 8 MiB allocated for 64 parts, and half
 * of the main thread's busy time spent mapping them.
 *
 * Algorithm:
 *  - The budget B, in bytes, starts at FLOOR_WINDOWS full windows (FLOOR_WINDOWS ×
 *    --max-prefetch) and never goes below that. At most, it is one full window per
 *    active reader, which is what every reader had before this budget existed.
 *  - A reader's window is capped at B / n, rounded down to whole parts and never less
 *    than MIN_READER_PARTS parts. n is the number of sequential readers that asked for
 *    read-ahead in the last ACTIVE_MS. A reader asks when it has more than the smallest share
 *    still to fetch (small files do not count), and once it has asked, it goes on asking to
 *    the end of its file: what it still has ahead there is memory in use, so it keeps to
 *    its share and the others' shares grow when it closes (leave()). While
 *    n ≤ FLOOR_WINDOWS (one reader alone), no reader is capped.
 *  - The evidence: every sequential read-ahead GET of a whole part that went to the server
 *    reports how long it took (sample()). All such GETs have the same length, so their
 *    rates compare:
 *      - `recent` is an EWMA of the rates, with weight EWMA_WEIGHT. A rate more than twice
 *        `recent` counts as twice `recent`, so one freak fast GET moves it by 1/8 at most.
 *      - `best` is the highest `recent` has been: Vegas's base RTT. It is the smoothed rate,
 *        not the fastest single GET, because GETs to S3 vary by more than the margin this
 *        test needs: with a first byte anywhere from 10 to 100 ms, one lucky GET can be
 *        twice as fast as the typical one, and against it every later rate would look
 *        contended, so the budget would never grow. It is not forgotten. A link that later
 *        slows down for good leaves the budget at its floor, which is what one reader gets
 *        anyway.
 *      - q = recent / best. Near 1, GETs run as fast as they ever did: the link and the
 *        process have room, and more GETs in flight add throughput. Well below 1, the
 *        GETs in flight already share what there is, and more of them would only share
 *        it more thinly, while holding more memory.
 *  - At each sample: if q ≥ GROW_Q (0.7), a reader was capped since the last growth, and a
 *    round has passed since B last changed, B grows by one part. If q < SHRINK_Q, B shrinks
 *    by one part, down to the floor. Between the two, B holds: that band is what keeps a
 *    noisy rate from making B swing.
 *  - A round is as many samples as B has parts: about the time for the GETs B allows to
 *    complete once, so a growth is judged by GETs that ran under it, as Vegas adjusts once
 *    per round trip. The first version grew at every sample, which with an EWMA that takes
 *    ~8 GETs to follow the rate grew on evidence from before the growth: measured with 4
 *    readers of 128 MiB on s3rver, B went from 128 to 200 MiB in 9 samples while q fell from
 *    0.98 to 0.66, and the daemon mapped 34 receive slabs of 8 MiB. So B grows by a part per
 *    round, like TCP's congestion avoidance (a window of 16 parts grows by half in 8 rounds,
 *    about a second at 80 MB/s per GET), and shrinks at once.
 *  - Parts answered from the disk tier (--cache-dir), wholly or in part, are not samples
 *    (RangeOptions.onLocal): they say nothing about the link.
 */
import { performance } from 'node:perf_hooks';
import { prefetchShareBytes } from '../metrics/metrics.js';

/**
 * The floor of the budget, and where it starts: one full window. One window at
 * --max-prefetch is sized to fill a reader's share of a fast link (see the option's doc in
 * src/config/options.ts), so one reader alone keeps exactly the window it had before the
 * budget existed; two or more start by sharing it, and the budget grows past it only as
 * the GETs show that more in flight pays. The floor was two windows until t11-floor: with 4
 * readers of 128 MiB in a new daemon on s3rver (both latency profiles), the second window
 * brought no MB/s (medians 189 against 195 MB/s with one) and cost new pages (141-157k per
 * GB read against 105-130k) and 45-70 MiB of peak RSS; the daemon's CPU per GB moved within
 * the runs' noise (BENCHMARKS.md "t11-floor").
 */
export const FLOOR_WINDOWS = 1;

/**
 * The smallest cap on one reader's window: two parts. That is the part being read, plus
 * one part in flight behind it, so the reader never waits for a GET that had not started.
 */
export const MIN_READER_PARTS = 2;

/**
 * A reader counts as active for 1 s after it last asked for read-ahead. A reader at 100 MB/s
 * or more asks at least every few parts, so it stays counted. A reader that has paused
 * (a training step, an open file it is not reading) stops holding a share within a second.
 */
export const ACTIVE_MS = 1000;

/** How often the active readers are counted again: often enough to follow readers coming and going, rarely enough to cost nothing per read. */
const RECOUNT_MS = 100;

/**
 * Grow while GETs run at 70% of their best rate or better. TCP Vegas grows while under α extra
 * packets are queued; this is the same test, as a ratio of rates. The margin is for noise:
 * `best` is the top of a noisy smoothed rate, and with GET times ±40% around their mean the
 * smoothed rate's top over thousands of GETs stays within about 1.3× its mean, so an
 * uncontended link keeps q above 0.75. Contended GETs on this project's 2-core test machine
 * ran at q = 0.3-0.5.
 */
export const GROW_Q = 0.7;

/** Shrink once GETs run below half their best rate: half the rate means each GET shares the link with about as many others as it would need to fill it alone. */
export const SHRINK_Q = 0.5;

/** EWMA weight of a new rate, 1/8: TCP's weight for its smoothed RTT, so about the last 8 GETs count. */
const EWMA_WEIGHT = 1 / 8;


export interface AheadShareOptions {
  /** --max-prefetch: the largest window of one reader. */
  maxPrefetch: number;
  /** --part-size: the length of read-ahead GETs, and the step of the budget. */
  partSize: number;
  /** Channel label of the budget's gauge. */
  channel?: string;
  /** Clock in milliseconds (tests). */
  now?: () => number;
}

export interface AheadShareStats {
  /** Times the budget grew and shrank by a part. */
  grew: number;
  shrank: number;
  /** Reads whose window the share capped. */
  capped: number;
  samples: number;
}

export class AheadShare {
  readonly floor: number;
  /** The smallest share of one reader: MIN_READER_PARTS parts. A reader with no more than this left to fetch need not ask (it cannot be capped). */
  readonly minShare: number;
  readonly stats: AheadShareStats = { grew: 0, shrank: 0, capped: 0, samples: 0 };
  private budget: number;
  private readonly part: number;
  private readonly maxPrefetch: number;
  private readonly now: () => number;
  private readonly labels: { channel: string };
  /** When each reader last asked for read-ahead: its size is the number of active readers. */
  private readonly seen = new Map<object, number>();
  private countedAt = -Infinity;
  /** A reader was capped since the budget last grew: there is demand for more. */
  private wanted = false;
  private best = 0;
  private recent = 0;
  /** Samples since B last changed: a growth waits for a round of them (see the module comment). */
  private sinceChange = 0;

  constructor(o: AheadShareOptions) {
    if (!(o.maxPrefetch > 0 && o.partSize > 0)) throw new RangeError('ahead share needs a positive max-prefetch and part size');
    this.part = o.partSize;
    this.maxPrefetch = o.maxPrefetch;
    this.floor = FLOOR_WINDOWS * o.maxPrefetch;
    this.minShare = MIN_READER_PARTS * o.partSize;
    this.now = o.now ?? (() => performance.now());
    this.labels = { channel: o.channel ?? 'fastfile' };
    this.budget = this.floor;
    prefetchShareBytes.set(this.labels, this.budget);
  }

  /** The budget B, in bytes. */
  get bytes(): number {
    return this.budget;
  }

  /** Sequential readers active: those seen within ACTIVE_MS at the last count, and any seen since. */
  get readers(): number {
    return this.seen.size;
  }

  /** q: the recent GET rate over the best one (0 before any sample). */
  get quality(): number {
    return this.best > 0 ? this.recent / this.best : 0;
  }

  /**
   * The most `reader` may read ahead now: its share of the budget, or Infinity while no
   * more than FLOOR_WINDOWS readers are active. Marks the reader active.
   */
  limit(reader: object): number {
    const t = this.now();
    this.seen.set(reader, t);
    if (t - this.countedAt >= RECOUNT_MS) this.recount(t);
    const n = this.seen.size;
    if (n <= FLOOR_WINDOWS) return Infinity;
    return Math.max(this.minShare, Math.floor(this.budget / n / this.part) * this.part);
  }

  /** A reader's window was larger than its limit: there is demand for a larger budget. */
  wantMore(): void {
    this.wanted = true;
    this.stats.capped++;
  }

  /** The reader is done (its handle closed): it stops holding a share at once. */
  leave(reader: object): void {
    this.seen.delete(reader);
  }

  /** A sequential read-ahead GET of one whole part took `ms` milliseconds. */
  sample(ms: number): void {
    if (!(ms > 0)) return;
    this.stats.samples++;
    const rate = this.part / ms;
    this.recent = this.recent === 0 ? rate : this.recent + EWMA_WEIGHT * (Math.min(rate, 2 * this.recent) - this.recent);
    this.best = Math.max(this.recent, this.best);
    const q = this.recent / this.best;
    this.sinceChange++;
    if (q >= GROW_Q && this.wanted && this.budget < this.ceiling() && this.sinceChange >= this.budget / this.part) {
      this.setBudget(Math.min(this.ceiling(), this.budget + this.part));
      this.wanted = false;
      this.stats.grew++;
    } else if (q < SHRINK_Q && this.budget > this.floor) {
      this.setBudget(Math.max(this.floor, this.budget - this.part));
      this.stats.shrank++;
    }
  }

  /** The most the budget may be: a full window per active reader (and never less than the floor). */
  private ceiling(): number {
    return Math.max(this.floor, this.seen.size * this.maxPrefetch);
  }

  private setBudget(bytes: number): void {
    this.budget = bytes;
    this.sinceChange = 0;
    prefetchShareBytes.set(this.labels, bytes);
  }

  private recount(t: number): void {
    this.countedAt = t;
    for (const [reader, at] of this.seen) if (t - at > ACTIVE_MS) this.seen.delete(reader);
    // Readers gone: the budget above their full windows has no one left to serve.
    if (this.budget > this.ceiling()) this.setBudget(this.ceiling());
  }
}
