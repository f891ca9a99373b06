import t from 'tap';
import { HUGE_BLOCK, REGION_MAX, SlabArena, type ArenaOps } from '../../src/memory/slab-arena.js';

/** Ops over plain buffers, recording what was populated and discarded (by offset in its region). */
function fakeOps(): ArenaOps & { reserved: number[]; populated: string[]; discarded: string[]; refuse: boolean } {
  const regions: Buffer[] = [];
  const where = (b: Buffer): string => `${regions.findIndex((r) => r.buffer === b.buffer)}:${b.byteOffset}+${b.length}`;
  const ops = {
    reserved: [] as number[], populated: [] as string[], discarded: [] as string[], refuse: false,
    reserve(n: number): Buffer | undefined {
      if (ops.refuse) return undefined;
      ops.reserved.push(n);
      const r = Buffer.alloc(n);
      regions.push(r);
      return r;
    },
    populate: (b: Buffer) => { ops.populated.push(where(b)); },
    discard: (b: Buffer) => { b.fill(0); ops.discarded.push(where(b)); },
  };
  return ops;
}

t.test('slabs are carved in order, first fit, with their pages mapped; released ones are discarded and merge with free neighbours', async (t) => {
  const ops = fakeOps();
  const arena = new SlabArena(100, ops);
  t.same(ops.reserved, [100], 'one region, as large as the bound');
  const a = arena.alloc(30)!;
  const b = arena.alloc(30)!;
  const c = arena.alloc(30)!;
  t.same(ops.populated, ['0:0+30', '0:30+30', '0:60+30'], 'each slab populated as it is handed out');
  t.equal(arena.alloc(20), undefined, 'no room for 20 in the last 10 bytes');
  t.equal(arena.usedBytes, 90);
  a.fill(1); b.fill(2); c.fill(3);
  t.ok(arena.owns(b) && !arena.owns(Buffer.alloc(30)), 'owns its slabs only');
  arena.release(b);
  t.same(ops.discarded, ['0:30+30'], 'a released slab\'s pages go back');
  t.ok(a.every((x) => x === 1) && c.every((x) => x === 3), 'its neighbours are untouched');
  t.throws(() => arena.release(b), /already free/, 'a slab is released once');
  const d = arena.alloc(20)!;
  t.equal(d.byteOffset - b.byteOffset, 0, 'first fit: the hole b left');
  arena.release(a);
  arena.release(d);
  // Free now: [0, 60) merged from a, d and the rest of b's hole, and [90, 100).
  const e = arena.alloc(60)!;
  t.equal(e.byteOffset, a.byteOffset, 'a, d and the rest of b\'s hole merged into one range of 60');
  arena.release(c);
  arena.release(e);
  t.equal(arena.usedBytes, 0);
  t.ok(arena.alloc(100), 'all of it merged back into one range');
});

t.test('a bound larger than REGION_MAX takes several regions; a refused reservation leaves an arena that hands out nothing', async (t) => {
  const big = new SlabArena(2 * REGION_MAX + 5, { reserve: (n) => ({ length: n, buffer: new ArrayBuffer(0), byteOffset: 0 }) as unknown as Buffer, populate: () => {}, discard: () => {} });
  t.equal(big.reservedBytes, 2 * REGION_MAX + 5, 'regions of at most REGION_MAX bytes');
  const ops = fakeOps();
  ops.refuse = true;
  const none = new SlabArena(100, ops);
  t.equal(none.alloc(10), undefined, 'the pool then allocates slabs of its own');
  t.throws(() => none.release(Buffer.alloc(10)), /did not hand out/);
});

t.test('a slab of a huge block or more starts on a huge block boundary where a free range has room for it there, else where it fits; the gap in front serves smaller slabs', async (t) => {
  const MiB = 1024 * 1024;
  t.equal(HUGE_BLOCK, 2 * MiB);
  const ops = fakeOps();
  const arena = new SlabArena(20 * MiB, ops);
  const small = arena.alloc(MiB)!;
  t.equal(small.byteOffset, 0, 'a small slab: first fit');
  const a = arena.alloc(8 * MiB)!;
  t.equal(a.byteOffset, 2 * MiB, 'an 8 MiB slab skips to the next 2 MiB boundary');
  const gap = arena.alloc(MiB / 2)!;
  t.equal(gap.byteOffset, MiB, 'the gap in front of it stays free, for a smaller slab');
  const b = arena.alloc(8 * MiB)!;
  t.equal(b.byteOffset, 10 * MiB, 'the next one right behind, aligned');
  t.equal(arena.alloc(4 * MiB), undefined, 'no room left for 4 MiB (2.5 MiB free, in two ranges)');
  t.equal(arena.usedBytes, 17.5 * MiB);
  arena.release(a);
  arena.release(gap);
  // Free now: [1, 10) MiB, merged from the gap's slab, the rest of the gap and a.
  const c = arena.alloc(8 * MiB)!;
  t.equal(c.byteOffset, 2 * MiB, 'freed ranges merge; an 8 MiB slab takes the aligned start again');
  t.same(ops.populated.slice(-1), [`0:${2 * MiB}+${8 * MiB}`]);
  arena.release(c);
  t.equal(arena.alloc(9 * MiB)!.byteOffset, MiB, '9 MiB has no aligned room in [1, 10): it starts at 1 MiB');

  const tight = new SlabArena(9 * MiB, fakeOps());
  tight.alloc(MiB);
  const d = tight.alloc(8 * MiB)!;
  t.equal(d.byteOffset, MiB, 'with no aligned room, first fit as before: the slab is still handed out');
  t.equal(tight.alloc(1), undefined);
});
