/**
 * The real ObjectClient: one bucket. ListObjectsV2 pages, HEADs and ranged GETs go through
 * our own HTTP client (./wire.ts, ./range-reader.ts), SigV4-signed by ./signing.ts, listing
 * replies parsed by ./list-parser.ts. @aws-sdk/client-s3 is imported only when a request
 * needs it (issue 44: its ~1.5 MB of code cost ~0.3 CPU s to compile at every start, all
 * before a mount could answer): versioned listings and GetBucketVersioning (snapshots),
 * S3 Express directory buckets (CreateSession and their listing/HEAD), and credentials that
 * need the SDK's chain.
 *
 *  - Credentials: the given static ones; else, when no profile is named (--profile or
 *    AWS_PROFILE), AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY(/AWS_SESSION_TOKEN) as the SDK's
 *    chain would take them first, with no SDK; else the SDK's standard chain (shared
 *    profile, container, IMDS, web identity), loaded then. The data path signs with the same
 *    provider, so rotation is shared. A request refused as expired (ExpiredToken) renews
 *    them once and is retried (./credentials.ts).
 *  - Region: option > AWS_REGION > AWS_DEFAULT_REGION > shared profile > us-east-1.
 *    Endpoint and addressing: see ./addressing.ts.
 *  - Every request, SDK or undici, goes through the same retry policy (./retry.ts, with the
 *    SDK's own retries off) and the same error mapping (./s3-errors.ts), and records the
 *    sluice_s3_* metrics. Listing: ./lister.ts.
 *  - Proxies: HTTP(S)_PROXY and NO_PROXY as curl and the AWS CLI read them (./proxy.ts), for
 *    the SDK's requests (and STS's, which inherit its handler) and the data path alike.
 *  - Options are checked here, at construction, with one-line errors.
 */
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { performance } from 'node:perf_hooks';
import type { S3Client } from '@aws-sdk/client-s3';
import type { Pool } from 'undici';
import { OPTIONS, type Options } from '../config/options.js';
import { AbortedError, AccessDeniedError, InvalidArgumentError, MalformedReplyError, NoSuchKeyError, ObjectChangedError, S3Error } from '../errors.js';
import { parseListObjectsV2 } from './list-parser.js';
import { log, logOn } from '../log.js';
import { logS3Request } from './request-log.js';
import { s3FirstByteSeconds, s3InflightRequests, s3Requests, s3Retries, s3RequestSeconds } from '../metrics/metrics.js';
import { addressingFor, DEFAULT_REGION, endpointFromEnv, parseEndpoint, pathStyleFor, regionFromEnv, type Addressing } from './addressing.js';
import { checkProfile } from './profile.js';
import { compareKeys, listAll, listPruned, type ListPage, type ListPageFn, type ListQuery } from './lister.js';
import type { FirstObjects, ListOptions, ObjectClient, ObjectInfo, RangeOptions, RequestOptions, StreamOptions } from './object-client.js';
import { normalizeEtag, RangeReader, UNREACHABLE_MAX_ATTEMPTS } from './range-reader.js';
import { ConcurrencyLimiter, LimiterTimeout, type Slot } from './concurrency-limiter.js';
import type { Reachability } from './outage.js';
import { requestWhole, WirePool, WireStallError, type WholeReply } from './wire.js';
import { proxyFor, proxySettingsFromEnv, type ProxySettings } from './proxy.js';
import { backoffMs, sleep } from './retry.js';
import { CredentialRenewer, type RefreshableProvider } from './credentials.js';
import { canonicalQuery, createGetSigner, createSessionGetSigner, type SessionIdentity, type SignGet, type SigningCredentials } from './signing.js';
import { directoryBucketZone, ExpressSessions } from './express.js';
import { exhausted, judgeError, replyFailure, TransientError, type FailureContext, type Operation, type Verdict } from './s3-errors.js';
import { mergeVersionPins } from './version-pins.js';

/**
 * The SDK warns at every start on Node < 22 that its releases after January 2027 will need
 * Node 22. sluice pins its SDK and supports Node >= 20, so on stderr (our JSON log lines)
 * that is noise; an explicit setting by the user still wins.
 */
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

export interface S3ClientOptions {
  bucket: string;
  /** S3-compatible endpoint URL; default AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, then AWS S3. */
  endpoint?: string;
  /** Default AWS_REGION, AWS_DEFAULT_REGION, the shared profile, then us-east-1. */
  region?: string;
  /** endpoint/bucket/key instead of bucket.endpoint/key. */
  pathStyle?: boolean;
  /** bucket.endpoint/key on a custom endpoint too (--virtual-hosted); see ./addressing.ts. */
  virtualHosted?: boolean;
  /** Shared profile for credentials and region (--profile), instead of AWS_PROFILE's. */
  profile?: string;
  /** Send x-amz-request-payer: requester on every request (--requester-pays). */
  requesterPays?: boolean;
  /** Send x-amz-expected-bucket-owner on every request (--expected-bucket-owner): S3 refuses with 403 if another account owns the bucket. */
  expectedBucketOwner?: string;
  /** Keep-alive connections of the data-path pool (default: --max-connections' default). */
  maxConnections?: number;
  /** Attempts per request, first try included (default: --max-attempts' default). */
  maxAttempts?: number;
  /** An attempt with no progress for this long is aborted and retried (default: --request-timeout's). */
  requestTimeoutMs?: number;
  /** Static credentials; default the standard AWS chain. */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /** Unsigned requests, no credential lookup (--no-sign-request, for public buckets). */
  noSignRequest?: boolean;
  /** Ranges listed in parallel (./lister.ts); 1 lists flat. Default LIST_CONCURRENCY. */
  listConcurrency?: number;
  /**
   * PEM text of the CAs to trust for an https endpoint, instead of Node's built-in set
   * (--ca-bundle / AWS_CA_BUNDLE). Every connection, SDK or data path, uses it.
   */
  ca?: string;
  /** Proxies to go through; default HTTP_PROXY/HTTPS_PROXY/NO_PROXY from the environment (./proxy.ts). */
  proxies?: ProxySettings;
  /**
   * A client that writes (the cache bucket, src/cache/cache-bucket.ts): a directory bucket's
   * sessions are asked ReadWrite (CreateSession SessionMode), which PutObject needs.
   */
  writes?: boolean;
}

