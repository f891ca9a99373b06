/**
 * src/s3/reply-parser.ts, case by case (the fuzzer, test/fuzz/http-reply.ts, covers the
 * rules at random and at every read boundary): fields combined or refused, Connection as a
 * token list, interim replies reported, trailers read and dropped, a body landed in place,
 * bytes after a reply, and a cut reply at the connection's end.
 */
import t from 'tap';
import { HttpProtocolError } from '../../src/errors.js';
import { MAX_INTERIM_REPLIES, ParseState, ReplyParser, type ReplyHeaders } from '../../src/s3/reply-parser.js';

function parser() {
  const seen = { interim: 0, status: 0, headers: {} as ReplyHeaders, body: '', complete: 0, extra: false, error: undefined as Error | undefined };
  const p = new ReplyParser({
    onInterim: () => { seen.interim++; },
    onHeaders: (s, h) => { seen.status = s; seen.headers = h; },
    onBody: (c) => { seen.body += c.toString('latin1'); },
    onComplete: (extra) => { seen.complete++; seen.extra = extra; },
    onError: (e) => { seen.error = e; },
  });
  p.reset();
  const feed = (s: string) => p.feed(Buffer.from(s, 'latin1'), 0, Buffer.byteLength(s, 'latin1'));
  return { p, seen, feed };
}

t.test('repeated fields: lists combined, singletons kept once when identical, refused when not', async (t) => {
  const a = parser();
  a.feed('HTTP/1.1 200 OK\r\nX-L: a\r\nx-l: b\r\nETag: "e"\r\nETag: "e"\r\nContent-Length: 0\r\n\r\n');
  t.equal(a.seen.headers['x-l'], 'a, b');
  t.equal(a.seen.headers['etag'], '"e"');
  t.equal(a.seen.complete, 1);
  const b = parser();
  b.feed('HTTP/1.1 206 Partial\r\nContent-Range: bytes 0-1/9\r\nContent-Range: bytes 2-3/9\r\nContent-Length: 2\r\n\r\nab');
  t.type(b.seen.error, HttpProtocolError, 'two different Content-Range fields');
  t.equal(b.seen.body, '', 'no body byte');
});

t.test('Connection is a token list; HTTP/1.0 keeps alive only when asked', async (t) => {
  for (const [v, conn, keep] of [['1.1', 'close, TE', false], ['1.1', 'TE,close', false], ['1.1', 'TE', true], ['1.1', undefined, true], ['1.0', undefined, false], ['1.0', 'Keep-Alive', true]] as const) {
    const x = parser();
    x.feed(`HTTP/${v} 200 OK\r\n${conn !== undefined ? `Connection: ${conn}\r\n` : ''}Content-Length: 1\r\n\r\n!`);
    t.equal(x.p.keepAlive, keep, `HTTP/${v} Connection: ${conn}`);
  }
  const split = parser();
  split.feed('HTTP/1.1 200 OK\r\nConnection: TE\r\nConnection: close\r\nContent-Length: 1\r\n\r\n!');
  t.equal(split.p.keepAlive, false, 'close on a second Connection line');
});

t.test('interim replies are reported, bounded, and 101 is refused', async (t) => {
  const x = parser();
  x.feed('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
  t.equal(x.seen.interim, 2);
  t.equal(x.seen.body, 'ok');
  const y = parser();
  y.feed('HTTP/1.1 103 Early Hints\r\n\r\n'.repeat(MAX_INTERIM_REPLIES + 1));
  t.type(y.seen.error, HttpProtocolError, `more than ${MAX_INTERIM_REPLIES}`);
  t.equal(y.seen.interim, MAX_INTERIM_REPLIES);
  const z = parser();
  z.feed('HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n');
  t.type(z.seen.error, HttpProtocolError, '101');
});

t.test('chunked: extensions ignored, trailers read and dropped', async (t) => {
  const x = parser();
  x.feed('HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n3;a=b\r\nabc\r\n0\r\nx-amz-checksum-crc32: AAAAAA==\r\n\r\n');
  t.equal(x.seen.body, 'abc');
  t.equal(x.seen.complete, 1);
  t.equal(x.seen.headers['x-amz-checksum-crc32'], undefined, 'a trailer is not a header');
});

t.test('a Content-Length body landed in place; a cut reply is not complete at the end', async (t) => {
  const x = parser();
  x.feed('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n');
  t.equal(x.p.state, ParseState.Length);
  t.equal(x.p.remaining, 10);
  x.p.landed(4);
  t.equal(x.seen.complete, 0);
  x.p.landed(6);
  t.equal(x.seen.complete, 1, 'complete when the last byte landed');
  const cut = parser();
  cut.feed('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc');
  t.equal(cut.p.eof(), false, 'a cut Content-Length body');
  const close = parser();
  close.feed('HTTP/1.1 200 OK\r\n\r\nabc');
  t.equal(close.p.eof(), true, 'a close-delimited body ends with the connection');
  t.equal(close.seen.body, 'abc');
  t.equal(close.p.keepAlive, false);
});

t.test('bytes after a reply: in the same read they drop keep-alive, in a later read they are refused', async (t) => {
  const x = parser();
  x.feed('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n');
  t.equal(x.seen.complete, 1);
  t.equal(x.seen.extra, true);
  t.equal(x.p.keepAlive, false);
  const y = parser();
  y.feed('HTTP/1.1 204 No Content\r\n\r\n');
  t.equal(y.seen.complete, 1);
  t.equal(y.feed('junk'), false, 'refused');
});
