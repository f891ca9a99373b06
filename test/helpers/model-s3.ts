/**
 * A fault-injecting S3-compatible object server on 127.0.0.1 for the model-based test of the
 * read path (issue 43, test/model/): every byte it sends comes from an in-memory model of
 * the objects, every reply is written by hand on a raw TCP socket, so any fault can be put
 * at any byte of any reply.
 *
 * It answers, path-style (/bucket/key), without checking signatures:
 *   ListObjectsV2   GET /bucket?list-type=2 (prefix, delimiter, start-after, max-keys,
 *                   continuation-token);
 *   HEAD            /bucket/key: size, ETag, Last-Modified;
 *   GET             /bucket/key, with or without `Range: bytes=a-b` / `bytes=a-`, honouring
 *                   `If-Match` (412 PreconditionFailed when the ETag is not the current one).
 * Keep-alive is honoured (requests are read one after another on a connection).
 *
 * The model: each key holds its versions, oldest first; `overwrite(key)` adds a version with
 * new bytes (and a new ETag) that becomes the current one. A GET takes the bytes of the version
 * current when its request arrived and streams them to the end, so a GET that drips on keeps
 * serving the old version after an overwrite while every later If-Match GET gets 412.
 *
 * Faults apply to data GETs only (GETs of an object, not listings or HEADs), each to the next
 * N of them (`inject`), or at random with a seeded generator (`chaos`), so that the test's
 * own setup is not disturbed:
 *   503        503 SlowDown;          500  500 InternalError;
 *   403        403 AccessDenied;      404  404 NoSuchKey;
 *   cut        headers and half the body, then FIN;
 *   reset      headers and half the body, then RST;
 *   stall      nothing at all, until the client gives up (or close());
 *   stall-body headers and a third of the body, then nothing;
 *   drip       the body in small pieces, a piece every few ms (a slow GET that keeps making
 *              progress; bounded by DRIP_MAX_MS in all);
 *   dup-cl     two different Content-Length headers, the first 7 bytes short;
 *   bad-status the status line `HTTP/1.1 2061 Partial Content`;
 *   te-gzip    `Transfer-Encoding: gzip, chunked` and the body gzipped, then chunked;
 *   wrong-range a Content-Range and bytes of another range of the same length;
 *   long       Content-Length says fewer bytes than are sent (the rest pollutes the connection);
 *   flood-1xx  a `102 Processing` every FLOOD_PERIOD_MS, never a final reply.
 * `counts` says how many times each fault fired; `gets` how many data GETs came in.
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';

export const FAULTS = ['503', '500', '403', '404', 'cut', 'reset', 'stall', 'stall-body', 'drip', 'dup-cl', 'bad-status', 'te-gzip', 'wrong-range', 'long', 'flood-1xx'] as const;
export type Fault = (typeof FAULTS)[number];

/** A drip sends this many bytes per piece: a few TCP segments, so a read waits on many of them. */
const DRIP_PIECE = 16 * 1024;
/** Pause between two pieces of a drip: far below any --request-timeout the tests use (progress is being made). */
const DRIP_PERIOD_MS = 15;
/** A drip that has run this long sends the rest at once: a read's deadline must allow a slow GET, not an unbounded one. */
export const DRIP_MAX_MS = 1500;
/** Period of the 102 replies of flood-1xx: each alone would reset a no-progress timer of 500 ms or more. */
const FLOOD_PERIOD_MS = 200;

export interface Version { bytes: Buffer; etag: string; lastModified: Date }

export interface ChaosRates {
  /** Probability that a data GET gets a fault, and the faults to draw from (uniformly). */
  p: number;
  faults: readonly Fault[];
}

export interface ModelS3 {
  endpoint: string;
  bucket: string;
  /** Adds a version (the current one from now on). */
  put(key: string, bytes: Buffer): Version;
  /** A new version of `key` with other bytes of the same size (or `size`). */
  overwrite(key: string, size?: number): Version;
  current(key: string): Version;
  /** Every key with its current version. */
  snapshot(): Map<string, Version>;
  /** The next `n` data GETs get `fault`. */
  inject(fault: Fault, n: number): void;
  /** Random faults with a seeded generator (undefined: none); pending `inject`s go first. */
  chaos(rates: ChaosRates | undefined, seed?: number): void;
  /** Drops every pending fault. */
  heal(): void;
  counts: Record<string, number>;
  gets: number;
  /** Called at each data GET's arrival with its number (1, 2, ...), before its fault is drawn. */
  onDataGet?: (n: number, key: string) => void;
  close(): Promise<void>;
}

