/**
 * A TCP proxy that puts S3-like latency and per-connection bandwidth between a
 * client and a local S3 server (the kernel here has no netem).
 *
 * Model, per client connection (one server connection at a time):
 *  - Time to first byte. The client->server byte stream is parsed just enough to
 *    find HTTP/1.1 request boundaries (request line + headers up to CRLFCRLF, then a
 *    Content-Length or chunked body). Each request is stamped with its arrival
 *    time when its head is complete, and forwarded at once. Response bytes the
 *    server sends after request i was forwarded are held until `ttfbMs` after
 *    request i arrived. Clients do not pipeline (undici, the AWS SDKs, curl, s3fs
 *    and rclone all wait for response i before sending request i+1), so "bytes
 *    after request i" are exactly response i.
 *  - Bandwidth. Response bytes leave through a token bucket of `bytesPerSec` with
 *    a burst of BURST_BYTES, like one S3 TCP stream; each connection has its own
 *    bucket, so N parallel connections get N times the bandwidth, as with S3.
 *  - Back-pressure. When more than HIGH_WATER bytes are held for a slow client,
 *    the upstream socket is paused, so the proxy's memory stays bounded.
 *
 *  - Keep-alive. s3rver (Node's http server) closes a connection idle for 5 s; a
 *    client held back by the proxy can send its next request just then. The proxy
 *    keeps the client's connection, opens a new one to the server, and replays the
 *    request bytes that got no answer, as S3 (which keeps connections much longer)
 *    would never have closed it. A reset from the server is passed on as a reset.
 *
 * TLS. Given a key and certificate (`tls`), the proxy terminates TLS: clients speak
 * https to it, and it speaks plain HTTP to the server, as an S3 front end would. The
 * model above applies to the decrypted streams; the proxy's own TLS work is on its
 * process, the client's on the client's, which is what a CPU-per-GB comparison over
 * HTTPS needs (./tls-ca.ts makes the run's certificates).
 *
 * Limits (documented in BENCHMARKS.md): the delay is added per request, not per
 * TCP round trip, so slow start and loss are not modelled; a pipelining client
 * would see response i held until request i+1's deadline; request bodies (PUT)
 * are not shaped; a body the parser cannot frame (no length, not chunked) turns
 * boundary detection off for the rest of that connection, which then gets only
 * its first request's delay. The proxy costs CPU on the same machine, which is
 * why it runs in its own process in `sluice bench`.
 */
import net from 'node:net';
import tls from 'node:tls';

/**
 * 1 MiB: at 80 MB/s that is ~13 ms of tokens. Timers fire late on a loaded machine;
 * tokens beyond the burst are lost, so the burst must cover a late wake-up, or the
 * proxy would cap below its setting. A real TCP stream is that bursty too.
 */
const BURST_BYTES = 1024 * 1024;
/** 4 MiB held per connection before the upstream socket is paused: a few S3 parts' worth of TCP window. */
const HIGH_WATER = 4 * 1024 * 1024;
/** Up to 1 MiB of unanswered request bytes is kept for a replay: any GET/HEAD/LIST head; bigger uploads are not replayed. */
const REPLAY_MAX = 1024 * 1024;
/** Request heads above 64 KiB are not HTTP from an S3 client; stop parsing rather than buffer without end. */
const MAX_HEAD_BYTES = 64 * 1024;

export interface LatencyProfile {
  /** Name shown in reports, e.g. "s3-like" or "no-latency". */
  name: string;
  /** Added time to first byte per request, ms. 0 adds none. */
  ttfbMs: number;
  /** Bandwidth cap per connection, bytes per second. 0 means no cap. */
  bytesPerSec: number;
  /** The proxy terminates TLS (clients speak https, with a CA made for the run). */
  https?: boolean;
}

export interface LatencyProxyOptions extends LatencyProfile {
  targetHost?: string;
  targetPort: number;
  listenHost?: string;
  /** Terminate TLS with this key and certificate (PEM): the endpoint is then https://. */
  tls?: { key: string; cert: string };
}

export interface LatencyProxyStats {
  connections: number;
  requests: number;
  /** Requests that are object GETs (GET without a listing's list-type query): the bench's count of data fetches. */
  objectGets: number;
  bytesToClient: number;
}

