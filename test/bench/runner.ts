import t from 'tap';
import { appliesTo, unitOf } from '../../src/bench/runner.js';
import type { ScenarioDef } from '../../src/bench/scenarios.js';

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
