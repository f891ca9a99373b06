import t from 'tap';
import { BlockCache } from '../../src/cache/block-cache.js';
import { cacheEvictions, prefetchBytes } from '../../src/metrics/metrics.js';

const KiB = 1024;

function deferred<T>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => { resolve = res; reject = rej; });
  return { promise, resolve, reject };
}

const id = (index: number, key = 'k', etag = '"e1"') => ({ key, etag, index });

t.test('single-flight: concurrent lookups of a block in flight share one fetch', async (t) => {
  const c = new BlockCache({ capacityBytes: 1024 * KiB, blockSize: 4 * KiB });
  let runs = 0;
  const d = deferred<Buffer>();
  t.equal(c.lookup(id(0)), undefined, 'first lookup is a miss');
  const [p] = c.fill('k', '"e1"', 0, 1, () => { runs++; return d.promise; });
  const shared = c.lookup(id(0));
  t.ok(shared instanceof Promise, 'second lookup gets the in-flight promise');
  t.equal(c.lookup(id(0)), shared, 'third lookup gets the same promise');
  t.ok(c.has(id(0)));
  d.resolve(Buffer.alloc(4 * KiB, 7));
  t.same(await p, Buffer.alloc(4 * KiB, 7));
  t.same(await shared, Buffer.alloc(4 * KiB, 7));
  t.equal(runs, 1, 'one fetch');
  const resident = c.lookup(id(0));
  t.ok(Buffer.isBuffer(resident), 'now resident');
  t.equal(c.stats.misses, 1);
  t.equal(c.stats.hits, 3);
});

t.test('a failed fetch is not cached: the next lookup misses and can retry', async (t) => {
  const c = new BlockCache({ capacityBytes: 1024 * KiB, blockSize: 4 * KiB });
  const [p] = c.fill('k', '"e1"', 0, 1, () => Promise.reject(new Error('boom')));
  const shared = c.lookup(id(0));
  await t.rejects(p!, /boom/);
  await t.rejects(shared as Promise<Buffer>, /boom/);
  t.equal(c.has(id(0)), false);
  t.equal(c.lookup(id(0)), undefined);
  // a run() that throws synchronously becomes a rejection too
  const [q] = c.fill('k', '"e1"', 0, 1, () => { throw new Error('sync'); });
  await t.rejects(q!, /sync/);
  t.equal(c.has(id(0)), false);
});

t.test('one fill slices a multi-block GET into blocks, the last one short', async (t) => {
  const c = new BlockCache({ capacityBytes: 1024 * KiB, blockSize: 4 * KiB });
  const body = Buffer.alloc(10 * KiB);
  for (let i = 0; i < body.length; i++) body[i] = i % 251;
  const ps = c.fill('k', '"e1"', 0, 3, async () => body);
  const blocks = await Promise.all(ps);
  t.same(blocks.map((b) => b.length), [4 * KiB, 4 * KiB, 2 * KiB]);
  t.same(Buffer.concat(blocks), body);
  t.same(c.get(id(2)), body.subarray(8 * KiB));
});

t.test('ETag is part of the identity: two versions never share a block', async (t) => {
  const c = new BlockCache({ capacityBytes: 1024 * KiB, blockSize: 4 * KiB });
  c.put(id(0, 'k', '"v1"'), Buffer.alloc(4 * KiB, 1));
  t.equal(c.get(id(0, 'k', '"v2"')), undefined);
  t.equal(c.lookup(id(0, 'k', '"v2"')), undefined);
  t.same(c.get(id(0, 'k', '"v1"')), Buffer.alloc(4 * KiB, 1));
});

t.test('bounded in bytes: LRU eviction keeps the size within capacity', async (t) => {
  const before = (await cacheEvictions.get()).values[0]?.value ?? 0;
  const c = new BlockCache({ capacityBytes: 40 * KiB, blockSize: 4 * KiB });
  for (let i = 0; i < 100; i++) {
    c.put(id(i), Buffer.alloc(4 * KiB, i));
    t.ok(c.size <= 40 * KiB, `size ${c.size} within capacity after ${i + 1} puts`);
  }
  t.equal(c.size, 40 * KiB);
  t.equal(c.stats.evictions, 90);
  t.equal(c.get(id(0)), undefined, 'oldest evicted');
  t.ok(c.get(id(99)), 'newest kept');
  const after = (await cacheEvictions.get()).values[0]?.value ?? 0;
  t.equal(after - before, 90, 'sluice_cache_evictions_total counted');
});

