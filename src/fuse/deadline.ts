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
