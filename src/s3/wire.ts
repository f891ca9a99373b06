/**
 * The data path's own HTTP/1.1 client: ranged GET bodies read from the socket straight into
 * the buffer they belong in.
 *
 * Why not undici for this one job (the figures, from a quiet run of the shared
 * 2-core machine; CPU = utime+stime per GB; BENCHMARKS.md "Bulk receive path (issue 11)"):
 *  - undici's Pool with 8 MiB ranged GETs and the body thrown away costs 1.06 (fresh) /
 *    0.68 (warm) s/GB by itself, above s3fs's whole cost (~0.87): every socket read becomes
 *    a fresh ArrayBuffer (external memory pressure -> scavenges and mark-compacts), the
 *    parser copies each chunk again, and the body is a stream. `net.Socket` with `onread`
 *    into a reused buffer costs 0.29 / 0.18 s/GB.
 *  - Measured here side by side (scripts/receive-floor.mjs, 8 MiB GETs x 8 into reused
 *    slabs, load 32): undici request 3.72 / 1.19 s/GB, undici `dispatch` with a handler
 *    4.24 / 1.63 (no better: the per-read allocation and the copy stay), this client
 *    1.19 / 0.50. Through a mount (fresh daemon, 512 MiB) 10.2 -> 3.5 s/GB, Pipe 7.5 -> 2.5.
 *  - With `onread.buffer` as a function (Node calls it after every read, for the next one)
 *    the kernel copies a body straight into its slab: no copy in user space.
 *  - TLS: `tls.connect` honours `onread` as well (checked on Node 20: records are decrypted
 *    into the buffer we hand out, 16 KiB per read), so HTTPS bodies land in place too; a
 *    Node that ignored it would deliver 'data' events, which go through the same parser.
 * So this module owns the socket for ranged GETs; since issue 44 also for HEADs and
 * ListObjectsV2 pages (requestWhole, ./s3-client.ts), so the first byte needs no SDK code.
 * Streams keep undici; versioned listings and S3 Express keep the SDK.
 *
 * Where the rest of a mount's CPU goes (follow-up, 2026-11-30, load 8-20 on the 2-core VM;
 * `BULK_BENCH_THREADS=1 node scripts/bulk-receive-bench.mjs --no-pipe ...`, daemon profiled
 * with BULK_BENCH_NODE_ARGS='--cpu-prof ...'; per 512 MiB read, HTTP, no latency):
 *  - Fresh daemon 3.7-4.0 s/GB against warm 2.2-2.6: the difference is start-up work charged
 *    to the first GB, not per-byte work. (a) First touch of new memory: the daemon's minor
 *    page faults are 55/MiB fresh against 14/MiB warm, and a fault costs ~10-19 us on this VM
 *    (filling 512 MiB of fresh Buffers costs 2.1-2.6 CPU s; refilling them 0.03). The slabs
 *    of a sequential read are recycled (read-cursor retires blocks behind the reader), so
 *    the slabs first touched are its read-ahead working set: --max-prefetch (64 MiB) plus
 *    about two parts. `--max-prefetch 16MiB` nearly halved the faults; huge pages
 *    (GLIBC_TUNABLES=glibc.malloc.hugetlb=1) halved them too; neither lowered CPU beyond the
 *    noise of that load. (b) JIT: V8's worker threads use ~0.26 s in the fresh read against
 *    ~0.1 s warm, and the main thread runs unoptimised code at first.
 *  - Main thread, warm: ~0.76 of 1.22 CPU s per 512 MiB. By self time: fuse-native's per-op
 *    dispatch (the native reply it calls through process.nextTick; an op per 128 KiB) ~45%,
 *    the slab -> FUSE buffer copy ~11%, FUSE adapter and prom-client per op ~8%; this module
 *    plus ./range-reader.ts ~6%. The rest is the fuse-native worker threads and V8's.
 *  - Receive path alone (scripts/receive-floor.mjs --modes wire): reads average 82 KB
 *    (6,534 reads for 2 x 256 MiB), so per-read work (a landing view, a performance.now())
 *    is ~4 ms per GB. The largest per-GET cost was copying the whole first read (a 64 KiB
 *    Buffer.from, ~0.4 ms) to parse the head; the head is now parsed where it lies.
 * So the gap to s3fs over HTTP is FUSE per-op work and a fresh process's warm-up, not this
 * receive path.
 *
 * How it works:
 *  - WirePool keeps up to `connections` keep-alive connections to one origin, hands an idle
 *    one (most recently used first) to each request or queues it.
 *  - Timers are per connection, not per request: each connection has one timer, always
 *    armed. Reads only stamp the time of the last byte; when the timer fires it fails the
 *    exchange if nothing came for `stallMs` (WireStallError), closes the connection if it
 *    sat idle for `keepAliveMs`, and otherwise sleeps for exactly the time left. So a busy
 *    connection wakes about once per `stallMs`, whatever the number of requests it serves.
 *    Each exchange still gets its own deadline: sending on a reused connection whose timer
 *    is set later than `stallMs` away (the keep-alive check) re-arms it. Interim (1xx)
 *    replies do not count as progress: the clock runs on from sending.
 *  - A Conn parses replies with ./reply-parser.ts, strictly (RFC 9112): status line and
 *    headers, then a body framed by Content-Length, chunked transfer coding or the
 *    connection's end; anything else is an HttpProtocolError. No pipelining: one exchange at
 *    a time per connection, so nothing but our reply arrives; a byte after it drops the
 *    connection.
 *  - Requests: the path and every header are checked before a byte is written
 *    (unsafeRequestHead): a CR, LF or other control character (e.g. in an ETag read from a
 *    snapshot) fails the request with UnsafeHeaderError instead of smuggling a second one.
 *  - Body bytes: while a Content-Length body is being read and the handler names a landing
 *    region (`landing()`), the next socket read goes straight there (`onLanded(n)`);
 *    otherwise into the connection's bounce buffer, passed to `onBody()` for one copy.
 *    Headers, chunked framing and error bodies use the bounce buffer. The landing region is
 *    only ever handed out for the current exchange; when an exchange ends early the
 *    connection is destroyed, so no later read can write into a buffer given back.
 *  - A request that fails on a REUSED connection before any byte of its reply came (the
 *    server closed it while idle) is sent again once on a fresh connection: a GET is
 *    idempotent and no byte was delivered.
 *  - Through an HTTP proxy (./proxy.ts, from HTTP(S)_PROXY/NO_PROXY): an http origin's requests
 *    go to the proxy in absolute form (`GET http://host/path`), an https origin's through a
 *    CONNECT tunnel with TLS over it; the request waits until the tunnel is up.
 *  - Errors keep their errno (ECONNREFUSED, ECONNRESET, ...) for ./s3-errors.ts; a reply cut
 *    short by the server closing is ECONNABORTED; a malformed reply is HttpProtocolError.
 */
