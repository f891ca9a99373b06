/**
 * A strict HTTP/1.1 reply parser (RFC 9112) for the data path's own client (./wire.ts),
 * free of sockets so that a fuzzer can feed it bytes split at any boundary.
 *
 * How it works:
 *  - Head: bytes are collected up to the blank line (CRLF CRLF, at most MAX_HEAD bytes; parsed
 *    where they lie when the whole head came in one read). Then every line is checked: it
 *    ends in CRLF (a bare LF is refused); the status line is exactly `HTTP/1.x NNN reason`
 *    (NNN in 100..599, the space after it required, no control character in the reason);
 *    each field line is `token:value` with no space before the colon, no line starting with
 *    SP/HTAB (obs-fold is refused, not unfolded) and no control character but HTAB in the
 *    value. Repeated fields are combined
 *    with ", " (RFC 9110 5.3), except the singletons this client acts on (Content-Length,
 *    Content-Range, ETag), whose repeats must be identical.
 *  - 1xx replies (but 101: we never ask to switch) are skipped, at most MAX_INTERIM_REPLIES
 *    per exchange; the sink hears each one so that it does not count as progress.
 *  - Framing (RFC 9112 6.3): Transfer-Encoding must be exactly `chunked`, and never together
 *    with Content-Length (a smuggling sign); Content-Length is 1*DIGIT, or a list of
 *    identical values; otherwise the body runs until the connection closes. 204 and 304
 *    have no body.
 *  - Chunked: each size line is 1*HEXDIG with well-formed extensions (ignored), every line
 *    ends in CRLF, each chunk's data is followed by exactly CRLF, the trailer section has at
 *    most MAX_TRAILER_LINES well-formed field lines (read, then dropped).
 *  - Body bytes go to the sink as views of the buffer fed (valid during the call). The owner
 *    may instead let a read land in place (`state === ParseState.Length`) and report it
 *    with `landed(n)`.
 *  - Any breach is an HttpProtocolError (SLUICE_HTTP_PROTOCOL) given to `sink.onError`; the
 *    parser then stops (state Failed) and the connection must not be reused. Bytes after a
 *    complete reply are reported (`onComplete(true)`): with no pipelining, nothing but our
 *    reply may arrive, so the connection is not kept.
 * Cost: a few regular expressions per reply head (S3's has ~10 lines); nothing per body byte.
 */
import { HttpProtocolError } from '../errors.js';

/** Header names lower-cased; repeats combined with ", " (identical singletons kept once). */
export type ReplyHeaders = Record<string, string>;

export interface ReplySink {
  /** A 1xx interim reply was read and skipped. */
  onInterim(): void;
  /** The final status line and headers. The owner may stop() the parser in this call. */
  onHeaders(status: number, headers: ReplyHeaders): void;
  /** Body bytes, valid only during this call. */
  onBody(chunk: Buffer): void;
  /** The reply is complete; `extra`: bytes followed it in the same read (the connection is not to be kept). */
  onComplete(extra: boolean): void;
  /** The reply broke the framing rules; no other call follows for this exchange. */
  onError(err: HttpProtocolError): void;
}

export enum ParseState { Idle, Head, Length, Chunked, UntilClose, Done, Failed }
const enum ChunkState { Size, Data, DataEnd, Trailer }

/** S3 reply headers are ~1 KiB; 64 KiB is far beyond any real reply and bounds a broken one. */
export const MAX_HEAD = 64 * 1024;
/**
 * 4: S3 sends no interim reply to a GET without `Expect` (we never send one); a 100, a 102
 * and a 103 each once would be 3. A server that answers only with interim replies is not
 * serving the request: without a bound, a 102 every 500 ms kept a GET open past its deadline.
 */
export const MAX_INTERIM_REPLIES = 4;
/**
 * 32: S3 sends no trailers on a GET reply; a checksum trailer or two is what a server might
 * add. Bounds the lines (each at most MAX_CHUNK_LINE bytes) that a broken server can make
 * us read after the last chunk.
 */
export const MAX_TRAILER_LINES = 32;
/** 8 KiB: a chunk-size line with extensions, or a trailer line, is tens of bytes; this bounds a broken one. */
export const MAX_CHUNK_LINE = 8192;
/** 13 hex digits (< 2^52): every chunk size stays an exact JavaScript number; real chunks are at most a few MiB. */
const MAX_CHUNK_SIZE_DIGITS = 13;

