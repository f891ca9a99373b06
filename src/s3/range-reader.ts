/**
 * Ranged GETs, through our own sockets (./wire.ts) or an undici Pool: the exact bytes of one
 * pinned object version, or a typed error.
 *
 * `read(key, start, end, etag)` is an async generator of the bytes of [start, end):
 *  - Each attempt asks for `bytes=pos-(end-1)` with `If-Match: <etag>`, SigV4-signed
 *    (UNSIGNED-PAYLOAD: a GET has no body), and checks the reply before using a byte:
 *      412                         -> ObjectChangedError (the object was overwritten);
 *      ETag header != pinned ETag  -> ObjectChangedError (servers that ignore If-Match);
 *      206                         -> Content-Range must cover pos-(end-1) (s3rver answers
 *                                     bytes=0-0 with the whole object as 206) and agree
 *                                     with Content-Length, else BadRangeReplyError; we
 *                                     take exactly [pos, end) of it;
 *      200                         -> the whole object (s3rver does this for bytes=0-0):
 *                                     its length must cover `end`; we skip to pos and take
 *                                     only [pos, end), then drop the connection;
 *      other errors                -> judged by ./s3-errors.ts (retry or typed error).
 *  - Body bytes are counted. Bytes received before a body breaks (reset, truncation,
 *    stall) are kept - they were validated against the pinned ETag - and the next attempt
 *    asks only for the remainder. So no short buffer and no mix of versions ever leaves.
 *  - A per-attempt watchdog aborts an attempt with no progress (headers or body bytes)
 *    for `requestTimeoutMs`; it is paused while the consumer holds a chunk, so a slow
 *    consumer is not mistaken for a stalled server. It is one timer per attempt that
 *    checks the time of the last progress when it fires (and sleeps again for what is
 *    left), not a timer re-armed per 64 KiB chunk.
 *  - Retries: exponential backoff with full jitter (./retry.ts), up to `maxAttempts`
 *    failed attempts in a row; an attempt that delivered PROGRESS_RESET_BYTES resets the
 *    count (a long stream survives occasional resets). Refused/unresolvable endpoints get
 *    at most UNREACHABLE_MAX_ATTEMPTS.
 *  - A reply of ExpiredToken renews the credentials (./credentials.ts) and retries at once,
 *    without counting a failure; refused again right after, the read fails.
 */
import { performance } from 'node:perf_hooks';
import type { Dispatcher, Pool } from 'undici';
import { AbortedError, BadRangeReplyError, ObjectChangedError } from '../errors.js';
import { inflightBytes, s3BytesReceived, s3FirstByteSeconds, s3InflightRequests, s3Requests, s3Retries, s3RequestSeconds } from '../metrics/metrics.js';
import type { Addressing } from './addressing.js';
import { LimiterTimeout, type ConcurrencyLimiter, type Slot } from './concurrency-limiter.js';
import { OUTAGE_POLL_MS, requestDeadlineMs, type Reachability } from './outage.js';
import { BACKOFF_BASE_MS, backoffMs, sleep } from './retry.js';
import type { CredentialRenewer } from './credentials.js';
import type { SignGet } from './signing.js';
import { logOn } from '../log.js';
import { logS3Request } from './request-log.js';
import { unsafeRequestHead, WireStallError, type Exchange, type WireHeaders, type WirePool } from './wire.js';
import { exhausted, ExpiredCredentials, judgeError, replyFailure, TransientError, type FailureContext, type RetryReason } from './s3-errors.js';