t.test('prefetch accounting: used when a reader reads it, wasted when evicted or dropped unread', async (t) => {
  const metric = async (kind: string, outcome: string) =>
    (await prefetchBytes.get()).values.find((v) => v.labels.kind === kind && v.labels.outcome === outcome)?.value ?? 0;
  const usedBefore = await metric('sequential', 'used');
  const wastedBefore = await metric('cross_file', 'wasted');
  const c = new BlockCache({ capacityBytes: 16 * KiB, blockSize: 4 * KiB });
  c.put(id(0), Buffer.alloc(4 * KiB), 'sequential');
  c.lookup(id(0));
  c.lookup(id(0)); // counted once
  t.equal(c.stats.prefetchUsed.sequential, 4 * KiB);
  // in flight, then read by a reader before it lands: used
  const d = deferred<Buffer>();
  c.fill('k', '"e1"', 1, 1, () => d.promise, 'sequential');
  const p = c.lookup(id(1));
  d.resolve(Buffer.alloc(4 * KiB));
  await p;
  await new Promise((r) => setImmediate(r));
  t.equal(c.stats.prefetchUsed.sequential, 8 * KiB);
  // cross_file blocks never read: evicted -> wasted
  for (let i = 10; i < 16; i++) c.put(id(i), Buffer.alloc(4 * KiB), 'cross_file');
  t.ok(c.stats.prefetchWasted.cross_file > 0, 'evicted unread blocks are wasted');
  c.close();
  t.equal(c.stats.prefetchWasted.cross_file, 6 * 4 * KiB, 'every unread cross_file block ends up wasted');
  t.equal(c.stats.prefetchWasted.sequential, 0, 'used blocks are never wasted');
  t.equal(await metric('sequential', 'used') - usedBefore, 8 * KiB);
  t.equal(await metric('cross_file', 'wasted') - wastedBefore, 6 * 4 * KiB);
});

t.test('rejects nonsense sizes', async (t) => {
  t.throws(() => new BlockCache({ capacityBytes: 0, blockSize: 4 }));
  t.throws(() => new BlockCache({ capacityBytes: 10, blockSize: 0 }));
});

t.test('the blocks of one GET share its buffer and are evicted together, so memory held = size', async (t) => {
  const c = new BlockCache({ capacityBytes: 16 * KiB, blockSize: 4 * KiB });
  const blocks = await Promise.all(c.fill('k', '"e1"', 0, 3, async () => Buffer.alloc(12 * KiB, 1), 'sequential'));
  t.equal(blocks[0]!.buffer, blocks[2]!.buffer, 'slices, not copies');
  c.lookup(id(2)); // the newest member is used (and recent) ...
  c.put(id(10), Buffer.alloc(4 * KiB));
  c.put(id(11), Buffer.alloc(4 * KiB)); // ... but evicting block 0 takes its siblings along
  t.equal(c.get(id(0)), undefined);
  t.equal(c.get(id(1)), undefined);
  t.equal(c.get(id(2)), undefined, 'no block pins the GET buffer alone');
  t.equal(c.size, 8 * KiB);
  t.equal(c.stats.evictions, 3);
  t.equal(c.stats.prefetchUsed.sequential, 4 * KiB);
  t.equal(c.stats.prefetchWasted.sequential, 8 * KiB, 'the unread siblings are wasted');
});

t.test('a prefetch still in flight when the cache closes is counted wasted, not lost', async (t) => {
  const c = new BlockCache({ capacityBytes: 64 * KiB, blockSize: 4 * KiB });
  const d = deferred<Buffer>();
  const ps = c.fill('k', '"e1"', 0, 2, () => d.promise, 'cross_file');
  c.close();
  d.resolve(Buffer.alloc(8 * KiB));
  await Promise.all(ps);
  t.equal(c.stats.prefetchWasted.cross_file, 8 * KiB);
  t.equal(c.size, 0);
});
