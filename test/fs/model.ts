/**
 * A reference model (issue 6 item 5): random sequences of open, read at random
 * offsets and sizes, seek, and close, from several handles (some reads running
 * concurrently), through the fs core, block cache and prefetchers, compared byte
 * for byte with a direct read of the source. Small blocks, a small cache and a
 * small in-flight budget (and parts of one or several blocks) make eviction, single-flight and refused read-ahead common.
 */
import fc from 'fast-check';
import t from 'tap';
import { SluiceFs } from '../../src/fs/core.js';
import { FakeObjectClient, patternBytes } from '../helpers/fake-client.js';

const KiB = 1024;
const SIZES = [0, 1, 4095, 40_000, 64 * KiB, 300 * KiB + 7, 1100 * KiB, 2500 * KiB + 3];
const SLOTS = 4;

type Op =
  | { kind: 'open'; slot: number; file: number }
  | { kind: 'close'; slot: number }
  | { kind: 'seek'; slot: number; to: number }
  | { kind: 'read'; slot: number; len: number }
  | { kind: 'pread'; slot: number; at: number; len: number }
  | { kind: 'parallel'; reads: Array<{ slot: number; at: number; len: number }> };

const slot = fc.integer({ min: 0, max: SLOTS - 1 });
const len = fc.oneof(fc.integer({ min: 0, max: 300 * KiB }), fc.constantFrom(4096, 128 * KiB));
const at = fc.oneof(fc.integer({ min: 0, max: 2600 * KiB }), fc.integer({ min: 0, max: 5000 }));
const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('open' as const), slot, file: fc.integer({ min: 0, max: SIZES.length - 1 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('close' as const), slot }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('seek' as const), slot, to: at }) },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('read' as const), slot, len }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('pread' as const), slot, at, len }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('parallel' as const), reads: fc.array(fc.record({ slot, at, len }), { minLength: 2, maxLength: 6 }) }) },
);

interface Slot { fh: number; file: number; pos: number }

t.test('random open/read/seek/close from several handles equals the source, byte for byte', async (t) => {
  const client = new FakeObjectClient();
  const bodies = SIZES.map((size, i) => {
    const key = `m/f${i}`;
    client.put(key, patternBytes(size, 100 + i));
    return client.body(key);
  });
  let checkedBytes = 0;
  let reused = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(fc.integer({ min: 0, max: SIZES.length - 1 }), { minLength: SLOTS, maxLength: SLOTS }), fc.array(op, { minLength: 1, maxLength: 40 }), fc.boolean(), fc.constantFrom(64 * KiB, 512 * KiB, 1024 * KiB), fc.boolean(), async (initial, ops, tinyCache, partSize, into) => {
      // With `into`, GETs read into the cache's recycled buffers (as the real client does).
      client.honourInto = into;
      const fs = await SluiceFs.create({
        client, prefix: 'm', channel: 'model', cacheSize: tinyCache ? 2 * partSize : 8 * 1024 * KiB,
        partSize, maxPrefetch: 2 * partSize, maxInflight: 2 * partSize, crossFilePrefetch: 3, crossFileMaxSize: 100 * KiB,
      });
      const slots: Array<Slot | undefined> = [];
      for (let i = 0; i < SLOTS; i++) slots[i] = { fh: await fs.open(`/f${initial[i]!}`, 0), file: initial[i]!, pos: 0 };
      const readAt = async (s: Slot, pos: number, n: number) => {
        const dst = Buffer.alloc(n);
        const got = await fs.read(s.fh, dst, n, pos);
        const want = bodies[s.file]!.subarray(Math.min(pos, bodies[s.file]!.length), pos + n);
        if (got !== want.length || !dst.subarray(0, got).equals(want)) {
          throw new Error(`file ${s.file}: read ${n} at ${pos} gave ${got} bytes, expected ${want.length}, or different bytes`);
        }
        checkedBytes += got;
        return got;
      };
      try {
        for (const o of ops) {
          switch (o.kind) {
            case 'open': {
              if (slots[o.slot]) await fs.release(slots[o.slot]!.fh);
              slots[o.slot] = { fh: await fs.open(`/f${o.file}`, 0), file: o.file, pos: 0 };
              break;
            }
            case 'close': {
              if (slots[o.slot]) await fs.release(slots[o.slot]!.fh);
              slots[o.slot] = undefined;
              break;
            }
            case 'seek': {
              if (slots[o.slot]) slots[o.slot]!.pos = o.to;
              break;
            }
            case 'read': {
              const s = slots[o.slot];
              if (s) s.pos += await readAt(s, s.pos, o.len);
              break;
            }
            case 'pread': {
              const s = slots[o.slot];
              if (s) await readAt(s, o.at, o.len);
              break;
            }
            case 'parallel': {
              await Promise.all(o.reads.map(async (r) => {
                const s = slots[r.slot];
                if (s) await readAt(s, r.at, r.len);
              }));
              break;
            }
          }
        }
      } finally {
        await fs.close();
      }
      // settle read-ahead still in flight before the next run
      for (let i = 0; i < 100 && fs.budget.inUse > 0; i++) await new Promise((r) => setTimeout(r, 1));
      const pool = fs.cache.pool!;
      reused += pool.stats.reused;
      // Once closed and settled, no pooled buffer may still be referenced: nothing leaked a pin.
      if (fs.budget.inUse === 0 && pool.heldSize !== pool.idleSize) throw new Error(`pool: ${pool.heldSize - pool.idleSize} bytes still referenced after close`);
    }),
    { numRuns: 150, seed: 20261130, endOnFailure: true },
  );
  t.ok(checkedBytes > 0, `${checkedBytes} bytes compared`);
  t.ok(reused > 0, `${reused} GET buffers recycled: the pool was exercised`);
});
