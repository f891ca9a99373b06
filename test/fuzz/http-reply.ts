/**
 * Issue 43, deliverable 3: a fuzzer for the data path's HTTP/1.1 reply parser
 * (src/s3/reply-parser.ts, used by src/s3/wire.ts), driven without sockets so that every
 * split of a reply across reads can be tried.
 *
 * The corpus is built from RFC 9112's framing rules:
 *  - valid replies: HTTP/1.0 and 1.1, any status 200..599 with a reason of VCHAR/SP/HTAB/
 *    obs-text, fields with OWS and obs-text, 0..MAX_INTERIM_REPLIES interim (1xx) replies
 *    first, and each framing: Content-Length (once, repeated identically, or as a list of
 *    identical values), chunked (sizes in either case with leading zeros, chunk extensions
 *    with token and quoted values, trailers up to MAX_TRAILER_LINES), close-delimited, and
 *    204/304 without a body; Connection as a token list;
 *  - invalid replies: each valid one broken by one rule (conflicting or malformed
 *    Content-Length, a status not `HTTP/1.x NNN `, Transfer-Encoding other than exactly
 *    `chunked`, Transfer-Encoding with Content-Length, obs-fold, a control character in a
 *    field, a malformed field line, a bare LF, too many interim replies or trailer lines,
 *    101, a malformed chunk size or extension, chunk data not followed by CRLF, a head over
 *    MAX_HEAD);
 *  - truncated replies, replies followed by bytes nobody asked for, and random mutations.
 * Each is fed in reads split at random points (and, for a fixed corpus, at every byte
 * boundary and one byte at a time) through one reused buffer that is overwritten after
 * every read, as the connection's bounce buffer is. Properties:
 *  - a valid reply gives its exact status, fields, keep-alive and body, and completes once;
 *  - an invalid one fails with HttpProtocolError (SLUICE_HTTP_PROTOCOL), never completes,
 *    and delivers at most a prefix of the true body (never a wrong byte);
 *  - a truncated one never completes (unless close-delimited) and delivers a prefix;
 *  - anything at all: no exception escapes, no call after the reply ended, and feeding
 *    returns (the parser is synchronous; "never hangs" is that every complete reply
 *    completes by its last byte, or at the connection's end when close-delimited).
 * Fixed seeds, bounded runs: a few seconds on the shared 2-core machine.
 */
import fc from 'fast-check';
import t from 'tap';
import { HttpProtocolError } from '../../src/errors.js';
import { MAX_HEAD, MAX_INTERIM_REPLIES, MAX_TRAILER_LINES, ReplyParser, type ReplyHeaders } from '../../src/s3/reply-parser.js';

/** Runs per property: enough to reach every rule and split shape, few enough for a loaded 2-core box. */
const RUNS = 300;
const SEED = 43_2026;

// ---- the model of a reply --------------------------------------------------------------

type Framing = 'length' | 'length-repeat' | 'length-list' | 'chunked' | 'close' | 'nobody';
interface Chunk { data: Buffer; size: string; ext: string }
interface Reply {
  version: '1.0' | '1.1';
  status: number;
  reason: string;
  /** x-* fields, unique names, values as sent (with OWS). */
  fields: Array<[string, string]>;
  connection: string | undefined;
  interim: Array<{ status: number; fields: Array<[string, string]> }>;
  framing: Framing;
  body: Buffer;
  chunks: Chunk[];
  lastChunk: string;
  trailers: Array<[string, string]>;
}

