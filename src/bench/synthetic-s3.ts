/**
 * A synthetic S3 on 127.0.0.1 whose objects are a formula, so that millions of objects
 * cost no disk and no memory per object (issue 46: the listing cost curve).
 *
 * The objects: `total` keys, object k (0 <= k < total) being
 *   folders layout:  ROOT + "f" + pad(k / perFolder) + "/o" + pad(k % perFolder)
 *   flat layout:     ROOT + "o" + pad(k)
 * with fixed-width zero padding, so that key order (UTF-8 bytes, as S3 sorts) is index
 * order. Every key question is then a binary search over k on key(k): the first key after
 * a StartAfter, the keys under a Prefix (a contiguous index range), whether a key exists
 * (HEAD, GET), and, for a Delimiter listing, the first key past a CommonPrefix (so a page
 * of folders costs 1,000 binary searches, not a walk over their objects). Size, ETag and
 * bytes are functions of k: byte i of object k is (seed(k) + i * 131) & 0xff.
 *
 * It answers what sluice, rclone and the AWS SDK ask of a bucket: ListObjectsV2 (prefix,
 * delimiter, start-after, continuation-token, max-keys, CommonPrefixes; XML as S3 writes it),
 * ListObjects (v1: marker), HEAD and GET (ranged) of an object with ETag and Last-Modified,
 * If-Match (412 on a mismatch), HEAD of the bucket, GetBucketLocation and GetBucketVersioning
 * (unversioned). Signatures are not checked. Writes are refused (501).
 *
 * The same server also serves stored objects (`objects`, an ObjectTable such as
 * ./stored-s3.ts's StoredObjects: keys, ETags and bytes held in memory), so a bench can
 * read its real dataset through a server that costs almost no CPU per request (s3rver
 * spends more per GET than the daemon it serves; real S3 costs the client machine nothing).
 *
 * Throttling, for the lister's adaptation: `slowDownRate` answers that share of requests
 * (a deterministic sequence) with 503 SlowDown, and `maxInflight` answers every request
 * beyond that many in progress with 503 SlowDown, like a prefix S3 has not yet scaled.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SyntheticLayout {
  /** Prefix every key starts with, e.g. "data/" (may be empty). */
  root: string;
  /** Number of objects. */
  total: number;
  /** Objects per folder; 0 (or absent) for a flat layout. */
  perFolder?: number;
  /** Smallest object size in bytes; sizes are minSize + (k * 7919) % (sizeSpread + 1). */
  minSize?: number;
  sizeSpread?: number;
}

export interface SyntheticS3Options extends SyntheticLayout {
  /** Objects to serve instead of the formula's (the layout fields are then ignored). */
  objects?: ObjectTable;
  /** Bucket name served (any other is 404 NoSuchBucket). */
  bucket: string;
  /** Share (0..1) of requests answered with 503 SlowDown. */
  slowDownRate?: number;
  /** Requests in progress beyond this many are answered with 503 SlowDown. */
  maxInflight?: number;
  /** Each reply waits this long first, like S3's time to first byte (default 0). */
  delayMs?: number;
  /** Port to listen on (default: any free one). */
  port?: number;
}

export interface SyntheticS3 {
  endpoint: string;
  /** Requests answered, by kind ('list', 'head', 'get', 'slowdown', 'other'). */
  counts: Record<string, number>;
  /** Highest number of requests in progress at once. */
  peakInflight(): number;
  close(): Promise<void>;
}

/** S3's maximum and default page size. */
const MAX_KEYS = 1000;
/** One fixed modification time: the objects never change. */
const LAST_MODIFIED = new Date(Date.UTC(2024, 0, 1));

/**
 * What the server serves: `total` objects in key order (UTF-8 bytes, as S3 sorts), by index,
 * with the key questions of a listing answered over that order.
 */
export interface ObjectTable {
  readonly total: number;
  key(k: number): string;
  size(k: number): number;
  etag(k: number): string;
  /** Bytes [start, end) of object k. */
  bytes(k: number, start: number, end: number): Buffer;
  /** First index whose key is > s (or >= s when `inclusive`). */
  after(s: string, inclusive?: boolean): number;
  /** First index at or after `from` whose key does not start with `p` (keys from `from` on start with p). */
  pastPrefix(from: number, p: string): number;
  /** The index of `key`, or undefined when no object has it. */
  indexOf(key: string): number | undefined;
}

