import t from 'tap';
import { BlockCache } from '../../src/cache/block-cache.js';
import { prefetchBytes } from '../../src/metrics/metrics.js';
import { BlockFetcher, type FileRef } from '../../src/prefetch/block-fetcher.js';
import { CONFIRM_STEPS, CrossFilePrefetcher, TRUSTED_WALK_STEPS } from '../../src/prefetch/cross-file.js';
import { InflightBudget } from '../../src/prefetch/inflight-budget.js';
import { ReadCursor } from '../../src/prefetch/read-cursor.js';
import { FakeObjectClient, patternBytes } from '../helpers/fake-client.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const FILE = 40 * 1000; // the 40 KB "images" SageMaker FastFile is weakest on

function setup(o: { count?: number; size?: number; depth?: number; maxSize?: number; maxInflight?: number; cache?: number; onFetch?: (f: FileRef) => void } = {}) {
  const client = new FakeObjectClient();
  const files: FileRef[] = [];
  for (let i = 0; i < (o.count ?? 100); i++) {
    const key = `ds/img${String(i).padStart(5, '0')}.jpg`;
    const size = o.size ?? FILE;
    files.push({ key, etag: client.put(key, patternBytes(size, i + 1)), size });
  }
  const cache = new BlockCache({ capacityBytes: o.cache ?? 64 * MiB, blockSize: 256 * KiB });
  const budget = new InflightBudget(o.maxInflight ?? 64 * MiB);
  const fetcher = new BlockFetcher(client, cache, budget, 8 * MiB);
  const xf = new CrossFilePrefetcher(fetcher, { depth: o.depth ?? 8, maxSize: o.maxSize ?? 4 * MiB, ...(o.onFetch ? { onFetch: o.onFetch } : {}) });
  return { client, files, cache, budget, fetcher, xf };
}

/** What a data loader does per file: open, read it whole, close. */
async function readWhole(s: ReturnType<typeof setup>, i: number): Promise<Buffer> {
  const f = s.files[i]!;
  s.xf.onOpen(s.files, i);
  const c = new ReadCursor(f, s.fetcher, 8 * MiB);
  const dst = Buffer.alloc(f.size);
  let pos = 0;
  while (pos < f.size) {
    const r = await c.read(dst.subarray(pos), Math.min(128 * KiB, f.size - pos), pos);
    pos += r.bytes;
  }
  return dst;
}

const settle = () => new Promise((r) => setImmediate(r));

t.test('a walk in listing order is prefetched: each file fetched once, almost every read a hit', async (t) => {
  const s = setup({ count: 100, depth: 8 });
  const metric = async (outcome: string) =>
    (await prefetchBytes.get()).values.find((v) => v.labels.kind === 'cross_file' && v.labels.outcome === outcome)?.value ?? 0;
  const usedBefore = await metric('used');
  for (let i = 0; i < 100; i++) {
    const got = await readWhole(s, i);
    t.ok(got.equals(s.client.body(s.files[i]!.key)), `file ${i}`) || t.bailout();
    await settle();
  }
  t.equal(s.client.gets, 100, 'one GET per file: no file fetched twice');
  t.equal(s.cache.stats.misses, CONFIRM_STEPS + 1, 'only the files before the walk was confirmed missed');
  s.cache.close();
  t.equal(s.cache.stats.prefetchUsed.cross_file, (100 - CONFIRM_STEPS - 1) * FILE, 'used = every prefetched file');
  t.equal(s.cache.stats.prefetchWasted.cross_file, 0, 'nothing wasted: the walk read everything it fetched');
  t.equal(await metric('used') - usedBefore, (100 - CONFIRM_STEPS - 1) * FILE, 'sluice_prefetch_bytes_total{kind="cross_file",outcome="used"}');
  t.equal(s.xf.stats.walksStarted, 1);
});

t.test('a walk that stops: the files fetched ahead and never read are counted wasted', async (t) => {
  const s = setup({ count: 100, depth: 8 });
  for (let i = 0; i < 20; i++) await readWhole(s, i);
  await settle();
  s.cache.close();
  const fetched = s.client.getBytes;
  t.equal(s.cache.stats.prefetchWasted.cross_file, 8 * FILE, 'the 8 files ahead of the reader');
  t.equal(s.cache.stats.prefetchUsed.cross_file + s.cache.stats.prefetchWasted.cross_file + (CONFIRM_STEPS + 1) * FILE, fetched,
    'used + wasted + demand = bytes fetched');
});

