import t from 'tap';
import { BlockCache } from '../../src/cache/block-cache.js';
import { AbortedError } from '../../src/errors.js';
import { AheadShare } from '../../src/prefetch/ahead-share.js';
import { BlockFetcher, type FileRef } from '../../src/prefetch/block-fetcher.js';
import { InflightBudget } from '../../src/prefetch/inflight-budget.js';
import { FIRST_WINDOW, ReadCursor, SEEK_BACKWARD_TOLERANCE, SEEK_FORWARD_TOLERANCE, RAMP_GROWTH, type ReadView } from '../../src/prefetch/read-cursor.js';
import { FakeObjectClient, patternBytes } from '../helpers/fake-client.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const BLOCK = 64 * KiB;
const PART = 256 * KiB;

function setup(o: { files?: number; size?: number; maxInflight?: number; cache?: number; poolBytes?: number } = {}) {
  const client = new FakeObjectClient();
  const files: FileRef[] = [];
  for (let i = 0; i < (o.files ?? 1); i++) {
    const key = `data/f${i}`;
    const etag = client.put(key, patternBytes(o.size ?? 16 * MiB, i + 1));
    files.push({ key, etag, size: o.size ?? 16 * MiB });
  }
  const cache = new BlockCache({ capacityBytes: o.cache ?? 256 * MiB, blockSize: BLOCK, ...(o.poolBytes !== undefined ? { poolBytes: o.poolBytes } : {}) });
  const budget = new InflightBudget(o.maxInflight ?? 64 * MiB);
  const fetcher = new BlockFetcher(client, cache, budget, PART);
  return { client, files, cache, budget, fetcher };
}

async function readAt(c: ReadCursor, pos: number, len: number, signal?: AbortSignal) {
  const dst = Buffer.alloc(len);
  const r = await c.read(dst, len, pos, signal);
  return dst.subarray(0, r.bytes);
}

const settle = () => new Promise((r) => setImmediate(r));

t.test('sequential reads: small first request, window grows up to max-prefetch, part-aligned GETs', async (t) => {
  const s = setup();
  const max = 4 * MiB;
  const c = new ReadCursor(s.files[0]!, s.fetcher, max);
  const body = s.client.body(s.files[0]!.key);
  await readAt(c, 0, 128 * KiB);
  t.equal(c.currentWindow, Math.min(RAMP_GROWTH * FIRST_WINDOW, max), 'first batch issued with FIRST_WINDOW, then grown');
  const firstBytes = s.client.requests.reduce((n, r) => n + r.end - r.start, 0);
  t.ok(firstBytes <= FIRST_WINDOW + 128 * KiB + BLOCK, `first request is small (${firstBytes} bytes)`);
  t.equal(s.client.requests[0]!.end - s.client.requests[0]!.start, 128 * KiB, 'the demand GET covers only the read: first byte fast');
  const windows: number[] = [c.currentWindow];
  for (let pos = 128 * KiB; pos < 16 * MiB; pos += 128 * KiB) {
    const got = await readAt(c, pos, 128 * KiB);
    t.ok(got.equals(body.subarray(pos, pos + 128 * KiB)), `bytes at ${pos}`) || t.bailout();
    windows.push(c.currentWindow);
    await settle();
  }
  for (let i = 1; i < windows.length; i++) t.ok(windows[i]! >= windows[i - 1]!, 'window never shrinks while sequential');
  t.equal(Math.max(...windows), max, 'window reaches max-prefetch and stays there');
  for (const r of s.client.requests) {
    t.ok(r.end - r.start <= PART, 'no GET larger than a part');
    t.equal(Math.floor(r.start / PART), Math.floor((r.end - 1) / PART), 'no GET crosses a part boundary');
  }
  t.equal(s.client.getBytes, 16 * MiB, 'every byte fetched exactly once');
  t.equal(c.stats.randomReads, 0);
  s.cache.close();
  t.equal(s.cache.stats.prefetchWasted.sequential, 0, 'nothing read ahead was wasted');
  t.ok(s.cache.stats.prefetchUsed.sequential > 12 * MiB, 'most bytes came from read-ahead');
});

t.test('the window grows by RAMP_GROWTH per batch up to max-prefetch, with S3-sized parts', async (t) => {
  // Below a part each batch is a single GET at one connection's speed, and above it each step
  // adds parts in flight: the ramp takes few, large steps (1.125 -> 4.5 -> 18 -> 64 MiB).
  const part = 8 * MiB, size = 128 * MiB, max = 64 * MiB;
  const client = new FakeObjectClient();
  const etag = client.put('data/big', patternBytes(size, 7));
  const cache = new BlockCache({ capacityBytes: 256 * MiB, blockSize: BLOCK });
  const fetcher = new BlockFetcher(client, cache, new InflightBudget(128 * MiB), part);
  const c = new ReadCursor({ key: 'data/big', etag, size }, fetcher, max);
  const body = client.body('data/big');
  const windows: number[] = [];
  for (let pos = 0; pos < size; pos += 128 * KiB) {
    const got = await readAt(c, pos, 128 * KiB);
    t.ok(got.equals(body.subarray(pos, pos + 128 * KiB)), `bytes at ${pos}`) || t.bailout();
    if (windows.at(-1) !== c.currentWindow) windows.push(c.currentWindow);
    await settle();
  }
  t.equal(RAMP_GROWTH, 4);
  t.same(windows, [FIRST_WINDOW * 4, FIRST_WINDOW * 16, max], 'x4 per batch, then max-prefetch');
  t.equal(client.getBytes, size, 'every byte fetched exactly once');
  for (const r of client.requests.filter((q) => q.start >= 2 * part)) t.equal(r.end - r.start, part, `whole-part GETs once the window is a part (${r.start})`);
  cache.close();
});