/** The formula behind the objects; exported for tests and the bench's byte checks. */
export class SyntheticKeys implements ObjectTable {
  readonly root: string;
  readonly total: number;
  readonly perFolder: number;
  private readonly folderWidth: number;
  private readonly objWidth: number;
  private readonly minSize: number;
  private readonly spread: number;

  constructor(l: SyntheticLayout) {
    if (!Number.isSafeInteger(l.total) || l.total < 0) throw new RangeError(`total must be a whole number >= 0, got ${l.total}`);
    this.root = l.root;
    this.total = l.total;
    this.perFolder = l.perFolder ?? 0;
    const folders = this.perFolder > 0 ? Math.ceil(l.total / this.perFolder) : 0;
    this.folderWidth = String(Math.max(1, folders - 1)).length;
    this.objWidth = String(Math.max(1, (this.perFolder > 0 ? this.perFolder : l.total) - 1)).length;
    this.minSize = l.minSize ?? 100;
    this.spread = l.sizeSpread ?? 0;
  }

  key(k: number): string {
    if (this.perFolder > 0) {
      return `${this.root}f${String(Math.floor(k / this.perFolder)).padStart(this.folderWidth, '0')}/o${String(k % this.perFolder).padStart(this.objWidth, '0')}`;
    }
    return `${this.root}o${String(k).padStart(this.objWidth, '0')}`;
  }

  size(k: number): number {
    return this.minSize + ((k * 7919) % (this.spread + 1));
  }

  seed(k: number): number {
    return Math.imul(k + 1, 0x9e3779b1) >>> 0;
  }

  etag(k: number): string {
    return `"${this.seed(k).toString(16).padStart(8, '0')}${k.toString(16).padStart(24, '0')}"`;
  }

  /** Bytes [start, end) of object k. */
  bytes(k: number, start: number, end: number): Buffer {
    const b = Buffer.allocUnsafe(end - start);
    const s = this.seed(k);
    for (let i = start; i < end; i++) b[i - start] = (s + i * 131) & 0xff;
    return b;
  }

  after(s: string, inclusive = false): number {
    return afterIn(this, s, inclusive);
  }

  pastPrefix(from: number, p: string): number {
    return searchFrom(this, from, (key) => key.startsWith(p));
  }

  indexOf(key: string): number | undefined {
    const k = this.after(key, true);
    return k < this.total && this.key(k) === key ? k : undefined;
  }
}

/** The first index in [from, total) where `pred` turns false (pred must be true then false). */
export function searchFrom(t: Pick<ObjectTable, 'total' | 'key'>, from: number, pred: (key: string) => boolean): number {
  let lo = from;
  let hi = t.total;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (pred(t.key(mid))) lo = mid + 1; else hi = mid;
  }
  return lo;
}

/** First index of `t` whose key is > s (or >= s when `inclusive`). */
export function afterIn(t: Pick<ObjectTable, 'total' | 'key'>, s: string, inclusive = false): number {
  return searchFrom(t, 0, (key) => (inclusive ? compareUtf8(key, s) < 0 : compareUtf8(key, s) <= 0));
}

/** S3's key order: UTF-8 bytes, i.e. code points (JS compares UTF-16 units). */
export function compareUtf8(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

function xml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' })[c]!);
}

/** `start`: keys after it (StartAfter, marker); `resume`: a continuation, also past the folder it names. */
interface ListParams { prefix: string; delimiter: string; start: string | undefined; resume?: string | undefined; maxKeys: number }
interface ListResult { entries: ({ k: number } | { cp: string })[]; truncated: boolean; resumeAfter: string | undefined }

