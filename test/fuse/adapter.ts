/**
 * The adapter's lend hand-off (src/fuse/adapter.ts read, native.ts MemReads), against a fake
 * core and a fake C table: no mount. The kernel may have several reads of one handle waiting
 * in JavaScript at once; each, once answered, lends again, but only while the handle holds no
 * lend, so that the cursor's record of its last lend is the lend C answers from.
 *
 * And its views (native.ts ReadViews): a read C invited is answered with the code C asked for
 * and the core's buffer, whose pins are released only once C reports the reply sent; a view C
 * refuses is copied, a read not invited (or small) is read as before, and a read whose
 * deadline answered first releases its view at once.
 */
import t from 'tap';
import { fuseOpsFor } from '../../src/fuse/adapter.js';
import type { BlockLease, FsCore, ReadView } from '../../src/fs/types.js';
import { ReadDeadlines } from '../../src/fuse/deadline.js';
import type { LendCounts, MemReads, ReadViews } from '../../src/fuse/native.js';

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

const VIEW_CODE = -24301;

/** A core whose reads hand out a view when asked (bytes 1, 2, 3, ... of a buffer, with one pin), settled by the test. */
function viewCore() {
  const waiting: (() => void)[] = [];
  const pins = { refs: 0, unrefs: 0 };
  const seen: (ReadView | undefined)[] = [];
  const source = Buffer.from(Array.from({ length: 64 * 1024 }, (_, i) => (i % 251) + 1));
  const core = {
    read: (_fh: number, dst: Buffer, len: number, _pos: number, _opts: unknown, view?: ReadView) => {
      seen.push(view);
      return new Promise<number>((resolve) => waiting.push(() => {
        if (view) {
          pins.refs++;
          view.bytes = source.subarray(0, len);
          view.pins = [{ unref: () => { pins.unrefs++; } } as never];
        } else source.copy(dst, 0, 0, len);
        resolve(len);
      }));
    },
    servedElsewhere: () => undefined,
  } as unknown as FsCore;
  return { core, pins, seen, source, settleNext: () => waiting.shift()?.() };
}

/** A C side whose reads are invited when asked, which accepts views unless `refuse`, and reports them sent on send(). */
function fakeViews(o: { invite: boolean; refuse?: boolean }): ReadViews & { sent(): void; replied: Buffer[] } {
  let unsent: ReadView[] = [];
  let done: ReadView[] = [];
  const replied: Buffer[] = [];
  return {
    replied,
    invited: () => o.invite,
    reply: (_buf, view) => {
      if (o.refuse) return undefined;
      unsent.push(view);
      replied.push(view.bytes!);
      return VIEW_CODE;
    },
    sent: () => { done = done.concat(unsent); unsent = []; },
    drain: () => {
      for (const v of done) for (const p of v.pins ?? []) p.unref();
      done = [];
    },
    get held() { return unsent.length + done.length; },
  };
}

function memWithViews(views: ReadViews): MemReads {
  return { ...fakeMemReads(), views };
}

t.test('views: an invited read is answered from the core\'s buffer, whose pins last until C has sent it', async (t) => {
  const f = viewCore();
  const views = fakeViews({ invite: true });
  const ops = fuseOpsFor(f.core, { memReads: () => memWithViews(views) });
  const answers: number[] = [];
  const buf = Buffer.alloc(64 * 1024);
  ops.read!('/big', 7, buf, buf.length, 0, (n) => { answers.push(n); });
  t.ok(f.seen[0], 'the core was asked for a view');
  f.settleNext();
  await tick();
  t.same(answers, [VIEW_CODE], 'the read replied the code C asked for');
  t.ok(views.replied[0]!.equals(f.source), 'with the core\'s bytes');
  t.ok(buf.every((b) => b === 0), 'which were not copied into fuse-native\'s buffer');
  t.equal(f.pins.unrefs, 0, 'its pins are held while C has not sent the reply');
  // The next read drains what C has sent since.
  views.sent();
  ops.read!('/big', 7, Buffer.alloc(64 * 1024), 64 * 1024, 65536, () => undefined);
  t.equal(f.pins.unrefs, 1, 'the next read released the pins of the view C sent');
  f.settleNext();
  await tick();
  views.sent();
  views.drain();
  t.equal(f.pins.unrefs, f.pins.refs, 'every pin released');
});

t.test('views: refused by C, the bytes are copied and the pins released at once; small or uninvited reads get no view', async (t) => {
  const f = viewCore();
  const views = fakeViews({ invite: true, refuse: true });
  const ops = fuseOpsFor(f.core, { memReads: () => memWithViews(views) });
  const answers: number[] = [];
  const buf = Buffer.alloc(64 * 1024);
  ops.read!('/big', 7, buf, buf.length, 0, (n) => { answers.push(n); });
  f.settleNext();
  await tick();
  t.same(answers, [buf.length], 'answered with the byte count');
  t.ok(buf.equals(f.source), 'the view\'s bytes copied into the read\'s buffer');
  t.equal(f.pins.unrefs, 1, 'its pins released at once');

  ops.read!('/big', 7, Buffer.alloc(4096), 4096, 0, () => undefined);
  t.equal(f.seen[1], undefined, 'a 4 KiB read is copied (no view asked for)');
  const uninvited = fuseOpsFor(f.core, { memReads: () => memWithViews(fakeViews({ invite: false })) });
  uninvited.read!('/big', 8, Buffer.alloc(64 * 1024), 64 * 1024, 0, () => undefined);
  t.equal(f.seen[2], undefined, 'a read C did not invite gets no view');
  f.settleNext();
  f.settleNext();
  await tick();
});

t.test('views: a read whose deadline answered first releases its view when the core answers late', async (t) => {
  const f = viewCore();
  const views = fakeViews({ invite: true });
  let now = 1_000_000;
  const readDeadlines = new ReadDeadlines(1000, () => now);
  const ops = fuseOpsFor(f.core, { memReads: () => memWithViews(views), readDeadlines });
  const answers: number[] = [];
  ops.read!('/big', 7, Buffer.alloc(64 * 1024), 64 * 1024, 0, (n) => { answers.push(n); });
  now += 1000;
  readDeadlines.sweep();
  t.equal(answers.length, 1, 'the deadline answered');
  t.ok(answers[0]! < 0 && answers[0] !== VIEW_CODE, `with an errno (${answers[0]})`);
  f.settleNext();
  await tick();
  t.equal(answers.length, 1, 'the core\'s late answer is dropped');
  t.equal(views.replied.length, 0, 'no view was replied');
  t.equal(f.pins.unrefs, f.pins.refs, 'and its pins were released');
  readDeadlines.stop();
});
