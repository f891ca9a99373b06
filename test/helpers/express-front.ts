/**
 * An S3 Express One Zone front of our own on 127.0.0.1, in front of s3rver, for tests of
 * directory buckets (src/s3/express.ts). Path-style requests to the directory bucket
 * `dirBucket` are served from s3rver's bucket `backing`:
 *  - `GET /BUCKET/?session` (CreateSession) must be SigV4-signed for service `s3express` with
 *    the base credentials (signature verified); it answers the CreateSessionResult XML with
 *    new session credentials valid for `ttlMs`.
 *  - Every other request must carry `x-amz-s3session-token` of a live session and a SigV4
 *    signature for service `s3express` made with that session's secret (verified, the token
 *    among the signed headers); otherwise 403 AccessDenied, or 400 ExpiredToken once expired.
 *  - Accepted requests are re-signed with s3rver's credentials and forwarded; ListObjectsV2
 *    replies have their <Contents> reversed, as a directory bucket's listing is not in key order.
 */
import http from 'node:http';
import net from 'node:net';
import { createHash, createHmac, randomBytes, type Hash, type Hmac } from 'node:crypto';
import { SignatureV4 } from '@smithy/signature-v4';

/** SHA-256 and HMAC-SHA-256 in the shape SignatureV4 takes (the SDK's own is @smithy/hash-node). */
class Sha256 {
  private readonly h: Hash | Hmac;
  constructor(secret?: string | Uint8Array) {
    this.h = secret !== undefined ? createHmac('sha256', secret) : createHash('sha256');
  }
  update(data: string | Uint8Array): void {
    this.h.update(data);
  }
  digest(): Promise<Uint8Array> {
    return Promise.resolve(this.h.digest());
  }
}

export interface ExpressFront {
  endpoint: string;
  /** CreateSession calls answered. */
  readonly sessions: number;
  /** Requests refused (bad or missing token or signature), with why. */
  readonly refused: string[];
  /** Ranged GETs accepted with a session token. */
  readonly gets: number;
  /** Listings answered (their keys reversed). */
  readonly listings: number;
  close(): Promise<void>;
}

interface Session { secret: string; token: string; expires: number }

function parseAuth(h: string | undefined): { keyId: string; date: string; region: string; service: string; signed: string[]; signature: string } | undefined {
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]+)$/.exec(h ?? '');
  if (!m) return undefined;
  return { keyId: m[1]!, date: m[2]!, region: m[3]!, service: m[4]!, signed: m[5]!.split(';'), signature: m[6]! };
}

/** Whether `req`'s SigV4 signature is the one `secret` makes over its signed headers. */
async function verify(req: http.IncomingMessage, keyId: string, secret: string, a: NonNullable<ReturnType<typeof parseAuth>>): Promise<boolean> {
  const url = new URL(req.url ?? '/', 'http://x');
  const query: Record<string, string> = {};
  for (const [k, v] of url.searchParams) query[k] = v;
  const headers: Record<string, string> = {};
  for (const h of a.signed) headers[h] = String(req.headers[h] ?? '');
  const amzDate = String(req.headers['x-amz-date'] ?? '');
  const signingDate = new Date(`${amzDate.slice(0, 4)}-${amzDate.slice(4, 6)}-${amzDate.slice(6, 8)}T${amzDate.slice(9, 11)}:${amzDate.slice(11, 13)}:${amzDate.slice(13, 15)}Z`);
  const signer = new SignatureV4({ service: a.service, region: a.region, sha256: Sha256 as never, credentials: { accessKeyId: keyId, secretAccessKey: secret }, uriEscapePath: false, applyChecksum: false });
  const host = String(req.headers.host ?? '');
  const signed = await signer.sign({
    method: req.method ?? 'GET', protocol: 'http:', hostname: host.replace(/:\d+$/, ''), path: url.pathname, query, headers,
  } as Parameters<SignatureV4['sign']>[0] & { method: string }, { signingDate, signableHeaders: new Set(a.signed) } as never);
  const got = parseAuth((signed as unknown as { headers: Record<string, string> }).headers.authorization);
  return got?.signature === a.signature;
}

