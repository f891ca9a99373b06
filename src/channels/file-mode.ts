/**
 * File mode: download a channel's objects into <data>/<channel> before the script starts.
 *
 * Algorithm:
 *  1. Every key's path below the channel folder is checked first (safeTarget): no NUL,
 *     not absolute, no "." or ".." segment, and the resolved path stays inside the folder.
 *     One unsafe key fails the channel before any byte is written (UnsafeKeyError).
 *     Keys ending in '/' (zero-byte "folder" markers) become folders. Two keys for one
 *     file, or a file where another key needs a folder ("a" and "a/b"), fail it too.
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
 *     fetched with ranged GETs pinned to the listed ETag, at most --max-connections at once,
 *     from one queue across objects (no object waits for the one before it to finish).
 *     A part holds its connection only while its GET runs and its memory until its bytes
 *     are in the file; parts held are bounded by --max-inflight and by --max-connections +
 *     WRITE_SLACK_PARTS (a part larger than the budget still runs, alone). Objects start in
 *     key order, so small files finish early and large ones are fetched in parallel parts.
 *  5. Parts are written into "<name>.sluice-part" beside the target, which is renamed
 *     over the target when all its parts are in: a crash never leaves a half-written
 *     file under the final name. On failure or abort, temp files are removed (after a
 *     kill -9, the next run's sweep removes them; the script never starts on a
 *     channel that was not completed).
 *     Each part is one ranged GET into a buffer from a BufferPool (../memory/buffer-pool.ts)
 *     of part-sized slabs: the body lands there straight from the socket (../s3/wire.ts),
 *     and pwritev writes it from that very buffer in WRITE_PIECE pieces as they land
 *     (RangeOptions.onFilled), so a GET's end leaves at most a piece to write and the
 *     connection goes on to the next part at once; the slab carries a later part. So no byte is copied in user space, and after the
 *     first --max-inflight bytes no fresh memory is touched (fresh pages cost a page
 *     fault per 4 KiB on our VMs). The slabs come from the addon's allocPrefaulted: 4 KiB
 *     pages, mapped in one call (native/binding.c), so even the first ones
 *     (on a channel smaller than the budget: all of them) cost no fault per 4 KiB.
 *     Measured (4 x 64 MiB, no latency): see BENCHMARKS.md "File mode and Pipe slabs".
 *     Tails and small files get a buffer of their own.
 *  6. Progress: a cli-progress bar on a TTY (bytes, files, MB/s, ETA); otherwise a log
 *     line every LOG_INTERVAL_MS. At debug level, one line per part (GET and write times).
 *  7. No fsync. A process crash (kill -9, OOM kill) loses nothing written: the kernel keeps
 *     the pages, and the next run sweeps the "*.sluice-part" files and keeps the renamed
 *     files its record vouches for. An OS crash or power loss can leave a renamed file with
 *     its size but not all its bytes on disk; the channel is a copy of S3 for this job, so
 *     sluice does not pay a flush of every byte before the script starts (aws s3 cp does
 *     not fsync either). After such a crash, remove the channel's record (SEMANTICS.md).
 *     Measured (issue 11, File mode vs aws s3 cp): BENCHMARKS.md "t11-file".
 * The bytes are written as stored: CompressionType does not apply to File mode.
 */