import net from 'node:net';
import tls from 'node:tls';
import { performance } from 'node:perf_hooks';
import { AbortedError, HttpProtocolError, UnsafeHeaderError } from '../errors.js';
import { recvLowatOp } from '../native/addon.js';
import { connectTunnel, proxyAddress, proxyAuthorization } from './proxy.js';
import { ParseState, ReplyParser, type ReplyHeaders, type ReplySink } from './reply-parser.js';

/** Header names lower-cased; repeats combined (./reply-parser.ts). */
export type WireHeaders = ReplyHeaders;

export interface ReplyHandler {
  /** Status line and headers came. May call exchange.close() (e.g. an error reply it will not read). */
  onHeaders(status: number, headers: WireHeaders): void;
  /** Where the next body bytes may land in place (a region of the destination), or undefined. */
  landing(): Buffer | undefined;
  /** `n` body bytes were written to the start of the region landing() last returned. */
  onLanded(n: number): void;
  /** Body bytes in a buffer that is only valid during this call. */
  onBody(chunk: Buffer): void;
  /** The whole reply arrived. */
  onEnd(): void;
  /** The exchange failed (connect, reset, malformed reply); no other call follows. */
  onError(err: Error): void;
}

export interface Exchange {
  /** Ends the exchange now (its connection is dropped); no handler call follows. */
  close(): void;
  /** Whether any byte of the reply arrived. */
  readonly started: boolean;
}

