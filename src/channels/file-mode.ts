/**
 * File mode: download a channel's objects into <data>/<channel> before the script starts.
 *
 * Algorithm:
 *  1. Every key's path below the channel folder is checked first (safeTarget): no NUL,
 *     not absolute, no "." or ".." segment, and the resolved path stays inside the folder.
 *     One unsafe key fails the channel before any byte is written (UnsafeKeyError).
 *     Keys ending in '/' (zero-byte "folder" markers) become folders.
 *  2. Exactly this run's objects: the channel folder is swept first. Whatever is not a
 *     file this run writes or keeps, or a folder on the way to one, is removed: files of
 *     another host's shard or of objects since deleted from S3, "*.sluice-part" files
 *     and empty folders a killed run left, symlinks, anything put there by hand. On
 *     SageMaker a channel starts empty; this is the same view, minus the downloads that
 *     step 3 can skip.
 *  3. Skip: a file already present is kept when the record <stateDir>/<channel>.etags.json
 *     says sluice wrote it from an object of the same size and ETag, and the file still
 *     has that size and mtime (so a local edit is noticed). The record
 *     ({"version":1,"files":{"<rel>":{"size","etag","mtimeMs"}}}) lives outside
 *     input/data (sluice run: <root>/.sluice/file-mode), so a script listing input/data
 *     sees only channels; it is rewritten after each run, also a failed one, with the
 *     files that completed. No record, no skip.
 *  4. Each object is split into parts of --part-size (one part when smaller). Parts are
 *     fetched with ranged GETs pinned to the listed ETag, at most --max-connections at once
 *     and at most --max-inflight bytes requested at once (a part larger than the budget
 *     still runs, alone). Objects start in key order, so small files finish early and
 *     large ones are fetched in parallel parts.
 *  5. Parts are written into "<name>.sluice-part" beside the target, which is renamed
 *     over the target when all its parts are in: a crash never leaves a half-written
 *     file under the final name. On failure or abort, temp files are removed (after a
 *     kill -9, the next run's sweep removes them; the script never starts on a
 *     channel that was not completed).
 *     Each part is one ranged GET into a buffer from a BufferPool (../cache/buffer-pool.ts)
 *     of part-sized slabs, bounded by --max-inflight: the body lands there straight from
 *     the socket (../s3/wire.ts), then one pwritev writes it from that very buffer, and
 *     the slab carries the next part. So no byte is copied in user space, and after the
 *     first --max-inflight bytes no fresh memory is touched (fresh pages cost a page
 *     fault per 4 KiB on our VMs). The slabs come from the addon's allocPrefaulted: 2 MiB
 *     aligned, huge pages where THP allows, mapped in one call, so even the first ones
 *     (on a channel smaller than the budget: all of them) cost no fault per 4 KiB.
 *     Measured (4 x 64 MiB, no latency): see BENCHMARKS.md "File mode and Pipe slabs".
 *     Tails and small files get a buffer of their own.
 *  6. Progress: a cli-progress bar on a TTY (bytes, files, MB/s, ETA); otherwise a log
 *     line every LOG_INTERVAL_MS.
 * The bytes are written as stored: CompressionType does not apply to File mode.
 */
import { lstat, mkdir, open, readdir, readFile, rename, rm, stat, writeFile, type FileHandle } from 'node:fs/promises';
import { setMaxListeners } from 'node:events';
import path from 'node:path';
import cliProgress from 'cli-progress';
import { AbortedError, BadRangeReplyError, UnsafeKeyError } from '../errors.js';
import { log } from '../log.js';
import { channelObjects, channelSkippedBytes, servedBytes } from '../metrics/metrics.js';
import { markFirstByte, markFirstFile } from '../metrics/milestones.js';
import type { ObjectClient } from '../s3/object-client.js';
import { BufferPool } from '../cache/buffer-pool.js';
import { prefaultedAlloc } from '../pipe/native.js';
import { explainDeadMount } from '../fuse/mountpoint.js';

export interface DownloadObject {
  key: string;
  size: number;
  etag: string;
  /** Path below the channel folder. */
  rel: string;
  client: ObjectClient;
}

