/**
 * Short-lived credentials on loopback (issue 43, deliverable 5): a container-credentials
 * endpoint and an S3 front that holds every request to them.
 *
 *  - The endpoint (AWS_CONTAINER_CREDENTIALS_FULL_URI=`credentialsUri`) answers each GET with
 *    new temporary credentials, as the ECS/EKS agent does: AccessKeyId, SecretAccessKey,
 *    Token, Expiration. They are valid for `validMs` from issue (the front's truth).
 *  - The Expiration it reports is shifted so that the SDK's own refresh does not hide the
 *    expiry: the SDK's default chain refreshes credentials once they are within
 *    `sdkWindowMs` of their Expiration (found below, from the SDK's own predicate), so
 *    credentials that said "valid for 2 s" would be fetched again before every request.
 *    The endpoint reports Expiration = issue + sdkWindowMs + validMs + `skewMs`: the SDK
 *    starts refreshing `skewMs` after the front has stopped honouring them, as with a host
 *    clock `skewMs` behind the issuer's. In that gap every request is refused, so a client
 *    that only waits for the SDK to refresh fails; one that renews on a refusal keeps reading.
 *  - The front (`endpoint`) checks each request's SigV4 Authorization: a known access key
 *    id, its session token in X-Amz-Security-Token, a signature made with its secret key,
 *    and that it has not expired; an expired one gets 400 ExpiredToken (S3's reply), any
 *    other failure 403. Requests that pass are signed again with the local server's own
 *    credentials and forwarded to it, replies streamed back unchanged.
 *  - `latencyMs` delays each ranged GET, so that a download spans several lifetimes;
 *    `expireAll` refuses every request as expired, however new its credentials.
 */
import http from 'node:http';
import { createHash, createHmac, randomBytes } from 'node:crypto';
import type { AddressInfo, Socket } from 'node:net';
import { SignatureV4 } from '@smithy/signature-v4';
// The predicate the SDK's default credential chain uses to decide that credentials need a
// refresh (it is not re-exported by @aws-sdk/client-s3): probed below for its window.
import { credentialsTreatedAsExpired } from '@aws-sdk/credential-provider-node';

type Data = string | ArrayBuffer | ArrayBufferView;
const bytes = (d: Data): string | Uint8Array => (typeof d === 'string' ? d : d instanceof ArrayBuffer ? new Uint8Array(d) : new Uint8Array(d.buffer, d.byteOffset, d.byteLength));

/** SHA-256 (or its HMAC) in the shape SignatureV4 asks for. */
class Sha256 {
  private readonly h: ReturnType<typeof createHash>;
  constructor(secret?: Data) {
    this.h = (secret !== undefined ? createHmac('sha256', bytes(secret)) : createHash('sha256')) as ReturnType<typeof createHash>;
  }
  update(data: Data): void { this.h.update(bytes(data)); }
  async digest(): Promise<Uint8Array> { return this.h.digest(); }
}

/**
 * How long before their Expiration the SDK's default chain refreshes credentials, found by
 * bisecting its own predicate over [0, 1 h] to the millisecond.
 */
export function sdkRefreshWindowMs(): number {
  const now = Date.now();
  const expired = (ms: number) => credentialsTreatedAsExpired({ accessKeyId: 'x', secretAccessKey: 'x', expiration: new Date(now + ms) });
  let lo = 0; // treated as expired
  let hi = 3_600_000; // not treated as expired
  if (!expired(lo) || expired(hi)) throw new Error('the SDK\'s refresh predicate is not a window of under an hour');
  for (let i = 0; i < 40 && hi - lo > 1; i++) {
    const mid = Math.floor((lo + hi) / 2);
    if (expired(mid)) lo = mid; else hi = mid;
  }
  return hi;
}

interface Issued {
  secret: string;
  token: string;
  issuedAt: number;
}

export interface CredentialsFront {
  /** AWS_CONTAINER_CREDENTIALS_FULL_URI. */
  credentialsUri: string;
  /** The S3 endpoint to give the client. */
  endpoint: string;
  sdkWindowMs: number;
  /** Credentials issued so far. */
  issued(): number;
  /** Requests refused as expired: ranged GETs (data path) and the others (SDK path). */
  refused: { data: number; sdk: number };
  /** Requests forwarded: ranged GETs and the others. */
  forwarded: { data: number; sdk: number };
  /** Requests refused for any other reason (unknown key, wrong token or signature): must stay 0. */
  rejected: string[];
  /** Delay before forwarding each ranged GET. */
  latencyMs: number;
  /** Refuse every request as expired, new credentials too (credentials that are never good). */
  expireAll: boolean;
  close(): Promise<void>;
}

const S3RVER = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };
const AUTH_RE = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/;

