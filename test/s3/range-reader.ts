/**
 * RangeReader against a hand-written HTTP server that misbehaves on purpose: replies that
 * s3rver never sends (200 for a range, wrong Content-Range, wrong length, 412, 416, a short
 * body that ends cleanly). No signing: the reader is given a pass-through signer.
 */
import t from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { RangeReader, normalizeEtag } from '../../src/s3/range-reader.js';
import { addressingFor } from '../../src/s3/addressing.js';
import { BadRangeReplyError, ObjectChangedError, RetriesExhaustedError } from '../../src/errors.js';
import { s3Retries } from '../../src/metrics/metrics.js';

const BODY = Buffer.from(Array.from({ length: 5000 }, (_, i) => (i * 7 + 3) & 0xff));
const ETAG = '"0123456789abcdef0123456789abcdef"';

type Handler = (req: http.IncomingMessage, res: http.ServerResponse, range: [number, number]) => void;
let handler: Handler;
const seen: string[] = [];
const server = http.createServer((req, res) => {
  seen.push(String(req.headers.range));
  const m = /^bytes=(\d+)-(\d+)$/.exec(String(req.headers.range))!;
  handler(req, res, [Number(m[1]), Number(m[2])]);
});
let reader: RangeReader;
let pool: Pool;

/** A correct S3 reply for [a, b]. */
const good: Handler = (_req, res, [a, b]) => {
  res.writeHead(206, { etag: ETAG, 'content-range': `bytes ${a}-${b}/${BODY.length}`, 'content-length': b - a + 1 });
  res.end(BODY.subarray(a, b + 1));
};

t.before(async () => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const addressing = addressingFor('bkt', endpoint, 'us-east-1', true);
  pool = new Pool(addressing.origin, { connections: 2 });
  reader = new RangeReader({ bucket: 'bkt', addressing, pool: () => pool, sign: async (_p, h) => h, maxAttempts: 3, requestTimeoutMs: 10_000 });
});
t.teardown(async () => {
  await pool.close();
  await new Promise<void>((r) => server.close(() => r()));
});
t.beforeEach(() => { seen.length = 0; handler = good; });

t.test('a correct 206 reply, and If-Match is sent', async (t) => {
  let ifMatch: string | undefined;
  handler = (req, res, r) => { ifMatch = req.headers['if-match'] as string; good(req, res, r); };
  t.ok((await reader.getRange('k', 10, 4000, ETAG)).equals(BODY.subarray(10, 4000)));
  t.equal(ifMatch, ETAG);
  t.same(seen, ['bytes=10-3999']);
});

t.test('200 with the whole object: exactly the asked bytes are taken', async (t) => {
  handler = (_req, res) => { res.writeHead(200, { etag: ETAG, 'content-length': BODY.length }); res.end(BODY); };
  t.ok((await reader.getRange('k', 0, 1, ETAG)).equals(BODY.subarray(0, 1)), 'bytes=0-0');
  t.ok((await reader.getRange('k', 1234, 2345, ETAG)).equals(BODY.subarray(1234, 2345)), 'middle');
  t.ok((await reader.getRange('k', 4999, 5000, ETAG)).equals(BODY.subarray(4999)), 'last byte');
});

t.test('206 covering more than asked (s3rver for bytes=0-0) is sliced', async (t) => {
  handler = (_req, res) => {
    res.writeHead(206, { etag: ETAG, 'content-range': `bytes 0-4999/5000`, 'content-length': 5000 });
    res.end(BODY);
  };
  t.ok((await reader.getRange('k', 0, 1, ETAG)).equals(BODY.subarray(0, 1)));
  t.ok((await reader.getRange('k', 100, 200, ETAG)).equals(BODY.subarray(100, 200)));
});

