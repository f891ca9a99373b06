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
 *
 * Listings and HEADs of the source bucket have their own queue (`metaInject`), so that a
 * program can fault what a mount does at start-up (its listing) and on a lookup of a path it
 * has not listed (HEAD), without touching data GETs: 503, 500, cut (headers and half the
 * XML body, then FIN), reset (the same, then RST), stall (no answer), and trunc-xml (a listing
 * whose XML ends early, framed right: a 200 with a complete Content-Length that a parser must
 * refuse, never read as a shorter listing). `metaCounts` says how many fired.
 *
 * The cache bucket (--cache-bucket, src/cache/cache-bucket.ts), when `cacheBucket` is named: a
 * second bucket of plain objects, no versions, answering whole-object GET and HEAD, and PUT (a
 * Content-Length body, after `100 Continue` when asked). It is not part of the reference model:
 * whatever it holds or serves, a read must return the listed version's bytes. Its own faults,
 * queued (`cacheInject`) or drawn (`cacheChaos`), never touch the source's:
 *   GET  get-500 (500 InternalError), get-stall (no answer), get-404 (NoSuchKey), flip (a byte
 *        of the body flipped), truncate (a shorter body, framed right), foreign (the body of
 *        another stored cache object: another block, or another version of the same block);
 *   PUT  put-500 (the body read, then 500), put-stall (the body read, then no answer).
 * `cacheMutate` changes a stored cache object in place (the same, plus delete). Every PUT is
 * checked as it lands (`cachePutViolations`): its header's identity (JSON [namespace, key, ETag,
 * version id, block, block size]) names a version the server served, its data are that version's
 * bytes of that block, and a cache key never carries two identities (the key includes the ETag).
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';

export const FAULTS = ['503', '500', '403', '404', 'cut', 'reset', 'stall', 'stall-body', 'drip', 'dup-cl', 'bad-status', 'te-gzip', 'wrong-range', 'long', 'flood-1xx'] as const;
export type Fault = (typeof FAULTS)[number];
export const META_FAULTS = ['503', '500', 'cut', 'reset', 'stall', 'trunc-xml'] as const;
export type MetaFault = (typeof META_FAULTS)[number];

/** A drip sends this many bytes per piece: a few TCP segments, so a read waits on many of them. */
const DRIP_PIECE = 16 * 1024;
/** Pause between two pieces of a drip: far below any --request-timeout the tests use (progress is being made). */
const DRIP_PERIOD_MS = 15;
/** A drip that has run this long sends the rest at once: a read's deadline must allow a slow GET, not an unbounded one. */
export const DRIP_MAX_MS = 1500;
/** Period of the 102 replies of flood-1xx: each alone would reset a no-progress timer of 500 ms or more. */
const FLOOD_PERIOD_MS = 200;

export interface Version { bytes: Buffer; etag: string; lastModified: Date }

