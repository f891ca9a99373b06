import t from 'tap';
import { BlockCache } from '../../src/cache/block-cache.js';
import { BadRangeReplyError, ObjectChangedError } from '../../src/errors.js';
import { BlockFetcher } from '../../src/prefetch/block-fetcher.js';
import { InflightBudget } from '../../src/prefetch/inflight-budget.js';
import type { Slab } from '../../src/memory/buffer-pool.js';
import { FakeObjectClient, patternBytes } from '../helpers/fake-client.js';

const KiB = 1024;

function setup(size = 1000 * KiB) {
  const client = new FakeObjectClient();
  const etag = client.put('k', patternBytes(size, 9));
  const cache = new BlockCache({ capacityBytes: 64 * 1024 * KiB, blockSize: 64 * KiB });
  const budget = new InflightBudget(256 * KiB);
  const fetcher = new BlockFetcher(client, cache, budget, 256 * KiB);
  return { client, cache, budget, fetcher, file: { key: 'k', etag, size } };
}

t.test('demand: missing blocks become part-aligned runs, cached blocks are reused', async (t) => {
  const s = setup();
  const first = await Promise.all(s.fetcher.demand(s.file, 2, 9));
  t.same(s.client.requests.map((r) => [r.start / KiB, r.end / KiB]), [[128, 256], [256, 512], [512, 640]], 'runs split at part boundaries');
  t.ok(Buffer.concat(first).equals(s.client.body('k').subarray(128 * KiB, 640 * KiB)));
  s.client.resetCounts();
  const again = s.fetcher.demand(s.file, 0, 10);
  t.ok(again.slice(2, 10).every((b) => Buffer.isBuffer(b)), 'resident blocks are returned at once');
  await Promise.all(again);
  t.same(s.client.requests.map((r) => [r.start / KiB, r.end / KiB]), [[0, 128], [640, 704]], 'only the missing blocks fetched');
  t.equal(s.budget.inUse, 0, 'demand bytes released');
});

t.test('prefetch stops where the budget refuses and reports how far it got', async (t) => {
  const s = setup();
  s.client.hold();
  const next = s.fetcher.prefetch(s.file, 0, 15, 'sequential');
  t.equal(next, 4, 'one part (4 blocks) fits the 256 KiB budget');
  t.equal(s.fetcher.prefetch(s.file, 0, 15, 'sequential'), 4, 'blocks in flight are skipped, the next run still refused');
  s.client.release();
  await new Promise((r) => setTimeout(r, 10));
  t.equal(s.fetcher.prefetch(s.file, 4, 15, 'sequential'), 8);
});

t.test('the last block is short and exact; a changed object rejects with ObjectChangedError and is not cached', async (t) => {
  const s = setup(100 * KiB + 3);
  const [, b1] = await Promise.all(s.fetcher.demand(s.file, 0, 1));
  t.equal(b1!.length, 36 * KiB + 3);
  s.client.put('k', patternBytes(100 * KiB + 3, 10));
  s.cache.close();
  const s2 = setup(100 * KiB + 3);
  s2.client.put('k', Buffer.alloc(100 * KiB + 3));
  await t.rejects(Promise.all(s2.fetcher.demand(s2.file, 0, 1)), ObjectChangedError);
  t.equal(s2.cache.has({ key: 'k', etag: s2.file.etag, index: 0 }), false);
});

t.test('a reply of the wrong length is refused, never cached', async (t) => {
  const s = setup();
  const orig = s.client.getRange.bind(s.client);
  s.client.getRange = async (...a) => (await orig(...a)).subarray(1);
  await t.rejects(Promise.all(s.fetcher.demand(s.file, 0, 0)), BadRangeReplyError);
  t.equal(s.cache.has({ key: 'k', etag: s.file.etag, index: 0 }), false);
});

