/**
 * The block cache: fixed-size, aligned blocks of objects in memory, bounded in bytes.
 *
 * A block is identified by (key, ETag, index); block i of an object covers bytes
 * [i * blockSize, min(size, (i + 1) * blockSize)). The ETag is part of the identity,
 * so bytes of two versions of an object can never be mixed: a reader pinned to one
 * ETag only ever sees blocks of that version.
 *
 * Two maps:
 *  - `resident`: an lru-cache bounded by `capacityBytes` (maxSize + sizeCalculation);
 *    least recently used blocks are evicted first.
 *  - `inflight`: blocks being fetched. Single-flight: a lookup of a block that is
 *    already being fetched shares that fetch's promise instead of starting a GET.
 *    A failed fetch is removed from `inflight` and never cached, so the next
 *    lookup retries.
 * One GET may fill several contiguous blocks (`fill()`): the fetcher asks for a
 * run of blocks and the cache slices the reply without copying (a copy costs an
 * allocation and page faults per block: about as much CPU as the rest of the
 * data path). Slices share the GET's buffer, so the blocks of one GET form a group
 * that is evicted together: when LRU evicts one of them, its siblings go too.
 * INVARIANT: a GET's buffer is either wholly resident (and counted in the size) or
 * not held by the cache at all, so the memory held is exactly `size`.
 *
 * Buffer recycling (optional, `poolBytes`): a GET of whole blocks reads into a buffer
 * from ./buffer-pool.ts instead of a fresh one (fresh memory costs a page fault per
 * 4 KiB). The cache holds one reference on it from the fill's start until its group
 * leaves the cache (or the fetch fails); a reader that is handed a block (lookup() or
 * fill() with `pins`) holds another until it has copied the bytes out and unrefs it.
 * A buffer goes back to the pool only when no reference is left, so bytes a reader
 * holds are never overwritten by a later GET. The short GETs of one part may read into one
 * part-long slab, each at its place (fill's `slabBytes`), each group holding a reference: the
 * size counts the blocks' bytes, the pool the slab.
 *
 * Prefetch accounting: a block fetched ahead of a reader carries its kind
 * ('sequential', 'cross_file' or 'random_fill') until a reader first uses it (counted "used"),
 * or until it leaves the cache unread (counted "wasted"). So, once the cache is
 * cleared, used + wasted equals the bytes prefetched.
 *
 * Fetch only what can be kept (issue 11): bytes fetched ahead and not yet read (in
 * flight or resident) are bounded by AHEAD_SHARE of the capacity: the prefetchers ask
 * `roomAhead()` before each GET and wait for `onAheadFreed()` when refused. And a
 * reader's first use of a prefetched block does not move it to the most recently used
 * end: it keeps its place from its fill, so LRU evicts blocks already read (filled
 * earlier, in reading order) before blocks fetched ahead and still unread. Without
 * both, a cache smaller than the read-ahead (16 MiB against 32 files of 4 MiB fetched
 * ahead) evicted its own unread blocks and a one-pass read fetched about twice its
 * bytes. Unread bytes evicted all the same are counted (evictedUnread, and
 * sluice_prefetch_evicted_unread_bytes_total).
 *
 * Metrics: cacheHits / cacheMisses count reader (demand) lookups only, so the hit
 * ratio is the reader's; lookups made by the prefetcher are not counted.
 */
import { LRUCache } from 'lru-cache';
import type { BufferPool, Slab } from '../memory/buffer-pool.js';
import { slabPool } from '../memory/slab-pool.js';
import { cacheBytes, cacheCapacityBytes, cacheEvictions, cacheHits, cacheMisses, prefetchBytes, prefetchEvictedUnreadBytes } from '../metrics/metrics.js';

/**
 * Share of the capacity that bytes fetched ahead and not yet read may take: half. The
 * other half holds what readers are reading and have just read (blocks they read twice,
 * the groups they are inside), so LRU, which evicts those first, never has to reach
 * the unread half of a one-pass read.
 */
export const AHEAD_SHARE = 0.5;

/**
 * Size at which the map of part slabs (slabFor) is swept of slabs gone back to the pool: 64. Each
 * sequential reader of a large file adds one entry per file, so a sweep, a scan of 64 entries,
 * runs once per 64 files read in turn; the entries it keeps are the ramps still in the cache.
 */
const PART_SLABS_SWEEP = 64;