export interface RangeReaderOptions {
  bucket: string;
  addressing: Addressing;
  /**
   * The undici pool that read() (streams) requests through, asked for by each attempt, so
   * that a caller may create it (and import undici) only when a stream first needs it.
   */
  pool: () => Pool | Promise<Pool>;
  /**
   * The data path's own HTTP client (./wire.ts). When given, getRange() reads through it,
   * bodies landing in the caller's buffer, and never asks for `pool`.
   */
  wire?: WirePool;
  sign: SignGet;
  maxAttempts: number;
  requestTimeoutMs: number;
  /** Adaptive bound on concurrent attempts (./concurrency-limiter.ts); unbounded when absent. */
  limiter?: ConcurrencyLimiter;
  /** Set once the endpoint answers; a refused endpoint that once answered is retried by time (./outage.ts). */
  reachability?: Reachability;
  /** Renews the credentials `sign` uses when S3 refuses them as expired; absent, such a refusal is final. */
  credentials?: CredentialRenewer;
}

/**
 * A connection that is refused or a name that does not resolve rarely heals within
 * seconds; 5 attempts (~0.75 s of backoff on average) ride out a restart or DNS blip
 * without making a typo'd --endpoint hang for a minute.
 */
export const UNREACHABLE_MAX_ATTEMPTS = 5;
/** An attempt that delivered 1 MiB had a working connection that then broke: start counting afresh. */
const PROGRESS_RESET_BYTES = 1024 * 1024;
/** S3 error bodies are a few hundred bytes of XML; read at most this much of one. */
const ERROR_BODY_LIMIT = 64 * 1024;