export interface WirePoolOptions {
  /** Connections kept to the origin at most. */
  connections: number;
  /** An idle connection is closed after this long. */
  keepAliveMs: number;
  /** An exchange with no reply byte for this long fails with WireStallError; 0: never. */
  stallMs?: number;
  /** CA certificates (PEM) to trust for an https origin instead of Node's default roots (tls `ca`). */
  ca?: string;
  /** An HTTP proxy to reach the origin through (./proxy.ts: absolute form for http, CONNECT for https). */
  proxy?: URL;
}

/** No byte of a reply came for `stallMs`. */
export class WireStallError extends Error {
  constructor(readonly stallMs: number) {
    super(`no reply byte for ${stallMs} ms`);
  }
}

/**
 * 64 KiB: one socket read of a busy loopback or LAN connection rarely brings more (Node's own
 * read size is 64 KiB), so a larger bounce buffer would sit idle; it serves headers,
 * chunked bodies and error replies, and body bytes whenever a handler has no landing region.
 */
const BOUNCE_BYTES = 64 * 1024;
/**
 * 1 MiB: the receive low-water mark (SO_RCVLOWAT) while a Content-Length body has at least
 * this much left. Without it a loopback or LAN sender wakes the event loop once per burst it
 * writes (~100 KiB: measured ~10,000 epoll wake-ups per GB of Pipe mode, each a context switch,
 * the largest single cost of the daemon's main thread on our paravirtualised VMs); with it,
 * about one per MiB, and each read lands that much in the slab at once. Lowered to 1 when less
 * of the body is left (its last bytes are never held back), and between exchanges. The addon
 * caps it at a quarter of the socket's receive buffer (native/binding.c), so it never narrows
 * the TCP window; without the addon nothing changes.
 */
const RECV_LOWAT_BYTES = 1024 * 1024;
/**
 * TLS: what the reader of a TLS socket may hold that `remaining` (plaintext still to come)
 * does not show. Node hands OpenSSL every byte it reads from the socket and OpenSSL decrypts
 * every whole record, so what it holds is at most one incomplete record: 2^14 bytes of
 * plaintext plus at most 2,048 of expansion and a 5-byte header in TLS 1.2 (256 in TLS 1.3),
 * under 18.5 KiB. The bytes still on the wire can therefore be that much fewer than
 * `remaining`, and a mark above them would hold back the body's last bytes until the stall
 * check took it down (stallMs / 2, 5 s by default). Seen: Pipe over HTTPS at 40-47 MB/s
 * instead of ~170 in 4 of 24 runs of 512 MiB, and in none of 36 with this margin
 * (BENCHMARKS.md t11-busy). 64 KiB: over three records, for margin.
 */
const TLS_HELD_BYTES = 64 * 1024;

/**
 * The low-water mark to set after a read of a Content-Length body, or undefined to leave it:
 * RECV_LOWAT_BYTES while at least twice that is left (raised once per exchange), back to 1
 * (every byte reported) once the bytes still on the wire may be fewer than the mark. `held`
 * is what the socket's reader may hold unseen by `remaining` (TLS_HELD_BYTES for TLS, 0 for
 * plain TCP, where `remaining` counts the wire's own bytes). A mark is only safe while the
 * wire still owes at least that many bytes: remaining - held >= mark.
 */
export function lowatAfterRead(current: number, remaining: number, tried: boolean, held: number): number | undefined {
  if (current > 1) return remaining < current + held ? 1 : undefined;
  if (!tried && remaining >= 2 * RECV_LOWAT_BYTES + held) return RECV_LOWAT_BYTES;
  return undefined;
}
/**
 * A request's target and fields as they may be written (RFC 9112 3.2, RFC 9110 5.5):
 * origin-form of printable ASCII, token names, values of printable ASCII, SP and HTAB.
 * Anything else - above all CR and LF, which would end the head early and could smuggle a
 * second request onto the connection - is refused before a byte is written.
 */
const REQUEST_TARGET = /^\/[\x21-\x7e]*$/;
const FIELD_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const FIELD_VALUE = /^[\t\x20-\x7e]*$/;

