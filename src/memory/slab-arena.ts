/**
 * SlabArena: a pool's slabs carved out of regions it reserved when it was made, so that V8
 * counts their memory once, up front, and not slab by slab in the middle of the reads.
 *
 * Why: V8 starts a garbage collection each time its count of external memory (every
 * ArrayBuffer's bytes) has grown by about 64 MiB since the last one, as if the growth were
 * garbage that collecting could give back. A BufferPool's slabs are not garbage: the pool keeps
 * them for reuse. So each slab a new daemon mapped while it read (tens of 8 MiB slabs in its
 * first GB) paid for collections of a heap with nothing to free. BENCHMARKS.md "t11-arena"
 * measured 4 readers of 128 MiB at once on a new daemon: 6-7 full collections and ~20
 * scavenges for "external memory pressure".
 *
 * Algorithm:
 *  - Regions: mappings with no page in them yet (the addon's reserveRegion, MAP_NORESERVE),
 *    REGION_MAX bytes at most each, together as large as the pool's bound. V8 counts them
 *    when the pool is made, which is when a daemon starts. They cost no memory until used.
 *  - alloc(n): the first free range of a region that holds n bytes (first fit over ranges kept
 *    sorted by offset), split off; its pages are mapped in one call (populateSlab), as the
 *    addon's per-slab allocation does. A pool asks for few distinct lengths and rarely (its
 *    slabs are reused), so a linear scan costs nothing that matters.
 *  - A slab of HUGE_BLOCK or more starts on a HUGE_BLOCK boundary of its region (regions are
 *    mapped so aligned) where a free range has room for it there, else where it fits: the addon
 *    maps the whole 2 MiB blocks inside a slab in huge pages, and an aligned 8 MiB slab is
 *    four of them, where an unaligned one would be three and two 4 KiB-paged ends. The gap
 *    left in front stays free for smaller slabs. Why huge pages: BENCHMARKS.md "t11-huge".
 *  - release(buf): the slab's pages go back to the kernel at once (discardPages), and its range
 *    is free again, merged with free neighbours. The pool releases only slabs no one holds
 *    (refCount 0), the same rule under which it reuses them, so no view of a released range
 *    is left to see what a later slab puts there.
 *  - When the regions are full or fragmented, alloc returns undefined and the pool falls back
 *    to a slab of its own (counted by V8 as before). Memory stays within the pool's bound
 *    either way: the arena only changes where the bytes live.
 */

/** 1 GiB: Node 20's largest Buffer is 4 GiB; a bound of several GiB (a large --cache-size) takes several regions. */
export const REGION_MAX = 1024 * 1024 * 1024;
/** 2 MiB: a transparent huge page on x86-64 and arm64 (4 KiB granule), as native/binding.c's SLUICE_HUGE_PAGE. */
export const HUGE_BLOCK = 2 * 1024 * 1024;

export interface ArenaOps {
  /** A mapping of n bytes with no page yet (undefined when not possible here). */
  reserve(n: number): Buffer | undefined;
  /** Maps the pages of a slab before its first write. */
  populate(buf: Buffer): void;
  /** Gives the pages of a slab back. */
  discard(buf: Buffer): void;
}

interface Region {
  buf: Buffer;
  /** Free ranges [start, end), sorted by start, never touching each other. */
  free: { start: number; end: number }[];
}

export class SlabArena {
  private readonly regions: Region[] = [];
  /** Bytes handed out and not released. */
  private used = 0;

  constructor(bytes: number, private readonly ops: ArenaOps) {
    for (let left = bytes; left > 0; left -= REGION_MAX) {
      const buf = ops.reserve(Math.min(left, REGION_MAX));
      if (!buf) break;
      this.regions.push({ buf, free: [{ start: 0, end: buf.length }] });
    }
  }

  /** Bytes reserved. */
  get reservedBytes(): number {
    return this.regions.reduce((s, r) => s + r.buf.length, 0);
  }

  get usedBytes(): number {
    return this.used;
  }

  /** A slab of n bytes with its pages mapped, or undefined when no region has room. */
  alloc(n: number): Buffer | undefined {
    if (n >= HUGE_BLOCK) {
      for (const r of this.regions) {
        for (let i = 0; i < r.free.length; i++) {
          const f = r.free[i]!;
          const at = Math.ceil(f.start / HUGE_BLOCK) * HUGE_BLOCK;
          if (at + n > f.end) continue;
          if (at > f.start) {
            // Keep the gap in front free: [f.start, at), then what follows the slab.
            r.free.splice(i + 1, 0, { start: at, end: f.end });
            f.end = at;
            i++;
          }
          return this.take(r, i, n);
        }
      }
    }
    for (const r of this.regions) {
      const i = r.free.findIndex((f) => f.end - f.start >= n);
      if (i >= 0) return this.take(r, i, n);
    }
    return undefined;
  }

  /** The first n bytes of free range i of r, handed out with their pages mapped. */
  private take(r: Region, i: number, n: number): Buffer {
    const f = r.free[i]!;
    const slab = r.buf.subarray(f.start, f.start + n);
    f.start += n;
    if (f.start === f.end) r.free.splice(i, 1);
    this.ops.populate(slab);
    this.used += n;
    return slab;
  }

  /** Whether buf is a slab of this arena. */
  owns(buf: Buffer): boolean {
    return this.regions.some((r) => r.buf.buffer === buf.buffer);
  }

  /** Takes a slab back (no one may hold it): its pages go back, its range is free again. */
  release(buf: Buffer): void {
    const r = this.regions.find((x) => x.buf.buffer === buf.buffer);
    if (!r) throw new Error('internal: release() of a buffer the arena did not hand out');
    const start = buf.byteOffset - r.buf.byteOffset;
    const end = start + buf.length;
    // Insert in order, merging with the free ranges on either side.
    let i = 0;
    while (i < r.free.length && r.free[i]!.start < start) i++;
    const before = r.free[i - 1];
    const after = r.free[i];
    if ((before && before.end > start) || (after && after.start < end)) throw new Error('internal: release() of a range already free');
    this.ops.discard(buf);
    this.used -= buf.length;
    if (before && before.end === start) {
      before.end = end;
      if (after && after.start === end) {
        before.end = after.end;
        r.free.splice(i, 1);
      }
    } else if (after && after.start === end) {
      after.start = start;
    } else {
      r.free.splice(i, 0, { start, end });
    }
  }
}
