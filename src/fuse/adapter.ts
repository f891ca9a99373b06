/**
 * The thin FUSE glue: each kernel operation becomes one FsCore call, then a reply.
 *
 * For every operation the adapter
 *  1. calls the core (sync for what is held in memory: metadata, open and release once
 *     listed, reads of cached blocks; a promise for what the core must still fetch),
 *  2. answers fuse-native with 0 / a value, or with the negative errno that
 *     errnoFor() (src/errors.ts, the only error->errno mapping) gives for the error,
 *  3. records sluice_fuse_operations_total{op,result}, sluice_fuse_operation_seconds{op}
 *     and, for reads, sluice_fuse_read_size_bytes.
 *  4. at --log-level trace only, writes one line per operation (traceOp: op, path, errno,
 *     latency; offset and size of reads). Operations answered in C (native.ts MemReads,
 *     MemAttrs) are not seen one by one: they are counted, and traced as one line per handle
 *     or batch when counted (traceInC).
 * Every write-like operation is answered by core.refuse(op), i.e. EROFS. The mount is
 * also mounted `ro`, so the kernel refuses most of them before they get here; these
 * handlers are the second line. No S3, cache or prefetch logic lives here.
 *
 * Deadlines: fuse-native answers the kernel on its own (ETIMEDOUT) when an operation
 * takes longer than its `timeout`. kernel-mount.ts sets that timeout from
 * deadline.ts so that it is always longer than the core's own worst case: a read
 * fails with the core's error (EIO after the S3 retries are exhausted), never on
 * fuse-native's timer. Reads are the exception: they bypass fuse-native's wrapper
 * (native.ts) and get the same timeout from ReadDeadlines (deadline.ts), one coarse
 * sweep per mount instead of a timer per read.
 *
 * The read path is the one hot path here (one call per 128 KiB; 8,192 per GB): a read
 * the cache answers at once costs the core's copy, two clock reads and the metric
 * updates, and no closure, promise, timer or array. Label objects are built once.
 * Measured (daemon CPU s/GB and MB/s, medians of 2, 256 MiB, `dd bs=1M`, load 6-9, before
 * = fuse-native's wrapper with a timer per read, after = the direct read path):
 *    from the block cache, page cache dropped ("cached"): 4.51 (160) -> 3.20 (212)
 *    fresh daemon, from S3 (s3rver, no latency):           6.07 (113) -> 4.99 (121)
 *    warm daemon, from S3:                                  2.78 (153) -> 2.22 (192)
 *    node scripts/bulk-receive-bench.mjs --rounds 2 --size 256 --no-pipe before=OLD/dist after=dist
 * The metric updates were not batched: in a CPU profile prom-client's observe/inc is about
 * 1% of busy time; most of what is left per read is the two thread hand-offs (libfuse
 * worker -> uv_async -> main thread -> semaphore -> worker) and GC, not this file.
 *
 * Against the binding's floor (a one-off script, retired: fuse-native serving one Buffer with
 * this mount's options and sluice's direct read handler, same dd and page drop; load 1.7-5):
 *    floor, `dd bs=1M` to /dev/null:            0.48-0.75 CPU s/GB,  900-1150 MB/s
 *    floor, `dd bs=1M | sha256sum`:             0.63-1.15 CPU s/GB,  166-215 MB/s
 *    sluice from its block cache, to /dev/null: 1.15-1.27 CPU s/GB,  930-996 MB/s (0 GETs)
 * The kernel sends both the same requests (128 KiB each, 2,048 per 256 MiB). So the "cached"
 * row of bulk-receive-bench.mjs (212 MB/s) is paced by its reader's sha256sum, not by sluice:
 * the floor gets no more through the same pipe. A slow reader also raises CPU per GB on both
 * sides: each read then wakes the main thread on its own (futex, epoll, a context switch;
 * `perf` puts the paravirt irq-enable of those switches at about a quarter of the daemon's
 * samples), where a fast reader's reads share wake-ups. In a `perf record` of sluice's cached
 * read the JavaScript of adapter, core, read cursor and block cache together is a few percent
 * (prom-client's histogram observe about 1.4%, the block cache's key strings about 1%); the
 * 128 KiB copy (memmove, about 11%) is the floor's too. What sluice adds over the floor per
 * read is roughly 0.5 CPU s/GB (about 60 us per 128 KiB read at 8,192 reads per GB).
 *
 * Since then most of a sequential reader's reads are answered in C from lent blocks, and
 * those that still come here (reads that waited for their GET) are answered with a view of
 * the cache's buffer when C invited it (native.ts ReadViews): the core copies nothing, the
 * reply is written to the kernel from the block itself, and the block's pins are released
 * once C reports it sent. That copy was 12% of a 4-reader daemon's samples; without it user
 * CPU per GB halved (BENCHMARKS.md "t11-views").
 */
