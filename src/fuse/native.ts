/**
 * The typed, lazily loaded face of fuse-native (a CommonJS addon with no types).
 *
 * Loading is deferred until checkFuseAvailable() has passed: `require('fuse-native')`
 * dlopens libfuse.so.2 at once, and a missing library would otherwise surface as a
 * native stack trace. `loadFuse()` returns a subclass that adds the mount options
 * fuse-native has no switch for (`ro`, `negative_timeout`); everything else goes
 * through fuse-native's own option names.
 */
import { createRequire } from 'node:module';
import path from 'node:path';

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
  read?(path: string, fd: number, buf: Buffer, len: number, pos: number, cb: (bytesOrErrno: number) => void): void;
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
  /** FOPEN_KEEP_CACHE on every open: the page cache survives close/open. */
  kernelCache: boolean;
  /** Seconds (fractional allowed). */
  attrTimeout: number;
  entryTimeout: number;
  debug?: boolean;
  /** Added by our subclass. */
  readOnly: boolean;
  negativeTimeout: number;
}

export interface NativeFuse {
  readonly mnt: string;
  mount(cb: (err: Error | null) => void): void;
  unmount(cb: (err: (Error & { unmountFailure?: boolean }) | null) => void): void;
  /**
   * Releases the native mount's hold on the event loop when unmount() failed because the
   * mount was already gone (removed from outside): fuse-native then skips that step, and
   * its libuv handle would keep the process alive forever. Idempotent.
   */
  releaseNative(): void;
}

export type NativeFuseCtor = new (mnt: string, ops: NativeOps, opts: NativeMountOptions) => NativeFuse;

let cached: NativeFuseCtor | undefined;

/** Requires fuse-native (call checkFuseAvailable() first) and returns our subclass of it. */
export function loadFuse(): NativeFuseCtor {
  if (cached) return cached;
  const req = createRequire(import.meta.url);
  const Fuse = req('fuse-native') as new (...a: any[]) => any;
  // fuse-native's own addon (node-gyp-build resolves the same file, so require's cache
  // hands back the instance fuse-native uses).
  const index = req.resolve('fuse-native');
  const binding = createRequire(index)('node-gyp-build')(path.dirname(index)) as { fuse_native_unmount(mnt: string, thread: Buffer): void };
  class SluiceFuse extends Fuse {
    private released = false;
    releaseNative(): void {
      const self = this as unknown as { mnt: string; _thread: Buffer | null };
      if (this.released || !self._thread) return;
      this.released = true;
      binding.fuse_native_unmount(self.mnt, self._thread);
    }
    _fuseOptions(): string {
      const base: string = super._fuseOptions();
      const o = (this as unknown as { opts: NativeMountOptions }).opts;
      const extra: string[] = [];
      if (o.readOnly) extra.push('ro');
      if (o.negativeTimeout > 0) extra.push(`negative_timeout=${o.negativeTimeout}`);
      if (extra.length === 0) return base;
      return base ? `${base},${extra.join(',')}` : `-o${extra.join(',')}`;
    }
  }
  cached = SluiceFuse as unknown as NativeFuseCtor;
  return cached;
}
