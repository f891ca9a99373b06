/**
 * An HTTP-aware fault-injecting proxy between an S3 client and the local S3 server.
 *
 * Each request is forwarded to 127.0.0.1:<targetPort> unchanged (the Host header too, so
 * SigV4 signatures made for the proxy still verify), its reply is buffered whole, and then
 * faults are applied, each to the next N requests it can apply to:
 *   latencyMs     delay before forwarding every request;
 *   fail503       answer 503 SlowDown with an S3 XML body, without forwarding;
 *   stall         accept the request and never answer (until close());
 *   resetMidBody  ranged GETs only: send the headers and half the body, then a TCP RST;
 *   truncateBody  ranged GETs only: send the headers (Content-Length kept) and half the
 *                 body, then close the connection cleanly (FIN);
 *   down          stop listening (connections are refused) until set({ down: false });
 *   holdListings  hold every flat listing request (ListObjectsV2 without a delimiter and
 *                 not a lookup's max-keys=1 or 2) until set({ holdListings: false }): a listing that is
 *                 slow after its first, folder-level (delimiter) pages.
 * Mid-body faults only hit requests with a Range header, i.e. the data path, so that
 * listings and HEADs made by a test's setup are not disturbed. `counts` records how many
 * times each fault fired, and `requests` how many requests came in; `gets` records every
 * ranged GET forwarded (object path and the byte range asked for), to count GETs and
 * bytes fetched per file.
 */
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface Faults {
  latencyMs: number;
  /** Next N requests get 503 SlowDown. */
  fail503: number;
  resetMidBody: number;
  truncateBody: number;
  /** Next N requests are accepted and never answered. */
  stall: number;
  /** Refuse connections. */
  down: boolean;
  /** Hold flat listings (no delimiter, not a lookup's max-keys=1 or 2) until cleared. */
  holdListings: boolean;
  // ---- issue 15 ----
  /** Answer every ListObjectsV2 with 403 AccessDenied (a run that must not list). */
  denyListings: boolean;
  /**
   * Storage class by key, as S3 would report it (s3rver has none): rewritten into listings
   * (<StorageClass>) and HEAD replies (x-amz-storage-class); a GET of a GLACIER/DEEP_ARCHIVE
   * key, or of a key in `archiveStatus`, gets 403 InvalidObjectState.
   */
  storageClass: Record<string, string>;
  /** Intelligent-Tiering archive tier by key, reported by HEAD (x-amz-archive-status). */
  archiveStatus: Record<string, string>;
}

/** A ranged GET as the proxy saw it: the request path (/bucket/key) and [start, end). */
export interface RangedGet {
  path: string;
  start: number;
  end: number;
}

export interface FaultProxy {
  endpoint: string;
  port: number;
  set(f: Partial<Faults>): void;
  counts: Record<string, number>;
  gets: RangedGet[];
  close(): Promise<void>;
}

const SLOWDOWN_XML = '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message><RequestId>fault-proxy</RequestId></Error>';
/** Hop-by-hop and length headers we recompute when re-sending a buffered reply. */
const DROP_HEADERS = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length']);