import { Errno, errnoFor, SluiceError, TimeoutError } from '../errors.js';
import { log, logOn } from '../log.js';
import { releaseView, type Attr, type CatalogView, type DirEntries, type FsCore, type ReadView } from '../fs/types.js';
import { fuseMemoryGetattrs, fuseMemoryOpens, fuseMemoryReads, fuseOps, fusePassthroughCheckedAhead, fusePassthroughChecksAhead, fusePassthroughOpens, fuseOpSeconds, fuseReadBytes, fuseViewReplies } from '../metrics/metrics.js';
import { ReadDeadlines, type Epoch, type PendingRead } from './deadline.js';
import type { LendCounts, MemReads, NativeOps, NativeStat, ReadReply, ReadViews, TierOpens } from './native.js';

/** access(2) mode bit for write permission. */
const W_OK = 2;

/**
 * st_blksize reported for files. Buffered readers (Python's open(), C stdio) size their
 * buffer from it; 128 KiB is the largest read the kernel sends a libfuse2 filesystem in
 * one request, so one buffered read is one FUSE request instead of thirty-two 4 KiB ones.
 * (With --fuse-max-read above 128 KiB the kernel's readahead makes the larger requests
 * whatever the reader's buffer: native/src/fuse_init.c.)
 */
const BLKSIZE = 128 * 1024;

/** Write-like operations: all answered with EROFS through core.refuse(). */
export const WRITE_OPS = [
  'write', 'create', 'unlink', 'rename', 'mkdir', 'rmdir', 'truncate', 'ftruncate', 'chmod', 'chown',
  'utimens', 'symlink', 'link', 'setxattr', 'removexattr', 'mknod',
] as const;

const ERRNO_NAMES = new Map<number, string>(Object.entries(Errno).map(([name, n]) => [n, name]));

/** The metrics label for a result: 'ok' or the errno name (bounded: a known name or 'errno_<n>'). */
export function resultLabel(code: number): string {
  if (code >= 0) return 'ok';
  return ERRNO_NAMES.get(-code) ?? `errno_${-code}`;
}

export interface AdapterHooks {
  /** Called for failures that are not the caller's fault (EIO and the like), for logging. */
  onUnexpectedError?: (op: string, path: string, err: unknown) => void;
  /** The read deadline (deadline.ts); without one, a read waits for the core however long it takes. */
  readDeadlines?: ReadDeadlines;
  /** The mount's C-side reads from memory (native.ts MemReads), once mounted; undefined: every read comes here. */
  memReads?: () => MemReads | undefined;
}

/**
 * The smallest read answered with a view of the cache's buffer instead of a copy (native.ts
 * ReadViews): 32 KiB. A view costs three N-API calls, a malloc and free in C and a Map entry
 * per read, whatever its size, while the copy it saves grows with the read: views are for the
 * 128 KiB to 1 MiB reads of a sequential reader (where the copy was 12% of a 4-reader daemon's
 * CPU, BENCHMARKS.md "t11-views"); small files and 4 KiB random reads are copied as before.
 */
const VIEW_MIN_BYTES = 32 * 1024;

/** Answers a read with its view (code to reply), or copies the view into buf when C refuses it. */
function viewCode(views: ReadViews, buf: Buffer, view: ReadView, n: number): number {
  const code = views.reply(buf, view);
  if (code !== undefined) {
    fuseViewReplies.inc();
    return code;
  }
  view.bytes!.copy(buf, 0, 0, n);
  releaseView(view);
  return n;
}

const RELEASE_LABELS = { op: 'release' } as const;
const RELEASE_OK_LABELS = { op: 'release', result: 'ok' } as const;

/** Counts `n` operations answered in C (native/src/fuse_memread.c) as operations answered at once (0 s). */
function countAnsweredInC(labels: { op: string }, okLabels: { op: string; result: string }, n: number): void {
  if (n <= 0) return;
  fuseOps.inc(okLabels, n);
  for (let i = 0; i < n; i++) fuseOpSeconds.observe(labels, 0);
}

/**
 * One trace line per FUSE operation answered here (issue 45): op, path, errno (absent when it
 * succeeded), ms, and for reads fh, offset and size (what the kernel asked; `bytes` is what
 * was answered). Callers check logOn.trace first, so at info no line is built.
 */
