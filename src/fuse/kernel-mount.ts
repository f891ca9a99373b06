/**
 * Mounting an FsCore through the kernel, and unmounting it.
 *
 * mountCore() checks the host (checkFuseAvailable), loads fuse-native, mounts with the
 * options below, waits for the kernel's INIT, then stats the mount point through the
 * kernel and checks it is a new filesystem (its device differs from the parent's) before
 * resolving: "mounted" means "answers". Then it raises the mount's readahead (readahead.ts).
 *
 * Mount options, and why:
 *  - ro: the view is read-only; the kernel refuses writes before they reach us.
 *  - fsname=sluice, subtype=sluice: the mount shows as "sluice ... fuse.sluice" in /proc/mounts.
 *  - attr_timeout, entry_timeout, negative_timeout = --attr-timeout: the listing is taken
 *    once and never changes during the mount, so the kernel may cache lookups for as long
 *    as it likes; each cached lookup saves a round trip to this process.
 *  - kernel_cache (FOPEN_KEEP_CACHE), no direct_io: pages read once stay in the page cache
 *    across close/open, so a second epoch over a dataset that fits in RAM never leaves the
 *    kernel. Safe because a file's bytes are pinned to the listed ETag for the mount's life.
 *    With --direct-io our addon answers every OPEN with FOPEN_DIRECT_IO instead (no page
 *    cache; native/src/fuse_init.c "Direct I/O"), for jobs that read a dataset once.
 *  - allow_other or allow_root only when asked (--allow-other, --allow-root).
 *  - default_permissions: the kernel checks the owner and modes the mount shows
 *    (--uid, --gid, --file-mode, --dir-mode) itself, as for a local disk; without it a
 *    user let in by allow_other could read whatever the modes say.
 *  - fuse-native's per-operation timeout from deadline.ts (see there); reads get the same
 *    timeout from one ReadDeadlines per mount (they bypass fuse-native's wrapper, native.ts).
 * A "/dev/fd/N" mount point (mountpoint.ts fuseFdOf) is served from that descriptor: the
 * mount exists already, with the options its maker chose, so none of the mount options
 * above apply except the libfuse ones (timeouts, kernel_cache); there is no folder to stat
 * and no readahead to set (its bdi is unknown), and unmount() only stops serving: the
 * maker unmounts.
 * The prepare step (prepareMountpoint) is the caller's, so that user errors surface
 * before slow work such as listing the bucket.
 *
 * A mount removed from outside (`fusermount -u`, `umount -l`) is noticed by polling
 * /proc/self/mountinfo for the mount's device (`gone` resolves): nothing in fuse-native
 * reports the end of its FUSE session. unmount() then still releases fuse-native's hold
 * on the event loop, which fuse-native itself skips when its `fusermount -uz` fails, so
 * the process can exit (s3fs and mount-s3 exit when their mount goes away).
 */
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { FuseUnavailableError, MountpointError } from '../errors.js';
import type { FsCore } from '../fs/types.js';
import { log } from '../log.js';
import { catalogAttrs, countMemGetattrs, countMemOpens, fuseOpsFor, listedAttrs, MEM_OPEN_COUNTS, memReadDrainer } from './adapter.js';
import { ReadDeadlines } from './deadline.js';
import { detachMount, checkFuseAvailable, checkFuseFdMount, fuseFdOf, readMounts } from './mountpoint.js';
import { fuseDirectIoAvailable, LIBFUSE2_MAX_READ, loadFuse, negotiatedFuseDirectIoMmap, negotiatedFuseMaxRead, negotiatedFusePassthrough, requestFuseDirectIo, requestFuseMaxRead, requestFusePassthrough, type MemAttrs, type MemReads, type NativeFuse } from './native.js';
import { setReadaheadKb } from './readahead.js';

export interface KernelMountOptions {
  allowOther: boolean;
  /** FUSE allow_root: root may use the mount too (exclusive with allowOther). */
  allowRoot?: boolean;
  /** Seconds the kernel may cache attributes, lookups and failed lookups. */
  attrTimeoutSec: number;
  /** The mount's read_ahead_kb; 0 leaves the kernel's default (128). */
  readaheadKb: number;
  /** fuse-native per-operation timeout, ms (fuseTimeoutMs() in deadline.ts). */
  fuseTimeoutMs: number;
  /** Largest read to ask the kernel for, bytes (native.ts requestFuseMaxRead); default DEFAULT_FUSE_MAX_READ. */
  fuseMaxRead?: number;
  /** --direct-io: every OPEN is answered with FOPEN_DIRECT_IO (native.ts requestFuseDirectIo). */
  directIo?: boolean;
  /** libfuse debug output on stderr. */
  debug?: boolean;
}

