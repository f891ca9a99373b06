import t from 'tap';
import { inflightBytes } from '../../src/metrics/metrics.js';
import { InflightBudget } from '../../src/prefetch/inflight-budget.js';

t.test('prefetch claims are refused past the limit; demand claims never are', async (t) => {
  const b = new InflightBudget(100);
  const a = b.tryAcquire(60)!;
  t.ok(a);
  t.equal(b.tryAcquire(50), undefined, 'refused: 60 + 50 > 100');
  const c = b.tryAcquire(40)!;
  t.ok(c, 'exactly the limit is allowed');
  t.equal(b.available, 0);
  const d = b.acquireDemand(30);
  t.equal(b.inUse, 130, 'demand may pass the limit');
  t.equal((await inflightBytes.get()).values[0]!.value, 130, 'sluice_inflight_bytes follows');
  t.equal(b.tryAcquire(1), undefined, 'no prefetch while over');
  a();
  a(); // idempotent
  t.equal(b.inUse, 70);
  d();
  c();
  t.equal(b.inUse, 0);
  t.equal(b.peakPrefetch, 100);
});

t.test('onRelease listeners run after each release and can unsubscribe', async (t) => {
  const b = new InflightBudget(10);
  let calls = 0;
  const off = b.onRelease(() => calls++);
  b.tryAcquire(5)!();
  b.acquireDemand(20)();
  t.equal(calls, 2);
  off();
  b.tryAcquire(5)!();
  t.equal(calls, 2);
});

t.test('rejects a nonsense limit', async (t) => {
  t.throws(() => new InflightBudget(0));
  t.throws(() => new InflightBudget(1.5));
});

t.test('a kind limit keeps cross-file prefetch from taking the whole budget', async (t) => {
  const b = new InflightBudget(100, { cross_file: 50 });
  const x = b.tryAcquire(40, 'cross_file')!;
  t.ok(x);
  t.equal(b.tryAcquire(20, 'cross_file'), undefined, 'cross_file capped at 50');
  const s = b.tryAcquire(60, 'sequential')!;
  t.ok(s, 'sequential gets the rest');
  t.equal(b.usedBy('cross_file'), 40);
  t.equal(b.usedBy('sequential'), 60);
  x();
  s();
  t.equal(b.usedBy('cross_file'), 0);
  t.equal(b.inUse, 0);
});
