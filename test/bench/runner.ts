import t from 'tap';
import { appliesTo, assignBatches, unitOf } from '../../src/bench/runner.js';
import type { ScenarioDef } from '../../src/bench/scenarios.js';

t.test('readers take batches of 16 in turn, like data-loader workers', async (t) => {
  const items = Array.from({ length: 40 }, (_, i) => i);
  const [a, b] = assignBatches(items, 2);
  t.same(a, [...items.slice(0, 16), ...items.slice(32, 40)]);
  t.same(b, items.slice(16, 32));
  t.same(assignBatches(items, 1)[0], items);
  const many = assignBatches([1, 2, 3], 4);
  t.same(many.map((x) => x.length), [3, 0, 0, 0], 'readers without files get none');
});

t.test('units and which targets a scenario applies to', async (t) => {
  const s = (kind: ScenarioDef['kind'], metric: ScenarioDef['metric'] = 'MB/s') => ({ kind, metric }) as ScenarioDef;
  t.same(unitOf(s('sequential', 'files/s')), { unit: 'files/s', higherIsBetter: true });
  t.same(unitOf(s('random')), { unit: 'ops/s', higherIsBetter: true });
  t.same(unitOf(s('ttfb')), { unit: 's', higherIsBetter: false });
  t.ok(appliesTo('sequential', 'aws'));
  t.ok(appliesTo('random', 'rclone'));
  t.notOk(appliesTo('random', 'File'), 'random reads of a downloaded file measure the local disk');
  t.notOk(appliesTo('ttfb', 'Pipe'));
  t.ok(appliesTo('list', 'FastFile'));
});
