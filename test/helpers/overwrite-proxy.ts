/**
 * An object server on 127.0.0.1 whose objects are "overwritten" while reads are under way
 * (issue 43): listings, HEADs and everything else go to the local S3 server unchanged; ranged
 * GETs of the objects the test names are answered here, from the bytes the test gave, as S3
 * would for a version that changes:
 *  - the body drips: DRIP_BYTES at a time, one every `dripMs`, so GETs overlap the overwrite;
 *  - overwrite(key): from then on a GET with If-Match of the old ETag gets 412
 *    PreconditionFailed; a GET of the old version that was streaming then stalls
 *    `lateMs` and finishes with the old bytes (S3 serves the version a GET started on).
 * `counts` records the GETs served, the 412s and the GETs that finished late.
 */
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { LocalS3 } from '../../src/local/s3-server.js';

/** 64 KiB per drip: a socket read's worth, so a GET of a few blocks takes a few drips. */
const DRIP_BYTES = 64 * 1024;

export interface OverwriteObject {
  body: Buffer;
  /** The ETag as s3rver lists it (quotes included). */
  etag: string;
}

export interface OverwriteProxy {
  endpoint: string;
  counts: { gets: number; refused412: number; late: number };
  /** From now on If-Match GETs of `key` get 412; the ones streaming finish late with the old bytes. */
  overwrite(key: string): void;
  /** Keys with a GET streaming now (overwriting one of them makes a late GET). */
  streamingKeys(): string[];
  close(): Promise<void>;
}

export async function startOverwriteProxy(s3: LocalS3, bucket: string, objects: ReadonlyMap<string, OverwriteObject>, o: { dripMs: number; lateMs: number }): Promise<OverwriteProxy> {
  const changed = new Set<string>();
  /** Streaming GETs by key: each is told when its key is overwritten. */
  const streaming = new Map<string, Set<() => void>>();
  const counts = { gets: 0, refused412: 0, late: 0 };
  const agent = new http.Agent({ keepAlive: true });
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const later = (ms: number, fn: () => void) => {
    const tm = setTimeout(() => { timers.delete(tm); fn(); }, ms);
    timers.add(tm);
  };

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const prefix = `/${bucket}/`;
    const key = url.pathname.startsWith(prefix) ? decodeURIComponent(url.pathname.slice(prefix.length)) : '';
    const obj = req.method === 'GET' && req.headers.range !== undefined ? objects.get(key) : undefined;
    if (!obj) {
      const up = http.request({ host: '127.0.0.1', port: s3.port, method: req.method, path: req.url, headers: req.headers, agent }, (u) => {
        res.writeHead(u.statusCode ?? 502, u.headers);
        u.pipe(res);
      });
      up.on('error', () => res.destroy());
      req.pipe(up);
      return;
    }
    const m = /^bytes=(\d+)-(\d*)$/.exec(String(req.headers.range));
    const ifMatch = req.headers['if-match'];
    if (changed.has(key) && ifMatch !== undefined && ifMatch !== '*') {
      counts.refused412++;
      res.writeHead(412, { 'content-type': 'application/xml' });
      res.end('<?xml version="1.0" encoding="UTF-8"?><Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did not hold</Message><Condition>If-Match</Condition></Error>');
      return;
    }
    const size = obj.body.length;
    const a = m ? Number(m[1]) : 0;
    const b = m && m[2] !== '' ? Math.min(size - 1, Number(m[2])) : size - 1;
    if (!m || a >= size || b < a) {
      res.writeHead(416, { 'content-type': 'application/xml' });
      res.end('<Error><Code>InvalidRange</Code></Error>');
      return;
    }
    counts.gets++;
    res.writeHead(206, { etag: obj.etag, 'content-range': `bytes ${a}-${b}/${size}`, 'content-length': b - a + 1, 'accept-ranges': 'bytes' });
    let at = a;
    let late = false;
    const onOverwrite = () => { late = true; };
    let set = streaming.get(key);
    if (!set) streaming.set(key, (set = new Set()));
    set.add(onOverwrite);
    const done = () => set!.delete(onOverwrite);
    res.on('close', done);
    const drip = () => {
      if (res.destroyed) return;
      if (late) {
        // Overwritten while this GET streamed: it finishes, late, with the version it started on.
        late = false;
        counts.late++;
        later(o.lateMs, drip);
        return;
      }
      const n = Math.min(DRIP_BYTES, b + 1 - at);
      const chunk = obj.body.subarray(at, at + n);
      at += n;
      if (at > b) { res.end(chunk); done(); return; }
      res.write(chunk);
      later(o.dripMs, drip);
    };
    drip();
  });
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    counts,
    streamingKeys() {
      return [...streaming].filter(([, set]) => set.size > 0).map(([k]) => k);
    },
    overwrite(key) {
      changed.add(key);
      for (const f of streaming.get(key) ?? []) f();
    },
    async close() {
      for (const tm of timers) clearTimeout(tm);
      timers.clear();
      for (const s of sockets) s.destroy();
      agent.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
