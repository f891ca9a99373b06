/**
 * Turns whatever an S3 request produced (an error reply, an SDK exception, a socket error,
 * our own timeout) into one of three verdicts:
 *   { retry: reason }  - transient: back off and try again (reason labels sluice_s3_retries_total);
 *   { renew: error }   - the credentials expired (ExpiredToken): renew them and retry at once,
 *                        once (./credentials.ts); `error` is the failure if that was done already;
 *   { fail: error }    - final: a typed SluiceError whose message names the bucket/key.
 * `exhausted()` builds the error raised when retries run out. This is the only place in
 * src/s3/ that knows S3 error codes, so the SDK path (list, head) and the undici path
 * (ranged GETs) fail in exactly the same way.
 */
import {
  ConfigError,
  AccessDeniedError, AbortedError, BadRangeReplyError, EndpointUnreachableError, InvalidCredentialsError,
  MissingCredentialsError, NoSuchBucketError, NoSuchKeyError, ObjectArchivedError, ObjectChangedError, RetriesExhaustedError,
  S3Error, SluiceError, TimeoutError, TlsCertificateError,
} from '../errors.js';

export type RetryReason = 'throttled' | 'server_error' | 'reset' | 'timeout' | 'short_body' | 'unreachable';
/**
 * The `operation` label of the S3 metrics: 'versioning' is GetBucketVersioning (snapshots ask it once);
 * 'cache_get' and 'cache_put' are the whole-object GETs and PUTs of the cache bucket (src/cache/cache-bucket.ts),
 * so 'get' stays the source's ranged GETs alone.
 */
export type Operation = 'list' | 'head' | 'get' | 'versioning' | 'cache_get' | 'cache_put';
export type Verdict = { retry: RetryReason; cause: unknown } | { renew: SluiceError } | { fail: SluiceError };

export interface FailureContext {
  operation: Operation;
  bucket: string;
  key?: string | undefined;
  endpoint: string;
  /** The pinned ETag of a GET, for ObjectChangedError. */
  etag?: string | undefined;
  /** The version a GET is pinned to (a snapshot's, issue 15). */
  versionId?: string | undefined;
  /** The bucket is addressed as bucket.host (./addressing.ts): a DNS failure then hints --path-style. */
  virtualHosted?: boolean | undefined;
}

/** Internal: a transient failure detected by our own code (short body, stalled attempt). */
export class TransientError extends Error {
  constructor(readonly reason: RetryReason, message: string) {
    super(message);
    this.name = 'TransientError';
  }
}

/**
 * Internal: S3 refused a request's credentials as expired (a verdict of { renew }), thrown
 * out of an attempt so that the retry loop renews them; `error` is the failure to raise
 * when renewing does not help.
 */
export class ExpiredCredentials extends Error {
  constructor(readonly error: SluiceError) {
    super(error.message);
    this.name = 'ExpiredCredentials';
  }
}

const THROTTLE_CODES = new Set(['SlowDown', 'Throttling', 'ThrottlingException', 'RequestLimitExceeded', 'TooManyRequests', 'RequestThrottled', 'TooManyRequestsException']);
const CREDENTIAL_CODES = new Set(['InvalidAccessKeyId', 'SignatureDoesNotMatch', 'ExpiredToken', 'InvalidToken', 'TokenRefreshRequired', 'InvalidSecurity']);
/** Of those, the ones that say "these were good but are too old": new credentials may pass. */
const EXPIRED_CODES = new Set(['ExpiredToken', 'TokenRefreshRequired']);
const SERVER_CODES = new Set(['InternalError', 'ServiceUnavailable', 'InternalServerError', 'BadGateway', 'GatewayTimeout']);
/** Errors from connecting: nothing was sent, the endpoint is wrong or down. */
const UNREACHABLE_ERRNO = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'UND_ERR_CONNECT_TIMEOUT']);
/** Errors of an established connection. */
const RESET_ERRNO = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED', 'ETIMEDOUT', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);
const TIMEOUT_ERRNO = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
/** Node's/OpenSSL's codes for a refused server certificate: final, never retried. */
const TLS_CERT_CODES = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT', 'SELF_SIGNED_CERT_IN_CHAIN', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'CERT_UNTRUSTED', 'CERT_SIGNATURE_FAILURE', 'CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/** The text of `<tag>...</tag>` in an S3 error reply body (Code, Message), if any. */
export function xmlField(xml: string, tag: string): string | undefined {
  const m = new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(xml);
  return m?.[1];
}