/**
 * Who fetched a block ahead of a reader: a sequential reader's window (../prefetch/read-cursor.ts),
 * cross-file prefetch (../prefetch/cross-file.ts), or the fill of a small file read at random
 * (../prefetch/random-fill.ts). It is the `kind` label of sluice_prefetch_bytes_total.
 */
export type PrefetchKind = 'sequential' | 'cross_file' | 'random_fill';

export interface BlockId {
  key: string;
  etag: string;
  index: number;
}

/** Counters of one cache, for tests and summaries (the Prometheus metrics are process-wide). */
export interface BlockCacheStats {
  hits: number;
  misses: number;
  evictions: number;
  /** Blocks dropped by retire() once a sequential reader had passed them. */
  retired: number;
  prefetchUsed: Record<PrefetchKind, number>;
  prefetchWasted: Record<PrefetchKind, number>;
  /** Prefetched bytes evicted by LRU pressure before any reader read them (part of prefetchWasted). */
  evictedUnread: number;
}

interface Resident {
  data: Buffer;
  /** Set while the block was prefetched and no reader has used it yet. */
  kind: PrefetchKind | undefined;
  /** The blocks sharing this block's GET buffer (undefined for a block fetched alone). */
  group: Group | undefined;
}

interface Group {
  keys: string[];
  /** The members are blocks [first, first + keys.length) of one object version. */
  first: number;
  /** Set once one member left the cache: the others are being removed. */
  dropped: boolean;
  /** The pooled buffer the members are slices of; the cache's reference is given back when the group leaves. */
  slab: Slab | undefined;
}

interface Inflight {
  promise: Promise<Buffer>;
  /** The pooled buffer the fetch reads into, if any (readers pin it). */
  slab: Slab | undefined;
  kind: PrefetchKind | undefined;
  /** A reader asked for the block while it was in flight. */
  used: boolean;
  /** The block's length. */
  bytes: number;
}

export interface BlockCacheOptions {
  /** Bytes the resident blocks may take in total. */
  capacityBytes: number;
  /** Bytes per block; the last block of an object may be shorter. */
  blockSize: number;
  /**
   * Recycle GET buffers through a BufferPool bounded by this many bytes (resident +
   * in flight + idle: cache size + in-flight budget is right). Absent: no recycling.
   * With a pool, every caller of lookup()/fill() that keeps a block across an await
   * must pass `pins` and unref them once done (see the module comment).
   */
  poolBytes?: number;
}

/** The cache's narrow interface, as the prefetcher uses it. */
export interface BlockStore {
  readonly blockSize: number;
  /** A resident block, or undefined. Does not count as a reader's hit. */
  get(id: BlockId): Buffer | undefined;
  /** Store a block (e.g. one fetched elsewhere). */
  put(id: BlockId, data: Buffer, kind?: PrefetchKind): void;
  /** Resident or being fetched. */
  has(id: BlockId): boolean;
}

function cacheKey(key: string, etag: string, index: number): string {
  // NUL cannot appear in an ETag or a safe key, so the fields cannot run together.
  return `${key}\0${etag}\0${index}`;
}

export class BlockCache implements BlockStore {
  readonly blockSize: number;
  readonly capacityBytes: number;
  /** Recycles GET buffers (when `poolBytes` was given). */
  readonly pool: BufferPool | undefined;
  readonly stats: BlockCacheStats = {
    hits: 0, misses: 0, evictions: 0, retired: 0,
    prefetchUsed: { sequential: 0, cross_file: 0, random_fill: 0 },
    prefetchWasted: { sequential: 0, cross_file: 0, random_fill: 0 },
    evictedUnread: 0,
  };
  /** Bytes fetched ahead and not yet read, in flight or resident (see the module comment). */
  private ahead = 0;
  /** Bound on `ahead`: AHEAD_SHARE of the capacity. */
  readonly aheadLimit: number;
  /** A prefetcher was refused room since the last notification: tell the listeners when room frees up. */
  private aheadStarved = false;
  private readonly aheadListeners = new Set<() => void>();
  /** The part-long slabs of sequential readers' short GETs, by part of an object version (slabFor). */
  private readonly partSlabs = new Map<string, { slab: Slab; gen: number; end: number }>();
  /** Set while dropGroup removes the siblings of an evicted block: they count as evicted too. */
  private evictingGroup = false;

  // INVARIANT: a cache key is in at most one of `resident` and `inflight`.
  private readonly resident: LRUCache<string, Resident>;
  private readonly inflight = new Map<string, Inflight>();
  private closed = false;
  /** This cache's share of the cacheBytes gauge. */
  private reported = 0;

