/**
 * An AIMD limit on concurrent S3 GET attempts, so that a throttling S3 (503 SlowDown)
 * sees fewer requests and a healthy one gets all of --max-connections.
 *
 * Algorithm (TCP congestion avoidance applied to requests):
 *  - The limit starts at `max` (--max-connections): no cost while S3 is healthy.
 *  - Multiplicative decrease: a throttled attempt halves the limit (floor 1). Attempts
 *    started before the last decrease saw the old, higher limit; their throttles are
 *    the same congestion event, so they do not halve again. One burst of 64 concurrent
 *    SlowDowns therefore halves once, not 64 times.
 *  - Additive increase: after `limit` successful attempts since the last change (one
 *    "window" at the current limit), the limit grows by 1 (ceiling `max`).
 *  - Other failures (resets, timeouts, refused connections) leave the limit alone: they
 *    say nothing about S3's request rate.
 * An attempt holds its slot from before it is sent until its body is read or it fails;
 * the retry's backoff sleep holds none. Waiting for a slot counts against the attempt's
 * no-progress deadline (--request-timeout): `acquire()` rejects with LimiterTimeout after
 * `waitMs`, and the caller retries it like a stalled attempt. So the deadline chain in
 * SEMANTICS.md holds however long the queue is.
 * The current limit is exported as the sluice_s3_concurrency_limit gauge.
 */
import { AbortedError } from '../errors.js';
import { s3ConcurrencyLimit } from '../metrics/metrics.js';

/** A held slot; `epoch` is the limiter's decrease count when the attempt started. */
export interface Slot {
  readonly epoch: number;
  /** Frees the slot. Idempotent. */
  release(): void;
}

/** Waiting for a slot took longer than the attempt's deadline. */
export class LimiterTimeout extends Error {
  constructor(waitMs: number) {
    super(`no S3 connection slot within ${waitMs} ms`);
    this.name = 'LimiterTimeout';
  }
}

interface Waiter {
  grant: (slot: Slot) => void;
}

export class ConcurrencyLimiter {
  readonly max: number;
  private current: number;
  private inUse = 0;
  private epochCount = 0;
  private successes = 0;
  private readonly queue: Waiter[] = [];

  constructor(max: number) {
    if (!Number.isSafeInteger(max) || max < 1) throw new RangeError(`concurrency limit must be a whole number >= 1, got ${max}`);
    this.max = max;
    this.current = max;
    s3ConcurrencyLimit.set(max);
  }

  /** Concurrent attempts currently allowed. */
  get limit(): number {
    return this.current;
  }

  /** Attempts holding a slot. */
  get active(): number {
    return this.inUse;
  }

  /** Attempts waiting for a slot. */
  get waiting(): number {
    return this.queue.length;
  }

  /** A slot, at once when one is free; rejects after `waitMs` (LimiterTimeout) or on abort (AbortedError). */
  acquire(waitMs: number, signal?: AbortSignal): Promise<Slot> {
    if (signal?.aborted) return Promise.reject(new AbortedError());
    if (this.inUse < this.current && this.queue.length === 0) return Promise.resolve(this.take());
    return new Promise<Slot>((resolve, reject) => {
      const waiter: Waiter = {
        grant: (slot) => { cleanup(); resolve(slot); },
      };
      const drop = () => { const i = this.queue.indexOf(waiter); if (i >= 0) this.queue.splice(i, 1); };
      const timer = setTimeout(() => { drop(); cleanup(); reject(new LimiterTimeout(waitMs)); }, waitMs);
      const onAbort = () => { drop(); cleanup(); reject(new AbortedError()); };
      const cleanup = () => { clearTimeout(timer); signal?.removeEventListener('abort', onAbort); };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.queue.push(waiter);
    });
  }

  /** The attempt holding `slot` got a SlowDown-class reply: halve the limit, once per congestion event. */
  onThrottle(slot: Slot): void {
    if (slot.epoch !== this.epochCount) return;
    this.epochCount++;
    this.successes = 0;
    this.setLimit(Math.max(1, Math.floor(this.current / 2)));
  }

  /** The attempt holding a slot completed: one window of successes grows the limit by 1. */
  onSuccess(): void {
    if (this.current >= this.max) return;
    if (++this.successes >= this.current) {
      this.successes = 0;
      this.setLimit(this.current + 1);
    }
  }

  private setLimit(n: number): void {
    this.current = n;
    s3ConcurrencyLimit.set(n);
    this.pump();
  }

  private take(): Slot {
    this.inUse++;
    let held = true;
    return {
      epoch: this.epochCount,
      release: () => {
        if (!held) return;
        held = false;
        this.inUse--;
        this.pump();
      },
    };
  }

  private pump(): void {
    while (this.inUse < this.current && this.queue.length > 0) this.queue.shift()!.grant(this.take());
  }
}