const CRLFCRLF = Buffer.from('\r\n\r\n');
/** status-line = HTTP-version SP status-code SP [ reason-phrase ]; reason-phrase = *( HTAB / SP / VCHAR / obs-text ). */
const STATUS_LINE = /^HTTP\/1\.([01]) ([1-5]\d\d) [\t\x20-\x7e\x80-\xff]*$/;
const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
/** field-line = field-name ":" OWS field-value OWS; the value is checked for control characters apart. */
const FIELD_LINE = new RegExp(`^(${TOKEN}):[ \\t]*(.*?)[ \\t]*$`);
/** A control character a field value may not hold (HTAB is allowed). */
const FIELD_CTL = /[\x00-\x08\x0a-\x1f\x7f]/;
const QUOTED = '"(?:[\\t \\x21\\x23-\\x5b\\x5d-\\x7e\\x80-\\xff]|\\\\[\\t \\x21-\\x7e\\x80-\\xff])*"';
/** chunk-size [ chunk-ext ]: chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] ). */
const CHUNK_SIZE_LINE = new RegExp(`^([0-9A-Fa-f]+)(?:[ \\t]*;[ \\t]*${TOKEN}(?:[ \\t]*=[ \\t]*(?:${TOKEN}|${QUOTED}))?)*$`);
/** Fields this client acts on, whose repeats must agree. */
const SINGLETONS = new Set(['content-length', 'content-range', 'etag']);

function show(s: string): string {
  return JSON.stringify(s.length > 80 ? `${s.slice(0, 80)}...` : s);
}

/** Checks one field line and adds it to `into`; returns the error text, or undefined. */
function addField(line: string, into: ReplyHeaders): string | undefined {
  if (line.length > 0 && (line.charCodeAt(0) === 0x20 || line.charCodeAt(0) === 0x09)) return `obs-fold (a line starting with whitespace) in ${show(line)}`;
  const m = FIELD_LINE.exec(line);
  if (!m) return `bad field line ${show(line)}`;
  const value = m[2]!;
  if (FIELD_CTL.test(value)) return `control character in field ${show(line)}`;
  const name = m[1]!.toLowerCase();
  const had = into[name];
  if (had === undefined) into[name] = value;
  else if (SINGLETONS.has(name)) { if (had !== value) return `conflicting ${name} fields ${show(had)} and ${show(value)}`; }
  else into[name] = `${had}, ${value}`;
  return undefined;
}

/**
 * Whether b[from, to) holds an LF not preceded by CR. RFC 9112 2.2 lets a recipient take a
 * bare LF as a line end; we refuse it: S3 never sends one, and two parsers that disagree on
 * where a line ends are how responses get split.
 */
function bareLf(b: Buffer, from: number, to: number): boolean {
  for (let i = b.indexOf(10, from); i >= 0 && i < to; i = b.indexOf(10, i + 1)) if (i === 0 || b[i - 1] !== 13) return true;
  return false;
}

/** Content-Length = 1*DIGIT, or a list of identical values (RFC 9112 6.3 item 5); -1 when invalid. */
function contentLength(v: string): number {
  let n = -1;
  for (const part of v.split(',')) {
    const p = part.trim();
    if (!/^\d{1,16}$/.test(p)) return -1;
    const x = Number(p);
    if (x > Number.MAX_SAFE_INTEGER || (n >= 0 && x !== n)) return -1;
    n = x;
  }
  return n;
}

export class ReplyParser {
  state = ParseState.Idle;
  /** Content-Length bytes still to come (ParseState.Length), or of the current chunk. */
  remaining = 0;
  /** Whether the connection may serve another exchange after this reply. */
  keepAlive = true;
  private chunkState = ChunkState.Size;
  private line = '';
  private trailers = 0;
  private interim = 0;
  private head: Buffer[] = [];
  private headLen = 0;
  /** Bumped by reset() and stop(): a feed() that sees it change returns at once. */
  private gen = 0;

  constructor(private readonly sink: ReplySink) {}

  /** Set by reset(): the reply is to a HEAD, so it has no body whatever its framing fields say. */
  private noBody = false;

