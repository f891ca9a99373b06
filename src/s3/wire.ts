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
 * So this module owns the socket for ranged GETs only; listing, HEAD and streams keep undici
 * and the SDK.
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
 *  - A Conn parses replies itself: status line and headers (at most MAX_HEAD bytes), then a
 *    body framed by Content-Length, chunked transfer coding or the connection's end. No
 *    pipelining: one exchange at a time per connection, so nothing but our reply arrives.
 *  - Body bytes: while a Content-Length body is being read and the handler names a landing
 *    region (`landing()`), the next socket read goes straight there (`onLanded(n)`);
 *    otherwise into the connection's bounce buffer, passed to `onBody()` for one copy.
 *    Headers, chunked framing and error bodies use the bounce buffer. The landing region is
 *    only ever handed out for the current exchange; when an exchange ends early the
 *    connection is destroyed, so no later read can write into a buffer given back.
 *  - A request that fails on a REUSED connection before any byte of its reply came (the
 *    server closed it while idle) is sent again once on a fresh connection: a GET is
 *    idempotent and no byte was delivered.
 *  - Errors keep their errno (ECONNREFUSED, ECONNRESET, ...) for ./s3-errors.ts; a reply cut
 *    short by the server closing is ECONNABORTED; a malformed reply is WireProtocolError.
 */
import net from 'node:net';
import tls from 'node:tls';
import { performance } from 'node:perf_hooks';
import { recvLowatOp } from '../native/addon.js';

/** Header names lower-cased; the first value of a repeated header. */
export type WireHeaders = Record<string, string>;

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
}

export class WireProtocolError extends Error {
  readonly code = 'EPROTO';
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
/** S3 reply headers are ~1 KiB; 64 KiB is far beyond any real reply and bounds a broken one. */
const MAX_HEAD = 64 * 1024;
const CRLFCRLF = Buffer.from('\r\n\r\n');

const enum State { Idle, Head, Length, Chunked, UntilClose, Done }
const enum ChunkState { Size, Data, DataEnd, Trailer }

/**
 * The server closed the connection cleanly before its reply ended (a truncated body, or a
 * keep-alive connection closed while idle). ECONNABORTED: retried like a reset, but kept
 * apart from a real reset (ECONNRESET from the kernel) so a cut body is counted as short.
 */
function closedError(message: string): Error {
  return Object.assign(new Error(message), { code: 'ECONNABORTED' });
}

class Conn {
  readonly sock: net.Socket;
  private readonly bounce = Buffer.allocUnsafe(BOUNCE_BYTES);
  /** The region the next read lands in when it is not the bounce buffer. */
  private landed: Buffer | undefined;
  ex: ExchangeImpl | undefined;
  private state = State.Idle;
  private head: Buffer[] = [];
  private headLen = 0;
  private remaining = 0;
  private chunkState = ChunkState.Size;
  private line = '';
  private keepAlive = true;
  /** Exchanges served; > 0 means the server may have closed it while idle. */
  uses = 0;
  dead = false;
  /** The connection's one timer (stall and keep-alive checks); armed while it lives. */
  private timer: NodeJS.Timeout | undefined;
  /** performance.now() of the last reply byte (or of sending) while an exchange is on; of going idle otherwise. */
  private last = performance.now();
  /** The socket's SO_RCVLOWAT as last set (1: the kernel's default, every byte is reported). */
  private lowat = 1;
  /** The mark was raised (or tried) during the current exchange. */
  private lowatTried = false;
  /** Bytes the socket's reader may hold beyond what `remaining` shows (TLS_HELD_BYTES for TLS). */
  private readonly heldByReader: number;

  constructor(private readonly pool: WirePool, url: URL, ca: string | undefined, private readonly stallMs: number, private readonly keepAliveMs: number) {
    const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const onread = { buffer: this.nextBuffer, callback: this.onRead };
    this.heldByReader = url.protocol === 'https:' ? TLS_HELD_BYTES : 0;
    if (url.protocol === 'https:') {
      const servername = net.isIP(host) === 0 ? host : undefined;
      this.sock = tls.connect({ host, port, onread, ...(servername ? { servername } : {}), ...(ca !== undefined ? { ca } : {}) } as tls.ConnectionOptions);
      // Node versions that ignore onread for TLS deliver 'data' events instead: same parser, one copy.
      this.sock.on('data', (d: Buffer) => this.feed(d, 0, d.length));
    } else {
      this.sock = net.connect({ host, port, onread });
    }
    this.sock.setNoDelay(true);
    this.sock.on('error', (err) => this.fail(err));
    this.sock.on('end', () => this.onEof());
    this.sock.on('close', () => this.fail(closedError('connection closed')));
    this.arm(stallMs > 0 ? stallMs : keepAliveMs);
  }