t.test('seek tolerance: small backward and forward seeks stay sequential, a long jump turns random', async (t) => {
  const s = setup({ size: 24 * MiB });
  const c = new ReadCursor(s.files[0]!, s.fetcher, 2 * MiB);
  const body = s.client.body(s.files[0]!.key);
  let pos = 0;
  for (; pos < 4 * MiB; pos += 128 * KiB) await readAt(c, pos, 128 * KiB);
  const w = c.currentWindow;
  t.ok(w > 0);
  // out-of-order kernel readahead: a read slightly behind the last one
  t.ok((await readAt(c, pos - 512 * KiB, 128 * KiB)).equals(body.subarray(pos - 512 * KiB, pos - 384 * KiB)));
  t.equal(c.stats.randomReads, 0, 'small backward seek tolerated');
  t.equal(c.currentWindow, w, 'window kept');
  pos = pos - 384 * KiB + SEEK_FORWARD_TOLERANCE - 64 * KiB;
  t.ok((await readAt(c, pos, 128 * KiB)).equals(body.subarray(pos, pos + 128 * KiB)));
  t.equal(c.stats.randomReads, 0, 'forward seek within tolerance tolerated');
  t.ok(c.currentWindow >= w, 'window kept');
  const far = pos + 128 * KiB + SEEK_FORWARD_TOLERANCE + 4 * MiB + 1;
  t.ok((await readAt(c, far, 4096)).equals(body.subarray(far, far + 4096)));
  t.equal(c.stats.randomReads, 1, 'a long jump is random');
  t.equal(c.currentWindow, 0, 'window dropped');
  const back = far - SEEK_BACKWARD_TOLERANCE - 4 * MiB;
  await readAt(c, back, 4096);
  t.equal(c.stats.randomReads, 2, 'a long backward jump is random');
  // contiguous again: sequential, from the first window
  await readAt(c, back + 4096, 4096);
  t.equal(c.stats.randomReads, 2, 'contiguous read after random is sequential');
  t.equal(c.currentWindow, Math.min(RAMP_GROWTH * FIRST_WINDOW, 2 * MiB), 'restarts from the first window');
});

t.test('random reads fetch only the blocks they touch: no read-ahead', async (t) => {
  const s = setup({ size: 16 * MiB });
  const c = new ReadCursor(s.files[0]!, s.fetcher, 8 * MiB);
  const body = s.client.body(s.files[0]!.key);
  // deterministic pseudo-random offsets, never contiguous with the previous read
  let x = 12345;
  const blocks = new Set<number>();
  let last = -1;
  for (let i = 0; i < 60; i++) {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    const len = 1 + (x % (100 * KiB));
    let pos = 1 + (Math.floor(x / 7) % (16 * MiB - len - 1));
    if (pos === last) pos++;
    const got = await readAt(c, pos, len);
    t.ok(got.equals(body.subarray(pos, pos + len)), `bytes of read ${i}`) || t.bailout();
    for (let b = Math.floor(pos / BLOCK); b <= Math.floor((pos + len - 1) / BLOCK); b++) blocks.add(b);
    last = pos + len;
    await settle();
  }
  t.equal(c.stats.sequentialReads, 0);
  t.equal(c.currentWindow, 0);
  const expected = [...blocks].reduce((n, b) => n + Math.min(BLOCK, 16 * MiB - b * BLOCK), 0);
  t.equal(s.client.getBytes, expected, 'fetched bytes = the blocks touched, nothing more');
  t.equal(s.cache.stats.prefetchUsed.sequential + s.cache.stats.prefetchWasted.sequential, 0, 'no read-ahead');
});

t.test('in-flight budget: read-ahead stays within max-inflight, demand reads always proceed', async (t) => {
  const limit = 2 * MiB;
  const s = setup({ files: 6, size: 8 * MiB, maxInflight: limit });
  const cursors = s.files.map((f) => new ReadCursor(f, s.fetcher, 4 * MiB));
  s.client.hold();
  const pending: Array<Promise<{ i: number; pos: number; buf: Buffer }>> = [];
  for (let step = 0; step < 8; step++) {
    cursors.forEach((c, i) => {
      const pos = step * 128 * KiB;
      const dst = Buffer.alloc(128 * KiB);
      pending.push(c.read(dst, 128 * KiB, pos).then(() => ({ i, pos, buf: dst })));
    });
  }
  t.ok(s.budget.peakPrefetch <= limit, `read-ahead in flight ${s.budget.peakPrefetch} <= ${limit}`);
  t.ok(s.budget.peakPrefetch > 0, 'some read-ahead started');
  const demandBytes = s.cache.stats.misses * BLOCK;
  t.ok(s.client.peakInflightBytes <= limit + demandBytes, 'GET bytes in flight bounded by budget + demand');
  // the budget is fully used by read-ahead, yet a demand read of an unfetched block completes
  s.client.release();
  const done = await Promise.all(pending);
  for (const d of done) t.ok(d.buf.equals(s.client.body(s.files[d.i]!.key).subarray(d.pos, d.pos + 128 * KiB)));
  await settle();
  t.equal(s.budget.inUse, 0, 'everything released');
  const hog = s.budget.tryAcquire(limit)!;
  t.ok(hog, 'budget taken by someone else');
  const c = cursors[0]!;
  const far = 6 * MiB;
  t.ok((await readAt(c, far, 4096)).equals(s.client.body(s.files[0]!.key).subarray(far, far + 4096)), 'demand read proceeds with no budget left');
  hog();
});

