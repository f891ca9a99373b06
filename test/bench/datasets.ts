import t from 'tap';
import { benchLayout } from '../../src/bench/datasets.js';

t.test('keys are at most one folder below the prefix (s3rver delimiter listings)', async (t) => {
  const l = benchLayout('p/', { smallFiles: { count: 10, size: 5, folders: 3 }, largeFiles: { count: 2, size: 9 } });
  t.equal(l.length, 12);
  for (const o of l) t.ok(o.key.slice(2).split('/').length <= 2, o.key);
  t.same(l.filter((o) => o.key.startsWith('p/large/')).map((o) => o.size), [9, 9]);
  t.equal(new Set(l.map((o) => o.key)).size, 12, 'unique keys');
  const flat = benchLayout('q/', { smallFiles: { count: 3, size: 1 } });
  t.same(flat.map((o) => o.key), ['q/file-00000.bin', 'q/file-00001.bin', 'q/file-00002.bin']);
});