t.test('replies that cannot be trusted give BadRangeReplyError', async (t) => {
  const cases: [string, Handler][] = [
    ['Content-Range elsewhere', (_q, res, [a, b]) => { res.writeHead(206, { etag: ETAG, 'content-range': `bytes ${a + 1}-${b}/5000`, 'content-length': b - a }); res.end(BODY.subarray(a + 1, b + 1)); }],
    ['Content-Range short', (_q, res, [a, b]) => { res.writeHead(206, { etag: ETAG, 'content-range': `bytes ${a}-${b - 1}/5000`, 'content-length': b - a }); res.end(BODY.subarray(a, b)); }],
    ['no Content-Range', (_q, res, [a, b]) => { res.writeHead(206, { etag: ETAG, 'content-length': b - a + 1 }); res.end(BODY.subarray(a, b + 1)); }],
    ['Content-Length disagrees', (_q, res, [a, b]) => { res.writeHead(206, { etag: ETAG, 'content-range': `bytes ${a}-${b}/5000`, 'content-length': b - a }); res.end(BODY.subarray(a, b)); }],
    ['200 shorter than the range', (_q, res) => { res.writeHead(200, { etag: ETAG, 'content-length': 100 }); res.end(BODY.subarray(0, 100)); }],
    ['204', (_q, res) => { res.writeHead(204, { etag: ETAG }); res.end(); }],
    ['416', (_q, res) => { res.writeHead(416, { 'content-type': 'application/xml' }); res.end('<Error><Code>InvalidRange</Code></Error>'); }],
  ];
  for (const [name, h] of cases) {
    handler = h;
    await t.rejects(reader.getRange('k', 100, 300, ETAG), BadRangeReplyError, name);
  }
});

t.test('412 and a different ETag give ObjectChangedError', async (t) => {
  handler = (_q, res) => { res.writeHead(412, { 'content-type': 'application/xml' }); res.end('<Error><Code>PreconditionFailed</Code></Error>'); };
  await t.rejects(reader.getRange('k', 0, 10, ETAG), ObjectChangedError);
  handler = (_q, res, [a, b]) => { res.writeHead(206, { etag: '"ffff"', 'content-range': `bytes ${a}-${b}/5000`, 'content-length': b - a + 1 }); res.end(BODY.subarray(a, b + 1)); };
  const err = await reader.getRange('k', 0, 10, ETAG).catch((e: unknown) => e);
  t.type(err, ObjectChangedError);
  t.equal((err as ObjectChangedError).actualEtag, '"ffff"');
  handler = (req, res, r) => { res.setHeader('etag', `W/${ETAG}`); good(req, res, r); };
  t.ok((await reader.getRange('k', 0, 10, ETAG)).equals(BODY.subarray(0, 10)), 'a weak form of the same ETag is the same');
  t.equal(normalizeEtag('W/"abc"'), 'abc');
});

t.test('a body that ends short is completed by asking for the remainder', async (t) => {
  let n = 0;
  handler = (req, res, [a, b]) => {
    if (n++ > 0) return good(req, res, [a, b]);
    res.writeHead(206, { etag: ETAG, 'content-range': `bytes ${a}-${b}/5000`, 'content-length': b - a + 1 });
    res.write(BODY.subarray(a, a + 700), () => res.socket!.end());
  };
  const before = (await s3Retries.get()).values.filter((v) => v.labels.reason === 'short_body').reduce((x, v) => x + v.value, 0);
  t.ok((await reader.getRange('k', 100, 3100, ETAG)).equals(BODY.subarray(100, 3100)), 'exact bytes');
  t.same(seen, ['bytes=100-3099', 'bytes=800-3099'], 'the second request asks only for the rest');
  const after = (await s3Retries.get()).values.filter((v) => v.labels.reason === 'short_body').reduce((x, v) => x + v.value, 0);
  t.equal(after - before, 1, 'counted as short_body');
});

t.test('getRange into a caller\'s buffer fills that very buffer, also across a retried short body', async (t) => {
  const into = Buffer.alloc(3990, 0xee);
  const out = await reader.getRange('k', 10, 4000, ETAG, undefined, into);
  t.equal(out, into, 'the same buffer comes back');
  t.ok(into.equals(BODY.subarray(10, 4000)));
  let first = true;
  handler = (req, res, [a, b]) => {
    if (!first) return good(req, res, [a, b]);
    first = false;
    res.writeHead(206, { etag: ETAG, 'content-range': `bytes ${a}-${b}/${BODY.length}`, 'content-length': b - a + 1 });
    res.write(BODY.subarray(a, a + 1000));
    res.destroy(); // a reset after 1,000 bytes: the remainder is asked for and lands after them
  };
  into.fill(0xee);
  t.ok((await reader.getRange('k', 10, 4000, ETAG, undefined, into)).equals(BODY.subarray(10, 4000)));
  await t.rejects(reader.getRange('k', 10, 4000, ETAG, undefined, Buffer.alloc(10)), RangeError, 'a buffer of the wrong size is refused');
});

