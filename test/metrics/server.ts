import t from 'tap';
import net from 'node:net';
import { startMetricsServer } from '../../src/metrics/server.js';
import { s3Requests } from '../../src/metrics/metrics.js';

t.test('serves /metrics, /healthz, and 404 elsewhere on 127.0.0.1 with an ephemeral port', async (t) => {
  const srv = await startMetricsServer({ host: '127.0.0.1', port: 0 });
  t.teardown(() => srv.close());
  t.ok(srv.port > 0);
  t.equal(srv.url, `http://127.0.0.1:${srv.port}`);
  s3Requests.inc({ operation: 'get', status: '200' });
  const m = await fetch(`${srv.url}/metrics`);
  t.equal(m.status, 200);
  t.match(m.headers.get('content-type'), /text\/plain/);
  const text = await m.text();
  t.match(text, /# TYPE sluice_s3_requests_total counter/);
  t.match(text, /sluice_s3_requests_total\{operation="get",status="200"\} \d+/);
  t.match(text, /process_resident_memory_bytes \d+/);
  const h = await fetch(`${srv.url}/healthz`);
  t.equal(h.status, 200);
  t.equal(await h.text(), 'ok\n');
  const nf = await fetch(`${srv.url}/nope`);
  t.equal(nf.status, 404);
  await nf.text();
  const post = await fetch(`${srv.url}/metrics`, { method: 'POST' });
  t.equal(post.status, 405);
  await post.text();
});

t.test('/readyz: 503 until every registered name is ready, listing the others', async (t) => {
  const srv = await startMetricsServer({ host: '127.0.0.1', port: 0 });
  t.teardown(() => srv.close());
  const ready = async () => { const r = await fetch(`${srv.url}/readyz`); return { status: r.status, body: await r.text() }; };
  let r = await ready();
  t.equal(r.status, 503, 'nothing registered: not ready');
  t.match(r.body, /nothing registered/);
  srv.setReady('channel train', false);
  srv.setReady('channel test', false);
  r = await ready();
  t.equal(r.status, 503);
  t.match(r.body, /channel train\nchannel test/);
  srv.setReady('channel train', true);
  r = await ready();
  t.equal(r.status, 503);
  t.notMatch(r.body, /channel train/);
  t.match(r.body, /channel test/);
  srv.setReady('channel test', true);
  r = await ready();
  t.equal(r.status, 200);
  t.equal(r.body, 'ready\n');
  srv.setReady('channel test', false);
  t.equal((await ready()).status, 503, 'can become unready again');
});

t.test('binds loopback by default and frees the port on close', async (t) => {
  const srv = await startMetricsServer({ port: 0 } as { host: string; port: number });
  t.equal(srv.url, `http://127.0.0.1:${srv.port}`);
  const res = await fetch(`${srv.url}/healthz`);
  await res.text();
  await srv.close();
  await srv.close(); // idempotent
  await new Promise<void>((resolve, reject) => {
    const s = net.createServer().once('error', reject).listen(srv.port, '127.0.0.1', () => s.close(() => resolve()));
  });
  t.pass('port reusable after close');
});

t.test('a port in use is a one-line user error', async (t) => {
  const srv = await startMetricsServer({ host: '127.0.0.1', port: 0 });
  t.teardown(() => srv.close());
  await t.rejects(startMetricsServer({ host: '127.0.0.1', port: srv.port }), { code: 'SLUICE_INVALID_ARGUMENT', message: /already in use/ });
  await t.rejects(startMetricsServer({ host: '127.0.0.1', port: 70000 }), { code: 'SLUICE_INVALID_ARGUMENT' });
});