  /** A new exchange: a reply head is expected; `noBody` for a HEAD's (RFC 9110 9.3.2). */
  reset(noBody = false): void {
    this.gen++;
    this.noBody = noBody;
    this.state = ParseState.Head;
    this.head = [];
    this.headLen = 0;
    this.keepAlive = true;
    this.interim = 0;
    this.remaining = 0;
  }

  /** The exchange ended (closed by its owner): bytes fed from now on are unexpected. */
  stop(): void {
    this.gen++;
    this.state = ParseState.Idle;
    this.head = [];
    this.headLen = 0;
  }

  /** Whether the parser expects more bytes of the current reply. */
  get active(): boolean {
    return this.state !== ParseState.Idle && this.state !== ParseState.Done && this.state !== ParseState.Failed;
  }

  /**
   * Parses buf[off, end). Returns false when bytes came that no exchange expects (before a
   * reset, or after a complete or failed reply): the owner drops the connection.
   */
  feed(buf: Buffer, off: number, end: number): boolean {
    const gen = this.gen;
    while (off < end) {
      switch (this.state) {
        case ParseState.Head: off = this.parseHead(buf, off, end); break;
        case ParseState.Length: {
          const n = Math.min(this.remaining, end - off);
          this.remaining -= n;
          this.sink.onBody(buf.subarray(off, off + n));
          off += n;
          if (this.gen === gen && this.remaining === 0) this.complete(off < end);
          break;
        }
        case ParseState.UntilClose:
          this.sink.onBody(buf.subarray(off, end));
          off = end;
          break;
        case ParseState.Chunked: off = this.parseChunked(buf, off, end); break;
        default: return false;
      }
      if (this.gen !== gen) return true; // stopped, reset, completed or failed: the rest is the owner's call
    }
    return true;
  }

  /** `n` body bytes of a Content-Length body landed in place (not through feed()). */
  landed(n: number): void {
    this.remaining -= n;
    if (this.remaining === 0) this.complete(false);
  }

  /** The connection's end came: completes a close-delimited body, else false (the reply was cut). */
  eof(): boolean {
    if (this.state !== ParseState.UntilClose) return false;
    this.keepAlive = false;
    this.complete(false);
    return true;
  }

  private fail(message: string): void {
    this.gen++;
    this.state = ParseState.Failed;
    this.head = [];
    this.headLen = 0;
    this.sink.onError(new HttpProtocolError(message));
  }