export interface FileModeOptions {
  channel: string;
  /** <root>/input/data; the channel lands in <dataDir>/<channel>. */
  dataDir: string;
  /** Folder of sluice's own records (the ETag record), outside dataDir: <root>/.sluice/file-mode. */
  stateDir: string;
  objects: readonly DownloadObject[];
  partSize: number;
  maxInflight: number;
  maxConnections: number;
  /** 'auto' (default): a bar when stderr is a TTY, else log lines. */
  progress?: 'auto' | 'bar' | 'log' | 'none';
  signal?: AbortSignal;
}

export interface FileModeResult {
  /** Files written by this run. */
  downloaded: number;
  downloadedBytes: number;
  /** Files kept because they were present with the same size and ETag. */
  skipped: number;
  skippedBytes: number;
  /** Entries removed from the channel folder because they are not this run's (step 2). */
  removed: number;
}

/** Non-TTY progress cadence: often enough to show life in `kubectl logs`, rare enough not to flood it. */
const LOG_INTERVAL_MS = 10_000;
/** Suffix of files being written; never a final name because keys are renamed over after. */
const TEMP_SUFFIX = '.sluice-part';
const SIDECAR_VERSION = 1;

/** What sluice wrote: the object's size and ETag, and the file's mtime right after the rename. */
interface EtagRecord { size: number; etag: string; mtimeMs: number }

export function sidecarPath(stateDir: string, channel: string): string {
  return path.join(stateDir, `${channel}.etags.json`);
}

/** Where versions before the sweep kept the record: inside input/data, where scripts look for channels. */
const legacySidecarPath = (dataDir: string, channel: string) => path.join(dataDir, `.${channel}.sluice-etags.json`);

/**
 * The absolute path `rel` may be written to below `dir`, or UnsafeKeyError.
 * Returns undefined for a folder marker ("a/b/") or an empty path.
 */
export function safeTarget(dir: string, key: string, rel: string): { file: string } | { folder: string } | undefined {
  if (rel.includes('\0')) throw new UnsafeKeyError(key, 'it contains a NUL byte');
  if (rel.startsWith('/')) throw new UnsafeKeyError(key, 'its path below the channel is absolute');
  const isFolder = rel.endsWith('/');
  const segments = rel.split('/').filter((s) => s !== '');
  for (const s of segments) {
    if (s === '..') throw new UnsafeKeyError(key, 'it has a ".." path segment');
    if (s === '.') throw new UnsafeKeyError(key, 'it has a "." path segment');
    // Linux NAME_MAX: a longer name would fail the download with a bare ENAMETOOLONG.
    if (Buffer.byteLength(s) > 255) throw new UnsafeKeyError(key, 'a name in its path is longer than 255 bytes');
  }
  // A lone surrogate (a key that was not valid UTF-8) would be written as U+FFFD: two keys could share a file.
  if (/\p{Cs}/u.test(rel)) throw new UnsafeKeyError(key, 'it is not valid Unicode');
  if (segments.length === 0) return undefined;
  const root = path.resolve(dir);
  const target = path.resolve(root, ...segments);
  if (!target.startsWith(root + path.sep)) throw new UnsafeKeyError(key, 'it resolves outside the channel folder');
  if (!isFolder && target.endsWith(TEMP_SUFFIX)) throw new UnsafeKeyError(key, `its name ends in ${TEMP_SUFFIX}, which sluice uses for partial files`);
  return isFolder ? { folder: target } : { file: target };
}

async function readSidecar(file: string): Promise<Map<string, EtagRecord>> {
  try {
    const json = JSON.parse(await readFile(file, 'utf8')) as { version?: number; files?: Record<string, EtagRecord> };
    if (json.version !== SIDECAR_VERSION || typeof json.files !== 'object' || json.files === null) return new Map();
    return new Map(Object.entries(json.files));
  } catch {
    return new Map(); // absent or unreadable: nothing is skipped, nothing is lost
  }
}

async function writeSidecar(file: string, records: Map<string, EtagRecord>): Promise<void> {
  const tmp = `${file}.tmp`;
  await writeFile(tmp, JSON.stringify({ version: SIDECAR_VERSION, files: Object.fromEntries(records) }));
  await rename(tmp, file);
}

