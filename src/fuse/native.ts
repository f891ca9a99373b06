/**
 * The typed, lazily loaded face of fuse-native (a CommonJS addon with no types).
 *
 * Loading is deferred until checkFuseAvailable() has passed: `require('fuse-native')`
 * dlopens libfuse.so.2 at once, and a missing library would otherwise surface as a
 * native stack trace. `loadFuse()` returns a subclass that adds the mount options
 * fuse-native has no switch for (`ro`, `negative_timeout`); everything else goes
 * through fuse-native's own option names.
 *
 * Larger reads: libfuse 2 leaves the kernel's reads at 128 KiB; our addon's fuse_mount
 * raises them (up to 1 MiB) in the INIT reply (native/src/fuse_init.c). loadFuse() loads
 * the addon globally whenever it is built, so that fuse-native's fuse_mount is ours;
 * requestFuseMaxRead() sets the size before a mount, negotiatedFuseMaxRead() reads back
 * what the kernel was told.
 *
 * Descriptor mounts ("/dev/fd/N", see native/src/fuse_fd.c): `loadFuse({ fromFd: true })`
 * first loads our addon with RTLD_GLOBAL, so that fuse-native's calls to libfuse's
 * fuse_mount/fuse_unmount reach the addon's versions, which wrap descriptor N instead of
 * mounting. The subclass then skips what fuse-native does around a folder mount point
 * (stat it, fusermount -u it) and passes only libfuse options (no mount options: the
 * mount was made by whoever opened the descriptor).
 *
 * The direct read path. fuse-native wraps every operation in JavaScript (index.js
 * `makeHandler`): per call it binds a signal function, copies the arguments into two
 * arrays, arms a setTimeout for its per-op timeout, and answers through
 * process.nextTick(nativeSignal, ...). For reads (8,192 per GB at libfuse 2's 128 KiB)
 * the subclass installs its own handler in fuse-native's handler table instead: it
 * calls ops.read with the kernel's buffer and one shared reply function, which calls
 * fuse-native's native `fuse_native_signal_read(locals, result, 0, arraybuffer)` (the
 * arguments fuse-native's own wrapper passes) synchronously. That is
 * safe: the native side has read everything it needs from the thread's locals before
 * calling JavaScript, and the FUSE thread it wakes only reuses them for its next request.
 * The read deadline is the adapter's (deadline.ts ReadDeadlines). The handler relies on
 * fuse-native's private layout (handler table `_handlers`, `op_read`, the handler's
 * arguments), so it is installed only for a fuse-native version it was checked against
 * (DIRECT_READ_VERSIONS); any other version keeps fuse-native's own read path and
 * `directRead` is false (test/fuse/kernel-mount.ts checks it is true for ours).
 *
 * Direct metadata replies (getattr, open, release: the round trips a small file costs besides
 * its read). Through fuse-native's wrapper each also costs the bind, two argument arrays, a
 * timer armed and cleared, a process.nextTick and, for getattr, a fresh Uint32Array. On the
 * same checked versions the subclass installs its own handlers for these three: they call
 * ops.getattr/open/release with a callback that answers through fuse-native's native signal
 * (`fuse_native_signal_getattr(locals, result, statInts)`, `_open(locals, result, fh)`,
 * `_release(locals, result)`) at once, synchronously when the core answers synchronously
 * (the listed, in-memory case); getattr's stat goes through one shared Uint32Array, which the
 * signal copies before it returns. An answer that waits for a promise (a lookup before the
 * listing completes) keeps fuse-native's deadline: a timer, armed only then, answers
 * ETIMEDOUT as fuse-native's would. `directMeta` says whether they are installed.
 *
 * Reads answered in C (memReads(), native/src/fuse_memread.c): the addon's fuse_new() puts
 * its own read and release in front of fuse-native's, so that a handle whose verified bytes
 * JavaScript holds (the disk tier's small files) is read and released in libfuse's worker
 * thread, with no hop here; the adapter registers such handles at open and takes their
 * releases later (adapter.ts memReadDrainer). Only on the checked fuse-native versions,
 * only when the addon wrapped this mount, and not with SLUICE_NO_NATIVE set. Under the same
 * conditions getattr of a listed path is answered there too, from a copy of the fixed view
 * (memAttrs(); kernel-mount.ts hands it over once the listing is done).
 *
 * Lent blocks (MemReads.lend, native/src/fuse_lend.c): after the adapter answers a large
 * file's sequential read, the core may lend that handle's resident block cache buffers from
 * its frontier up to where its read cursor must see a read again (core.ts lend); reads inside
 * the lend are then copied in libfuse's worker thread. The first read past it comes here,
 * takes the lend back (its counts and the furthest offset read), is answered, and lends
 * again. A lease is released only after lendTake has returned (then no worker copies from
 * it); at release and at unmount every lend is taken; once a second the counts of lends still
 * held are taken into the metrics (countLends). SLUICE_NO_LEND=1 turns lends off.
 *
 * Views (MemReads.views, native/src/fuse_lend.c "Views"): a read that does come here and
 * whose bytes lie in one cache buffer is not copied into fuse-native's buffer; C replies from
 * the cache buffer itself, which stays pinned until C reports the reply sent.
 * SLUICE_NO_VIEW=1 turns views off.
 */
