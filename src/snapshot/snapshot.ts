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
 * Cost: writing hashes and (optionally) deflates each line once; reading inflates, hashes
 * and JSON.parses each line once: about 1 s per million keys on one core (BENCHMARKS.md).
 */
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { readFile, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { SnapshotError } from '../errors.js';
import { compareKeys } from '../s3/lister.js';
import type { ObjectInfo } from '../s3/object-client.js';

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

function objectLine(o: ObjectInfo): string {
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

/**
 * Writes `objects` (any order; sorted here) as a snapshot at `file`, atomically (a temp
 * file renamed into place). Returns the trailer.
 */
export async function writeSnapshot(file: string, header: Omit<SnapshotHeader, 'sluiceSnapshot' | 'createdAt'> & { createdAt?: string }, objects: ObjectInfo[]): Promise<SnapshotTrailer> {
  const sorted = [...objects].sort((a, b) => compareKeys(a.key, b.key));
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i]!.key === sorted[i - 1]!.key) throw new SnapshotError(`cannot write snapshot ${file}: key ${JSON.stringify(sorted[i]!.key)} is listed twice`);
  }
  const h: SnapshotHeader = { sluiceSnapshot: SNAPSHOT_VERSION, ...header, createdAt: header.createdAt ?? new Date().toISOString() };
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.tmp`);
  const hash = createHash('sha256');
  const out = createWriteStream(tmp);
  const gz = file.endsWith('.gz') ? zlib.createGzip({ level: GZIP_LEVEL }) : undefined;
  const sink = gz ?? out;
  gz?.pipe(out);
  const done = new Promise<void>((resolve, reject) => {
    out.on('finish', resolve);
    out.on('error', reject);
    gz?.on('error', reject);
  });
  const write = (text: string) => new Promise<void>((resolve, reject) => {
    hash.update(text);
    if (sink.write(text)) resolve();
    else sink.once('drain', resolve);
    sink.once('error', reject);
  });
  let bytes = 0;
  try {
    await write(`${JSON.stringify(h)}\n`);
    for (let i = 0; i < sorted.length; i += LINES_PER_CHUNK) {
      const part = sorted.slice(i, i + LINES_PER_CHUNK);
      for (const o of part) bytes += o.size;
      await write(part.map(objectLine).join('\n') + '\n');
    }
    const trailer: SnapshotTrailer = { objects: sorted.length, bytes, sha256: hash.digest('hex') };
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

/** Reads and verifies a snapshot (checksum, count, order). */
export async function readSnapshot(file: string): Promise<Snapshot> {
  let raw: Buffer;
  try {
    raw = await readFile(file);
  } catch (err) {
    throw new SnapshotError(`cannot read snapshot ${file} (${(err as NodeJS.ErrnoException).code ?? String(err)})`, { hint: 'Check the path; write one with sluice snapshot s3://bucket/prefix/ FILE' });
  }
  if (raw.length >= 2 && raw[0] === 0x1f && raw[1] === 0x8b) {
    try {
      raw = await promisify(zlib.gunzip)(raw);
    } catch (err) {
      bad(file, `is not valid gzip data (${(err as Error).message})`);
    }
  }
  if (raw.length === 0 || raw[raw.length - 1] !== 0x0a) bad(file, 'is truncated (no final newline)');
  const lastStart = raw.lastIndexOf(0x0a, raw.length - 2) + 1;
  if (lastStart === 0) bad(file, 'has no trailer line');
  let trailer: SnapshotTrailer;
  try {
    trailer = (JSON.parse(raw.subarray(lastStart).toString('utf8')) as { end: SnapshotTrailer }).end;
  } catch {
    bad(file, 'is truncated (its last line is not the trailer)');
  }
  if (!trailer || typeof trailer.sha256 !== 'string' || typeof trailer.objects !== 'number') bad(file, 'is truncated (its last line is not the trailer)');
  const body = raw.subarray(0, lastStart);
  const sum = createHash('sha256').update(body).digest('hex');
  if (sum !== trailer.sha256) bad(file, `does not match its checksum (sha256 ${sum.slice(0, 12)}..., trailer says ${trailer.sha256.slice(0, 12)}...): it was changed or damaged`);
  const lines = body.toString('utf8').split('\n');
  lines.pop(); // the body ends in '\n'
  let header: SnapshotHeader;
  try {
    header = JSON.parse(lines[0]!) as SnapshotHeader;
  } catch {
    bad(file, 'line 1 is not JSON');
  }
  if (header.sluiceSnapshot !== SNAPSHOT_VERSION) {
    bad(file, header.sluiceSnapshot === undefined ? 'is not a sluice snapshot (no header)' : `has format version ${header.sluiceSnapshot}; this sluice reads version ${SNAPSHOT_VERSION}`);
  }
  const objects: ObjectInfo[] = new Array(lines.length - 1);
  let bytes = 0;
  for (let i = 1; i < lines.length; i++) {
    let r: Record<string, unknown>;
    try {
      r = JSON.parse(lines[i]!) as Record<string, unknown>;
    } catch {
      bad(file, `line ${i + 1} is not JSON`);
    }
    if (typeof r.key !== 'string' || typeof r.size !== 'number' || !Number.isSafeInteger(r.size) || r.size < 0 || typeof r.etag !== 'string') {
      bad(file, `line ${i + 1} lacks key, size or etag`);
    }
    const o: ObjectInfo = {
      key: r.key, size: r.size, etag: r.etag,
      lastModified: new Date(typeof r.lastModified === 'string' ? r.lastModified : 0),
      storageClass: typeof r.storageClass === 'string' ? r.storageClass : 'STANDARD',
    };
    if (typeof r.versionId === 'string') o.versionId = r.versionId;
    if (typeof r.archiveStatus === 'string') o.archiveStatus = r.archiveStatus;
    if (r.restored === true) o.restored = true;
    if (i > 1 && compareKeys(objects[i - 2]!.key, o.key) >= 0) bad(file, `line ${i + 1}: keys are not in S3 order or repeat (${JSON.stringify(o.key)})`);
    objects[i - 1] = o;
    bytes += o.size;
  }
  if (objects.length !== trailer.objects || bytes !== trailer.bytes) bad(file, `holds ${objects.length} objects (${bytes} bytes) but its trailer says ${trailer.objects} (${trailer.bytes} bytes)`);
  return { file, header, objects, trailer };
}

/**
 * Checks that a snapshot is of `uri` (when the command names one) and returns the
 * snapshot's own URI otherwise.
 */
export function checkSnapshotUri(s: Snapshot, uri: string | undefined): string {
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
