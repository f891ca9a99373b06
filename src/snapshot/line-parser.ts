/**
 * A snapshot's object line parsed straight from its bytes (issue 46: reading ten million lines
 * with JSON.parse, a string per line and a Buffer view per line ran at ~400,000 lines per CPU
 * second; the target is a million).
 *
 * Algorithm: match the exact shape the writer produces (objectLine in snapshot.ts):
 *   {"key":S,"size":N,"etag":S,"lastModified":S,"storageClass":S[,"versionId":S][,"archiveStatus":S][,"restored":true]}
 * byte by byte, where S is a string of printable ASCII whose only escapes are \" and \\ (an
 * ETag is quoted), N a plain non-negative integer of at most 15 digits, and the
 * lastModified string a canonical ISO-8601 UTC time (read with Date.UTC; any other string goes
 * to new Date(), as before). Anything else (an escape, a non-ASCII byte, another field, other
 * spacing or order, a number with a sign, fraction or exponent) returns undefined: the caller
 * then parses the line with JSON.parse and checks it as before, so every line the fast path
 * declines gets exactly the old result or the old error, and every line it accepts is one
 * JSON.parse reads as the same record (test/snapshot/line-parser.ts checks both by property).
 * parseObjectBytes (decision 0044) is the same match for a reader that keeps no object: it
 * gives byte ranges, ms and a class from CLASSES in one reused ObjectBytes, and declines what
 * it cannot give that way (an escaped key, an odd time or class, a rare field).
 */
import type { ObjectBytes, ObjectInfo } from '../s3/object-client.js';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

const bytes = (s: string) => Buffer.from(s, 'latin1');
const KEY = bytes('{"key":"');
const SIZE = bytes('","size":');
const ETAG = bytes(',"etag":"');
const LAST_MODIFIED = bytes('","lastModified":"');
const STORAGE_CLASS = bytes('","storageClass":"');
const VERSION_ID = bytes(',"versionId":"');
const ARCHIVE_STATUS = bytes(',"archiveStatus":"');
const RESTORED = bytes(',"restored":true}');
/** Storage classes read without allocating a string each (the common ones). */
const CLASSES = ['STANDARD', 'INTELLIGENT_TIERING', 'STANDARD_IA', 'GLACIER_IR', 'GLACIER', 'DEEP_ARCHIVE', 'ONEZONE_IA'].map((c) => ({ c, b: bytes(c) }));
/** Digits of a size read as an exact integer: 15 stay below 2^53 (Number.MAX_SAFE_INTEGER has 16). */
const MAX_DIGITS = 15;

/** Whether `lit` is at `at` in `buf` (before `end`). */
function at(buf: Buffer, pos: number, end: number, lit: Buffer): boolean {
  if (pos + lit.length > end) return false;
  for (let i = 0; i < lit.length; i++) if (buf[pos + i] !== lit[i]) return false;
  return true;
}

/** Where the last readString() ended: its closing quote. */
let stringEndAt = -1;

/**
 * The string starting at `pos` (after its opening quote) when it is printable ASCII with no
 * escape but \" and \\ (an ETag is quoted: "\"9b2c...\""), or undefined; sets stringEndAt.
 */
function readString(buf: Buffer, pos: number, end: number): string | undefined {
  let out: string | undefined;
  let from = pos;
  for (let i = pos; i < end; i++) {
    const c = buf[i]!;
    if (c === QUOTE) {
      stringEndAt = i;
      const tail = buf.toString('latin1', from, i);
      return out === undefined ? tail : out + tail;
    }
    if (c === BACKSLASH) {
      const n = buf[i + 1];
      if (i + 1 >= end || (n !== QUOTE && n !== BACKSLASH)) return undefined;
      out = (out ?? '') + buf.toString('latin1', from, i) + (n === QUOTE ? '"' : '\\');
      i++;
      from = i + 1;
      continue;
    }
    if (c < 0x20 || c >= 0x7f) return undefined;
  }
  return undefined;
}

/** End (the closing quote) of a string starting at `pos` of printable ASCII with no escape at all, or -1. */
function plainEnd(buf: Buffer, pos: number, end: number): number {
  for (let i = pos; i < end; i++) {
    const c = buf[i]!;
    if (c === QUOTE) return i;
    if (c < 0x20 || c >= 0x7f || c === BACKSLASH) return -1;
  }
  return -1;
}

const d2 = (buf: Buffer, p: number) => (buf[p]! - 48) * 10 + (buf[p + 1]! - 48);
const isDigits = (buf: Buffer, p: number, n: number) => { for (let i = p; i < p + n; i++) if (buf[i]! < 48 || buf[i]! > 57) return false; return true; };

