/**
 * Dataset snapshots (issue 15): a listing saved to a file, so that a later run reads
 * exactly the same objects without listing, pinned to the same versions.
 *
 * Format (docs/SNAPSHOTS.md states it for other tools): JSON lines, UTF-8, gzip-compressed
 * when the file name ends in .gz (a reader detects gzip by its magic bytes, whatever the name).
 *   line 1      header   {"sluiceSnapshot":1,"uri":"s3://b/p/","bucket":"b","prefix":"p/",
 *                         "createdAt":ISO-8601,"listing":{"filters":[...],"skipArchived":bool},
 *                         "generator":"sluice 0.1.0"}
 *   lines 2..   objects  {"key":K,"size":N,"etag":"\"...\"","lastModified":ISO-8601,
 *                         "storageClass":C[,"versionId":V][,"archiveStatus":T][,"restored":true]}
 *                        sorted by key in S3's order (UTF-8 bytes), each key once;
 *   last line   trailer  {"end":{"objects":N,"bytes":B,"sha256":HEX}}: the count, the sum of
 *                        the sizes, and the SHA-256 of every byte before the trailer line
 *                        (uncompressed). A reader rejects a file whose trailer is missing
 *                        (truncated) or does not match.
 * Readers must ignore object fields they do not know; the header's version changes when
 * a field changes meaning.
 *
 * Cost: writing hashes and (optionally) deflates each line once; reading inflates and hashes
 * each line once and parses it from its bytes (src/snapshot/line-parser.ts; JSON.parse for a
 * line of another shape): about 1.3 CPU s per million keys as objects, 0.5-0.8 as bytes handed to
 * `onBytes` (a FastFile mount's catalog, decision 0044).
 * Both stream (issue 43): a reader holds one read chunk and one line (scanSnapshot), a
 * writer one chunk of lines (writeSnapshotStream), so a file of any count passes through
 * bounded memory; only readSnapshot, which returns the objects, holds them all. Every line
 * that is not what it should be fails with a SnapshotError naming the file and line number,
 * and so does a key outside the header's prefix.
 */
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { open, rename, rm, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import zlib from 'node:zlib';
import { SnapshotError } from '../errors.js';
import { compareBytes } from '../bytes.js';
import { compareKeys } from '../s3/lister.js';
import type { ObjectBytes, ObjectInfo } from '../s3/object-client.js';
import { parseObjectBytes, parseObjectLine } from './line-parser.js';

export const SNAPSHOT_VERSION = 1;

export interface SnapshotHeader {
  sluiceSnapshot: number;
  uri: string;
  bucket: string;
  prefix: string;
  createdAt: string;
  /** The parameters the listing ran with: what a rerun must not change. */
  listing: { filters: string[]; skipArchived: boolean };
  generator?: string;
}

export interface SnapshotTrailer {
  objects: number;
  bytes: number;
  sha256: string;
}

export interface Snapshot {
  file: string;
  header: SnapshotHeader;
  objects: ObjectInfo[];
  trailer: SnapshotTrailer;
}

/** Lines joined per write: large enough to amortise the stream, small enough to bound memory. */
const LINES_PER_CHUNK = 4096;
/** gzip level 6 (zlib's default): ~8x smaller listings at a fraction of level 9's CPU. */
const GZIP_LEVEL = 6;
/**
 * Read size, and zlib's output chunk: 1 MiB keeps the per-chunk cost (one promise, one
 * split) negligible against ~5,000 lines per chunk while holding little memory.
 */
const READ_CHUNK = 1024 * 1024;
/**
 * Longest line a reader accepts. A line is one object: a key of at most 1,024 bytes (S3's
 * limit) that JSON may escape to 6 bytes per byte (\u00XX), an ETag, a version id of at most
 * 1,024 bytes and a few short fields: under 8 KiB. 64 KiB leaves room for fields another tool
 * adds; past it the file is not a listing, and a reader must not buffer it whole.
 */
const MAX_LINE_BYTES = 64 * 1024;
/**
 * Most bytes a gzip snapshot may inflate to. A line is about 200 bytes (BENCHMARKS.md), so
 * 64 GiB is over 300 million objects, beyond any prefix a training job reads; deflate can
 * inflate 1,032 times, so without this bound a small file could keep a reader inflating
 * (and hashing) for hours. Past it the file is refused as not a listing.
 */
const MAX_INFLATED_BYTES = 64 * 1024 ** 3;
const NL = 0x0a;

/** An object's line, without its newline: the one serialisation every writer uses. */
export function objectLine(o: ObjectInfo): string {
  const rec: Record<string, unknown> = {
    key: o.key, size: o.size, etag: o.etag, lastModified: o.lastModified.toISOString(), storageClass: o.storageClass ?? 'STANDARD',
  };
  if (o.versionId !== undefined) rec.versionId = o.versionId;
  if (o.archiveStatus !== undefined) rec.archiveStatus = o.archiveStatus;
  if (o.restored) rec.restored = true;
  return JSON.stringify(rec);
}

/** A short identity for logs and metrics: the file's name and the first 12 hex digits of its checksum. */
export function snapshotId(s: Pick<Snapshot, 'file' | 'trailer'>): { name: string; checksum: string } {
  return { name: path.basename(s.file), checksum: s.trailer.sha256.slice(0, 12) };
}

type HeaderIn = Omit<SnapshotHeader, 'sluiceSnapshot' | 'createdAt'> & { createdAt?: string };

/**
 * Writes `objects` (any order; sorted here) as a snapshot at `file`, atomically (a temp
 * file renamed into place). Returns the trailer.
 */
export async function writeSnapshot(file: string, header: HeaderIn, objects: ObjectInfo[]): Promise<SnapshotTrailer> {
  const sorted = [...objects].sort((a, b) => compareKeys(a.key, b.key));
  return writeSnapshotStream(file, header, sorted);
}

/**
 * An object already serialised (objectLine) with its newline, as UTF-8: what an external sort
 * (src/snapshot/spill.ts) hands back, written without parsing it again.
 */
export interface SnapshotLine {
  key: string;
  size: number;
  line: Buffer;
}

/**
 * Writes objects that come already in S3 order (each key once, else SnapshotError), from an
 * iterable or async iterable: memory holds one chunk of lines, whatever the count. Objects
 * may come as ObjectInfo or as SnapshotLine (all of one kind): the bytes are the same.
 */
export async function writeSnapshotStream(file: string, header: HeaderIn, objects: Iterable<ObjectInfo | SnapshotLine> | AsyncIterable<ObjectInfo | SnapshotLine>): Promise<SnapshotTrailer> {
  const h: SnapshotHeader = { sluiceSnapshot: SNAPSHOT_VERSION, ...header, createdAt: header.createdAt ?? new Date().toISOString() };
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.tmp`);
  const hash = createHash('sha256');
  const out = createWriteStream(tmp);
  const gz = file.endsWith('.gz') ? zlib.createGzip({ level: GZIP_LEVEL }) : undefined;
  const sink = gz ?? out;
  gz?.pipe(out);
  let failed: Error | undefined;
  const done = new Promise<void>((resolve, reject) => {
    out.on('finish', resolve);
    out.on('error', reject);
    gz?.on('error', reject);
  });
  done.catch((err: Error) => { failed = err; }); // awaited below; write() sees it sooner
  const write = async (text: string | Buffer): Promise<void> => {
    if (failed) throw failed;
    hash.update(text);
    if (!sink.write(text)) await Promise.race([new Promise<void>((resolve) => sink.once('drain', () => resolve())), done]);
  };
  let bytes = 0;
  let count = 0;
  let prev: string | undefined;
  let part: (string | Buffer)[] = [];
  /** Takes one object; true when a chunk of lines is ready to write. */
  const add = (o: ObjectInfo | SnapshotLine): boolean => {
    if (prev !== undefined) {
      const c = compareKeys(prev, o.key);
      if (c === 0) throw new SnapshotError(`cannot write snapshot ${file}: key ${JSON.stringify(o.key)} is listed twice`);
      if (c > 0) throw new SnapshotError(`cannot write snapshot ${file}: key ${JSON.stringify(o.key)} comes after ${JSON.stringify(prev)} (not in S3 order)`);
    }
    prev = o.key;
    bytes += o.size;
    count++;
    part.push('line' in o ? o.line : `${objectLine(o)}\n`);
    return part.length === LINES_PER_CHUNK;
  };
  const flush = async (): Promise<void> => {
    if (part.length === 0) return;
    const text = typeof part[0] === 'string' ? part.join('') : Buffer.concat(part as Buffer[]);
    part = [];
    await write(text);
  };
  try {
    await write(`${JSON.stringify(h)}\n`);
    // A plain iterable is walked without a promise per object (an array of millions).
    if (Symbol.iterator in objects) {
      for (const o of objects) if (add(o)) await flush();
    } else {
      for await (const o of objects) if (add(o)) await flush();
    }
    await flush();
    const trailer: SnapshotTrailer = { objects: count, bytes, sha256: hash.digest('hex') };
    sink.end(`${JSON.stringify({ end: trailer })}\n`);
    await done;
    await rename(tmp, file);
    return trailer;
  } catch (err) {
    sink.destroy();
    out.destroy();
    await rm(tmp, { force: true }).catch(() => undefined);
    if (err instanceof SnapshotError) throw err;
    throw new SnapshotError(`cannot write snapshot ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, { hint: 'Choose a path in a writable folder' });
  }
}

