/**
 * The AIMD limiter on its own: halve once per congestion event, +1 per window of
 * successes, floor 1, ceiling max; waiting is bounded; the gauge follows the limit.
 */
import t from 'tap';
import { AbortedError } from '../../src/errors.js';
import { s3ConcurrencyLimit } from '../../src/metrics/metrics.js';
import { ConcurrencyLimiter, LimiterTimeout, type Slot } from '../../src/s3/concurrency-limiter.js';

const gauge = async () => (await s3ConcurrencyLimit.get()).values[0]?.value;

t.test('starts at max and grants max slots at once', async (t) => {
  const l = new ConcurrencyLimiter(4);
  t.equal(l.limit, 4);
  t.equal(await gauge(), 4);
  const slots = await Promise.all([1, 2, 3, 4].map(() => l.acquire(1000)));
  t.equal(l.active, 4);
  let fifth: Slot | undefined;
  const p = l.acquire(5000).then((s) => { fifth = s; });
  await new Promise((r) => setImmediate(r));
  t.equal(fifth, undefined, 'the fifth waits');
  slots[0]!.release();
  slots[0]!.release(); // idempotent
  await p;
  t.equal(l.active, 4, 'handed over, not double-counted');
  for (const s of [...slots.slice(1), fifth!]) s.release();
  t.equal(l.active, 0);
});

t.test('a throttle burst halves once; successes grow it back by one per window', async (t) => {
  const l = new ConcurrencyLimiter(16);
  const burst = await Promise.all(Array.from({ length: 16 }, () => l.acquire(1000)));
  for (const s of burst) { l.onThrottle(s); s.release(); }
  t.equal(l.limit, 8, 'sixteen throttles from one epoch halve once');
  let s = await l.acquire(1000); l.onThrottle(s); s.release();
  t.equal(l.limit, 4);
  for (let i = 0; i < 5; i++) { s = await l.acquire(1000); l.onThrottle(s); s.release(); }
  t.equal(l.limit, 1, 'floor 1');
  t.equal(await gauge(), 1, 'gauge follows');
  const seen: number[] = [l.limit];
  for (let i = 0; i < 200 && l.limit < 16; i++) {
    s = await l.acquire(1000); l.onSuccess(); s.release();
    if (seen.at(-1) !== l.limit) seen.push(l.limit);
  }
  t.same(seen, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16], 'additive increase to the ceiling');
  for (let i = 0; i < 50; i++) l.onSuccess();
  t.equal(l.limit, 16, 'ceiling max');
  t.equal(await gauge(), 16);
});

t.test('waiting is bounded and abortable', async (t) => {
  const l = new ConcurrencyLimiter(1);
  const held = await l.acquire(1000);
  await t.rejects(l.acquire(20), LimiterTimeout, 'times out');
  const ctrl = new AbortController();
  const p = l.acquire(10_000, ctrl.signal);
  ctrl.abort();
  await t.rejects(p, AbortedError);
  t.equal(l.waiting, 0, 'no waiter left behind');
  held.release();
  (await l.acquire(10)).release();
  t.throws(() => new ConcurrencyLimiter(0), RangeError);
});