/**
 * 16 listing requests at once: ~16 x 1,000 keys per ~100 ms page is ~160k keys/s, while
 * staying far below S3's 5,500 GET-class requests/s per prefix (LIST counts as GET).
 */
export const LIST_CONCURRENCY = 16;
/** Keep-alive idle time: under S3's ~20 s server-side idle close, so we rarely reuse a dying socket. */
const KEEP_ALIVE_MS = 10_000;
/**
 * 64 MiB: the largest listing page body we read. A page of 1,000 keys of S3's longest
 * (1,024 bytes, URL-encoded up to 3x) is ~3.5 MB; anything far past that is not a listing.
 */
const MAX_LIST_BODY = 64 * 1024 * 1024;
/** 64 KiB: the most of an error reply's body we read (S3's are < 1 KiB). */
const MAX_ERROR_BODY = 64 * 1024;

function checkInt(name: string, v: number, min: number, max: number): number {
  if (!Number.isInteger(v) || v < min || v > max) throw new InvalidArgumentError(`${name} must be an integer between ${min} and ${max}, got ${v}`);
  return v;
}

/**
 * Credentials from the environment, as the SDK's chain takes them first (its fromEnv), or
 * undefined when the chain is needed: a profile is named (then the chain skips the
 * environment), or the keys are not both set.
 */
export function envCredentials(profile: string | undefined, env: NodeJS.ProcessEnv = process.env): SigningCredentials | undefined {
  if (profile !== undefined || env.AWS_PROFILE) return undefined;
  const accessKeyId = env.AWS_ACCESS_KEY_ID;
  const secretAccessKey = env.AWS_SECRET_ACCESS_KEY;
  if (!accessKeyId || !secretAccessKey) return undefined;
  return { accessKeyId, secretAccessKey, ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}) };
}

/** The shared-profile region, if any (the SDK reads AWS_PROFILE and ~/.aws/config). */
async function profileRegion(profile: string | undefined): Promise<string> {
  const { S3Client } = await import('@aws-sdk/client-s3');
  const probe = new S3Client(profile !== undefined ? { profile } : {});
  try {
    return await probe.config.region();
  } catch {
    return DEFAULT_REGION;
  } finally {
    probe.destroy();
  }
}