function traceOp(op: string, path: string, code: number, seconds: number, extra?: { fh?: unknown; offset?: number; size?: number }): void {
  const line: Record<string, unknown> = { component: 'fuse', op, path, ms: Math.round(seconds * 1e4) / 10 };
  if (extra) Object.assign(line, extra);
  if (code < 0) line.errno = resultLabel(code);
  else if (op === 'read') line.bytes = code;
  log.trace(line, 'fuse op');
}

/**
 * Reads (and opens, releases, getattrs) answered in C are not seen one by one: at trace, one
 * line per handle (or per batch) says how many C answered and how many bytes, when they are
 * counted (a handle's release, the mount's catch-up tick).
 */
function traceInC(what: Record<string, unknown>): void {
  log.trace({ component: 'fuse', answeredIn: 'C', ...what }, 'fuse ops answered in C');
}

/** Counts `reads` reads answered in C, with the `asked` bytes the kernel asked for spread evenly over them. */
function countReadsInC(reads: number, asked: number): void {
  if (reads <= 0) return;
  countAnsweredInC(READ_LABELS, READ_OK_LABELS, reads);
  fuseMemoryReads.inc(reads);
  for (let i = 0; i < reads; i++) fuseReadBytes.observe(asked / reads);
}

/**
 * Reads answered in C (native/src/fuse_memread.c) are counted here once their handle's
 * entry leaves the C table: as reads answered at once (0 s), with the size the kernel asked
 * for spread evenly over them, and as served bytes of the handle (core.servedElsewhere).
 */
function countMemReads(core: FsCore, fh: number, reads: number, served: number, asked: number, end?: number): void {
  if (reads <= 0) return;
  countReadsInC(reads, asked);
  if (logOn.trace) traceInC({ op: 'read', fh, reads, bytes: served });
  core.servedElsewhere?.(fh, reads, served, end);
}

/**
 * A function that takes the handles the kernel released in C since its last call
 * (native.ts MemReads.drain): counts their reads and their release (answered at once),
 * and releases them in the core, which gives their buffers back. At 'tick' (the mount's
 * periodic catch-up) it also counts the reads lends answered so far (MemReads.countLends); at
 * 'unmount' it removes and counts the entries still open, whose handles the core keeps until
 * their release or its close, and ends every lend. Build one per mount (its callbacks are
 * made once).
 */
export function memReadDrainer(core: FsCore, onError?: (fh: number, err: unknown) => void): (mem: MemReads, at?: 'open' | 'tick' | 'unmount') => void {
  const released = (fh: number, reads: number, served: number, asked: number): void => {
    countMemReads(core, fh, reads, served, asked);
    countAnsweredInC(RELEASE_LABELS, RELEASE_OK_LABELS, 1);
    try {
      const r = core.release(fh);
      if (r instanceof Promise) r.catch((err: unknown) => onError?.(fh, err));
    } catch (err) {
      onError?.(fh, err);
    }
  };
  const open = (fh: number, reads: number, served: number, asked: number): void => countMemReads(core, fh, reads, served, asked);
  const lent = lendCounter(core);
  return (mem, at = 'open') => {
    mem.drain(released);
    mem.views?.drain();
    if (at === 'tick') mem.countLends(lent);
    if (at !== 'unmount') return;
    mem.clear(open);
    mem.takeLends(lent);
  };
}

/** Counts the reads a lend answered in C (native.ts MemReads.takeLend), and moves the handle's cursor to where they reached. */
function lendCounter(core: FsCore): LendCounts {
  return (fh, reads, served, asked, end) => countMemReads(core, fh, reads, served, asked, end);
}

/**
 * The fixed view as the rows native.ts MemAttrs.install() takes: every path (the root
 * included) with the mode, nlink, size and mtime its getattr answers, in the exact form
 * toNativeStat() gives fuse-native (so C answers what JavaScript would). Undefined when a
 * path's answer does not fit the table's form (a uid or gid that differs between paths,
 * an mtime before 1970): then getattr stays in JavaScript. Walks the folders from the
 * root, yielding to the event loop every ATTR_ROWS_PER_TURN paths.
 */
export interface ListedAttrs {
  paths: Buffer;
  rows: Float64Array;
  uid: number;
  gid: number;
  blksize: number;
  count: number;
  /** With a core that has tierOpens: the C side's TierOpens (names: 32 bytes per row, zero for none). */
  tier?: TierOpens;
}

