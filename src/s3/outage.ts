/**
 * How long a request keeps retrying an endpoint that refuses connections.
 *
 * A refused connection fails in microseconds, so counting attempts alone would give up
 * on an endpoint that is restarting after ~1 s of backoff. Two cases:
 *  - the endpoint never answered this process (a typo'd --endpoint, a wrong port): the
 *    caller gives up after UNREACHABLE_MAX_ATTEMPTS (./range-reader.ts), so the user
 *    hears about it at once;
 *  - it answered before (an outage mid-run): the request keeps retrying, by time, until
 *    requestDeadlineMs() has passed since it started or last received a byte: the time
 *    a request that stalls on every attempt takes to fail. So a data loader rides out an
 *    S3 restart or a short network outage, and a long one fails within the same
 *    documented deadline, however the outage mixes stalls and refusals.
 */
import { BACKOFF_BASE_MS, BACKOFF_CAP_MS } from './retry.js';

/**
 * Ceiling of the backoff between attempts on a refused endpoint. A refused connection
 * costs S3 nothing, so polling about every second lets reads resume within ~1 s of the
 * endpoint's return instead of after a backoff of up to BACKOFF_CAP_MS (20 s).
 */
export const OUTAGE_POLL_MS = 1000;

/** Shared by every request path of one client: has the endpoint ever answered (any HTTP reply)? */
export interface Reachability {
  answered: boolean;
}

/**
 * The longest one request can take to fail when no byte ever arrives: every attempt
 * stalls for the whole --request-timeout, and the backoff between attempts waits its
 * full ceiling (equal to s3DeadlineMs() in src/fuse/deadline.ts; a test checks it).
 */
export function requestDeadlineMs(o: { requestTimeoutMs: number; maxAttempts: number }): number {
  let backoff = 0;
  for (let n = 1; n < o.maxAttempts; n++) backoff += Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** Math.min(n - 1, 30));
  return o.maxAttempts * o.requestTimeoutMs + backoff;
}
