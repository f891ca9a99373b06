import t from 'tap';
import net from 'node:net';
import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { metricsUrl, render, run, scrape } from '../../src/commands/status.js';
import { parseExposition } from '../../src/metrics/exposition.js';
import { startMetricsServer } from '../../src/metrics/server.js';
import { cacheBytes, cacheCapacityBytes, channelObjects, readWait, readWaitSeconds, s3Requests, s3Retries, servedBytes } from '../../src/metrics/metrics.js';

const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));

/** A port on 127.0.0.1 where nothing listens (bound, then released). */
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer().once('error', reject).listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

t.test('metricsUrl', async (t) => {
  t.equal(metricsUrl(undefined, '127.0.0.1', 9400), 'http://127.0.0.1:9400/metrics');
  t.equal(metricsUrl(undefined, '0.0.0.0', 9500), 'http://127.0.0.1:9500/metrics');
  t.equal(metricsUrl('127.0.0.1:9401', '127.0.0.1', 9400), 'http://127.0.0.1:9401/metrics');
  t.equal(metricsUrl('http://h:1/custom', '127.0.0.1', 9400), 'http://h:1/custom');
  t.throws(() => metricsUrl('ftp://h/x', '127.0.0.1', 9400), { code: 'SLUICE_INVALID_ARGUMENT' });
  t.throws(() => metricsUrl('http://[bad', '127.0.0.1', 9400), { code: 'SLUICE_INVALID_ARGUMENT' });
});

t.test('render: a channel table and the cache/S3 lines, with and without rates', async (t) => {
  const a = parseExposition(`
sluice_served_bytes_total{channel="train",mode="FastFile"} 0
sluice_s3_requests_total{operation="get",status="200"} 10
process_start_time_seconds 1000
`);
  const b = parseExposition(`
sluice_served_bytes_total{channel="train",mode="FastFile"} 20000000
sluice_channel_objects_total{channel="train",mode="FastFile"} 4
sluice_starved_seconds_total{channel="train",mode="FastFile"} 0.5
sluice_s3_requests_total{operation="get",status="200"} 30
sluice_s3_requests_total{operation="get",status="503"} 2
sluice_s3_retries_total{operation="get",reason="throttled"} 2
sluice_cache_bytes 1048576
sluice_cache_capacity_bytes 4194304
process_start_time_seconds 1000
sluice_served_bytes_total{channel="pipe1",mode="Pipe"} 1000000
sluice_pipe_full_seconds_total{channel="pipe1"} 1.5
sluice_channel_epoch{channel="pipe1",mode="Pipe"} 3
`);
  const screen = render('http://x/metrics', b, a, 2, 1_100_000);
  t.match(screen, /up 1m40s/);
  t.match(screen, /rates over the last 2\.0 s/);
  t.match(screen, /train\s+FastFile\s+10\.0\s+2\.0\s+25\.0%\s+n\/a\s+19\.1 MiB\s+4/);
  t.match(screen, /cache\s+1\.0 MiB of 4\.0 MiB \(25\.0%\)/);
  t.match(screen, /32 requests \(11\.0\/s\), 2 errors \(1\.0\/s\), 2 throttled by 503 SlowDown \(1\.0\/s\)/);
  t.match(screen, /2 retries \(throttled 2\)/);
  t.match(screen, /pipe1\s+3\s+75\.0%\s+0\.0%/, 'pipe table: epoch, full, empty');
  const once = render('http://x/metrics', b, undefined, undefined, 1_100_000);
  t.match(once, /averaged since start/);
  t.match(once, /train\s+FastFile\s+0\.2\s+/, '20 MB over 100 s');
  t.match(render('u', parseExposition('sluice_cache_bytes 0')), /no channel has served data yet/);
});

