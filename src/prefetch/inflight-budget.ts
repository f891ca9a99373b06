/**
 * The global bound on bytes being fetched at once (--max-inflight).
 *
 * Memory held by sluice is the block cache plus the bytes of GETs in flight, so
 * bounding the second bounds the whole. Two kinds of claim:
 *  - demand (a reader is waiting): always granted at once, even past the limit.
 *    A reader must never wait behind read-ahead; its own bytes are at most one
 *    kernel read rounded up to blocks, so the overshoot is small and bounded by
 *    the number of concurrent reads.
 *  - prefetch: granted only while demand + prefetch stays within the limit, and
 *    the claims of its kind within that kind's own limit, if it has one
 *    (`tryAcquire`). When it is refused, the caller skips the read-ahead for now
 *    (the sequential prefetcher retries on the next read) or waits for a release
 *    (`onRelease`, used by cross-file prefetch). A kind limit keeps one kind from
 *    taking the whole budget: cross-file prefetch, which waits for every release,
 *    would otherwise leave sequential read-ahead none.
 */
import type { PrefetchKind } from '../cache/block-cache.js';
import { inflightBytes } from '../metrics/metrics.js';

// The inflightBytes gauge moves by deltas, so with several budgets (one per FastFile
// channel) it reports the process's total.

export class InflightBudget {
  readonly limit: number;
  /** Bytes currently claimed (demand + prefetch). */
  private used = 0;
  /** Largest amount ever claimed by prefetch alone at one moment, for tests. */
  peakPrefetch = 0;
  private prefetchUsed = 0;
  private readonly kindUsed: Record<PrefetchKind, number> = { sequential: 0, cross_file: 0, random_fill: 0 };
  private readonly listeners = new Set<() => void>();

  constructor(limit: number, readonly kindLimits: Partial<Record<PrefetchKind, number>> = {}) {
    if (!(Number.isSafeInteger(limit) && limit > 0)) throw new RangeError('in-flight limit must be a positive integer');
    this.limit = limit;
  }

  /** Bytes claimed by prefetch of one kind. */
  usedBy(kind: PrefetchKind): number {
    return this.kindUsed[kind];
  }

  get inUse(): number {
    return this.used;
  }

  get available(): number {
    return Math.max(0, this.limit - this.used);
  }

  /** A reader's claim: never refused. Returns the function that gives it back. */
  acquireDemand(n: number): () => void {
    this.used += n;
    inflightBytes.inc(n);
    return this.releaser(n, undefined);
  }

  /** A prefetch claim: granted (returns the release function) only within the limit. */
  tryAcquire(n: number, kind: PrefetchKind = 'sequential'): (() => void) | undefined {
    if (this.used + n > this.limit) return undefined;
    if (this.kindUsed[kind] + n > (this.kindLimits[kind] ?? this.limit)) return undefined;
    this.used += n;
    this.prefetchUsed += n;
    this.kindUsed[kind] += n;
    if (this.prefetchUsed > this.peakPrefetch) this.peakPrefetch = this.prefetchUsed;
    inflightBytes.inc(n);
    return this.releaser(n, kind);
  }

  /** Called after every release (e.g. to resume waiting prefetch). Returns an unsubscribe function. */
  onRelease(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private releaser(n: number, kind: PrefetchKind | undefined): () => void {
    let done = false;
    return () => {
      if (done) return; // idempotent: a double release must not inflate the budget
      done = true;
      this.used -= n;
      if (kind) {
        this.prefetchUsed -= n;
        this.kindUsed[kind] -= n;
      }
      inflightBytes.dec(n);
      for (const fn of [...this.listeners]) fn();
    };
  }
}