import { createRequire } from 'node:module';
import { FuseUnavailableError } from '../errors.js';
import { releaseView, type BlockLease, type CatalogView, type ReadView } from '../fs/types.js';
import type { CatalogColumns } from '../fs/catalog.js';
import { fuseNativeBinding, loadAddonGlobal, nativeForcedOff } from '../native/addon.js';

/** A stat as fuse-native encodes it (dates or epoch ms). */
export interface NativeStat {
  mode: number;
  size: number;
  uid: number;
  gid: number;
  nlink: number;
  mtime: Date;
  atime: Date;
  ctime: Date;
  blksize?: number;
  blocks?: number;
}

export interface NativeStatFs {
  bsize: number; frsize: number; blocks: number; bfree: number; bavail: number;
  files: number; ffree: number; favail: number; fsid?: number; flag?: number; namemax: number;
}

/** Answers one read: bytes read (>= 0) or a negative errno; `token` and `buf` as the read op got them. */
export type ReadReply = (bytesOrErrno: number, token: unknown, buf: Buffer) => void;

/** Callback convention of fuse-native: 0 or a negative errno first (read: bytes read, or negative errno). */
export type Cb<T extends unknown[] = []> = (code: number, ...rest: T) => void;

/** The operations we implement (fuse-native calls each only when present). */
export interface NativeOps {
  init?(cb: Cb): void;
  access?(path: string, mode: number, cb: Cb): void;
  statfs?(path: string, cb: Cb<[NativeStatFs?]>): void;
  getattr?(path: string, cb: Cb<[NativeStat?]>): void;
  readdir?(path: string, cb: Cb<[string[]?, NativeStat[]?]>): void;
  open?(path: string, flags: number, cb: Cb<[number?]>): void;
  opendir?(path: string, flags: number, cb: Cb<[number?]>): void;
  /**
   * `reply(bytesOrErrno, token)` answers the kernel, exactly once. On the direct read path
   * (see readDirect below) `reply` is one shared function and `token` names the request;
   * through fuse-native's wrapper, `reply` is its per-request callback and `token` unused.
   */
  read?(path: string, fd: number, buf: Buffer, len: number, pos: number, reply: ReadReply, token?: unknown): void;
  release?(path: string, fd: number, cb: Cb): void;
  releasedir?(path: string, fd: number, cb: Cb): void;
  fsync?(path: string, datasync: number, fd: number, cb: Cb): void;
  [writeLike: string]: ((...args: any[]) => void) | undefined;
}

/** fuse-native constructor options we use (see node_modules/fuse-native/index.js `_fuseOptions`). */
export interface NativeMountOptions {
  /** Per-operation deadline in ms after which fuse-native answers the kernel itself (ETIMEDOUT). */
  timeout: number;
  fsname: string;
  subtype: string;
  allowOther: boolean;
  allowRoot?: boolean;
  /** The kernel checks owner and modes (default_permissions). */
  defaultPermissions?: boolean;
  /** FOPEN_KEEP_CACHE on every open: the page cache survives close/open. */
  kernelCache: boolean;
  /** Seconds (fractional allowed). */
  attrTimeout: number;
  entryTimeout: number;
  debug?: boolean;
  /** Added by our subclass. */
  readOnly: boolean;
  negativeTimeout: number;
  /** Serve the mount behind the mount point "/dev/fd/N" (loadFuse({ fromFd: true }) first). */
  fromFd?: boolean;
}

export interface NativeFuse {
  readonly mnt: string;
  /** Reads bypass fuse-native's JavaScript wrapper (see the top of this file). */
  readonly directRead: boolean;
  /** getattr, open and release bypass fuse-native's JavaScript wrapper (see the top of this file). */
  readonly directMeta: boolean;
  mount(cb: (err: Error | null) => void): void;
  unmount(cb: (err: (Error & { unmountFailure?: boolean }) | null) => void): void;
  /**
   * Reads answered in libfuse's worker thread from bytes in memory (native/src/fuse_memread.c)
   * for this mount, once mounted; undefined when our addon did not wrap the mount (not built,
   * loaded after fuse-native, a fuse-native it was not checked against) or SLUICE_NO_NATIVE is set.
   */
  memReads(): MemReads | undefined;
  /** getattr answered in libfuse's worker thread from the listing (native/src/fuse_attrs.c), where memReads() is; else undefined. */
  memAttrs(): MemAttrs | undefined;
  /**
   * Releases the native mount's hold on the event loop when unmount() failed because the
   * mount was already gone (removed from outside): fuse-native then skips that step, and
   * its libuv handle would keep the process alive forever. Idempotent.
   */
  releaseNative(): void;
}

export type NativeFuseCtor = new (mnt: string, ops: NativeOps, opts: NativeMountOptions) => NativeFuse;

let cached: NativeFuseCtor | undefined;
let fdShim: FuseFdShim | undefined;