t.test('read-ahead refused by the budget is retried on a later read', async (t) => {
  const s = setup({ size: 8 * MiB, maxInflight: 1 * MiB });
  const c = new ReadCursor(s.files[0]!, s.fetcher, 4 * MiB);
  const hog = s.budget.tryAcquire(1 * MiB)!;
  await readAt(c, 0, 64 * KiB);
  t.equal(s.client.gets, 1, 'only the demand block was fetched');
  hog();
  await readAt(c, 64 * KiB, 64 * KiB);
  await settle();
  t.ok(s.client.gets > 1, 'read-ahead started once the budget allowed it');
});

t.test('an AbortSignal settles a read that waits on S3', async (t) => {
  const s = setup({ size: 1 * MiB });
  const c = new ReadCursor(s.files[0]!, s.fetcher, 4 * MiB);
  s.client.hold();
  const ac = new AbortController();
  const p = readAt(c, 0, 4096, ac.signal);
  ac.abort();
  await t.rejects(p, AbortedError);
  const pre = new AbortController();
  pre.abort();
  await t.rejects(readAt(c, 4096, 4096, pre.signal), AbortedError, 'an already aborted signal rejects');
  s.client.release();
  t.ok((await readAt(c, 0, 4096)).equals(s.client.body(s.files[0]!.key).subarray(0, 4096)), 'the shared GET still lands');
});

t.test('end of file: short reads, zero at and past EOF, empty file', async (t) => {
  const s = setup({ size: 100_000 });
  const c = new ReadCursor(s.files[0]!, s.fetcher, 4 * MiB);
  const body = s.client.body(s.files[0]!.key);
  t.ok((await readAt(c, 99_000, 4096)).equals(body.subarray(99_000)));
  t.equal((await readAt(c, 100_000, 4096)).length, 0);
  t.equal((await readAt(c, 200_000, 4096)).length, 0);
  const e = new ReadCursor({ key: 'none', etag: '"x"', size: 0 }, s.fetcher, 4 * MiB);
  t.equal((await readAt(e, 0, 4096)).length, 0);
  t.equal(s.client.requests.filter((r) => r.key === 'none').length, 0, 'an empty file is never fetched');
});

t.test('sequential readers retire the blocks they have passed; random readers keep theirs', async (t) => {
  // A cache far larger than the file: without retiring, all 32 MiB would stay resident.
  const s = setup({ size: 32 * MiB, cache: 256 * MiB });
  const max = 2 * MiB;
  const c = new ReadCursor(s.files[0]!, s.fetcher, max);
  const body = s.client.body(s.files[0]!.key);
  let peak = 0;
  for (let pos = 0; pos < 32 * MiB; pos += 128 * KiB) {
    const got = await readAt(c, pos, 128 * KiB);
    t.ok(got.equals(body.subarray(pos, pos + 128 * KiB)), `bytes at ${pos}`) || t.bailout();
    peak = Math.max(peak, s.cache.size);
    await settle();
  }
  // Held: the backward tolerance, the part the reader is in, and the window ahead.
  const bound = SEEK_BACKWARD_TOLERANCE + 2 * PART + 2 * max;
  t.ok(peak <= bound, `cache held at most ${peak} bytes while reading 32 MiB (bound ${bound})`);
  t.ok(s.cache.stats.retired > 0, 'blocks were retired');
  t.equal(s.client.getBytes, 32 * MiB, 'retiring never made a byte be fetched twice');
  t.equal(s.cache.stats.prefetchWasted.sequential, 0, 'no read-ahead was retired unread');
  // A backward seek within the tolerance still finds its blocks.
  const back = 32 * MiB - SEEK_BACKWARD_TOLERANCE + 64 * KiB;
  t.ok((await readAt(c, back, 64 * KiB)).equals(body.subarray(back, back + 64 * KiB)));
  t.equal(s.client.getBytes, 32 * MiB, 'served from the cache');

  const r = new ReadCursor(s.files[0]!, s.fetcher, max);
  const spots = [5 * MiB + 3, 17 * MiB + 99, 1 * MiB + 7, 29 * MiB];
  for (const p of spots) await readAt(r, p, 4 * KiB);
  const before = s.client.getBytes;
  for (const p of spots) t.ok((await readAt(r, p, 4 * KiB)).equals(body.subarray(p, p + 4 * KiB)));
  t.equal(s.client.getBytes, before, 'random reads are served again from the cache');
});

t.test('closing a handle that read its file to the end retires its last blocks; one that stopped short keeps them', async (t) => {
  for (const whole of [true, false]) {
    const s = setup({ size: 8 * MiB, cache: 256 * MiB });
    const c = new ReadCursor(s.files[0]!, s.fetcher, 2 * MiB);
    const body = s.client.body(s.files[0]!.key);
    const end = whole ? 8 * MiB : 6 * MiB;
    for (let pos = 0; pos < end; pos += 128 * KiB) {
      t.ok((await readAt(c, pos, 128 * KiB)).equals(body.subarray(pos, pos + 128 * KiB))) || t.bailout();
      await settle();
    }
    const held = s.cache.size;
    t.ok(held > 0, `${whole ? 'read to the end' : 'stopped at 6 MiB'}: blocks within the reorder span still held before close (${held} bytes)`);
    c.close();
    if (whole) t.equal(s.cache.size, 0, 'after close: none held (their buffers go back to the pool)');
    else t.equal(s.cache.size, held, 'after close: the same blocks held (the reader may come back)');
  }
});