function bad(file: string, why: string): never {
  throw new SnapshotError(`snapshot ${file} ${why}`, { hint: 'Write it again with sluice snapshot s3://bucket/prefix/ FILE' });
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The file's bytes, inflated when it starts with gzip's magic, in chunks of about
 * READ_CHUNK; at most MAX_INFLATED_BYTES (`maxBytes`) in all.
 */
async function* fileBytes(file: string, maxBytes: number): AsyncGenerator<Buffer> {
  let fh: FileHandle | undefined;
  const magic = Buffer.alloc(2);
  let got: number;
  try {
    fh = await open(file, 'r');
    got = (await fh.read(magic, 0, 2, 0)).bytesRead;
  } catch (err) {
    await fh?.close().catch(() => undefined);
    throw new SnapshotError(`cannot read snapshot ${file} (${(err as NodeJS.ErrnoException).code ?? String(err)})`, { hint: 'Check the path; write one with sluice snapshot s3://bucket/prefix/ FILE' });
  }
  const input = fh.createReadStream({ start: 0, highWaterMark: READ_CHUNK });
  const gz = got === 2 && magic[0] === 0x1f && magic[1] === 0x8b ? zlib.createGunzip({ chunkSize: READ_CHUNK }) : undefined;
  let source: NodeJS.ReadableStream = input;
  if (gz) {
    input.on('error', (err) => gz.destroy(err));
    source = input.pipe(gz);
  }
  let total = 0;
  try {
    for await (const chunk of source as AsyncIterable<Buffer>) {
      total += chunk.length;
      if (total > maxBytes) bad(file, gz ? `inflates to more than ${maxBytes} bytes: it is not a listing` : `is larger than ${maxBytes} bytes: it is not a listing`);
      yield chunk;
    }
  } catch (err) {
    if (err instanceof SnapshotError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    if (gz && typeof code === 'string' && code.startsWith('Z_')) bad(file, `is not valid gzip data (${(err as Error).message})`);
    throw new SnapshotError(`cannot read snapshot ${file} (${code ?? String(err)})`, { hint: 'Check the path; write one with sluice snapshot s3://bucket/prefix/ FILE' });
  } finally {
    gz?.destroy();
    input.destroy();
  }
}

export interface ScanOptions {
  maxInflatedBytes?: number;
  /** false: every line through JSON.parse (the reference the property tests compare against). */
  fastLines?: boolean;
  /**
   * Issue 46 (decision 0044): called instead of onObject with each object line that
   * parseObjectBytes() reads (no string, no Date made), after the same checks. Returns false to
   * decline it: the line then goes to onObject as an ObjectInfo.
   */
  onBytes?: (o: ObjectBytes, header: SnapshotHeader) => boolean;
}

/** What a scan found besides the objects: the file's header and trailer, verified. */
export interface SnapshotScan {
  header: SnapshotHeader;
  trailer: SnapshotTrailer;
}

/**
 * Reads a snapshot as a stream and calls `onObject` with each object in order, then checks
 * the whole file (checksum, count, byte total) and returns its header and trailer.
 *
 * Memory: one read chunk and one line, whatever the file's size. Lines are split out of the
 * (inflated) chunks as they come; each line but the last is hashed, then parsed as the
 * header (line 1) or an object; the last line is the trailer. Every object is checked as it
 * comes (fields, S3 order, key inside the header's prefix), so a bad line fails the scan with
 * its number. Objects are handed over before the checksum at the end is known: a caller
 * that keeps them must drop them when the scan throws (readSnapshot does).
 */
export async function scanSnapshot(file: string, onObject: (o: ObjectInfo, header: SnapshotHeader) => void, opts: ScanOptions = {}): Promise<SnapshotScan> {
  const hash = createHash('sha256');
  const fast = opts.fastLines ?? true;
  const onBytes = fast ? opts.onBytes : undefined;
  /** The line being read as bytes (parseObjectBytes fills it in place). */
  const ob: ObjectBytes = { buf: NL_BUF, keyStart: 0, keyEnd: 0, size: 0, etagStart: 0, etagEnd: 0, mtimeMs: 0, storageClass: '' };
  /** The header's prefix as UTF-8, for keys read as bytes. */
  let prefixBytes: Buffer | undefined;
  /**
   * The last key when it was read as bytes (prevKey is then made only if an object line needs
   * it): bytes [prevAt, prevEnd) of prevBuf, the line's own chunk, kept referenced (not copied).
   */
  let prevFromBytes = false;
  let prevBuf: Buffer = NL_BUF;
  let prevAt = 0;
  let prevEnd = 0;
  let header: SnapshotHeader | undefined;
  let lineNo = 0;
  /** The last complete line seen, not yet hashed or parsed (bytes [pendingAt, pendingEnd) of pendingBuf): it may be the trailer. */
  let pendingBuf: Buffer | undefined;
  let pendingAt = 0;
  let pendingEnd = 0;
  /** Pieces of a line that spans chunks. */
  let partial: Buffer[] = [];
  let partialBytes = 0;
  let objects = 0;
  let bytes = 0;
  let prevKey: string | undefined;
  /**
   * Lines taken and not yet hashed: bytes [hashAt, hashEnd) of hashBuf, newlines included.
   * Consecutive lines of one chunk are hashed in one update, not one per line.
   */
  let hashBuf: Buffer | undefined;
  let hashAt = 0;
  let hashEnd = 0;
  const flushHash = (): void => {
    if (hashBuf !== undefined && hashEnd > hashAt) hash.update(hashBuf.subarray(hashAt, hashEnd));
    hashBuf = undefined;
  };
  /** Hashes line [s, e) of buf and its newline, which follows it in buf unless `joined`. */
  const hashLine = (buf: Buffer, s: number, e: number, joined: boolean): void => {
    if (joined) {
      flushHash();
      hash.update(buf.subarray(s, e));
      hash.update(NL_BUF);
    } else if (buf === hashBuf && s === hashEnd) {
      hashEnd = e + 1;
    } else {
      flushHash();
      hashBuf = buf;
      hashAt = s;
      hashEnd = e + 1;
    }
  };

  const parse = (buf: Buffer, s: number, e: number, n: number): unknown => {
    try {
      return JSON.parse(buf.toString('utf8', s, e));
    } catch {
      bad(file, `line ${n} is not JSON`);
    }
  };
  /** An object line the fast parser declines: JSON.parse and the field checks. */
  const slowObject = (buf: Buffer, s: number, e: number, n: number): ObjectInfo => {
    const r = parse(buf, s, e, n);
    if (!isRecord(r) || typeof r.key !== 'string' || typeof r.size !== 'number' || !Number.isSafeInteger(r.size) || r.size < 0 || typeof r.etag !== 'string') {
      bad(file, `line ${n} is not an object with key, size and etag`);
    }
    const o: ObjectInfo = {
      key: r.key, size: r.size, etag: r.etag,
      lastModified: new Date(typeof r.lastModified === 'string' ? r.lastModified : 0),
      storageClass: typeof r.storageClass === 'string' ? r.storageClass : 'STANDARD',
    };
    if (typeof r.versionId === 'string') o.versionId = r.versionId;
    if (typeof r.archiveStatus === 'string') o.archiveStatus = r.archiveStatus;
    if (r.restored === true) o.restored = true;
    return o;
  };
  const outside = (key: string, n: number): never => {
    throw new SnapshotError(`snapshot ${file} line ${n}: key ${JSON.stringify(key)} is outside the snapshot's prefix ${JSON.stringify(header!.prefix)}`, { hint: `Write the snapshot again with sluice snapshot ${header!.uri} FILE, or remove that line` });
  };
  const take = (buf: Buffer, s: number, e: number, n: number, joined: boolean): void => {
    hashLine(buf, s, e, joined);
    if (n === 1) {
      header = checkHeader(file, parse(buf, s, e, n));
      return;
    }
    if (onBytes !== undefined && parseObjectBytes(buf, s, e, ob)) {
      const ks = ob.keyStart;
      const ke = ob.keyEnd;
      // Keys in S3 order: ASCII bytes compare as compareKeys compares their strings.
      const c = prevFromBytes ? -compareBytes(prevBuf, prevAt, prevEnd, buf, ks, ke) : prevKey !== undefined ? -compareKeys(prevKey, buf.toString('latin1', ks, ke)) : 1;
      if (c <= 0) bad(file, `line ${n}: keys are not in S3 order or repeat (${JSON.stringify(buf.toString('latin1', ks, ke))})`);
      prefixBytes ??= Buffer.from(header!.prefix);
      if (ke - ks < prefixBytes.length || compareBytes(buf, ks, ks + prefixBytes.length, prefixBytes, 0, prefixBytes.length) !== 0) outside(buf.toString('latin1', ks, ke), n);
      prevBuf = buf;
      prevAt = ks;
      prevEnd = ke;
      prevFromBytes = true;
      objects++;
      bytes += ob.size;
      if (onBytes(ob, header!)) return;
      // Declined: the same line as an object (its checks are passed already).
      onObject(parseObjectLine(buf, s, e)!, header!);
      return;
    }
    const o = (fast ? parseObjectLine(buf, s, e) : undefined) ?? slowObject(buf, s, e, n);
    if (prevFromBytes) {
      prevKey = prevBuf.toString('latin1', prevAt, prevEnd);
      prevFromBytes = false;
    }
    if (prevKey !== undefined && compareKeys(prevKey, o.key) >= 0) bad(file, `line ${n}: keys are not in S3 order or repeat (${JSON.stringify(o.key)})`);
    // issue 43: a key outside the prefix has no path below the channel (File mode mangled it, FastFile dropped it).
    if (!o.key.startsWith(header!.prefix)) outside(o.key, n);
    prevKey = o.key;
    objects++;
    bytes += o.size;
    onObject(o, header!);
  };
  /** Whether the pending line was joined from pieces (its newline is not after it in its buffer). */
  let pendingJoined = false;
  const line = (buf: Buffer, s: number, e: number, joined: boolean): void => {
    lineNo++;
    if (pendingBuf !== undefined) take(pendingBuf, pendingAt, pendingEnd, lineNo - 1, pendingJoined);
    pendingBuf = buf;
    pendingAt = s;
    pendingEnd = e;
    pendingJoined = joined;
  };

  for await (const chunk of fileBytes(file, opts.maxInflatedBytes ?? MAX_INFLATED_BYTES)) {
    let at = 0;
    for (let nl = chunk.indexOf(NL, at); nl >= 0; nl = chunk.indexOf(NL, at)) {
      if (partialBytes + nl - at > MAX_LINE_BYTES) bad(file, `line ${lineNo + 1} is longer than ${MAX_LINE_BYTES} bytes: it is not a listing`);
      if (partial.length > 0) {
        partial.push(chunk.subarray(at, nl));
        const joined = Buffer.concat(partial);
        line(joined, 0, joined.length, true);
        partial = [];
        partialBytes = 0;
      } else {
        line(chunk, at, nl, false);
      }
      at = nl + 1;
    }
    if (at < chunk.length) {
      partialBytes += chunk.length - at;
      if (partialBytes > MAX_LINE_BYTES) bad(file, `line ${lineNo + 1} is longer than ${MAX_LINE_BYTES} bytes: it is not a listing`);
      // A copy: the chunk's memory is not kept alive by a piece of it.
      partial.push(Buffer.from(chunk.subarray(at)));
    }
  }
  if (partialBytes > 0 || (pendingBuf === undefined && lineNo === 0)) bad(file, 'is truncated (no final newline)');
  if (lineNo === 1) bad(file, 'has no trailer line');
  flushHash();
  const t = parse(pendingBuf!, pendingAt, pendingEnd, lineNo);
  const trailer = isRecord(t) && isRecord(t.end) ? t.end : undefined;
  if (!trailer || typeof trailer.sha256 !== 'string' || typeof trailer.objects !== 'number' || typeof trailer.bytes !== 'number') bad(file, 'is truncated (its last line is not the trailer)');
  const sum = hash.digest('hex');
  if (sum !== trailer.sha256) bad(file, `does not match its checksum (sha256 ${sum.slice(0, 12)}..., trailer says ${trailer.sha256.slice(0, 12)}...): it was changed or damaged`);
  if (objects !== trailer.objects || bytes !== trailer.bytes) bad(file, `holds ${objects} objects (${bytes} bytes) but its trailer says ${trailer.objects} (${trailer.bytes} bytes)`);
  return { header: header!, trailer: { objects: trailer.objects, bytes: trailer.bytes, sha256: trailer.sha256 } };
}

const NL_BUF = Buffer.from([NL]);


function checkHeader(file: string, h: unknown): SnapshotHeader {
  if (!isRecord(h) || h.sluiceSnapshot === undefined) bad(file, 'is not a sluice snapshot (line 1 is no header)');
  if (h.sluiceSnapshot !== SNAPSHOT_VERSION) bad(file, `has format version ${JSON.stringify(h.sluiceSnapshot)}; this sluice reads version ${SNAPSHOT_VERSION}`);
  if (typeof h.uri !== 'string' || typeof h.prefix !== 'string' || typeof h.bucket !== 'string') bad(file, 'line 1 (the header) lacks uri, bucket or prefix');
  return h as unknown as SnapshotHeader;
}

/** Reads and verifies a snapshot (checksum, count, order, prefix), keeping its objects in memory. */
export async function readSnapshot(file: string): Promise<Snapshot> {
  const objects: ObjectInfo[] = [];
  const { header, trailer } = await scanSnapshot(file, (o) => { objects.push(o); });
  return { file, header, objects, trailer };
}

/**
 * Checks that a snapshot is of `uri` (when the command names one) and returns the
 * snapshot's own URI otherwise.
 */
export function checkSnapshotUri(s: Pick<Snapshot, 'file' | 'header'>, uri: string | undefined): string {
  if (uri === undefined) return s.header.uri;
  const norm = (u: string) => u.replace(/\/+$/, '');
  if (norm(uri) !== norm(s.header.uri)) {
    throw new SnapshotError(`snapshot ${s.file} is of ${s.header.uri}, not ${uri}`, { hint: `Use ${s.header.uri}, or leave the URI out to take the snapshot's` });
  }
  return s.header.uri;
}

export interface SnapshotDiff {
  added: ObjectInfo[];
  removed: ObjectInfo[];
  /** [in A, in B] */
  modified: [ObjectInfo, ObjectInfo][];
  unchanged: number;
}

/** What changed from A to B: keys added, removed, and modified (ETag, size or version). */
export function diffSnapshots(a: readonly ObjectInfo[], b: readonly ObjectInfo[]): SnapshotDiff {
  const out: SnapshotDiff = { added: [], removed: [], modified: [], unchanged: 0 };
  let i = 0;
  let j = 0;
  // Both are sorted in S3 order (readSnapshot checks it): one merge pass.
  while (i < a.length || j < b.length) {
    const x = a[i];
    const y = b[j];
    const c = x === undefined ? 1 : y === undefined ? -1 : compareKeys(x.key, y.key);
    if (c < 0) { out.removed.push(x!); i++; continue; }
    if (c > 0) { out.added.push(y!); j++; continue; }
    if (x!.etag !== y!.etag || x!.size !== y!.size || (x!.versionId ?? '') !== (y!.versionId ?? '')) out.modified.push([x!, y!]);
    else out.unchanged++;
    i++; j++;
  }
  return out;
}