t.test('onPartTimed: sequential read-ahead GETs of whole parts only, and not those the client answered locally', async (t) => {
  const s = setup(1024 * KiB); // 4 parts of 256 KiB
  const timed: number[] = [];
  s.fetcher.onPartTimed = (ms) => timed.push(ms);
  await Promise.all(s.fetcher.demand(s.file, 0, 3)); // part 0, demanded
  t.equal(timed.length, 0, 'a demand GET is not a sample');
  s.fetcher.prefetch(s.file, 4, 7, 'sequential'); // part 1, whole
  await Promise.all(s.fetcher.demand(s.file, 4, 7));
  t.equal(timed.length, 1, 'a whole-part read-ahead GET is');
  t.ok(timed[0]! >= 0);
  s.fetcher.prefetch(s.file, 8, 9, 'sequential'); // half of part 2
  s.fetcher.prefetch(s.file, 12, 15, 'cross_file'); // part 3, another kind
  await Promise.all(s.fetcher.demand(s.file, 8, 15));
  t.equal(timed.length, 1, 'part of a part, or another kind of read-ahead: not');
  // A client that answers from a local tier says so; such a GET is no sample of the link.
  const t2 = setup(512 * KiB);
  const samples: number[] = [];
  t2.fetcher.onPartTimed = (ms) => samples.push(ms);
  const real = t2.client.getRange.bind(t2.client);
  t2.client.getRange = async (key, start, end, etag, opts) => {
    if (start === 0) opts?.onLocal?.();
    return real(key, start, end, etag, opts);
  };
  for (const first of [0, 4]) {
    t2.fetcher.prefetch(t2.file, first, first + 3, 'sequential');
    await Promise.all(t2.fetcher.demand(t2.file, first, first + 3));
  }
  t.equal(samples.length, 1, 'of two whole-part GETs, only the one from the server is a sample');
});