import { lstat, mkdir, open, readdir, readFile, rename, rm, stat, writeFile, type FileHandle } from 'node:fs/promises';
import { setMaxListeners } from 'node:events';
import path from 'node:path';
import cliProgress from 'cli-progress';
import { AbortedError, BadRangeReplyError, ConfigError, UnsafeKeyError } from '../errors.js';
import { channelNameProblem } from './input-config.js';
import { log } from '../log.js';
import { channelObjects, channelSkippedBytes, servedBytes } from '../metrics/metrics.js';
import { markFirstByte, markFirstFile } from '../metrics/milestones.js';
import type { ObjectClient } from '../s3/object-client.js';
import { slabPool } from '../memory/slab-pool.js';
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
  // The channel's name is one folder below dataDir: "." or ".." would make the sweep (step 2)
  // remove input/data or input/ (issue 43). sluice run refuses them when it reads the
  // channels; this is the same rule for every other caller.
  const nameProblem = channelNameProblem(o.channel);
  if (nameProblem !== undefined) throw new ConfigError(`File-mode channel ${JSON.stringify(o.channel)}: ${nameProblem}`, { hint: 'Rename the channel, e.g. "train"' });
  const dir = path.join(o.dataDir, o.channel);
  // 1. Check every key before writing anything.
  const folders = new Set<string>();
  const files: { obj: DownloadObject; file: string }[] = [];
  const seen = new Map<string, string>();
  const markers: [string, string][] = []; // [folder, key]
  for (const obj of o.objects) {
    const t = safeTarget(dir, obj.key, obj.rel);
    if (!t) continue;
    if ('folder' in t) { folders.add(t.folder); markers.push([t.folder, obj.key]); continue; }
    const other = seen.get(t.file);
    if (other !== undefined) throw new UnsafeKeyError(obj.key, `it would write the same file as ${JSON.stringify(other)}`);
    seen.set(t.file, obj.key);
    files.push({ obj, file: t.file });
  }
  // A key that is a file where another needs a folder ("a" beside "a/b", or the marker "a/"):
  // refused here, naming both, before any byte is written (issue 43: it failed at the
  // rename, leaving "a.sluice-part").
  const root = path.resolve(dir);
  const folderFor = new Map<string, string>(); // a folder some key needs -> that key
  const need = (p: string, key: string) => {
    for (let d = p; d.length > root.length && !folderFor.has(d); d = path.dirname(d)) folderFor.set(d, key);
  };
  for (const f of files) need(path.dirname(f.file), f.obj.key);
  for (const [folder, key] of markers) need(folder, key);
  for (const f of files) {
    const other = folderFor.get(f.file);
    if (other !== undefined) throw new UnsafeKeyError(f.obj.key, `it would be a file where ${JSON.stringify(other)} needs a folder of that name`);
  }
  // 2. Remove what is not this run's. A dead FUSE mount in the folder (a killed `sluice
  // mount` of an earlier FastFile run) fails every access with ENOTCONN: one line naming it.
  let removed: number;
  try {
    removed = await sweepChannel(dir, new Set(files.map((f) => f.file)), folders, o.dataDir);
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
 *
 * INVARIANT (issue 43, defence in depth behind the channel-name check): `dir` resolves to
 * a folder strictly inside `within` (the data folder), and nothing outside `dir` is ever
 * removed: every path removed is checked to lie strictly inside it, else nothing more is
 * removed and the sweep throws.
 */
export async function sweepChannel(dir: string, files: ReadonlySet<string>, folders: ReadonlySet<string>, within: string): Promise<number> {
  const root = path.resolve(dir);
  const outer = path.resolve(within);
  if (!strictlyInside(root, outer)) {
    throw new ConfigError(`File mode will not sweep ${root}: a channel folder must lie inside ${outer}`, { hint: 'Name the channel with A-Z a-z 0-9 . - _, not "." or ".."' });
  }
  const remove = async (p: string): Promise<void> => {
    if (!strictlyInside(p, root)) throw new ConfigError(`File mode will not remove ${p}: it is not inside the channel folder ${root}`, { hint: 'Report this as a bug' });
    await rm(p, { recursive: true, force: true });
  };
  const keepDirs = new Set<string>();
  for (const p of [...files].map((f) => path.dirname(f)).concat([...folders])) {
    for (let d = p; d.length > root.length && !keepDirs.has(d); d = path.dirname(d)) keepDirs.add(d);
  }
  const top = await lstat(root).catch((err: NodeJS.ErrnoException) => { if (err.code === 'ENOENT') return undefined; throw err; });
  if (top === undefined) return 0;
  if (!top.isDirectory()) {
    await rm(root, { force: true }); // a file or a symlink (never followed): the channel's own name
    return 1;
  }
  let removed = 0;
  const walk = async (d: string): Promise<void> => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory() && keepDirs.has(p)) {
        await walk(p);
      } else if (!(e.isFile() && files.has(p))) {
        await remove(p);
        removed++;
      }
    }
  };
  await walk(root);
  return removed;
}

