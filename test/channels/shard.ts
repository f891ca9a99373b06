import t from 'tap';
import type { Test } from '../helpers/tap.js';
import { shardObjects } from '../../src/channels/shard.js';
import { createRng } from '../../src/channels/shuffle.js';

/** Objects with deterministic pseudo-random sizes in [1, maxSize]. */
function objects(n: number, maxSize: number, seed = 1) {
  const next = createRng(seed, 0);
  return Array.from({ length: n }, (_, i) => ({ key: `data/part-${String(i).padStart(5, '0')}`, size: 1 + (next() % maxSize) }));
}

function checkShards(t: Test, all: { key: string; size: number }[], hostCount: number, seed: number | undefined, epoch: number) {
  const shards = Array.from({ length: hostCount }, (_, hostIndex) => shardObjects(all, { distribution: 'ShardedByS3Key', hostIndex, hostCount, epoch, ...(seed !== undefined ? { seed } : {}) }));
  const keys = shards.flatMap((s) => s.map((o) => o.key));
  t.equal(new Set(keys).size, keys.length, 'disjoint');
  t.same(keys.slice().sort(), all.map((o) => o.key).sort(), 'union is every object');
  const bytes = shards.map((s) => s.reduce((a, o) => a + o.size, 0));
  const largest = Math.max(...all.map((o) => o.size));
  t.ok(Math.max(...bytes) - Math.min(...bytes) <= largest, `balanced: ${bytes.join(', ')} (largest object ${largest})`);
  for (const s of shards) t.same(s.map((o) => o.key), s.map((o) => o.key).slice().sort(), 'each shard is in key order');
  return shards;
}

t.test('4 hosts: disjoint shards whose union is every object, balanced by bytes', async (t) => {
  const all = objects(400, 100_000);
  const shards = checkShards(t, all, 4, undefined, 0);
  const bytes = shards.map((s) => s.reduce((a, o) => a + o.size, 0));
  const total = bytes.reduce((a, b) => a + b, 0);
  t.ok(Math.max(...bytes) - Math.min(...bytes) <= total * 0.01, 'largest-first keeps shards within 1%');
});

t.test('every host computes the same split from any listing order', async (t) => {
  const all = objects(200, 5000);
  const reversed = all.slice().reverse();
  for (let h = 0; h < 4; h++) {
    const o = { distribution: 'ShardedByS3Key' as const, hostIndex: h, hostCount: 4, epoch: 0 };
    t.same(shardObjects(all, o), shardObjects(reversed, o));
  }
});

t.test('with a seed, membership changes per epoch, staying disjoint, complete and balanced', async (t) => {
  const all = objects(300, 20_000, 3);
  const e0 = checkShards(t, all, 4, 7, 0);
  const e1 = checkShards(t, all, 4, 7, 1);
  checkShards(t, all, 4, 7, 2);
  t.notSame(e0[0]!.map((o) => o.key), e1[0]!.map((o) => o.key), 'host 0 gets other objects in epoch 1');
  const again = checkShards(t, all, 4, 7, 1);
  t.same(again.map((s) => s.map((o) => o.key)), e1.map((s) => s.map((o) => o.key)), 'same seed and epoch, same shards');
});

t.test('equal sizes and empty objects are spread by count', async (t) => {
  const same = Array.from({ length: 10 }, (_, i) => ({ key: `k${i}`, size: 0 }));
  const counts = [0, 1, 2].map((h) => shardObjects(same, { distribution: 'ShardedByS3Key', hostIndex: h, hostCount: 3, epoch: 0 }).length);
  t.same(counts.slice().sort(), [3, 3, 4]);
});

t.test('more hosts than objects, one host, FullyReplicated', async (t) => {
  const all = objects(3, 10);
  checkShards(t, all, 5, undefined, 0);
  t.same(shardObjects(all, { distribution: 'ShardedByS3Key', hostIndex: 0, hostCount: 1, epoch: 0 }), all);
  for (let h = 0; h < 3; h++) t.same(shardObjects(all, { distribution: 'FullyReplicated', hostIndex: h, hostCount: 3, epoch: 4, seed: 1 }), all);
});

t.test('bad host index or count is rejected', async (t) => {
  t.throws(() => shardObjects([], { distribution: 'ShardedByS3Key', hostIndex: 4, hostCount: 4, epoch: 0 }), { code: 'SLUICE_INVALID_ARGUMENT' });
  t.throws(() => shardObjects([], { distribution: 'ShardedByS3Key', hostIndex: 0, hostCount: 0, epoch: 0 }), { code: 'SLUICE_INVALID_ARGUMENT' });
});

t.test('counts are balanced (within one) for 1..8 hosts over skewed sizes, every epoch', async (t) => {
  // Skewed: a few huge objects among many tiny ones (and some empty), as real datasets are.
  const next = createRng(11, 0);
  const skewed = Array.from({ length: 103 }, (_, i) => ({
    key: `s/${String(i).padStart(4, '0')}`,
    size: i % 17 === 0 ? 50_000_000 + (next() % 1000) : i % 5 === 0 ? 0 : 1 + (next() % 300),
  }));
  for (let hosts = 1; hosts <= 8; hosts++) {
    for (const seed of [undefined, 5]) {
      for (const epoch of [0, 1]) {
        const shards = Array.from({ length: hosts }, (_, hostIndex) => shardObjects(skewed, { distribution: 'ShardedByS3Key', hostIndex, hostCount: hosts, epoch, ...(seed !== undefined ? { seed } : {}) }));
        const counts = shards.map((s) => s.length);
        const keys = shards.flatMap((s) => s.map((o) => o.key));
        t.equal(new Set(keys).size, skewed.length, `${hosts} hosts, seed ${seed}, epoch ${epoch}: disjoint and complete`);
        t.ok(Math.max(...counts) - Math.min(...counts) <= 1, `${hosts} hosts, seed ${seed}, epoch ${epoch}: counts ${counts.join(', ')}`);
        // Deterministic: the same call gives the same shard.
        t.same(shardObjects(skewed, { distribution: 'ShardedByS3Key', hostIndex: hosts - 1, hostCount: hosts, epoch, ...(seed !== undefined ? { seed } : {}) }), shards[hosts - 1]);
      }
    }
  }
});

t.test("the issue's case: one 1000-byte object and nine 100-byte ones on 2 hosts give 5 and 5", async (t) => {
  const all = [{ key: 'big', size: 1000 }, ...Array.from({ length: 9 }, (_, i) => ({ key: `small${i}`, size: 100 }))];
  const shards = [0, 1].map((h) => shardObjects(all, { distribution: 'ShardedByS3Key', hostIndex: h, hostCount: 2, epoch: 0 }));
  t.same(shards.map((s) => s.length), [5, 5]);
  t.same(shards.map((s) => s.reduce((a, o) => a + o.size, 0)).sort((a, b) => a - b), [500, 1400], 'bytes as balanced as equal counts allow');
});