const TCHAR = "!#$%&'*+.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-".split('');
const VCHAR = Array.from({ length: 0x7e - 0x21 + 1 }, (_, i) => String.fromCharCode(0x21 + i));
const OBS_TEXT = ['\x80', '\xa0', '\xe9', '\xff'];
const token = fc.array(fc.constantFrom(...TCHAR), { minLength: 1, maxLength: 10 }).map((a) => a.join(''));
/** A field value: VCHAR/obs-text, with SP and HTAB inside and as OWS around it. */
const fieldValue = fc.tuple(
  fc.constantFrom('', ' ', '\t', '  '),
  fc.array(fc.oneof({ weight: 8, arbitrary: fc.constantFrom(...VCHAR) }, fc.constantFrom(...OBS_TEXT), fc.constantFrom(' ', '\t')), { maxLength: 24 }),
  fc.constantFrom('', ' ', '\t'),
).map(([a, v, b]) => `${a}${v.join('')}${b}`);
const fields = fc.array(fc.tuple(token, fieldValue), { maxLength: 6 }).map((l) => l.map(([n, v], i) => [`x-${i}-${n}`, v] as [string, string]));
const reason = fc.array(fc.oneof({ weight: 8, arbitrary: fc.constantFrom(...VCHAR) }, fc.constantFrom(' ', '\t', ...OBS_TEXT)), { maxLength: 16 }).map((a) => a.join(''));
const quoted = fc.array(fc.oneof(fc.constantFrom(...VCHAR.filter((c) => c !== '"' && c !== '\\'), ' ', '\t', '\xe9'), fc.constantFrom('\\"', '\\\\', '\\a')), { maxLength: 8 })
  .map((a) => `"${a.join('')}"`);
/** chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] ) */
const chunkExt = fc.array(fc.tuple(fc.constantFrom('', ' ', '\t'), fc.constantFrom('', ' '), token, fc.option(fc.tuple(fc.constantFrom('', ' '), fc.oneof(token, quoted)), { nil: undefined })), { maxLength: 3 })
  .map((l) => l.map(([b1, b2, n, v]) => `${b1};${b2}${n}${v === undefined ? '' : `${v[0]}=${v[0]}${v[1]}`}`).join(''));

const reply: fc.Arbitrary<Reply> = fc.record({
  version: fc.constantFrom('1.0' as const, '1.1' as const),
  status: fc.oneof(fc.constantFrom(200, 206, 404, 412, 503), fc.integer({ min: 200, max: 599 })),
  reason,
  fields,
  connection: fc.option(fc.constantFrom('close', 'keep-alive', 'Keep-Alive', 'close, TE', 'TE, close', 'TE', 'te,  Close'), { nil: undefined }),
  interim: fc.array(fc.record({ status: fc.constantFrom(100, 102, 103), fields }), { maxLength: MAX_INTERIM_REPLIES }),
  framing: fc.constantFrom<Framing>('length', 'length-repeat', 'length-list', 'chunked', 'close', 'nobody'),
  body: fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a)),
  cuts: fc.array(fc.nat(), { maxLength: 6 }),
  sizeSeed: fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 0, max: 3 }), chunkExt), { minLength: 8, maxLength: 8 }),
  lastChunk: fc.tuple(fc.integer({ min: 1, max: 4 }), chunkExt).map(([z, e]) => '0'.repeat(z) + e),
  trailers: fc.array(fc.tuple(token, fieldValue), { maxLength: MAX_TRAILER_LINES }).map((l) => l.map(([n, v]) => [n, v] as [string, string])),
}).map((r) => {
  // Chunks: the body split at r.cuts; sizes in hex with the drawn case and leading zeros.
  const points = [...new Set(r.cuts.map((c) => (r.body.length === 0 ? 0 : c % r.body.length)))].filter((c) => c > 0).sort((a, b) => a - b);
  const chunks: Chunk[] = [];
  let at = 0;
  for (const [i, end] of [...points, r.body.length].entries()) {
    if (end === at) continue;
    const [upper, zeros, ext] = r.sizeSeed[i % r.sizeSeed.length]!;
    const n = end - at;
    chunks.push({ data: r.body.subarray(at, end), size: '0'.repeat(zeros) + (upper ? n.toString(16).toUpperCase() : n.toString(16)), ext });
    at = end;
  }
  const nobody = r.framing === 'nobody';
  return {
    version: r.version, status: nobody ? (r.status % 2 === 0 ? 204 : 304) : r.status === 204 || r.status === 304 ? 200 : r.status, reason: r.reason, fields: r.fields, connection: r.connection,
    interim: r.interim, framing: r.framing, body: nobody ? Buffer.alloc(0) : r.body, chunks, lastChunk: r.lastChunk, trailers: r.trailers,
  };
});

function line(s: string): string {
  return `${s}\r\n`;
}