/** True when `p` (resolved) lies below `dir` (resolved), and is not `dir` itself. */
function strictlyInside(p: string, dir: string): boolean {
  const rel = path.relative(dir, path.resolve(p));
  return rel !== '' && rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel);
}

function conflict(key: string, err: unknown): Error {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ENOTDIR' || code === 'EISDIR' || code === 'EEXIST') return new UnsafeKeyError(key, 'its path conflicts with another object (a file where a folder is needed, or the reverse)');
  return err as Error;
}

/**
 * Fetch and write parts under the connection and in-flight byte bounds.
 *
 * A part holds a connection only while its GET runs, and its bytes (its slab) from the GET's
 * start until they are all in the file: the connection takes the next part while the last
 * pieces of this one are still being written, and --max-inflight bounds GETs and pending
 * writes together. Pieces go to the file as they land (PieceWriter), so when a GET ends at
 * most about WRITE_PIECE of it is left to write.
 */
async function runParts(parts: Part[], o: FileModeOptions, signal: AbortSignal, progress: Progress, finish: (j: Job) => Promise<void>): Promise<void> {
  // Part buffers in use are bounded by the in-flight budget (plus the one part that may exceed it).
  // Slabs mapped up front (../native/addon.ts): see step 5 above.
  const pool = slabPool(o.maxInflight + o.partSize, o.partSize);
  // Parts held: every connection's, and a few whose last piece is still being written. More
  // would only touch more fresh memory (a fault per 4 KiB): the disk is not what waits.
  const budget = Math.min(o.maxInflight, (o.maxConnections + WRITE_SLACK_PARTS) * o.partSize);
  let next = 0;
  /** GETs running: at most maxConnections. */
  let gets = 0;
  /** Parts started and not yet written: their bytes are what --max-inflight bounds. */
  let active = 0;
  let held = 0;
  let failure: unknown;
  await new Promise<void>((resolve) => {
    const pump = () => {
      while (failure === undefined && !signal.aborted && next < parts.length && gets < o.maxConnections) {
        const p = parts[next]!;
        const len = p.end - p.start;
        if (held > 0 && held + len > budget) break;
        next++;
        gets++;
        active++;
        held += len;
        let getDone = false;
        const onGetDone = () => { if (!getDone) { getDone = true; gets--; pump(); } };
        let released = false;
        const release = () => { if (!released) { released = true; held -= len; pump(); } };
        runPart(p, onGetDone, release).then(
          () => { onGetDone(); release(); active--; pump(); },
          (err) => { onGetDone(); release(); active--; failure ??= err; pump(); },
        );
      }
      if (active === 0 && (next >= parts.length || failure !== undefined || signal.aborted)) resolve();
    };
    pump();
  });
  // Every part has settled, so every slab is idle: their pages go back now, while the script runs,
  // rather than when V8 collects the pool (../memory/slab-arena.ts).
  pool.clear();
  if (failure !== undefined) throw failure;
  if (signal.aborted) throw new AbortedError('File mode download aborted');

  async function runPart(p: Part, onGetDone: () => void, release: () => void): Promise<void> {
    const { job } = p;
    const len = p.end - p.start;
    // Whole parts land in a recycled slab (straight from the socket, src/s3/wire.ts) and go
    // to the file with pwritev from it, piece by piece as they land; tails and small files get
    // a buffer of their own, written when complete.
    const slab = pool.acquire(len);
    const t0 = performance.now();
    let writer: PieceWriter | undefined;
    try {
      if (slab) writer = new PieceWriter(() => (job.fd ??= open(job.temp, 'w')), slab.buf, p.start);
      let buf: Buffer;
      try {
        buf = await job.obj.client.getRange(job.obj.key, p.start, p.end, job.obj.etag, { signal, ...(writer ? { into: writer.buf, onFilled: writer.onFilled } : {}) });
      } finally {
        onGetDone();
      }
      const t1 = performance.now();
      if (writer && buf === writer.buf) {
        await writer.finish(len);
      } else {
        job.fd ??= open(job.temp, 'w');
        await writeAllAt(await job.fd, [buf], buf.length, p.start);
      }
      if (log.isLevelEnabled('debug')) log.debug({ channel: o.channel, key: job.obj.key, start: p.start, bytes: len, getMs: Math.round(t1 - t0), writeMs: Math.round(performance.now() - t1), gets }, 'File mode: part written');
    } finally {
      // Nothing may write from the slab once it is given back: wait for a piece still being written.
      if (writer) await writer.idle();
      slab?.unref(); // getRange has settled and the writes are done: nothing touches the slab any more
      release();
    }
    return partDone(p);
  }

  async function partDone(p: Part): Promise<void> {
    const len = p.end - p.start;
    servedBytes.inc({ channel: o.channel, mode: 'File' }, len);
    markFirstByte(o.channel, 'File');
    progress.bytes(len);
    if (--p.job.partsLeft === 0) await finish(p.job);
  }
}