/**
 * What an attempt throws on an error reply (status >= 300) with body `xml`: the typed error
 * (fail), ExpiredCredentials (renew) or a TransientError (retry); judgeError reads each back.
 */
export function replyFailure(status: number, xml: string, ctx: FailureContext): Error {
  const verdict = judgeReply(status, xmlField(xml, 'Code'), xmlField(xml, 'Message'), ctx);
  if ('fail' in verdict) return verdict.fail;
  if ('renew' in verdict) return new ExpiredCredentials(verdict.renew);
  return new TransientError(verdict.retry, `${status} ${xmlField(xml, 'Code') ?? ''} from s3://${ctx.bucket}/${ctx.key ?? ''}`);
}

function where(ctx: FailureContext): string {
  return `s3://${ctx.bucket}/${ctx.key ?? ''}`;
}

/** Verdict on an HTTP error reply (status >= 300) with its S3 error code and message, if any. */
export function judgeReply(status: number, code: string | undefined, message: string | undefined, ctx: FailureContext): Verdict {
  const verdict = judgeCode(status, code, message, ctx);
  // A HEAD reply has no body, so S3 cannot say why it refused one: expired credentials come
  // as a bare 400 (or 403). Renewing them once tells; a real refusal fails as before.
  if (ctx.operation === 'head' && 'fail' in verdict && (status === 400 || status === 403)
    && (code === undefined || code === 'BadRequest' || code === 'Forbidden')) return { renew: verdict.fail };
  return verdict;
}