export interface KernelMount {
  readonly mountpoint: string;
  /** The readahead in effect (KiB), or undefined when it could not be read. */
  readonly readaheadKb: number | undefined;
  /** Reads bypass fuse-native's JavaScript wrapper (native.ts); false on an unchecked fuse-native version. */
  readonly directRead: boolean;
  /** getattr, open and release bypass fuse-native's JavaScript wrapper (native.ts); false on an unchecked fuse-native version. */
  readonly directMeta: boolean;
  /** Reads of a small file held in memory are answered in libfuse's thread (native.ts MemReads). */
  readonly memReads: boolean;
  /** Settles true once getattr of listed paths is answered in libfuse's thread (native.ts MemAttrs), false when it never will be. */
  readonly attrTable: Promise<boolean>;
  /** The largest read the kernel sends this mount, bytes (128 KiB unless the INIT reply raised it). */
  readonly maxRead: number;
  /** The INIT reply asked for FUSE passthrough (the kernel offered it): small files of the disk tier may be passed through (native/src/fuse_open.c). */
  readonly passthrough: boolean;
  /** Files are opened without the page cache (--direct-io). */
  readonly directIo: boolean;
  /** With directIo: the kernel allows mmap of those files (FUSE_DIRECT_IO_ALLOW_MMAP). */
  readonly directIoMmap: boolean;
  /**
   * Takes now what libfuse's thread answered without JavaScript (reads and releases of held
   * files, reads from lent blocks, getattrs, opens from the disk tier) into the core and the metrics, which is
   * otherwise done once every MEM_DRAIN_MS and at unmount (tests, bench).
   */
  takeCounts(): void;
  /** Resolves when the mount has disappeared without unmount() (removed from outside). */
  readonly gone: Promise<void>;
  /** Unmounts (lazily if busy). Idempotent. */
  unmount(): Promise<void>;
}

/**
 * How often the mount table is read to notice a mount removed from outside. One read of
 * /proc/self/mountinfo (a few KiB) a second costs nothing measurable, and bounds the time
 * a pod waits for sluice after its mount went away to about a second, far inside
 * Kubernetes' 30 s grace period. SLUICE_MOUNT_WATCH_MS overrides it (0: no watch); it is
 * a test hook, so that a test can check the SIGTERM path on its own.
 */
const MOUNT_WATCH_MS = 1000;

function mountWatchMs(): number {
  const v = process.env.SLUICE_MOUNT_WATCH_MS;
  return v !== undefined && /^\d+$/.test(v) ? Number(v) : MOUNT_WATCH_MS;
}

/** st_dev as mountinfo's "major:minor" (glibc's gnu_dev_major/gnu_dev_minor). */
export function devString(dev: number): string {
  const d = BigInt(dev);
  const major = ((d >> 8n) & 0xfffn) | ((d >> 32n) & ~0xfffn);
  const minor = (d & 0xffn) | ((d >> 12n) & ~0xffn);
  return `${major}:${minor}`;
}

/** Whether a filesystem with device `dev` is still mounted at `mnt`. */
async function stillMounted(mnt: string, dev: string): Promise<boolean> {
  return (await readMounts()).some((m) => m.mountpoint === mnt && m.dev === dev);
}

/**
 * Reads of up to 1 MiB (256 pages, the kernel's fuse_max_pages_limit default): 8 times
 * fewer FUSE requests than libfuse 2's 128 KiB, each a libfuse worker -> main thread ->
 * worker hand-off (BENCHMARKS.md, t11-ffcpu); 1 MiB is also the mount's default readahead
 * and what a data loader's buffered reader asks for.
 */
export const DEFAULT_FUSE_MAX_READ = 1024 * 1024;

/** How long to wait for the kernel's INIT after mount(2): generous for a loaded 2-core box. */
const INIT_TIMEOUT_MS = 30_000;
/**
 * How often handles the kernel released in C (native/src/fuse_memread.c) are taken when no
 * open takes them first: their metrics (served bytes, files) and the core's open-handle
 * count lag by at most this; each take is one cheap call into the addon.
 */
const MEM_DRAIN_MS = 1000;