/** 2: parts beyond one per connection that may wait for their last piece's write. */
const WRITE_SLACK_PARTS = 2;

/**
 * 1 MiB: the bytes of a part written with one pwritev as they land. A piece costs one
 * thread-pool hop and a syscall (~10-20 us) against ~100-300 us of copying 1 MiB into the
 * page cache, and trails the socket by about 12 ms at 80 MB/s (one S3 stream), so a GET's
 * end leaves at most 1 MiB to write instead of its whole part.
 */
const WRITE_PIECE = 1024 * 1024;

/**
 * Writes a part's slab to the file as its bytes land (RangeOptions.onFilled): one write at a
 * time, in order, each of everything landed since the last one once that is WRITE_PIECE or
 * more; finish() writes the rest. A landed byte is final (a retried attempt goes on from
 * where the last one stopped), so a piece written is never written again.
 */
class PieceWriter {
  private written = 0;
  private filled = 0;
  private writing: Promise<void> | undefined;
  private error: unknown;
  /** finish() drives the last pieces (the GET has ended). */
  private finishing = false;

  constructor(private readonly fd: () => Promise<FileHandle>, readonly buf: Buffer, private readonly pos: number) {}

  readonly onFilled = (filled: number): void => {
    this.filled = filled;
    if (this.writing === undefined && this.error === undefined && filled - this.written >= WRITE_PIECE) this.kick();
  };

  /** The whole part (`total` bytes) has landed: write what is left. */
  async finish(total: number): Promise<void> {
    this.finishing = true;
    this.filled = total;
    while (this.error === undefined && (this.writing !== undefined || this.written < total)) {
      if (this.writing === undefined) this.kick();
      await this.writing;
    }
    if (this.error !== undefined) throw this.error;
  }

  /** Settles when no write is running (the slab may then be reused). */
  async idle(): Promise<void> {
    while (this.writing !== undefined) await this.writing;
  }

  private kick(): void {
    const from = this.written;
    const to = this.filled;
    this.writing = (async () => {
      try {
        await writeAllAt(await this.fd(), [this.buf.subarray(from, to)], to - from, this.pos + from);
        this.written = to;
      } catch (err) {
        this.error ??= err;
      } finally {
        this.writing = undefined;
      }
      // More landed meanwhile: go on while the GET runs (finish() drives the last pieces itself).
      if (this.error === undefined && !this.finishing && this.filled - this.written >= WRITE_PIECE) this.kick();
    })();
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