  private complete(extra: boolean): void {
    this.gen++;
    this.state = ParseState.Done;
    if (extra) this.keepAlive = false;
    this.sink.onComplete(extra);
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
      // The head goes on in the next read: keep what may be head (a copy: the caller's
      // buffer is reused by the next read), and search again from 3 bytes before the new
      // piece, as the terminator may straddle reads.
      const keep = piece.subarray(0, Math.min(piece.length, MAX_HEAD + 4));
      this.head.push(Buffer.from(keep));
      this.headLen += keep.length;
      all = this.head.length === 1 ? this.head[0]! : Buffer.concat(this.head, this.headLen);
      this.head = [all];
      at = all.indexOf(CRLFCRLF, Math.max(0, prev - 3));
      if (at < 0) {
        if (bareLf(all, prev, all.length)) this.fail('a reply header line ended by a bare LF');
        else if (this.headLen > MAX_HEAD) this.fail(`reply headers longer than ${MAX_HEAD} bytes`);
        return end;
      }
    }
    if (bareLf(all, prev, at)) { this.fail('a reply header line ended by a bare LF'); return end; }
    if (at > MAX_HEAD) { this.fail(`reply headers longer than ${MAX_HEAD} bytes`); return end; }
    const used = at + 4 - prev; // bytes of this piece that belong to the head
    const lines = all.toString('latin1', 0, at).split('\r\n');
    this.head = [];
    this.headLen = 0;
    const m = STATUS_LINE.exec(lines[0]!);
    if (!m) { this.fail(`bad status line ${show(lines[0]!)}`); return end; }
    const status = Number(m[2]);
    const headers: ReplyHeaders = {};
    for (let i = 1; i < lines.length; i++) {
      const bad = addField(lines[i]!, headers);
      if (bad !== undefined) { this.fail(bad); return end; }
    }
    if (status < 200) {
      if (status === 101) { this.fail('101 Switching Protocols to a request that asked for no upgrade'); return end; }
      if (++this.interim > MAX_INTERIM_REPLIES) { this.fail(`more than ${MAX_INTERIM_REPLIES} interim (1xx) replies`); return end; }
      const gen = this.gen;
      this.sink.onInterim();
      return this.gen === gen ? off + used : end;
    }
    const tokens = (headers['connection'] ?? '').toLowerCase().split(',').map((s) => s.trim());
    this.keepAlive = m[1] === '1' ? !tokens.includes('close') : tokens.includes('keep-alive');
    // The framing fields are checked whatever the status: a reply that states them wrongly
    // (even a 204's) comes from a server, or a box in between, that we cannot parse safely.
    const te = headers['transfer-encoding'];
    const cl = headers['content-length'];
    const n = cl === undefined ? -1 : contentLength(cl);
    if (te !== undefined && te.toLowerCase() !== 'chunked') { this.fail(`Transfer-Encoding ${show(te)} is not exactly "chunked"`); return end; }
    if (te !== undefined && cl !== undefined) { this.fail('both Transfer-Encoding and Content-Length in one reply'); return end; }
    if (cl !== undefined && n < 0) { this.fail(`bad Content-Length ${show(cl)}`); return end; }
    if (status === 204 || status === 304 || this.noBody) this.state = ParseState.Done;
    else if (te !== undefined) {
      this.state = ParseState.Chunked;
      this.chunkState = ChunkState.Size;
      this.line = '';
      this.trailers = 0;
    } else if (cl !== undefined) {
      this.remaining = n;
      this.state = n === 0 ? ParseState.Done : ParseState.Length;
    } else { this.state = ParseState.UntilClose; this.keepAlive = false; }
    const gen = this.gen;
    this.sink.onHeaders(status, headers);
    if (this.gen !== gen) return end;
    if (this.state === ParseState.Done) { this.complete(off + used < end); return end; }
    return off + used;
  }

  private parseChunked(buf: Buffer, off: number, end: number): number {
    const gen = this.gen;
    while (off < end && this.gen === gen) {
      if (this.chunkState === ChunkState.Data) {
        const n = Math.min(this.remaining, end - off);
        this.remaining -= n;
        this.sink.onBody(buf.subarray(off, off + n));
        off += n;
        if (this.remaining === 0) { this.chunkState = ChunkState.DataEnd; this.line = ''; }
        continue;
      }
      // Size, DataEnd and Trailer are lines: collect up to LF; each must end in CRLF.
      const lf = buf.indexOf(10, off);
      const stop = lf < 0 || lf >= end ? end : lf;
      if (this.line.length + stop - off > MAX_CHUNK_LINE) { this.fail('chunked framing line too long'); return end; }
      this.line += buf.toString('latin1', off, stop);
      if (stop === end) return end;
      off = stop + 1;
      const raw = this.line;
      this.line = '';
      if (!raw.endsWith('\r')) { this.fail(`chunked framing line not ended by CRLF ${show(raw)}`); return end; }
      const line = raw.slice(0, -1);
      if (FIELD_CTL.test(line)) { this.fail(`control character in chunked framing ${show(line)}`); return end; }
      if (this.chunkState === ChunkState.Size) {
        const size = CHUNK_SIZE_LINE.exec(line);
        const digits = size?.[1]!.replace(/^0+(?=.)/, '');
        if (!size || digits!.length > MAX_CHUNK_SIZE_DIGITS) { this.fail(`bad chunk size line ${show(line)}`); return end; }
        this.remaining = parseInt(digits!, 16);
        this.chunkState = this.remaining === 0 ? ChunkState.Trailer : ChunkState.Data;
      } else if (this.chunkState === ChunkState.DataEnd) {
        if (line !== '') { this.fail('chunk data not followed by CRLF'); return end; }
        this.chunkState = ChunkState.Size;
      } else if (line === '') {
        this.complete(off < end);
        return end;
      } else {
        if (++this.trailers > MAX_TRAILER_LINES) { this.fail(`more than ${MAX_TRAILER_LINES} trailer lines`); return end; }
        const bad = addField(line, {});
        if (bad !== undefined) { this.fail(`trailer: ${bad}`); return end; }
      }
    }
    return off;
  }
}