  constructor(opts: BlockCacheOptions) {
    if (!(Number.isSafeInteger(opts.blockSize) && opts.blockSize > 0)) throw new RangeError('blockSize must be a positive integer');
    if (!(Number.isSafeInteger(opts.capacityBytes) && opts.capacityBytes > 0)) throw new RangeError('capacityBytes must be a positive integer');
    this.blockSize = opts.blockSize;
    this.capacityBytes = opts.capacityBytes;
    this.aheadLimit = Math.floor(opts.capacityBytes * AHEAD_SHARE);
    // Slabs mapped up front where the addon can (one call per slab instead of a fault per
    // 4 KiB inside the socket reads; ../native/addon.ts): a fresh daemon's first GB otherwise
    // pays ~2 CPU s of page faults on this kind of VM.
    this.pool = opts.poolBytes !== undefined ? slabPool(opts.poolBytes, opts.blockSize) : undefined;
    this.resident = new LRUCache<string, Resident>({
      maxSize: opts.capacityBytes,
      // lru-cache rejects size 0; an empty block cannot exist (blocks past EOF are never made).
      sizeCalculation: (v) => Math.max(1, v.data.length),
      dispose: (v, _k, reason) => this.onDispose(v, reason),
      // disposeAfter runs once the entry is fully removed, so it may change the cache.
      disposeAfter: (v, k, reason) => this.dropGroup(v, k, reason),
    });
    // Gauges move by deltas: with several FastFile channels, each with its own cache,
    // they report the process's total.
    cacheCapacityBytes.inc(opts.capacityBytes);
  }

  get(id: BlockId): Buffer | undefined {
    return this.resident.get(cacheKey(id.key, id.etag, id.index))?.data;
  }

  has(id: BlockId): boolean {
    const k = cacheKey(id.key, id.etag, id.index);
    return this.inflight.has(k) || this.resident.has(k);
  }

  put(id: BlockId, data: Buffer, kind?: PrefetchKind): void {
    if (this.closed) return;
    const k = cacheKey(id.key, id.etag, id.index);
    if (this.inflight.has(k)) return; // the fetch in flight will store the same bytes
    if (kind) this.ahead += data.length;
    this.resident.set(k, { data, kind, group: undefined });
    this.updateGauge();
  }

  /**
   * A reader's lookup: the resident block, the shared promise of a block in flight,
   * or undefined (a miss: the caller must fetch it). Counts a hit or a miss, and
   * marks a prefetched block as used. With `pins`, the block's pooled buffer (if any)
   * gets a reference pushed there: the caller unrefs it once it has copied the bytes.
   */
  lookup(id: BlockId, pins?: Slab[]): Buffer | Promise<Buffer> | undefined {
    const k = cacheKey(id.key, id.etag, id.index);
    const r = this.resident.peek(k);
    if (r) return this.use(r, k, pins);
    const f = this.inflight.get(k);
    if (f) {
      this.stats.hits++;
      cacheHits.inc();
      if (f.kind && !f.used) this.unahead(f.bytes);
      f.used = true;
      pin(f.slab, pins);
      return f.promise;
    }
    this.stats.misses++;
    cacheMisses.inc();
    return undefined;
  }

  /**
   * The resident blocks `first`, `first + 1`, ... up to `last` of one object version, stopping
   * at the first that is not resident (none when `first` is not), each pooled buffer pinned
   * into `pins`, for a sequential reader that lends them to reads answered elsewhere
   * (FsCore.lend). They are not counted read here: markRead() does that once reads reach
   * them, so a lent block the reader never reached stays protected as unread (retire()) and
   * in the ahead budget, as it would without the lend.
   */
  residentRun(key: string, etag: string, first: number, last: number, pins: Slab[]): Buffer[] {
    const out: Buffer[] = [];
    for (let i = first; i <= last; i++) {
      const r = this.resident.peek(cacheKey(key, etag, i));
      if (!r) break;
      pin(r.group?.slab, pins);
      out.push(r.data);
    }
    return out;
  }

  /**
   * Is block `index` of one object version fetched ahead of readers and not read yet (resident
   * or in flight)? A read far behind a sequential reader's furthest read that lands on such a
   * block is a late kernel readahead request, not a second pass (../prefetch/read-cursor.ts).
   */
  unreadAhead(key: string, etag: string, index: number): boolean {
    const k = cacheKey(key, etag, index);
    const r = this.resident.peek(k);
    if (r) return r.kind !== undefined;
    const f = this.inflight.get(k);
    return f !== undefined && f.kind !== undefined && !f.used;
  }