export function normalizeEtag(etag: string): string {
  return etag.replace(/^W\//, '').replace(/^"|"$/g, '');
}

function header(h: Dispatcher.ResponseData['headers'], name: string): string | undefined {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
}

async function readErrorBody(body: Dispatcher.ResponseData['body']): Promise<string> {
  let text = '';
  for await (const chunk of body) {
    text += (chunk as Buffer).toString('utf8');
    if (text.length >= ERROR_BODY_LIMIT) { discard(body); break; }
  }
  return text;
}

/** Drops a body we will not read (closing its connection); its abort error is expected. */
function discard(body: Dispatcher.ResponseData['body']): void {
  body.on('error', () => {});
  body.destroy();
}

function hasCode(err: unknown, code: string): boolean {
  for (let e = err as { code?: unknown; cause?: unknown } | undefined, i = 0; e && i < 4; e = e.cause as typeof e, i++) {
    if (e.code === code) return true;
  }
  return false;
}

/** Which bytes of a reply body are ours: skip this many, then take `expected`; `partial` when more follow. */
interface ReplyPlan {
  skip: number;
  expected: number;
  partial: boolean;
}

/**
 * Checks a ranged GET's success reply (status < 300) for bytes [pos, end) of version `etag`
 * before any body byte is used, and says which bytes of the body are ours.
 */
function checkReply(status: number, header: (name: string) => string | undefined, pos: number, end: number, etag: string, bucket: string, key: string): ReplyPlan {
  const where = `s3://${bucket}/${key}`;
  const replyEtag = header('etag');
  if (replyEtag !== undefined && normalizeEtag(replyEtag) !== normalizeEtag(etag)) {
    throw new ObjectChangedError(bucket, key, etag, replyEtag);
  }
  const length = header('content-length');
  if (status === 206) {
    // Content-Range says exactly which bytes the body holds. A range that covers the one
    // asked (s3rver answers bytes=0-0 with bytes 0-(size-1)) is usable: take our part.
    const cr = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(header('content-range') ?? '');
    const first = cr ? Number(cr[1]) : NaN;
    const last = cr ? Number(cr[2]) : NaN;
    if (!cr || !(first <= pos) || !(last >= end - 1) || (cr[3] !== '*' && Number(cr[3]) <= last)) {
      throw new BadRangeReplyError(`S3 answered bytes=${pos}-${end - 1} of ${where} with Content-Range ${JSON.stringify(header('content-range') ?? null)}`);
    }
    if (length !== undefined && Number(length) !== last - first + 1) {
      throw new BadRangeReplyError(`S3 answered bytes=${pos}-${end - 1} of ${where} with Content-Range ${first}-${last} but Content-Length ${length}`);
    }
    return { skip: pos - first, expected: end - pos, partial: last !== end - 1 || first !== pos };
  }
  if (status === 200) {
    if (length === undefined || !/^\d+$/.test(length) || Number(length) < end) {
      throw new BadRangeReplyError(`S3 answered bytes=${pos}-${end - 1} of ${where} with the whole object, of length ${length ?? 'unknown'}`);
    }
    return { skip: pos, expected: end - pos, partial: Number(length) !== end || pos !== 0 };
  }
  throw new BadRangeReplyError(`S3 answered bytes=${pos}-${end - 1} of ${where} with status ${status}`);
}

/**
 * An attempt's stall detector. Body chunks only stamp `last`; the single timer, when it
 * fires, aborts if nothing happened for `ms` and otherwise sleeps for the time left.
 * While the consumer holds a chunk (hold()..release()) the clock does not run.
 */
class Watchdog {
  private last = performance.now();
  private held = false;
  private timer: NodeJS.Timeout | undefined;
  /** True once the watchdog aborted the attempt. */
  fired = false;

  constructor(private readonly ms: number, private readonly onStall: () => void) {
    this.timer = setTimeout(this.check, ms);
  }

  /** Headers or body bytes arrived. */
  progress(): void {
    this.last = performance.now();
  }

  /** The consumer holds a chunk: not the server's time. */
  hold(): void {
    this.held = true;
  }

  /** The consumer asked for more: the server's clock starts afresh. */
  release(): void {
    this.held = false;
    this.last = performance.now();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private readonly check = (): void => {
    if (this.timer === undefined) return;
    const idle = this.held ? 0 : performance.now() - this.last;
    if (idle >= this.ms) {
      this.timer = undefined;
      this.fired = true;
      this.onStall();
      return;
    }
    this.timer = setTimeout(this.check, this.ms - idle);
  };
}

/** Where a read stands across its attempts. */
interface Progress {
  /** Next byte wanted. */
  pos: number;
  /** Failed attempts in a row. */
  failures: number;
  /** When the last byte arrived (or the read started): an outage may last outageDeadlineMs from here. */
  lastProgress: number;
  /** The credentials' generation (./credentials.ts) when the last attempt was signed. */
  gen: number;
  /** The last failure was an expiry, answered by renewing: another one in a row is final. */
  renewed: boolean;
}

export class RangeReader {
  /** How long a once-reachable endpoint may refuse connections before a read fails (./outage.ts). */
  private readonly outageDeadlineMs: number;

  constructor(private readonly o: RangeReaderOptions) {
    this.outageDeadlineMs = requestDeadlineMs(o);
  }

  /** The bytes of [start, end) of version `etag` of `key`, in order, each exactly once. */
  async *read(key: string, start: number, end: number, etag: string, signal?: AbortSignal): AsyncGenerator<Buffer> {
    const ctx = this.ctx(key, etag);
    const t0 = performance.now();
    const p: Progress = { pos: start, failures: 0, lastProgress: t0, gen: 0, renewed: false };
    inflightBytes.inc(end - start);
    try {
      while (p.pos < end) {
        if (signal?.aborted) throw new AbortedError();
        const before = p.pos;
        try {
          for await (const chunk of this.attempt(key, p.pos, end, etag, p, signal)) {
            p.pos += chunk.length;
            inflightBytes.dec(chunk.length);
            yield chunk;
          }
        } catch (err) {
          await this.afterFailure(err, p, before, ctx, signal);
        }
      }
    } finally {
      inflightBytes.dec(end - p.pos);
      s3RequestSeconds.observe({ operation: 'get' }, (performance.now() - t0) / 1000);
    }
  }

  private ctx(key: string, etag: string): FailureContext {
    const versionId = this.versions?.get(key);
    return { operation: 'get', bucket: this.o.bucket, key, endpoint: this.o.addressing.endpoint, virtualHosted: this.o.addressing.virtualHosted, etag, ...(versionId !== undefined ? { versionId } : {}) };
  }

  /**
   * After a failed attempt that had moved `p.pos` on from `before`: throws the typed error
   * when the failure is final or attempts ran out, else counts the retry and sleeps its backoff.
   */
  private async afterFailure(err: unknown, p: Progress, before: number, ctx: FailureContext, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) throw new AbortedError(undefined, { cause: err });
    const verdict = judgeError(err, ctx);
    if ('fail' in verdict) throw verdict.fail;
    if (p.pos - before >= PROGRESS_RESET_BYTES) p.failures = 0;
    if (p.pos > before) { p.lastProgress = performance.now(); p.renewed = false; }
    if ('renew' in verdict) {
      // Expired credentials: new ones, and the next attempt at once; twice in a row is final.
      if (p.renewed || this.o.credentials === undefined) throw verdict.renew;
      p.renewed = true;
      s3Retries.inc({ operation: 'get', reason: 'expired_credentials' });
      await this.o.credentials.renew(p.gen);
      return;
    }
    p.renewed = false;
    p.failures++;
    let pause = backoffMs(p.failures);
    if (verdict.retry === 'unreachable' && this.o.reachability?.answered) {
      // An outage of an endpoint that answered before: retry by time (./outage.ts).
      const left = this.outageDeadlineMs - (performance.now() - p.lastProgress);
      if (left <= 0) throw exhausted(verdict.retry, p.failures, verdict.cause, ctx, this.o.requestTimeoutMs);
      pause = Math.min(backoffMs(p.failures, Math.random, BACKOFF_BASE_MS, OUTAGE_POLL_MS), left);
    } else {
      const limit = verdict.retry === 'unreachable' ? Math.min(this.o.maxAttempts, UNREACHABLE_MAX_ATTEMPTS) : this.o.maxAttempts;
      if (p.failures >= limit) throw exhausted(verdict.retry, p.failures, verdict.cause, ctx, this.o.requestTimeoutMs);
    }
    s3Retries.inc({ operation: 'get', reason: verdict.retry });
    await sleep(pause, signal);
  }

  /**
   * Exactly the bytes of [start, end) as one buffer: `into` when given (it must hold exactly
   * end - start bytes; a recycled buffer saves the allocation's page faults), else a new one.
   * Body chunks are copied once, straight to their place. Once this settles nothing writes
   * to `into` any more, so a caller may recycle it even after a failure.
   */
  async getRange(key: string, start: number, end: number, etag: string, signal?: AbortSignal, into?: Buffer, onFilled?: (filled: number) => void): Promise<Buffer> {
    if (into !== undefined && into.length !== end - start) throw new RangeError(`getRange into a buffer of ${into.length} bytes for ${end - start} bytes`);
    const out = into ?? Buffer.allocUnsafe(end - start);
    const filled = into !== undefined ? onFilled : undefined;
    if (this.o.wire) return this.getRangeWire(this.o.wire, key, start, end, etag, out, signal, filled);
    let off = 0;
    for await (const chunk of this.read(key, start, end, etag, signal)) {
      chunk.copy(out, off);
      off += chunk.length;
      filled?.(off);
    }
    if (off !== out.length) throw new BadRangeReplyError(`internal: got ${off} of ${out.length} bytes of s3://${this.o.bucket}/${key}`);
    return out;
  }

  /** getRange() through the wire client: attempts land their bytes in `out` until it is full. */
  private async getRangeWire(wire: WirePool, key: string, start: number, end: number, etag: string, out: Buffer, signal?: AbortSignal, onFilled?: (filled: number) => void): Promise<Buffer> {
    const ctx = this.ctx(key, etag);
    const t0 = performance.now();
    const p: Progress = { pos: start, failures: 0, lastProgress: t0, gen: 0, renewed: false };
    inflightBytes.inc(end - start);
    try {
      while (p.pos < end) {
        if (signal?.aborted) throw new AbortedError();
        const before = p.pos;
        try {
          await this.attemptInto(wire, key, p, end, etag, out, start, signal, onFilled);
        } catch (err) {
          await this.afterFailure(err, p, before, ctx, signal);
        }
      }
    } finally {
      inflightBytes.dec(end - start);
      s3RequestSeconds.observe({ operation: 'get' }, (performance.now() - t0) / 1000);
    }
    return out;
  }

  /**
   * One attempt through the wire client: validated body bytes go to out[p.pos - base ...],
   * landing there straight from the socket where the framing allows; p.pos moves with them,
   * also when the attempt then fails. One promise and one timer per attempt, none per chunk.
   */
  private async attemptInto(wire: WirePool, key: string, p: Progress, end: number, etag: string, out: Buffer, base: number, signal?: AbortSignal, onFilled?: (filled: number) => void): Promise<void> {
    const ctx = this.ctx(key, etag);
    const where = `s3://${this.o.bucket}/${key}`;
    const slot = await this.slot(where, signal);
    let ok = false;
    let status = 'error';
    let received = 0;
    let headersCame = false;
    let abort: (() => void) | undefined;
    const onAbort = () => abort?.();
    signal?.addEventListener('abort', onAbort, { once: true });
    const t0 = performance.now();
    const first = p.pos;
    const attempt = p.failures + 1;
    let requestId: string | undefined;
    let failure: unknown;
    s3InflightRequests.inc({ operation: 'get' });
    try {
      const { path, headers } = await this.signedGet(key, p.pos, end, etag);
      p.gen = this.o.credentials?.generation ?? 0;
      if (signal?.aborted) throw new AbortedError();
      await new Promise<void>((resolve, reject) => {
        const from = p.pos;
        let plan: ReplyPlan | undefined;
        let got = 0;
        let errorCode = 0;
        let errorText = '';
        let ex: Exchange | undefined = undefined;
        const finish = (err?: unknown) => {
          if (ex === undefined) return;
          const e = ex;
          ex = undefined;
          abort = undefined;
          if (err === undefined) { resolve(); return; }
          e.close();
          reject(err);
        };
        abort = () => finish(new AbortedError());
        const take = (n: number) => {
          got += n;
          p.pos += n;
          onFilled?.(p.pos - base);
          if (got === plan!.expected) {
            if (plan!.partial) { const e = ex; ok = true; finish(); e?.close(); } // the rest is not ours
          }
        };
        ex = wire.request(path, headers, {
          onHeaders: (code: number, h: WireHeaders) => {
            headersCame = true;
            status = String(code);
            if (logOn.debug) requestId = h['x-amz-request-id'];
            if (this.o.reachability) this.o.reachability.answered = true;
            s3FirstByteSeconds.observe({ operation: 'get' }, (performance.now() - t0) / 1000);
            if (code >= 300) { errorCode = code; return; }
            try {
              plan = checkReply(code, (n) => h[n], from, end, etag, this.o.bucket, key);
            } catch (err) {
              finish(err);
            }
          },
          landing: () => (plan !== undefined && plan.skip === 0 && got < plan.expected ? out.subarray(p.pos - base, end - base) : undefined),
          onLanded: (n: number) => {
            received += n;
            take(n);
          },
          onBody: (chunk: Buffer) => {
            received += chunk.length;
            if (errorCode !== 0) {
              errorText += chunk.toString('utf8');
              if (errorText.length >= ERROR_BODY_LIMIT) {
                try { this.errorReply(errorCode, errorText, ctx, slot); } catch (err) { finish(err); }
              }
              return;
            }
            if (plan === undefined) return;
            let c = chunk;
            if (plan.skip > 0) {
              const n = Math.min(plan.skip, c.length);
              plan.skip -= n;
              c = c.subarray(n);
            }
            if (c.length === 0) return;
            if (got + c.length > plan.expected) {
              if (!plan.partial) { finish(new BadRangeReplyError(`S3 sent more than the ${plan.expected} bytes asked of ${where}`)); return; }
              c = c.subarray(0, plan.expected - got);
            }
            c.copy(out, p.pos - base);
            take(c.length);
          },
          onEnd: () => {
            try {
              if (errorCode !== 0) this.errorReply(errorCode, errorText, ctx, slot);
              if (plan !== undefined && got < plan.expected) throw new TransientError('short_body', `body of ${where} ended after ${got} of ${plan.expected} bytes`);
              ok = true;
              finish();
            } catch (err) {
              finish(err);
            }
          },
          onError: (err: Error) => finish(err),
        });
      });
    } catch (err) {
      failure = err;
      if (err instanceof WireStallError) throw new TransientError('timeout', `no progress on ${where} for ${this.o.requestTimeoutMs} ms`);
      if (headersCame && !(err instanceof TransientError) && !(err instanceof ExpiredCredentials) && !(err as { code?: string })?.code?.startsWith?.('SLUICE_') && !signal?.aborted) {
        // The headers came and then the body broke: a reset, or a truncated body.
        const reason: RetryReason = hasCode(err, 'ECONNRESET') ? 'reset' : 'short_body';
        throw new TransientError(reason, `body of ${where} broke: ${(err as Error)?.message ?? err}`);
      }
      throw err;
    } finally {
      signal?.removeEventListener('abort', onAbort);
      s3BytesReceived.inc(received);
      s3InflightRequests.dec({ operation: 'get' });
      s3Requests.inc({ operation: 'get', status });
      if (logOn.debug) logS3Request({ op: 'get', bucket: this.o.bucket, key, range: `bytes=${first}-${end - 1}`, status, requestId, ms: performance.now() - t0, attempt, bytes: received, error: failure });
      if (slot) {
        if (ok) this.o.limiter!.onSuccess();
        slot.release();
      }
    }
  }

  /** Versions to GET by key (issue 15: a snapshot of a versioned bucket); see S3ObjectClient.pinVersions. */
  private versions: ReadonlyMap<string, string> | undefined;

  pinVersions(versions: ReadonlyMap<string, string> | undefined): void {
    this.versions = versions;
  }

  /**
   * The request path and signed headers of one ranged GET: `?versionId=` when the key is
   * pinned to a version (that version's bytes, even after an overwrite), and If-Match on the
   * ETag always.
   */
  async signedGet(key: string, pos: number, end: number, etag: string): Promise<{ path: string; headers: Record<string, string> }> {
    const base = this.o.addressing.pathFor(key);
    const versionId = this.versions?.get(key);
    const range = { range: `bytes=${pos}-${end - 1}`, 'if-match': etag };
    // An ETag from a snapshot or a listing is written into the request: refuse CR/LF and
    // other controls here too, so the stream path (undici) fails with the same typed error.
    const unsafe = unsafeRequestHead(base, range);
    if (unsafe !== undefined) throw unsafe;
    if (versionId === undefined) return { path: base, headers: await this.o.sign(base, range) };
    const headers = await this.o.sign(base, range, undefined, { versionId });
    return { path: `${base}?versionId=${encodeURIComponent(versionId).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)}`, headers };
  }

  /** One attempt: yields validated bytes from `pos` on; throws when the reply is bad or breaks. */
  private async *attempt(key: string, pos: number, end: number, etag: string, p: Progress, signal?: AbortSignal): AsyncGenerator<Buffer> {
    const ctx: FailureContext = { operation: 'get', bucket: this.o.bucket, key, endpoint: this.o.addressing.endpoint, virtualHosted: this.o.addressing.virtualHosted, etag };
    const where = `s3://${this.o.bucket}/${key}`;
    const slot = await this.slot(where, signal);
    let ok = false;
    const ctrl = new AbortController();
    let watchdog: Watchdog | undefined;
    const onAbort = () => ctrl.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    let status = 'error';
    let body: Dispatcher.ResponseData['body'] | undefined;
    const t0 = performance.now();
    let requestId: string | undefined;
    let received = 0;
    let failure: unknown;
    s3InflightRequests.inc({ operation: 'get' });
    try {
      watchdog = new Watchdog(this.o.requestTimeoutMs, () => ctrl.abort());
      const { path, headers } = await this.signedGet(key, pos, end, etag);
      p.gen = this.o.credentials?.generation ?? 0;
      const pool = await this.o.pool();
      const res = await pool.request({ path, method: 'GET', headers, signal: ctrl.signal });
      body = res.body;
      status = String(res.statusCode);
      if (logOn.debug) requestId = header(res.headers, 'x-amz-request-id');
      if (this.o.reachability) this.o.reachability.answered = true;
      s3FirstByteSeconds.observe({ operation: 'get' }, (performance.now() - t0) / 1000);
      watchdog.progress();
      if (res.statusCode >= 300) {
        this.errorReply(res.statusCode, await readErrorBody(res.body), ctx, slot);
      }
      const { skip: skip0, expected, partial } = checkReply(res.statusCode, (n) => header(res.headers, n), pos, end, etag, this.o.bucket, key);
      let skip = skip0;
      let got = 0;
      for await (const raw of res.body) {
        let chunk = raw as Buffer;
        s3BytesReceived.inc(chunk.length);
        received += chunk.length;
        watchdog.progress();
        if (skip > 0) {
          const n = Math.min(skip, chunk.length);
          skip -= n;
          chunk = chunk.subarray(n);
          if (chunk.length === 0) continue;
        }
        if (got + chunk.length > expected) {
          if (!partial) throw new BadRangeReplyError(`S3 sent more than the ${expected} bytes asked of ${where}`);
          chunk = chunk.subarray(0, expected - got);
        }
        got += chunk.length;
        watchdog.hold();
        yield chunk;
        watchdog.release();
        if (got === expected && partial) { discard(res.body); ok = true; return; } // the rest is not ours
      }
      if (got < expected) throw new TransientError('short_body', `body of ${where} ended after ${got} of ${expected} bytes`);
      ok = true;
    } catch (err) {
      failure = err;
      if (watchdog?.fired) throw new TransientError('timeout', `no progress on ${where} for ${this.o.requestTimeoutMs} ms`);
      if (body !== undefined && !(err instanceof TransientError) && !(err instanceof ExpiredCredentials) && !(err as { code?: string })?.code?.startsWith?.('SLUICE_') && !signal?.aborted) {
        // The headers came and then the body broke: a reset, or a truncated body.
        const reason: RetryReason = hasCode(err, 'ECONNRESET') ? 'reset' : 'short_body';
        throw new TransientError(reason, `body of ${where} broke: ${(err as Error)?.message ?? err}`);
      }
      throw err;
    } finally {
      watchdog?.stop();
      signal?.removeEventListener('abort', onAbort);
      if (body && !body.destroyed && !body.readableEnded) discard(body);
      s3InflightRequests.dec({ operation: 'get' });
      s3Requests.inc({ operation: 'get', status });
      if (logOn.debug) logS3Request({ op: 'get', bucket: this.o.bucket, key, range: `bytes=${pos}-${end - 1}`, status, requestId, ms: performance.now() - t0, attempt: p.failures + 1, bytes: received, error: failure });
      if (slot) {
        if (ok) this.o.limiter!.onSuccess();
        slot.release();
      }
    }
  }

  /** An error reply (status >= 300) with its body: the typed error, or a TransientError to retry. */
  private errorReply(status: number, xml: string, ctx: FailureContext, slot: Slot | undefined): never {
    const err = replyFailure(status, xml, ctx);
    if (err instanceof TransientError && err.reason === 'throttled' && slot) this.o.limiter!.onThrottle(slot);
    throw err;
  }

  /** A concurrency slot for one attempt; waiting longer than --request-timeout is a timed-out attempt. */
  private async slot(where: string, signal?: AbortSignal): Promise<Slot | undefined> {
    if (!this.o.limiter) return undefined;
    try {
      return await this.o.limiter.acquire(this.o.requestTimeoutMs, signal);
    } catch (err) {
      if (err instanceof LimiterTimeout) throw new TransientError('timeout', `${err.message} for ${where}`);
      throw err;
    }
  }
}