/** Paths walked per event-loop turn while building ListedAttrs: ~5 ms of work, so reads are not held up. */
const ATTR_ROWS_PER_TURN = 8192;

export async function listedAttrs(core: FsCore, nameMax?: number): Promise<ListedAttrs | undefined> {
  // Both grow by doubling: a million paths cost their final size (about 100 MB) and not the
  // several times more that arrays of strings and numbers would hold at the peak.
  let rows = new Float64Array(5 * 1024);
  let paths = Buffer.allocUnsafe(64 * 1024);
  let count = 0;
  let at = 0;
  let uid = -1;
  let gid = -1;
  const tier = core.tierOpens;
  let names = tier ? Buffer.alloc(32 * 1024) : undefined;
  const add = (p: string, a: Attr): boolean => {
    const st = toNativeStat(a);
    const mtime = st.mtime.getTime();
    if (uid === -1) { uid = st.uid; gid = st.gid; }
    if (st.uid !== uid || st.gid !== gid || !(mtime >= 0) || !Number.isInteger(st.size) || st.size < 0) return false;
    const len = Buffer.byteLength(p);
    if (at + len > paths.length) {
      const more = Buffer.allocUnsafe(Math.max(2 * paths.length, at + len));
      paths.copy(more, 0, 0, at);
      paths = more;
    }
    paths.write(p, at);
    at += len;
    if (5 * (count + 1) > rows.length) {
      const more = new Float64Array(2 * rows.length);
      more.set(rows);
      rows = more;
    }
    if (names && tier) {
      if (32 * (count + 1) > names.length) {
        const more = Buffer.alloc(2 * names.length);
        names.copy(more);
        names = more;
      }
      const name = (a.mode & S_IFMT) === S_IFREG ? tier.nameOf(p, nameMax, count) : undefined;
      // A name that is not 64 hex digits would be written short: such a row keeps its zeros (opened in JavaScript).
      if (name !== undefined && /^[0-9a-f]{64}$/.test(name)) names.write(name, 32 * count, 32, 'hex');
    }
    const r = 5 * count++;
    rows[r] = len;
    rows[r + 1] = st.mode;
    rows[r + 2] = st.nlink || 1;
    rows[r + 3] = st.size;
    rows[r + 4] = mtime;
    return true;
  };
  if (!add('/', await core.getattr('/'))) return undefined;
  const dirs = ['/'];
  let turn = 0;
  while (dirs.length > 0) {
    const dir = dirs.pop()!;
    for (const name of await core.readdir(dir)) {
      const p = childPath(dir, name);
      const a = await core.getattr(p);
      if (!add(p, a)) return undefined;
      if ((a.mode & S_IFMT) === S_IFDIR) dirs.push(p);
      if (++turn % ATTR_ROWS_PER_TURN === 0) await new Promise<void>((r) => setImmediate(r));
    }
  }
  return {
    paths: paths.subarray(0, at), rows: rows.subarray(0, 5 * count), uid, gid, blksize: BLKSIZE, count,
    ...(tier && names ? { tier: { objectsDir: tier.objectsDir, blockSize: tier.blockSize, names: names.subarray(0, 32 * count) } } : {}),
  };
}

/**
 * The fixed view as MemAttrs.installCatalog() takes it (issue 46): the core's catalog columns,
 * shared with C, not copied: no path string, no getattr and no byte per path in JavaScript. With
 * a core that has tierOpens, also the 32-byte cache file name of each file (row = file index),
 * made by walking the files, yielding to the event loop every ATTR_ROWS_PER_TURN. Undefined when
 * the core has no catalog (then listedAttrs()), or when the attributes do not fit the table
 * (an mtime before 1970: getattr stays in JavaScript, as with listedAttrs()).
 */
export interface CatalogAttrs {
  view: CatalogView;
  blksize: number;
  tier?: TierOpens;
}

export async function catalogAttrs(core: FsCore, nameMax?: number): Promise<CatalogAttrs | undefined> {
  const view = core.catalogView?.();
  if (!view || !(view.dirMtimeMs >= 0)) return undefined;
  const tier = core.tierOpens;
  if (!tier?.nameOfFile) return tier ? undefined : { view, blksize: BLKSIZE };
  const names = Buffer.alloc(32 * view.fileCount);
  for (let f = 0; f < view.fileCount; f++) {
    const name = tier.nameOfFile(f, nameMax);
    // A name that is not 64 hex digits would be written short: such a row keeps its zeros (opened in JavaScript).
    if (name !== undefined && /^[0-9a-f]{64}$/.test(name)) names.write(name, 32 * f, 32, 'hex');
    if ((f + 1) % ATTR_ROWS_PER_TURN === 0) await new Promise<void>((r) => setImmediate(r));
  }
  return { view, blksize: BLKSIZE, tier: { objectsDir: tier.objectsDir, blockSize: tier.blockSize, names } };
}