export const CACHE_GET_FAULTS = ['get-500', 'get-stall', 'get-404', 'flip', 'truncate', 'foreign'] as const;
export const CACHE_PUT_FAULTS = ['put-500', 'put-stall'] as const;
export const CACHE_FAULTS = [...CACHE_GET_FAULTS, ...CACHE_PUT_FAULTS] as const;
export type CacheFault = (typeof CACHE_FAULTS)[number];
/** What `cacheMutate` does to a stored cache object. */
export const CACHE_MUTATIONS = ['flip', 'truncate', 'foreign', 'delete'] as const;
export type CacheMutation = (typeof CACHE_MUTATIONS)[number];
/** A cache object's data start after its 24-byte header and its identity (src/cache/cache-bucket.ts). */
const CACHE_HEADER = 24;
/** A flip of every FLIP_SPAN bytes: 16 in a 1 MiB block, one in every 64 KiB a reader may ask for. */
const FLIP_SPAN = 64 * 1024;

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
  /** The next `n` listings or HEADs of the source bucket get `fault`. */
  metaInject(fault: MetaFault, n: number): void;
  /** The data-GET faults still queued (not met by a GET yet). */
  pendingFaults(): Fault[];
  /** Drops the metadata faults still queued. */
  metaHeal(): void;
  metaCounts: Record<string, number>;
  /** Drops every pending fault (data and metadata). */
  heal(): void;
  counts: Record<string, number>;
  gets: number;
  /** Called at each data GET's arrival with its number (1, 2, ...), before its fault is drawn. */
  onDataGet?: (n: number, key: string) => void;
  /** The cache bucket's name ('' without one). */
  cacheBucket: string;
  /** The next `n` cache GETs (get-*, flip, truncate, foreign) or PUTs (put-*) get `fault`. */
  cacheInject(fault: CacheFault, n: number): void;
  /** Random cache faults (probability `p` per cache request, drawn from those of its kind); undefined: none. */
  cacheChaos(p: number | undefined, seed?: number): void;
  /** Cache faults queued or drawn: a read now may meet one. */
  cacheFaultsOn(): boolean;
  /**
   * Foreign bodies are taken from the blocks of `sourceKey` (of any version: the old ones, when
   * the GET is for a new version's block), the same block first; undefined: from any object.
   */
  cacheStale(sourceKey: string | undefined): void;
  /** Changes the `pick`-th stored cache object (in key order); false when there is none. */
  cacheMutate(how: CacheMutation, pick: number): boolean;
  /** The cache bucket's keys. */
  cacheKeys(): string[];
  /** The cache bucket's stored bodies that hold `bytes` at some offset of their data (diagnostics of a wrong read). */
  cacheHolding(bytes: Buffer): string[];
  cacheCounts: Record<string, number>;
  cacheGets: number;
  /** Cache GETs answered with a body (a stored object, or a damaged or foreign one). */
  cacheServed: number;
  cachePuts: number;
  /** What the PUT checks found wrong (empty when every PUT carried true bytes). */
  cachePutViolations: string[];
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

interface Request { method: string; path: string; query: URLSearchParams; headers: Map<string, string>; body?: Buffer }