/**
 * Largest file of the disk tier passed through (native/src/fuse_open.c "Passthrough"):
 * 256 MiB. The whole file is read and checked before its OPEN is answered; at the 2-4 GB/s
 * a check runs from the page cache or NVMe here that adds up to about 0.1 s before the
 * first byte, where a bigger file would wait longer than its reader gains. Larger files are
 * read through sluice, window by window (src/cache/tier-readers.ts WholeReader).
 */
const PASSTHROUGH_MAX_BYTES = 256 * 1024 * 1024;

const flog = log.child({ component: 'fuse' });

/**
 * Failed operations logged per window: enough to see what is failing, while a reader
 * retrying against an S3 outage (thousands of EIO a second) cannot flood the log.
 * sluice_fuse_operations_total counts every one of them regardless.
 */
const ERROR_LOG_BURST = 10;
const ERROR_LOG_WINDOW_MS = 10_000;

/** Logs failed FUSE operations, at most ERROR_LOG_BURST per window, then how many were suppressed. */
function errorLogger(): (op: string, path: string, err: unknown) => void {
  let windowStart = 0;
  let logged = 0;
  let suppressed = 0;
  return (op, p, err) => {
    const now = Date.now();
    if (now - windowStart >= ERROR_LOG_WINDOW_MS) {
      if (suppressed > 0) flog.warn({ suppressed }, 'more FUSE operations failed (not logged one by one)');
      windowStart = now;
      logged = 0;
      suppressed = 0;
    }
    if (logged++ < ERROR_LOG_BURST) {
      flog.warn({ op, path: p, err: err instanceof Error ? err.message : String(err), code: (err as { code?: unknown }).code }, 'FUSE operation failed');
    } else {
      suppressed++;
    }
  };
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new FuseUnavailableError(`${what} did not complete within ${ms / 1000} s`, { hint: 'Check dmesg for FUSE errors' })), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

/**
 * Once `listed` settles, hands the view to C (native.ts MemAttrs) if the mount still wants
 * it (`table()` is undefined once unmounting): a core with a catalog hands over its columns,
 * read in place (adapter.ts catalogAttrs; issue 46), any other every path (listedAttrs). A
 * failed listing, or a view the table cannot hold, leaves getattr in JavaScript.
 */
function installListedAttrs(core: FsCore, listed: Promise<void>, table: () => MemAttrs | undefined): Promise<boolean> {
  // SLUICE_NO_C_OPEN=1 (a test hook, docs/CONFIGURATION.md): small files are opened in JavaScript, their reads still answered in C.
  const cOpen = process.env.SLUICE_NO_C_OPEN !== '1';
  const installed = async (): Promise<boolean> => {
    await listed;
    if (!table()) return false;
    // Files larger than a block are named (opened in C) only where they can be passed through (known once the INIT reply went out).
    const nameMax = negotiatedFusePassthrough() ? PASSTHROUGH_MAX_BYTES : undefined;
    const cat = await catalogAttrs(core, nameMax);
    let t = table();
    if (cat && t) {
      const tier = cOpen ? cat.tier : undefined;
      if (t.installCatalog(cat.view, cat.blksize, tier)) {
        if (tier) core.setTierHot?.((row) => void t!.markHot(row));
        flog.debug({ files: cat.view.fileCount, tierOpens: tier !== undefined }, 'listing handed to C for getattr (catalog columns)');
        return true;
      }
    }
    const rows = await listedAttrs(core, nameMax);
    t = table();
    if (!rows || !t) return false;
    const tier = cOpen ? rows.tier : undefined;
    const ok = t.install(rows.paths, rows.rows, rows.uid, rows.gid, rows.blksize, tier);
    if (ok && tier) core.setTierHot?.((row) => void t!.markHot(row));
    flog.debug({ paths: rows.count, ok, tierOpens: tier !== undefined }, 'listing handed to C for getattr');
    return ok;
  };
  return installed().catch(() => false);
}