export async function startExpressFront(o: { s3Port: number; dirBucket: string; backing: string; base: { accessKeyId: string; secretAccessKey: string }; ttlMs: number }): Promise<ExpressFront> {
  const sessions = new Map<string, Session>();
  const refused: string[] = [];
  let created = 0;
  let gets = 0;
  let listings = 0;
  const backingSigner = new SignatureV4({ service: 's3', region: 'us-east-1', sha256: Sha256 as never, credentials: o.base, uriEscapePath: false, applyChecksum: false });
  const sockets = new Set<net.Socket>();
  const deny = (res: http.ServerResponse, status: number, code: string, why: string) => {
    refused.push(why);
    res.writeHead(status, { 'content-type': 'application/xml' }).end(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${why}</Message></Error>`);
  };
  const server = http.createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://x');
      const a = parseAuth(req.headers.authorization);
      if (!url.pathname.startsWith(`/${o.dirBucket}`)) return deny(res, 404, 'NoSuchBucket', `not the directory bucket: ${url.pathname}`);
      if (!a || a.service !== 's3express') return deny(res, 403, 'AccessDenied', `not signed for s3express: ${req.method} ${req.url}`);
      if (url.searchParams.has('session')) {
        if (a.keyId !== o.base.accessKeyId || !(await verify(req, a.keyId, o.base.secretAccessKey, a))) return deny(res, 403, 'SignatureDoesNotMatch', 'CreateSession not signed with the base credentials');
        created++;
        const id = `ASIAEXPRESS${String(created).padStart(9, '0')}`;
        const s: Session = { secret: randomBytes(30).toString('base64'), token: randomBytes(48).toString('base64'), expires: Date.now() + o.ttlMs };
        sessions.set(id, s);
        res.writeHead(200, { 'content-type': 'application/xml' }).end(`<?xml version="1.0" encoding="UTF-8"?>
<CreateSessionResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Credentials><SessionToken>${s.token}</SessionToken><SecretAccessKey>${s.secret}</SecretAccessKey><AccessKeyId>${id}</AccessKeyId><Expiration>${new Date(s.expires).toISOString()}</Expiration></Credentials></CreateSessionResult>`);
        return;
      }
      const s = sessions.get(a.keyId);
      const token = req.headers['x-amz-s3session-token'];
      if (!s || token !== s.token) return deny(res, 403, 'AccessDenied', `no session token of ${a.keyId}: ${req.method} ${req.url}`);
      if (!a.signed.includes('x-amz-s3session-token')) return deny(res, 403, 'AccessDenied', 'the session token is not signed');
      if (Date.now() > s.expires) return deny(res, 400, 'ExpiredToken', `session ${a.keyId} expired`);
      if (!(await verify(req, a.keyId, s.secret, a))) return deny(res, 403, 'SignatureDoesNotMatch', `bad signature: ${req.method} ${req.url}`);
      if (req.method === 'GET' && req.headers.range !== undefined) gets++;
      // Forward to s3rver, re-signed with its credentials, for the backing bucket.
      const path = `/${o.backing}${url.pathname.slice(1 + o.dirBucket.length).replace(/^\/\/+/, '/')}`;
      const query: Record<string, string> = {};
      for (const [k, v] of url.searchParams) query[k] = v;
      const keep: Record<string, string> = { host: `127.0.0.1:${o.s3Port}`, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' };
      for (const h of ['range', 'if-match']) if (req.headers[h] !== undefined) keep[h] = String(req.headers[h]);
      const signed = await backingSigner.sign({ method: req.method ?? 'GET', protocol: 'http:', hostname: '127.0.0.1', port: o.s3Port, path, query, headers: keep } as Parameters<SignatureV4['sign']>[0] & { method: string });
      const headers = (signed as unknown as { headers: Record<string, string> }).headers;
      const listing = url.searchParams.get('list-type') === '2';
      const up = http.request({ host: '127.0.0.1', port: o.s3Port, method: req.method, path: path + url.search, headers }, (ur) => {
        if (!listing || (ur.statusCode ?? 500) >= 300) { res.writeHead(ur.statusCode ?? 502, ur.headers); ur.pipe(res); return; }
        const parts: Buffer[] = [];
        ur.on('data', (d: Buffer) => parts.push(d));
        ur.on('end', () => {
          listings++;
          const xml = Buffer.concat(parts).toString('utf8');
          const contents = xml.match(/<Contents>[\s\S]*?<\/Contents>/g) ?? [];
          const first = xml.indexOf('<Contents>');
          const out = first < 0 ? xml : xml.slice(0, first) + [...contents].reverse().join('') + xml.slice(xml.lastIndexOf('</Contents>') + '</Contents>'.length);
          const h = { ...ur.headers };
          delete h['content-length'];
          res.writeHead(ur.statusCode ?? 200, h).end(out);
        });
      });
      up.on('error', () => { if (!res.headersSent) res.writeHead(502).end(); else res.destroy(); });
      req.pipe(up);
    })().catch((err: unknown) => { if (!res.headersSent) res.writeHead(500).end(String(err)); });
  });
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    get sessions() { return created; },
    get refused() { return refused; },
    get gets() { return gets; },
    get listings() { return listings; },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