t.test('several readers walking different parts of a folder each get their own walk', async (t) => {
  const s = setup({ count: 200, depth: 8 });
  // 4 loader workers, each given a slice of 50 files, opening in turn (interleaved)
  const starts = [0, 50, 100, 150];
  for (let step = 0; step < 50; step++) {
    await Promise.all(starts.map(async (st) => {
      const got = await readWhole(s, st + step);
      t.ok(got.equals(s.client.body(s.files[st + step]!.key))) || t.bailout();
    }));
    await settle();
  }
  t.equal(s.xf.stats.walksStarted, 4, 'one walk per reader');
  t.equal(s.cache.stats.misses, 4 * (CONFIRM_STEPS + 1), 'each walk missed only before it was confirmed');
  t.ok(s.client.gets <= 200, 'no file fetched twice');
  s.cache.close();
  // each walk fetches up to 8 files past its slice: those of the next slice were read by its reader, so
  // only the last walk's lookahead runs past the folder's end (nothing there) or wasted nothing.
  t.ok(s.cache.stats.prefetchWasted.cross_file <= 3 * 8 * FILE, 'little waste');
});

t.test('loader workers taking batches k, k + W, ...: a new batch in a trusted folder prefetches from its first file', async (t) => {
  const batch = 32;
  const workers = 4;
  const s = setup({ count: 512, depth: 8 });
  t.ok(batch - 1 >= TRUSTED_WALK_STEPS);
  for (let round = 0; round < 512 / batch / workers; round++) {
    for (let step = 0; step < batch; step++) {
      await Promise.all(Array.from({ length: workers }, async (_, w) => {
        const i = (round * workers + w) * batch + step;
        const got = await readWhole(s, i);
        t.ok(got.equals(s.client.body(s.files[i]!.key))) || t.bailout();
      }));
      await settle();
    }
  }
  const first = workers * (CONFIRM_STEPS + 1);
  t.ok(s.cache.stats.misses <= first + (512 / batch - workers), `misses ${s.cache.stats.misses}: later batches miss at most their first file`);
  t.ok(s.client.gets <= 512, 'no file fetched twice');
});

t.test('a loader walking a tree folder by folder: a trusted walk entering a new folder prefetches from its first file', async (t) => {
  const s = setup({ count: 40, depth: 8 });
  const client = s.client;
  const other: FileRef[] = [];
  for (let i = 0; i < 20; i++) {
    const key = `ds2/img${i}.jpg`;
    other.push({ key, etag: client.put(key, patternBytes(FILE, 1000 + i)), size: FILE });
  }
  for (let i = 0; i < 40; i++) await readWhole(s, i);
  await settle();
  const misses = s.cache.stats.misses;
  for (let i = 0; i < 20; i++) {
    s.xf.onOpen(other, i);
    const c = new ReadCursor(other[i]!, s.fetcher, 8 * MiB);
    const dst = Buffer.alloc(FILE);
    await c.read(dst, FILE, 0);
    t.ok(dst.equals(client.body(other[i]!.key))) || t.bailout();
    await settle();
  }
  t.equal(s.cache.stats.misses - misses, 1, 'only the new folder\'s first file missed');
});

t.test('opens out of listing order do not prefetch', async (t) => {
  const s = setup({ count: 100, depth: 8 });
  for (const i of [40, 3, 77, 12, 60, 25, 90, 5]) await readWhole(s, i);
  await settle();
  t.equal(s.client.gets, 8, 'only the files opened were fetched');
  t.equal(s.xf.stats.filesRequested, 0);
});

t.test('files larger than cross-file-max-size are not fetched ahead', async (t) => {
  const s = setup({ count: 20, depth: 8, size: 300 * KiB, maxSize: 100 * KiB });
  for (let i = 0; i < 10; i++) await readWhole(s, i);
  await settle();
  t.equal(s.xf.stats.filesRequested, 0);
  t.equal(s.cache.stats.prefetchUsed.cross_file + s.cache.stats.prefetchWasted.cross_file, 0);
});