/** Mounts `core` at `mountpoint` (which prepareMountpoint() has checked) and resolves once the mount answers. */
export async function mountCore(core: FsCore, mountpoint: string, opts: KernelMountOptions): Promise<KernelMount> {
  const mnt = path.resolve(mountpoint);
  const fd = fuseFdOf(mnt);
  if (fd === undefined) checkFuseAvailable();
  else checkFuseFdMount(fd);
  const fromFd = fd !== undefined;
  const Fuse = loadFuse({ fromFd });
  if (opts.directIo && !fuseDirectIoAvailable()) throw new FuseUnavailableError('--direct-io needs sluice\'s native addon, which is not built', { hint: 'Build it (npm run build:native), or mount without --direct-io' });
  const readDeadlines = new ReadDeadlines(opts.fuseTimeoutMs);
  // Reads answered in C from memory (native.ts MemReads), set once mounted and unset at unmount.
  let mem: MemReads | undefined;
  let memTimer: NodeJS.Timeout | undefined;
  const drainMem = memReadDrainer(core, (fh, err) => flog.warn({ fh, err: err instanceof Error ? err.message : String(err) }, 'releasing a handle released in C failed'));
  // getattr answered in C from the listing (native.ts MemAttrs), installed once listed.
  let attrTable: MemAttrs | undefined;
  // Counts of handles opened in C from the disk tier (MemAttrs.takeOpens), taken with the getattrs.
  const openCounts = new Float64Array(MEM_OPEN_COUNTS);
  /** Stops answering reads (and getattrs) in C: what the kernel released is released in the core, what is open goes back to the JavaScript read path. */
  const stopMemReads = (): void => {
    if (memTimer) clearInterval(memTimer);
    const m = mem;
    mem = undefined;
    if (m) drainMem(m, 'unmount');
    const a = attrTable;
    attrTable = undefined;
    if (a) {
      core.setTierHot?.(undefined);
      countMemGetattrs(a.take(true));
      a.takeOpens(openCounts);
      countMemOpens(core, openCounts);
    }
  };
  const fuse: NativeFuse = new Fuse(mnt, fuseOpsFor(core, { onUnexpectedError: errorLogger(), readDeadlines, memReads: () => mem }), {
    timeout: opts.fuseTimeoutMs,
    // Mount options: for a descriptor mount its maker chose them (libfuse would reject them here).
    fsname: fromFd ? '' : 'sluice',
    subtype: fromFd ? '' : 'sluice',
    allowOther: fromFd ? false : opts.allowOther,
    allowRoot: fromFd ? false : opts.allowRoot ?? false,
    defaultPermissions: !fromFd,
    fromFd,
    kernelCache: true,
    attrTimeout: opts.attrTimeoutSec,
    entryTimeout: opts.attrTimeoutSec,
    negativeTimeout: opts.attrTimeoutSec,
    readOnly: true,
    debug: opts.debug ?? false,
  });

  const parentDev = fromFd ? undefined : (await stat(path.dirname(mnt))).dev;
  // Set right before fuse.mount(), which calls fuse_mount() synchronously: one value per mount.
  const sized = requestFuseMaxRead(opts.fuseMaxRead ?? DEFAULT_FUSE_MAX_READ);
  const passthroughAsked = requestFusePassthrough(true);
  // Always set (also to false): the addon keeps the last value for the next mount.
  const directIo = requestFuseDirectIo(opts.directIo ?? false) && (opts.directIo ?? false);
  await withTimeout(new Promise<void>((resolve, reject) => {
    fuse.mount((err) => {
      if (!err) return resolve();
      const msg = err.message;
      if (/in use/i.test(msg)) reject(new MountpointError(`mount point ${mnt} is already in use`, { hint: `Unmount it first: fusermount -u ${mnt}` }));
      else if (/does not exist|not a directory/i.test(msg)) reject(new MountpointError(`mount point ${mnt}: ${msg}`, { hint: 'Choose an existing empty folder' }));
      else reject(new FuseUnavailableError(`FUSE mount of ${mnt} failed (${msg})`, { hint: 'Run as root, or in a container with --device /dev/fuse --cap-add SYS_ADMIN' }));
    });
  }), INIT_TIMEOUT_MS, `mounting ${mnt}`);
  mem = fuse.memReads();
  attrTable = fuse.memAttrs();
  const takeCounts = (): void => {
    if (mem) drainMem(mem, 'tick');
    if (attrTable) {
      countMemGetattrs(attrTable.take());
      attrTable.takeOpens(openCounts);
      countMemOpens(core, openCounts);
    }
  };
  if (mem) {
    memTimer = setInterval(takeCounts, MEM_DRAIN_MS);
    memTimer.unref();
  }
  const attrTableIn = attrTable && core.listed ? installListedAttrs(core, core.listed, () => attrTable) : Promise.resolve(false);
  // fuse.mount() calls back from libfuse's init, before the INIT reply is written: what
  // the reply said is read once the mount has answered a request (the stat below).
  let maxRead = LIBFUSE2_MAX_READ;
  let passthrough = false;
  let directIoMmap = false;

  let dev: string | undefined;
  let watch: NodeJS.Timeout | undefined;
  let unmounted: Promise<void> | undefined;
  const unmount = (): Promise<void> => {
    if (watch) clearInterval(watch);
    readDeadlines.stop();
    stopMemReads();
    unmounted ??= new Promise<void>((resolve) => {
      fuse.unmount((err) => {
        if (!err) return resolve();
        void (async () => {
          // fuse-native's `fusermount -uz` failed: most often the mount was removed from
          // outside. Detach what is still there, then release fuse-native's loop handle.
          const there = dev === undefined || await stillMounted(mnt, dev).catch(() => true);
          if (there) {
            flog.warn({ mountpoint: mnt, err: err.message }, 'fuse-native unmount failed; detaching lazily');
            await detachMount(mnt).catch(() => false);
            if (dev !== undefined && await stillMounted(mnt, dev).catch(() => true)) {
              flog.error({ mountpoint: mnt }, 'the mount could not be removed; the next sluice mount at this folder cleans it up');
            }
          }
          fuse.releaseNative();
        })().finally(resolve);
      });
    });
    return unmounted;
  };

  if (fromFd) {
    // The kernel's INIT has been answered (fuse-native calls back on it): the mount answers.
    let stopped = false;
    return {
      mountpoint: mnt,
      readaheadKb: undefined,
      directRead: fuse.directRead,
      directMeta: fuse.directMeta,
      memReads: mem !== undefined,
      attrTable: attrTableIn,
      takeCounts,
      // Nothing here waits for a request through the mount: read on use.
      get maxRead() { return sized ? negotiatedFuseMaxRead() : LIBFUSE2_MAX_READ; },
      get passthrough() { return passthroughAsked && negotiatedFusePassthrough(); },
      directIo,
      get directIoMmap() { return directIo && negotiatedFuseDirectIoMmap(); },
      // Its mount point is unknown here, so its removal is not watched: it never resolves.
      gone: new Promise<void>(() => undefined),
      unmount: async () => {
        if (stopped) return;
        stopped = true;
        readDeadlines.stop();
        stopMemReads();
        await new Promise<void>((resolve) => fuse.unmount(() => resolve()));
      },
    };
  }

  try {
    const st = await withTimeout(stat(mnt), INIT_TIMEOUT_MS, `the first stat of ${mnt}`);
    if (st.dev === parentDev) throw new FuseUnavailableError(`mounting ${mnt} reported success but the folder is not a new filesystem`, { hint: 'Check dmesg for FUSE errors' });
    dev = devString(st.dev);
    if (sized) maxRead = negotiatedFuseMaxRead();
    if (passthroughAsked) passthrough = negotiatedFusePassthrough();
    if (directIo) directIoMmap = negotiatedFuseDirectIoMmap();
  } catch (err) {
    await unmount();
    throw err;
  }

  const gone = new Promise<void>((resolve) => {
    const every = mountWatchMs();
    if (every === 0) return;
    let reading = false;
    watch = setInterval(() => {
      if (reading || unmounted) return;
      reading = true;
      stillMounted(mnt, dev!).then((there) => {
        if (there || unmounted) return;
        clearInterval(watch);
        flog.warn({ mountpoint: mnt }, 'the mount was removed from outside');
        resolve();
      }, () => undefined).finally(() => { reading = false; });
    }, every);
    watch.unref();
  });

  let readaheadKb: number | undefined;
  if (opts.readaheadKb > 0) {
    try {
      const r = await setReadaheadKb(mnt, opts.readaheadKb);
      readaheadKb = r.kb;
      flog.debug({ bdi: r.bdi, from: r.previousKb, to: r.kb }, 'set mount readahead');
    } catch (err) {
      flog.warn({ mountpoint: mnt, readaheadKb: opts.readaheadKb, err: err instanceof Error ? err.message : String(err) },
        'could not set the mount readahead (needs root and a writable /sys); sequential reads may be slower');
    }
  }
  return { mountpoint: mnt, readaheadKb, directRead: fuse.directRead, directMeta: fuse.directMeta, memReads: mem !== undefined, attrTable: attrTableIn, takeCounts, maxRead, passthrough, directIo, directIoMmap, gone, unmount };
}
