import t from 'tap';
import { OPTIONS } from '../../src/config/options.js';
import { fuseTimeoutMs, ReadDeadlines, s3DeadlineMs, type PendingRead } from '../../src/fuse/deadline.js';

t.test('the FUSE timeout outlasts the S3 deadline chain', async (t) => {
  const defaults = { requestTimeoutMs: OPTIONS.requestTimeout.default, maxAttempts: OPTIONS.maxAttempts.default };
  t.equal(s3DeadlineMs(defaults), 145_500, 'as documented in deadline.ts: 10 x 10 s + 45.5 s of backoff');
  t.equal(fuseTimeoutMs(defaults), 301_000);
  t.ok(fuseTimeoutMs(defaults) > 15_000, "longer than fuse-native's 15 s default");
  for (const [rt, at] of [[1000, 1], [500, 3], [30_000, 20], [10_000, 100]] as const) {
    const i = { requestTimeoutMs: rt, maxAttempts: at };
    t.ok(fuseTimeoutMs(i) > 2 * s3DeadlineMs(i), `${rt} ms x ${at}`);
  }
});

t.test('ReadDeadlines: one controller per epoch, pending reads expire after the timeout', async (t) => {
  let now = 1_000_000;
  const d = new ReadDeadlines(1000, () => now);
  t.equal(d.periodMs, 125, 'timeout / 8');
  t.equal(new ReadDeadlines(301_000).periodMs, 30_000, 'at most 30 s between sweeps');
  t.equal(new ReadDeadlines(100).periodMs, 50, 'at least 50 ms');

  const e1 = d.epoch();
  now += 100;
  t.equal(d.epoch(), e1, 'reads within one period share an epoch (no allocation per read)');
  now += 25;
  const e2 = d.epoch();
  t.not(e2, e1, 'a new epoch once the period is over');

  const expired: string[] = [];
  const read = (name: string, epoch: typeof e1): PendingRead => ({ epoch, expire: () => expired.push(name) });
  const a = read('a', e1);
  const b = read('b', e2);
  const c = read('c', e2);
  d.wait(a);
  d.wait(b);
  d.wait(c);
  t.equal(d.settled(c), true, 'answered by the core in time');
  t.equal(d.waiting, 2);

  now = e1.startedMs + 999;
  d.sweep();
  t.same(expired, [], 'nothing before the timeout');
  now = e1.startedMs + 1000;
  d.sweep();
  t.same(expired, ['a'], 'the first epoch expires at its start + timeout');
  t.equal(e1.controller.signal.aborted, true, "its reads' signal fires, so the core gives them up");
  t.equal(e2.controller.signal.aborted, false, 'a younger epoch is left alone');
  t.equal(d.settled(a), false, 'a late core answer is dropped');
  now = e2.startedMs + 1000;
  d.sweep();
  t.same(expired, ['a', 'b']);
  t.equal(d.waiting, 0);
  d.stop();
});

t.test('ReadDeadlines: the sweep timer runs only while reads are pending', async (t) => {
  const d = new ReadDeadlines(200);
  const expired: number[] = [];
  const t0 = Date.now();
  d.wait({ epoch: d.epoch(), expire: () => expired.push(Date.now() - t0) });
  await new Promise((r) => setTimeout(r, 600));
  t.equal(expired.length, 1, 'expired by the sweep timer');
  t.ok(expired[0]! >= 200, `not before the timeout (${expired[0]} ms)`);
  t.equal(d.waiting, 0);
  d.stop();
});
