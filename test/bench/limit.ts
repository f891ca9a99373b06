import t from 'tap';
import { skip } from '../helpers/tap.js';
import { spawnSync } from 'node:child_process';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { seedBenchDataset } from '../../src/bench/datasets.js';
import { measureLimit, measureLimitCurl } from '../../src/bench/limit.js';
import { startLatencyProxy } from '../../src/bench/latency-proxy.js';

t.test('the link limit reads every byte, with undici and with curl', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket('bench-limit');
  const objs = await seedBenchDataset(s3, 'bench-limit', 'l/', { largeFiles: { count: 2, size: 3 * 1024 * 1024 + 5 } });
  const proxy = await startLatencyProxy({ name: 't', ttfbMs: 2, bytesPerSec: 0, targetPort: s3.port });
  t.teardown(() => proxy.close());
  const o = { endpoint: proxy.endpoint, bucket: 'bench-limit', objects: objs, connections: 3, partSize: 1024 * 1024 };
  const u = await measureLimit(o);
  t.equal(u.bytes, 2 * (3 * 1024 * 1024 + 5));
  t.equal(u.requests, 8);
  t.ok(u.verified);
  t.ok(u.mbps > 0);
  if (spawnSync('curl', ['--version']).status !== 0) return skip(t, 'curl is not installed');
  const c = await measureLimitCurl(o);
  t.equal(c.bytes, u.bytes);
  t.ok(c.verified, 'curl bytes verified');
  t.equal(proxy.stats.requests >= 16, true, 'all ranged GETs went through the proxy');
});