export async function startFaultProxy(targetPort: number): Promise<FaultProxy> {
  const faults: Faults = { latencyMs: 0, fail503: 0, resetMidBody: 0, truncateBody: 0, stall: 0, down: false, holdListings: false, denyListings: false, storageClass: {}, archiveStatus: {} };
  const counts: Record<string, number> = { requests: 0, fail503: 0, resetMidBody: 0, truncateBody: 0, stall: 0, heldListings: 0, listRequests: 0, deniedListings: 0 };
  const gets: RangedGet[] = [];
  let held: Array<() => void> = [];
  const agent = new http.Agent({ keepAlive: true });
  const sockets = new Set<Socket>();
  let closed = false;

  const server = http.createServer((req, res) => {
    counts.requests!++;
    void handle(req, res).catch(() => res.socket?.destroy());
  });
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const reqBody = await readAll(req);
    if (faults.latencyMs > 0) await new Promise((r) => setTimeout(r, faults.latencyMs));
    const url = new URL(req.url ?? '/', 'http://x');
    if (faults.holdListings && url.searchParams.get('list-type') === '2' && !url.searchParams.has('delimiter') && !['1', '2'].includes(url.searchParams.get('max-keys') ?? '')) {
      counts.heldListings!++;
      await new Promise<void>((r) => held.push(r));
    }
    const isList = req.method === 'GET' && url.searchParams.get('list-type') === '2';
    if (isList) counts.listRequests!++;
    if (isList && faults.denyListings) {
      counts.deniedListings!++;
      return s3Error(res, 403, 'AccessDenied', 'Access Denied (fault proxy: listings disabled)');
    }
    const key = objectKey(url.pathname);
    const sc = key !== undefined ? faults.storageClass[key] : undefined;
    const tier = key !== undefined ? faults.archiveStatus[key] : undefined;
    if (req.method === 'GET' && !isList && ((sc !== undefined && ['GLACIER', 'DEEP_ARCHIVE'].includes(sc)) || tier !== undefined)) {
      return s3Error(res, 403, 'InvalidObjectState', 'The operation is not valid for the object\'s storage class');
    }
    if (faults.stall > 0) { faults.stall--; counts.stall!++; return; } // never answer
    if (faults.fail503 > 0) {
      faults.fail503--; counts.fail503!++;
      res.writeHead(503, { 'content-type': 'application/xml', 'content-length': Buffer.byteLength(SLOWDOWN_XML) });
      res.end(SLOWDOWN_XML);
      return;
    }
    const range = req.method === 'GET' ? /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '') : null;
    if (range) gets.push({ path: decodeURIComponent(url.pathname), start: Number(range[1]), end: Number(range[2]) + 1 });
    const up = await forward(req, reqBody);
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(up.headers)) if (v !== undefined && !DROP_HEADERS.has(k)) headers[k] = v;
    if (isList && Object.keys(faults.storageClass).length > 0) up.body = rewriteStorageClasses(up.body, faults.storageClass);
    if (req.method === 'HEAD' && sc !== undefined) headers['x-amz-storage-class'] = sc;
    if (req.method === 'HEAD' && tier !== undefined) headers['x-amz-archive-status'] = tier;
    const ranged = req.headers.range !== undefined && up.status < 300 && up.body.length >= 2;
    const midBody = ranged && faults.resetMidBody > 0 ? 'reset' : ranged && faults.truncateBody > 0 ? 'truncate' : undefined;
    if (!midBody) {
      // A HEAD reply has no body: its Content-Length is the object's, kept as the server sent it.
      const length = req.method === 'HEAD' ? up.headers['content-length'] ?? '0' : String(up.body.length);
      res.writeHead(up.status, { ...headers, 'content-length': length });
      res.end(req.method === 'HEAD' ? undefined : up.body);
      return;
    }
    const half = up.body.subarray(0, Math.floor(up.body.length / 2));
    res.writeHead(up.status, { ...headers, 'content-length': String(up.body.length) });
    if (midBody === 'reset') { faults.resetMidBody--; counts.resetMidBody!++; } else { faults.truncateBody--; counts.truncateBody!++; }
    res.write(half, () => {
      const sock = res.socket as Socket | null;
      if (!sock) return;
      if (midBody === 'reset') sock.resetAndDestroy();
      else sock.end();
    });
  }

  function forward(req: http.IncomingMessage, body: Buffer): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
    return new Promise((resolve, reject) => {
      const up = http.request({
        host: '127.0.0.1', port: targetPort, method: req.method, path: req.url, headers: req.headers, agent,
      }, (r) => { readAll(r).then((b) => resolve({ status: r.statusCode ?? 502, headers: r.headers, body: b }), reject); });
      up.on('error', reject);
      up.end(body);
    });
  }

  let port = await listen(server, 0);

  const proxy: FaultProxy = {
    endpoint: `http://127.0.0.1:${port}`,
    port,
    counts,
    gets,
    set(f) {
      const wasDown = faults.down;
      Object.assign(faults, f);
      if (!faults.holdListings) {
        for (const r of held) r();
        held = [];
      }
      if (closed || f.down === undefined || f.down === wasDown) return;
      if (f.down) {
        server.close();
        for (const s of sockets) s.destroy();
      } else {
        // close() may come before the listen completes: then stop listening at once.
        void listen(server, port).then((p) => { port = p; if (closed) server.close(); });
      }
    },
    async close() {
      if (closed) return;
      closed = true;
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => (server.listening ? server.close(() => r()) : r()));
      agent.destroy();
    },
  };
  return proxy;
}

function s3Error(res: http.ServerResponse, status: number, code: string, message: string): void {
  const xml = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message><RequestId>fault-proxy</RequestId></Error>`;
  res.writeHead(status, { 'content-type': 'application/xml', 'content-length': Buffer.byteLength(xml) });
  res.end(xml);
}

/** The key of a path-style request (/bucket/key), or undefined for a bucket-level request. */
function objectKey(pathname: string): string | undefined {
  const slash = pathname.indexOf('/', 1);
  if (slash < 0 || slash === pathname.length - 1) return undefined;
  return decodeURIComponent(pathname.slice(slash + 1));
}

const xmlUnescape = (s: string) => s.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&apos;/g, "'").replace(/&amp;/g, '&');

/** Sets <StorageClass> of each listed <Contents> whose key has a class in `classes`. */
function rewriteStorageClasses(body: Buffer, classes: Record<string, string>): Buffer {
  const xml = body.toString('utf8').replace(/<Contents>([\s\S]*?)<\/Contents>/g, (all, inner: string) => {
    const key = /<Key>([\s\S]*?)<\/Key>/.exec(inner)?.[1];
    const sc = key !== undefined ? classes[xmlUnescape(key)] : undefined;
    if (sc === undefined) return all;
    const replaced = /<StorageClass>/.test(inner) ? inner.replace(/<StorageClass>[^<]*<\/StorageClass>/, `<StorageClass>${sc}</StorageClass>`) : `${inner}<StorageClass>${sc}</StorageClass>`;
    return `<Contents>${replaced}</Contents>`;
  });
  return Buffer.from(xml, 'utf8');
}

function listen(server: http.Server, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** The whole of a request or reply body. */
export function readAll(stream: NodeJS.ReadableStream): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    stream.on('data', (c: Buffer) => parts.push(c));
    stream.on('end', () => resolve(Buffer.concat(parts)));
    stream.on('error', reject);
  });
}
