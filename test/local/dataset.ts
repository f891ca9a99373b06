import t from 'tap';
import { createHash } from 'node:crypto';
import { datasetLayout, generateBytes, sourceBytes } from '../../src/local/dataset.js';

t.test('bytes are deterministic per (seed, key, size)', async (t) => {
  const a = sourceBytes({ key: 'k', size: 1001, seed: 3 });
  t.equal(a.length, 1001);
  t.ok(a.equals(generateBytes('k', 1001, 3)));
  t.notOk(a.equals(sourceBytes({ key: 'k', size: 1001, seed: 4 })), 'another seed');
  t.notOk(a.equals(sourceBytes({ key: 'k2', size: 1001, seed: 3 })), 'another key');
  t.ok(sourceBytes({ key: 'k', size: 1001, seed: 3 }, 10, 20).equals(a.subarray(10, 20)), 'a range');
  t.ok(generateBytes('k', 2000, 3).subarray(0, 1001).equals(a), 'a prefix of a longer object');
  t.equal(generateBytes('k', 0).length, 0);
  // Pin the generator: a silent change would make benchmark datasets differ between versions.
  t.equal(createHash('sha256').update(generateBytes('pin', 4096, 1)).digest('hex'), '6dcae4772ec969bea441af1e06eb0767aff90e6b4e891ff8db0e33327695c74b');
});

t.test('layout: nested small files, large files, special names', async (t) => {
  const l = datasetLayout('p/', { smallFiles: { count: 10, size: 5, folders: 4 }, largeFiles: { count: 2, size: 100 }, specialNames: true });
  t.equal(l.length, 10 + 2 + 6);
  t.equal(new Set(l.map((o) => o.key)).size, l.length, 'unique keys');
  t.ok(l.every((o) => o.key.startsWith('p/')));
  t.equal(new Set(l.filter((o) => o.key.includes('/small/')).map((o) => o.key.split('/').slice(0, -1).join('/'))).size, 4, '4 folders');
  t.ok(l.some((o) => o.key.includes(' ')), 'a space');
  t.ok(l.some((o) => /[^\x00-\x7f]/.test(o.key)), 'non-ASCII');
  t.ok(l.some((o) => o.key.includes('+')), 'a plus');
  t.same(datasetLayout('', {}), []);
});