interface Job {
  obj: DownloadObject;
  file: string;
  temp: string;
  partsLeft: number;
  fd?: Promise<FileHandle>;
}

interface Part { job: Job; start: number; end: number }

export async function downloadChannel(o: FileModeOptions): Promise<FileModeResult> {
  const dir = path.join(o.dataDir, o.channel);
  // 1. Check every key before writing anything.
  const folders = new Set<string>();
  const files: { obj: DownloadObject; file: string }[] = [];
  const seen = new Map<string, string>();
  for (const obj of o.objects) {
    const t = safeTarget(dir, obj.key, obj.rel);
    if (!t) continue;
    if ('folder' in t) { folders.add(t.folder); continue; }
    const other = seen.get(t.file);
    if (other !== undefined) throw new UnsafeKeyError(obj.key, `it would write the same file as ${JSON.stringify(other)}`);
    seen.set(t.file, obj.key);
    files.push({ obj, file: t.file });
  }
  // 2. Remove what is not this run's. A dead FUSE mount in the folder (a killed `sluice
  // mount` of an earlier FastFile run) fails every access with ENOTCONN: one line naming it.
  let removed: number;
  try {
    removed = await sweepChannel(dir, new Set(files.map((f) => f.file)), folders);
    await rm(legacySidecarPath(o.dataDir, o.channel), { force: true });
    await mkdir(dir, { recursive: true });
    for (const f of folders) await mkdir(f, { recursive: true });
  } catch (err) {
    throw await explainDeadMount(err, `the folder of File-mode channel ${JSON.stringify(o.channel)}:`, dir);
  }
  if (removed > 0) log.info({ channel: o.channel, removed }, 'File mode: removed what the channel folder held that is not in this run\'s objects');

  // 3. Skip what is present with the same size and ETag.
  await mkdir(o.stateDir, { recursive: true });
  const sidecar = sidecarPath(o.stateDir, o.channel);
  const known = await readSidecar(sidecar);
  const records = new Map<string, EtagRecord>();
  const todo: { obj: DownloadObject; file: string }[] = [];
  const result: FileModeResult = { downloaded: 0, downloadedBytes: 0, skipped: 0, skippedBytes: 0, removed };
  for (const f of files) {
    const rec = known.get(f.obj.rel);
    const st = await stat(f.file).catch(() => undefined);
    if (rec && st?.isFile() && st.size === f.obj.size && st.mtimeMs === rec.mtimeMs && rec.size === f.obj.size && rec.etag === f.obj.etag) {
      records.set(f.obj.rel, rec);
      result.skipped++;
      result.skippedBytes += f.obj.size;
      channelSkippedBytes.inc({ channel: o.channel }, f.obj.size);
      channelObjects.inc({ channel: o.channel, mode: 'File' });
      markFirstFile(o.channel, 'File');
    } else {
      todo.push(f);
    }
  }

  // 4-5. Download the rest.
  const total = todo.reduce((s, f) => s + f.obj.size, 0);
  const progress = startProgress(o, todo.length, total);
  const ac = new AbortController();
  // Every GET in flight listens on this signal; more than Node's default of 10 is expected.
  setMaxListeners(o.maxConnections + 8, ac.signal);
  const onAbort = () => ac.abort(o.signal?.reason);
  o.signal?.addEventListener('abort', onAbort, { once: true });
  const jobs: Job[] = [];
  try {
    if (o.signal?.aborted) throw new AbortedError('File mode download aborted');
    const parts: Part[] = [];
    for (const f of todo) {
      const job: Job = { obj: f.obj, file: f.file, temp: f.file + TEMP_SUFFIX, partsLeft: 0 };
      jobs.push(job);
      await mkdir(path.dirname(f.file), { recursive: true }).catch((err) => { throw conflict(f.obj.key, err); });
      if (f.obj.size === 0) {
        await writeFile(job.temp, Buffer.alloc(0));
        await finish(job);
        continue;
      }
      for (let start = 0; start < f.obj.size; start += o.partSize) {
        parts.push({ job, start, end: Math.min(f.obj.size, start + o.partSize) });
        job.partsLeft++;
      }
    }
    await runParts(parts, o, ac.signal, progress, finish);
  } catch (err) {
    ac.abort(err);
    await Promise.all(jobs.map(async (j) => {
      if (j.fd) await (await j.fd.catch(() => undefined))?.close().catch(() => undefined);
      if (j.partsLeft > 0 || j.obj.size === 0) await rm(j.temp, { force: true });
    }));
    throw o.signal?.aborted && !(err instanceof UnsafeKeyError) ? new AbortedError('File mode download aborted', { cause: err }) : err;
  } finally {
    o.signal?.removeEventListener('abort', onAbort);
    progress.stop();
    await writeSidecar(sidecar, records).catch((err) => log.warn({ err, channel: o.channel }, 'could not write the File mode ETag record'));
  }
  log.info({ channel: o.channel, ...result }, 'File mode channel ready');
  return result;

  async function finish(job: Job): Promise<void> {
    if (job.fd) await (await job.fd).close();
    job.fd = undefined;
    try {
      await rename(job.temp, job.file);
    } catch (err) {
      throw conflict(job.obj.key, err);
    }
    records.set(job.obj.rel, { size: job.obj.size, etag: job.obj.etag, mtimeMs: (await stat(job.file)).mtimeMs });
    result.downloaded++;
    result.downloadedBytes += job.obj.size;
    channelObjects.inc({ channel: o.channel, mode: 'File' });
    markFirstFile(o.channel, 'File');
    progress.file();
  }
}