export async function startModelS3(bucket: string, cacheBucket = ''): Promise<ModelS3> {
  const objects = new Map<string, Version[]>();
  const cache = new Map<string, Buffer>();
  /** The identity each cache key was PUT with (a key with two identities would mix versions). */
  const cacheIdentity = new Map<string, string>();
  const cachePending: { get: CacheFault[]; put: CacheFault[] } = { get: [], put: [] };
  let cacheP: number | undefined;
  let cacheDraw = rng(1);
  const cacheCounts: Record<string, number> = {};
  /** `cacheStale`: foreign bodies are this source object's blocks (its other versions'). */
  let staleOf: string | undefined;
  const pending: Fault[] = [];
  const metaPending: MetaFault[] = [];
  const metaCounts: Record<string, number> = {};
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
    /** A PUT waiting for the rest of its body: called as bytes come, true once it has it. */
    let bodyWait: (() => boolean) | undefined;
    const pump = () => {
      if (busy || sock.destroyed) return;
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buf.subarray(0, end).toString('latin1');
      buf = buf.subarray(end + 4);
      const req = parse(head);
      if (!req) { sock.destroy(); return; }
      busy = true;
      const length = Number(req.headers.get('content-length') ?? '0');
      if (req.method === 'PUT' && length > 0) {
        // A body follows (a cache PUT): wait for all of it, after `100 Continue` when asked.
        if (!Number.isSafeInteger(length) || req.headers.has('transfer-encoding')) { sock.destroy(); return; }
        if (/100-continue/i.test(req.headers.get('expect') ?? '')) sock.write('HTTP/1.1 100 Continue\r\n\r\n');
        const take = () => {
          if (buf.length < length) return false;
          req.body = Buffer.from(buf.subarray(0, length));
          buf = buf.subarray(length);
          serve(sock, req, () => { busy = false; pump(); });
          return true;
        };
        if (!take()) bodyWait = take;
        return;
      }
      serve(sock, req, () => { busy = false; pump(); });
    };
    sock.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (bodyWait) { if (!bodyWait()) return; bodyWait = undefined; }
      pump();
    });
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

  /**
   * A listing or HEAD reply, unless a metadata fault is queued: then the fault instead (true).
   * `body` is the reply's XML (a listing) or undefined (a HEAD: headers only).
   */
  function metaFault(sock: net.Socket, xml: string | undefined, done: () => void): boolean {
    const fault = metaPending.shift();
    if (fault === undefined) return false;
    metaCounts[fault] = (metaCounts[fault] ?? 0) + 1;
    if (fault === 'stall') return true;
    if (fault === '503') { s3Error(sock, '503 Slow Down', 'SlowDown', done); return true; }
    if (fault === '500') { s3Error(sock, '500 Internal Server Error', 'InternalError', done); return true; }
    const body = Buffer.from(xml ?? '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>Cut</Code></Error>', 'utf8');
    if (fault === 'trunc-xml') {
      // A whole, well-framed 200 whose XML stops half-way (a HEAD has no body: it gets a cut instead).
      if (xml !== undefined) { xmlReply(sock, '200 OK', xml.slice(0, Math.floor(xml.length / 2)), done); return true; }
    }
    write(sock, '200 OK', [['Content-Type', 'application/xml'], ['Content-Length', body.length], ['x-amz-request-id', 'model']], body.subarray(0, Math.floor(body.length / 2)));
    if (fault === 'reset') sock.resetAndDestroy();
    else sock.end();
    return true;
  }

  function nextFault(): Fault | undefined {
    const f = pending.shift();
    if (f !== undefined) return f;
    if (chaos && chaos.faults.length > 0 && draw() < chaos.p) return chaos.faults[Math.floor(draw() * chaos.faults.length)];
    return undefined;
  }

  function nextCacheFault(kind: 'get' | 'put'): CacheFault | undefined {
    const f = cachePending[kind].shift();
    if (f !== undefined) return f;
    const pool: readonly CacheFault[] = kind === 'get' ? CACHE_GET_FAULTS : CACHE_PUT_FAULTS;
    if (cacheP !== undefined && cacheDraw() < cacheP) return pool[Math.floor(cacheDraw() * pool.length)];
    return undefined;
  }

  /**
   * The body of another stored cache object than `key`: the same block of another version of the
   * same source object first (what a key without the ETag would find), else the same block of
   * another object, else any other block.
   */
  function foreignOf(key: string, pick: number): Buffer | undefined {
    const block = key.slice(key.lastIndexOf('/') + 1);
    const others = [...cache.keys()].filter((k) => k !== key).sort();
    if (others.length === 0) return undefined;
    const sameBlock = others.filter((k) => k.slice(k.lastIndexOf('/') + 1) === block);
    const source = staleOf ?? sourceOf(key);
    const sameObject = source !== undefined ? sameBlock.filter((k) => sourceOf(k) === source) : [];
    const pool = sameObject.length > 0 ? sameObject : sameBlock.length > 0 ? sameBlock : others;
    return cache.get(pool[pick % pool.length]!);
  }

  /** The source key a cache key was PUT for (its identity's), when it was PUT. */
  function sourceOf(cacheKey: string): string | undefined {
    const id = cacheIdentity.get(cacheKey);
    try { return id !== undefined ? String((JSON.parse(id) as unknown[])[1]) : undefined; } catch { return undefined; }
  }


  /**
   * `body` with bytes flipped in the data when there are data (the header has its own CRC): one
   * byte (odd `pick`), or one in every FLIP_SPAN (even `pick`: a read of any part of the block
   * meets one, so a check that is skipped shows in whatever range is read).
   */
  function flipped(body: Buffer, pick: number): Buffer {
    const out = Buffer.from(body);
    if (out.length === 0) return out;
    const data = out.length >= CACHE_HEADER && CACHE_HEADER + out.readUInt32LE(8) < out.length ? CACHE_HEADER + out.readUInt32LE(8) : 0;
    const n = out.length - data;
    const first = data + (pick % n);
    out[first] = out[first]! ^ 0x20;
    if (pick % 2 === 0) for (let at = data + ((pick >>> 1) % FLIP_SPAN); at < out.length; at += FLIP_SPAN) if (at !== first) out[at] = out[at]! ^ 0x20;
    return out;
  }

  /** A PUT's body checked against the model: see the module's comment. */
  function checkPut(key: string, body: Buffer): void {
    const bad = (why: string) => { if (model.cachePutViolations.length < 20) model.cachePutViolations.push(`PUT ${key}: ${why}`); };
    if (body.length < CACHE_HEADER) return bad(`${body.length} bytes, shorter than a header`);
    const idLen = body.readUInt32LE(8);
    const n = body.readUInt32LE(12);
    if (CACHE_HEADER + idLen + n !== body.length) return bad('lengths do not add up');
    const identity = body.toString('utf8', CACHE_HEADER, CACHE_HEADER + idLen);
    const before = cacheIdentity.get(key);
    if (before !== undefined && before !== identity) bad(`the key was PUT before with identity ${before}, now ${identity}`);
    cacheIdentity.set(key, identity);
    let id: unknown[];
    try { id = JSON.parse(identity) as unknown[]; } catch { return bad(`identity is not JSON: ${identity.slice(0, 200)}`); }
    const [, srcKey, etag, , index, blockSize] = id as [string, string, string, string | null, number, number];
    const v = objects.get(srcKey)?.find((x) => x.etag === etag);
    if (!v) return bad(`identity ${identity} names no version of the source`);
    const data = body.subarray(CACHE_HEADER + idLen);
    const want = v.bytes.subarray(index * blockSize, index * blockSize + n);
    if (want.length !== n || !data.equals(want)) bad(`data (${n} bytes) are not the bytes of block ${index} of ${srcKey} ${etag}`);
  }

  function serveCache(sock: net.Socket, req: Request, key: string, done: () => void): void {
    if (key === '') {
      if (req.method === 'HEAD') { write(sock, '200 OK', [['Content-Length', 0]]); return done(); }
      return s3Error(sock, '501 Not Implemented', 'NotImplemented', done);
    }
    if (req.method === 'PUT') {
      model.cachePuts++;
      const fault = nextCacheFault('put');
      if (fault !== undefined) cacheCounts[fault] = (cacheCounts[fault] ?? 0) + 1;
      const body = req.body ?? Buffer.alloc(0);
      if (fault === 'put-stall') return; // the body was taken; no answer until the client gives up
      if (fault === 'put-500') return s3Error(sock, '500 Internal Server Error', 'InternalError', done);
      checkPut(key, body);
      cache.set(key, body);
      const etag = `"${createHash('md5').update(body).digest('hex')}"`;
      write(sock, '200 OK', [['ETag', etag], ['Content-Length', 0], ['x-amz-request-id', 'model']]);
      return done();
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') return s3Error(sock, '405 Method Not Allowed', 'MethodNotAllowed', done);
    let body = cache.get(key);
    if (req.method === 'HEAD') {
      if (!body) { write(sock, '404 Not Found', [['Content-Length', 0]]); return done(); }
      write(sock, '200 OK', [['ETag', `"${createHash('md5').update(body).digest('hex')}"`], ['Content-Length', body.length], ['x-amz-request-id', 'model']]);
      return done();
    }
    model.cacheGets++;
    let fault = nextCacheFault('get');
    const pick = Math.floor(cacheDraw() * 0x7fff_ffff);
    // A foreign object is served for a key not stored too (a key without the ETag would find the old version's).
    const foreign = fault === 'foreign' ? foreignOf(key, pick) : undefined;
    if (!body && ((fault === 'foreign' && !foreign) || fault === 'flip' || fault === 'truncate')) {
      // Nothing to damage: the fault waits for a GET that has a body.
      cachePending.get.unshift(fault!);
      fault = undefined;
    }
    if (fault !== undefined) cacheCounts[fault] = (cacheCounts[fault] ?? 0) + 1;
    if (fault === 'get-stall') return;
    if (fault === 'get-500') return s3Error(sock, '500 Internal Server Error', 'InternalError', done);
    if (fault === 'foreign') body = foreign!;
    if (fault === 'get-404' || !body) return s3Error(sock, '404 Not Found', 'NoSuchKey', done);
    model.cacheServed++;
    if (fault === 'flip') body = flipped(body, pick);
    if (fault === 'truncate') body = body.subarray(0, Math.floor(body.length * cacheDraw()));
    write(sock, '200 OK', [['ETag', `"${createHash('md5').update(body).digest('hex')}"`], ['Content-Type', 'application/octet-stream'], ['Content-Length', body.length], ['x-amz-request-id', 'model']], body);
    done();
  }

  function serve(sock: net.Socket, req: Request, done: () => void): void {
    const slash = req.path.indexOf('/', 1);
    const b = slash < 0 ? req.path.slice(1) : req.path.slice(1, slash);
    const key = slash < 0 ? '' : req.path.slice(slash + 1);
    if (cacheBucket !== '' && b === cacheBucket) return serveCache(sock, req, key, done);
    if (b !== bucket) return s3Error(sock, '404 Not Found', 'NoSuchBucket', done);
    if (key === '') {
      if (req.method === 'GET' && req.query.get('list-type') === '2') {
        const xml = list(req.query);
        if (metaFault(sock, xml, done)) return;
        return xmlReply(sock, '200 OK', xml, done);
      }
      if (req.method === 'HEAD') { write(sock, '200 OK', [['Content-Length', 0]]); return done(); }
      return s3Error(sock, '501 Not Implemented', 'NotImplemented', done);
    }
    if (req.method === 'HEAD' && metaFault(sock, undefined, done)) return;
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
    metaInject(fault, n) { for (let i = 0; i < n; i++) metaPending.push(fault); },
    metaHeal() { metaPending.length = 0; },
    pendingFaults() { return [...pending]; },
    metaCounts,
    heal() { pending.length = 0; metaPending.length = 0; chaos = undefined; },
    cacheBucket,
    cacheCounts,
    cacheGets: 0,
    cacheServed: 0,
    cachePuts: 0,
    cachePutViolations: [],
    cacheInject(fault, n) {
      const q = (CACHE_PUT_FAULTS as readonly string[]).includes(fault) ? cachePending.put : cachePending.get;
      for (let i = 0; i < n; i++) q.push(fault);
    },
    cacheChaos(p, seed = 1) { cacheP = p; cacheDraw = rng(seed); },
    cacheStale(sourceKey) { staleOf = sourceKey; },
    cacheFaultsOn() { return cachePending.get.length > 0 || cachePending.put.length > 0 || (cacheP ?? 0) > 0; },
    cacheMutate(how, pick) {
      const keys = [...cache.keys()].sort();
      if (keys.length === 0) return false;
      const key = keys[pick % keys.length]!;
      const body = cache.get(key)!;
      if (how === 'delete') cache.delete(key);
      else if (how === 'flip') cache.set(key, flipped(body, pick));
      else if (how === 'truncate') cache.set(key, body.subarray(0, Math.floor(body.length * ((pick % 97) / 97))));
      else cache.set(key, foreignOf(key, pick) ?? flipped(body, pick));
      return true;
    },
    cacheKeys() { return [...cache.keys()].sort(); },
    cacheHolding(bytes) {
      if (bytes.length === 0) return [];
      return [...cache].filter(([, b]) => b.length >= CACHE_HEADER && b.subarray(CACHE_HEADER + b.readUInt32LE(8)).includes(bytes)).map(([k]) => k);
    },
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
