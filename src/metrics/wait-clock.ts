/**
 * Starvation time as an operator means it: the seconds during which at least one
 * reader of a channel was blocked on S3, so that rate(sluice_starved_seconds_total)
 * is a fraction between 0 and 1 ("the job was starving 30% of the last minute").
 *
 * Summing every read's wait would overcount: the kernel's readahead and a data
 * loader's workers send several reads at once, and three reads waiting through the
 * same 100 ms would count 300 ms. Instead each waiting read reports its interval
 * [start, end] when it ends, and the clock adds only the part of it after the end of
 * everything counted so far (`coveredUntil`). Reads end in time order, so this is the
 * length of the union of the intervals, except for a gap between two earlier waits
 * that a later, longer wait spans: that gap is not counted (an undercount, never an
 * overcount, and only where several reads overlap).
 */
import { readWaitSeconds } from './metrics.js';

export class WaitClock {
  // INVARIANT: every waiting interval already counted ends at or before coveredUntil (ms, performance.now()).
  private coveredUntil = 0;

  constructor(private readonly labels: { channel: string; mode: string }) {}

  /** Count the wait of one read that blocked on S3 from `startMs` to `endMs` (performance.now() values). */
  add(startMs: number, endMs: number): void {
    const from = Math.max(startMs, this.coveredUntil);
    if (endMs > from) readWaitSeconds.inc(this.labels, (endMs - from) / 1000);
    if (endMs > this.coveredUntil) this.coveredUntil = endMs;
  }
}