t.test('a sequential run after random reads retires only its own blocks', async (t) => {
  const s = setup({ size: 16 * MiB, cache: 256 * MiB });
  const c = new ReadCursor(s.files[0]!, s.fetcher, 2 * MiB);
  await readAt(c, 1 * MiB, 4 * KiB); // random: first read not at 0
  const residentRandom = s.cache.get({ key: s.files[0]!.key, etag: s.files[0]!.etag, index: (1 * MiB) / BLOCK });
  t.ok(residentRandom, 'the random read is cached');
  // Now read sequentially from 8 MiB to the end (contiguous reads turn the cursor sequential).
  await readAt(c, 8 * MiB, 128 * KiB);
  for (let pos = 8 * MiB + 128 * KiB; pos < 16 * MiB; pos += 128 * KiB) { await readAt(c, pos, 128 * KiB); await settle(); }
  t.ok(s.cache.get({ key: s.files[0]!.key, etag: s.files[0]!.etag, index: (1 * MiB) / BLOCK }), 'the random read is still cached');
  t.ok(s.cache.stats.retired > 0, 'the sequential run retired its blocks');
});

/**
 * The kernel's readahead reaches the daemon through libfuse's worker threads out of order:
 * a handle's first read is often at 512 KiB, and later reads land behind the furthest one.
 * Each batch of 12 reads of 128 KiB (libfuse's max_background) is delivered shuffled.
 */
t.test('reordered sequential reads stay sequential: part-sized GETs, each byte fetched once', async (t) => {
  for (const kernelRa of [128 * KiB, 1 * MiB, 4 * MiB]) {
    const size = 24 * MiB;
    const s = setup({ size });
    const c = new ReadCursor(s.files[0]!, s.fetcher, 4 * MiB, undefined, kernelRa);
    const body = s.client.body(s.files[0]!.key);
    const batch = 12;
    let x = 777;
    for (let base = 0; base < size; base += batch * 128 * KiB) {
      const offsets: number[] = [];
      for (let p = base; p < Math.min(size, base + batch * 128 * KiB); p += 128 * KiB) offsets.push(p);
      // Fisher-Yates with a fixed LCG, but the first batch always starts at 512 KiB, as measured.
      for (let i = offsets.length - 1; i > 0; i--) {
        x = (x * 1103515245 + 12345) % 2 ** 31;
        const j = x % (i + 1);
        [offsets[i], offsets[j]] = [offsets[j]!, offsets[i]!];
      }
      if (base === 0) { offsets.splice(offsets.indexOf(512 * KiB), 1); offsets.unshift(512 * KiB); }
      await Promise.all(offsets.map(async (p) => {
        const got = await readAt(c, p, 128 * KiB);
        t.ok(got.equals(body.subarray(p, p + 128 * KiB)), `bytes at ${p}`) || t.bailout();
      }));
      await settle();
    }
    t.equal(c.stats.randomReads, 0, `readahead ${kernelRa / KiB} KiB: no read was taken for random`);
    t.equal(s.client.getBytes, size, 'every byte fetched exactly once');
    const whole = s.client.requests.filter((r) => r.end - r.start === PART).length;
    t.ok(whole >= size / PART - 3, `read-ahead used whole parts (${whole} of ${s.client.requests.length} GETs are ${PART / KiB} KiB)`);
  }
});

t.test('a sequential read that overtook the read-ahead is served by whole-part GETs from where the requests stopped', async (t) => {
  const s = setup();
  const c = new ReadCursor(s.files[0]!, s.fetcher, 4 * MiB);
  const body = s.client.body(s.files[0]!.key);
  await readAt(c, 0, 128 * KiB);
  const requested = s.client.requests.reduce((n, r) => Math.max(n, r.end), 0);
  const before = s.client.requests.length;
  // A kernel readahead request that overtook the others, inside the forward tolerance but past the requests.
  const at = requested + 3 * BLOCK;
  t.ok(at < 128 * KiB + SEEK_FORWARD_TOLERANCE, 'the read is within the forward tolerance');
  t.ok((await readAt(c, at, 128 * KiB)).equals(body.subarray(at, at + 128 * KiB)), 'exact bytes');
  t.equal(c.stats.randomReads, 0, 'still sequential');
  const later = s.client.requests.slice(before);
  t.ok(later.length > 0, 'the read was fetched');
  t.equal(later[0]!.start, requested, 'the batch starts where the requests stopped, not at the read');
  for (const r of later) t.equal(r.end - r.start, PART, `GET ${r.start}-${r.end} is a whole part`);
  // The gap's reads find their blocks requested: nothing is fetched twice.
  for (let p = 128 * KiB; p < at; p += 128 * KiB) t.ok((await readAt(c, p, 128 * KiB)).equals(body.subarray(p, p + 128 * KiB)), `gap bytes at ${p}`);
  t.equal(new Set(s.client.requests.map((r) => r.start)).size, s.client.requests.length, 'no range fetched twice');
});