t.test('500s are retried; too many give RetriesExhaustedError', async (t) => {
  let n = 0;
  handler = (req, res, r) => {
    if (n++ < 2) { res.writeHead(500, { 'content-type': 'application/xml' }); res.end('<Error><Code>InternalError</Code><Message>oops</Message></Error>'); return; }
    good(req, res, r);
  };
  t.ok((await reader.getRange('k', 0, 50, ETAG)).equals(BODY.subarray(0, 50)));
  handler = (_q, res) => { res.writeHead(503, {}); res.end(); };
  const err = await reader.getRange('k', 0, 50, ETAG).catch((e: unknown) => e);
  t.type(err, RetriesExhaustedError);
  t.equal((err as RetriesExhaustedError).attempts, 3);
});

t.test('a consumer that stops early releases the request', async (t) => {
  let got = 0;
  for await (const chunk of reader.read('k', 0, 5000, ETAG)) { got += chunk.length; break; }
  t.ok(got > 0);
  t.ok((await reader.getRange('k', 0, 5000, ETAG)).equals(BODY), 'the pool still works');
});

t.test('the watchdog: a consumer holding a chunk is not a stall; a body that stops is, and resumes', async (t) => {
  const quick = new RangeReader({ bucket: 'bkt', addressing: addressingFor('bkt', `http://127.0.0.1:${(server.address() as AddressInfo).port}`, 'us-east-1', true), pool: () => pool, sign: async (_p, h) => h, maxAttempts: 3, requestTimeoutMs: 400 });
  const timeouts = async () => (await s3Retries.get()).values.filter((v) => v.labels.reason === 'timeout').reduce((x, v) => x + v.value, 0);
  const before = await timeouts();
  handler = (_req, res, [a, b]) => {
    res.writeHead(206, { etag: ETAG, 'content-range': `bytes ${a}-${b}/${BODY.length}`, 'content-length': b - a + 1 });
    res.write(BODY.subarray(a, a + 1000));
    // The rest comes 0.1 s after the consumer lets go of its first chunk: the attempt is still open while it holds it.
    setTimeout(() => res.end(BODY.subarray(a + 1000, b + 1)), 1000);
  };
  const parts: Buffer[] = [];
  for await (const chunk of quick.read('k', 0, 5000, ETAG)) {
    parts.push(chunk);
    if (parts.length === 1) await new Promise((r) => setTimeout(r, 900)); // twice the timeout
  }
  t.ok(Buffer.concat(parts).equals(BODY), 'exact bytes');
  t.same(seen, ['bytes=0-4999'], 'one request: holding a chunk did not abort it');
  t.equal(await timeouts(), before, 'no timeout counted');

  seen.length = 0;
  handler = good;
  let first = true;
  handler = (req, res, [a, b]) => {
    if (!first) return good(req, res, [a, b]);
    first = false;
    res.writeHead(206, { etag: ETAG, 'content-range': `bytes ${a}-${b}/${BODY.length}`, 'content-length': b - a + 1 });
    res.write(BODY.subarray(a, a + 1000)); // then nothing: a stalled body
  };
  const t0 = Date.now();
  t.ok((await quick.getRange('k', 0, 5000, ETAG)).equals(BODY), 'exact bytes after the stall');
  t.same(seen, ['bytes=0-4999', 'bytes=1000-4999'], 'the stalled attempt was aborted and only the rest asked for');
  t.equal(await timeouts(), before + 1, 'counted as a timeout');
  t.ok(Date.now() - t0 >= 350, 'not before the timeout');
});