  /** Blocks `first`..`last` of one object version, those still resident, counted as read by reads answered elsewhere: as lookup() counts a block at its first read. */
  markRead(key: string, etag: string, first: number, last: number): void {
    for (let i = first; i <= last; i++) {
      const k = cacheKey(key, etag, i);
      const r = this.resident.peek(k);
      if (r) this.use(r, k, undefined);
    }
  }

  /** A reader's use of resident block `r` (key `k`): see lookup(). */
  private use(r: Resident, k: string, pins: Slab[] | undefined): Buffer {
    pin(r.group?.slab, pins);
    this.stats.hits++;
    cacheHits.inc();
    // A prefetched block's first use keeps its LRU place (see the module comment); later uses move it.
    if (r.kind) {
      this.countUsed(r.kind, r.data.length);
      r.kind = undefined;
      this.unahead(r.data.length);
    } else {
      this.resident.get(k);
    }
    return r.data;
  }

  /**
   * Starts one fetch that fills `count` contiguous blocks from `first`. The caller
   * makes sure none of them is resident or in flight. `run` resolves with the bytes
   * of all of them (the last may be short). Returns one promise per block; each
   * rejects if the fetch fails (and nothing is cached). `kind` marks a prefetch.
   * With a pool and `bytes` (the run's length) poolable, `run` gets a recycled buffer of
   * exactly `bytes` to read into (it may ignore it and resolve with its own), and its
   * Slab (to take references of its own, e.g. for a write that outlives the GET); `pins`
   * then gets a reference to it, as in lookup(). With `slabBytes` larger than `bytes` (a
   * sequential reader's GET shorter than a part, ../prefetch/block-fetcher.ts), the buffer is
   * `bytes` of a slab of `slabBytes` that the GETs of one part share, at the GET's place in the
   * part (slabFor): the slab's length recurs, so it is reused, and one slab serves a ramp.
   */
  fill(
    key: string, etag: string, first: number, count: number, run: (into?: Buffer, slab?: Slab) => Promise<Buffer>, kind?: PrefetchKind,
    opts: { bytes?: number; pins?: Slab[]; slabBytes?: number } = {},
  ): Promise<Buffer>[] {
    const keys: string[] = [];
    const records: Inflight[] = [];
    // The cache's own reference, held until the group leaves the cache or the fetch fails.
    const taken = this.closed || opts.bytes === undefined ? undefined : this.slabFor(key, etag, first, opts.bytes, opts.slabBytes);
    let slab = taken?.slab;
    pin(slab, opts.pins);
    const into = taken?.into;
    // new Promise(): a run() that throws synchronously becomes a rejection like any other.
    const stored = new Promise<Buffer>((resolve) => resolve(run(into, slab))).then(
      (buf) => {
        if (slab && buf !== into) {
          // The client read into a buffer of its own: ours is not used (pinned readers still hold theirs).
          slab.unref();
          slab = undefined;
        }
        const blocks: Buffer[] = [];
        for (let i = 0; i < count; i++) {
          const start = i * this.blockSize;
          blocks.push(count === 1 ? buf : buf.subarray(start, Math.min(buf.length, start + this.blockSize)));
        }
        const group: Group | undefined = count > 1 || slab ? { keys, first, dropped: false, slab } : undefined;
        for (let i = 0; i < count; i++) {
          const rec = records[i]!;
          if (this.inflight.get(keys[i]!) === rec) this.inflight.delete(keys[i]!);
          // A group larger than what LRU keeps may evict its own first members: store no more of it.
          const data = blocks[i]!;
          if (this.closed || group?.dropped) {
            if (rec.kind && rec.used) this.countUsed(rec.kind, data.length);
            else if (rec.kind) { this.countWasted(rec.kind, data.length); this.unahead(rec.bytes); }
            continue;
          }
          if (rec.used && rec.kind) this.countUsed(rec.kind, data.length);
          this.resident.set(keys[i]!, { data, kind: rec.used ? undefined : rec.kind, group });
        }
        // Nothing of the group stayed (closed, or it evicted itself): the cache lets go of the buffer.
        if (group && (group.dropped || this.closed)) releaseSlab(group);
        this.updateGauge();
        return blocks;
      },
      (err: unknown) => {
        for (let i = 0; i < count; i++) {
          if (this.inflight.get(keys[i]!) === records[i]) this.inflight.delete(keys[i]!);
          if (kind && !records[i]!.used) this.unahead(records[i]!.bytes);
        }
        // The run has settled, so nothing writes into the buffer any more.
        slab?.unref();
        slab = undefined;
        throw err;
      },
    );
    const out: Promise<Buffer>[] = [];
    const total = opts.bytes ?? count * this.blockSize;
    if (kind) this.ahead += total;
    for (let i = 0; i < count; i++) {
      const promise = stored.then((blocks) => blocks[i]!);
      // Nobody may be waiting on a prefetched block: its failure must not be an unhandled rejection.
      promise.catch(() => undefined);
      const rec: Inflight = { promise, slab, kind, used: false, bytes: i < count - 1 ? this.blockSize : total - (count - 1) * this.blockSize };
      keys.push(cacheKey(key, etag, first + i));
      records.push(rec);
      this.inflight.set(keys[i]!, rec);
      out.push(promise);
    }
    return out;
  }