/** What our addon offers for descriptor mounts (native/binding.c). */
export interface FuseFdShim {
  /** 0 when `fd` is an open /dev/fuse descriptor, else -EBADF (not open) or -ENODEV (something else). */
  checkFuseFd(fd: number): number;
  /** max_pages the INIT reply of the mounts made from now on asks for (native/src/fuse_init.c); 0: libfuse's reply. */
  setFuseMaxPages?(pages: number): void;
  /** The last INIT reply: max_pages it set (0: left alone, e.g. a kernel before 4.20) and the kernel's protocol minor. */
  fuseInitState?(): { maxPages: number; kernelMinor: number; passthrough?: boolean; directIoMmap?: boolean };
  /** Whether the INIT replies of mounts made from now on ask for FUSE passthrough when the kernel offers it (native/src/fuse_init.c). */
  setFusePassthrough?(on: boolean): void;
  /** Whether mounts made from now on answer every OPEN with FOPEN_DIRECT_IO (native/src/fuse_init.c "Direct I/O"). */
  setFuseDirectIo?(on: boolean): void;
  /** native/src/fuse_memread.c, for the mount whose fuse-native thread buffer is `thread` (see MemReads). */
  memReadAdd?(thread: Buffer, fh: number, bytes: Buffer): boolean;
  memReadRemove?(thread: Buffer, fh: number, counts: Float64Array): boolean;
  memReadDrain?(thread: Buffer, out: Float64Array): number;
  memReadClear?(thread: Buffer, out: Float64Array): number;
  memReadMounted?(thread: Buffer): boolean;
  /** native/src/fuse_lend.c: a sequential handle's reads answered from lent blocks (see MemReads.lend). */
  lendSet?(thread: Buffer, fh: number, start: number, stop: number, size: number, parts: readonly Buffer[]): boolean;
  lendTake?(thread: Buffer, fh: number, out: Float64Array): boolean;
  lendCounts?(thread: Buffer, fh: number, out: Float64Array): boolean;
  /** native/src/fuse_lend.c "Views": a read JavaScript answers replied from the bytes it names (see ReadViews). */
  viewInvited?(buf: Buffer): boolean;
  viewReply?(buf: Buffer, bytes: Buffer, id: number): boolean;
  viewsDone?(out: Float64Array): number;
  viewCode?: number;
  /** How many mounts of this process have a live libfuse struct fuse: an ended mount's is forgotten (fuse_memread.c "Ended mounts"; tests). */
  memReadLiveMounts?(): number;
  /** native/src/fuse_attrs.c: the listing getattr answers from (see MemAttrs). */
  attrTableSet?(thread: Buffer, paths: Buffer, rows: Float64Array, uid: number, gid: number, blksize: number, tierDir?: string, tierBlock?: number, names?: Buffer): boolean;
  attrTableSetCatalog?(thread: Buffer, cat: CatalogColumns & { fileMode: number; dirMode: number; dirSize: number; dirMtimeMs: number }, uid: number, gid: number, blksize: number, tierDir?: string, tierBlock?: number, names?: Buffer): boolean;
  attrTableTake?(thread: Buffer, clear: boolean): number;
  ownOpensTake?(thread: Buffer, out: Float64Array): void;
  tierHotMark?(thread: Buffer, row: number): boolean;
}

/** Counts of one handle's reads answered in C: reads, bytes served, bytes the kernel asked for. */
export type MemReadCounts = (fh: number, reads: number, served: number, asked: number) => void;

/** MemReadCounts of a lend, with the furthest file offset its reads reached (0: none). */
export type LendCounts = (fh: number, reads: number, served: number, asked: number, end: number) => void;

/**
 * Reads answered in libfuse's worker thread from a handle's bytes held in memory, with no
 * hop to JavaScript (native/src/fuse_memread.c, which also answers the handle's RELEASE).
 * The caller keeps `bytes` alive and unchanged until the handle's entry has left the table:
 * reported by drain() (the kernel released it), remove() or clear().
 */
export interface MemReads {
  /** Answer fh's reads from `bytes` (the whole file) from now on; false when refused (the reads go to ops.read). */
  add(fh: number, bytes: Buffer): boolean;
  /** Stops answering fh in C; `each` gets its counts when it had an entry (returns whether it had). */
  remove(fh: number, each: MemReadCounts): boolean;
  /** `each` for every handle the kernel released in C since the last drain (its entry is gone). */
  drain(each: MemReadCounts): void;
  /** Removes every entry left (unmount); `each` gets their counts. */
  clear(each: MemReadCounts): void;
  /**
   * Answer fh's reads inside the lease in C from now on (native/src/fuse_lend.c); false when
   * refused (then the caller still owns the lease). Once accepted, the lease is released by
   * takeLend() or takeLends(), after C has let go of its bytes.
   */
  lend(fh: number, lease: BlockLease): boolean;
  /** Ends fh's lend, if it has one: `each` gets its counts, then its lease is released. */
  takeLend(fh: number, each: LendCounts): void;
  /** takeLend() of every handle that has a lend (unmount). */
  takeLends(each: LendCounts): void;
  /** Whether lend() can accept a lease at all (the addon has lends, and SLUICE_NO_LEND is not set). */
  readonly lends: boolean;
  /** Whether fh has a lend now (lend() would refuse another). */
  holds(fh: number): boolean;
  /** The counts of every lend since it was set or last counted, each lend kept (the metrics' periodic catch-up). */
  countLends(each: LendCounts): void;
  /** Replies from the block cache's buffers to reads answered here (undefined: every read is copied). */
  readonly views?: ReadViews;
}