/** The reply's bytes; `over` replaces parts to break one rule. */
interface Override {
  statusLine?: string;
  extraHead?: string[];
  te?: string;
  cl?: string[];
  interimExtra?: number;
  interimStatus?: number;
  chunkSizeLine?: string;
  afterData?: string;
  trailerExtra?: string[];
  headEnd?: (head: string) => string;
}
function encode(r: Reply, over: Override = {}): Buffer {
  let out = '';
  const interims = [...r.interim.map((i) => i.status), ...Array(over.interimExtra ?? 0).fill(102)];
  if (over.interimStatus !== undefined) interims.push(over.interimStatus);
  for (const [i, s] of interims.entries()) {
    out += line(`HTTP/1.1 ${s} Interim`);
    for (const [n, v] of r.interim[i]?.fields ?? []) out += line(`${n}:${v}`);
    out += '\r\n';
  }
  let head = line(over.statusLine ?? `HTTP/${r.version} ${r.status} ${r.reason}`);
  for (const [n, v] of r.fields) head += line(`${n}:${v}`);
  if (r.connection !== undefined) head += line(`Connection: ${r.connection}`);
  const n = r.body.length;
  const cls = over.cl ?? (r.framing === 'length' ? [`${n}`] : r.framing === 'length-repeat' ? [`${n}`, ` ${n}`] : r.framing === 'length-list' ? [`${n}, ${n}`] : []);
  for (const v of cls) head += line(`Content-Length: ${v}`);
  if (over.te !== undefined) head += line(`Transfer-Encoding: ${over.te}`);
  else if (r.framing === 'chunked') head += line('Transfer-Encoding: chunked');
  for (const l of over.extraHead ?? []) head += l;
  head += '\r\n';
  if (over.headEnd) head = over.headEnd(head);
  const parts: Buffer[] = [Buffer.from(out + head, 'latin1')];
  if (r.framing === 'chunked' || over.te !== undefined) {
    for (const [i, c] of r.chunks.entries()) {
      parts.push(Buffer.from(line(i === 0 && over.chunkSizeLine !== undefined ? over.chunkSizeLine : `${c.size}${c.ext}`), 'latin1'), c.data);
      parts.push(Buffer.from(i === 0 && over.afterData !== undefined ? over.afterData : '\r\n', 'latin1'));
    }
    let tail = line(r.chunks.length === 0 && over.chunkSizeLine !== undefined ? over.chunkSizeLine : r.lastChunk);
    for (const [tn, tv] of r.trailers) tail += line(`${tn}:${tv}`);
    for (const l of over.trailerExtra ?? []) tail += l;
    parts.push(Buffer.from(tail + '\r\n', 'latin1'));
  } else if (r.framing !== 'nobody') parts.push(r.body);
  return Buffer.concat(parts);
}

const owsTrim = (v: string) => v.replace(/^[ \t]+|[ \t]+$/g, '');
function keepAliveOf(r: Reply): boolean {
  if (r.framing === 'close') return false;
  const tokens = (r.connection ?? '').toLowerCase().split(',').map((s) => s.trim());
  return r.version === '1.1' ? !tokens.includes('close') : tokens.includes('keep-alive');
}

// ---- the driver ------------------------------------------------------------------------

interface Outcome {
  interim: number;
  status: number | undefined;
  headers: ReplyHeaders | undefined;
  body: Buffer;
  completes: number;
  extra: boolean;
  errors: unknown[];
  /** Calls after the reply ended (complete or error): must stay 0. */
  late: number;
  /** feed() said the bytes were not expected (after the end). */
  refused: boolean;
  /** eof() completed a close-delimited body. */
  eofCompleted: boolean;
  keepAlive: boolean;
  active: boolean;
}