/** One page: the entries after `start` under `prefix`, folders rolled up at `delimiter`. */
export function listPage(keys: ObjectTable, p: ListParams): ListResult {
  let i = keys.after(p.prefix, true);
  if (p.start !== undefined && compareUtf8(p.start, p.prefix) >= 0) i = Math.max(i, keys.after(p.start));
  if (p.resume !== undefined) {
    i = Math.max(i, keys.after(p.resume));
    // A page that ended on a folder resumes after all of it, as S3's token does.
    if (p.delimiter !== '' && p.resume.endsWith(p.delimiter)) i = keys.pastPrefix(i, p.resume);
  }
  const entries: ListResult['entries'] = [];
  let resumeAfter: string | undefined;
  while (i < keys.total && entries.length < p.maxKeys) {
    const key = keys.key(i);
    if (!key.startsWith(p.prefix)) { i = keys.total; break; }
    const cut = p.delimiter === '' ? -1 : key.indexOf(p.delimiter, p.prefix.length);
    if (cut >= 0) {
      const cp = key.slice(0, cut + p.delimiter.length);
      entries.push({ cp });
      resumeAfter = cp;
      i = keys.pastPrefix(i, cp);
    } else {
      entries.push({ k: i });
      resumeAfter = key;
      i++;
    }
  }
  const truncated = i < keys.total && keys.key(i).startsWith(p.prefix);
  return { entries, truncated, resumeAfter: truncated ? resumeAfter : undefined };
}

/** Continuation tokens: the entry to resume after, opaque to the client as S3's are. */
const encodeToken = (s: string) => Buffer.from(`after:${s}`).toString('base64url');
function decodeToken(t: string): string | undefined {
  const s = Buffer.from(t, 'base64url').toString();
  return s.startsWith('after:') ? s.slice(6) : undefined;
}

function listXml(bucket: string, keys: ObjectTable, q: URLSearchParams, v2: boolean): { status: number; body: string } {
  const prefix = q.get('prefix') ?? '';
  const delimiter = q.get('delimiter') ?? '';
  const maxKeys = Math.min(MAX_KEYS, Math.max(0, Number(q.get('max-keys') ?? MAX_KEYS) || 0));
  let resume: string | undefined;
  const token = q.get('continuation-token');
  if (v2 && token !== null) {
    resume = decodeToken(token);
    if (resume === undefined) return { status: 400, body: errorXml('InvalidArgument', 'The continuation token provided is incorrect') };
  } else if (!v2) resume = q.get('marker') ?? undefined; // v1 clients resume from NextMarker
  const start = v2 && token === null ? q.get('start-after') ?? undefined : undefined;
  const r = listPage(keys, { prefix, delimiter, start, resume, maxKeys });
  const parts: string[] = ['<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'];
  parts.push(`<Name>${xml(bucket)}</Name><Prefix>${xml(prefix)}</Prefix>`);
  if (v2) {
    parts.push(`<KeyCount>${r.entries.length}</KeyCount>`);
    if (token !== null) parts.push(`<ContinuationToken>${xml(token)}</ContinuationToken>`);
    if (q.get('start-after') !== null) parts.push(`<StartAfter>${xml(q.get('start-after')!)}</StartAfter>`);
  } else parts.push(`<Marker>${xml(q.get('marker') ?? '')}</Marker>`);
  parts.push(`<MaxKeys>${maxKeys}</MaxKeys>`);
  if (delimiter !== '') parts.push(`<Delimiter>${xml(delimiter)}</Delimiter>`);
  parts.push(`<IsTruncated>${r.truncated}</IsTruncated>`);
  if (r.resumeAfter !== undefined) parts.push(v2 ? `<NextContinuationToken>${encodeToken(r.resumeAfter)}</NextContinuationToken>` : `<NextMarker>${xml(r.resumeAfter)}</NextMarker>`);
  const lm = LAST_MODIFIED.toISOString();
  for (const e of r.entries) {
    if ('k' in e) {
      parts.push(`<Contents><Key>${xml(keys.key(e.k))}</Key><LastModified>${lm}</LastModified><ETag>${xml(keys.etag(e.k))}</ETag><Size>${keys.size(e.k)}</Size><StorageClass>STANDARD</StorageClass></Contents>`);
    }
  }
  // S3 lists the CommonPrefixes after the Contents.
  for (const e of r.entries) if ('cp' in e) parts.push(`<CommonPrefixes><Prefix>${xml(e.cp)}</Prefix></CommonPrefixes>`);
  parts.push('</ListBucketResult>');
  return { status: 200, body: parts.join('') };
}