/** Why `path` and `headers` may not be written as a request head, or undefined when they may. */
export function unsafeRequestHead(path: string, headers: Record<string, string>): UnsafeHeaderError | undefined {
  if (!REQUEST_TARGET.test(path)) return new UnsafeHeaderError(`refused to send a request for ${JSON.stringify(path.slice(0, 200))}: its path holds a space, a control or a non-ASCII character`);
  for (const [k, v] of Object.entries(headers)) {
    if (!FIELD_NAME.test(k)) return new UnsafeHeaderError(`refused to send the header name ${JSON.stringify(k.slice(0, 80))}: not an HTTP token`);
    if (typeof v !== 'string' || !FIELD_VALUE.test(v)) {
      return new UnsafeHeaderError(`refused to send ${k}: ${JSON.stringify(String(v).slice(0, 200))}: it holds CR, LF, another control or a non-ASCII character`);
    }
  }
  return undefined;
}

/**
 * The server closed the connection cleanly before its reply ended (a truncated body, or a
 * keep-alive connection closed while idle). ECONNABORTED: retried like a reset, but kept
 * apart from a real reset (ECONNRESET from the kernel) so a cut body is counted as short.
 */
function closedError(message: string): Error {
  return Object.assign(new Error(message), { code: 'ECONNABORTED' });
}

class Conn implements ReplySink {
  /** The socket; undefined while a proxy tunnel is being set up. */
  private sock: net.Socket | undefined;
  /** The proxy connection of a CONNECT under way (destroyed with the connection). */
  private tunnel: net.Socket | undefined;
  /** A request written before the socket existed (a tunnel under way). */
  private queued: string | undefined;
  /** scheme://host[:port] put before each path when requests go to an HTTP proxy in absolute form. */
  private absolute = '';
  /** The Proxy-Authorization header line for such a proxy, or ''. */
  private proxyAuth = '';
  private readonly bounce = Buffer.allocUnsafe(BOUNCE_BYTES);
  /** The region the next read lands in when it is not the bounce buffer. */
  private landed: Buffer | undefined;
  ex: ExchangeImpl | undefined;
  private readonly parser = new ReplyParser(this);
  /** Exchanges served; > 0 means the server may have closed it while idle. */
  uses = 0;
  dead = false;
  /** The connection's one timer (stall and keep-alive checks); armed while it lives. */
  private timer: NodeJS.Timeout | undefined;
  /** performance.now() when the timer fires. */
  private due = 0;
  /** performance.now() of the last reply byte (or of sending) while an exchange is on; of going idle otherwise. */
  private last = performance.now();
  /** performance.now() when the current exchange's request was sent: interim replies set `last` back to it. */
  private sentAt = 0;
  /** The socket's SO_RCVLOWAT as last set (1: the kernel's default, every byte is reported). */
  private lowat = 1;
  /** The mark was raised (or tried) during the current exchange. */
  private lowatTried = false;
  /** Bytes the socket's reader may hold beyond what `remaining` shows (TLS_HELD_BYTES for TLS). */
  private readonly heldByReader: number;

  constructor(private readonly pool: WirePool, url: URL, ca: string | undefined, private readonly stallMs: number, private readonly keepAliveMs: number, proxy: URL | undefined) {
    const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const onread = { buffer: this.nextBuffer, callback: this.onRead };
    this.heldByReader = url.protocol === 'https:' ? TLS_HELD_BYTES : 0;
    if (url.protocol === 'https:') {
      const servername = net.isIP(host) === 0 ? host : undefined;
      const opts = { onread, ...(servername ? { servername } : {}), ...(ca !== undefined ? { ca } : {}) } as tls.ConnectionOptions;
      if (proxy === undefined) this.attach(tls.connect({ host, port, ...opts }), true);
      else {
        // Through a CONNECT tunnel (./proxy.ts): the request waits in `queued` until TLS runs over it.
        this.tunnel = connectTunnel(proxy, host, port, (err, raw) => {
          this.tunnel = undefined;
          if (this.dead) { raw?.destroy(); return; }
          if (err) { this.fail(err); return; }
          this.attach(tls.connect({ socket: raw!, ...opts }), true);
        });
      }
    } else if (proxy === undefined) {
      this.attach(net.connect({ host, port, onread }), false);
    } else {
      // Plain HTTP through a proxy: requests in absolute form (see send()).
      this.absolute = `${url.protocol}//${url.host}`;
      const auth = proxyAuthorization(proxy);
      if (auth !== undefined) this.proxyAuth = `proxy-authorization: ${auth}\r\n`;
      this.attach(net.connect({ ...proxyAddress(proxy), onread }), false);
    }
    this.arm(stallMs > 0 ? stallMs : keepAliveMs);
  }

