/**
 * A tiny in-memory FsCore for testing the FUSE adapter without S3: files are
 * Buffers keyed by path, folders are implied by the paths. `read` can be slowed
 * or made to fail per call, to test the adapter's error path.
 */
import {
  AbortedError, BadHandleError, IsDirectoryError, NotDirectoryError, NotFoundError, ReadOnlyError,
} from '../../src/errors.js';
import type { Attr, FsCore, StatFs } from '../../src/fs/types.js';

const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;

export class MemCore implements FsCore {
  readonly files = new Map<string, Buffer>();
  readonly dirs = new Set<string>(['/']);
  readonly handles = new Map<number, string>();
  private nextFh = 1;
  /** When set, read() rejects with what it returns (if anything). */
  failRead: ((path: string) => Error | undefined) | undefined;
  /** When set, read() of these paths waits this long first (ms). */
  slowRead: { path: string; ms: number } | undefined;
  /** A read of this path never settles, except through its signal (unless `abortIgnored`). */
  hungRead: { path: string; abortIgnored?: boolean } | undefined;
  /** When set, open() of this path answers only after this many ms (a lookup that must ask S3). */
  slowOpen: { path: string; ms: number } | undefined;
  /** Handles released (release() calls that found their handle). */
  released = 0;
  /** Reads given up because their signal fired (FsCore.read's contract: no copy after that). */
  aborted = 0;
  private readonly mtime = new Date('2024-01-01T00:00:00Z');

  constructor(files: Record<string, Buffer>) {
    for (const [p, b] of Object.entries(files)) {
      this.files.set(p, b);
      const parts = p.split('/').slice(1, -1);
      for (let i = 1; i <= parts.length; i++) this.dirs.add('/' + parts.slice(0, i).join('/'));
    }
  }

  getattr(path: string): Attr {
    if (this.dirs.has(path)) return { mode: S_IFDIR | 0o555, size: 0, mtime: this.mtime, nlink: 2, uid: 0, gid: 0 };
    const f = this.files.get(path);
    if (!f) throw new NotFoundError(path);
    return { mode: S_IFREG | 0o444, size: f.length, mtime: this.mtime, nlink: 1, uid: 0, gid: 0 };
  }

  readdir(path: string): string[] {
    if (this.files.has(path)) throw new NotDirectoryError(path);
    if (!this.dirs.has(path)) throw new NotFoundError(path);
    const prefix = path === '/' ? '/' : path + '/';
    const names = new Set<string>();
    for (const p of [...this.files.keys(), ...this.dirs]) {
      if (p !== path && p.startsWith(prefix)) names.add(p.slice(prefix.length).split('/')[0]!);
    }
    return [...names].sort();
  }

  /** When true, open() and release() answer synchronously (as SluiceFs does once listed); failures still reject. */
  syncOpen = false;

  open(path: string, flags: number): number | Promise<number> {
    if (this.slowOpen?.path === path) return new Promise((r) => setTimeout(r, this.slowOpen!.ms)).then(() => this.openNow(path, flags));
    if (!this.syncOpen) return Promise.resolve().then(() => this.openNow(path, flags));
    try {
      return this.openNow(path, flags);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  private openNow(path: string, flags: number): number {
    if ((flags & 3) !== 0) throw new ReadOnlyError('open for writing');
    if (this.dirs.has(path)) throw new IsDirectoryError(path);
    if (!this.files.has(path)) throw new NotFoundError(path);
    const fh = this.nextFh++;
    this.handles.set(fh, path);
    return fh;
  }

  async read(fh: number, dst: Buffer, length: number, position: number, opts: { signal?: AbortSignal } = {}): Promise<number> {
    const path = this.handles.get(fh);
    if (path === undefined) throw new BadHandleError(fh);
    const err = this.failRead?.(path);
    if (err) throw err;
    const f = this.files.get(path)!;
    const hung = this.hungRead?.path === path ? this.hungRead : undefined;
    const wait = hung ? undefined : this.slowRead?.path === path ? this.slowRead.ms : 0;
    await new Promise<void>((resolve, reject) => {
      const { signal } = opts;
      const onAbort = (): void => {
        clearTimeout(timer);
        this.aborted++;
        reject(new AbortedError('read aborted'));
      };
      const done = (): void => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      const timer = wait === undefined ? undefined : setTimeout(done, wait);
      if (signal && !hung?.abortIgnored) signal.addEventListener('abort', onAbort, { once: true });
    });
    return f.copy(dst, 0, Math.min(position, f.length), Math.min(position + length, f.length));
  }

  release(fh: number): void | Promise<void> {
    if (!this.handles.delete(fh)) return Promise.reject(new BadHandleError(fh));
    this.released++;
    if (!this.syncOpen) return Promise.resolve();
  }

  statfs(): StatFs {
    let bytes = 0;
    for (const f of this.files.values()) bytes += f.length;
    return { bsize: 4096, frsize: 4096, blocks: Math.ceil(bytes / 4096), bfree: 0, bavail: 0, files: this.files.size, ffree: 0, favail: 0, namemax: 255 };
  }

  refuse(op: string): never {
    throw new ReadOnlyError(op);
  }
}

/** A MemCore over `files` that records the length of every read the kernel sends it. */
export function recordingCore(files: Record<string, Buffer>): { core: MemCore; lens: number[] } {
  const core = new MemCore(files);
  const lens: number[] = [];
  const read = core.read.bind(core);
  core.read = (fh, dst, length, position, opts) => {
    lens.push(length);
    return read(fh, dst, length, position, opts);
  };
  return { core, lens };
}
