/**
 * src/s3/outage.ts through the real client: an endpoint that answered before and then
 * refuses connections is retried by time (a short outage is ridden out, a long one fails
 * after requestDeadlineMs with EndpointUnreachableError); one that never answered fails
 * after UNREACHABLE_MAX_ATTEMPTS, at once.
 */
import t from 'tap';
import { EndpointUnreachableError } from '../../src/errors.js';
import { seedDataset, sourceBytes } from '../../src/local/dataset.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { OUTAGE_POLL_MS, requestDeadlineMs } from '../../src/s3/outage.js';
import { BACKOFF_BASE_MS, BACKOFF_CAP_MS } from '../../src/s3/retry.js';
import { createObjectClient } from '../../src/s3/s3-client.js';
import { startFaultProxy } from '../helpers/fault-proxy.js';

t.test('requestDeadlineMs: attempts x timeout + every backoff ceiling', async (t) => {
  t.equal(requestDeadlineMs({ requestTimeoutMs: 10_000, maxAttempts: 10 }), 145_500);
  t.equal(requestDeadlineMs({ requestTimeoutMs: 1000, maxAttempts: 1 }), 1000, 'no backoff with one attempt');
  t.equal(requestDeadlineMs({ requestTimeoutMs: 1000, maxAttempts: 3 }), 3000 + BACKOFF_BASE_MS + 2 * BACKOFF_BASE_MS);
  t.ok(OUTAGE_POLL_MS < BACKOFF_CAP_MS);
});

t.test('outages through the real client and the fault proxy', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket('outage-unit');
  const [o] = await seedDataset(s3, 'outage-unit', 'x/', { largeFiles: { count: 1, size: 200_000 }, seed: 8 });
  const proxy = await startFaultProxy(s3.port);
  t.teardown(() => proxy.close());
  const opts = { bucket: 'outage-unit', endpoint: proxy.endpoint, region: 'us-east-1', pathStyle: true, credentials: s3.credentials, requestTimeoutMs: 1000, maxAttempts: 2 };
  const deadline = requestDeadlineMs(opts); // 2.1 s

  const c = createObjectClient(opts);
  t.teardown(() => c.close());
  t.ok((await c.getRange(o!.key, 0, 100, o!.etag)).equals(sourceBytes(o!, 0, 100)), 'answers first');
  proxy.set({ down: true });
  const started = Date.now();
  const p = c.getRange(o!.key, 1000, 150_000, o!.etag);
  await new Promise((r) => setTimeout(r, deadline / 2));
  proxy.set({ down: false });
  t.ok((await p).equals(sourceBytes(o!, 1000, 150_000)), `an outage shorter than the ${deadline} ms deadline is ridden out (${Date.now() - started} ms)`);

  proxy.set({ down: true });
  const t0 = Date.now();
  const err = await c.getRange(o!.key, 0, 10, o!.etag).catch((e: unknown) => e);
  const took = Date.now() - t0;
  t.type(err, EndpointUnreachableError, 'a longer outage fails with EndpointUnreachableError');
  t.ok(took >= deadline * 0.9, `not before the deadline (${took} ms of ${deadline} ms)`);
  t.comment(`outage past the deadline failed after ${took} ms`);

  const fresh = createObjectClient(opts);
  t.teardown(() => fresh.close());
  const never = await fresh.getRange(o!.key, 0, 10, o!.etag).catch((e: unknown) => e);
  t.type(never, EndpointUnreachableError, 'an endpoint that never answered fails after a few attempts');
  proxy.set({ down: false });
});
