/**
 * SigV4 signing of our own requests (data-path GETs, and the HEADs and ListObjectsV2 pages
 * that go through the wire client, ./wire.ts), with node:crypto: no SDK code on the path to
 * the first byte (issue 44: the SDK's chunks cost ~0.3 CPU s to compile at every start).
 *
 * The algorithm (AWS "Signature Version 4", S3 flavour):
 *   canonical request = METHOD \n path \n sorted query \n sorted "name:value" headers \n
 *                       signed header names \n payload hash
 *   string to sign    = AWS4-HMAC-SHA256 \n date \n date/region/service/aws4_request \n sha256(canonical)
 *   signature         = HMAC(HMAC(HMAC(HMAC(HMAC("AWS4"+secret, day), region), service), "aws4_request"), string to sign)
 * S3 differs from other services in two ways that matter here: the canonical path is the
 * path exactly as sent (keys are URI-encoded once, by ./addressing.ts), and the payload hash
 * is sent as the x-amz-content-sha256 header; our requests have no body, so UNSIGNED-PAYLOAD
 * spares hashing. Credentials come from a provider (static, or the SDK's standard chain,
 * loaded only when needed) that resolves, caches and refreshes them. The day's signing key
 * is cached per (secret, day, region, service): one HMAC per request beyond that.
 */
import { createHash, createHmac } from 'node:crypto';

/** Credentials as the SDK's providers give them. */
export interface SigningCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

/** Static credentials, or a provider of them (the SDK's chain, or ours). */
export type CredentialSource = SigningCredentials | (() => Promise<SigningCredentials>);

export interface GetSignerOptions {
  /** scheme://host[:port] the request goes to (the signed Host header). */
  origin: string;
  region: string;
  credentials: CredentialSource;
  /** Ignored: kept so that callers written for the SDK's signer still compile. */
  sha256?: unknown;
}

/** Signs a request of `path` (already encoded) with `headers`; resolves with every header to send. */
export type SignGet = (path: string, headers: Record<string, string>, signingDate?: Date, query?: Record<string, string>, method?: 'GET' | 'HEAD') => Promise<Record<string, string>>;

/** RFC 3986 encoding, as SigV4 wants query names and values (encodeURIComponent leaves !'()* alone). */
export function sigv4Escape(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** The canonical (and sent) query string: names sorted, names and values RFC 3986-encoded. */
export function canonicalQuery(query: Record<string, string>): string {
  return Object.keys(query).sort().map((k) => `${sigv4Escape(k)}=${sigv4Escape(query[k]!)}`).join('&');
}

/** Headers a proxy may change on the way: never signed (the SDK's list, less what we never send). */
const UNSIGNABLE = new Set(['authorization', 'user-agent', 'x-amzn-trace-id', 'expect', 'connection', 'proxy-authorization']);

/** One day's signing keys, by secret/day/region/service; a new day or credentials add one (a handful per run). */
const keyCache = new Map<string, Buffer>();
/** Past this many cached keys the cache starts over (rotated credentials, many regions): bounds memory. */
const KEY_CACHE_MAX = 64;

function signingKey(secret: string, day: string, region: string, service: string): Buffer {
  const id = `${secret}\n${day}\n${region}\n${service}`;
  let k = keyCache.get(id);
  if (k === undefined) {
    const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest();
    k = hmac(hmac(hmac(hmac(`AWS4${secret}`, day), region), service), 'aws4_request');
    if (keyCache.size >= KEY_CACHE_MAX) keyCache.clear();
    keyCache.set(id, k);
  }
  return k;
}

/**
 * Signs one request: returns `headers` plus host, x-amz-content-sha256 (UNSIGNED-PAYLOAD
 * unless given), x-amz-date, x-amz-security-token (a session token, unless `tokenHeader`
 * names another header for it) and authorization.
 */
export function signRequest(o: {
  method: string; host: string; path: string; query: Record<string, string>; headers: Record<string, string>;
  region: string; service: string; credentials: SigningCredentials; date: Date; tokenHeader?: string;
}): Record<string, string> {
  const amzDate = o.date.toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
  const day = amzDate.slice(0, 8);
  const out: Record<string, string> = { host: o.host, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' };
  for (const [k, v] of Object.entries(o.headers)) out[k.toLowerCase()] = v;
  out['x-amz-date'] = amzDate;
  if (o.credentials.sessionToken !== undefined && o.credentials.sessionToken !== '') out[o.tokenHeader ?? 'x-amz-security-token'] = o.credentials.sessionToken;
  const names = Object.keys(out).filter((n) => !UNSIGNABLE.has(n)).sort();
  const canonicalHeaders = names.map((n) => `${n}:${out[n]!.trim().replace(/\s+/g, ' ')}\n`).join('');
  const signedHeaders = names.join(';');
  const canonical = `${o.method}\n${o.path}\n${canonicalQuery(o.query)}\n${canonicalHeaders}\n${signedHeaders}\n${out['x-amz-content-sha256']}`;
  const scope = `${day}/${o.region}/${o.service}/aws4_request`;
  const toSign = `AWS4-HMAC-SHA256\n${amzDate}\n${scope}\n${createHash('sha256').update(canonical).digest('hex')}`;
  const signature = createHmac('sha256', signingKey(o.credentials.secretAccessKey, day, o.region, o.service)).update(toSign).digest('hex');
  out.authorization = `AWS4-HMAC-SHA256 Credential=${o.credentials.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`;
  return out;
}

export function createGetSigner(o: GetSignerOptions): SignGet {
  const host = new URL(o.origin).host;
  const creds = o.credentials;
  const resolve = typeof creds === 'function' ? creds : async () => creds;
  return async (path, headers, signingDate, query = {}, method = 'GET') => signRequest({
    method, host, path, query, headers, region: o.region, service: 's3', credentials: await resolve(), date: signingDate ?? new Date(),
  });
}

/** S3 Express One Zone session credentials (CreateSession's), as ./express.ts ExpressSessions gives them. */
export interface SessionIdentity {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiration?: Date;
}

/**
 * Signs requests to an S3 Express One Zone directory bucket (./express.ts): with the
 * session's credentials from `session()` (./express.ts ExpressSessions, the SDK client's too: one
 * CreateSession per bucket, cached, refreshed in the background a minute before it expires),
 * service name `s3express`, and the session token as the signed `x-amz-s3session-token`
 * header (not x-amz-security-token).
 */
export function createSessionGetSigner(o: Omit<GetSignerOptions, 'credentials'> & { session: () => Promise<SessionIdentity> }): SignGet {
  const host = new URL(o.origin).host;
  return async (path, headers, signingDate, query = {}, method = 'GET') => {
    const id = await o.session();
    return signRequest({
      method, host, path, query, headers, region: o.region, service: 's3express', date: signingDate ?? new Date(),
      credentials: { accessKeyId: id.accessKeyId, secretAccessKey: id.secretAccessKey, ...(id.sessionToken !== undefined ? { sessionToken: id.sessionToken } : {}) },
      tokenHeader: 'x-amz-s3session-token',
    });
  };
}