  /** Takes `sock` as the connection's socket and sends a request that waited for it. */
  private attach(sock: net.Socket, secure: boolean): void {
    this.sock = sock;
    // Node versions that ignore onread for TLS deliver 'data' events instead: same parser, one copy.
    if (secure) sock.on('data', (d: Buffer) => this.feed(d, 0, d.length));
    sock.setNoDelay(true);
    sock.on('error', (err) => this.fail(err));
    sock.on('end', () => this.onEof());
    sock.on('close', () => this.fail(closedError('connection closed')));
    if (this.queued !== undefined) { sock.write(this.queued); this.queued = undefined; }
  }

  private arm(ms: number): void {
    this.due = performance.now() + ms;
    this.timer = setTimeout(this.check, ms);
    this.timer.unref();
  }

  private readonly check = (): void => {
    this.timer = undefined;
    if (this.dead) return;
    const quiet = performance.now() - this.last;
    if (this.ex !== undefined) {
      if (this.stallMs > 0 && this.lowat > 1 && quiet >= this.stallMs / 2) {
        // Bytes below the low-water mark are not reported: take the mark down, so any that
        // came are read (and stamp `last`) before the stall is judged.
        this.setLowat(1);
        this.arm(Math.max(1, this.stallMs - quiet));
        return;
      }
      if (this.stallMs > 0 && quiet >= this.stallMs) { this.fail(new WireStallError(this.stallMs)); return; }
      this.arm(this.stallMs > 0 ? (this.lowat > 1 ? this.stallMs / 2 : this.stallMs) - quiet : this.keepAliveMs);
    } else {
      if (quiet >= this.keepAliveMs) { this.destroy(); return; }
      this.arm(this.keepAliveMs - quiet);
    }
  };

  /** The connection goes back to the pool: its keep-alive clock starts. */
  idle(): void {
    this.last = performance.now();
  }

  private readonly nextBuffer = (): Buffer => {
    if (this.parser.state === ParseState.Length && this.ex !== undefined && this.parser.remaining > 0) {
      const r = this.ex.handler.landing();
      if (r !== undefined && r.length > 0) {
        this.landed = r.length > this.parser.remaining ? r.subarray(0, this.parser.remaining) : r;
        return this.landed;
      }
    }
    this.landed = undefined;
    return this.bounce;
  };

  private readonly onRead = (n: number, buf: Buffer): boolean => {
    this.last = performance.now();
    if (buf === this.landed && buf !== undefined) {
      this.landed = undefined;
      const ex = this.ex;
      if (ex === undefined) { this.destroy(); return false; }
      ex.started = true;
      ex.handler.onLanded(n);
      if (this.ex === ex) {
        this.parser.landed(n);
        if (this.ex === ex) this.tuneLowat();
      }
      return true;
    }
    this.feed(buf, 0, n);
    return true;
  };

  send(ex: ExchangeImpl, hostHeader: string): void {
    this.ex = ex;
    ex.conn = this;
    this.parser.reset(ex.method === 'HEAD');
    this.lowatTried = false;
    this.last = this.sentAt = performance.now();
    // Each exchange gets its own stall deadline: a reused connection's timer may be set for
    // the keep-alive check, up to keepAliveMs away (a stalled second GET was judged after
    // 9 s with a 500 ms timeout). Re-armed only when it would fire too late.
    if (this.stallMs > 0 && (this.timer === undefined || this.due > this.sentAt + this.stallMs)) {
      clearTimeout(this.timer);
      this.arm(this.stallMs);
    }
    let req = `${ex.method} ${this.absolute}${ex.path} HTTP/1.1\r\nhost: ${hostHeader}\r\n${this.proxyAuth}`;
    for (const [k, v] of Object.entries(ex.headers)) if (k.toLowerCase() !== 'host') req += `${k}: ${v}\r\n`;
    if (this.sock !== undefined) this.sock.write(req + '\r\n');
    else this.queued = req + '\r\n';
  }

  /** Parses bytes of buf[off, end) in the bounce buffer (or a 'data' chunk). */
  feed(buf: Buffer, off: number, end: number): void {
    const ex = this.ex;
    // Bytes nobody asked for: the connection cannot be trusted any more.
    if (ex === undefined) { this.destroy(); return; }
    ex.started = true;
    if (!this.parser.feed(buf, off, end)) this.destroy();
  }