function errorXml(code: string, message: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${xml(message)}</Message></Error>`;
}

/** Starts the server; `close()` stops it (connections included). */
export async function startSyntheticS3(o: SyntheticS3Options): Promise<SyntheticS3> {
  const keys: ObjectTable = o.objects ?? new SyntheticKeys(o);
  const counts: Record<string, number> = { list: 0, head: 0, get: 0, slowdown: 0, other: 0 };
  let inflight = 0;
  let peak = 0;
  let seq = 0;
  const rate = o.slowDownRate ?? 0;
  const send = (res: http.ServerResponse, status: number, body: string | Buffer, headers: Record<string, string | number> = {}) => {
    const isXml = typeof body === 'string';
    res.writeHead(status, { ...(isXml ? { 'content-type': 'application/xml' } : {}), 'content-length': Buffer.byteLength(body), ...headers });
    res.end(body);
  };
  const handle = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const q = url.searchParams;
    // Deterministic throttling: the i-th request is refused when floor(i*rate) steps.
    const n = seq++;
    if ((rate > 0 && Math.floor((n + 1) * rate) > Math.floor(n * rate)) || (o.maxInflight !== undefined && inflight > o.maxInflight)) {
      counts.slowdown!++;
      send(res, 503, errorXml('SlowDown', 'Please reduce your request rate.'));
      return;
    }
    const parts = url.pathname.split('/');
    const bucket = decodeURIComponent(parts[1] ?? '');
    const key = parts.slice(2).map(decodeURIComponent).join('/');
    if (bucket !== o.bucket) { counts.other!++; send(res, 404, errorXml('NoSuchBucket', 'The specified bucket does not exist')); return; }
    if (req.method !== 'GET' && req.method !== 'HEAD') { counts.other!++; send(res, 501, errorXml('NotImplemented', 'This server is read-only')); return; }
    if (key === '') {
      if (q.has('versioning')) { counts.other!++; send(res, 200, '<?xml version="1.0" encoding="UTF-8"?>\n<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"/>'); return; }
      if (q.has('location')) { counts.other!++; send(res, 200, '<?xml version="1.0" encoding="UTF-8"?>\n<LocationConstraint xmlns="http://s3.amazonaws.com/doc/2006-03-01/"/>'); return; }
      if (req.method === 'HEAD') { counts.other!++; send(res, 200, ''); return; }
      counts.list!++;
      const r = listXml(o.bucket, keys, q, q.get('list-type') === '2');
      send(res, r.status, r.body);
      return;
    }
    const k = keys.indexOf(key);
    if (k === undefined) { counts.other!++; send(res, 404, req.method === 'HEAD' ? '' : errorXml('NoSuchKey', 'The specified key does not exist.')); return; }
    const size = keys.size(k);
    const etag = keys.etag(k);
    const common = { etag, 'last-modified': LAST_MODIFIED.toUTCString(), 'accept-ranges': 'bytes' };
    const ifMatch = req.headers['if-match'];
    if (ifMatch !== undefined && ifMatch !== etag && ifMatch !== '*') { counts.other!++; send(res, 412, errorXml('PreconditionFailed', 'At least one of the pre-conditions you specified did not hold')); return; }
    if (req.method === 'HEAD') {
      counts.head!++;
      res.writeHead(200, { ...common, 'content-length': size });
      res.end();
      return;
    }
    counts.get!++;
    const m = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
    if (!m) { send(res, 200, keys.bytes(k, 0, size), common); return; }
    const start = Number(m[1]);
    const end = Math.min(size, m[2] === '' ? size : Number(m[2]) + 1);
    if (start >= size || end <= start) { send(res, 416, errorXml('InvalidRange', 'The requested range is not satisfiable'), { 'content-range': `bytes */${size}` }); return; }
    send(res, 206, keys.bytes(k, start, end), { ...common, 'content-range': `bytes ${start}-${end - 1}/${size}` });
  };
  const delay = o.delayMs ?? 0;
  const server = http.createServer((req, res) => {
    inflight++;
    peak = Math.max(peak, inflight);
    res.once('close', () => { inflight--; });
    if (delay > 0) setTimeout(() => { if (!res.destroyed) handle(req, res); }, delay);
    else handle(req, res);
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve, reject) => { server.once('error', reject); server.listen(o.port ?? 0, '127.0.0.1', () => resolve()); });
  const port = (server.address() as AddressInfo).port;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    counts,
    peakInflight: () => peak,
    close: () => new Promise<void>((resolve) => { server.close(() => resolve()); server.closeAllConnections(); }),
  };
}