/**
 * Reads answered in JavaScript without a copy (native/src/fuse_lend.c "Views"): when C invited
 * it (invited(buf), buf being the read's buffer from fuse-native), a read whose bytes lie in one
 * cache buffer is answered by reply(): the code it returns is the read's reply (in place of the
 * byte count), and C replies from view.bytes themselves. The view's pins and bytes are held here
 * until C reports the reply sent, and released by drain() (called at every read answered here,
 * and by the adapter's periodic catch-up), so a buffer is never recycled while the kernel copies
 * from it. SLUICE_NO_VIEW=1 turns views off (C then never invites).
 */
export interface ReadViews {
  invited(buf: Buffer): boolean;
  /** The code to reply for the invited read of `buf` answered with `view` (bytes and pins set), or undefined when refused: then copy view.bytes into buf and release its pins as usual. */
  reply(buf: Buffer, view: ReadView): number | undefined;
  /** Releases the views whose replies C has sent. */
  drain(): void;
  /** Views replied and not yet released (tests: 0 once the mount's reads are over and drained). */
  readonly held: number;
}

/** Views replied and not yet released, in this process (tests: 0 once reads are over and drained). */
export function viewsHeld(): number {
  return viewsOnce ? viewsOnce.held : 0;
}

/** Ids per viewsDone call: one N-API call releases this many views. */
const VIEW_DRAIN_BATCH = 64;

/** The views of this process (C's list of sent replies is process-wide): their holds by id. */
let viewsOnce: ReadViews | null | undefined;
function viewsOf(shim: FuseFdShim | undefined): ReadViews | undefined {
  if (viewsOnce !== undefined) return viewsOnce ?? undefined;
  const { viewInvited, viewReply, viewsDone, viewCode } = shim ?? {};
  if (!viewInvited || !viewReply || !viewsDone || viewCode === undefined) {
    viewsOnce = null;
    return undefined;
  }
  const holds = new Map<number, ReadView>();
  const done = new Float64Array(VIEW_DRAIN_BATCH);
  let next = 1;
  const drain = (): void => {
    for (;;) {
      const n = viewsDone.call(shim, done);
      for (let i = 0; i < n; i++) {
        const id = done[i]!;
        releaseView(holds.get(id));
        holds.delete(id);
      }
      if (n < VIEW_DRAIN_BATCH) return;
    }
  };
  viewsOnce = {
    invited: (buf) => viewInvited.call(shim, buf),
    reply: (buf, view) => {
      // C reports the id sent only after the read has replied the code, so it is held in time.
      const id = next;
      if (!view.bytes || !viewReply.call(shim, buf, view.bytes, id)) return undefined;
      holds.set(id, view);
      next = next === Number.MAX_SAFE_INTEGER ? 1 : next + 1;
      return viewCode;
    },
    drain,
    get held() {
      return holds.size;
    },
  };
  return viewsOnce;
}

/**
 * getattr answered in libfuse's worker thread from a copy of the listing (the view is fixed
 * once listed, src/fs/tree.ts), with no hop to JavaScript: a lookup of a listed path (the
 * kernel's LOOKUP and GETATTR) is a hash-table probe there. Paths not in the table (not
 * listed, or before install) go to JavaScript as before.
 */
export interface MemAttrs {
  /**
   * Installs the listing (see ListedAttrs in adapter.ts): rows of (path bytes, mode, nlink,
   * size, mtime ms), the paths' UTF-8 bytes one after another. False when refused.
   */
  install(paths: Buffer, rows: Float64Array, uid: number, gid: number, blksize: number, tier?: TierOpens): boolean;
  /**
   * Installs the listing as the core's catalog columns, read in place (adapter.ts
   * catalogAttrs; native/src/fuse_attrs.c "Catalog"): rows are file indices. False when
   * refused, or when the addon has no such call (then install()).
   */
  installCatalog(view: CatalogView, blksize: number, tier?: TierOpens): boolean;
  /** getattrs answered from the table since the last take; `clear` also drops the table (unmount). */
  take(clear?: boolean): number;
  /**
   * Handles opened in C from the disk tier (TierOpens) and released since the last take:
   * counts written into `out` (length MEM_OPEN_COUNTS, 13; see adapter.ts countMemOpens).
   */
  takeOpens(out: Float64Array): void;
  /** Marks a row of the installed listing hot: its OPENs go to JavaScript for a while (fuse_open.c "Fetched into memory"). False without such a row. */
  markHot(row: number): boolean;
}

/**
 * Small files opened in libfuse's worker thread (native/src/fuse_open.c "Opens"): for
 * each listed row with a name, the OPEN reads the one-block cache file `names[32 * row ..]`
 * under `objectsDir` and checks it as DiskCache.openSmall does; JavaScript never sees the
 * handle. A name of 32 zero bytes: the file is opened here as usual.
 */
export interface TierOpens {
  objectsDir: string;
  blockSize: number;
  names: Buffer;
}

/** Records per drain call: one N-API call empties a queue of this many releases. */
const MEM_DRAIN_BATCH = 256;

