import t from 'tap';
import { BACKOFF_BASE_MS, BACKOFF_CAP_MS, backoffMs, sleep } from '../../src/s3/retry.js';
import { AbortedError } from '../../src/errors.js';

t.test('full jitter: uniform in [0, min(cap, base * 2^(n-1))]', async (t) => {
  t.equal(backoffMs(1, () => 0.999999), BACKOFF_BASE_MS - 1);
  t.equal(backoffMs(3, () => 0.5), 2 * BACKOFF_BASE_MS);
  t.equal(backoffMs(1, () => 0), 0);
  t.equal(backoffMs(30, () => 0.999999), BACKOFF_CAP_MS - 1, 'capped');
  t.equal(backoffMs(1000, () => 0.5), BACKOFF_CAP_MS / 2, 'no overflow');
  for (let n = 1; n < 15; n++) {
    const d = backoffMs(n);
    t.ok(d >= 0 && d <= Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** (n - 1)), `attempt ${n}: ${d}`);
  }
});

t.test('sleep resolves, and rejects with AbortedError on abort', async (t) => {
  await sleep(1);
  await sleep(0);
  const ctrl = new AbortController();
  const p = sleep(60_000, ctrl.signal);
  ctrl.abort();
  await t.rejects(p, AbortedError);
  await t.rejects(sleep(10, ctrl.signal), AbortedError, 'already aborted');
});
