import t from 'tap';
import { appliesTo, runOrder, unitOf } from '../../src/bench/runner.js';
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

t.test('repetitions are interleaved across targets, so load drift falls on all of them', async (t) => {
  const order = runOrder(['sluice', 's3fs', 'rclone'], 2).map(({ cell, rep }) => `${cell}#${rep}`);
  t.same(order, ['sluice#0', 's3fs#0', 'rclone#0', 'sluice#1', 's3fs#1', 'rclone#1']);
  t.same(runOrder(['x'], 0), []);
});
