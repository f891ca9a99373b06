/**
 * The deadline chain of a read through the mount, and fuse-native's timeout derived from it.
 *
 *   kernel read ──> fuse-native op timer (FUSE_TIMEOUT, below) ──> FsCore.read ──> block GETs
 *                                                                                └─> S3 client
 *
 * 1. One S3 attempt is aborted when it makes no progress (no headers, no body bytes)
 *    for --request-timeout (default 10 s), then retried.
 * 2. Between attempts the client sleeps with full-jitter backoff whose ceiling doubles
 *    from BACKOFF_BASE_MS (100 ms) up to BACKOFF_CAP_MS (20 s) (src/s3/retry.ts).
 * 3. After --max-attempts (default 10) the GET fails; the core rejects the read, and the
 *    adapter answers the kernel with EIO (errnoFor). So one GET that never gets a
 *    byte fails after at most
 *       S3_DEADLINE = attempts x request-timeout + sum of the backoff ceilings
 *                   = 10 x 10 s + (0.1+0.2+0.4+0.8+1.6+3.2+6.4+12.8+20) s = 145.5 s by default.
 *    A transfer that keeps making progress is never cut: only a stall is.
 * 4. A read may first wait for another GET of the same block (shared), or for room
 *    under --max-inflight, which frees as other GETs finish or fail, each within
 *    S3_DEADLINE. So the core answers a read within 2 x S3_DEADLINE.
 * 5. fuse-native's own per-operation timer (15 s by default) answers the kernel with
 *    ETIMEDOUT when our callback has not come. At 15 s it would cut reads that are
 *    simply waiting out a throttling storm or a 20 s outage while the retries are still
 *    running. We set it to 2 x S3_DEADLINE + FUSE_TIMEOUT_MARGIN_MS (301 s by default),
 *    so it only ever fires if the core hangs, which is a bug: reads fail with the
 *    core's error and the core's deadline, never on this timer.
 * The kernel itself puts no deadline on a FUSE request.
 *
 * Reads do not use fuse-native's timer (it costs a setTimeout/clearTimeout and a closure per
 * read: the adapter answers reads itself, see native.ts). ReadDeadlines enforces the same
 * timeout coarsely, per mount, with no per-read timer and no allocation for a read the
 * cache answers at once:
 *  - time is cut into epochs of `period` = timeout / SWEEPS_PER_TIMEOUT (clamped). All reads
 *    started in one epoch share one AbortController (its signal goes to FsCore.read), so
 *    the deadline costs nothing per read;
 *  - a read still pending is remembered (a Set entry; such a read is waiting for a GET
 *    anyway). One sweep timer, armed only while reads are pending, aborts every epoch that
 *    started at least `timeout` ago: the core gives up those reads (AbortedError, and it
 *    never copies into the kernel's buffer after that), and the adapter answers each of
 *    them ETIMEDOUT. An answer from the core that comes later is dropped.
 * So a read fails between `timeout` and `timeout + 2 x period` after it started (default:
 * 301-376 s), never sooner than fuse-native's timer would have cut it.
 */
import { BACKOFF_BASE_MS, BACKOFF_CAP_MS } from '../s3/retry.js';

/** Slack for event-loop delay and the hop between the FUSE thread and JavaScript. */
export const FUSE_TIMEOUT_MARGIN_MS = 10_000;

export interface DeadlineInputs {
  requestTimeoutMs: number;
  maxAttempts: number;
}

/** The longest one S3 GET can take to fail when no byte ever arrives (step 3 above). */
export function s3DeadlineMs({ requestTimeoutMs, maxAttempts }: DeadlineInputs): number {
  let backoff = 0;
  for (let n = 1; n < maxAttempts; n++) backoff += Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** Math.min(n - 1, 30));
  return maxAttempts * requestTimeoutMs + backoff;
}

/** fuse-native's per-operation timeout: longer than anything the core can legitimately take (step 5). */
export function fuseTimeoutMs(inputs: DeadlineInputs): number {
  return 2 * s3DeadlineMs(inputs) + FUSE_TIMEOUT_MARGIN_MS;
}

/** Epochs per timeout: the slack a coarse deadline adds is 2 of them (1/4 of the timeout). */
const SWEEPS_PER_TIMEOUT = 8;
/** Bounds on the epoch: short timeouts (tests) still sweep at least this rarely... */
const MIN_PERIOD_MS = 50;
/** ...and a long one is checked at least this often. */
const MAX_PERIOD_MS = 30_000;

/** One read still waiting for the core, as ReadDeadlines remembers it. */
export interface PendingRead {
  /** The epoch the read started in (its deadline is the epoch's start + timeout). */
  readonly epoch: Epoch;
  /** Answers the kernel with ETIMEDOUT (the deadline passed); called at most once, then forgotten. */
  expire(): void;
}

/** Reads that started in one period: one AbortController between them. */
export interface Epoch {
  readonly startedMs: number;
  readonly controller: AbortController;
  /** Passed to FsCore.read as is: one options object per epoch, none per read. */
  readonly opts: { signal: AbortSignal };
}

/** The coarse per-mount read deadline described at the top of this file. */
export class ReadDeadlines {
  readonly periodMs: number;
  private current: Epoch | undefined;
  private readonly pending = new Set<PendingRead>();
  private sweeper: NodeJS.Timeout | undefined;

  constructor(readonly timeoutMs: number, private readonly now: () => number = Date.now) {
    if (!(timeoutMs > 0)) throw new RangeError('timeoutMs must be positive');
    this.periodMs = Math.min(MAX_PERIOD_MS, Math.max(MIN_PERIOD_MS, Math.floor(timeoutMs / SWEEPS_PER_TIMEOUT)));
  }

  /** The epoch a read starting now belongs to (a new one once the current is `period` old). */
  epoch(): Epoch {
    const c = this.current;
    const t = this.now();
    if (c && t - c.startedMs < this.periodMs) return c;
    const controller = new AbortController();
    this.current = { startedMs: t, controller, opts: { signal: controller.signal } };
    return this.current;
  }

  /** Remembers a read the core has not answered yet; call settled() when it is answered. */
  wait(read: PendingRead): void {
    this.pending.add(read);
    if (!this.sweeper) {
      this.sweeper = setInterval(() => this.sweep(), this.periodMs);
      this.sweeper.unref(); // the mount keeps the process alive, not a pending read's deadline
    }
  }

  /** The read was answered (by the core): forget it. False when its deadline already answered it. */
  settled(read: PendingRead): boolean {
    if (!this.pending.delete(read)) return false;
    if (this.pending.size === 0) this.stop();
    return true;
  }

  get waiting(): number {
    return this.pending.size;
  }

  /** Expires every pending read whose epoch is at least `timeout` old. */
  sweep(): void {
    const t = this.now();
    for (const r of this.pending) {
      if (t - r.epoch.startedMs < this.timeoutMs) continue;
      this.pending.delete(r);
      // The core settles the read with AbortedError and never writes into its buffer after.
      if (!r.epoch.controller.signal.aborted) r.epoch.controller.abort();
      r.expire();
    }
    if (this.pending.size === 0) this.stop();
  }

  /** Stops the sweep timer (pending reads, if any, are left to their core answer). */
  stop(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = undefined;
  }
}