/** Counts `n` getattrs answered in C from the listing (native.ts MemAttrs) as getattrs answered at once. */
export function countMemGetattrs(n: number): void {
  if (n <= 0) return;
  if (logOn.trace) traceInC({ op: 'getattr', count: n });
  countAnsweredInC(GETATTR_LABELS, GETATTR_OK_LABELS, n);
  fuseMemoryGetattrs.inc(n);
}

/** Length of the counts countMemOpens reads, in C's order (OWN_COUNTS in native/src/memread.h, which refuses a shorter array). */
export const MEM_OPEN_COUNTS = 13;

/**
 * Counts handles opened, read and released in C from the disk tier (native.ts MemAttrs.takeOpens)
 * as the JavaScript path counts them: each open, read and release answered at once. `c`: of
 * handles read into memory and released, opens, reads, bytes served, bytes asked, bytes read
 * from disk, handles that served a byte; then passthrough opens, passthrough releases, and
 * the bytes and files read from disk to verify passthrough files, the passthrough opens that
 * used a check made ahead (fuse_open.c "Checked ahead"), the checks ahead started, and the
 * bytes of the passthrough handles released. A passthrough handle's reads never reach sluice:
 * at its release its file counts as delivered, and its whole size as served (issue 45: the
 * kernel tells nothing of how much it read; docs/METRICS.md).
 */
export function countMemOpens(core: FsCore, c: Float64Array): void {
  const [opens = 0, reads = 0, served = 0, asked = 0, diskBytes = 0, delivered = 0, ptOpens = 0, ptReleases = 0, ptDiskBytes = 0, ptDiskFiles = 0, ptAhead = 0, ptAheadStarted = 0, ptBytes = 0] = c;
  fusePassthroughChecksAhead.inc(ptAheadStarted);
  if (opens + ptOpens + ptReleases <= 0) return;
  if (logOn.trace) traceInC({ op: 'open', opens, reads, bytes: served, passthroughOpens: ptOpens, passthroughReleases: ptReleases, passthroughBytes: ptBytes });
  fuseMemoryOpens.inc(opens);
  fusePassthroughOpens.inc(ptOpens);
  fusePassthroughCheckedAhead.inc(ptAhead);
  // A handle read into memory is counted once released: its open and its release together.
  countAnsweredInC(OPEN_LABELS, OPEN_OK_LABELS, opens + ptOpens);
  countAnsweredInC(RELEASE_LABELS, RELEASE_OK_LABELS, opens + ptReleases);
  countReadsInC(reads, asked);
  core.openedElsewhere?.(reads, served + ptBytes, diskBytes + ptDiskBytes, delivered + ptReleases, opens + ptDiskFiles);
}

const OPEN_LABELS = { op: 'open' } as const;
const OPEN_OK_LABELS = { op: 'open', result: 'ok' } as const;
const GETATTR_LABELS = { op: 'getattr' } as const;
const GETATTR_OK_LABELS = { op: 'getattr', result: 'ok' } as const;
/** st_mode's file type bits, and a folder's. */
const S_IFMT = 0o170000;
const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;

/** Metric labels of the read path, built once (prom-client takes label objects). */
const READ_LABELS = { op: 'read' } as const;
const READ_OK_LABELS = { op: 'read', result: 'ok' } as const;

/** A read waiting for the core (a cache miss): what its answer, or its deadline, needs. */
class WaitingRead implements PendingRead {
  constructor(
    readonly epoch: Epoch,
    readonly path: string,
    readonly fd: number,
    readonly len: number,
    readonly pos: number,
    readonly startedMs: number,
    readonly reply: ReadReply,
    readonly token: unknown,
    readonly buf: Buffer,
    private readonly onExpire: (r: WaitingRead) => void,
  ) {}

  expire(): void {
    this.onExpire(this);
  }
}

/** Metric labels per operation, built once (prom-client takes label objects; most operations succeed). */
const OP_LABELS = new Map<string, { op: { op: string }; ok: { op: string; result: 'ok' } }>();
function opLabels(op: string): { op: { op: string }; ok: { op: string; result: 'ok' } } {
  let l = OP_LABELS.get(op);
  if (!l) {
    l = { op: { op }, ok: { op, result: 'ok' } };
    OP_LABELS.set(op, l);
  }
  return l;
}