t.test('first reads: within the reorder span undecided, far random; a random cursor turns sequential on any recent contiguity', async (t) => {
  const s = setup({ size: 32 * MiB });
  const near = new ReadCursor(s.files[0]!, s.fetcher, 4 * MiB);
  await readAt(near, 512 * KiB, 128 * KiB);
  t.equal(near.currentWindow, 0, 'a first read at 512 KiB reads nothing ahead yet');
  t.equal(s.client.getBytes, 128 * KiB, '...and fetches only its own bytes');
  await readAt(near, 0, 128 * KiB);
  t.same(near.stats, { sequentialReads: 2, randomReads: 0 }, 'a read at 0 next: both sequential');
  t.ok(near.currentWindow > 0, 'the window is open');
  const nearUndecided = new ReadCursor(s.files[0]!, s.fetcher, 4 * MiB);
  await readAt(nearUndecided, 1 * MiB, 4 * KiB);
  await readAt(nearUndecided, 12 * MiB, 4 * KiB);
  t.same(nearUndecided.stats, { sequentialReads: 0, randomReads: 2 }, 'a far read next: both random');
  const wide = new ReadCursor(s.files[0]!, s.fetcher, 4 * MiB, undefined, 4 * MiB);
  await readAt(wide, 3 * MiB, 128 * KiB);
  await readAt(wide, 128 * KiB, 128 * KiB);
  t.same(wide.stats, { sequentialReads: 2, randomReads: 0 }, 'with a 4 MiB kernel readahead, reads at 3 MiB then 128 KiB are sequential');
  const far = new ReadCursor(s.files[0]!, s.fetcher, 4 * MiB);
  await readAt(far, 9 * MiB, 4 * KiB);
  t.equal(far.stats.randomReads, 1, 'a first read at 9 MiB is random');
  await readAt(far, 20 * MiB, 4 * KiB);
  await readAt(far, 15 * MiB, 4 * KiB);
  t.equal(far.stats.randomReads, 3);
  await readAt(far, 20 * MiB + 4 * KiB, 4 * KiB);
  t.equal(far.stats.sequentialReads, 1, 'contiguous with a read two reads back: sequential');
});

t.test('a carried window: the first run from offset 0 starts at it, as parallel part GETs; carry() reports a whole sequential read', async (t) => {
  const s = setup({ files: 2, size: 4 * MiB });
  const max = 4 * MiB;
  // File 0 read whole, sequentially, at the usual ramp.
  const a = new ReadCursor(s.files[0]!, s.fetcher, max);
  t.same(a.carry(), { window: 0, read: false }, 'nothing read: nothing to carry, nothing to clear');
  for (let pos = 0; pos < 4 * MiB; pos += 128 * KiB) { await readAt(a, pos, 128 * KiB); await settle(); }
  const carried = a.carry();
  t.equal(carried.window, max, 'read to the end sequentially: carries its window');
  // File 1 given that window: the first read issues the whole window at once.
  const before = s.client.requests.length;
  const b = new ReadCursor(s.files[1]!, s.fetcher, max, undefined, 0, carried.window);
  const got = await readAt(b, 0, 128 * KiB);
  t.ok(got.equals(s.client.body(s.files[1]!.key).subarray(0, 128 * KiB)), 'bytes');
  const gets = s.client.requests.slice(before);
  t.equal(gets[0]!.end - gets[0]!.start, 128 * KiB, 'the demand GET still covers only the read: first byte as fast');
  t.equal(gets.reduce((n, r) => n + r.end - r.start, 0), 4 * MiB, 'the first batch asked for the carried window (the whole file) at once');
  t.equal(gets.length, 1 + 4 * MiB / PART, 'as part-sized GETs (the first part less the demanded read)');
  for (const r of gets) t.equal(Math.floor(r.start / PART), Math.floor((r.end - 1) / PART), 'no GET crosses a part boundary');
});

t.test('a carried window is ignored by a handle whose first run starts past 0, and not carried by one that stopped short or went random', async (t) => {
  const s = setup({ files: 3, size: 16 * MiB });
  const max = 4 * MiB;
  const seek = new ReadCursor(s.files[0]!, s.fetcher, max, undefined, 0, max);
  await readAt(seek, 8 * MiB, 128 * KiB);
  await readAt(seek, 8 * MiB + 128 * KiB, 128 * KiB);
  t.ok(seek.currentWindow <= RAMP_GROWTH * FIRST_WINDOW, `a run from 8 MiB ramps from the first window (${seek.currentWindow})`);
  const short = new ReadCursor(s.files[1]!, s.fetcher, max);
  for (let pos = 0; pos < 2 * MiB; pos += 128 * KiB) await readAt(short, pos, 128 * KiB);
  t.same(short.carry(), { window: 0, read: true }, 'stopped short: nothing to carry, and the folder\'s carry ends');
  const random = new ReadCursor(s.files[2]!, s.fetcher, max);
  await readAt(random, 0, 128 * KiB);
  await readAt(random, 12 * MiB, 128 * KiB);
  await readAt(random, 16 * MiB - 128 * KiB, 128 * KiB);
  t.same(random.carry(), { window: 0, read: true }, 'random at the end: nothing to carry');
});

/**
 * Step 6: a reader whose reads are answered from the cursor's lends, reaching the cursor only
 * past a lend's stop, must make the cursor issue the same GETs as a reader that shows it every
 * read: lending moves where the cursor decides, not what it decides. Both read 16 MiB in
 * 128 KiB reads (the kernel's default request size); every byte is checked.
 */
