import t from 'tap';
import { registry } from '../../src/metrics/metrics.js';
import { WaitClock } from '../../src/metrics/wait-clock.js';

async function waited(channel: string): Promise<number> {
  const m = await registry.getSingleMetric('sluice_starved_seconds_total')!.get();
  return m.values.filter((v) => v.labels.channel === channel).reduce((a, v) => a + v.value, 0);
}

t.test('overlapping waits count once', async (t) => {
  const c = new WaitClock({ channel: 'wc-overlap', mode: 'FastFile' });
  // Three reads waiting through the same 100 ms (as the kernel's readahead sends them).
  c.add(1000, 1100);
  c.add(1000, 1100);
  c.add(1010, 1100);
  t.equal(await waited('wc-overlap'), 0.1);
});

t.test('disjoint waits add up; partly overlapping ones add their new part', async (t) => {
  const c = new WaitClock({ channel: 'wc-disjoint', mode: 'FastFile' });
  c.add(0, 50);
  c.add(100, 150);
  c.add(120, 200); // 50 ms of it are new
  t.ok(Math.abs((await waited('wc-disjoint')) - 0.15) < 1e-9);
});

t.test('the rate never exceeds wall time, whatever the concurrency', async (t) => {
  const c = new WaitClock({ channel: 'wc-bound', mode: 'FastFile' });
  // 16 readers, each waiting 90 ms of every 100 ms over ~1 s, reported in end order.
  const ends: Array<[number, number]> = [];
  for (let r = 0; r < 16; r++) for (let k = 0; k < 10; k++) ends.push([k * 100 + r, k * 100 + r + 90]);
  ends.sort((a, b) => a[1] - b[1]);
  for (const [s, e] of ends) c.add(s, e);
  const w = await waited('wc-bound');
  const span = (Math.max(...ends.map((e) => e[1])) - Math.min(...ends.map((e) => e[0]))) / 1000;
  t.ok(w <= span + 1e-9, `waited ${w} s in ${span} s of wall time`);
  t.ok(w >= 0.9, `waited ${w} s: each 100 ms had >= 90 ms of waiting`);
});
