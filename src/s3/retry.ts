/**
 * Retry policy for S3 requests: exponential backoff with full jitter.
 *
 * After failed attempt n (1-based) we sleep a uniformly random time in
 * [0, min(CAP, BASE * 2^(n-1))] (the "full jitter" of the AWS Architecture Blog's
 * "Exponential Backoff and Jitter"). Full jitter spreads a burst of clients that were
 * throttled together, so they do not come back together; it completes the same work
 * with fewer calls than equal or decorrelated jitter under contention.
 *
 * Which failures are retried, and under which reason label, is decided by
 * `judgeReply()` and `judgeError()` in ./s3-errors.ts; this module only waits.
 */
import { AbortedError } from '../errors.js';

/** First backoff ceiling: S3's p50 time-to-first-byte is ~10-30 ms, so 100 ms is a few round trips. */
export const BACKOFF_BASE_MS = 100;
/**
 * Largest single wait. S3 answers SlowDown while it scales a prefix's partitions, which
 * takes seconds to minutes; 20 s keeps a fleet of throttled readers well spread while
 * bounding the stall one read can see (10 attempts wait at most ~45 s in total).
 */
export const BACKOFF_CAP_MS = 20_000;

/** Delay before the retry that follows failed attempt `attempt` (1-based). */
export function backoffMs(attempt: number, random: () => number = Math.random, base = BACKOFF_BASE_MS, cap = BACKOFF_CAP_MS): number {
  const ceiling = Math.min(cap, base * 2 ** Math.min(attempt - 1, 30));
  return Math.floor(random() * ceiling);
}

/** Sleeps `ms`, rejecting with AbortedError as soon as `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(new AbortedError());
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onAbort = () => { clearTimeout(timer); reject(new AbortedError()); };
    const timer = setTimeout(() => { signal?.removeEventListener('abort', onAbort); resolve(); }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