function judgeCode(status: number, code: string | undefined, message: string | undefined, ctx: FailureContext): Verdict {
  const cause = new S3Error(`${status} ${code ?? ''} ${message ?? ''}`.trim(), status, code);
  if ((code && THROTTLE_CODES.has(code)) || status === 429 || (status === 503 && code === undefined)) return { retry: 'throttled', cause };
  if ((code && SERVER_CODES.has(code)) || status === 500 || status === 502 || status === 503 || status === 504) return { retry: 'server_error', cause };
  if (code === 'RequestTimeout') return { retry: 'timeout', cause };
  if (code === 'NoSuchBucket') return { fail: new NoSuchBucketError(ctx.bucket, { cause }) };
  if (code === 'NoSuchKey') return { fail: new NoSuchKeyError(ctx.bucket, ctx.key ?? '', { cause }) };
  // GET ?versionId= of a version deleted for good (e.g. a lifecycle rule expiring noncurrent versions).
  if (code === 'NoSuchVersion') {
    return { fail: new NoSuchKeyError(ctx.bucket, ctx.key ?? '', { cause, hint: `Its version ${ctx.versionId ?? ''} recorded in the snapshot was deleted; take a new snapshot` }) };
  }
  // GET of a GLACIER / DEEP_ARCHIVE / archive-tier object that is not restored (issue 15).
  if (code === 'InvalidObjectState') return { fail: new ObjectArchivedError(ctx.bucket, ctx.key ?? '', 'archived', { cause }) };
  if (code && CREDENTIAL_CODES.has(code)) {
    const err = new InvalidCredentialsError(`S3 rejected the credentials for ${where(ctx)} (${code}${message ? `: ${message}` : ''})`, { cause });
    return EXPIRED_CODES.has(code) ? { renew: err } : { fail: err };
  }
  if (code === 'AccessDenied' || (status === 403 && (code === undefined || code === 'Forbidden'))) {
    // A GET of a given version needs s3:GetObjectVersion, not s3:GetObject.
    if (ctx.versionId !== undefined) return { fail: new AccessDeniedError(ctx.bucket, ctx.key, { cause, hint: 'Reading the versions a snapshot recorded (GET ?versionId=) needs s3:GetObjectVersion: grant it to these credentials' }) };
    return { fail: new AccessDeniedError(ctx.bucket, ctx.key, { cause }) };
  }
  if (status === 404 && (code === undefined || code === 'NotFound')) {
    // HEAD replies have no body: a 404 on a key is a missing key, on a listing a missing bucket.
    return { fail: ctx.key !== undefined && ctx.operation !== 'list' ? new NoSuchKeyError(ctx.bucket, ctx.key, { cause }) : new NoSuchBucketError(ctx.bucket, { cause }) };
  }
  if (status === 412 || code === 'PreconditionFailed') {
    return { fail: new ObjectChangedError(ctx.bucket, ctx.key ?? '', ctx.etag ?? 'unknown', undefined, { cause }) };
  }
  if (status === 416 || code === 'InvalidRange') {
    return { fail: new BadRangeReplyError(`S3 refused the range asked of ${where(ctx)} (${status} ${code ?? ''}): the object is shorter than the listing said`, { cause }) };
  }
  if (code === 'PermanentRedirect' || code === 'AuthorizationHeaderMalformed' || status === 301) {
    return { fail: new S3Error(`bucket ${JSON.stringify(ctx.bucket)} is in another region (${code ?? status})`, status, code, { cause, hint: 'Set --region (or AWS_REGION) to the bucket\'s region' }) };
  }
  if (code === 'RequestTimeTooSkewed') {
    return { fail: new S3Error(`S3 refused ${where(ctx)}: this machine's clock is off (${code})`, status, code, { cause, hint: 'Synchronise the clock (NTP)' }) };
  }
  return { fail: new S3Error(`S3 ${ctx.operation} of ${where(ctx)} failed: ${status} ${code ?? ''}${message ? ` (${message})` : ''}`, status, code, { cause }) };
}

function errnoOf(err: unknown, depth = 0): string | undefined {
  if (depth > 4 || err === null || typeof err !== 'object') return undefined;
  const e = err as { code?: unknown; cause?: unknown; errors?: unknown };
  if (typeof e.code === 'string' && (UNREACHABLE_ERRNO.has(e.code) || RESET_ERRNO.has(e.code) || TIMEOUT_ERRNO.has(e.code))) return e.code;
  if (Array.isArray(e.errors)) for (const inner of e.errors) { const c = errnoOf(inner, depth + 1); if (c) return c; }
  return errnoOf(e.cause, depth + 1);
}

/** The TLS certificate code in an error or its causes (undici and the SDK wrap socket errors). */
function tlsCodeOf(err: unknown, depth = 0): string | undefined {
  if (depth > 4 || err === null || typeof err !== 'object') return undefined;
  const e = err as { code?: unknown; cause?: unknown; errors?: unknown };
  if (typeof e.code === 'string' && TLS_CERT_CODES.has(e.code)) return e.code;
  if (Array.isArray(e.errors)) for (const inner of e.errors) { const c = tlsCodeOf(inner, depth + 1); if (c) return c; }
  return tlsCodeOf(e.cause, depth + 1);
}

/** Verdict on a thrown error: an SDK service exception, a socket error, or one of ours. */
/**
 * An https:// endpoint whose port speaks plain HTTP: OpenSSL reads the HTTP reply as a TLS
 * record and fails with "wrong version number" (undici: ERR_SSL_WRONG_VERSION_NUMBER; the
 * SDK's handler: EPROTO with OpenSSL's text). Retrying cannot help.
 */
