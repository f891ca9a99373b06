import t from 'tap';
import { createHash } from 'node:crypto';
import net from 'node:net';
import { Pool } from 'undici';
import { RequestFramer, startLatencyProxy, describeProfile, validateProfile } from '../../src/bench/latency-proxy.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { seedDataset } from '../../src/local/dataset.js';

t.test('framer finds request boundaries across chunks, with bodies', async (t) => {
  const f = new RequestFramer();
  const get = 'GET /b/k HTTP/1.1\r\nHost: x\r\nRange: bytes=0-9\r\n\r\n';
  const put = 'PUT /b/k HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello';
  const chunked = 'PUT /b/c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n';
  const all = Buffer.from(get + put + chunked + get);
  // Every split point: the count must not depend on how TCP cut the stream.
  for (let cut = 1; cut < all.length; cut += 7) {
    const g = new RequestFramer();
    const n = g.feed(all.subarray(0, cut)) + g.feed(all.subarray(cut));
    t.equal(n, 4, `cut at ${cut}`);
  }
  t.equal(f.feed(Buffer.from(get)), 1);
  // A body containing CRLFCRLF is not a new request.
  t.equal(f.feed(Buffer.from('POST / HTTP/1.1\r\nContent-Length: 4\r\n\r\n\r\n\r\n')), 1);
  t.equal(f.feed(Buffer.from(get)), 1);
  t.equal(f.disabled, false);
});

t.test('profiles are described and checked', async (t) => {
  t.match(describeProfile({ name: 's3-like', ttfbMs: 25, bytesPerSec: 80e6 }), /25 ms.*80 MB\/s/);
  t.match(describeProfile({ name: 'none', ttfbMs: 0, bytesPerSec: 0 }), /no bandwidth cap/);
  t.ok(validateProfile({ name: 'x', ttfbMs: -1, bytesPerSec: 0 }));
  t.notOk(validateProfile({ name: 'x', ttfbMs: 0, bytesPerSec: 0 }));
});

t.test('bytes pass through intact on keep-alive connections, each request counted', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket('bench-t');
  const objs = await seedDataset(s3, 'bench-t', 'p/', { largeFiles: { count: 1, size: 3 * 1024 * 1024 + 17 } });
  const proxy = await startLatencyProxy({ name: 't', ttfbMs: 5, bytesPerSec: 50e6, targetPort: s3.port });
  t.teardown(() => proxy.close());
  const pool = new Pool(proxy.endpoint, { connections: 1 });
  t.teardown(() => pool.close());
  const o = objs[0]!;
  const parts: Buffer[] = [];
  const step = 1024 * 1024;
  for (let s = 0; s < o.size; s += step) {
    const res = await pool.request({ method: 'GET', path: `/bench-t/${o.key}`, headers: { range: `bytes=${s}-${Math.min(o.size, s + step) - 1}` } });
    t.equal(res.statusCode, 206);
    parts.push(Buffer.from(await res.body.arrayBuffer()));
  }
  t.equal(createHash('sha256').update(Buffer.concat(parts)).digest('hex'), o.sha256);
  t.equal(proxy.stats.connections, 1, 'one keep-alive connection');
  t.equal(proxy.stats.requests, 4, 'four requests framed');
  t.equal(proxy.stats.objectGets, 4, 'four object GETs');
  // A listing is a GET too, but not an object GET (the disk tier bench counts object GETs).
  const list = await pool.request({ method: 'GET', path: '/bench-t?list-type=2&prefix=p%2F' });
  t.equal(list.statusCode, 200);
  await list.body.arrayBuffer();
  t.equal(proxy.stats.requests, 5);
  t.equal(proxy.stats.objectGets, 4, 'a listing is not counted as an object GET');
});

t.test('a server closing an idle keep-alive connection is hidden from the client', async (t) => {
  // A server that answers one request per connection, then closes it (as Node does after its keep-alive timeout).
  let conns = 0;
  const server = net.createServer((s) => {
    conns++;
    let buf = '';
    s.on('data', (b: Buffer) => {
      buf += b.toString('latin1');
      if (!buf.includes('\r\n\r\n')) return;
      s.end(`HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok`);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => server.close());
  const proxy = await startLatencyProxy({ name: 't', ttfbMs: 1, bytesPerSec: 0, targetPort: (server.address() as net.AddressInfo).port });
  t.teardown(() => proxy.close());
  const c = net.connect(proxy.port, '127.0.0.1');
  t.teardown(() => c.destroy());
  await new Promise((r) => c.once('connect', r));
  let got = '';
  c.on('data', (b: Buffer) => { got += b.toString(); });
  for (let i = 1; i <= 3; i++) {
    c.write('GET /x HTTP/1.1\r\nHost: x\r\n\r\n');
    for (let n = 0; n < 500 && got.split('ok').length - 1 < i; n++) await new Promise((r) => setTimeout(r, 10));
    t.equal(got.split('ok').length - 1, i, `answer ${i} on the same client connection`);
  }
  t.equal(c.destroyed, false, 'the client connection stays open');
  t.ok(conns >= 3, 'the proxy reconnected to the server');
});