t.test('against a live endpoint: in process and through the CLI', async (t) => {
  const srv = await startMetricsServer({ host: '127.0.0.1', port: 0 });
  t.teardown(() => srv.close());
  servedBytes.inc({ channel: 'st-train', mode: 'FastFile' }, 3_000_000);
  channelObjects.inc({ channel: 'st-train', mode: 'FastFile' });
  readWait.observe({ channel: 'st-train', mode: 'FastFile' }, 0);
  readWaitSeconds.inc({ channel: 'st-train', mode: 'FastFile' }, 0);
  cacheBytes.set(8 * 1024 * 1024);
  cacheCapacityBytes.set(64 * 1024 * 1024);
  s3Requests.inc({ operation: 'get', status: '206' }, 3);
  s3Retries.inc({ operation: 'get', reason: 'reset' });
  const e = await scrape(`${srv.url}/metrics`);
  t.ok(e.samples.length > 10);

  const exec = promisify(execFile);
  const { stdout: out } = await exec(process.execPath, [CLI, 'status', '--url', `${srv.url}/metrics`, '--interval', '0.2'], { encoding: 'utf8', timeout: 60_000 });
  t.match(out, /rates over the last 0\.\d s/);
  t.match(out, /st-train\s+FastFile/);
  t.match(out, /cache\s+8\.0 MiB of 64\.0 MiB/);
  t.match(out, /reset 1/);

  // Asynchronously: the endpoint is served by this very process.
  const r = await exec(process.execPath, [CLI, 'status', '--interval', '0'], {
    env: { ...process.env, SLUICE_METRICS_PORT: String(srv.port) }, encoding: 'utf8', timeout: 60_000,
  });
  t.equal(r.stderr, '');
  t.match(r.stdout, new RegExp(`sluice at http://127\\.0\\.0\\.1:${srv.port}/metrics`));
  t.match(r.stdout, /averaged since start/);
});

t.test('one clear line when nothing listens, or the URL is not sluice', async (t) => {
  const port = await freePort();
  const r = spawnSync(process.execPath, [CLI, 'status', '--url', `http://127.0.0.1:${port}/metrics`], { encoding: 'utf8', timeout: 60_000 });
  t.equal(r.status, 2);
  t.equal(r.stdout, '');
  t.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
  t.match(r.stderr, new RegExp(`^sluice: no sluice metrics at http://127\\.0\\.0\\.1:${port}/metrics: nothing listens there \\(connection refused\\)\\. Check that sluice is running`));

  const srv = await startMetricsServer({ host: '127.0.0.1', port: 0 });
  t.teardown(() => srv.close());
  await t.rejects(scrape(`${srv.url}/nope`), { code: 'SLUICE_METRICS_UNAVAILABLE', message: /HTTP 404/ });
  await t.rejects(scrape(`${srv.url}/healthz`), { code: 'SLUICE_METRICS_UNAVAILABLE', message: /not Prometheus metrics|no sluice_ metrics/ });
  await t.rejects(run(['--interval', 'soon']), { code: 'SLUICE_INVALID_ARGUMENT', message: /--interval "soon"/ });
  await t.rejects(run(['extra']), { code: 'SLUICE_INVALID_ARGUMENT' });
  const help = spawnSync(process.execPath, [CLI, 'status', '--help'], { encoding: 'utf8', timeout: 60_000 });
  t.equal(help.status, 0);
  t.match(help.stdout, /Usage: sluice status/);
});

t.test('render: a line per tier under the memory cache, once it was used (issue 48)', async (t) => {
  const none = render('u', parseExposition('sluice_cache_bytes 0\nsluice_disk_cache_hits_total 0\nsluice_cache_bucket_hits_total 0'));
  t.notMatch(none, /disk tier|cache bucket/, 'no tier lines when no tier was used');
  const screen = render('u', parseExposition([
    'sluice_cache_bytes 0',
    'sluice_disk_cache_hits_total 3', 'sluice_disk_cache_misses_total 1', 'sluice_disk_cache_read_bytes_total 3145728',
    'sluice_cache_bucket_hits_total 30', 'sluice_cache_bucket_misses_total{reason="absent"} 8', 'sluice_cache_bucket_misses_total{reason="corrupt"} 2',
    'sluice_cache_bucket_read_bytes_total 31457280', 'sluice_cache_bucket_written_bytes_total 10485760',
    'sluice_cache_bucket_writes_total{result="dropped"} 4', 'sluice_cache_bucket_pending_bytes 0',
  ].join('\n')));
  t.match(screen, /disk tier hit ratio 75\.0% of 4 lookups/);
  t.match(screen, /cache bucket hit ratio 75\.0% of 40 lookups \(misses: absent 8, corrupt 2\)/);
  t.match(screen, /4 dropped, 0 failed/);
});