export interface LatencyProxy {
  endpoint: string;
  port: number;
  profile: LatencyProfile;
  stats: LatencyProxyStats;
  close(): Promise<void>;
}

/** One line describing the profile, for stdout and reports. */
export function describeProfile(p: LatencyProfile): string {
  const bw = p.bytesPerSec > 0 ? `${(p.bytesPerSec / 1e6).toFixed(0)} MB/s per connection (token bucket, ${BURST_BYTES / 1024} KiB burst)` : 'no bandwidth cap';
  return `${p.name}: +${p.ttfbMs} ms to first byte per request, ${bw}${p.https ? ', over HTTPS (TLS terminated by the proxy)' : ''}`;
}

export function validateProfile(p: LatencyProfile): string | undefined {
  if (!p.name) return 'a latency profile needs a name';
  if (!Number.isFinite(p.ttfbMs) || p.ttfbMs < 0 || p.ttfbMs > 10_000) return `profile ${p.name}: ttfbMs must be between 0 and 10000`;
  if (!Number.isFinite(p.bytesPerSec) || p.bytesPerSec < 0) return `profile ${p.name}: bandwidth must be >= 0`;
  if (p.bytesPerSec > 0 && p.bytesPerSec < 64 * 1024) return `profile ${p.name}: bandwidth below 64 KB/s would stall clients`;
  return undefined;
}

/** An object GET: "GET /bucket/key ..." (path style) whose query is not a listing's. */
function isObjectGet(head: string): boolean {
  if (!head.startsWith('GET ')) return false;
  const target = head.slice(4, head.indexOf(' ', 4) >>> 0);
  return !/[?&](list-type|prefix|delimiter|uploads|location)=?/.test(target) && target.split('?')[0]!.split('/').filter(Boolean).length >= 2;
}

/**
 * Finds request boundaries in a client->server byte stream. `feed()` returns the
 * number of requests whose head completed in this chunk (the moment a request
 * "arrives"). Exported for tests.
 */
export class RequestFramer {
  private state: 'head' | 'body' | 'chunk-size' | 'chunk-data' | 'chunk-trailer' | 'off' = 'head';
  private head = '';
  private bodyLeft = 0;
  private line = '';
  /** Object GETs among the requests framed so far (see LatencyProxyStats.objectGets). */
  objectGets = 0;

  get disabled(): boolean { return this.state === 'off'; }

  feed(buf: Buffer): number {
    let count = 0;
    let i = 0;
    while (i < buf.length && this.state !== 'off') {
      switch (this.state) {
        case 'head': {
          const end = this.findHeadEnd(buf, i);
          if (end === -1) {
            this.head += buf.toString('latin1', i);
            i = buf.length;
            if (this.head.length > MAX_HEAD_BYTES) this.state = 'off';
            break;
          }
          this.head += buf.toString('latin1', i, end);
          i = end;
          count++;
          if (isObjectGet(this.head)) this.objectGets++;
          this.startBody(this.head);
          this.head = '';
          break;
        }
        case 'body': {
          const n = Math.min(this.bodyLeft, buf.length - i);
          this.bodyLeft -= n;
          i += n;
          if (this.bodyLeft === 0) this.state = 'head';
          break;
        }
        case 'chunk-size':
        case 'chunk-trailer': {
          const nl = buf.indexOf(10, i);
          if (nl === -1) { this.line += buf.toString('latin1', i); i = buf.length; break; }
          this.line += buf.toString('latin1', i, nl);
          i = nl + 1;
          const line = this.line.replace(/\r$/, '');
          this.line = '';
          if (this.state === 'chunk-size') {
            const size = parseInt(line.split(';')[0]!, 16);
            if (!Number.isFinite(size)) { this.state = 'off'; break; }
            if (size === 0) this.state = 'chunk-trailer';
            else { this.bodyLeft = size + 2; this.state = 'chunk-data'; }
          } else if (line === '') {
            this.state = 'head';
          }
          break;
        }
        case 'chunk-data': {
          const n = Math.min(this.bodyLeft, buf.length - i);
          this.bodyLeft -= n;
          i += n;
          if (this.bodyLeft === 0) this.state = 'chunk-size';
          break;
        }
      }
    }
    return count;
  }