  /**
   * A sequential reader has moved past block `index` for good (every block before
   * `before` is behind it): drop the block, with its GET's group, if no reader still
   * needs it: it was used (an unread prefetched block stays), and every block of its
   * group is before `before` (a group is dropped whole, so one that reaches ahead of
   * the reader stays until the reader has passed it). The kernel's page cache keeps
   * what was read; dropping it here lets its buffer be recycled for the next part at
   * once, so a sequential reader works in a window of hot memory instead of touching
   * fresh pages for every byte (see the module header). Returns whether it was dropped.
   */
  retire(key: string, etag: string, index: number, before: number): boolean {
    const k = cacheKey(key, etag, index);
    const r = this.resident.peek(k);
    if (!r || r.kind) return false;
    if (r.group && r.group.first + r.group.keys.length > before) return false;
    if (r.group && r.group.keys.some((other) => this.resident.peek(other)?.kind !== undefined)) return false;
    this.resident.delete(k); // disposeAfter -> dropGroup removes the siblings and frees the buffer
    this.stats.retired++;
    this.updateGauge();
    return true;
  }

  /**
   * Drops block `index` if it was fetched ahead and no reader has read it (a reader went
   * past it for good: ../prefetch/order.ts). Its GET's other blocks go with it; its bytes
   * count as wasted and free room ahead. Returns whether it was dropped.
   */
  discardUnread(key: string, etag: string, index: number): boolean {
    const k = cacheKey(key, etag, index);
    if (!this.resident.peek(k)?.kind) return false;
    this.resident.delete(k); // onDispose counts it wasted; disposeAfter drops its group
    this.updateGauge();
    return true;
  }

  /**
   * May `n` more bytes be fetched ahead of readers? Within aheadLimit (a single GET larger
   * than the limit is let through when nothing else is ahead). A refusal arms onAheadFreed.
   */
  roomAhead(n: number): boolean {
    if (this.ahead === 0 || this.ahead + n <= this.aheadLimit) return true;
    this.aheadStarved = true;
    return false;
  }

  /** Bytes fetched ahead and not yet read (in flight or resident). */
  get aheadBytes(): number {
    return this.ahead;
  }

  /** Calls `fn` when room ahead frees up after a refusal; returns the unsubscribe function. */
  onAheadFreed(fn: () => void): () => void {
    this.aheadListeners.add(fn);
    return () => this.aheadListeners.delete(fn);
  }

  /** Bytes held by resident blocks. */
  get size(): number {
    return this.resident.calculatedSize;
  }

  get inflightBlocks(): number {
    return this.inflight.size;
  }