t.test('within the in-flight budget: waits when it is used up, resumes on release', async (t) => {
  const s = setup({ count: 40, depth: 16, maxInflight: 4 * FILE });
  await readWhole(s, 0);
  await readWhole(s, 1);
  s.client.hold();
  s.xf.onOpen(s.files, 2); // confirms the walk: wants files 3..18
  t.ok(s.budget.peakPrefetch <= 4 * FILE, 'prefetch within the budget');
  t.equal(s.client.gets, 2 + 4, 'four files fit the budget; the rest wait');
  s.client.release();
  for (let i = 0; i < 50 && s.xf.stats.filesRequested < 16; i++) await new Promise((r) => setTimeout(r, 5));
  t.equal(s.xf.stats.filesRequested, 16, 'the waiting walk resumed as bytes were released');
  t.ok(s.budget.peakPrefetch <= 4 * FILE, 'never past the budget');
  for (let i = 0; i < 20 && s.budget.inUse > 0; i++) await new Promise((r) => setTimeout(r, 5));
  t.equal(s.budget.inUse, 0);
});

t.test('depth 0 disables it', async (t) => {
  const s = setup({ count: 20, depth: 0 });
  for (let i = 0; i < 10; i++) await readWhole(s, i);
  t.equal(s.xf.stats.filesRequested, 0);
  t.equal(s.client.gets, 10);
});

t.test('onFetch names each file once, when the walk starts fetching it, before it is opened; BlockFetcher.cachedWhole tells what is in memory', async (t) => {
  const fetched: string[] = [];
  const s = setup({ count: 30, depth: 8, size: 3 * 256 * KiB, onFetch: (f) => fetched.push(f.key) });
  for (let i = 0; i < 20; i++) {
    t.equal(fetched.includes(s.files[i]!.key), i > CONFIRM_STEPS, `file ${i}: named before its open exactly when the walk fetched it ahead`);
    if (i > CONFIRM_STEPS) t.equal(s.fetcher.cachedWhole(s.files[i]!), true, `file ${i}: every block in memory before its open`);
    await readWhole(s, i);
    await settle();
  }
  t.equal(new Set(fetched).size, fetched.length, 'no file named twice');
  t.same(fetched, s.files.slice(CONFIRM_STEPS + 1, CONFIRM_STEPS + 1 + fetched.length).map((f) => f.key), 'in listing order, from the first file after the walk was confirmed');
  t.equal(s.fetcher.cachedWhole(s.files[29]!), false, 'a file not fetched is not whole in memory');
  t.equal(s.fetcher.cachedWhole({ key: 'ds/empty', etag: 'e', size: 0 }), false, 'nor is an empty one');
  s.cache.close();
});

// ---- issue 48: an order the readers announced (--order-file, src/prefetch/order.ts) ----

t.test('an announced order is walked from its first open: only the first file misses, and skipped files are dropped', async (t) => {
  const s = setup({ count: 100, depth: 8 });
  const { FileOrder } = await import('../../src/prefetch/order.js');
  // A shuffle of the folder: the listing-order walk would never confirm on it.
  const perm = Array.from({ length: 100 }, (_, i) => (i * 37) % 100);
  const dropped: FileRef[] = [];
  const order = new FileOrder(perm.map((i) => s.files[i]!), (f) => { dropped.push(f); s.fetcher.discardUnread(f); }, 16);
  const readAt = async (place: number) => {
    const f = order.files[place]!;
    const at = order.open(f);
    t.equal(at, place, 'the open is placed in the order');
    s.xf.onOpen(order.files, at!, true);
    const c = new ReadCursor(f, s.fetcher, 8 * MiB);
    const dst = Buffer.alloc(f.size);
    let pos = 0;
    while (pos < f.size) pos += (await c.read(dst.subarray(pos), Math.min(128 * KiB, f.size - pos), pos)).bytes;
    t.ok(dst.equals(s.client.body(f.key)), `place ${place} exact`) || t.bailout();
    await settle();
  };
  for (let p = 0; p < 30; p++) await readAt(p);
  t.equal(s.cache.stats.misses, 1, 'only the first file missed');
  t.equal(order.position, 29);
  // The reader jumps 100 places ahead... there are only 100: it skips to place 90; 30..89 were never opened.
  await readAt(90);
  t.ok(dropped.length >= 30, `places left 16 behind unopened were handed over (${dropped.length})`);
  const wastedBefore = s.cache.stats.prefetchWasted.cross_file;
  t.ok(wastedBefore >= 8 * FILE, 'the files fetched ahead of place 29 and skipped were dropped unread (wasted)');
  t.equal(s.cache.aheadBytes <= 9 * FILE, true, 'their room ahead is free again');
  // A new order replaces this one: the rest is handed over, the walks are forgotten.
  order.end();
  s.xf.forget(order.files);
  const gets = s.client.gets;
  await settle();
  t.equal(s.client.gets, gets, 'a forgotten order fetches nothing more');
  t.equal(order.open(order.files[95]!), undefined, 'an ended order places nothing');
});
