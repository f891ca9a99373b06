import t from 'tap';
import { OPTIONS } from '../../src/config/options.js';
import { fuseTimeoutMs, s3DeadlineMs } from '../../src/fuse/deadline.js';

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
