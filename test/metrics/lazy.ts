/**
 * The lazily built registry (src/metrics/metrics.ts, issue 44): what is counted before
 * prom-client is loaded shows in /metrics once it is: counter sums, gauge values (set, then
 * moved), histogram observations (also past the exact buffer: counts and buckets exact).
 * Runs in its own process (tap), so the registry is not built when it starts.
 */
import t from 'tap';
import { metricsBuilt, openHandles, s3FirstByteSeconds, s3Requests, servedBytes } from '../../src/metrics/metrics.js';
import { startMetricsServer } from '../../src/metrics/server.js';
import { parseExposition } from '../../src/metrics/exposition.js';

t.test('counted before the registry exists, shown by the first scrape', async (t) => {
  t.equal(metricsBuilt(), false, 'not built at import');
  s3Requests.inc({ operation: 'list', status: '200' });
  s3Requests.inc({ operation: 'list', status: '200' }, 2);
  s3Requests.inc({ operation: 'head', status: '404' });
  servedBytes.inc({ channel: 'lazy', mode: 'FastFile' }, 1000);
  openHandles.set({ channel: 'lazy' }, 5);
  openHandles.inc({ channel: 'lazy' });
  openHandles.dec({ channel: 'lazy' }, 3);
  const n = 70_000; // past the exact buffer (65,536): the rest fold into their buckets
  for (let i = 0; i < n; i++) s3FirstByteSeconds.observe({ operation: 'lazy' }, i % 2 === 0 ? 0.0005 : 0.02);
  t.equal(metricsBuilt(), false, 'still not built: nothing asked for it');

  const server = await startMetricsServer({ port: 0 });
  t.teardown(() => server.close());
  const res = await fetch(`${server.url}/metrics`);
  t.equal(res.status, 200);
  const text = await res.text();
  t.equal(metricsBuilt(), true, 'the scrape built it');
  t.match(text, /sluice_s3_requests_total\{operation="list",status="200"\} 3\n/);
  t.match(text, /sluice_s3_requests_total\{operation="head",status="404"\} 1\n/);
  t.match(text, /sluice_served_bytes_total\{channel="lazy",mode="FastFile"\} 1000\n/);
  t.match(text, /sluice_open_handles\{channel="lazy"\} 3\n/);
  t.match(text, new RegExp(`sluice_s3_first_byte_seconds_count\\{operation="lazy"\\} ${n}\\n`));
  t.match(text, new RegExp(`sluice_s3_first_byte_seconds_bucket\\{le="0.001",operation="lazy"\\} ${n / 2}\\n`));
  t.match(text, /process_cpu_seconds_total/, 'the default process metrics too');
  t.ok(parseExposition(text), 'parses');

  s3Requests.inc({ operation: 'list', status: '200' });
  t.match(await (await fetch(`${server.url}/metrics`)).text(), /sluice_s3_requests_total\{operation="list",status="200"\} 4\n/, 'counted after it is built');
  t.equal((await s3Requests.get()).values.find((v) => v.labels.operation === 'head')?.value, 1, 'get() reads the built metric');
});