/** Feeds `bytes` in reads ending at `cuts` (through one buffer overwritten after each read), then the connection's end. */
function drive(bytes: Buffer, cuts: number[], eof = true): Outcome {
  const o: Outcome = { interim: 0, status: undefined, headers: undefined, body: Buffer.alloc(0), completes: 0, extra: false, errors: [], late: 0, refused: false, eofCompleted: false, keepAlive: false, active: false };
  const body: Buffer[] = [];
  let ended = false;
  const p = new ReplyParser({
    onInterim: () => { if (ended) o.late++; o.interim++; },
    onHeaders: (status, headers) => { if (ended || o.status !== undefined) o.late++; o.status = status; o.headers = headers; },
    onBody: (c) => { if (ended || o.status === undefined) o.late++; body.push(Buffer.from(c)); },
    onComplete: (extra) => { if (ended) o.late++; ended = true; o.completes++; o.extra = extra; },
    onError: (err) => { if (ended) o.late++; ended = true; o.errors.push(err); },
  });
  p.reset();
  const bounce = Buffer.alloc(bytes.length + 1);
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  let off = 0;
  for (const end of [...points, bytes.length]) {
    if (end <= off) continue;
    bytes.copy(bounce, 0, off, end);
    if (!p.feed(bounce, 0, end - off)) o.refused = true;
    bounce.fill(0xa5); // the next read reuses the buffer: nothing may be kept by reference
    off = end;
  }
  if (eof && p.active) o.eofCompleted = p.eof();
  o.body = Buffer.concat(body);
  o.keepAlive = p.keepAlive;
  o.active = p.active;
  return o;
}

function isPrefix(got: Buffer, of: Buffer): boolean {
  return got.length <= of.length && got.equals(of.subarray(0, got.length));
}

function checkValid(r: Reply, o: Outcome): string | undefined {
  if (o.errors.length > 0) return `error ${(o.errors[0] as Error).message}`;
  if (o.late > 0) return `${o.late} calls after the end`;
  if (o.completes !== 1) return `completed ${o.completes} times`;
  if (o.status !== r.status) return `status ${o.status} for ${r.status}`;
  if (o.interim !== r.interim.length) return `${o.interim} interim replies for ${r.interim.length}`;
  if (!o.body.equals(r.body)) return `body of ${o.body.length} bytes differs from the ${r.body.length} sent`;
  if (o.eofCompleted !== (r.framing === 'close')) return 'completed by the end of the connection when it should not, or the reverse';
  if (o.keepAlive !== keepAliveOf(r)) return `keep-alive ${o.keepAlive} for Connection ${r.connection} HTTP/${r.version}`;
  for (const [n, v] of r.fields) if (o.headers?.[n.toLowerCase()] !== owsTrim(v)) return `field ${n}: ${JSON.stringify(o.headers?.[n.toLowerCase()])} for ${JSON.stringify(v)}`;
  return undefined;
}

function checkInvalid(r: Reply, o: Outcome): string | undefined {
  if (o.completes > 0) return 'completed';
  if (o.late > 0) return `${o.late} calls after the end`;
  if (o.errors.length !== 1) return `${o.errors.length} errors`;
  if (!(o.errors[0] instanceof HttpProtocolError) || (o.errors[0] as HttpProtocolError).code !== 'SLUICE_HTTP_PROTOCOL') return `untyped error ${String(o.errors[0])}`;
  if (!isPrefix(o.body, r.body)) return 'delivered bytes that are not the body\'s';
  return undefined;
}

function property(check: (r: Reply, o: Outcome) => string | undefined, make: (r: Reply) => Buffer, cuts: fc.Arbitrary<number[]>, eof = true) {
  return fc.property(reply, cuts, (r, c) => {
    const o = drive(make(r), c, eof);
    const bad = check(r, o);
    if (bad !== undefined) throw new Error(bad);
  });
}

const randomCuts = fc.array(fc.nat(), { maxLength: 12 });

// ---- properties ------------------------------------------------------------------------

t.test('valid replies parse to their exact status, fields and body, split anywhere', async (t) => {
  fc.assert(property(checkValid, (r) => encode(r), randomCuts), { numRuns: RUNS, seed: SEED });
  // Every byte in its own read.
  fc.assert(fc.property(reply, (r) => {
    const b = encode(r);
    const bad = checkValid(r, drive(b, Array.from({ length: b.length }, (_, i) => i)));
    if (bad !== undefined) throw new Error(bad);
  }), { numRuns: RUNS / 3, seed: SEED });
  t.pass(`${RUNS + RUNS / 3} replies`);
});