t.test('ramp slabs: a sequential GET shorter than a part reads into a part-long slab when the file goes on for another whole part', async (t) => {
  const part = 256 * KiB;
  const mk = (size: number) => {
    const client = new FakeObjectClient();
    client.honourInto = true; // GETs read into the pooled buffers, as the real client does
    const etag = client.put('k', patternBytes(size, 11));
    const cache = new BlockCache({ capacityBytes: 64 * 1024 * KiB, blockSize: 64 * KiB, poolBytes: 64 * 1024 * KiB });
    const fetcher = new BlockFetcher(client, cache, new InflightBudget(4 * 1024 * KiB), part);
    return { client, cache, fetcher, file: { key: 'k', etag, size } };
  };
  const poolStats = (s: ReturnType<typeof mk>) => s.cache.pool!.stats;

  // A 1 MiB file (4 parts): a window ramping up (1 block, then 2, then 1 to the part's end), then whole parts.
  const s = mk(4 * part);
  const body = s.client.body('k');
  const got: Buffer[] = [];
  got.push(...(await Promise.all(s.fetcher.demand(s.file, 0, 0, undefined, true)))); // a sequential reader's first read
  t.equal(s.fetcher.prefetch(s.file, 1, 2, 'sequential'), 3);
  t.equal(s.fetcher.prefetch(s.file, 3, 3, 'sequential'), 4);
  got.push(...(await Promise.all(s.fetcher.demand(s.file, 1, 3))));
  t.same(s.client.requests.map((r) => (r.end - r.start) / KiB), [64, 128, 64], 'the ramp GETs as asked for');
  t.ok(Buffer.concat(got).equals(body.subarray(0, part)), 'their bytes are the object\'s');
  t.equal(poolStats(s).allocated, 1, 'one slab for the three');
  t.equal(s.cache.pool!.heldSize, part, 'a part long');
  const [b0, b1, b3] = [0, 1, 3].map((i) => s.cache.get({ key: 'k', etag: s.file.etag, index: i })!);
  t.ok(b1!.buffer === b0!.buffer && b1!.byteOffset === b0!.byteOffset + 64 * KiB && b3!.byteOffset === b0!.byteOffset + 192 * KiB, 'each GET at its place in it');
  // The reader passes part 0: its blocks go, and their slabs carry the whole-part GETs that follow.
  for (let i = 0; i < 4; i++) s.cache.retire('k', s.file.etag, i, 4);
  t.equal(s.fetcher.prefetch(s.file, 4, 11, 'sequential'), 12);
  const rest = await Promise.all(s.fetcher.demand(s.file, 4, 11));
  t.ok(Buffer.concat(rest).equals(body.subarray(part, 3 * part)), 'the whole parts\' bytes are the object\'s');
  t.equal(poolStats(s).reused, 1, 'the ramp\'s slab carries one of them');
  t.equal(poolStats(s).allocated, 2);
  t.equal(s.cache.pool!.heldSize, 2 * part);

  // A short GET never writes where an earlier one of its part did, nor into a slab handed out again.
  const r = mk(4 * part);
  await Promise.all(r.fetcher.demand(r.file, 1, 1, undefined, true));
  const pins: Slab[] = [];
  const first = r.cache.lookup({ key: 'k', etag: r.file.etag, index: 1 }, pins) as Buffer; // a reader still copying from it
  t.ok(r.cache.retire('k', r.file.etag, 1, 4), 'block 1 dropped');
  const pinned = Buffer.from(first);
  await Promise.all(r.fetcher.demand(r.file, 0, 1, undefined, true)); // blocks 0-1: overlaps what block 1's GET wrote
  const again = r.cache.get({ key: 'k', etag: r.file.etag, index: 1 })!;
  t.not(again.buffer === first.buffer && again.byteOffset === first.byteOffset, true, 'the refetched block is not where the first one was');
  t.ok(again.equals(pinned), 'and holds the same bytes');
  t.ok(first.equals(pinned), 'the pinned bytes did not change');
  t.equal(r.cache.pool!.stats.allocated, 2, 'a new slab for it');
  for (const p of pins) p.unref();
  for (let i = 0; i < 2; i++) r.cache.retire('k', r.file.etag, i, 4);
  t.equal(r.cache.pool!.idleSize, 2 * part, 'both slabs idle again');
  // Part 0's slab goes back to the pool and carries part 1's whole GET; a short GET of part 0 then takes another.
  await Promise.all(r.fetcher.demand(r.file, 4, 7, undefined, true));
  await Promise.all(r.fetcher.demand(r.file, 2, 2, undefined, true));
  const p1 = r.cache.get({ key: 'k', etag: r.file.etag, index: 4 })!;
  const b2 = r.cache.get({ key: 'k', etag: r.file.etag, index: 2 })!;
  t.ok(p1.equals(r.client.body('k').subarray(part, part + 64 * KiB)) && b2.equals(r.client.body('k').subarray(128 * KiB, 192 * KiB)), 'neither GET wrote over the other');
  t.notOk(b2.buffer === p1.buffer && b2.byteOffset - 128 * KiB === p1.byteOffset, 'block 2 is not in part 1\'s slab');
  r.cache.close();

  // Not for random readers, a short file, or the last part of a file: their GETs keep slabs of their own length.
  for (const [name, size, run] of [
    ['random', 4 * part, (x: ReturnType<typeof mk>) => x.fetcher.demand(x.file, 0, 0)],
    ['file of one part and a half', part + part / 2, (x: ReturnType<typeof mk>) => x.fetcher.demand(x.file, 0, 0, undefined, true)],
    ['last whole part', 2 * part, (x: ReturnType<typeof mk>) => x.fetcher.demand(x.file, 4, 4, undefined, true)],
  ] as const) {
    const u = mk(size);
    const [b] = await Promise.all(run(u));
    t.ok(b!.equals(u.client.body('k').subarray(b === undefined ? 0 : u.client.requests[0]!.start, u.client.requests[0]!.end)), `${name}: the bytes`);
    t.equal(u.cache.pool!.heldSize, 64 * KiB, `${name}: a slab of the GET's own length`);
    u.cache.close();
  }
  s.cache.close();
});