/**
 * "YYYY-MM-DDTHH:MM:SS.sssZ" (24 bytes, as toISOString writes) as ms since the epoch, exactly as
 * new Date() reads it, or NaN when it is anything else or a field is out of its range (where
 * new Date() may roll over or refuse): the caller asks new Date() then.
 */
function isoMs(buf: Buffer, s: number, e: number): number {
  // Lines in a row mostly share their date and hour: only minutes, seconds and ms are read then.
  if (e - s === 24 && hourMs === hourMs && buf[s + 13] === 0x3a && buf[s + 16] === 0x3a && buf[s + 19] === 0x2e && buf[s + 23] === 0x5a
    && isDigits(buf, s + 14, 2) && isDigits(buf, s + 17, 2) && isDigits(buf, s + 20, 3)) {
    let same = true;
    for (let k = 0; k < 13; k++) if (buf[s + k] !== hourText[k]) { same = false; break; }
    const mi = d2(buf, s + 14);
    const se = d2(buf, s + 17);
    if (same && mi <= 59 && se <= 59) return hourMs + mi * 60_000 + se * 1000 + (buf[s + 20]! - 48) * 100 + d2(buf, s + 21);
  }
  const ms = isoMsFull(buf, s, e);
  if (ms === ms) {
    // Remember this date and hour ("YYYY-MM-DDTHH", 13 bytes, checked by isoMsFull).
    buf.copy(hourText, 0, s, s + 13);
    hourMs = ms - (((ms % HOUR_MS) + HOUR_MS) % HOUR_MS); // the hour's start, also before 1970
  }
  return ms;
}

const HOUR_MS = 3_600_000;
/** The date and hour of the last time isoMsFull() read ("YYYY-MM-DDTHH"), and its ms (NaN: none yet). */
const hourText = Buffer.alloc(13);
let hourMs = NaN;

/** isoMs() without the shortcut. */
function isoMsFull(buf: Buffer, s: number, e: number): number {
  if (e - s === 24 && buf[s + 4] === 0x2d && buf[s + 7] === 0x2d && buf[s + 10] === 0x54 && buf[s + 13] === 0x3a && buf[s + 16] === 0x3a && buf[s + 19] === 0x2e && buf[s + 23] === 0x5a
    && isDigits(buf, s, 4) && isDigits(buf, s + 5, 2) && isDigits(buf, s + 8, 2) && isDigits(buf, s + 11, 2) && isDigits(buf, s + 14, 2) && isDigits(buf, s + 17, 2) && isDigits(buf, s + 20, 3)) {
    const y = d2(buf, s) * 100 + d2(buf, s + 2);
    const mo = d2(buf, s + 5);
    const d = d2(buf, s + 8);
    const h = d2(buf, s + 11);
    const mi = d2(buf, s + 14);
    const se = d2(buf, s + 17);
    const ms = (buf[s + 20]! - 48) * 100 + d2(buf, s + 21);
    // Date.UTC maps years 0..99 to 1900..1999; days past 28 depend on the month: new Date() decides.
    if (y >= 100 && mo >= 1 && mo <= 12 && d >= 1 && d <= 28 && h <= 23 && mi <= 59 && se <= 59) return Date.UTC(y, mo - 1, d, h, mi, se, ms);
  }
  return NaN;
}

/** The Date of an ISO string at bytes [s, e): isoMs(), else new Date() of its text. */
function isoDate(buf: Buffer, s: number, e: number): Date {
  const ms = isoMs(buf, s, e);
  return Number.isNaN(ms) ? new Date(buf.toString('latin1', s, e)) : new Date(ms);
}

/** End (the closing quote) of a string starting at `pos` of printable ASCII whose only escapes are \" and \\, or -1 (readString() without the string). */
function escapedEnd(buf: Buffer, pos: number, end: number): number {
  for (let i = pos; i < end; i++) {
    const c = buf[i]!;
    if (c === QUOTE) return i;
    if (c === BACKSLASH) {
      const n = buf[i + 1];
      if (i + 1 >= end || (n !== QUOTE && n !== BACKSLASH)) return -1;
      i++;
      continue;
    }
    if (c < 0x20 || c >= 0x7f) return -1;
  }
  return -1;
}

/**
 * The object on line bytes [s, e) of `buf` as byte ranges in `out` (src/s3/object-client.ts
 * ObjectBytes; no string, no Date), when the line has parseObjectLine's shape with a key free
 * of escapes, a lastModified isoMs() reads, a known storage class (the `CLASSES` table), and none
 * of the rare fields; false otherwise (then parseObjectLine, or JSON.parse, reads the line:
 * any line accepted here is read by them as the same object).
 */
