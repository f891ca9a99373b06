/**
 * slabPool: the BufferPool every large reader of sluice draws from (the wire client's ranged
 * GETs through the block cache, Pipe mode's read-ahead, File mode's downloads), with its slabs
 * from the addon where it can give them.
 *
 * Algorithm: the pool's slabs are carved out of regions reserved when the pool is made
 * (./slab-arena.ts: V8 counts their memory once, then, and not slab by slab in the middle of
 * the reads), else mapped one by one with their pages mapped up front (the addon's
 * prefaultedAlloc), else (no addon) Buffer.allocUnsafe, the pool's default. A dropped slab
 * of a region gives its pages back at once; a slab of its own is left to V8.
 *
 * Invariant: memory stays within the pool's bound whichever way a slab was made; the arena
 * only changes where the bytes live. This module and the two beside it are the only holders
 * of slab memory policy; src/native/addon.ts only exposes the system calls.
 */
import { prefaultedAlloc, regionOps } from '../native/addon.js';
import { BufferPool } from './buffer-pool.js';
import { SlabArena } from './slab-arena.js';

/**
 * BufferPool options for a pool of at most `maxBytes` whose slabs come from the addon: carved
 * out of regions reserved now (./slab-arena.ts), else mapped one by one (prefaultedAlloc), with
 * `discard` giving a dropped slab's pages back at once. Empty (the pool's defaults) when the
 * addon cannot give slabs.
 */
export function prefaultedPoolOptions(maxBytes: number): { alloc?: (bytes: number) => Buffer; discard?: (buf: Buffer) => void } {
  const alloc = prefaultedAlloc();
  if (alloc === undefined) return {};
  const ops = regionOps();
  if (ops === undefined) return { alloc };
  let arena: SlabArena | undefined;
  try {
    arena = new SlabArena(maxBytes, ops);
  } catch {
    arena = undefined; // mmap refused the reservation (e.g. strict overcommit): slabs one by one
  }
  return {
    alloc: (n) => arena?.alloc(n) ?? alloc(n),
    // A slab of its own is left to V8 to unmap, as before; a region's goes back to the arena.
    discard: (b) => {
      if (arena?.owns(b)) arena.release(b);
    },
  };
}

/** A BufferPool of at most `maxBytes` in slabs of multiples of `unit`, from the addon where it can (prefaultedPoolOptions). */
export function slabPool(maxBytes: number, unit: number): BufferPool {
  return new BufferPool({ maxBytes, unit, ...prefaultedPoolOptions(maxBytes) });
}
