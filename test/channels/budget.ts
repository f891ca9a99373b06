import t from 'tap';
import { planBudgets } from '../../src/channels/budget.js';
import type { InputMode } from '../../src/channels/input-config.js';

const MiB = 1024 * 1024;
const totals = { cacheSize: 1024 * MiB, maxInflight: 512 * MiB, maxConnections: 64, partSize: 8 * MiB };
const chans = (...modes: InputMode[]) => modes.map((inputMode, i) => ({ name: `c${i}`, inputMode }));

t.test('three channels share one budget: what runs with the script stays within the totals', async (t) => {
  for (const modes of [['FastFile', 'FastFile', 'FastFile'], ['FastFile', 'Pipe', 'File'], ['Pipe', 'Pipe', 'FastFile'], ['File', 'File', 'Pipe']] as InputMode[][]) {
    const plan = planBudgets(chans(...modes), totals);
    const live = [...plan.byChannel.entries()].filter(([name]) => modes[Number(name.slice(1))] !== 'File').map(([, b]) => b);
    const what = modes.join('+');
    t.ok(live.reduce((s, b) => s + b.cacheSize, 0) <= totals.cacheSize, `${what}: caches within --cache-size`);
    t.ok(live.reduce((s, b) => s + b.maxInflight, 0) <= totals.maxInflight, `${what}: in flight within --max-inflight`);
    const ffConns = modes.filter((m) => m === 'FastFile').length * (plan.byChannel.get(`c${modes.indexOf('FastFile')}`)?.maxConnections ?? 0);
    t.ok(ffConns + plan.sharedPoolConnections <= totals.maxConnections, `${what}: FastFile pools + the shared pool within --max-connections`);
    // During the downloads (before the script): a File channel plus the Pipe channels' read-ahead.
    const pipes = modes.map((m, i) => (m === 'Pipe' ? plan.byChannel.get(`c${i}`)!.maxInflight : 0)).reduce((a, b) => a + b, 0);
    for (const [i, m] of modes.entries()) {
      if (m === 'File') t.ok(plan.byChannel.get(`c${i}`)!.maxInflight + pipes <= totals.maxInflight, `${what}: File download + Pipe read-ahead within --max-inflight`);
    }
  }
});

t.test('fair: equal channels get equal shares; only FastFile gets cache; File takes what Pipe does not hold', async (t) => {
  const ff = planBudgets(chans('FastFile', 'FastFile', 'FastFile'), totals);
  t.same([...ff.byChannel.values()], Array(3).fill({ cacheSize: Math.floor(1024 * MiB / 3), maxInflight: Math.floor(512 * MiB / 3), maxConnections: 21 }));
  const mixed = planBudgets(chans('FastFile', 'Pipe', 'File'), totals);
  t.same(mixed.byChannel.get('c0'), { cacheSize: 1024 * MiB, maxInflight: Math.floor(512 * MiB / 3), maxConnections: 21 });
  t.same(mixed.byChannel.get('c1'), { cacheSize: 0, maxInflight: Math.floor(512 * MiB / 3), maxConnections: 21 });
  t.same(mixed.byChannel.get('c2'), { cacheSize: 0, maxInflight: 512 * MiB - Math.floor(512 * MiB / 3), maxConnections: 64 - 21 });
  t.equal(mixed.sharedPoolConnections, 64 - 21);
  t.same(planBudgets(chans('File'), totals).byChannel.get('c0'), { cacheSize: 0, maxInflight: 512 * MiB, maxConnections: 64 }, 'one channel: the whole budget');
});

t.test('a share too small for one part is a one-line error naming the fix', async (t) => {
  t.throws(() => planBudgets(chans('FastFile', 'FastFile', 'Pipe'), { ...totals, maxInflight: 16 * MiB }), { code: 'SLUICE_CONFIG', message: /--max-inflight 16777216 shared by 3 channels gives each 5592405 bytes, less than --part-size 8388608/ });
  t.throws(() => planBudgets(chans('FastFile', 'FastFile', 'Pipe'), { ...totals, cacheSize: 8 * MiB }), { code: 'SLUICE_CONFIG', message: /--cache-size 8388608 shared by 2 FastFile channels/ });
  t.doesNotThrow(() => planBudgets(chans('Pipe', 'Pipe', 'Pipe'), { ...totals, maxInflight: 16 * MiB }), 'Pipe read-ahead works with less than a part');
});