/**
 * Remove everything below `dir` that is not one of `files` (regular files) or a folder
 * on the way to one of them or to one of `folders`. A `dir` that is not a folder (a
 * file, a symlink) is removed too. Returns the number of entries removed (a removed
 * folder counts once).
 */
export async function sweepChannel(dir: string, files: ReadonlySet<string>, folders: ReadonlySet<string>): Promise<number> {
  const root = path.resolve(dir);
  const keepDirs = new Set<string>();
  for (const p of [...files].map((f) => path.dirname(f)).concat([...folders])) {
    for (let d = p; d.length > root.length && !keepDirs.has(d); d = path.dirname(d)) keepDirs.add(d);
  }
  const top = await lstat(root).catch((err: NodeJS.ErrnoException) => { if (err.code === 'ENOENT') return undefined; throw err; });
  if (top === undefined) return 0;
  if (!top.isDirectory()) {
    await rm(root, { force: true });
    return 1;
  }
  let removed = 0;
  const walk = async (d: string): Promise<void> => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory() && keepDirs.has(p)) {
        await walk(p);
      } else if (!(e.isFile() && files.has(p))) {
        await rm(p, { recursive: true, force: true });
        removed++;
      }
    }
  };
  await walk(root);
  return removed;
}

function conflict(key: string, err: unknown): Error {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ENOTDIR' || code === 'EISDIR' || code === 'EEXIST') return new UnsafeKeyError(key, 'its path conflicts with another object (a file where a folder is needed, or the reverse)');
  return err as Error;
}