  private arm(ms: number): void {
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
    if (this.state === State.Length && this.ex !== undefined && this.remaining > 0) {
      const r = this.ex.handler.landing();
      if (r !== undefined && r.length > 0) {
        this.landed = r.length > this.remaining ? r.subarray(0, this.remaining) : r;
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
      this.remaining -= n;
      ex.handler.onLanded(n);
      if (this.ex === ex) {
        if (this.remaining === 0) this.complete();
        else this.tuneLowat();
      }
      return true;
    }
    this.feed(buf, 0, n);
    return true;
  };

  send(ex: ExchangeImpl, hostHeader: string): void {
    this.ex = ex;
    ex.conn = this;
    this.state = State.Head;
    this.head = [];
    this.headLen = 0;
    this.keepAlive = true;
    this.lowatTried = false;
    this.last = performance.now();
    let req = `GET ${ex.path} HTTP/1.1\r\nhost: ${hostHeader}\r\n`;
    for (const [k, v] of Object.entries(ex.headers)) if (k.toLowerCase() !== 'host') req += `${k}: ${v}\r\n`;
    this.sock.write(req + '\r\n');
  }

  /** Parses bytes of buf[off, end) in the bounce buffer (or a 'data' chunk). */
  feed(buf: Buffer, off: number, end: number): void {
    while (off < end) {
      const ex = this.ex;
      if (ex === undefined || this.state === State.Idle || this.state === State.Done) {
        // Bytes nobody asked for: the connection cannot be trusted any more.
        this.destroy();
        return;
      }
      ex.started = true;
      switch (this.state) {
        case State.Head: off = this.parseHead(buf, off, end); break;
        case State.Length: {
          const n = Math.min(this.remaining, end - off);
          this.remaining -= n;
          ex.handler.onBody(buf.subarray(off, off + n));
          off += n;
          if (this.ex === ex) {
            if (this.remaining === 0) this.complete();
            else this.tuneLowat();
          }
          break;
        }
        case State.UntilClose:
          ex.handler.onBody(buf.subarray(off, end));
          off = end;
          break;
        case State.Chunked: off = this.parseChunked(buf, off, end); break;
      }
      if (this.ex !== ex) return; // the handler closed it, or it completed
    }
  }

  private parseHead(buf: Buffer, off: number, end: number): number {
    const piece = buf.subarray(off, end);
    const prev = this.headLen;
    // The usual case: the whole head is in this read (with the first body bytes behind it),
    // so it is parsed where it lies. Copying the read instead cost ~0.4 ms per GET (a 64 KiB
    // Buffer.from, mostly body bytes), measured 4% of the receive path's CPU.
    let all = piece;
    let at = prev === 0 ? piece.indexOf(CRLFCRLF) : -1;
    if (at < 0) {
      // The head goes on in the next read: keep what may be head (a copy: the bounce buffer
      // is reused by the next read), and search again from 3 bytes before the new piece,
      // as the terminator may straddle reads.
      const keep = piece.subarray(0, Math.min(piece.length, MAX_HEAD + 4));
      this.head.push(Buffer.from(keep));
      this.headLen += keep.length;
      all = this.head.length === 1 ? this.head[0]! : Buffer.concat(this.head, this.headLen);
      this.head = [all];
      at = all.indexOf(CRLFCRLF, Math.max(0, prev - 3));
      if (at < 0) {
        if (this.headLen > MAX_HEAD) this.fail(new WireProtocolError(`reply headers longer than ${MAX_HEAD} bytes`));
        return end;
      }
    }
    const used = at + 4 - prev; // bytes of this piece that belong to the head
    const lines = all.toString('latin1', 0, at).split('\r\n');
    const m = /^HTTP\/1\.([01]) (\d{3})/.exec(lines[0] ?? '');
    if (!m) { this.fail(new WireProtocolError(`bad status line ${JSON.stringify((lines[0] ?? '').slice(0, 80))}`)); return end; }
    const status = Number(m[2]);
    const headers: WireHeaders = {};
    for (let i = 1; i < lines.length; i++) {
      const l = lines[i]!;
      const c = l.indexOf(':');
      if (c <= 0) continue;
      const name = l.slice(0, c).trim().toLowerCase();
      if (!(name in headers)) headers[name] = l.slice(c + 1).trim();
    }
    this.head = [];
    this.headLen = 0;
    if (status >= 100 && status < 200) {
      // 100 Continue and friends: the real reply follows.
      return off + used;
    }
    const conn = headers['connection']?.toLowerCase();
    this.keepAlive = m[1] === '1' ? conn !== 'close' : conn === 'keep-alive';
    const te = headers['transfer-encoding']?.toLowerCase();
    const cl = headers['content-length'];
    if (status === 204 || status === 304) this.state = State.Done;
    else if (te !== undefined && te.endsWith('chunked')) { this.state = State.Chunked; this.chunkState = ChunkState.Size; this.line = ''; }
    else if (cl !== undefined) {
      if (!/^\d+$/.test(cl)) { this.fail(new WireProtocolError(`bad Content-Length ${JSON.stringify(cl)}`)); return end; }
      this.remaining = Number(cl);
      this.state = this.remaining === 0 ? State.Done : State.Length;
    } else { this.state = State.UntilClose; this.keepAlive = false; }
    const ex = this.ex!;
    ex.handler.onHeaders(status, headers);
    if (this.ex !== ex) return end;
    if (this.state === State.Done) { this.complete(); return end; }
    return off + used;
  }

  private parseChunked(buf: Buffer, off: number, end: number): number {
    const ex = this.ex!;
    while (off < end && this.ex === ex) {
      if (this.chunkState === ChunkState.Data) {
        const n = Math.min(this.remaining, end - off);
        this.remaining -= n;
        ex.handler.onBody(buf.subarray(off, off + n));
        off += n;
        if (this.remaining === 0) { this.chunkState = ChunkState.DataEnd; this.line = ''; }
        continue;
      }
      // Size, DataEnd and Trailer are lines: collect up to LF.
      const lf = buf.indexOf(10, off);
      const stop = lf < 0 || lf >= end ? end : lf;
      this.line += buf.toString('latin1', off, stop);
      if (this.line.length > 8192) { this.fail(new WireProtocolError('chunked framing line too long')); return end; }
      if (stop === end) return end;
      off = stop + 1;
      const line = this.line.replace(/\r$/, '');
      this.line = '';
      if (this.chunkState === ChunkState.Size) {
        const size = /^([0-9a-fA-F]+)/.exec(line);
        if (!size) { this.fail(new WireProtocolError(`bad chunk size ${JSON.stringify(line.slice(0, 40))}`)); return end; }
        this.remaining = parseInt(size[1]!, 16);
        this.chunkState = this.remaining === 0 ? ChunkState.Trailer : ChunkState.Data;
      } else if (this.chunkState === ChunkState.DataEnd) {
        if (line !== '') { this.fail(new WireProtocolError('chunk not followed by CRLF')); return end; }
        this.chunkState = ChunkState.Size;
      } else if (line === '') {
        this.complete();
        return off;
      }
    }
    return off;
  }

  private onEof(): void {
    if (this.ex !== undefined && this.state === State.UntilClose) {
      this.keepAlive = false;
      this.complete();
      return;
    }
    this.fail(closedError('the server closed the connection before the reply ended'));
  }

  /**
   * While a Content-Length body is read: a low-water mark of RECV_LOWAT_BYTES when at least
   * that much is left, none (1) once less is (see RECV_LOWAT_BYTES). Two setsockopt calls per
   * long body.
   */
  private tuneLowat(): void {
    const next = lowatAfterRead(this.lowat, this.remaining, this.lowatTried, this.heldByReader);
    if (next === undefined) return;
    if (next > 1) this.lowatTried = true; // once per exchange: not again after the stall check took it down
    this.setLowat(next);
  }

  /** Set SO_RCVLOWAT (the addon may set less, see RECV_LOWAT_BYTES); a failure leaves the socket as it was. */
  private setLowat(bytes: number): void {
    const op = this.pool.recvLowat;
    if (op === undefined) return;
    // A TLS socket's own handle wraps the TCP handle that owns the descriptor.
    const h = (this.sock as unknown as { _handle?: { fd?: number; _parent?: { fd?: number } } })._handle;
    const fd = h?._parent?.fd ?? h?.fd ?? -1;
    if (fd < 0) return;
    try {
      this.lowat = op(fd, bytes);
    } catch {
      this.lowat = 1; // EBADF/ENOTSOCK: the socket is going away; nothing to tune
    }
  }

  /** The reply is complete: hand the connection back (or drop it) and tell the handler. */
  private complete(): void {
    const ex = this.ex!;
    this.ex = undefined;
    ex.conn = undefined;
    this.state = State.Idle;
    if (this.lowat > 1) this.setLowat(1); // the next reply's head (and a short body) must be seen at once
    this.uses++;
    if (this.keepAlive) this.pool.release(this);
    else this.destroy();
    ex.done = true;
    ex.handler.onEnd();
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
    this.state = State.Idle;
    this.landed = undefined;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.sock.destroy();
    this.pool.forget(this);
  }
}

class ExchangeImpl implements Exchange {
  conn: Conn | undefined;
  started = false;
  done = false;
  resent = false;
  constructor(readonly pool: WirePool, readonly path: string, readonly headers: Record<string, string>, readonly handler: ReplyHandler) {}

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

  /** Sends `GET path` with `headers`; the handler hears the reply. */
  request(path: string, headers: Record<string, string>, handler: ReplyHandler): Exchange {
    const ex = new ExchangeImpl(this, path, headers, handler);
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
      new Conn(this, this.url, this.o.ca, this.o.stallMs ?? 0, this.o.keepAliveMs).send(ex, this.url.host);
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
