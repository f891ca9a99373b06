import t from 'tap';
import { median } from '../../src/bench/stats.js';

t.test('median', async (t) => {
  t.equal(median([]), null);
  t.equal(median([3]), 3);
  t.equal(median([5, 1, 3]), 3);
  t.equal(median([4, 1, 3, 2]), 2.5);
  t.equal(median([NaN, 2, Infinity]), 2);
  t.equal(median([undefined, 4, null, 2]), 3, 'runs without the figure are skipped');
  t.equal(median([undefined, null]), null);
});