/** Fetch and write parts under the connection and in-flight byte bounds. */
async function runParts(parts: Part[], o: FileModeOptions, signal: AbortSignal, progress: Progress, finish: (j: Job) => Promise<void>): Promise<void> {
  // Part buffers in use are bounded by the in-flight budget (plus the one part that may exceed it).
  // Slabs mapped up front, in huge pages where THP allows (../pipe/native.ts): see step 5 above.
  const alloc = prefaultedAlloc();
  const pool = new BufferPool({ maxBytes: o.maxInflight + o.partSize, unit: o.partSize, ...(alloc ? { alloc } : {}) });
  let next = 0;
  let running = 0;
  let inflight = 0;
  let failure: unknown;
  await new Promise<void>((resolve) => {
    const pump = () => {
      while (failure === undefined && !signal.aborted && next < parts.length && running < o.maxConnections) {
        const p = parts[next]!;
        const len = p.end - p.start;
        if (running > 0 && inflight + len > o.maxInflight) break;
        next++;
        running++;
        inflight += len;
        runPart(p).then(
          () => { running--; inflight -= len; pump(); },
          (err) => { running--; inflight -= len; failure ??= err; pump(); },
        );
      }
      if (running === 0 && (next >= parts.length || failure !== undefined || signal.aborted)) resolve();
    };
    pump();
  });
  if (failure !== undefined) throw failure;
  if (signal.aborted) throw new AbortedError('File mode download aborted');

  async function runPart(p: Part): Promise<void> {
    const { job } = p;
    const len = p.end - p.start;
    // Whole parts land in a recycled slab (straight from the socket, src/s3/wire.ts) and go
    // to the file with one pwritev from it; tails and small files get a buffer of their own.
    const slab = pool.acquire(len);
    try {
      const buf = await job.obj.client.getRange(job.obj.key, p.start, p.end, job.obj.etag, { signal, ...(slab ? { into: slab.buf } : {}) });
      job.fd ??= open(job.temp, 'w');
      await writeAllAt(await job.fd, [buf], buf.length, p.start);
    } finally {
      slab?.unref(); // getRange has settled and the write is done: nothing touches the slab any more
    }
    servedBytes.inc({ channel: o.channel, mode: 'File' }, len);
    markFirstByte(o.channel, 'File');
    progress.bytes(len);
    if (--job.partsLeft === 0) await finish(job);
  }
}

/** Writes `bufs` (n bytes in all) at file offset `pos`, going on after a short write. */
async function writeAllAt(fd: FileHandle, bufs: Buffer[], n: number, pos: number): Promise<void> {
  let done = 0;
  while (done < n) {
    const { bytesWritten } = await fd.writev(bufs, pos + done);
    if (bytesWritten <= 0) throw new Error(`pwritev wrote nothing at offset ${pos + done}`);
    done += bytesWritten;
    if (done < n) bufs = dropBytes(bufs, bytesWritten);
  }
}

/** `bufs` without their first `n` bytes. */
function dropBytes(bufs: Buffer[], n: number): Buffer[] {
  let i = 0;
  while (i < bufs.length && n >= bufs[i]!.length) n -= bufs[i++]!.length;
  const rest = bufs.slice(i);
  if (n > 0 && rest.length > 0) rest[0] = rest[0]!.subarray(n);
  return rest;
}

interface Progress {
  bytes(n: number): void;
  file(): void;
  stop(): void;
}

function startProgress(o: FileModeOptions, files: number, total: number): Progress {
  const kind = o.progress ?? 'auto';
  const useBar = kind === 'bar' || (kind === 'auto' && process.stderr.isTTY === true);
  let bytes = 0;
  let done = 0;
  const started = Date.now();
  if (files === 0 || kind === 'none') return { bytes() {}, file() {}, stop() {} };
  const mb = (n: number) => (n / 1e6).toFixed(1);
  const rate = () => bytes / 1e6 / Math.max(0.001, (Date.now() - started) / 1000);
  if (useBar) {
    const bar = new cliProgress.SingleBar({
      format: `${o.channel} [{bar}] {percentage}% | {mb}/{totalMb} MB | {done}/{files} files | {rate} MB/s | ETA {eta_formatted}`,
      stream: process.stderr,
      hideCursor: true,
      etaBuffer: 50,
    }, cliProgress.Presets.shades_classic);
    const payload = () => ({ mb: mb(bytes), totalMb: mb(total), done, files, rate: rate().toFixed(1) });
    bar.start(Math.max(1, total), 0, payload());
    return {
      bytes(n) { bytes += n; bar.update(bytes, payload()); },
      file() { done++; bar.update(bytes, payload()); },
      stop() { bar.update(bytes, payload()); bar.stop(); },
    };
  }
  if (kind === 'log' || kind === 'auto') {
    const line = () => log.info({ channel: o.channel, bytes, totalBytes: total, files: done, totalFiles: files, mbPerSecond: Number(rate().toFixed(1)) }, `File mode: ${mb(bytes)}/${mb(total)} MB, ${done}/${files} files`);
    line();
    const timer = setInterval(line, LOG_INTERVAL_MS);
    timer.unref();
    return { bytes(n) { bytes += n; }, file() { done++; }, stop() { clearInterval(timer); } };
  }
  return { bytes() {}, file() {}, stop() {} };
}