  /** Index just past CRLFCRLF, counting bytes carried over from earlier chunks. */
  private findHeadEnd(buf: Buffer, from: number): number {
    // The terminator may straddle chunks: search the tail of the saved head plus this chunk.
    const carry = this.head.slice(-3);
    const joined = Buffer.concat([Buffer.from(carry, 'latin1'), buf.subarray(from)]);
    const at = joined.indexOf('\r\n\r\n');
    if (at === -1) return -1;
    return from + at + 4 - carry.length;
  }

  private startBody(head: string): void {
    const lower = head.toLowerCase();
    const te = /\r\ntransfer-encoding:\s*([^\r\n]*)/.exec(lower);
    if (te && te[1]!.includes('chunked')) { this.state = 'chunk-size'; return; }
    const cl = /\r\ncontent-length:\s*(\d+)/.exec(lower);
    if (cl) {
      this.bodyLeft = Number(cl[1]);
      this.state = this.bodyLeft > 0 ? 'body' : 'head';
      return;
    }
    this.state = 'head';
  }
}

/**
 * The smallest piece sent once the burst is spent: 64 KiB (a socket read's worth). Sending
 * whatever trickled in since the last timer (1 KB per ms at 1 MB/s) would cost a write and
 * a timer per KB, burning the CPU the benchmark is measuring; 64 KiB waits at most 64 ms
 * at 1 MB/s and under 1 ms at 80 MB/s.
 */
const MIN_PIECE_BYTES = 64 * 1024;

/** Per-connection token bucket; `waitMs(n)` says how long until n bytes may leave. */
class TokenBucket {
  private tokens = BURST_BYTES;
  private last = performance.now();
  constructor(private readonly rate: number) {}

  /** Bytes that may be sent now (at most `want`); 0 until min(want, MIN_PIECE_BYTES) may. */
  take(want: number): number {
    if (this.rate <= 0) return want;
    const now = performance.now();
    this.tokens = Math.min(BURST_BYTES, this.tokens + ((now - this.last) / 1000) * this.rate);
    this.last = now;
    if (this.tokens < Math.min(want, MIN_PIECE_BYTES)) return 0;
    const n = Math.min(want, Math.floor(this.tokens));
    this.tokens -= n;
    return n;
  }

  /** Milliseconds until take(want) sends something: min(want, MIN_PIECE_BYTES) tokens. */
  waitMs(want: number): number {
    if (this.rate <= 0) return 0;
    const need = Math.min(want, MIN_PIECE_BYTES) - this.tokens;
    return need <= 0 ? 0 : Math.max(1, Math.ceil((need / this.rate) * 1000));
  }
}