/** MemReads of the mount whose fuse-native thread buffer is `thread` (see MemReads). */
function memReadsOf(shim: Required<Pick<FuseFdShim, 'memReadAdd' | 'memReadRemove' | 'memReadDrain' | 'memReadClear'>> & Pick<FuseFdShim, 'lendSet' | 'lendTake' | 'lendCounts'>, thread: Buffer, views: ReadViews | undefined): MemReads {
  const counts = new Float64Array(3);
  const lendCounts = new Float64Array(4);
  /** Leases C answers reads from, by fh: each is released only after lendTake returned. */
  const leases = new Map<number, BlockLease>();
  const { lendSet, lendTake, lendCounts: lendCountsOf } = shim;
  const takeLend = (fh: number, f: LendCounts): void => {
    const lease = leases.get(fh);
    if (!lease) return;
    leases.delete(fh);
    const had = lendTake!(thread, fh, lendCounts);
    lease.release();
    if (had) f(fh, lendCounts[0]!, lendCounts[1]!, lendCounts[2]!, lendCounts[3]!);
  };
  const out = new Float64Array(4 * MEM_DRAIN_BATCH);
  const each = (take: (thread: Buffer, out: Float64Array) => number, f: MemReadCounts): void => {
    for (;;) {
      const n = take(thread, out);
      for (let i = 0; i < n; i++) f(out[4 * i]!, out[4 * i + 1]!, out[4 * i + 2]!, out[4 * i + 3]!);
      if (n < MEM_DRAIN_BATCH) return;
    }
  };
  return {
    add: (fh, bytes) => shim.memReadAdd(thread, fh, bytes),
    remove: (fh, f) => {
      if (!shim.memReadRemove(thread, fh, counts)) return false;
      f(fh, counts[0]!, counts[1]!, counts[2]!);
      return true;
    },
    drain: (f) => each(shim.memReadDrain, f),
    clear: (f) => {
      each(shim.memReadDrain, f);
      each(shim.memReadClear, f);
    },
    lend: (fh, lease) => {
      if (!lendSet || !lendTake || leases.has(fh) || !lendSet(thread, fh, lease.start, lease.stop, lease.size, lease.parts)) return false;
      leases.set(fh, lease);
      return true;
    },
    takeLend,
    lends: lendSet !== undefined && lendTake !== undefined,
    holds: (fh) => leases.has(fh),
    takeLends: (f) => {
      for (const fh of [...leases.keys()]) takeLend(fh, f);
    },
    countLends: (f) => {
      if (!lendCountsOf) return;
      for (const fh of leases.keys()) {
        if (lendCountsOf(thread, fh, lendCounts)) f(fh, lendCounts[0]!, lendCounts[1]!, lendCounts[2]!, lendCounts[3]!);
      }
    },
    views,
  };
}

/** The kernel's page size for FUSE's max_pages (4 KiB on x86-64 and on arm64's default kernels). */
export const FUSE_PAGE = 4096;

/** libfuse 2's read size without our INIT change: the kernel's default of 32 pages. */
export const LIBFUSE2_MAX_READ = 32 * FUSE_PAGE;

/** Our addon when it is built (loaded into the global scope), else undefined. */
let optionalShim: FuseFdShim | null | undefined;
function tryFuseFdShim(): FuseFdShim | undefined {
  if (optionalShim === undefined) {
    try {
      optionalShim = loadFuseFdShim();
    } catch {
      optionalShim = null;
    }
  }
  return optionalShim ?? undefined;
}

/**
 * Asks the kernel for reads of up to `bytes` (rounded down to whole pages) on the mounts
 * made after this call, through our addon's INIT reply (native/src/fuse_init.c). Returns
 * false when the addon is not built (reads stay at LIBFUSE2_MAX_READ). Call between
 * loadFuse() and the mount.
 */
export function requestFuseMaxRead(bytes: number): boolean {
  const shim = tryFuseFdShim();
  if (!shim?.setFuseMaxPages) return false;
  shim.setFuseMaxPages(bytes > LIBFUSE2_MAX_READ ? Math.floor(bytes / FUSE_PAGE) : 0);
  return true;
}

/**
 * Asks for FUSE passthrough (Linux >= 6.9) in the INIT reply of the mounts made after this
 * call, when the kernel offers it (native/src/fuse_init.c): small files of the disk tier are
 * then read by the kernel from their cache files (native/src/fuse_open.c "Passthrough").
 * SLUICE_NO_PASSTHROUGH=1 turns it off. False when the addon cannot.
 */
export function requestFusePassthrough(on: boolean): boolean {
  const shim = tryFuseFdShim();
  if (!shim?.setFusePassthrough) return false;
  shim.setFusePassthrough(on && process.env.SLUICE_NO_PASSTHROUGH !== '1');
  return true;
}

/** Whether our addon can open a mount's files with FUSE direct I/O (--direct-io). */
export function fuseDirectIoAvailable(): boolean {
  return tryFuseFdShim()?.setFuseDirectIo !== undefined;
}

/**
 * --direct-io: the mounts made after this call answer every OPEN (except passthrough ones)
 * with FOPEN_DIRECT_IO, and allow mmap of those files where the kernel can
 * (native/src/fuse_init.c "Direct I/O"). The addon keeps one value for the next mount, so
 * call it right before mounting. False when the addon cannot (then nothing changes).
 */
