/**
 * The thin FUSE glue: each kernel operation becomes one FsCore call, then a reply.
 *
 * For every operation the adapter
 *  1. calls the core (sync for metadata held in memory, a promise for metadata the core
 *     must still fetch and for open/read/release),
 *  2. answers fuse-native with 0 / a value, or with the negative errno that
 *     errnoFor() (src/errors.ts, the only error->errno mapping) gives for the error,
 *  3. records sluice_fuse_operations_total{op,result}, sluice_fuse_operation_seconds{op}
 *     and, for reads, sluice_fuse_read_size_bytes.
 * Every write-like operation is answered by core.refuse(op), i.e. EROFS. The mount is
 * also mounted `ro`, so the kernel refuses most of them before they get here; these
 * handlers are the second line. No S3, cache or prefetch logic lives here.
 *
 * Deadlines: fuse-native answers the kernel on its own (ETIMEDOUT) when an operation
 * takes longer than its `timeout`. kernel-mount.ts sets that timeout from
 * deadline.ts so that it is always longer than the core's own worst case: a read
 * fails with the core's error (EIO after the S3 retries are exhausted), never on
 * fuse-native's timer.
 */
import { Errno, errnoFor, SluiceError } from '../errors.js';
import type { Attr, FsCore } from '../fs/types.js';
import { fuseOps, fuseOpSeconds, fuseReadBytes } from '../metrics/metrics.js';
import type { NativeOps, NativeStat } from './native.js';

/** access(2) mode bit for write permission. */
const W_OK = 2;

/**
 * st_blksize reported for files. Buffered readers (Python's open(), C stdio) size their
 * buffer from it; 128 KiB is the largest read the kernel sends a libfuse2 filesystem in
 * one request, so one buffered read is one FUSE request instead of thirty-two 4 KiB ones.
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
    const started = process.hrtime.bigint();
    const done = (c: number, v?: T): void => {
      fuseOpSeconds.observe({ op }, Number(process.hrtime.bigint() - started) / 1e9);
      fuseOps.inc({ op, result: resultLabel(c) });
      reply(c, v);
    };
    const fail = (err: unknown): void => {
      const errno = errnoFor(err);
      if (!EXPECTED.has(errno) || !(err instanceof SluiceError)) hooks.onUnexpectedError?.(op, path, err);
      done(-errno);
    };
    let result: T | Promise<T>;
    try {
      result = work();
    } catch (err) {
      fail(err);
      return;
    }
    if (result instanceof Promise) result.then((v) => done(code(v), v), fail);
    else done(code(result), result);
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
        const names = core.readdir(path);
        return names instanceof Promise ? names.then((n) => listing(core, path, n)) : listing(core, path, names);
      }, (c, r) => cb(c, r?.names, r?.stats));
    },
    open(path, flags, cb) {
      // The core refuses write flags (EROFS) itself.
      handle('open', path, () => core.open(path, flags), (c, fh) => cb(c, fh));
    },
    read(path, fd, buf, len, pos, cb) {
      fuseReadBytes.observe(len);
      handle('read', path, () => core.read(fd, buf, len, pos), (c) => cb(c), (n) => n);
    },
    release(path, fd, cb) {
      handle('release', path, () => core.release(fd), (c) => cb(c));
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