function pipeConnection(client: net.Socket, opts: LatencyProxyOptions, stats: LatencyProxyStats, sockets: Set<net.Socket>): void {
  client.setNoDelay(true);
  const framer = new RequestFramer();
  const bucket = new TokenBucket(opts.bytesPerSec);
  /** Deadline (performance.now() ms) before which response bytes may not leave. */
  let releaseAt = 0;
  const held: { buf: Buffer; notBefore: number }[] = [];
  let heldBytes = 0;
  let timer: NodeJS.Timeout | undefined;
  let waitingDrain = false;
  let closed = false;
  /** Requests seen on this connection. */
  let seen = 0;
  /** The server side; replaced when the server closes an idle keep-alive connection. */
  let upstream: net.Socket | undefined;
  /**
   * Client bytes sent upstream since the server last sent anything. When the server
   * closes an idle connection just as a request reaches it (Node's 5 s keep-alive
   * timeout racing a client that waited on the proxy), they are replayed on a new
   * connection; S3 keeps connections far longer, so the client must not see it.
   * INVARIANT: unansweredBytes is the sum of unanswered's lengths; over REPLAY_MAX, no replay.
   */
  let unanswered: Buffer[] = [];
  let unansweredBytes = 0;

  const close = () => {
    if (closed) return;
    closed = true;
    if (timer) clearTimeout(timer);
    client.destroy();
    upstream?.destroy();
  };

  const connectUpstream = (): net.Socket => {
    const up = net.connect({ host: opts.targetHost ?? '127.0.0.1', port: opts.targetPort });
    upstream = up;
    sockets.add(up);
    up.setNoDelay(true);
    up.on('data', (buf: Buffer) => {
      unanswered = [];
      unansweredBytes = 0;
      held.push({ buf, notBefore: releaseAt });
      heldBytes += buf.length;
      if (heldBytes >= HIGH_WATER) up.pause();
      if (!timer && !waitingDrain) pump();
    });
    const gone = (graceful: boolean) => {
      sockets.delete(up);
      if (upstream !== up) return;
      upstream = undefined;
      // A reset may cut a response short: the client must see the connection fail.
      if (!graceful) { close(); return; }
      if (unansweredBytes > 0 && unansweredBytes <= REPLAY_MAX && !closed) {
        const replay = unanswered;
        unanswered = [];
        unansweredBytes = 0;
        const next = connectUpstream();
        for (const b of replay) { next.write(b); unanswered.push(b); unansweredBytes += b.length; }
      }
    };
    up.on('end', () => gone(true));
    up.on('error', () => gone(false));
    up.on('close', (hadError) => gone(!hadError));
    return up;
  };

  const pump = () => {
    timer = undefined;
    if (closed || waitingDrain) return;
    while (held.length > 0) {
      const head = held[0]!;
      const now = performance.now();
      if (head.notBefore > now) { timer = setTimeout(pump, Math.max(1, Math.ceil(head.notBefore - now))); return; }
      const n = bucket.take(head.buf.length);
      if (n === 0) { timer = setTimeout(pump, bucket.waitMs(head.buf.length)); return; }
      const piece = n === head.buf.length ? head.buf : head.buf.subarray(0, n);
      if (n === head.buf.length) held.shift(); else head.buf = head.buf.subarray(n);
      heldBytes -= n;
      stats.bytesToClient += n;
      const ok = client.write(piece);
      if (heldBytes < HIGH_WATER && upstream?.isPaused()) upstream.resume();
      if (!ok) { waitingDrain = true; return; }
    }
  };

  client.on('drain', () => { waitingDrain = false; if (!timer) pump(); });
  client.on('data', (buf: Buffer) => {
    const gets0 = framer.objectGets;
    const n = framer.feed(buf);
    if (n > 0) {
      seen += n;
      stats.requests += n;
      stats.objectGets += framer.objectGets - gets0;
      releaseAt = performance.now() + opts.ttfbMs;
    } else if (seen === 0 && framer.disabled) {
      // Not HTTP we can frame: delay the first reply only.
      seen = 1;
      releaseAt = performance.now() + opts.ttfbMs;
    }
    (upstream ?? connectUpstream()).write(buf);
    unanswered.push(buf);
    unansweredBytes += buf.length;
  });
  client.on('end', () => { upstream?.end(); });
  client.on('error', close);
  client.on('close', close);
  connectUpstream();
}

/** Starts the proxy on an ephemeral port of 127.0.0.1 (or `listenHost`). */
export async function startLatencyProxy(opts: LatencyProxyOptions): Promise<LatencyProxy> {
  const problem = validateProfile(opts);
  if (problem) throw new Error(problem);
  const stats: LatencyProxyStats = { connections: 0, requests: 0, objectGets: 0, bytesToClient: 0 };
  const sockets = new Set<net.Socket>();
  const onClient = (client: net.Socket) => {
    stats.connections++;
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    pipeConnection(client, opts, stats, sockets);
  };
  const server = opts.tls ? tls.createServer({ key: opts.tls.key, cert: opts.tls.cert }, onClient) : net.createServer(onClient);
  // A client that refuses the certificate drops the handshake: not the proxy's failure.
  server.on('tlsClientError', () => undefined);
  const host = opts.listenHost ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  const port = (server.address() as net.AddressInfo).port;
  return {
    endpoint: `${opts.tls ? 'https' : 'http'}://${host}:${port}`,
    port,
    profile: { name: opts.name, ttfbMs: opts.ttfbMs, bytesPerSec: opts.bytesPerSec },
    stats,
    close: () => new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
}
