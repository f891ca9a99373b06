/**
 * SigV4 signing of data-path GETs, with the AWS SDK's own signer (@smithy/signature-v4).
 *
 * S3 differs from other services in two ways that matter here: the canonical path is the
 * path exactly as sent (keys are URI-encoded once, by ./addressing.ts, so `uriEscapePath`
 * is off), and the payload hash is sent as the x-amz-content-sha256 header; a GET has no
 * body, so UNSIGNED-PAYLOAD spares hashing. Credentials come from a provider (the S3
 * SDK client's, i.e. the standard chain) and are resolved, cached and refreshed by it.
 */
import { SignatureV4 } from '@smithy/signature-v4';

type SignerInit = ConstructorParameters<typeof SignatureV4>[0];

export interface GetSignerOptions {
  /** scheme://host[:port] the request goes to (the signed Host header). */
  origin: string;
  region: string;
  credentials: SignerInit['credentials'];
  sha256: SignerInit['sha256'];
}

/** Signs a GET of `path` (already encoded) with `headers`; resolves with every header to send. */
export type SignGet = (path: string, headers: Record<string, string>, signingDate?: Date, query?: Record<string, string>) => Promise<Record<string, string>>;

export function createGetSigner(o: GetSignerOptions): SignGet {
  const url = new URL(o.origin);
  const signer = new SignatureV4({
    service: 's3', region: o.region, credentials: o.credentials, sha256: o.sha256,
    uriEscapePath: false,
    applyChecksum: false,
  });
  return async (path, headers, signingDate, query = {}) => {
    const signed = await signer.sign({
      method: 'GET', protocol: url.protocol, hostname: url.hostname,
      ...(url.port ? { port: Number(url.port) } : {}),
      path, query,
      headers: { host: url.host, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', ...headers },
    } as Parameters<SignatureV4['sign']>[0] & { method: string }, signingDate ? { signingDate } : undefined);
    return (signed as unknown as { headers: Record<string, string> }).headers;
  };
}

/** S3 Express One Zone session credentials (CreateSession's), as ./express.ts ExpressSessions gives them. */
export interface SessionIdentity {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiration?: Date;
}

/**
 * Signs data-path GETs to an S3 Express One Zone directory bucket (./express.ts): with the
 * session's credentials from `session()` (./express.ts ExpressSessions, the SDK client's too: one
 * CreateSession per bucket, cached, refreshed in the background a minute before it expires),
 * service name `s3express`, and the session token as the signed `x-amz-s3session-token`
 * header (not x-amz-security-token). One SignatureV4 per session, made when it changes.
 */
export function createSessionGetSigner(o: Omit<GetSignerOptions, 'credentials'> & { session: () => Promise<SessionIdentity> }): SignGet {
  const url = new URL(o.origin);
  let current: SessionIdentity | undefined;
  let signer: SignatureV4 | undefined;
  return async (path, headers, signingDate, query = {}) => {
    const id = await o.session();
    if (id !== current || signer === undefined) {
      current = id;
      signer = new SignatureV4({
        service: 's3express', region: o.region, sha256: o.sha256, uriEscapePath: false, applyChecksum: false,
        credentials: { accessKeyId: id.accessKeyId, secretAccessKey: id.secretAccessKey },
      });
    }
    const signed = await signer.sign({
      method: 'GET', protocol: url.protocol, hostname: url.hostname,
      ...(url.port ? { port: Number(url.port) } : {}),
      path, query,
      headers: {
        host: url.host, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', ...headers,
        ...(id.sessionToken !== undefined ? { 'x-amz-s3session-token': id.sessionToken } : {}),
      },
    } as Parameters<SignatureV4['sign']>[0] & { method: string }, signingDate ? { signingDate } : undefined);
    return (signed as unknown as { headers: Record<string, string> }).headers;
  };
}