const NS = 'http://s3.amazonaws.com/doc/2006-03-01/';
const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const byKey = (a: string, b: string) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));

/** xorshift32: deterministic bytes and draws from a seed. */
export function rng(seed: number): () => number {
  let x = (seed >>> 0) || 0x9e3779b9;
  return () => {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    return x / 0x1_0000_0000;
  };
}

export function bytesOf(size: number, seed: number): Buffer {
  const b = Buffer.alloc(size);
  const r = rng(seed);
  let i = 0;
  for (; i + 4 <= size; i += 4) b.writeUInt32LE(Math.floor(r() * 0x1_0000_0000), i);
  for (; i < size; i++) b[i] = Math.floor(r() * 256);
  return b;
}

interface Request { method: string; path: string; query: URLSearchParams; headers: Map<string, string> }

export async function startModelS3(bucket: string): Promise<ModelS3> {
  const objects = new Map<string, Version[]>();
  const pending: Fault[] = [];
  let chaos: ChaosRates | undefined;
  let draw = rng(1);
  let versionSeed = 1;
  let clock = Date.parse('2026-06-01T00:00:00.000Z');
  const sockets = new Set<net.Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const counts: Record<string, number> = {};
  let closed = false;

  const later = (ms: number, fn: () => void) => {
    const t = setTimeout(() => { timers.delete(t); if (!closed) fn(); }, ms);
    timers.add(t);
  };

  const server = net.createServer((sock) => {
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
    sock.on('error', () => undefined);
    let buf = Buffer.alloc(0);
    /** A reply is under way: requests that come meanwhile (pipelined) wait their turn. */
    let busy = false;
    const pump = () => {
      if (busy || sock.destroyed) return;
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buf.subarray(0, end).toString('latin1');
      buf = buf.subarray(end + 4);
      const req = parse(head);
      if (!req) { sock.destroy(); return; }
      busy = true;
      serve(sock, req, () => { busy = false; pump(); });
    };
    sock.on('data', (d: Buffer) => { buf = Buffer.concat([buf, d]); pump(); });
  });

  function parse(head: string): Request | undefined {
    const lines = head.split('\r\n');
    const m = /^([A-Z]+) (\S+) HTTP\/1\.[01]$/.exec(lines[0] ?? '');
    if (!m) return undefined;
    const headers = new Map<string, string>();
    for (const l of lines.slice(1)) {
      const c = l.indexOf(':');
      if (c > 0) headers.set(l.slice(0, c).trim().toLowerCase(), l.slice(c + 1).trim());
    }
    const url = new URL(m[2]!, 'http://x');
    return { method: m[1]!, path: decodeURIComponent(url.pathname), query: url.searchParams, headers };
  }

  function write(sock: net.Socket, status: string, headers: Array<[string, string | number]>, body?: Buffer): void {
    const head = `HTTP/1.1 ${status}\r\n${headers.map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;
    sock.write(body ? Buffer.concat([Buffer.from(head, 'latin1'), body]) : Buffer.from(head, 'latin1'));
  }

  function xmlReply(sock: net.Socket, status: string, xml: string, done: () => void): void {
    const body = Buffer.from(xml, 'utf8');
    write(sock, status, [['Content-Type', 'application/xml'], ['Content-Length', body.length], ['x-amz-request-id', 'model']], body);
    done();
  }

  function s3Error(sock: net.Socket, status: string, code: string, done: () => void): void {
    xmlReply(sock, status, `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${code} (model server)</Message><RequestId>model</RequestId></Error>`, done);
  }

  function list(q: URLSearchParams): string {
    const prefix = q.get('prefix') ?? '';
    const delimiter = q.get('delimiter') ?? '';
    const maxKeys = Math.min(1000, Number(q.get('max-keys') ?? '1000'));
    const token = q.get('continuation-token');
    const after = token !== null ? Buffer.from(token, 'base64').toString('utf8') : q.get('start-after') ?? '';
    const keys = [...objects.keys()].filter((k) => k.startsWith(prefix) && byKey(k, after) > 0).sort(byKey);
    const contents: string[] = [];
    const prefixes = new Set<string>();
    let last = '';
    let n = 0;
    let i = 0;
    for (; i < keys.length && n < maxKeys; i++) {
      const k = keys[i]!;
      const rest = k.slice(prefix.length);
      const cut = delimiter !== '' ? rest.indexOf(delimiter) : -1;
      if (cut >= 0) {
        const p = prefix + rest.slice(0, cut + delimiter.length);
        if (!prefixes.has(p)) { prefixes.add(p); n++; }
        last = k;
        continue;
      }
      const v = objects.get(k)!.at(-1)!;
      contents.push(`<Contents><Key>${esc(k)}</Key><LastModified>${v.lastModified.toISOString()}</LastModified><ETag>${esc(v.etag)}</ETag><Size>${v.bytes.length}</Size><StorageClass>STANDARD</StorageClass></Contents>`);
      last = k;
      n++;
    }
    // Keys after `last` that fall under a prefix already given are not more entries.
    while (i < keys.length && delimiter !== '') {
      const rest = keys[i]!.slice(prefix.length);
      const cut = rest.indexOf(delimiter);
      if (cut < 0 || !prefixes.has(prefix + rest.slice(0, cut + delimiter.length))) break;
      last = keys[i++]!;
    }
    const truncated = i < keys.length;
    return `<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="${NS}"><Name>${esc(bucket)}</Name><Prefix>${esc(prefix)}</Prefix>`
      + `<KeyCount>${n}</KeyCount><MaxKeys>${maxKeys}</MaxKeys>${delimiter !== '' ? `<Delimiter>${esc(delimiter)}</Delimiter>` : ''}<IsTruncated>${truncated}</IsTruncated>`
      + (token !== null ? `<ContinuationToken>${esc(token)}</ContinuationToken>` : '')
      + (truncated ? `<NextContinuationToken>${Buffer.from(last, 'utf8').toString('base64')}</NextContinuationToken>` : '')
      + contents.join('') + [...prefixes].map((p) => `<CommonPrefixes><Prefix>${esc(p)}</Prefix></CommonPrefixes>`).join('')
      + '</ListBucketResult>';
  }

  function nextFault(): Fault | undefined {
    const f = pending.shift();
    if (f !== undefined) return f;
    if (chaos && chaos.faults.length > 0 && draw() < chaos.p) return chaos.faults[Math.floor(draw() * chaos.faults.length)];
    return undefined;
  }

  function serve(sock: net.Socket, req: Request, done: () => void): void {
    const slash = req.path.indexOf('/', 1);
    const b = slash < 0 ? req.path.slice(1) : req.path.slice(1, slash);
    const key = slash < 0 ? '' : req.path.slice(slash + 1);
    if (b !== bucket) return s3Error(sock, '404 Not Found', 'NoSuchBucket', done);
    if (key === '') {
      if (req.method === 'GET' && req.query.get('list-type') === '2') return xmlReply(sock, '200 OK', list(req.query), done);
      if (req.method === 'HEAD') { write(sock, '200 OK', [['Content-Length', 0]]); return done(); }
      return s3Error(sock, '501 Not Implemented', 'NotImplemented', done);
    }
    if (!objects.has(key)) return s3Error(sock, '404 Not Found', 'NoSuchKey', done);
    if (req.method === 'GET') { model.gets++; model.onDataGet?.(model.gets, key); }
    // After onDataGet: an overwrite it makes is this GET's to see.
    const v = objects.get(key)!.at(-1)!;
    const meta: Array<[string, string | number]> = [['ETag', v.etag], ['Last-Modified', v.lastModified.toUTCString()], ['Accept-Ranges', 'bytes'], ['x-amz-request-id', 'model']];
    if (req.method === 'HEAD') { write(sock, '200 OK', [...meta, ['Content-Length', v.bytes.length]]); return done(); }
    if (req.method !== 'GET') return s3Error(sock, '405 Method Not Allowed', 'MethodNotAllowed', done);
    const fault = nextFault();
    if (fault !== undefined) counts[fault] = (counts[fault] ?? 0) + 1;
    if (fault === '503') return s3Error(sock, '503 Slow Down', 'SlowDown', done);
    if (fault === '500') return s3Error(sock, '500 Internal Server Error', 'InternalError', done);
    if (fault === '403') return s3Error(sock, '403 Forbidden', 'AccessDenied', done);
    if (fault === '404') return s3Error(sock, '404 Not Found', 'NoSuchKey', done);
    if (fault === 'stall') return; // never answered: the connection stays busy until the client drops it
    if (fault === 'flood-1xx') {
      const tick = () => { if (!sock.destroyed) { sock.write('HTTP/1.1 102 Processing\r\n\r\n'); later(FLOOD_PERIOD_MS, tick); } };
      return tick();
    }
    const ifMatch = req.headers.get('if-match');
    if (ifMatch !== undefined && ifMatch.replace(/"/g, '') !== v.etag.replace(/"/g, '')) return s3Error(sock, '412 Precondition Failed', 'PreconditionFailed', done);
    const size = v.bytes.length;
    const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.get('range') ?? '');
    let start = 0;
    let end = size; // exclusive
    let status = '200 OK';
    const headers: Array<[string, string | number]> = [...meta];
    if (range) {
      start = Number(range[1]);
      end = Math.min(range[2] === '' ? size : Number(range[2]) + 1, size);
      if (start >= size) return s3Error(sock, '416 Requested Range Not Satisfiable', 'InvalidRange', done);
      status = '206 Partial Content';
      headers.push(['Content-Range', `bytes ${start}-${end - 1}/${size}`]);
    }
    let body = v.bytes.subarray(start, end);
    switch (fault) {
      case 'dup-cl':
        // The first one short: a client that takes the first would end the body early.
        write(sock, status, [...headers, ['Content-Length', Math.max(0, body.length - 7)], ['Content-Length', body.length]], body);
        return done();
      case 'bad-status':
        write(sock, status.replace(/^(\d+)/, '$11'), [...headers, ['Content-Length', body.length]], body);
        return done();
      case 'te-gzip': {
        // Really gzip: a client that reads it as plain chunked gets gzip bytes as object data.
        const z = gzipSync(body);
        const chunk = Buffer.concat([Buffer.from(`${z.length.toString(16)}\r\n`), z, Buffer.from('\r\n0\r\n\r\n')]);
        write(sock, status, [...headers, ['Transfer-Encoding', 'gzip, chunked']], chunk);
        return done();
      }
      case 'wrong-range': {
        if (range && size > body.length) {
          // The same length, shifted: a Content-Range that does not match the ask, and its bytes.
          const s2 = start > 0 ? start - 1 : start + 1;
          body = v.bytes.subarray(s2, s2 + (end - start));
          const h = headers.filter(([k]) => k !== 'Content-Range');
          write(sock, status, [...h, ['Content-Range', `bytes ${s2}-${s2 + body.length - 1}/${size}`], ['Content-Length', body.length]], body);
          return done();
        }
        break;
      }
      case 'long': {
        const extra = Buffer.from('garbage-after-the-body');
        write(sock, status, [...headers, ['Content-Length', body.length]], Buffer.concat([body, extra]));
        return done();
      }
      default:
        break;
    }
    if ((fault === 'cut' || fault === 'reset' || fault === 'stall-body') && body.length >= 2) {
      const part = body.subarray(0, Math.floor(body.length / (fault === 'stall-body' ? 3 : 2)));
      write(sock, status, [...headers, ['Content-Length', body.length]]);
      sock.write(part, () => {
        if (fault === 'reset') sock.resetAndDestroy();
        else if (fault === 'cut') sock.end();
        // stall-body: nothing more; the client's timer must drop the connection.
      });
      return;
    }
    write(sock, status, [...headers, ['Content-Length', body.length]]);
    if (fault !== 'drip') { sock.write(body); return done(); }
    const began = Date.now();
    let off = 0;
    const piece = () => {
      if (sock.destroyed) return;
      if (Date.now() - began > DRIP_MAX_MS) { sock.write(body.subarray(off)); return done(); }
      const n = Math.min(DRIP_PIECE, body.length - off);
      sock.write(body.subarray(off, off + n));
      off += n;
      if (off >= body.length) return done();
      later(DRIP_PERIOD_MS, piece);
    };
    piece();
  }

  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;

  const model: ModelS3 = {
    endpoint: `http://127.0.0.1:${port}`,
    bucket,
    counts,
    gets: 0,
    put(key, bytes) {
      clock += 1000;
      const v: Version = { bytes, etag: `"${createHash('md5').update(bytes).digest('hex')}"`, lastModified: new Date(clock) };
      const list = objects.get(key) ?? [];
      list.push(v);
      objects.set(key, list);
      return v;
    },
    overwrite(key, size) {
      const old = model.current(key);
      return model.put(key, bytesOf(size ?? old.bytes.length, 0x5eed0000 + versionSeed++));
    },
    current(key) {
      const v = objects.get(key)?.at(-1);
      if (!v) throw new Error(`model server: no object ${key}`);
      return v;
    },
    snapshot() {
      return new Map([...objects].map(([k, vs]) => [k, vs.at(-1)!]));
    },
    inject(fault, n) { for (let i = 0; i < n; i++) pending.push(fault); },
    chaos(rates, seed = 1) { chaos = rates; draw = rng(seed); },
    heal() { pending.length = 0; chaos = undefined; },
    async close() {
      if (closed) return;
      closed = true;
      for (const t of timers) clearTimeout(t);
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  return model;
}