t.test('lend: reads answered from lends leave the GETs exactly as when the cursor sees every read', async (t) => {
  const size = 16 * MiB;
  const read = 128 * KiB;
  const max = 4 * MiB;
  const all = setup({ size });
  const seesAll = new ReadCursor(all.files[0]!, all.fetcher, max);
  for (let pos = 0; pos < size; pos += read) {
    await readAt(seesAll, pos, read);
    await settle();
  }

  const s = setup({ size });
  const c = new ReadCursor(s.files[0]!, s.fetcher, max);
  const body = s.client.body(s.files[0]!.key);
  let lend: ReturnType<ReadCursor['lend']>;
  let reachedInLend = 0;
  let cursorReads = 0;
  let lentReads = 0;
  for (let pos = 0; pos < size; pos += read) {
    const end = Math.min(size, pos + read);
    if (lend && pos >= lend.start && end <= lend.stop) {
      // Answered from the lend, as native/src/fuse_lend.c would: the blocks are contiguous from lend.start.
      const got = Buffer.concat(lend.blocks).subarray(pos - lend.start, end - lend.start);
      t.ok(got.equals(body.subarray(pos, end)), `lent bytes at ${pos}`) || t.bailout();
      reachedInLend = Math.max(reachedInLend, end);
      lentReads++;
      continue;
    }
    if (lend) {
      c.servedTo(reachedInLend);
      for (const p of lend.pins) p.unref();
      lend = undefined;
    }
    const got = await readAt(c, pos, read);
    cursorReads++;
    t.ok(got.equals(body.subarray(pos, end)), `bytes at ${pos}`) || t.bailout();
    await settle();
    lend = c.lend(Number.MAX_SAFE_INTEGER);
    if (lend) t.ok(lend.stop > pos + read && lend.start <= pos + read, `a lend starts at or before the frontier and reaches past it (${lend.start}..${lend.stop})`);
  }
  const key = (r: { start: number; end: number }) => `${r.start}-${r.end}`;
  t.same(s.client.requests.map(key), all.client.requests.map(key), 'the same GETs, in the same order');
  t.equal(c.stats.randomReads, 0, 'every read the cursor saw was sequential');
  t.ok(lentReads > 3 * cursorReads, `most reads answered from lends (${lentReads} lent, ${cursorReads} seen by the cursor)`);
});

t.test('lend: nothing while the cursor must see every read, and never more than asked', async (t) => {
  const s = setup({ size: 16 * MiB });
  const c = new ReadCursor(s.files[0]!, s.fetcher, 4 * MiB);
  t.equal(c.lend(Number.MAX_SAFE_INTEGER), undefined, 'before the first read');
  await readAt(c, 512 * KiB, 128 * KiB);
  t.equal(c.lend(Number.MAX_SAFE_INTEGER), undefined, 'undecided (a first read inside the reorder span)');
  await readAt(c, 0, 128 * KiB);
  await settle();
  // Right after the window grew, the next batch is due at once: the cursor must see the next read.
  t.equal(c.lend(Number.MAX_SAFE_INTEGER), undefined, 'a batch due at the frontier: no lend');
  let l: ReturnType<ReadCursor['lend']>;
  for (let pos = 640 * KiB; pos < 8 * MiB && !l; pos += 128 * KiB) {
    await readAt(c, pos, 128 * KiB);
    await settle();
    l = c.lend(BLOCK);
  }
  t.ok(l, 'sequential with resident blocks ahead: a lend');
  t.ok(l!.stop - l!.start <= BLOCK && l!.blocks.length === 1, 'at most the bytes asked for');
  for (const p of l!.pins) p.unref();
  await readAt(c, 12 * MiB, 4096);
  t.equal(c.currentWindow, 0, 'a long jump: random');
  t.equal(c.lend(Number.MAX_SAFE_INTEGER), undefined, 'random: no lend');
  c.close();
  t.equal(c.lend(Number.MAX_SAFE_INTEGER), undefined, 'closed: no lend');
});

t.test('lend: a lent block counts as read only once a reported read reaches it, each once', async (t) => {
  const s = setup({ size: 16 * MiB });
  const c = new ReadCursor(s.files[0]!, s.fetcher, 4 * MiB);
  let l: ReturnType<ReadCursor['lend']>;
  let hitsBefore = 0;
  let aheadBefore = 0;
  for (let pos = 0; pos < 8 * MiB && (!l || l.blocks.length < 3); pos += 128 * KiB) {
    if (l) for (const p of l.pins) p.unref();
    await readAt(c, pos, 128 * KiB);
    await settle();
    hitsBefore = s.cache.stats.hits;
    aheadBefore = s.cache.aheadBytes;
    l = c.lend(Number.MAX_SAFE_INTEGER);
  }
  t.ok(l && l.blocks.length >= 3, `a lend of ${l?.blocks.length} blocks`);
  const ahead = s.cache.aheadBytes;
  const hits = s.cache.stats.hits;
  t.equal(hits, hitsBefore, 'lending counts no block as a hit');
  t.equal(ahead, aheadBefore, 'nor takes any out of the ahead budget');
  // Reads reached one byte into the lend's second block.
  c.servedTo(l!.start + BLOCK + 1);
  t.equal(s.cache.stats.hits - hits, 2, 'the two blocks those reads reached count as hits');
  t.ok(s.cache.aheadBytes <= ahead, 'and leave the ahead budget if they were prefetched');
  c.servedTo(l!.start + BLOCK + 2);
  t.equal(s.cache.stats.hits - hits, 2, 'a later report inside them counts nothing again');
  c.servedTo(l!.start + 2 * BLOCK + 1);
  t.equal(s.cache.stats.hits - hits, 3, 'the third block once reached');
  for (const p of l!.pins) p.unref();
  c.close();
});