/** One rule broken at a time: each a function of a valid reply to an override (or undefined when it does not apply). */
const BREAKS: Array<[string, (r: Reply) => Override | undefined]> = [
  ['conflicting Content-Length', (r) => (r.framing.startsWith('length') ? { cl: [`${r.body.length}`, `${r.body.length + 1}`] } : undefined)],
  ['a Content-Length list that disagrees', (r) => (r.framing.startsWith('length') ? { cl: [`${r.body.length}, ${r.body.length + 1}`] } : undefined)],
  ['a malformed Content-Length', (r) => (r.framing.startsWith('length') ? { cl: [[`+${r.body.length}`, `0x${r.body.length}`, `${r.body.length}e0`, '', `-${r.body.length}`, `${r.body.length};`][r.body.length % 6]!] } : undefined)],
  ['Content-Length beyond 2^53', () => ({ cl: ['99999999999999999'] })],
  ['a four-digit status', (r) => ({ statusLine: `HTTP/${r.version} ${r.status}1 ${r.reason}` })],
  ['a two-digit status', (r) => ({ statusLine: `HTTP/${r.version} ${Math.floor(r.status / 10)} x` })],
  ['a status outside 100..599', (r) => ({ statusLine: `HTTP/${r.version} ${[600, 999, '099'][r.status % 3]} x` })],
  ['no space after the status code', (r) => ({ statusLine: `HTTP/${r.version} ${r.status}` })],
  ['another HTTP version', (r) => ({ statusLine: `${['HTTP/1.2', 'HTTP/2', 'http/1.1', 'HTTP/1.1 ', 'HTTP/11'][r.status % 5]} ${r.status} x` })],
  ['a control character in the reason', (r) => ({ statusLine: `HTTP/${r.version} ${r.status} a\x01b` })],
  ['Transfer-Encoding not exactly chunked', (r) => ({ te: ['gzip, chunked', 'chunked, chunked', 'identity', 'gzip', 'xchunked', 'chunked;q=1', ''][r.body.length % 7]! })],
  ['Transfer-Encoding with Content-Length', (r) => (r.framing === 'chunked' ? { te: 'chunked', cl: [`${r.body.length}`] } : undefined)],
  ['obs-fold', () => ({ extraHead: ['x-folded: a\r\n', ' b\r\n'] })],
  ['obs-fold with HTAB', () => ({ extraHead: ['x-folded: a\r\n', '\tb\r\n'] })],
  ['a control character in a field value', (r) => ({ extraHead: [`x-ctl: a${String.fromCharCode([0, 1, 8, 0x0b, 0x0c, 0x1f, 0x7f][r.body.length % 7]!)}b\r\n`] })],
  ['a bare CR in a field value', () => ({ extraHead: ['x-cr: a\rb\r\n'] })],
  ['a space before the colon', () => ({ extraHead: ['x-a : b\r\n'] })],
  ['a field line without a colon', () => ({ extraHead: ['garbage\r\n'] })],
  ['an empty field name', () => ({ extraHead: [': v\r\n'] })],
  ['a field name with a separator', () => ({ extraHead: ['x(a): v\r\n'] })],
  ['a bare LF ending a header line', () => ({ headEnd: (h) => h.replace(/\r\n(?=.)/s, '\n') })],
  ['a head ended by bare LFs', () => ({ headEnd: (h) => h.replace(/\r\n\r\n$/, '\n\n') })],
  ['too many interim replies', (r) => ({ interimExtra: MAX_INTERIM_REPLIES + 1 - r.interim.length + (r.body.length % 3) })],
  ['101 Switching Protocols', () => ({ interimStatus: 101 })],
  ['too many trailer lines', (r) => (r.framing === 'chunked' ? { trailerExtra: Array(MAX_TRAILER_LINES + 1 - r.trailers.length).fill('x-t: 1\r\n') } : undefined)],
  ['a malformed trailer line', (r) => (r.framing === 'chunked' ? { trailerExtra: [['no colon\r\n', 'x-t : 1\r\n', 'x-t: \x01\r\n', ' folded\r\n'][r.body.length % 4]!] } : undefined)],
  ['a malformed chunk size line', (r) => (r.framing === 'chunked' ? {
    chunkSizeLine: [`${(r.chunks[0]?.data.length ?? 0).toString(16)}zz`, '', ` ${(r.chunks[0]?.data.length ?? 0).toString(16)}`, `${(r.chunks[0]?.data.length ?? 0).toString(16)} `,
      `-${(r.chunks[0]?.data.length ?? 0).toString(16)}`, `0x${(r.chunks[0]?.data.length ?? 0).toString(16)}`, '10000000000000000', `${(r.chunks[0]?.data.length ?? 0).toString(16)};`,
      `${(r.chunks[0]?.data.length ?? 0).toString(16)};=v`, `${(r.chunks[0]?.data.length ?? 0).toString(16)};a="open`, `${(r.chunks[0]?.data.length ?? 0).toString(16)};a=b c`][r.body.length % 11]!,
  } : undefined)],
  ['chunk data not followed by CRLF', (r) => (r.framing === 'chunked' && r.chunks.length > 0 ? { afterData: ['X\r\n', '\n', '\r\r\n', ' \r\n'][r.body.length % 4]! } : undefined)],
  ['a head longer than MAX_HEAD', () => ({ extraHead: [`x-big: ${'a'.repeat(MAX_HEAD)}\r\n`] })],
];