export function parseObjectBytes(buf: Buffer, s: number, e: number, out: ObjectBytes): boolean {
  if (!at(buf, s, e, KEY)) return false;
  const ks = s + KEY.length;
  const ke = plainEnd(buf, ks, e);
  if (ke < 0 || !at(buf, ke, e, SIZE)) return false;
  let p = ke + SIZE.length;
  const n0 = p;
  let size = 0;
  while (p < e && buf[p]! >= 48 && buf[p]! <= 57) size = size * 10 + (buf[p++]! - 48);
  if (p === n0 || p - n0 > MAX_DIGITS || (buf[n0] === 48 && p - n0 > 1)) return false;
  if (!at(buf, p, e, ETAG)) return false;
  const es = p + ETAG.length;
  const ee = escapedEnd(buf, es, e);
  if (ee < 0 || !at(buf, ee, e, LAST_MODIFIED)) return false;
  p = ee + LAST_MODIFIED.length;
  // A time isoMs() reads is 24 bytes of digits and punctuation: its closing quote is right after.
  const le = p + 24;
  if (le >= e || buf[le] !== QUOTE) return false;
  const ms = isoMs(buf, p, le);
  if (Number.isNaN(ms) || !at(buf, le, e, STORAGE_CLASS)) return false;
  p = le + STORAGE_CLASS.length;
  // The class, its closing quote, then '}' ending the line (no rare field): the class is one of
  // CLASSES (no quote in any), so it is all of [p, e - 2).
  const ce = e - 2;
  if (ce < p || buf[ce] !== QUOTE || buf[ce + 1] !== 0x7d) return false;
  let storageClass: string | undefined;
  for (const k of CLASSES) if (k.b.length === ce - p && at(buf, p, ce, k.b)) { storageClass = k.c; break; }
  if (storageClass === undefined) return false;
  out.buf = buf;
  out.keyStart = ks;
  out.keyEnd = ke;
  out.size = size;
  out.etagStart = es;
  out.etagEnd = ee;
  out.mtimeMs = ms;
  out.storageClass = storageClass;
  return true;
}

/** The object on line bytes [s, e) of `buf` (no newline), or undefined: parse it with JSON.parse then. */
export function parseObjectLine(buf: Buffer, s: number, e: number): ObjectInfo | undefined {
  if (!at(buf, s, e, KEY)) return undefined;
  let p = s + KEY.length;
  const key = readString(buf, p, e);
  if (key === undefined) return undefined;
  const ke = stringEndAt;
  if (!at(buf, ke, e, SIZE)) return undefined;
  p = ke + SIZE.length;
  // A JSON integer: 0, or a digit 1-9 followed by digits.
  const n0 = p;
  let size = 0;
  while (p < e && buf[p]! >= 48 && buf[p]! <= 57) size = size * 10 + (buf[p++]! - 48);
  if (p === n0 || p - n0 > MAX_DIGITS || (buf[n0] === 48 && p - n0 > 1)) return undefined;
  if (!at(buf, p, e, ETAG)) return undefined;
  p += ETAG.length;
  const etag = readString(buf, p, e);
  if (etag === undefined) return undefined;
  const ee = stringEndAt;
  if (!at(buf, ee, e, LAST_MODIFIED)) return undefined;
  p = ee + LAST_MODIFIED.length;
  const lastModifiedAt = p;
  const le = plainEnd(buf, p, e);
  if (le < 0) return undefined;
  if (!at(buf, le, e, STORAGE_CLASS)) return undefined;
  p = le + STORAGE_CLASS.length;
  const ce = plainEnd(buf, p, e);
  if (ce < 0) return undefined;
  let storageClass: string | undefined;
  for (const k of CLASSES) if (k.b.length === ce - p && at(buf, p, ce, k.b)) { storageClass = k.c; break; }
  storageClass ??= buf.toString('latin1', p, ce);
  p = ce + 1;
  let versionId: string | undefined;
  let archiveStatus: string | undefined;
  let restored = false;
  if (at(buf, p, e, VERSION_ID)) {
    versionId = readString(buf, p + VERSION_ID.length, e);
    if (versionId === undefined) return undefined;
    p = stringEndAt + 1;
  }
  if (at(buf, p, e, ARCHIVE_STATUS)) {
    archiveStatus = readString(buf, p + ARCHIVE_STATUS.length, e);
    if (archiveStatus === undefined) return undefined;
    p = stringEndAt + 1;
  }
  if (at(buf, p, e, RESTORED)) {
    restored = true;
    p += RESTORED.length;
  } else {
    if (p + 1 !== e || buf[p] !== 0x7d) return undefined; // '}' and the line's end
    p++;
  }
  if (p !== e) return undefined;
  const o: ObjectInfo = { key, size, etag, lastModified: isoDate(buf, lastModifiedAt, le), storageClass };
  if (versionId !== undefined) o.versionId = versionId;
  if (archiveStatus !== undefined) o.archiveStatus = archiveStatus;
  if (restored) o.restored = true;
  return o;
}