  /** ReplySink: an interim (1xx) reply is not progress: the stall clock runs on from sending. */
  onInterim(): void {
    this.last = this.sentAt;
  }

  /** ReplySink. */
  onHeaders(status: number, headers: ReplyHeaders): void {
    this.ex?.handler.onHeaders(status, headers);
  }

  /** ReplySink. */
  onBody(chunk: Buffer): void {
    const ex = this.ex;
    if (ex === undefined) return;
    ex.handler.onBody(chunk);
    if (this.ex === ex && this.parser.state === ParseState.Length) this.tuneLowat();
  }

  /** ReplySink: the reply is complete: hand the connection back (or drop it) and tell the handler. */
  onComplete(): void {
    const ex = this.ex;
    if (ex === undefined) return;
    this.ex = undefined;
    ex.conn = undefined;
    if (this.lowat > 1) this.setLowat(1); // the next reply's head (and a short body) must be seen at once
    this.uses++;
    if (this.parser.keepAlive) this.pool.release(this);
    else this.destroy();
    ex.done = true;
    ex.handler.onEnd();
  }

  /** ReplySink: the reply broke the framing rules. */
  onError(err: Error): void {
    this.fail(err);
  }

  private onEof(): void {
    if (this.ex !== undefined && this.parser.eof()) return;
    this.fail(closedError('the server closed the connection before the reply ended'));
  }

  /**
   * While a Content-Length body is read: a low-water mark of RECV_LOWAT_BYTES when at least
   * that much is left, none (1) once less is (see RECV_LOWAT_BYTES). Two setsockopt calls per
   * long body.
   */
  private tuneLowat(): void {
    const next = lowatAfterRead(this.lowat, this.parser.remaining, this.lowatTried, this.heldByReader);
    if (next === undefined) return;
    if (next > 1) this.lowatTried = true; // once per exchange: not again after the stall check took it down
    this.setLowat(next);
  }

  /** Set SO_RCVLOWAT (the addon may set less, see RECV_LOWAT_BYTES); a failure leaves the socket as it was. */
  private setLowat(bytes: number): void {
    const op = this.pool.recvLowat;
    if (op === undefined) return;
    // A TLS socket's own handle wraps the TCP handle that owns the descriptor.
    if (this.sock === undefined) return;
    const h = (this.sock as unknown as { _handle?: { fd?: number; _parent?: { fd?: number } } })._handle;
    const fd = h?._parent?.fd ?? h?.fd ?? -1;
    if (fd < 0) return;
    try {
      this.lowat = op(fd, bytes);
    } catch {
      this.lowat = 1; // EBADF/ENOTSOCK: the socket is going away; nothing to tune
    }
  }

  /** The connection broke: fail its exchange, if any, and forget it. */
  fail(err: Error): void {
    const ex = this.ex;
    this.ex = undefined;
    this.destroy();
    if (ex === undefined || ex.done) return;
    ex.conn = undefined;
    if (!ex.started && this.uses > 0 && !ex.resent && !(err instanceof WireStallError)) {
      // A keep-alive connection the server had closed while idle: send it again, fresh.
      ex.resent = true;
      this.pool.dispatch(ex, true);
      return;
    }
    ex.done = true;
    ex.handler.onError(err);
  }

  destroy(): void {
    if (this.dead) return;
    this.dead = true;
    this.parser.stop();
    this.landed = undefined;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.sock?.destroy();
    this.tunnel?.destroy();
    this.pool.forget(this);
  }
}

class ExchangeImpl implements Exchange {
  conn: Conn | undefined;
  started = false;
  done = false;
  resent = false;
  constructor(readonly pool: WirePool, readonly path: string, readonly headers: Record<string, string>, readonly handler: ReplyHandler, readonly method: 'GET' | 'HEAD' = 'GET') {}

  close(): void {
    if (this.done) return;
    this.done = true;
    const c = this.conn;
    this.conn = undefined;
    if (c) { c.ex = undefined; c.destroy(); } else this.pool.unqueue(this);
  }
}

export class WirePool {
  /** @internal SO_RCVLOWAT setter from the addon, or undefined (then no mark is set). */
  readonly recvLowat = recvLowatOp();
  private readonly url: URL;
  private readonly idle: Conn[] = [];
  private readonly queue: ExchangeImpl[] = [];
  private count = 0;
  private closed = false;