function isTlsToPlainHttp(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | undefined;
  return e?.code === 'ERR_SSL_WRONG_VERSION_NUMBER' || (typeof e?.message === 'string' && /SSL routines:[^ ]*:wrong version number/.test(e.message));
}

export function judgeError(err: unknown, ctx: FailureContext): Verdict {
  if (err instanceof TransientError) return { retry: err.reason, cause: err };
  if (err instanceof ExpiredCredentials) return { renew: err.error };
  if (err instanceof SluiceError) return { fail: err };
  const e = err as { name?: string; Code?: string; message?: string; $metadata?: { httpStatusCode?: number } };
  if (e?.name === 'CredentialsProviderError') return { fail: new MissingCredentialsError({ cause: err }) };
  if (e?.name === 'AbortError') return { fail: new AbortedError(undefined, { cause: err }) };
  const status = e?.$metadata?.httpStatusCode;
  if (typeof status === 'number' && status >= 300) {
    const code = e.Code ?? (e.name && e.name !== 'Error' && e.name !== 'Unknown' && e.name !== 'UnknownError' ? e.name : undefined);
    return judgeReply(status, code, e.message && e.message !== 'UnknownError' ? e.message : undefined, ctx);
  }
  if (isTlsToPlainHttp(err)) {
    return { fail: new ConfigError(`the endpoint ${ctx.endpoint} speaks plain HTTP, not HTTPS (the TLS handshake got an HTTP reply)`, {
      hint: `Use http:// in --endpoint (${ctx.endpoint.replace(/^https:/i, 'http:')})`, cause: err,
    }) };
  }
  const tls = tlsCodeOf(err);
  if (tls) return { fail: new TlsCertificateError(ctx.endpoint, tls, { cause: err }) };
  const errno = errnoOf(err);
  if (errno && UNREACHABLE_ERRNO.has(errno)) return { retry: 'unreachable', cause: err };
  if (errno && TIMEOUT_ERRNO.has(errno)) return { retry: 'timeout', cause: err };
  if (errno && RESET_ERRNO.has(errno)) return { retry: 'reset', cause: err };
  if (e?.name === 'TimeoutError' || e?.name === 'RequestTimeout') return { retry: 'timeout', cause: err };
  return { fail: new S3Error(`S3 ${ctx.operation} of ${where(ctx)} failed: ${e?.message ?? String(err)}`, undefined, undefined, { cause: err }) };
}

function hostOf(endpoint: string): string {
  try { return new URL(endpoint).hostname; } catch { return '<endpoint host>'; }
}

/** The error raised when the attempts of a request ran out; `reason` is the last failure's. */
export function exhausted(reason: RetryReason, attempts: number, cause: unknown, ctx: FailureContext, timeoutMs: number): SluiceError {
  if (reason === 'unreachable') {
    const errno = errnoOf(cause);
    if (ctx.virtualHosted && (errno === 'ENOTFOUND' || errno === 'EAI_AGAIN')) {
      return new EndpointUnreachableError(ctx.endpoint, {
        cause, hint: `The name ${ctx.bucket}.${hostOf(ctx.endpoint)} does not resolve (virtual-hosted addressing): pass --path-style if the endpoint serves buckets as endpoint/bucket/key`,
      });
    }
    return new EndpointUnreachableError(ctx.endpoint, { cause });
  }
  if (reason === 'timeout') {
    return new TimeoutError(`S3 ${ctx.operation} of ${where(ctx)} made no progress for ${timeoutMs} ms, ${attempts} times`, {
      cause, hint: 'Check the network to S3, or raise --request-timeout',
    });
  }
  const last = cause instanceof Error ? cause.message : String(cause);
  return new RetriesExhaustedError(`S3 ${ctx.operation} of ${where(ctx)} failed ${attempts} times (last: ${reason}: ${last})`, attempts, {
    cause, hint: reason === 'throttled' ? 'S3 is throttling this prefix; lower --max-connections or retry later' : 'Retry later, or raise --max-attempts',
  });
}
