import t from 'tap';
import { BusyMeter, busyJiffies, coresBusyFrom } from '../../src/bench/machine-busy.js';
import { epochMs } from '../../src/bench/read-plan.js';

const stat = (user: number, system: number, idle: number, steal = 0) =>
  `cpu  ${user} 0 ${system} ${idle} 7 1 2 ${steal} 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1 2 3\n`;

t.test('busy jiffies: user + nice + system + irq + softirq; idle, iowait and steal are not busy', async (t) => {
  t.equal(busyJiffies(stat(100, 50, 1000)), 153);
  t.equal(busyJiffies(stat(100, 50, 1000, 999)), 153, 'steal is another guest\'s time');
  t.equal(busyJiffies('intr 1 2\n'), undefined, 'no cpu line');
  t.equal(busyJiffies('cpu  1 2 3\n'), 6, 'a short line (user, nice, system only): the missing fields count 0');
});

t.test('cores busy over a span, interpolated between samples', async (t) => {
  // 2 cores fully busy from 0 to 1000 ms (200 jiffies), then idle.
  const s = [{ ms: 0, jiffies: 0 }, { ms: 500, jiffies: 100 }, { ms: 1000, jiffies: 200 }, { ms: 1500, jiffies: 200 }];
  t.equal(coresBusyFrom(s, 0, 1000), 2);
  t.equal(coresBusyFrom(s, 250, 750), 2, 'inside samples');
  t.equal(coresBusyFrom(s, 500, 1500), 1, 'half busy, half idle');
  t.equal(coresBusyFrom(s, 1000, 1500), 0);
  t.equal(coresBusyFrom(s, -10, 500), undefined, 'a span that starts before the first sample');
  t.equal(coresBusyFrom(s, 0, 2000), undefined, 'a span that ends after the last sample');
  t.equal(coresBusyFrom(s, 700, 700), undefined, 'an empty span');
  t.equal(coresBusyFrom([{ ms: 0, jiffies: 0 }], 0, 0.5), undefined, 'one sample');
});

t.test('the meter samples what it is given, and covers a span that just ended', async (t) => {
  let jiffies = 0;
  const m = new BusyMeter(() => stat(jiffies, 0, 0));
  t.ok(m.start());
  t.teardown(() => m.stop());
  const start = epochMs();
  await new Promise((r) => setTimeout(r, 120));
  jiffies += 30; // 0.3 CPU s
  await new Promise((r) => setTimeout(r, 120));
  const end = epochMs();
  const busy = m.coresBusy(start, end);
  t.ok(busy !== undefined && Math.abs(busy - 0.3 / ((end - start) / 1000)) < 1e-6, `0.3 CPU s over ${(end - start).toFixed(0)} ms: ${busy}`);
  const broken = new BusyMeter(() => { throw new Error('no /proc'); });
  t.equal(broken.start(), false, 'no /proc/stat: no figures, no failure');
  t.equal(broken.coresBusy(0, 1), undefined);
});

t.test('the real /proc/stat of this machine reads', { skip: process.platform !== 'linux' }, async (t) => {
  const m = new BusyMeter();
  t.ok(m.start());
  t.teardown(() => m.stop());
  const start = epochMs();
  const until = start + 200;
  while (epochMs() < until) { /* keep one core busy */ }
  const busy = m.coresBusy(start, epochMs());
  // At least this loop's core, less what the hypervisor may have stolen from it.
  t.ok(busy !== undefined && busy > 0.25, `a spinning loop shows as busy: ${busy} cores`);
});