function xmlError(res: http.ServerResponse, status: number, code: string, message: string): void {
  const body = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message><RequestId>credentials-front</RequestId></Error>`;
  res.writeHead(status, { 'content-type': 'application/xml', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** `x-amz-date` (yyyymmddThhmmssZ) as a Date. */
function amzDate(v: string): Date {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(v);
  if (!m) return new Date(NaN);
  return new Date(Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!));
}

function queryOf(url: URL): Record<string, string | string[]> {
  const q: Record<string, string | string[]> = {};
  for (const [k, v] of url.searchParams) {
    const had = q[k];
    q[k] = had === undefined ? v : Array.isArray(had) ? [...had, v] : [had, v];
  }
  return q;
}

async function signatureOf(o: {
  method: string; host: string; path: string; query: Record<string, string | string[]>; headers: Record<string, string>;
  region: string; service: string; date: Date; credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
}): Promise<Record<string, string>> {
  const signer = new SignatureV4({ service: o.service, region: o.region, credentials: o.credentials, sha256: Sha256, uriEscapePath: false, applyChecksum: false });
  const [hostname, port] = o.host.split(':');
  const signed = await signer.sign({
    method: o.method, protocol: 'http:', hostname: hostname!, ...(port ? { port: Number(port) } : {}), path: o.path, query: o.query, headers: o.headers,
  } as Parameters<SignatureV4['sign']>[0] & { method: string }, { signingDate: o.date });
  return (signed as unknown as { headers: Record<string, string> }).headers;
}

export async function startCredentialsFront(o: { targetPort: number; validMs: number; skewMs: number }): Promise<CredentialsFront> {
  const sdkWindowMs = sdkRefreshWindowMs();
  const keys = new Map<string, Issued>();
  let serial = 0;
  const sockets = new Set<Socket>();
  const agent = new http.Agent({ keepAlive: true });

  const creds = http.createServer((req, res) => {
    const issuedAt = Date.now();
    const id = `ASIASLUICETEST${String(++serial).padStart(6, '0')}`;
    const issued: Issued = { secret: randomBytes(20).toString('base64'), token: randomBytes(48).toString('base64'), issuedAt };
    keys.set(id, issued);
    const body = JSON.stringify({
      AccessKeyId: id, SecretAccessKey: issued.secret, Token: issued.token,
      Expiration: new Date(issuedAt + sdkWindowMs + o.validMs + o.skewMs).toISOString(),
    });
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });

  const front: CredentialsFront = {
    credentialsUri: '', endpoint: '', sdkWindowMs,
    issued: () => serial,
    refused: { data: 0, sdk: 0 }, forwarded: { data: 0, sdk: 0 }, rejected: [], latencyMs: 0, expireAll: false,
    async close() {
      for (const s of sockets) s.destroy();
      await Promise.all([new Promise<void>((r) => s3.close(() => r())), new Promise<void>((r) => creds.close(() => r()))]);
      agent.destroy();
    },
  };

  const s3 = http.createServer((req, res) => {
    void (async () => {
      const ranged = req.method === 'GET' && req.headers.range !== undefined;
      const kind = ranged ? 'data' : 'sdk';
      const url = new URL(req.url ?? '/', 'http://front');
      const reject = (status: number, code: string, why: string) => {
        front.rejected.push(`${req.method} ${url.pathname}: ${why}`);
        xmlError(res, status, code, why);
      };
      const m = AUTH_RE.exec(req.headers.authorization ?? '');
      if (!m) { reject(403, 'AccessDenied', 'no SigV4 Authorization header'); return; }
      const [, keyId, , region, service, signedList, signature] = m;
      const issued = keys.get(keyId!);
      if (!issued) { reject(403, 'InvalidAccessKeyId', `unknown access key id ${keyId}`); return; }
      if (req.headers['x-amz-security-token'] !== issued.token) { reject(403, 'InvalidToken', `wrong session token for ${keyId}`); return; }
      const signedNames = signedList!.split(';');
      const headers: Record<string, string> = {};
      for (const n of signedNames) {
        const v = req.headers[n];
        headers[n] = Array.isArray(v) ? v.join(',') : (v ?? '');
      }
      const date = amzDate(String(req.headers['x-amz-date'] ?? ''));
      const query = queryOf(url);
      const mine = await signatureOf({
        method: req.method ?? 'GET', host: String(req.headers.host ?? ''), path: url.pathname, query, headers, region: region!, service: service!, date,
        credentials: { accessKeyId: keyId!, secretAccessKey: issued.secret, sessionToken: issued.token },
      });
      if (!mine.authorization?.endsWith(`Signature=${signature}`)) { reject(403, 'SignatureDoesNotMatch', `signature of ${keyId} does not verify`); return; }
      if (front.expireAll || Date.now() > issued.issuedAt + o.validMs) {
        front.refused[kind]++;
        req.resume();
        xmlError(res, 400, 'ExpiredToken', 'The provided token has expired.');
        return;
      }
      if (ranged && front.latencyMs > 0) await new Promise((r) => setTimeout(r, front.latencyMs));
      // Forward, signed with the local server's own account.
      const fwdHeaders: Record<string, string> = {};
      for (const [n, v] of Object.entries(headers)) if (n !== 'authorization' && n !== 'x-amz-security-token' && n !== 'x-amz-date') fwdHeaders[n] = v;
      const resigned = await signatureOf({
        method: req.method ?? 'GET', host: String(req.headers.host ?? ''), path: url.pathname, query, headers: fwdHeaders, region: region!, service: service!, date: new Date(),
        credentials: S3RVER,
      });
      front.forwarded[kind]++;
      const up = http.request({ host: '127.0.0.1', port: o.targetPort, method: req.method, path: req.url, headers: resigned, agent }, (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      });
      up.on('error', (err) => { if (!res.headersSent) xmlError(res, 502, 'BadGateway', err.message); else res.destroy(); });
      req.pipe(up);
    })().catch((err: unknown) => { if (!res.headersSent) xmlError(res, 500, 'InternalError', String(err)); else res.destroy(); });
  });
  for (const server of [creds, s3]) server.on('connection', (s: Socket) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });
  await Promise.all([creds, s3].map((server) => new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()))));
  front.credentialsUri = `http://127.0.0.1:${(creds.address() as AddressInfo).port}/v2/credentials/sluice-test`;
  front.endpoint = `http://127.0.0.1:${(s3.address() as AddressInfo).port}`;
  return front;
}