t.test('shared read-ahead: one reader issues the same GETs as without a share; four readers each stay within their share', async (t) => {
  const max = 4 * MiB;
  // One reader: the share never caps it (its whole window, the floor).
  const gets: string[][] = [];
  for (const shared of [false, true]) {
    const s = setup({ size: 16 * MiB });
    const share = shared ? new AheadShare({ maxPrefetch: max, partSize: PART, channel: 'cursor-share-1' }) : undefined;
    const c = new ReadCursor(s.files[0]!, s.fetcher, max, undefined, 0, 0, share);
    for (let pos = 0; pos < 16 * MiB; pos += 128 * KiB) {
      await readAt(c, pos, 128 * KiB);
      await settle();
    }
    c.close();
    gets.push(s.client.requests.map((r) => `${r.start}-${r.end}`));
    if (share) t.equal(share.stats.capped, 0, 'one reader is never capped');
  }
  t.same(gets[1], gets[0], 'the same GETs in the same order');

  // Four readers in step: each reads ahead at most its share past its read, plus the part it is in. The share is
  // a quarter of the floor in whole parts, and never under two parts (ahead-share.ts MIN_READER_PARTS).
  const s = setup({ files: 4, size: 16 * MiB });
  const share = new AheadShare({ maxPrefetch: max, partSize: PART, channel: 'cursor-share-4' });
  const cursors = s.files.map((f) => new ReadCursor(f, s.fetcher, max, undefined, 0, 0, share));
  const bodies = s.files.map((f) => s.client.body(f.key));
  const quarter = Math.max(share.minShare, Math.floor(share.floor / 4 / PART) * PART);
  let worst = 0;
  for (let pos = 0; pos < 16 * MiB; pos += 128 * KiB) {
    for (let i = 0; i < 4; i++) {
      const got = await readAt(cursors[i]!, pos, 128 * KiB);
      t.ok(got.equals(bodies[i]!.subarray(pos, pos + 128 * KiB)), `reader ${i}: bytes at ${pos}`) || t.bailout();
      const furthest = Math.max(...s.client.requests.filter((r) => r.key === s.files[i]!.key).map((r) => r.end));
      worst = Math.max(worst, furthest - (pos + 128 * KiB));
    }
    await settle();
  }
  for (const c of cursors) c.close();
  t.ok(worst <= quarter + PART, `requested ahead at most the share plus a part (${worst / KiB} KiB, share ${quarter / KiB} KiB)`);
  t.ok(worst > quarter / 2, `and did read ahead (${worst / KiB} KiB)`);
  t.equal(s.client.getBytes, 4 * 16 * MiB, 'every byte fetched exactly once');
  t.ok(share.stats.capped > 0, 'the windows were capped');
  t.equal(share.readers, 0, 'closed cursors left the share');

  // Without the share the same four readers read a full window ahead each.
  const u = setup({ files: 4, size: 16 * MiB });
  const free = u.files.map((f) => new ReadCursor(f, u.fetcher, max));
  let worstFree = 0;
  for (let pos = 0; pos < 16 * MiB; pos += 128 * KiB) {
    for (let i = 0; i < 4; i++) {
      await readAt(free[i]!, pos, 128 * KiB);
      const furthest = Math.max(...u.client.requests.filter((r) => r.key === u.files[i]!.key).map((r) => r.end));
      worstFree = Math.max(worstFree, furthest - (pos + 128 * KiB));
    }
    await settle();
  }
  t.ok(worstFree > quarter + PART, `without a share each reads further ahead (${worstFree / KiB} KiB): the test can tell`);
});

t.test('shared read-ahead: small files read at the same time do not count as readers, so a large file keeps its window', async (t) => {
  const max = 4 * MiB;
  const s = setup({ files: 11, size: 16 * MiB });
  const share = new AheadShare({ maxPrefetch: max, partSize: PART, channel: 'cursor-share-small' });
  const large = new ReadCursor(s.files[0]!, s.fetcher, max, undefined, 0, 0, share);
  // Ten handles that read only the first 384 KiB of their file (small files, as far as the share can tell: less than two parts left).
  const smalls = s.files.slice(1).map((f) => new ReadCursor({ ...f, size: 384 * KiB }, s.fetcher, max, undefined, 0, 0, share));
  for (let pos = 0; pos < 8 * MiB; pos += 128 * KiB) {
    await readAt(large, pos, 128 * KiB);
    if (pos < 384 * KiB) for (const c of smalls) await readAt(c, pos, 128 * KiB);
    await settle();
  }
  t.equal(share.stats.capped, 0, 'the large reader was never capped');
  t.ok(share.readers <= 1, `readers counted: ${share.readers}`);
  const furthest = Math.max(...s.client.requests.filter((r) => r.key === s.files[0]!.key).map((r) => r.end));
  t.ok(furthest - 8 * MiB >= max / 2, `the large file is read ahead by its own window (${(furthest - 8 * MiB) / KiB} KiB past the read)`);
});