t.test('replies that break one framing rule fail with HttpProtocolError, never complete, never give a wrong byte', async (t) => {
  let tried = 0;
  fc.assert(fc.property(reply, fc.integer({ min: 0, max: BREAKS.length - 1 }), randomCuts, (r, which, cuts) => {
    const [name, breakIt] = BREAKS[which]!;
    const over = breakIt(r);
    if (over === undefined) return;
    tried++;
    const o = drive(encode(r, over), cuts);
    const bad = checkInvalid(r, o);
    if (bad !== undefined) throw new Error(`${name}: ${bad}`);
  }), { numRuns: 3 * RUNS, seed: SEED });
  t.ok(tried >= RUNS, `${tried} broken replies`);
  // And each rule at least once, fed whole and one byte at a time.
  fc.assert(fc.property(reply.filter((r) => r.framing === 'chunked' && r.chunks.length > 0), (r) => {
    for (const [name, breakIt] of BREAKS) {
      const over = breakIt(r) ?? breakIt({ ...r, framing: 'length' });
      if (over === undefined) throw new Error(`${name} applies to nothing`);
      const rr = breakIt(r) ? r : { ...r, framing: 'length' as const };
      const b = encode(rr, over);
      for (const cuts of [[], b.length < 4096 ? Array.from({ length: b.length }, (_, i) => i) : [1, 2, 3]]) {
        const bad = checkInvalid(rr, drive(b, cuts));
        if (bad !== undefined) throw new Error(`${name}: ${bad}`);
      }
    }
  }), { numRuns: 20, seed: SEED });
});

t.test('truncated replies never complete (but close-delimited ones) and deliver only a prefix', async (t) => {
  fc.assert(fc.property(reply, fc.nat(), randomCuts, (r, at, cuts) => {
    const b = encode(r);
    const cut = at % b.length; // strictly short
    const o = drive(b.subarray(0, cut), cuts);
    if (o.errors.length > 0) throw new Error(`error on a valid prefix: ${(o.errors[0] as Error).message}`);
    if (!isPrefix(o.body, r.body)) throw new Error('bytes that are not the body\'s');
    if (o.completes > 0 && !(r.framing === 'close' && o.eofCompleted)) throw new Error('a truncated reply completed');
    if (o.late > 0) throw new Error('calls after the end');
  }), { numRuns: RUNS, seed: SEED });
  t.pass();
});

t.test('bytes after a complete reply are never taken as ours: the connection is not kept', async (t) => {
  fc.assert(fc.property(reply.filter((r) => r.framing !== 'close'), fc.uint8Array({ minLength: 1, maxLength: 40 }), randomCuts, (r, junk, cuts) => {
    const b = encode(r);
    const o = drive(Buffer.concat([b, Buffer.from(junk)]), cuts);
    if (!o.body.equals(r.body) || o.completes !== 1 || o.errors.length > 0) throw new Error('the reply itself was not read exactly');
    if (!(o.extra || o.refused)) throw new Error('the extra bytes went unnoticed');
    if (o.extra && o.keepAlive) throw new Error('kept alive after extra bytes');
  }), { numRuns: RUNS, seed: SEED });
  t.pass();
});

