import t from 'tap';
import { assignBatches } from '../../src/bench/run-once.js';

t.test('readers take batches of 16 in turn, like data-loader workers', async (t) => {
  const items = Array.from({ length: 40 }, (_, i) => i);
  const [a, b] = assignBatches(items, 2);
  t.same(a, [...items.slice(0, 16), ...items.slice(32, 40)]);
  t.same(b, items.slice(16, 32));
  t.same(assignBatches(items, 1)[0], items);
  const many = assignBatches([1, 2, 3], 4);
  t.same(many.map((x) => x.length), [3, 0, 0, 0], 'readers without files get none');
});