  constructor(origin: string, private readonly o: WirePoolOptions) {
    this.url = new URL(origin);
  }

  /** Sends `GET path` (or HEAD) with `headers`; the handler hears the reply. */
  request(path: string, headers: Record<string, string>, handler: ReplyHandler, method: 'GET' | 'HEAD' = 'GET'): Exchange {
    const ex = new ExchangeImpl(this, path, headers, handler, method);
    const unsafe = unsafeRequestHead(path, headers);
    if (unsafe !== undefined) {
      ex.done = true;
      queueMicrotask(() => handler.onError(unsafe));
      return ex;
    }
    if (this.closed) {
      ex.done = true;
      queueMicrotask(() => handler.onError(Object.assign(new Error('the connection pool is closed'), { code: 'UND_ERR_CLOSED' })));
      return ex;
    }
    this.dispatch(ex, false);
    return ex;
  }

  /** @internal Gives `ex` a connection now, or queues it. */
  dispatch(ex: ExchangeImpl, fresh: boolean): void {
    const conn = fresh ? undefined : this.idle.pop();
    if (conn) { conn.send(ex, this.url.host); return; }
    if (this.count < this.o.connections || fresh) {
      this.count++;
      new Conn(this, this.url, this.o.ca, this.o.stallMs ?? 0, this.o.keepAliveMs, this.o.proxy).send(ex, this.url.host);
      return;
    }
    this.queue.push(ex);
  }

  /** @internal A connection finished an exchange and may be reused. */
  release(c: Conn): void {
    const next = this.queue.shift();
    if (next) { c.send(next, this.url.host); return; }
    if (this.closed) { c.destroy(); return; }
    c.idle();
    this.idle.push(c);
  }

  /** @internal A connection is gone. */
  forget(c: Conn): void {
    this.count--;
    const i = this.idle.indexOf(c);
    if (i >= 0) this.idle.splice(i, 1);
    const next = this.queue.shift();
    if (next && !this.closed) this.dispatch(next, false);
    else if (next) this.queue.unshift(next);
  }

  /** @internal */
  unqueue(ex: ExchangeImpl): void {
    const i = this.queue.indexOf(ex);
    if (i >= 0) this.queue.splice(i, 1);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const c of [...this.idle]) c.destroy();
    const waiting = this.queue.splice(0);
    for (const ex of waiting) { ex.done = true; ex.handler.onError(Object.assign(new Error('the connection pool is closed'), { code: 'UND_ERR_CLOSED' })); }
  }
}

/** A reply read whole: status, headers and body (empty for a HEAD). */
export interface WholeReply {
  status: number;
  headers: WireHeaders;
  body: Buffer;
}

/**
 * One request whose reply body is collected whole (listing pages, HEADs, error replies), at
 * most `maxBytes` of it (a longer one fails with HttpProtocolError). `signal` aborts it
 * (AbortedError). Stalls fail with WireStallError, as ranged GETs' do.
 */
export function requestWhole(pool: WirePool, method: 'GET' | 'HEAD', path: string, headers: Record<string, string>, maxBytes: number, signal?: AbortSignal): Promise<WholeReply> {
  return new Promise<WholeReply>((resolve, reject) => {
    if (signal?.aborted) { reject(new AbortedError()); return; }
    let status = 0;
    let replyHeaders: WireHeaders = {};
    const parts: Buffer[] = [];
    let size = 0;
    let settled = false;
    const done = (err: Error | undefined) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener('abort', onAbort);
      if (err !== undefined) reject(err);
      else resolve({ status, headers: replyHeaders, body: Buffer.concat(parts, size) });
    };
    const onAbort = () => { ex.close(); done(new AbortedError()); };
    const ex = pool.request(path, headers, {
      onHeaders: (s, h) => { status = s; replyHeaders = h; },
      landing: () => undefined,
      onLanded: () => undefined,
      onBody: (chunk) => {
        size += chunk.length;
        if (size > maxBytes) { ex.close(); done(new HttpProtocolError(`a ${method} reply body of more than ${maxBytes} bytes`)); return; }
        parts.push(Buffer.from(chunk)); // the chunk is only valid during this call
      },
      onEnd: () => done(undefined),
      onError: (err) => done(err),
    }, method);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