t.test('a read with a view: bytes inside one GET\'s buffer are handed over with their pins, not copied; others are copied', async (t) => {
  const s = setup({ size: 4 * MiB, poolBytes: 64 * MiB });
  s.client.honourInto = true; // GETs read into pooled buffers, as the real client does
  const c = new ReadCursor(s.files[0]!, s.fetcher, 2 * MiB);
  const body = s.client.body(s.files[0]!.key);
  const pool = s.cache.pool!;
  const read = async (pos: number, len: number) => {
    const dst = Buffer.alloc(len);
    const view: ReadView = {};
    const v = c.readNow(dst, len, pos, undefined, view);
    const bytes = typeof v === 'number' ? v : (await v).bytes;
    return { dst, view, bytes };
  };
  // Read the first parts so that they are resident (part-aligned GETs of pooled buffers).
  for (let pos = 0; pos < 2 * MiB; pos += 128 * KiB) await readAt(c, pos, 128 * KiB);
  await settle();
  const inPart = await read(PART + 64 * KiB, 128 * KiB);
  t.equal(inPart.bytes, 128 * KiB, 'the read\'s length');
  t.ok(inPart.view.bytes?.equals(body.subarray(PART + 64 * KiB, PART + 192 * KiB)), 'the view holds the file\'s bytes at the offset');
  t.ok(inPart.dst.every((b) => b === 0), 'nothing was copied into dst');
  t.ok((inPart.view.pins?.length ?? 0) > 0, 'with the pins of its pooled buffer');
  for (const p of inPart.view.pins ?? []) t.ok(p.refCount >= 2, `held by the cache and by the view (${p.refCount} references)`);
  // Across two parts: two GETs' buffers, handed over as one view only where they lie next to
  // each other in memory (slabs carved one after the other from one region), with both pins.
  const across = await read(2 * PART - 64 * KiB, 128 * KiB);
  const want = body.subarray(2 * PART - 64 * KiB, 2 * PART + 64 * KiB);
  if (across.view.bytes) {
    t.ok(across.view.bytes.equals(want), 'across two adjacent buffers: the view holds the file\'s bytes');
    t.equal(across.view.pins?.length, 2, 'and the pins of both');
  } else t.ok(across.dst.equals(want), 'across two buffers apart: the bytes copied into dst');
  for (const p of [...(inPart.view.pins ?? []), ...(across.view.pins ?? [])]) p.unref();
  c.close();
  s.cache.close();
  t.equal(pool.heldSize, pool.idleSize, 'once the views\' pins are released, every buffer is back in the pool');

  // Blocks of buffers apart (GETs that resolve with buffers of their own): copied, no view.
  const own = setup({ size: 4 * MiB });
  const d = new ReadCursor(own.files[0]!, own.fetcher, 2 * MiB);
  for (let pos = 0; pos < 2 * MiB; pos += 128 * KiB) await readAt(d, pos, 128 * KiB);
  await settle();
  const dst = Buffer.alloc(128 * KiB);
  const view: ReadView = {};
  const r = d.readNow(dst, dst.length, 2 * PART - 64 * KiB, undefined, view);
  t.equal(typeof r === 'number' ? r : (await r).bytes, dst.length, 'read across two GETs\' own buffers');
  t.equal(view.bytes, undefined, 'no view across buffers apart');
  t.equal(view.pins, undefined, 'and no pins handed over');
  t.ok(dst.equals(own.client.body(own.files[0]!.key).subarray(2 * PART - 64 * KiB, 2 * PART + 64 * KiB)), 'the bytes copied into dst');
  d.close();
  own.cache.close();
});

t.test('shared read-ahead: a large file\'s reader keeps to its share up to its end and counts until it closes', async (t) => {
  // A window of 4 parts, so two readers' shares (2 parts each) are as small as a share gets: a reader
  // that fetched the rest of its file once it had no more than that left would read further ahead.
  const max = 4 * PART;
  const s = setup({ files: 2, size: 16 * MiB });
  const share = new AheadShare({ maxPrefetch: max, partSize: PART, channel: 'cursor-share-tail' });
  const [a, b] = s.files.map((f) => new ReadCursor(f, s.fetcher, max, undefined, 0, 0, share)) as [ReadCursor, ReadCursor];
  const ahead = (i: number, pos: number) => Math.max(...s.client.requests.filter((r) => r.key === s.files[i]!.key).map((r) => r.end)) - pos;
  const half = Math.max(share.minShare, Math.floor(share.floor / 2 / PART) * PART);
  let counted = 0;
  let worstA = 0;
  // Both read at the same pace; `a` reads to its end, `b` its first half (it stays counted: well within ACTIVE_MS).
  for (let pos = 0; pos < 16 * MiB; pos += 128 * KiB) {
    await readAt(a, pos, 128 * KiB);
    // From 2 MiB on: `a`'s first read, before `b` counted, read a window of its own ahead.
    if (pos >= 2 * MiB) worstA = Math.max(worstA, ahead(0, pos + 128 * KiB));
    if (pos < 8 * MiB) await readAt(b, pos, 128 * KiB);
    counted = Math.max(counted, share.readers);
    await settle();
  }
  t.equal(counted, 2, 'both counted');
  t.ok(worstA <= half + PART, `\`a\` kept to its share to the end (at most ${worstA / KiB} KiB ahead, share ${half / KiB} KiB)`);
  t.equal(share.readers, 2, '`a`, at its end, still counts while it is open');
  a.close();
  t.equal(share.readers, 1, 'closed, it counts no more');
  await readAt(b, 8 * MiB, 128 * KiB);
  await settle();
  t.ok(ahead(1, 8 * MiB + 128 * KiB) > half + PART, `and \`b\`, alone, reads a full window ahead (${ahead(1, 8 * MiB + 128 * KiB) / KiB} KiB)`);
  b.close();
});