function statusOf(err: unknown): string {
  const s = (err as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode;
  return typeof s === 'number' ? String(s) : 'error';
}

export class S3ObjectClient implements ObjectClient {
  readonly bucket: string;
  /** The SDK client, made by the first request that needs it (see the header). */
  private sdkClient: Promise<S3Client> | undefined;
  private readonly makeSdk: () => Promise<S3Client>;
  /** Credentials that need no SDK (given, or from the environment), or undefined: the SDK's chain. */
  private readonly fixedCredentials: SigningCredentials | undefined;
  private readonly region: Promise<string>;
  private readonly endpoint: string | undefined;
  private readonly pathStyle: boolean;
  /** Headers every request carries, SDK and data path: requester pays, expected bucket owner. */
  private readonly extraHeaders: Record<string, string>;
  private readonly maxConnections: number;
  private readonly maxAttempts: number;
  private readonly requestTimeoutMs: number;
  private readonly listConcurrency: number;
  private readonly noSignRequest: boolean;
  private readonly ca: string | undefined;
  /** An S3 Express One Zone directory bucket (./express.ts): session auth, unordered listings. */
  private readonly express: boolean;
  /** CreateSession sessions of a directory bucket, one per bucket, refreshed before expiry (./express.ts). */
  private readonly sessions = new ExpressSessions(async (bucket) => {
    const [sdk, { CreateSessionCommand }] = await Promise.all([this.sdk(), import('@aws-sdk/client-s3')]);
    const out = await sdk.send(new CreateSessionCommand({ Bucket: bucket, SessionMode: this.writes ? 'ReadWrite' : 'ReadOnly' }));
    const c = out.Credentials;
    if (!c?.AccessKeyId || !c.SecretAccessKey) throw new S3Error(`CreateSession of ${bucket} returned no credentials`, 200, undefined);
    return { accessKeyId: c.AccessKeyId, secretAccessKey: c.SecretAccessKey, ...(c.SessionToken !== undefined ? { sessionToken: c.SessionToken } : {}), ...(c.Expiration !== undefined ? { expiration: c.Expiration } : {}) };
  });
  /** HTTP(S)_PROXY / NO_PROXY, read once at construction (./proxy.ts). */
  private readonly proxies: ProxySettings;
  private dataPath: Promise<{ addressing: Addressing; wire: WirePool; reader: RangeReader; sign: SignGet }> | undefined;
  /** The undici pool behind streams (getStream without `into`), made by the first such stream. */
  private streamPool: Promise<Pool> | undefined;
  /** AIMD bound on concurrent GET attempts, at most --max-connections (./concurrency-limiter.ts). */
  readonly limiter: ConcurrencyLimiter;
  /** Set once the endpoint answered any request, SDK or data path (./outage.ts). */
  private readonly reachability: Reachability = { answered: false };
  private closed = false;
  /** Versions GETs and HEADs are pinned to, by key: every snapshot's pins, merged (pinVersions). */
  private readonly versions = new Map<string, string>();
  /** The bucket's versioning state, asked once (versioning()). */
  private versioningState: Promise<string | undefined> | undefined;
  /** Renews the SDK's credentials (which the data path signs with too) when S3 says they expired. */
  private readonly renewer: CredentialRenewer | undefined;
  /** S3ClientOptions.writes: Express sessions are asked ReadWrite. */
  private readonly writes: boolean;

  constructor(opts: S3ClientOptions) {
    if (typeof opts.bucket !== 'string' || opts.bucket.length === 0) throw new InvalidArgumentError('bucket must be a non-empty string');
    this.bucket = opts.bucket;
    this.writes = opts.writes ?? false;
    this.maxConnections = checkInt('max-connections', opts.maxConnections ?? OPTIONS.maxConnections.default, 1, 1024);
    this.maxAttempts = checkInt('max-attempts', opts.maxAttempts ?? OPTIONS.maxAttempts.default, 1, 100);
    this.requestTimeoutMs = checkInt('request-timeout', opts.requestTimeoutMs ?? OPTIONS.requestTimeout.default, 1, 3_600_000);
    this.express = directoryBucketZone(opts.bucket) !== undefined;
    // A directory bucket lists in no key order and without StartAfter: one flat listing (./express.ts).
    // At most --max-connections ranges at once: a listing never asks for more than the limiter allows.
    this.listConcurrency = this.express ? 1 : Math.min(this.maxConnections, checkInt('list concurrency', opts.listConcurrency ?? LIST_CONCURRENCY, 1, 256));
    this.limiter = new ConcurrencyLimiter(this.maxConnections);
    this.endpoint = opts.endpoint ?? endpointFromEnv();
    if (this.endpoint !== undefined) parseEndpoint(this.endpoint);
    if (opts.pathStyle && opts.virtualHosted) throw new InvalidArgumentError('--path-style and --virtual-hosted contradict each other', { hint: 'Pass one of them' });
    this.pathStyle = pathStyleFor(this.bucket, this.endpoint, opts.pathStyle ? 'path' : opts.virtualHosted ? 'virtual' : 'auto');
    this.extraHeaders = {
      ...(opts.requesterPays ? { 'x-amz-request-payer': 'requester' } : {}),
      ...(opts.expectedBucketOwner !== undefined ? { 'x-amz-expected-bucket-owner': opts.expectedBucketOwner } : {}),
    };
    this.ca = opts.ca;
    const fixedRegion = opts.region ?? regionFromEnv();
    this.region = fixedRegion !== undefined ? Promise.resolve(fixedRegion) : profileRegion(opts.profile);
    this.region.catch(() => {});
    this.noSignRequest = opts.noSignRequest ?? false;
    this.proxies = opts.proxies ?? proxySettingsFromEnv();
    const proxied = this.proxies.http !== undefined || this.proxies.https !== undefined;
    this.fixedCredentials = opts.credentials ? { ...opts.credentials } : this.noSignRequest ? undefined : envCredentials(opts.profile);
    const fixed = this.fixedCredentials;
    this.makeSdk = async () => {
      const [{ S3Client }, handler] = await Promise.all([import('@aws-sdk/client-s3'), proxied ? import('./proxy-handler.js') : undefined]);
      const sdk = new S3Client({
        region: () => this.region,
        ...(this.endpoint !== undefined ? { endpoint: this.endpoint } : {}),
        forcePathStyle: this.pathStyle,
        ...(opts.profile !== undefined ? { profile: opts.profile } : {}),
        ...(fixed ? { credentials: { ...fixed } } : {}),
        // Anonymous: a signer that leaves requests as they are, and empty credentials so
        // the credential chain (IMDS included) is never consulted.
        ...(this.noSignRequest ? { signer: { sign: async <T>(request: T) => request }, credentials: { accessKeyId: '', secretAccessKey: '' } } : {}),
        // Directory buckets: sessions from our cache (./express.ts), for the SDK's requests and the data path's.
        ...(this.express ? { s3ExpressIdentityProvider: this.sessions } : {}),
        maxAttempts: 1, // retries are ours: one policy, one metric, for SDK and data path alike
        requestChecksumCalculation: 'WHEN_REQUIRED',
        responseChecksumValidation: 'WHEN_REQUIRED',
        ...(handler ? { requestHandler: new handler.ProxyRequestHandler(this.proxies, this.ca) }
          : this.ca !== undefined ? { requestHandler: { httpsAgent: new https.Agent({ keepAlive: true, ca: this.ca }) } } : {}),
      });
      if (Object.keys(this.extraHeaders).length > 0) {
        // Before signing ('build' runs before 'finalizeRequest'), so the headers are signed.
        const extra = this.extraHeaders;
        sdk.middlewareStack.add((next) => async (args) => {
          const req = args.request as { headers?: Record<string, string> };
          if (req.headers) Object.assign(req.headers, extra);
          return next(args);
        }, { step: 'build', name: 'sluiceExtraHeaders' });
      }
      if (this.closed) sdk.destroy();
      return sdk;
    };
    this.renewer = this.noSignRequest ? undefined : new CredentialRenewer(async (o) => (fixed ?? (await this.sdkCredentials())(o)));
  }

  /** The SDK client, imported and made at the first call (see the header). */
  private sdk(): Promise<S3Client> {
    this.sdkClient ??= this.makeSdk();
    return this.sdkClient;
  }

  /** The SDK's credential provider (its standard chain), loading the SDK. */
  private async sdkCredentials(): Promise<(o?: { forceRefresh?: boolean }) => Promise<SigningCredentials>> {
    return (await this.sdk()).config.credentials as unknown as (o?: { forceRefresh?: boolean }) => Promise<SigningCredentials>;
  }

  /** The credentials to sign with: the fixed ones, or the SDK chain's (resolved, cached and refreshed by it). */
  private readonly credentials = async (): Promise<SigningCredentials> => this.fixedCredentials ?? (await this.sdkCredentials())();

  private ctx(operation: Operation, key?: string): FailureContext {
    return { operation, bucket: this.bucket, key, endpoint: this.endpoint ?? 'AWS S3', virtualHosted: !this.pathStyle };
  }

  private getDataPath() {
    this.dataPath ??= (async () => {
      const region = await this.region;
      const addressing = addressingFor(this.bucket, this.endpoint, region, this.pathStyle ? 'path' : 'virtual');
      const proxy = proxyFor(addressing.origin, this.proxies);
      if (proxy !== undefined) log.debug({ origin: addressing.origin, proxy: `${proxy.protocol}//${proxy.host}` }, 'data path through a proxy');
      // Ranged GETs read through our own sockets into their buffers (./wire.ts): every GET of
      // FastFile, File mode, uncompressed Pipe and manifests. Only streams without a buffer
      // (a gzip Pipe channel) use undici's pool, so undici is imported by the first of them,
      // not by the first GET, and a process that makes none never loads it. Measured: loading
      // undici at the first GET cost a new Pipe process ~0.1 CPU s inside its first epoch,
      // 0.2 CPU s/GB of a 0.54 GB epoch (BENCHMARKS.md "t11-lazy"), for a pool it never used.
      const streamPool = (): Promise<Pool> => {
        if (this.closed) return Promise.reject(new AbortedError('the S3 client is closed'));
        const poolOpts = {
          connections: this.maxConnections,
          keepAliveTimeout: KEEP_ALIVE_MS,
          headersTimeout: 0, // the reader's own watchdog handles stalls (and pauses for slow consumers)
          bodyTimeout: 0,
          ...(this.ca !== undefined ? { connect: { ca: this.ca } } : {}),
        };
        this.streamPool ??= import('undici').then(({ Pool: UndiciPool, ProxyAgent }) => {
          if (proxy === undefined) return new UndiciPool(addressing.origin, poolOpts);
          // Through the proxy: absolute form for http, CONNECT for https (proxyTunnel), as the wire client does.
          const agent = new ProxyAgent({
            uri: proxy.href, proxyTunnel: addressing.origin.startsWith('https:'),
            clientFactory: (origin, o) => new UndiciPool(origin, { ...o, ...poolOpts }),
            ...(this.ca !== undefined ? { requestTls: { ca: this.ca } } : {}),
          });
          return {
            request: (o: Parameters<Pool['request']>[0]) => agent.request({ ...o, origin: addressing.origin }),
            close: () => agent.close(),
          } as unknown as Pool;
        });
        return this.streamPool;
      };
      const wire = new WirePool(addressing.origin, {
        connections: this.maxConnections, keepAliveMs: KEEP_ALIVE_MS, stallMs: this.requestTimeoutMs,
        ...(this.ca !== undefined ? { ca: this.ca } : {}), ...(proxy !== undefined ? { proxy } : {}),
      });
      const signed: SignGet = this.noSignRequest ? async (_path, headers) => headers
        : this.express ? createSessionGetSigner({ origin: addressing.origin, region, session: () => this.session() })
        : createGetSigner({ origin: addressing.origin, region, credentials: this.credentials });
      const extra = this.extraHeaders;
      const sign: SignGet = Object.keys(extra).length === 0 ? signed : (path, headers, date, query, method) => signed(path, { ...headers, ...extra }, date, query, method);
      const reader = new RangeReader({
        bucket: this.bucket, addressing, pool: streamPool, wire, sign, maxAttempts: this.maxAttempts, requestTimeoutMs: this.requestTimeoutMs,
        limiter: this.limiter, reachability: this.reachability,
        ...(this.renewer !== undefined ? { credentials: this.renewer } : {}),
      });
      reader.pinVersions(this.versions);
      return { addressing, wire, reader, sign };
    })();
    return this.dataPath;
  }

  /**
   * The S3 Express session for this bucket, from the cache the SDK client's listing and HEAD
   * use too (its s3ExpressIdentityProvider): CreateSession once, refreshed before it expires.
   */
  private async session(): Promise<SessionIdentity> {
    return this.sessions.getS3ExpressIdentity(await this.credentials(), { Bucket: this.bucket });
  }

  /**
   * One SDK call under our retry policy, watchdog and metrics. `limited`: each attempt holds
   * a slot of the AIMD limiter the data path's GETs use (./concurrency-limiter.ts), and a
   * throttled one halves it: listings adapt to 503 SlowDown as GETs do (issue 46).
   */
  private async withRetries<T>(operation: Operation, key: string | undefined, fn: (signal: AbortSignal) => Promise<T>, signal?: AbortSignal, limited = false): Promise<T> {
    const ctx = this.ctx(operation, key);
    const t0 = performance.now();
    let failures = 0;
    /** The last attempt was refused as expired and the credentials renewed: another refusal is final. */
    let renewed = false;
    try {
      for (;;) {
        if (signal?.aborted) throw new AbortedError();
        const gen = this.renewer?.generation ?? 0;
        const ctrl = new AbortController();
        const onAbort = () => ctrl.abort();
        signal?.addEventListener('abort', onAbort, { once: true });
        let timedOut = false;
        const timer = setTimeout(() => { timedOut = true; ctrl.abort(); }, this.requestTimeoutMs);
        const ta = performance.now();
        let status = 'error';
        let failure: unknown;
        let requestId: string | undefined;
        s3InflightRequests.inc({ operation });
        let verdict: Verdict;
        let slot: Slot | undefined;
        try {
          if (limited) slot = await this.limiter.acquire(this.requestTimeoutMs, ctrl.signal);
          const out = await fn(ctrl.signal);
          if (slot) this.limiter.onSuccess();
          status = '200';
          s3FirstByteSeconds.observe({ operation }, (performance.now() - ta) / 1000);
          if (logOn.debug) requestId = (out as { $metadata?: { requestId?: string } })?.$metadata?.requestId;
          return out;
        } catch (err) {
          status = statusOf(err);
          failure = err;
          if (logOn.debug) requestId = (err as { $metadata?: { requestId?: string } })?.$metadata?.requestId;
          if (signal?.aborted) throw new AbortedError(undefined, { cause: err });
          // No slot within the deadline, or the watchdog fired while waiting: a stalled attempt.
          verdict = timedOut || err instanceof LimiterTimeout ? { retry: 'timeout', cause: err } : judgeError(err, ctx);
          if (slot && 'retry' in verdict && verdict.retry === 'throttled') this.limiter.onThrottle(slot);
        } finally {
          slot?.release();
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          if (status !== 'error') this.reachability.answered = true;
          s3InflightRequests.dec({ operation });
          s3Requests.inc({ operation, status });
          if (logOn.debug) logS3Request({ op: operation, bucket: this.bucket, key, status, requestId, ms: performance.now() - ta, attempt: failures + 1, error: failure });
        }
        if ('fail' in verdict) throw verdict.fail;
        if ('renew' in verdict) {
          if (renewed || this.renewer === undefined) throw verdict.renew;
          renewed = true;
          s3Retries.inc({ operation, reason: 'expired_credentials' });
          await this.renewer.renew(gen);
          continue;
        }
        renewed = false;
        failures++;
        const limit = verdict.retry === 'unreachable' ? Math.min(this.maxAttempts, UNREACHABLE_MAX_ATTEMPTS) : this.maxAttempts;
        if (failures >= limit) throw exhausted(verdict.retry, failures, verdict.cause, ctx, this.requestTimeoutMs);
        s3Retries.inc({ operation, reason: verdict.retry });
        await sleep(backoffMs(failures), signal);
      }
    } finally {
      s3RequestSeconds.observe({ operation }, (performance.now() - t0) / 1000);
    }
  }

  /**
   * One request through the wire client (./wire.ts), signed as the data path signs: a HEAD of
   * `key`, or a GET of the bucket with `query` (key undefined: a listing). An error reply
   * throws what replyFailure makes of it, for withRetries to judge.
   */
  private async wireRequest(method: 'GET' | 'HEAD', operation: Operation, key: string | undefined, query: Record<string, string>, maxBytes: number, signal: AbortSignal): Promise<WholeReply & { $metadata: { requestId?: string } }> {
    const { addressing, wire, sign } = await this.getDataPath();
    const base = key !== undefined ? addressing.pathFor(key) : addressing.pathFor('');
    const headers = await sign(base, {}, undefined, query, method);
    const qs = canonicalQuery(query);
    let reply: WholeReply;
    try {
      reply = await requestWhole(wire, method, qs === '' ? base : `${base}?${qs}`, headers, maxBytes, signal);
    } catch (err) {
      if (err instanceof WireStallError) throw new TransientError('timeout', `no progress on s3://${this.bucket}/${key ?? ''} for ${this.requestTimeoutMs} ms`);
      throw err;
    }
    const requestId = reply.headers['x-amz-request-id'];
    if (reply.status >= 300) {
      const err = replyFailure(reply.status, reply.body.subarray(0, MAX_ERROR_BODY).toString('utf8'), this.ctx(operation, key));
      throw Object.assign(err, { $metadata: { httpStatusCode: reply.status, requestId } });
    }
    return { ...reply, $metadata: { ...(requestId !== undefined ? { requestId } : {}) } };
  }

  private async listPage(q: ListQuery, signal?: AbortSignal): Promise<ListPage> {
    if (!this.express) {
      const query: Record<string, string> = { 'list-type': '2', prefix: q.prefix, 'encoding-type': 'url' };
      if (q.delimiter !== undefined) query.delimiter = q.delimiter;
      if (q.startAfter !== undefined) query['start-after'] = q.startAfter;
      if (q.continuationToken !== undefined) query['continuation-token'] = q.continuationToken;
      if (q.maxKeys !== undefined) query['max-keys'] = String(q.maxKeys);
      const reply = await this.withRetries('list', q.prefix, (s) => this.wireRequest('GET', 'list', undefined, query, MAX_LIST_BODY, s), signal, true);
      let page: ReturnType<typeof parseListObjectsV2>;
      try {
        page = parseListObjectsV2(reply.body.toString('utf8'));
      } catch (err) {
        // Which request, and what to check: the parser's own message names only the XML's fault.
        if (!(err instanceof MalformedReplyError)) throw err;
        throw new MalformedReplyError(`S3 listing of s3://${this.bucket}/${q.prefix} got a reply that is not a listing (${err.message})`, {
          hint: 'Check that --endpoint is an S3 server and that no proxy in between alters replies',
        });
      }
      if (page.truncated && !page.nextToken) {
        throw new S3Error(`S3 listing of s3://${this.bucket}/${q.prefix} is truncated but has no continuation token`, 200, undefined);
      }
      return { objects: page.objects, prefixes: page.prefixes, nextToken: page.nextToken };
    }
    // A directory bucket (./express.ts): through the SDK, which signs with its sessions.
    const [sdk, { ListObjectsV2Command }] = await Promise.all([this.sdk(), import('@aws-sdk/client-s3')]);
    const out = await this.withRetries('list', q.prefix, (s) => sdk.send(new ListObjectsV2Command({
      Bucket: this.bucket, Prefix: q.prefix,
      ...(q.delimiter !== undefined ? { Delimiter: q.delimiter } : {}),
      ...(q.startAfter !== undefined ? { StartAfter: q.startAfter } : {}),
      ...(q.continuationToken !== undefined ? { ContinuationToken: q.continuationToken } : {}),
      ...(q.maxKeys !== undefined ? { MaxKeys: q.maxKeys } : {}),
    }), { abortSignal: s }), signal, true);
    if (out.IsTruncated && !out.NextContinuationToken) {
      throw new S3Error(`S3 listing of s3://${this.bucket}/${q.prefix} is truncated but has no continuation token`, 200, undefined);
    }
    return {
      objects: (out.Contents ?? []).map((c) => ({
        key: c.Key ?? '', size: c.Size ?? 0, etag: c.ETag ?? '', lastModified: c.LastModified ?? new Date(0),
        storageClass: c.StorageClass ?? 'STANDARD',
      })),
      prefixes: (out.CommonPrefixes ?? []).map((p) => p.Prefix ?? '').filter((p) => p !== ''),
      nextToken: out.IsTruncated ? out.NextContinuationToken : undefined,
    };
  }

  list(prefix: string, opts: ListOptions = {}): AsyncIterable<ObjectInfo> {
    if (opts.versions) return this.listVersioned(prefix, opts);
    return this.listWith(prefix, opts, (q, s) => this.listPage(q, s));
  }

  private listWith(prefix: string, opts: ListOptions, listPage: ListPageFn): AsyncIterable<ObjectInfo> {
    const { beforeRequest, onPage, filter } = opts;
    const page = async (q: ListQuery, s?: AbortSignal) => {
      if (beforeRequest) await beforeRequest();
      const pg = await listPage(q, s);
      onPage?.();
      return pg;
    };
    if (filter) return listPruned(prefix, page, { concurrency: this.listConcurrency, signal: opts.signal }, filter);
    return listAll(prefix, page, { concurrency: this.listConcurrency, signal: opts.signal });
  }

  // ---- issue 15: version ids for snapshots -------------------------------------------
  //
  // A snapshot of a versioned bucket records each object's version id, so that a rerun
  // GETs exactly those bytes (?versionId=) even after an overwrite. ListObjectsV2 does not
  // return version ids and a HEAD per key costs too much, so: ask GetBucketVersioning once;
  // when versioning is Enabled or Suspended, list with ListObjectVersions and keep, of each
  // key, the version S3 marks IsLatest unless it is a delete marker (then the key is deleted).
  // A version id of "null" (an object written before versioning was enabled, or while it
  // was suspended) is kept: S3 serves that version on GET ?versionId=null, so it stays
  // readable after an overwrite in an Enabled bucket. ListObjectVersions also returns every
  // noncurrent version, so it costs more pages than ListObjectsV2 on a bucket with history:
  // only snapshots ask for it (ListOptions.versions).

  /**
   * The bucket's versioning status ('Enabled', 'Suspended'), or undefined when it was never
   * enabled, or when the server refuses to say (no s3:GetBucketVersioning; a server without
   * versioning may answer 501 NotImplemented, or, as s3rver does, ignore the parameter and
   * answer with a listing, which has no Status): then the listing records no version ids and
   * reads stay pinned by ETag. Counted as operation 'versioning' in the metrics.
   */
  versioning(signal?: AbortSignal): Promise<string | undefined> {
    this.versioningState ??= this.withRetries('versioning', undefined, async (s) => {
      const [sdk, { GetBucketVersioningCommand }] = await Promise.all([this.sdk(), import('@aws-sdk/client-s3')]);
      return sdk.send(new GetBucketVersioningCommand({ Bucket: this.bucket }), { abortSignal: s });
    }, signal)
      .then((out) => out.Status, (err: unknown) => {
        // Only a refusal by a server that answered means "unversioned"; an unreachable
        // endpoint or an abort fails the listing as it would have anyway.
        if (!(err instanceof AccessDeniedError || (err instanceof S3Error && err.status !== undefined))) throw err;
        log.debug({ bucket: this.bucket, err: err.message }, 'GetBucketVersioning refused: listing without version ids');
        return undefined;
      });
    const state = this.versioningState;
    state.catch(() => { if (this.versioningState === state) this.versioningState = undefined; });
    return state;
  }

  private async *listVersioned(prefix: string, opts: ListOptions): AsyncGenerator<ObjectInfo> {
    const status = await this.versioning(opts.signal);
    if (status !== 'Enabled' && status !== 'Suspended') {
      log.debug({ bucket: this.bucket }, 'bucket versioning is off or not visible: listing without version ids');
      yield* this.listWith(prefix, opts, (q, s) => this.listPage(q, s));
      return;
    }
    let yielded = false;
    try {
      for await (const o of this.listWith(prefix, opts, (q, s) => this.listVersionsPage(q, s))) {
        yielded = true;
        yield o;
      }
    } catch (err) {
      // Versioned, but these credentials may not list versions (s3:ListBucketVersions is a
      // permission of its own): list without version ids rather than fail the snapshot.
      if (yielded || !(err instanceof AccessDeniedError)) throw err;
      log.warn({ bucket: this.bucket }, `s3://${this.bucket} is versioned but ListObjectVersions was refused: the listing records no version ids (reads stay pinned by ETag). Grant s3:ListBucketVersions to record them`);
      yield* this.listWith(prefix, opts, (q, s) => this.listPage(q, s));
    }
  }

  /**
   * One ListObjectVersions page, as a ListPage of the current versions. Paging: S3 returns
   * keys in order and the versions of a key newest first; a truncated page names where it
   * stopped with NextKeyMarker and NextVersionIdMarker, carried together as our opaque
   * continuation token. `startAfter` is KeyMarker alone: keys after it.
   */
  private async listVersionsPage(q: ListQuery, signal?: AbortSignal): Promise<ListPage> {
    let markers: { KeyMarker?: string; VersionIdMarker?: string } = {};
    if (q.continuationToken !== undefined) markers = JSON.parse(q.continuationToken) as typeof markers;
    else if (q.startAfter !== undefined) markers = { KeyMarker: q.startAfter };
    const [sdk, { ListObjectVersionsCommand }] = await Promise.all([this.sdk(), import('@aws-sdk/client-s3')]);
    const out = await this.withRetries('list', q.prefix, (s) => sdk.send(new ListObjectVersionsCommand({
      Bucket: this.bucket, Prefix: q.prefix, ...markers,
      ...(q.delimiter !== undefined ? { Delimiter: q.delimiter } : {}),
      ...(q.maxKeys !== undefined ? { MaxKeys: q.maxKeys } : {}),
    }), { abortSignal: s }), signal, true);
    if (out.IsTruncated && out.NextKeyMarker === undefined) {
      throw new S3Error(`S3 version listing of s3://${this.bucket}/${q.prefix} is truncated but has no NextKeyMarker`, 200, undefined);
    }
    let lastKey: string | undefined;
    for (const e of [...(out.Versions ?? []), ...(out.DeleteMarkers ?? [])]) {
      if (e.Key !== undefined && (lastKey === undefined || compareKeys(e.Key, lastKey) > 0)) lastKey = e.Key;
    }
    const objects: ObjectInfo[] = [];
    for (const v of out.Versions ?? []) {
      if (v.IsLatest !== true) continue;
      const o: ObjectInfo = {
        key: v.Key ?? '', size: v.Size ?? 0, etag: v.ETag ?? '', lastModified: v.LastModified ?? new Date(0),
        storageClass: v.StorageClass ?? 'STANDARD',
      };
      if (v.VersionId !== undefined && v.VersionId !== '') o.versionId = v.VersionId;
      objects.push(o);
    }
    const next = out.IsTruncated
      ? JSON.stringify({ KeyMarker: out.NextKeyMarker, ...(out.NextVersionIdMarker !== undefined ? { VersionIdMarker: out.NextVersionIdMarker } : {}) })
      : undefined;
    return {
      objects,
      prefixes: (out.CommonPrefixes ?? []).map((p) => p.Prefix ?? '').filter((p) => p !== ''),
      nextToken: next,
      lastKey,
    };
  }

  async head(key: string, opts: RequestOptions = {}): Promise<ObjectInfo> {
    const versionId = this.versions.get(key);
    if (!this.express) {
      const r = await this.withRetries('head', key, (s) => this.wireRequest('HEAD', 'head', key, versionId !== undefined ? { versionId } : {}, 0, s), opts.signal);
      const h = r.headers;
      const length = Number(h['content-length'] ?? '0');
      const modified = h['last-modified'] !== undefined ? new Date(h['last-modified']) : new Date(0);
      const info: ObjectInfo = {
        key, size: Number.isSafeInteger(length) ? length : 0, etag: h.etag ?? '', lastModified: Number.isNaN(modified.getTime()) ? new Date(0) : modified,
        storageClass: h['x-amz-storage-class'] ?? 'STANDARD',
      };
      if (h['x-amz-archive-status'] !== undefined) info.archiveStatus = h['x-amz-archive-status'];
      if (h['x-amz-restore'] !== undefined && /ongoing-request="false"/.test(h['x-amz-restore'])) info.restored = true;
      if (h['x-amz-version-id'] !== undefined && h['x-amz-version-id'] !== 'null') info.versionId = h['x-amz-version-id'];
      return info;
    }
    // A directory bucket (./express.ts): through the SDK, which signs with its sessions.
    const [sdk, { HeadObjectCommand }] = await Promise.all([this.sdk(), import('@aws-sdk/client-s3')]);
    const out = await this.withRetries('head', key, (s) => sdk.send(new HeadObjectCommand({
      Bucket: this.bucket, Key: key, ...(versionId !== undefined ? { VersionId: versionId } : {}),
    }), { abortSignal: s }), opts.signal);
    const info: ObjectInfo = {
      key, size: out.ContentLength ?? 0, etag: out.ETag ?? '', lastModified: out.LastModified ?? new Date(0),
      storageClass: out.StorageClass ?? 'STANDARD',
    };
    if (out.ArchiveStatus !== undefined) info.archiveStatus = out.ArchiveStatus;
    if (out.Restore !== undefined && /ongoing-request="false"/.test(out.Restore)) info.restored = true;
    if (out.VersionId !== undefined && out.VersionId !== 'null') info.versionId = out.VersionId;
    return info;
  }

  /**
   * Pins GETs and HEADs of these keys to these versions (GET ?versionId=): a snapshot's.
   * Added to the pins of earlier calls (other channels on this bucket), never replacing them
   * (./version-pins.ts); the data path reads the same map.
   */
  pinVersions(versions: ReadonlyMap<string, string>): void {
    mergeVersionPins(this.versions, versions, this.bucket);
  }

  // ---- issue 48: the cache bucket's whole objects (src/cache/cache-bucket.ts) -------------
  //
  // A cache object is one block (1 MiB and a header), read and written whole through the SDK,
  // under the same retry policy, credentials (S3 Express sessions included) and metrics as
  // listing, as operations 'cache_get' and 'cache_put'. The data path's ranged GETs are for
  // the source's bytes, pinned by ETag; a cache object is checked by its own header instead.

  /** The whole object `key`, or undefined when there is none (404 NoSuchKey). */
  async getObject(key: string, opts: RequestOptions = {}): Promise<Buffer | undefined> {
    try {
      const [sdk, { GetObjectCommand }] = await Promise.all([this.sdk(), import('@aws-sdk/client-s3')]);
      return await this.withRetries('cache_get', key, async (s) => {
        const out = await sdk.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }), { abortSignal: s });
        const body = out.Body as { transformToByteArray(): Promise<Uint8Array> } | undefined;
        const bytes = body ? await body.transformToByteArray() : new Uint8Array(0);
        return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      }, opts.signal);
    } catch (err) {
      if (err instanceof NoSuchKeyError) return undefined;
      throw err;
    }
  }

  /** PutObject of `body` at `key` (one request; a directory bucket stores it as EXPRESS_ONEZONE). */
  async putObject(key: string, body: Buffer, opts: RequestOptions = {}): Promise<void> {
    const [sdk, { PutObjectCommand }] = await Promise.all([this.sdk(), import('@aws-sdk/client-s3')]);
    await this.withRetries('cache_put', key, (s) => sdk.send(new PutObjectCommand({
      Bucket: this.bucket, Key: key, Body: body, ContentLength: body.length, ContentType: 'application/octet-stream',
    }), { abortSignal: s }), opts.signal);
  }

  async firstKeyUnder(prefix: string, opts: RequestOptions = {}): Promise<string | undefined> {
    return (await this.listPage({ prefix, maxKeys: 1 }, opts.signal)).objects[0]?.key;
  }

  /** Two keys, not one: the second tells whether the first is also a folder (core.ts); same one request. */
  async firstObjectsUnder(prefix: string, opts: RequestOptions = {}): Promise<FirstObjects> {
    const page = await this.listPage({ prefix, maxKeys: 2 }, opts.signal);
    return { objects: page.objects.slice(0, 2), complete: page.nextToken === undefined };
  }

  async getRange(key: string, start: number, endExclusive: number, etag: string, opts: RangeOptions = {}): Promise<Buffer> {
    checkRange(start, endExclusive);
    if (endExclusive === start) return Buffer.alloc(0);
    const { reader } = await this.getDataPath();
    return reader.getRange(key, start, endExclusive, etag, opts.signal, opts.into, opts.onFilled);
  }

  async *getStream(key: string, etag: string, opts: StreamOptions = {}): AsyncIterable<Buffer> {
    const start = opts.start ?? 0;
    let end = opts.end ?? opts.size;
    if (end === undefined) {
      const info = await this.head(key, opts);
      if (normalizeEtag(info.etag) !== normalizeEtag(etag)) throw new ObjectChangedError(this.bucket, key, etag, info.etag);
      end = info.size;
    }
    checkRange(start, end);
    if (end === start) return;
    const { reader } = await this.getDataPath();
    if (opts.into !== undefined) {
      // The range lands in the caller's buffer through the wire client: one yield, no chunk stream.
      yield await reader.getRange(key, start, end, etag, opts.signal, opts.into);
      return;
    }
    yield* reader.read(key, start, end, etag, opts.signal);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const dp = this.dataPath;
    this.sdkClient?.then((sdk) => sdk.destroy(), () => undefined);
    if (dp) {
      const { wire } = await dp;
      await Promise.all([this.streamPool?.then((pool) => pool.close()), wire.close()]);
    }
  }
}

