/**
 * The adapter's lend hand-off (src/fuse/adapter.ts read, native.ts MemReads), against a fake
 * core and a fake C table: no mount. The kernel may have several reads of one handle waiting
 * in JavaScript at once; each, once answered, lends again, but only while the handle holds no
 * lend, so that the cursor's record of its last lend is the lend C answers from.
 */
import t from 'tap';
import { fuseOpsFor } from '../../src/fuse/adapter.js';
import type { BlockLease, FsCore } from '../../src/fs/types.js';
import type { LendCounts, MemReads } from '../../src/fuse/native.js';

/** A core whose reads wait until the test settles them, and which counts its lends. */
function fakeCore() {
  const waiting: ((n: number) => void)[] = [];
  let lends = 0;
  let released = 0;
  const core = {
    read: (_fh: number, _buf: Buffer, len: number) => new Promise<number>((resolve) => waiting.push(() => resolve(len))),
    lend: (): BlockLease => {
      lends++;
      return { start: 0, stop: 4096, size: 1 << 20, parts: [Buffer.alloc(4096)], release: () => { released++; } };
    },
    servedElsewhere: () => undefined,
  } as unknown as FsCore;
  return { core, settleNext: () => waiting.shift()?.(0), lends: () => lends, released: () => released };
}

/** A C table that accepts one lend per handle, as native.ts's does. */
function fakeMemReads(): MemReads & { held: Map<number, BlockLease> } {
  const held = new Map<number, BlockLease>();
  const take = (fh: number, each: LendCounts): void => {
    const l = held.get(fh);
    if (!l) return;
    held.delete(fh);
    l.release();
    each(fh, 0, 0, 0, 0);
  };
  return {
    held,
    add: () => false,
    remove: () => false,
    drain: () => undefined,
    clear: () => undefined,
    lends: true,
    holds: (fh) => held.has(fh),
    lend: (fh, lease) => {
      if (held.has(fh)) return false;
      held.set(fh, lease);
      return true;
    },
    takeLend: take,
    takeLends: (each) => { for (const fh of [...held.keys()]) take(fh, each); },
    countLends: () => undefined,
  };
}

const tick = () => new Promise((r) => setImmediate(r));

t.test('two reads of one handle waiting at once: the first answered lends, the second does not ask for another', async (t) => {
  const f = fakeCore();
  const mem = fakeMemReads();
  const ops = fuseOpsFor(f.core, { memReads: () => mem });
  const answers: number[] = [];
  const reply = (n: number) => { answers.push(n); };
  ops.read!('/big', 7, Buffer.alloc(4096), 4096, 0, reply);
  ops.read!('/big', 7, Buffer.alloc(4096), 4096, 4096, reply);
  f.settleNext();
  await tick();
  t.equal(f.lends(), 1, 'the first answer lent the handle its blocks');
  t.ok(mem.holds(7), 'and C holds that lend');
  f.settleNext();
  await tick();
  t.same(answers, [4096, 4096], 'both reads answered');
  t.equal(f.lends(), 1, 'the second answer asked the core for no lend while the handle held one');
  t.equal(f.released(), 0, 'so no lease was made only to be given back');
  // A third read, past the lend, comes here: it takes the lend back first, then lends again.
  ops.read!('/big', 7, Buffer.alloc(4096), 4096, 8192, reply);
  t.equal(f.released(), 1, 'a read that reaches JavaScript ends the lend first');
  f.settleNext();
  await tick();
  t.equal(f.lends(), 2, 'and lends again once answered');
  t.ok(mem.holds(7), 'C holds the new lend');
  mem.takeLends(() => undefined);
  t.equal(f.released(), 2, 'every lease given back');
});