t.test('random bytes and random mutations: typed error or a reply, nothing thrown, nothing after the end', async (t) => {
  const mutated = fc.tuple(reply, fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 4 })).map(([r, flips]) => {
    const b = Buffer.from(encode(r));
    for (const [i, v] of flips) b[i % b.length] = v;
    return b;
  });
  const text = fc.array(fc.constantFrom('HTTP/1.1 ', '200 ', '102 ', 'OK', '\r\n', '\n', '\r', ':', ' ', 'content-length', 'transfer-encoding', 'chunked', '5', '0', 'f', ';', '=', '"', 'abcde'), { maxLength: 40 })
    .map((a) => Buffer.from(a.join(''), 'latin1'));
  const input = fc.oneof(mutated, text, fc.uint8Array({ maxLength: 200 }).map((a) => Buffer.from(a)));
  fc.assert(fc.property(input, randomCuts, (b, cuts) => {
    const o = drive(b, cuts);
    if (o.late > 0) throw new Error('calls after the end');
    if (o.errors.some((e) => !(e instanceof HttpProtocolError))) throw new Error(`untyped error ${String(o.errors[0])}`);
    if (o.completes + o.errors.length > 1) throw new Error('ended twice');
  }), { numRuns: 2 * RUNS, seed: SEED });
  t.pass();
});

t.test('a fixed corpus from RFC 9112, split at every byte boundary', async (t) => {
  // RFC 9112 7.1's chunked coding with an extension and a trailer; Content-Length repeated
  // identically (6.3); interim replies (RFC 9110 15.2); close-delimited (6.3 item 8).
  const good: Array<[string, string, string]> = [
    ['chunked with an extension and a trailer', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;name="va\\"l"\r\nWiki\r\n5 ; x = y\r\npedia\r\n0\r\nExpires: never\r\n\r\n', 'Wikipedia'],
    ['Content-Length twice, identical', 'HTTP/1.1 206 Partial Content\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\nhello', 'hello'],
    ['Content-Length as a list of identical values', 'HTTP/1.1 200 \r\nContent-Length: 5 , 5\r\n\r\nhello', 'hello'],
    ['two interim replies first', 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok', 'ok'],
    ['an empty body', 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n', ''],
    ['obs-text in a value and the reason', 'HTTP/1.1 200 \xe9t\xe9\r\nX-A: caf\xe9\t x\r\nContent-Length: 1\r\n\r\n!', '!'],
  ];
  const bad: Array<[string, string]> = [
    ['HTTP/1.1 2061', 'HTTP/1.1 2061 OK\r\nContent-Length: 1\r\n\r\n!'],
    ['conflicting Content-Length', 'HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n!!'],
    ['gzip, chunked', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n1\r\n!\r\n0\r\n\r\n'],
    ['obs-fold', 'HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nContent-Length: 1\r\n\r\n!'],
    ['NUL in a value', 'HTTP/1.1 200 OK\r\nX-A: 1\x002\r\nContent-Length: 1\r\n\r\n!'],
    ['five interim replies', `${'HTTP/1.1 102 Processing\r\n\r\n'.repeat(MAX_INTERIM_REPLIES + 1)}HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n!`],
  ];
  let splits = 0;
  for (const [name, text, body] of good) {
    const b = Buffer.from(text, 'latin1');
    for (let i = 0; i <= b.length; i++) {
      for (const cuts of [[i], [i, i + 1, i + 2]]) {
        const o = drive(b, cuts);
        splits++;
        if (o.errors.length > 0 || o.completes !== 1 || !o.body.equals(Buffer.from(body, 'latin1'))) {
          t.fail(`${name}, split at ${cuts}: ${o.errors.length ? (o.errors[0] as Error).message : `body ${JSON.stringify(o.body.toString('latin1'))}`}`);
          return;
        }
      }
    }
  }
  for (const [name, text] of bad) {
    const b = Buffer.from(text, 'latin1');
    for (let i = 0; i <= b.length; i++) {
      const o = drive(b, [i]);
      splits++;
      if (!(o.errors[0] instanceof HttpProtocolError) || o.completes !== 0 || o.body.length > 0) { t.fail(`${name}, split at ${i}: not refused`); return; }
    }
  }
  t.pass(`${splits} splits`);
});