/** Errors a caller provokes on purpose (missing path, write on a read-only mount, ...): not worth a log line. */
const EXPECTED = new Set<number>([Errno.ENOENT, Errno.EROFS, Errno.ENOTDIR, Errno.EISDIR, Errno.EBADF, Errno.EINVAL]);

export function toNativeStat(a: Attr): NativeStat {
  return {
    mode: a.mode, size: a.size, uid: a.uid, gid: a.gid, nlink: a.nlink,
    mtime: a.mtime, atime: a.mtime, ctime: a.mtime,
    blksize: BLKSIZE,
    blocks: Math.ceil(a.size / 512),
  };
}

function childPath(dir: string, name: string): string {
  return dir === '/' ? `/${name}` : `${dir}/${name}`;
}

/** f(v), for a value or a promise of one (sync stays sync: no promise for in-memory answers). */
function then<T, U>(v: T | Promise<T>, f: (v: T) => U): U | Promise<U> {
  return v instanceof Promise ? v.then(f) : f(v);
}

/** The entries of a readdir reply: ".", ".." and every name, each with its attributes. */
function listing(core: FsCore, path: string, names: string[]): { names: string[]; stats: NativeStat[] } | Promise<{ names: string[]; stats: NativeStat[] }> {
  const paths = [path, path === '/' ? '/' : path.slice(0, path.lastIndexOf('/')) || '/', ...names.map((n) => childPath(path, n))];
  const attrs = paths.map((p) => core.getattr(p));
  const done = (all: Attr[]) => ({ names: ['.', '..', ...names], stats: all.map(toNativeStat) });
  return attrs.some((a) => a instanceof Promise) ? Promise.all(attrs).then(done) : done(attrs as Attr[]);
}

/**
 * A readdir reply from the core's own entries (issue 46), for folders of millions of files:
 * one pass over the names, no path built and no getattr per entry. libfuse 2's readdir (no
 * readdirplus) takes only st_mode (for d_type) from each entry's stat (and st_ino only with
 * use_ino, which we do not set), so every file shares one stat and every folder another, taken
 * from the first entry of each kind; "." and ".." share the folder's own. fuse-native still
 * wants all names at once (it fills libfuse's buffer with offset 0 and libfuse keeps the
 * folder for that open handle), so one names array is built per readdir call.
 */
function entriesListing(core: FsCore, path: string, e: DirEntries): { names: string[]; stats: NativeStat[] } | Promise<{ names: string[]; stats: NativeStat[] }> {
  const n = e.length;
  let firstFile = -1;
  let firstDir = -1;
  for (let i = 0; i < n && (firstFile < 0 || firstDir < 0); i++) {
    if (e.isDir(i)) { if (firstDir < 0) firstDir = i; } else if (firstFile < 0) firstFile = i;
  }
  const asked = [core.getattr(path), firstFile >= 0 ? core.getattr(childPath(path, e.name(firstFile))) : undefined, firstDir >= 0 ? core.getattr(childPath(path, e.name(firstDir))) : undefined];
  const done = ([self, file, dir]: (Attr | undefined)[]) => {
    const selfStat = toNativeStat(self!);
    const fileStat = file ? toNativeStat(file) : selfStat;
    const dirStat = dir ? toNativeStat(dir) : selfStat;
    const names = new Array<string>(n + 2);
    const stats = new Array<NativeStat>(n + 2);
    names[0] = '.';
    names[1] = '..';
    stats[0] = stats[1] = selfStat;
    for (let i = 0; i < n; i++) {
      const dir = e.isDir(i);
      names[i + 2] = e.name(i);
      stats[i + 2] = dir ? dirStat : fileStat;
    }
    return { names, stats };
  };
  return asked.some((a) => a instanceof Promise) ? Promise.all(asked).then(done) : done(asked as (Attr | undefined)[]);
}