export function requestFuseDirectIo(on: boolean): boolean {
  const shim = tryFuseFdShim();
  if (!shim?.setFuseDirectIo) return false;
  shim.setFuseDirectIo(on);
  return true;
}

/** Whether the INIT reply of the mount made last allowed mmap of direct-I/O files (FUSE_DIRECT_IO_ALLOW_MMAP, Linux >= 6.6). */
export function negotiatedFuseDirectIoMmap(): boolean {
  return tryFuseFdShim()?.fuseInitState?.().directIoMmap ?? false;
}

/** How many FUSE mounts of this process are still registered for requests in C (native/src/fuse_memread.c "Ended mounts"); undefined without the addon. */
export function liveFuseMounts(): number | undefined {
  return tryFuseFdShim()?.memReadLiveMounts?.();
}

/** Whether the INIT reply of the mount made last asked for passthrough (the kernel offered it and it was wanted). */
export function negotiatedFusePassthrough(): boolean {
  return tryFuseFdShim()?.fuseInitState?.().passthrough ?? false;
}

/** The largest read the kernel sends the mount made last: what its INIT reply negotiated. */
export function negotiatedFuseMaxRead(): number {
  const pages = tryFuseFdShim()?.fuseInitState?.().maxPages ?? 0;
  return pages > 0 ? pages * FUSE_PAGE : LIBFUSE2_MAX_READ;
}

/**
 * Loads our addon into the global symbol scope (RTLD_GLOBAL; src/native/addon.ts
 * loadAddonGlobal), where its fuse_mount and fuse_unmount take precedence over libfuse's for
 * fuse-native. Must run before fuse-native is loaded. Throws FuseUnavailableError when the
 * addon is missing or old.
 */
export function loadFuseFdShim(): FuseFdShim {
  if (fdShim) return fdShim;
  const fix = 'Build the addon (needs a C compiler, make and python3): npm run build:native';
  const exports = loadAddonGlobal() as Partial<FuseFdShim> | undefined;
  if (exports === undefined) {
    throw new FuseUnavailableError("mounting from a /dev/fd/N descriptor needs sluice's native addon, which is not built", { hint: fix });
  }
  const mod = { exports };
  if (typeof mod.exports.checkFuseFd !== 'function') {
    throw new FuseUnavailableError("sluice's native addon was built before it could mount from a /dev/fd/N descriptor", { hint: fix });
  }
  fdShim = mod.exports as FuseFdShim;
  return fdShim;
}

/**
 * fuse-native versions whose read handler arguments and signal the direct read path was
 * checked against (index.js makeHandler/_op_read, fuse-native.c FUSE_METHOD(read)).
 */
const DIRECT_READ_VERSIONS = new Set(['2.2.6']);

/** fuse-native's own binding (the same module object fuse-native's index.js loads). */
interface FuseBinding {
  sizeof_fuse_thread_t: number;
  op_read: number;
  op_getattr: number;
  op_open: number;
  op_release: number;
  /** Answers getattr: locals, 0 or a negative errno, the stat as fuse-native's 18 uint32s (copied before it returns). */
  fuse_native_signal_getattr(locals: unknown, result: number, stat: Uint32Array): void;
  /** Answers open: locals, 0 or a negative errno, the file handle (0: none). */
  fuse_native_signal_open(locals: unknown, result: number, fh: number): void;
  fuse_native_signal_release(locals: unknown, result: number): void;
  /**
   * Answers a read: the FUSE thread's locals, bytes read or a negative errno, an unused
   * slot, and the read buffer's ArrayBuffer, which it detaches (Node >= 14): a write into
   * the kernel's buffer after the answer then lands nowhere instead of in freed memory.
   */
  fuse_native_signal_read(locals: unknown, result: number, unused: number, buffer: ArrayBufferLike): void;
  fuse_native_mount(mnt: string, opts: string, thread: Buffer, self: unknown, malloc: unknown, handlers: unknown, implemented: Uint32Array): void;
  fuse_native_unmount(mnt: string, thread: Buffer): void;
}

/** fuse-native's private members the descriptor path uses (fuse-native 2.2.x; unmaintained, so stable). */
interface FuseInternals {
  mnt: string;
  opts: NativeMountOptions;
  _thread: Buffer;
  _openCallback: ((err: Error | null) => void) | null;
  _malloc: unknown;
  _handlers: unknown;
  _getImplementedArray(): Uint32Array;
  _fuseOptions(): string;
}

/**
 * Requires fuse-native (call checkFuseAvailable() first) and returns our subclass of it.
 * With `fromFd`, loads the descriptor shim first (see the top of this file).
 */
