/**
 * BufferPool: recycles the large buffers ranged GETs are read into.
 *
 * Why: on a VM every fresh large allocation costs a page fault per 4 KiB when it is first
 * written (measured ~1.5-2.5 CPU s per GB on the Firecracker guests we run on: more than the
 * rest of the data path). A GET's buffer that comes back here is reused by a later GET of
 * the same length, with its pages already mapped.
 *
 * Algorithm:
 *  - `acquire(n)` hands out a Slab of exactly n bytes with one reference: an idle slab of
 *    that length when there is one, else a new allocation. Only lengths that are a multiple
 *    of `unit` (the cache's block size) and at least `unit` are pooled: those are the runs of
 *    whole blocks GETs fetch, so a few lengths (mostly --part-size) recur; other lengths
 *    (file tails, small files) would rarely be asked for again, and acquire() returns
 *    undefined so the caller allocates as before.
 *  - Every holder takes a reference (`ref()`) and gives it back (`unref()`); the slab
 *    returns to its idle list only when the last reference is gone. So a buffer still held
 *    by anyone (the cache, a GET filling it, a read copying out of it) is never handed out
 *    again, and recycling can never show one reader another object's bytes.
 *  - Bound: `held` counts every byte the pool allocated and still knows (in use or idle).
 *    A slab coming back while `held` exceeds `maxBytes` is dropped (its buffer handed to
 *    `discard`, which for slabs of a region gives the pages and the range back at once,
 *    ./slab-arena.ts; else left to the GC); an
 *    allocation that would exceed it first drops idle slabs of other lengths. Buffers in use
 *    are bounded by their owners (the cache's size and the in-flight budget), so giving the
 *    pool cache-size + max-inflight keeps memory within the configured bound.
 */

export interface BufferPoolOptions {
  /** Bytes the pool may hold in total, in use and idle (e.g. cache size + in-flight bytes). */
  maxBytes: number;
  /** Only multiples of this length (and at least it) are pooled: the cache's block size. */
  unit: number;
  /** Makes a new slab's buffer (default Buffer.allocUnsafe), e.g. one whose pages are mapped up front. */
  alloc?: (n: number) => Buffer;
  /** Called with the buffer of every slab dropped (no one holds it): e.g. to give its pages back at once rather than when V8 collects it. */
  discard?: (buf: Buffer) => void;
}

export interface BufferPoolStats {
  /** Slabs allocated fresh. */
  allocated: number;
  /** Slabs handed out again from an idle list. */
  reused: number;
  /** Slabs let go to the GC (over the bound). */
  dropped: number;
}

/** One pooled buffer and its references. */
export class Slab {
  /** References held; 0 means idle (in the pool) or dropped. */
  private refs = 1;
  private gen = 0;

  constructor(readonly buf: Buffer, private readonly pool: BufferPool) {}

  get refCount(): number {
    return this.refs;
  }

  ref(): void {
    if (this.refs <= 0) throw new Error('internal: ref() of a released buffer');
    this.refs++;
  }

  /** Gives one reference back; the last one returns the buffer to the pool. */
  unref(): void {
    if (this.refs <= 0) throw new Error('internal: unref() of a released buffer');
    if (--this.refs === 0) this.pool.recycle(this);
  }

  /** Times this slab was handed out again: with refCount, tells a holder of a stale pointer that the slab is now someone else's. */
  get generation(): number {
    return this.gen;
  }

  /** Used by the pool only: an idle slab handed out again. */
  revive(): void {
    this.refs = 1;
    this.gen++;
  }
}

export class BufferPool {
  readonly maxBytes: number;
  readonly unit: number;
  private readonly alloc: (n: number) => Buffer;
  private readonly discard: ((buf: Buffer) => void) | undefined;
  readonly stats: BufferPoolStats = { allocated: 0, reused: 0, dropped: 0 };
  /** Idle slabs by length. INVARIANT: every slab here has refCount 0. */
  private readonly idle = new Map<number, Slab[]>();
  private idleBytes = 0;
  /** Bytes of every slab allocated and not dropped (in use + idle). */
  private held = 0;

  constructor(opts: BufferPoolOptions) {
    if (!(Number.isSafeInteger(opts.maxBytes) && opts.maxBytes > 0)) throw new RangeError('pool maxBytes must be a positive integer');
    if (!(Number.isSafeInteger(opts.unit) && opts.unit > 0)) throw new RangeError('pool unit must be a positive integer');
    this.maxBytes = opts.maxBytes;
    this.unit = opts.unit;
    this.alloc = opts.alloc ?? Buffer.allocUnsafe;
    this.discard = opts.discard;
  }

  /** Whether buffers of length n are pooled. */
  pools(n: number): boolean {
    return n >= this.unit && n % this.unit === 0 && n <= this.maxBytes;
  }

  /** A slab of exactly n bytes (contents undefined) holding one reference, or undefined when n is not pooled. */
  acquire(n: number): Slab | undefined {
    if (!this.pools(n)) return undefined;
    const list = this.idle.get(n);
    const slab = list?.pop();
    if (slab) {
      this.idleBytes -= n;
      slab.revive();
      this.stats.reused++;
      return slab;
    }
    // Make room by dropping idle slabs of other lengths, so the bound holds.
    for (const [len, other] of this.idle) {
      while (this.held + n > this.maxBytes && other.length > 0) {
        this.discard?.(other.pop()!.buf);
        this.idleBytes -= len;
        this.held -= len;
        this.stats.dropped++;
      }
      if (this.held + n <= this.maxBytes) break;
    }
    this.held += n;
    this.stats.allocated++;
    return new Slab(this.alloc(n), this);
  }

  /** Bytes in idle slabs. */
  get idleSize(): number {
    return this.idleBytes;
  }

  /** Bytes the pool knows, in use and idle. */
  get heldSize(): number {
    return this.held;
  }

  /** Drops every idle slab (e.g. when the cache closes). */
  clear(): void {
    for (const list of this.idle.values()) {
      this.stats.dropped += list.length;
      if (this.discard) for (const slab of list) this.discard(slab.buf);
    }
    this.held -= this.idleBytes;
    this.idleBytes = 0;
    this.idle.clear();
  }

  /** Called by Slab.unref() when its last reference is gone. */
  recycle(slab: Slab): void {
    const n = slab.buf.length;
    if (this.held > this.maxBytes) {
      this.held -= n;
      this.stats.dropped++;
      this.discard?.(slab.buf);
      return;
    }
    let list = this.idle.get(n);
    if (!list) this.idle.set(n, (list = []));
    list.push(slab);
    this.idleBytes += n;
  }
}