/** The fuse-native operations object for `core`. */
export function fuseOpsFor(core: FsCore, hooks: AdapterHooks = {}): NativeOps {
  /**
   * Runs `work` for `op`, replies through `reply`, records the metrics. `work` may
   * throw, return a value or return a promise; `value` maps the result to the
   * reply's code (0 by default; a read's byte count).
   */
  function handle<T>(
    op: string,
    path: string,
    work: () => T | Promise<T>,
    reply: (code: number, value?: T) => void,
    code: (v: T) => number = () => 0,
  ): void {
    const started = performance.now();
    let result: T | Promise<T>;
    try {
      result = work();
    } catch (err) {
      failed(op, path, err, started, reply);
      return;
    }
    // In-memory answers (getattr, open and release once listed) reply here: no closure, no promise.
    if (result instanceof Promise) result.then((v) => answered(op, path, code(v), started, reply, v), (err: unknown) => failed(op, path, err, started, reply));
    else answered(op, path, code(result), started, reply, result);
  }
  /** Replies `c` (and `v`) to an operation on `path` that started at `started`, and records it. */
  function answered<T>(op: string, path: string, c: number, started: number, reply: (code: number, value?: T) => void, v?: T): void {
    const l = opLabels(op);
    const seconds = (performance.now() - started) / 1000;
    fuseOpSeconds.observe(l.op, seconds);
    fuseOps.inc(c >= 0 ? l.ok : { op, result: resultLabel(c) });
    if (logOn.trace) traceOp(op, path, c, seconds, op === 'open' && c >= 0 ? { fh: v } : undefined);
    reply(c, v);
  }
  function failed<T>(op: string, path: string, err: unknown, started: number, reply: (code: number, value?: T) => void): void {
    const errno = errnoFor(err);
    if (!EXPECTED.has(errno) || !(err instanceof SluiceError)) hooks.onUnexpectedError?.(op, path, err);
    answered(op, path, -errno, started, reply);
  }

  const deadlines = hooks.readDeadlines;
  const drainMem = memReadDrainer(core, (fh, err) => hooks.onUnexpectedError?.('release', `fh ${fh}`, err));
  const countRemoved = (fh: number, reads: number, served: number, asked: number): void => countMemReads(core, fh, reads, served, asked);
  const countLent = lendCounter(core);
  const lendable = core.lend !== undefined;
  /**
   * Lends handle `fd`'s resident blocks to C for its next reads (FsCore.lend), when the core
   * has any to lend. Not when fd holds one already (another of its reads, answered first, lent
   * again): the cursor keeps track of its last lend only, which must be the one C answers from.
   */
  function lendAgain(mem: MemReads, fd: number): void {
    if (mem.holds(fd)) return;
    const lease = core.lend!(fd);
    if (lease && !mem.lend(fd, lease)) lease.release();
  }

  /**
   * Answers a read (bytes read, or a negative errno) and records it; with `view` set (ReadView),
   * from the view's bytes. `path`, `fd`, `len` and `pos` are for the trace line only.
   */
  function readAnswered(code: number, startedMs: number, reply: ReadReply, token: unknown, buf: Buffer, path: string, fd: number, len: number, pos: number, views?: ReadViews, view?: ReadView): void {
    const seconds = (performance.now() - startedMs) / 1000;
    fuseOpSeconds.observe(READ_LABELS, seconds);
    if (code >= 0) fuseOps.inc(READ_OK_LABELS);
    else fuseOps.inc({ op: 'read', result: resultLabel(code) });
    if (logOn.trace) traceOp('read', path, code, seconds, { fh: fd, offset: pos, size: len });
    reply(views && view?.bytes ? viewCode(views, buf, view, code) : code, token, buf);
  }
  function readFailed(path: string, fd: number, len: number, pos: number, err: unknown, startedMs: number, reply: ReadReply, token: unknown, buf: Buffer): void {
    const errno = errnoFor(err);
    if (!EXPECTED.has(errno) || !(err instanceof SluiceError)) hooks.onUnexpectedError?.('read', path, err);
    readAnswered(-errno, startedMs, reply, token, buf, path, fd, len, pos);
  }
  /** The deadline passed before the core answered: ETIMEDOUT through errnoFor, like any other failure. */
  function expired(w: WaitingRead): void {
    const err = new TimeoutError(`read of ${w.path} not answered within ${deadlines!.timeoutMs / 1000} s`);
    readFailed(w.path, w.fd, w.len, w.pos, err, w.startedMs, w.reply, w.token, w.buf);
  }

  const ops: NativeOps = {
    getattr(path, cb) {
      handle('getattr', path, () => then(core.getattr(path), toNativeStat), (c, st) => cb(c, st));
    },
    access(path, mode, cb) {
      handle('access', path, () => then(core.getattr(path), () => {
        if (mode & W_OK) core.refuse('access for writing');
      }), (c) => cb(c));
    },
    statfs(path, cb) {
      handle('statfs', path, () => core.statfs(), (c, s) => cb(c, s));
    },
    opendir(path, _flags, cb) {
      handle('opendir', path, () => then(core.readdir(path), () => 0), (c, fh) => cb(c, fh));
    },
    releasedir(path, _fd, cb) {
      handle('releasedir', path, () => undefined, (c) => cb(c));
    },
    readdir(path, cb) {
      handle('readdir', path, () => {
        if (core.readdirEntries) {
          const e = core.readdirEntries(path);
          return e instanceof Promise ? e.then((x) => entriesListing(core, path, x)) : entriesListing(core, path, e);
        }
        const names = core.readdir(path);
        return names instanceof Promise ? names.then((n) => listing(core, path, n)) : listing(core, path, names);
      }, (c, r) => cb(c, r?.names, r?.stats));
    },
    open(path, flags, cb) {
      // The core refuses write flags (EROFS) itself.
      const mem = hooks.memReads?.();
      if (!mem) {
        handle('open', path, () => core.open(path, flags), (c, fh) => cb(c, fh));
        return;
      }
      // Handles the kernel released in C are taken here (and once a second, kernel-mount.ts);
      // a handle whose bytes the core holds is answered in C from now on, before the kernel learns its fh.
      drainMem(mem);
      handle('open', path, () => then(core.open(path, flags), (fh) => {
        const bytes = core.heldBytes?.(fh);
        if (bytes) mem.add(fh, bytes);
        return fh;
      }), (c, fh) => cb(c, fh));
    },
    read(path, fd, buf, len, pos, reply, token) {
      fuseReadBytes.observe(len);
      const started = performance.now();
      const epoch = deadlines?.epoch();
      // A read past the handle's lend (native.ts MemReads.lend): the lend ends first, so the
      // core's cursor knows how far C's reads got; once answered, the handle may lend again.
      const memReads = hooks.memReads?.();
      const mem = lendable && memReads?.lends ? memReads : undefined;
      mem?.takeLend(fd, countLent);
      // A read C invited to be answered from the cache's buffer (native.ts ReadViews): the core
      // then leaves buf alone when the bytes lie in one buffer, and hands that buffer over.
      const views = memReads?.views;
      views?.drain();
      const view: ReadView | undefined = views && len >= VIEW_MIN_BYTES && views.invited(buf) ? {} : undefined;
      let r: number | Promise<number>;
      try {
        r = core.read(fd, buf, len, pos, epoch?.opts, view);
      } catch (err) {
        readFailed(path, fd, len, pos, err, started, reply, token, buf);
        return;
      }
      if (typeof r === 'number') {
        readAnswered(r, started, reply, token, buf, path, fd, len, pos, views, view);
        if (mem) lendAgain(mem, fd);
        return;
      }
      if (!deadlines || !epoch) {
        r.then((n) => {
          readAnswered(n, started, reply, token, buf, path, fd, len, pos, views, view);
          if (mem) lendAgain(mem, fd);
        }, (err: unknown) => readFailed(path, fd, len, pos, err, started, reply, token, buf));
        return;
      }
      // The core's answer is dropped when the deadline answered first (settled() is false).
      const w = new WaitingRead(epoch, path, fd, len, pos, started, reply, token, buf, expired);
      deadlines.wait(w);
      r.then((n) => {
        if (!deadlines.settled(w)) {
          releaseView(view); // the read was answered without it
          return;
        }
        readAnswered(n, started, reply, token, buf, path, fd, len, pos, views, view);
        if (mem) lendAgain(mem, fd);
      }, (err: unknown) => {
        if (deadlines.settled(w)) readFailed(path, fd, len, pos, err, started, reply, token, buf);
      });
    },
    release(path, fd, cb) {
      // A handle still in the C table (its release came here: the C queue was full): out of it, then counted, before the core gives its buffer back.
      // A lent handle's lend ends here too (the kernel sends RELEASE once no read of it is in flight).
      handle('release', path, () => {
        const mem = hooks.memReads?.();
        if (mem) {
          mem.remove(fd, countRemoved);
          if (lendable) mem.takeLend(fd, countLent);
        }
        return core.release(fd);
      }, (c) => cb(c));
    },
    fsync(path, _datasync, _fd, cb) {
      // Nothing is ever dirty on a read-only mount: fsync succeeds, as on any read-only file.
      handle('fsync', path, () => undefined, (c) => cb(c));
    },
  };
  for (const op of WRITE_OPS) {
    ops[op] = (...args: unknown[]) => {
      const cb = args[args.length - 1] as (code: number) => void;
      handle(op, String(args[0]), () => core.refuse(op), (c) => cb(c));
    };
  }
  return ops;
}