export function loadFuse(opts: { fromFd?: boolean } = {}): NativeFuseCtor {
  // A folder mount takes the addon when it is built, for larger reads (requestFuseMaxRead).
  if (opts.fromFd) loadFuseFdShim();
  else if (!cached) tryFuseFdShim();
  if (cached) return cached;
  const req = createRequire(import.meta.url);
  const Fuse = req('fuse-native') as new (...a: any[]) => any;
  // fuse-native's own addon: the instance fuse-native uses (src/native/addon.ts).
  const loaded = fuseNativeBinding();
  const binding = loaded.binding as FuseBinding;
  const version = loaded.version;
  const direct = DIRECT_READ_VERSIONS.has(version) && typeof binding.fuse_native_signal_read === 'function' && binding.op_read === 23;
  const directMeta = direct && typeof binding.fuse_native_signal_getattr === 'function' && typeof binding.fuse_native_signal_open === 'function'
    && typeof binding.fuse_native_signal_release === 'function' && binding.op_getattr === 5 && binding.op_open === 21 && binding.op_release === 25;
  /** The one reply function of the direct read path: `token` is the FUSE thread's locals. */
  const replyRead: ReadReply = (result, locals, buf) => binding.fuse_native_signal_read(locals, result, 0, buf.buffer);
  class SluiceFuse extends Fuse {
    private released = false;
    readonly directRead: boolean;
    readonly directMeta: boolean;

    constructor(mnt: string, ops: NativeOps, opts: NativeMountOptions) {
      super(mnt, ops, opts);
      const handlers = (this as unknown as { _handlers: unknown[] })._handlers;
      const read = ops.read;
      this.directRead = direct && read !== undefined && Array.isArray(handlers) && typeof handlers[binding.op_read] === 'function';
      this.directMeta = Array.isArray(handlers) && this.installDirectMeta(handlers, ops, opts.timeout);
      if (!this.directRead) return;
      // Called by fuse-native.c as (locals, opcode, path, fh, buffer, length, offsetLow, offsetHigh).
      handlers[binding.op_read] = (locals: unknown, _op: number, p: string, fh: number, buf: Buffer, len: number, low: number, high: number): void => {
        read!(p, fh, buf, len, high * 4294967296 + low, replyRead, locals);
      };
    }
    /** Installs the direct getattr/open/release handlers (see the top of this file); false when not possible. */
    private installDirectMeta(handlers: unknown[], ops: NativeOps, timeoutMs: number): boolean {
      const { getattr, open, release } = ops;
      if (!directMeta || !getattr || !open || !release) return false;
      if (![binding.op_getattr, binding.op_open, binding.op_release].every((op) => typeof handlers[op] === 'function')) return false;
      // Called by fuse-native.c as (locals, opcode, path[, flags | fh]).
      handlers[binding.op_getattr] = (locals: unknown, _op: number, p: string): void => {
        const once = answerOnce(timeoutMs, (code: number, st?: NativeStat) => {
          binding.fuse_native_signal_getattr(locals, code, code === 0 && st ? statInts(st) : NO_STAT);
        }, () => binding.fuse_native_signal_getattr(locals, ETIMEDOUT_NEG, NO_STAT));
        getattr(p, once.reply);
        once.armIfWaiting();
      };
      handlers[binding.op_open] = (locals: unknown, _op: number, p: string, flags: number): void => {
        const once = answerOnce(timeoutMs, (code: number, fh?: number) => binding.fuse_native_signal_open(locals, code, code === 0 ? fh ?? 0 : 0),
          () => binding.fuse_native_signal_open(locals, ETIMEDOUT_NEG, 0));
        open(p, flags, once.reply);
        once.armIfWaiting();
      };
      handlers[binding.op_release] = (locals: unknown, _op: number, p: string, fh: number): void => {
        const once = answerOnce(timeoutMs, (code: number) => binding.fuse_native_signal_release(locals, code),
          () => binding.fuse_native_signal_release(locals, ETIMEDOUT_NEG));
        release(p, fh, once.reply);
        once.armIfWaiting();
      };
      return true;
    }

    private memReadsOnce: MemReads | null | undefined;
    memReads(): MemReads | undefined {
      if (this.memReadsOnce !== undefined) return this.memReadsOnce ?? undefined;
      const thread = (this as unknown as { _thread: Buffer | null })._thread;
      if (!thread) return undefined; // not mounted (yet)
      const shim = optionalShim ?? fdShim;
      const { memReadAdd, memReadRemove, memReadDrain, memReadClear, memReadMounted, lendSet, lendTake, lendCounts } = shim ?? {};
      // SLUICE_NO_LEND=1 keeps large files' reads in JavaScript (comparisons, and tests of that path).
      const lend = process.env.SLUICE_NO_LEND !== '1' ? { lendSet, lendTake, lendCounts } : {};
      this.memReadsOnce = direct && !nativeForcedOff() && memReadAdd && memReadRemove && memReadDrain && memReadClear && memReadMounted?.(thread)
        ? memReadsOf({ memReadAdd, memReadRemove, memReadDrain, memReadClear, ...lend }, thread, process.env.SLUICE_NO_VIEW !== '1' ? viewsOf(shim) : undefined)
        : null;
      return this.memReadsOnce ?? undefined;
    }

    private memAttrsOnce: MemAttrs | null | undefined;
    memAttrs(): MemAttrs | undefined {
      if (this.memAttrsOnce !== undefined) return this.memAttrsOnce ?? undefined;
      if (!this.memReads()) return undefined; // same conditions: our fuse_new wrapped this mount
      const thread = (this as unknown as { _thread: Buffer })._thread;
      const { attrTableSet, attrTableSetCatalog, attrTableTake, ownOpensTake, tierHotMark } = optionalShim ?? fdShim ?? {};
      this.memAttrsOnce = attrTableSet && attrTableTake
        ? {
          install: (paths, rows, uid, gid, blksize, tier) => (tier && ownOpensTake
            ? attrTableSet(thread, paths, rows, uid, gid, blksize, tier.objectsDir, tier.blockSize, tier.names)
            : attrTableSet(thread, paths, rows, uid, gid, blksize)),
          installCatalog: (view, blksize, tier) => {
            if (!attrTableSetCatalog) return false;
            const cat = { ...view.columns, fileMode: view.fileMode, dirMode: view.dirMode, dirSize: view.dirSize, dirMtimeMs: view.dirMtimeMs };
            return tier && ownOpensTake
              ? attrTableSetCatalog(thread, cat, view.uid, view.gid, blksize, tier.objectsDir, tier.blockSize, tier.names)
              : attrTableSetCatalog(thread, cat, view.uid, view.gid, blksize);
          },
          take: (clear = false) => attrTableTake(thread, clear),
          takeOpens: (out) => (ownOpensTake ? ownOpensTake(thread, out) : out.fill(0)),
          markHot: (row) => (tierHotMark ? tierHotMark(thread, row) : false),
        }
        : null;
      return this.memAttrsOnce ?? undefined;
    }

    releaseNative(): void {
      const self = this as unknown as { mnt: string; _thread: Buffer | null };
      if (this.released || !self._thread) return;
      this.released = true;
      binding.fuse_native_unmount(self.mnt, self._thread);
    }

    /** fuse-native insists on a folder it can stat; a descriptor mount has none here. */
    _open(cb: (err: Error | null) => void): void {
      const self = this as unknown as FuseInternals;
      if (!self.opts.fromFd) return super._open(cb);
      self._thread = Buffer.alloc(binding.sizeof_fuse_thread_t);
      self._openCallback = cb; // called by fuse-native when the kernel's INIT arrives
      try {
        binding.fuse_native_mount(self.mnt, self._fuseOptions(), self._thread, this, self._malloc, self._handlers, self._getImplementedArray());
      } catch (err) {
        self._openCallback = null;
        cb(err as Error);
      }
    }

    /** A descriptor mount is not ours to unmount (no fusermount -u): stop holding the event loop. */
    _close(cb: (err: Error | null) => void): void {
      const self = this as unknown as FuseInternals;
      if (!self.opts.fromFd) return super._close(cb);
      try {
        this.releaseNative();
      } catch (err) {
        return cb(err as Error);
      }
      cb(null);
    }

    _fuseOptions(): string {
      const base: string = super._fuseOptions();
      const o = (this as unknown as { opts: NativeMountOptions }).opts;
      const extra: string[] = [];
      if (o.readOnly && !o.fromFd) extra.push('ro');
      if (o.negativeTimeout > 0) extra.push(`negative_timeout=${o.negativeTimeout}`);
      if (extra.length === 0) return base;
      return base ? `${base},${extra.join(',')}` : `-o${extra.join(',')}`;
    }
  }
  cached = SluiceFuse as unknown as NativeFuseCtor;
  return cached;
}