  /** Drops every block (unread prefetched blocks count as wasted); later fills are not stored. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.aheadListeners.clear();
    this.resident.clear();
    this.ahead = 0;
    this.inflight.clear();
    this.pool?.clear();
    this.partSlabs.clear();
    this.updateGauge();
    cacheCapacityBytes.dec(this.capacityBytes);
  }

  private countUsed(kind: PrefetchKind, n: number): void {
    this.stats.prefetchUsed[kind] += n;
    prefetchBytes.inc({ kind, outcome: 'used' }, n);
  }

  private onDispose(v: Resident, reason: LRUCache.DisposeReason): void {
    if (reason === 'evict') {
      this.stats.evictions++;
      cacheEvictions.inc();
    }
    if (v.kind) {
      this.countWasted(v.kind, v.data.length);
      if (!this.closed) this.unahead(v.data.length);
      if (reason === 'evict' || this.evictingGroup) {
        this.stats.evictedUnread += v.data.length;
        prefetchEvictedUnreadBytes.inc({ kind: v.kind }, v.data.length);
      }
    }
  }

  /**
   * The pooled slab a fill of `bytes` from block `first` reads into, with one reference for the
   * fill, and the bytes of it the fill reads into (`into`): with `slabBytes` larger than `bytes`
   * (a sequential reader's GET shorter than a part, ../prefetch/block-fetcher.ts, which never
   * crosses a part), the slab of that length that stands for the GET's part of the object
   * version, at the GET's offset within the part. The first such GET of a part takes a slab from
   * the pool; later ones of the same part share it while any of them still holds it. Else a slab
   * of exactly `bytes`, or undefined when the length is not pooled.
   */
  private slabFor(key: string, etag: string, first: number, bytes: number, slabBytes: number | undefined): { slab: Slab; into: Buffer } | undefined {
    // Blocks per part-long slab, and where the GET starts in its part's slab (-1: no whole number of blocks).
    const perSlab = (slabBytes ?? 0) / this.blockSize;
    const at = Number.isInteger(perSlab) && perSlab > 0 ? (first % perSlab) * this.blockSize : -1;
    // Not a short GET within one part-long slab: a slab of its own length.
    if (slabBytes === undefined || at < 0 || bytes >= slabBytes || at + bytes > slabBytes) {
      const slab = this.pool?.acquire(bytes);
      return slab && { slab, into: slab.buf };
    }
    const k = cacheKey(key, etag, Math.floor(first / perSlab));
    const open = this.partSlabs.get(k);
    // Still held by an earlier GET of this part, not handed out again since, and this GET's bytes
    // lie past every byte read into it so far: share it. So no GET ever writes where an earlier
    // one did (a block dropped and fetched again goes to a new slab), even with the same bytes,
    // and a reader still copying from the slab sees only what was there.
    if (open && open.slab.refCount > 0 && open.slab.generation === open.gen && at >= open.end) {
      open.slab.ref();
      open.end = at + bytes;
      return { slab: open.slab, into: open.slab.buf.subarray(at, at + bytes) };
    }
    const slab = this.pool?.acquire(slabBytes);
    if (!slab) return undefined;
    // Entries whose slab went back to the pool are swept once they could be many; a reader's ramp leaves one each.
    if (this.partSlabs.size >= PART_SLABS_SWEEP) {
      for (const [pk, e] of this.partSlabs) if (e.slab.refCount === 0 || e.slab.generation !== e.gen) this.partSlabs.delete(pk);
    }
    this.partSlabs.set(k, { slab, gen: slab.generation, end: at + bytes });
    return { slab, into: slab.buf.subarray(at, at + bytes) };
  }

  private unahead(n: number): void {
    if (this.closed) return;
    this.ahead -= n;
    if (!this.aheadStarved || this.ahead >= this.aheadLimit) return;
    this.aheadStarved = false;
    // Not from inside an LRU operation (this may run in dispose): the listeners start fills.
    queueMicrotask(() => { for (const fn of this.aheadListeners) fn(); });
  }

  private countWasted(kind: PrefetchKind, n: number): void {
    this.stats.prefetchWasted[kind] += n;
    prefetchBytes.inc({ kind, outcome: 'wasted' }, n);
  }

  /** A block left the cache: its GET's other blocks leave too (see the INVARIANT above). */
  private dropGroup(v: Resident, k: string, reason: LRUCache.DisposeReason): void {
    const g = v.group;
    if (!g || g.dropped) return;
    g.dropped = true;
    if (this.closed) {
      releaseSlab(g); // clear() removes the other members itself
      return;
    }
    this.evictingGroup = reason === 'evict';
    try {
      for (const other of g.keys) {
        if (other === k || this.resident.peek(other)?.group !== g) continue;
        this.resident.delete(other);
        if (reason === 'evict') {
          this.stats.evictions++;
          cacheEvictions.inc();
        }
      }
    } finally {
      this.evictingGroup = false;
    }
    // No member is resident any more: the cache's reference goes (readers' pins keep it from reuse).
    releaseSlab(g);
    this.updateGauge();
  }

  private updateGauge(): void {
    const now = this.resident.calculatedSize;
    cacheBytes.inc(now - this.reported);
    this.reported = now;
  }
}

/** Adds a reader's reference to a pooled buffer. */
function pin(slab: Slab | undefined, pins: Slab[] | undefined): void {
  if (!slab || !pins) return;
  slab.ref();
  pins.push(slab);
}

/** Gives back the cache's reference to a group's buffer, once. */
function releaseSlab(g: Group): void {
  const slab = g.slab;
  g.slab = undefined;
  slab?.unref();
}
