/**
 * A versioned bucket in front of the local S3 server, which has no versioning (issue 15).
 *
 * An HTTP proxy that keeps a version history of the keys the test writes through it
 * (`put`, `remove`): the current version of each key lives in s3rver as a plain object;
 * noncurrent versions are kept here, in memory. The proxy itself answers
 *   GetBucketVersioning   GET /bucket?versioning
 *   ListObjectVersions    GET /bucket?versions (prefix, delimiter, key-marker,
 *                         version-id-marker, max-keys; pages capped at `pageSize`)
 *   GET/HEAD ?versionId=  of a noncurrent version (Range and If-Match honoured), and of a
 *                         delete marker (405) or an unknown id (404 NoSuchVersion),
 * and forwards everything else to s3rver unchanged, a GET of the current version by id
 * included (s3rver ignores the versionId parameter; the request's signature still holds).
 *
 * Reply shapes, as S3 sends them and as @aws-sdk/client-s3 parses them (its model:
 * ListObjectVersionsOutput with root <ListVersionsResult>, flattened <Version> and
 * <DeleteMarker> members interleaved in key order, each key's versions newest first,
 * <CommonPrefixes>, and NextKeyMarker / NextVersionIdMarker naming the last entry returned
 * when <IsTruncated>; GetBucketVersioningOutput with root <VersioningConfiguration> and a
 * <Status> only once versioning was ever enabled). AWS API reference:
 * https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectVersions.html and
 * https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetBucketVersioning.html.
 * A GET of a delete marker by id is 405 MethodNotAllowed; of an unknown id, 404 NoSuchVersion.
 */
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { LocalS3 } from '../../src/local/s3-server.js';
import { readAll } from './fault-proxy.js';

/** 'never': versioning never enabled (no <Status>); 'denied': 403 AccessDenied. */
export type VersioningStatus = 'Enabled' | 'Suspended' | 'never' | 'denied';

interface Version {
  versionId: string;
  deleteMarker: boolean;
  body: Buffer;
  etag: string;
  lastModified: Date;
}

export interface VersionedProxy {
  endpoint: string;
  /** Every request that came in, as "METHOD /path?query". */
  requests: string[];
  status: VersioningStatus;
  /** Answer ListObjectVersions with 403 AccessDenied (credentials without s3:ListBucketVersions). */
  denyVersionListing: boolean;
  /** Writes `body` as the new current version of `key`; resolves with its version id ("null" with nullVersion). */
  put(key: string, body: Buffer, opts?: { nullVersion?: boolean }): Promise<string>;
  /** Makes a delete marker the current version of `key` (the key disappears from s3rver). */
  remove(key: string): Promise<void>;
  /** Deletes a noncurrent version for good (DELETE ?versionId=, or a lifecycle expiration). */
  purge(key: string, versionId: string): void;
  close(): Promise<void>;
}

const NS = 'http://s3.amazonaws.com/doc/2006-03-01/';
const OWNER = '<Owner><ID>75aa57f09aa0c8caeab4f8c24e99d10f8e7faeebf76c078efc7c6caea54ba06a</ID><DisplayName>sluice-test</DisplayName></Owner>';
const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
/** S3's key order: UTF-8 bytes. */
const byKey = (a: string, b: string) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));