function checkRange(start: number, end: number): void {
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start < 0 || end < start) {
    throw new InvalidArgumentError(`bad byte range [${start}, ${end})`);
  }
}

export function createObjectClient(opts: S3ClientOptions): ObjectClient {
  return new S3ObjectClient(opts);
}

/** The command-line options (src/config/options.ts) that configure a client. */
export type ClientCliOptions = Options<'endpoint' | 'region' | 'pathStyle' | 'maxConnections' | 'maxAttempts' | 'requestTimeout' | 'caBundle'>
  & Partial<Options<'noSignRequest' | 'virtualHosted' | 'profile' | 'requesterPays' | 'expectedBucketOwner'>>;

/** Client options for `bucket` from the parsed command-line options (mount, run). */
export function clientOptionsFrom(bucket: string, o: ClientCliOptions): S3ClientOptions {
  // Unsigned requests read no profile; otherwise a missing one is named now, with its files.
  if (o.profile !== undefined && !o.noSignRequest) checkProfile(o.profile);
  return {
    bucket,
    ...(o.endpoint !== undefined ? { endpoint: o.endpoint } : {}),
    ...(o.region !== undefined ? { region: o.region } : {}),
    pathStyle: o.pathStyle,
    maxConnections: o.maxConnections,
    maxAttempts: o.maxAttempts,
    requestTimeoutMs: o.requestTimeout,
    ...(o.noSignRequest ? { noSignRequest: true } : {}),
    ...(o.virtualHosted ? { virtualHosted: true } : {}),
    ...(o.profile !== undefined ? { profile: o.profile } : {}),
    ...(o.requesterPays ? { requesterPays: true } : {}),
    ...(o.expectedBucketOwner !== undefined ? { expectedBucketOwner: o.expectedBucketOwner } : {}),
    ...(o.caBundle !== undefined ? { ca: readCaBundle(o.caBundle) } : {}),
  };
}

/** The PEM text of a --ca-bundle file, checked: a one-line error when unreadable or not PEM certificates. */
export function readCaBundle(file: string): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    throw new InvalidArgumentError(`cannot read --ca-bundle ${file} (${code})`, { hint: 'Give a readable PEM file of CA certificates (--ca-bundle or AWS_CA_BUNDLE)' });
  }
  if (!text.includes('-----BEGIN CERTIFICATE-----')) {
    throw new InvalidArgumentError(`--ca-bundle ${file} holds no PEM certificate`, { hint: 'Give a file with -----BEGIN CERTIFICATE----- blocks (--ca-bundle or AWS_CA_BUNDLE)' });
  }
  return text;
}