/** -ETIMEDOUT (Linux), what fuse-native answers an operation that outlived its timeout with. */
const ETIMEDOUT_NEG = -110;
/** The stat sent with a failed getattr (fuse-native sends zeros too). */
const NO_STAT = new Uint32Array(18);
/** One stat buffer for every direct getattr answer: the native signal copies it before returning. */
const STAT_INTS = new Uint32Array(18);

function setDouble(a: Uint32Array, i: number, n: number): void {
  a[i] = n % 4294967296;
  a[i + 1] = (n - a[i]!) / 4294967296;
}

/** `st` in fuse-native's layout (index.js getStatArray): mode, uid, gid, size, dev, nlink, ino, rdev, blksize, blocks, atime, mtime, ctime (ms). */
export function statInts(st: NativeStat, a: Uint32Array = STAT_INTS): Uint32Array {
  a[0] = st.mode;
  a[1] = st.uid;
  a[2] = st.gid;
  setDouble(a, 3, st.size);
  a[5] = 0;
  a[6] = st.nlink || 1;
  a[7] = 0;
  a[8] = 0;
  a[9] = st.blksize ?? 0;
  setDouble(a, 10, st.blocks ?? 0);
  setDouble(a, 12, st.atime.getTime());
  setDouble(a, 14, st.mtime.getTime());
  setDouble(a, 16, st.ctime.getTime());
  return a;
}

/**
 * The callback of one direct metadata operation: answers once, through `answer`; when the
 * operation did not answer synchronously, armIfWaiting() arms the deadline, after which
 * `expire` answers instead (and a late answer is dropped).
 */
function answerOnce<A extends unknown[]>(timeoutMs: number, answer: (code: number, ...v: A) => void, expire: () => void): { reply: (code: number, ...v: A) => void; armIfWaiting(): void } {
  let done = false;
  let timer: NodeJS.Timeout | undefined;
  return {
    reply: (code, ...v) => {
      if (done) return;
      done = true;
      if (timer) clearTimeout(timer);
      answer(code, ...v);
    },
    armIfWaiting: () => {
      if (done || !(timeoutMs > 0)) return;
      timer = setTimeout(() => {
        if (done) return;
        done = true;
        expire();
      }, timeoutMs);
    },
  };
}