export async function startVersionedProxy(s3: LocalS3, bucket: string, opts: { pageSize?: number } = {}): Promise<VersionedProxy> {
  const pageSize = opts.pageSize ?? 1000;
  /** Newest first, per key. */
  const history = new Map<string, Version[]>();
  let clock = Date.parse('2026-06-01T00:00:00.000Z');
  let serial = 0;
  const newId = () => `3sL4kqtJlcpXroDTDmJ${String(++serial).padStart(4, '0')}.x_Q9`;
  const agent = new http.Agent({ keepAlive: true });
  const sockets = new Set<Socket>();

  const proxy: VersionedProxy = {
    endpoint: '',
    requests: [],
    status: 'Enabled',
    denyVersionListing: false,
    async put(key, body, o = {}) {
      const etag = await s3.putObject(bucket, key, body);
      const versionId = o.nullVersion ? 'null' : newId();
      // A new null version replaces the old one (S3: versioning suspended).
      const older = (history.get(key) ?? []).filter((v) => v.versionId !== versionId);
      history.set(key, [{ versionId, deleteMarker: false, body, etag, lastModified: new Date(clock += 60_000) }, ...older]);
      return versionId;
    },
    async remove(key) {
      await s3.deleteObject(bucket, key);
      history.set(key, [{ versionId: newId(), deleteMarker: true, body: Buffer.alloc(0), etag: '', lastModified: new Date(clock += 60_000) }, ...(history.get(key) ?? [])]);
    },
    purge(key, versionId) {
      const versions = history.get(key) ?? [];
      if (versions[0]?.versionId === versionId) throw new Error('purge() takes noncurrent versions only');
      history.set(key, versions.filter((v) => v.versionId !== versionId));
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
      agent.destroy();
    },
  };

  function send(res: http.ServerResponse, status: number, xml: string): void {
    res.writeHead(status, { 'content-type': 'application/xml', 'content-length': Buffer.byteLength(xml) });
    res.end(xml);
  }
  const s3Error = (res: http.ServerResponse, status: number, code: string, message: string) =>
    send(res, status, `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message><RequestId>versioned-proxy</RequestId></Error>`);

  function listVersions(q: URLSearchParams): string {
    const prefix = q.get('prefix') ?? '';
    const delimiter = q.get('delimiter') ?? '';
    const keyMarker = q.get('key-marker') ?? '';
    const versionIdMarker = q.get('version-id-marker') ?? '';
    const maxKeys = Math.min(Number(q.get('max-keys') ?? 1000), pageSize);
    const entries: { key: string; v: Version; latest: boolean }[] = [];
    for (const key of [...history.keys()].sort(byKey)) {
      if (!key.startsWith(prefix)) continue;
      history.get(key)!.forEach((v, i) => entries.push({ key, v, latest: i === 0 }));
    }
    // Resume after (key-marker, version-id-marker), or after every version of key-marker.
    let i = 0;
    if (keyMarker !== '') {
      while (i < entries.length && byKey(entries[i]!.key, keyMarker) < 0) i++;
      if (versionIdMarker !== '') {
        const at = entries.findIndex((e, j) => j >= i && e.key === keyMarker && e.v.versionId === versionIdMarker);
        if (at >= 0) i = at + 1;
      } else {
        while (i < entries.length && entries[i]!.key === keyMarker) i++;
      }
    }
    const body: string[] = [];
    const prefixes = new Set<string>();
    let count = 0;
    let last: { key: string; v: Version } | undefined;
    for (; i < entries.length && count < maxKeys; i++) {
      const e = entries[i]!;
      const rest = e.key.slice(prefix.length);
      const cut = delimiter !== '' ? rest.indexOf(delimiter) : -1;
      if (cut >= 0) {
        const p = prefix + rest.slice(0, cut + delimiter.length);
        if (!prefixes.has(p)) { prefixes.add(p); count++; }
        last = e;
        continue;
      }
      const common = `<Key>${esc(e.key)}</Key><VersionId>${esc(e.v.versionId)}</VersionId><IsLatest>${e.latest}</IsLatest><LastModified>${e.v.lastModified.toISOString()}</LastModified>`;
      body.push(e.v.deleteMarker
        ? `<DeleteMarker>${OWNER}${common}</DeleteMarker>`
        : `<Version>${common}<ETag>${esc(e.v.etag)}</ETag><Size>${e.v.body.length}</Size>${OWNER}<StorageClass>STANDARD</StorageClass></Version>`);
      count++;
      last = e;
    }
    // Entries rolled up into the last common prefix are consumed with it.
    while (i < entries.length && delimiter !== '' && last !== undefined) {
      const rest = entries[i]!.key.slice(prefix.length);
      const cut = rest.indexOf(delimiter);
      if (cut < 0 || !prefixes.has(prefix + rest.slice(0, cut + delimiter.length))) break;
      last = entries[i++];
    }
    const truncated = i < entries.length;
    return `<?xml version="1.0" encoding="UTF-8"?>\n<ListVersionsResult xmlns="${NS}"><Name>${esc(bucket)}</Name><Prefix>${esc(prefix)}</Prefix>`
      + `<KeyMarker>${esc(keyMarker)}</KeyMarker><VersionIdMarker>${esc(versionIdMarker)}</VersionIdMarker>`
      + (truncated && last ? `<NextKeyMarker>${esc(last.key)}</NextKeyMarker><NextVersionIdMarker>${esc(last.v.versionId)}</NextVersionIdMarker>` : '')
      + `<MaxKeys>${maxKeys}</MaxKeys>${delimiter !== '' ? `<Delimiter>${esc(delimiter)}</Delimiter>` : ''}<IsTruncated>${truncated}</IsTruncated>`
      + body.join('') + [...prefixes].map((p) => `<CommonPrefixes><Prefix>${esc(p)}</Prefix></CommonPrefixes>`).join('')
      + '</ListVersionsResult>';
  }

  /** A GET or HEAD of a noncurrent version, served from memory. */
  function serveVersion(req: http.IncomingMessage, res: http.ServerResponse, key: string, v: Version): void {
    if (v.deleteMarker) {
      res.setHeader('x-amz-delete-marker', 'true');
      return s3Error(res, 405, 'MethodNotAllowed', 'The specified method is not allowed against this resource.');
    }
    const ifMatch = req.headers['if-match'];
    if (ifMatch !== undefined && ifMatch.replace(/"/g, '') !== v.etag.replace(/"/g, '')) return s3Error(res, 412, 'PreconditionFailed', `At least one of the pre-conditions you specified did not hold (${key})`);
    const headers: Record<string, string> = { etag: v.etag, 'last-modified': v.lastModified.toUTCString(), 'x-amz-version-id': v.versionId, 'accept-ranges': 'bytes' };
    const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
    let status = 200;
    let bytes = v.body;
    if (range) {
      const start = Number(range[1]);
      const end = Math.min(range[2] === '' ? v.body.length - 1 : Number(range[2]), v.body.length - 1);
      if (start >= v.body.length) return s3Error(res, 416, 'InvalidRange', 'The requested range is not satisfiable');
      status = 206;
      bytes = v.body.subarray(start, end + 1);
      headers['content-range'] = `bytes ${start}-${end}/${v.body.length}`;
    }
    res.writeHead(status, { ...headers, 'content-length': String(bytes.length) });
    res.end(req.method === 'HEAD' ? undefined : bytes);
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const body = await readAll(req);
    const url = new URL(req.url ?? '/', 'http://x');
    proxy.requests.push(`${req.method} ${url.pathname}${url.search}`);
    const slash = url.pathname.indexOf('/', 1);
    const key = slash > 0 && slash < url.pathname.length - 1 ? decodeURIComponent(url.pathname.slice(slash + 1)) : undefined;
    if (req.method === 'GET' && key === undefined && url.searchParams.has('versioning')) {
      if (proxy.status === 'denied') return s3Error(res, 403, 'AccessDenied', 'Access Denied');
      const status = proxy.status === 'never' ? '' : `<Status>${proxy.status}</Status>`;
      return send(res, 200, `<?xml version="1.0" encoding="UTF-8"?>\n<VersioningConfiguration xmlns="${NS}">${status}</VersioningConfiguration>`);
    }
    if (req.method === 'GET' && key === undefined && url.searchParams.has('versions')) {
      if (proxy.denyVersionListing) return s3Error(res, 403, 'AccessDenied', 'Access Denied');
      return send(res, 200, listVersions(url.searchParams));
    }
    const versionId = url.searchParams.get('versionId');
    if (key !== undefined && versionId !== null && (req.method === 'GET' || req.method === 'HEAD')) {
      const versions = history.get(key) ?? [];
      const v = versions.find((x) => x.versionId === versionId);
      if (v === undefined) return s3Error(res, 404, 'NoSuchVersion', 'The specified version does not exist.');
      if (v !== versions[0] || v.deleteMarker) return serveVersion(req, res, key, v);
      // The current version: s3rver holds it (and ignores the versionId parameter).
    }
    const up = await new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
      const r = http.request({ host: '127.0.0.1', port: s3.port, method: req.method, path: req.url, headers: req.headers, agent }, (u) => {
        readAll(u).then((b) => resolve({ status: u.statusCode ?? 502, headers: u.headers, body: b }), reject);
      });
      r.on('error', reject);
      r.end(body);
    });
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(up.headers)) if (v !== undefined && !['connection', 'keep-alive', 'transfer-encoding', 'content-length'].includes(k)) headers[k] = v;
    res.writeHead(up.status, { ...headers, 'content-length': req.method === 'HEAD' ? up.headers['content-length'] ?? '0' : String(up.body.length) });
    res.end(req.method === 'HEAD' ? undefined : up.body);
  }

  const server = http.createServer((req, res) => { void handle(req, res).catch(() => res.socket?.destroy()); });
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  proxy.endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return proxy;
}
