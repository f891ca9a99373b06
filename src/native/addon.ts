/**
 * The one door to sluice's N-API addon (native/): it loads the addon, and every other module
 * reaches the addon's operations through the typed functions here. Nothing else in src/ calls
 * node-gyp-build for our addon or dlopens it. This module sits at the bottom of the house: it
 * imports nothing of sluice but errors, so pipe/, cache/, s3/, fuse/, channels/, memory/ and
 * bench/ may all import it without an arrow running back up.
 *
 * Loading: node-gyp-build finds the build in native/build/Release or native/prebuilds. The
 * addon is loaded at most once (and a failure to load is remembered), so the cost is one
 * dlopen per process. loadAddonGlobal() loads the same file a second way, with RTLD_GLOBAL,
 * for the FUSE descriptor shim (src/fuse/native.ts); fuseNativeBinding() hands back
 * fuse-native's own binding, the other native module sluice talks to directly.
 *
 * Each operation is exposed as a function that returns it, or undefined when the addon is
 * not built, is an older build without it, or is forced off: the caller then takes its
 * JavaScript path. Invariant: no caller holds the raw addon object.
 *
 * FIFO primitives for Pipe mode (fifoOps()) have two backends, chosen on each call:
 *  - 'native': mkfifo(3) and fcntl F_SETPIPE_SZ / F_GETPIPE_SZ from the addon.
 *  - 'mkfifo-command': when the addon was not built (no compiler at install time) or
 *    is forced off, FIFOs come from coreutils `mkfifo` through execFile (no shell),
 *    and pipe sizes are unsupported: setPipeSize/getPipeSize return undefined and
 *    the pipe keeps the kernel's default buffer (64 KiB on Linux).
 *
 * Test hook: SLUICE_NO_NATIVE=1 forces every fallback. It is read on every call, so a test
 * can flip it without reloading modules.
 */
import { execFile } from 'node:child_process';
import { lstat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import os from 'node:os';

/** The addon's paced FIFO writer (native/src/pipe_writer.c), driven by src/pipe/paced-writer.ts. */
export interface PipeWriterAddon {
  pipeWriterOpen(fd: number, pipeSize: number, onProgress: (written: number, finished: boolean, errno: number) => void): unknown;
  pipeWriterPush(handle: unknown, buf: Buffer): boolean;
  pipeWriterEnd(handle: unknown): void;
  pipeWriterCancel(handle: unknown): void;
  pipeWriterStats(handle: unknown): number[];
}

/** What the compiled addon exports (native/binding.c). */
interface NativeAddon {
  mkfifo(path: string, mode: number): void;
  setPipeSize(fd: number, bytes: number): number;
  getPipeSize(fd: number): number;
  /** flock(fd, LOCK_EX or LOCK_SH | LOCK_NB): false when another open file holds it (absent from an old build). */
  tryLock?(fd: number, exclusive: boolean): boolean;
  unlock?(fd: number): void;
  /** A buffer whose pages (4 KiB) are mapped before first use; undefined when external buffers are not allowed (absent from an old build). */
  allocPrefaulted?(bytes: number): Buffer | undefined;
  /** A mapping with no page yet, for a pool's slabs (../memory/slab-arena.ts); undefined when external buffers are not allowed (absent from an old build). */
  reserveRegion?(bytes: number): Buffer | undefined;
  /** Maps the whole pages inside a slab of a region (MADV_POPULATE_WRITE; absent from an old build). */
  populateSlab?(buf: Buffer): void;
  /** Gives the whole pages inside a slab back (MADV_DONTNEED; absent from an old build). */
  discardPages?(buf: Buffer): void;
  /** The paced FIFO writer thread (native/src/pipe_writer.c; absent from an old build). */
  pipeWriterOpen?: PipeWriterAddon['pipeWriterOpen'];
  /** setsockopt SO_RCVLOWAT, capped by the receive buffer; the mark set (absent from an old build). */
  setRecvLowat?(fd: number, bytes: number): number;
  /** Small objects written into the disk tier, a batch in one pool hop, and a cache file opened (native/src/tier_small.c; absent from an old build). */
  tierWriteSmall?: TierWriteSmall;
  tierOpenPair?: TierOpenPair;
}

/**
 * Writes a batch of small objects (1 to 64; each block 0 of its object, 1..blockSize bytes)
 * into the disk tier's `objectsDir`, in order, in one piece of work on the pool: object i is
 * cache file `names[32i, 32i+32)` with `bytes[i]`, whose CRC32C is `crcs[i]`; its bytes
 * first, then the sidecar's header and entry 0 in one write. The buffers are held until it
 * settles. Resolves to [status, old entry length] per object: status 1 written with a sidecar
 * made there, 2 written into a sidecar that was there, 0 present already, or a negative errno
 * (-EBADMSG: the sidecar there is damaged).
 */
export type TierWriteSmall = (objectsDir: string, blockSize: number, names: Buffer, bytes: Buffer[], crcs: Uint32Array) => Promise<Int32Array>;

/**
 * Opens cache file `name` (32 bytes) under `objectsDir`: its data file and sidecar (O_RDWR)
 * into fds[0] and fds[1], and up to 64 bytes of the sidecar's header into `header`. Returns
 * the header bytes read (the caller checks them and owns both fds), or a negative errno with
 * nothing left open: a miss costs no exception.
 */
export type TierOpenPair = (objectsDir: string, name: Buffer, fds: Int32Array, header: Buffer) => number;

export type FifoBackend = 'native' | 'mkfifo-command';

export interface FifoOps {
  readonly backend: FifoBackend;
  /** Create a FIFO at `path` with permission bits `mode`. Rejects with a Node-style system error (code 'EEXIST', ...). */
  mkfifo(path: string, mode: number): Promise<void>;
  /** Request a pipe buffer of `bytes` for `fd`; the size granted, or undefined when unsupported. Throws on a kernel refusal (EPERM, EBUSY). */
  setPipeSize(fd: number, bytes: number): number | undefined;
  /** The pipe buffer size of `fd`, or undefined when unsupported. */
  getPipeSize(fd: number): number | undefined;
}

/** Environment variable that forces the fallback backend (a test hook, also an escape hatch). */
export const NO_NATIVE_ENV = 'SLUICE_NO_NATIVE';

/** native/ sits two levels above both src/native/ (tests) and dist/native/ (the CLI). */
const NATIVE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'native');

let addon: NativeAddon | null | undefined; // undefined: not tried yet; null: tried and failed
let addonError: unknown;

function loadAddon(): NativeAddon | null {
  if (addon !== undefined) return addon;
  try {
    const require = createRequire(import.meta.url);
    const load = require('node-gyp-build') as (dir: string) => unknown;
    addon = load(NATIVE_DIR) as NativeAddon;
  } catch (err) {
    addon = null;
    addonError = err;
  }
  return addon;
}

/**
 * The path of the addon's built file (node-gyp-build's choice), or undefined when it is not
 * built. For loadAddonGlobal().
 */
export function addonFile(): string | undefined {
  try {
    return (createRequire(import.meta.url)('node-gyp-build') as { path(dir: string): string }).path(NATIVE_DIR);
  } catch {
    return undefined;
  }
}

/**
 * Loads the addon's file again into the global symbol scope (RTLD_NOW | RTLD_GLOBAL), where
 * its fuse_mount, fuse_unmount and fuse_new take precedence over libfuse's for fuse-native
 * (native/src/fuse_fd.c, fuse_init.c). Must run before fuse-native is loaded. Returns the
 * exports (the caller, src/fuse/native.ts, types and checks them), or undefined when the
 * addon is not built.
 */
export function loadAddonGlobal(): Record<string, unknown> | undefined {
  const file = addonFile();
  if (file === undefined) return undefined;
  const mod = { exports: {} as Record<string, unknown> };
  process.dlopen(mod, file, os.constants.dlopen.RTLD_NOW | os.constants.dlopen.RTLD_GLOBAL);
  return mod.exports;
}

/**
 * fuse-native's own binding, the module object its index.js loads (node-gyp-build resolves
 * the same file, so require's cache hands back that very instance), with its package
 * version; src/fuse/native.ts types it and checks the version before using its privates.
 */
export function fuseNativeBinding(): { binding: unknown; version: string } {
  const req = createRequire(import.meta.url);
  const index = req.resolve('fuse-native');
  const binding = createRequire(index)('node-gyp-build')(path.dirname(index)) as unknown;
  const version = (req('fuse-native/package.json') as { version: string }).version;
  return { binding, version };
}

/**
 * flock(2) from the addon, for the disk tier's lock file (src/cache/disk-lock.ts), or undefined
 * when the addon is not built, is an older build without it, or is forced off.
 */
export function flockOps(): { tryLock(fd: number, exclusive: boolean): boolean; unlock(fd: number): void } | undefined {
  if (nativeForcedOff()) return undefined;
  const a = loadAddon();
  if (!a?.tryLock || !a.unlock) return undefined;
  return { tryLock: a.tryLock.bind(a), unlock: a.unlock.bind(a) };
}

/**
 * An allocator for large receive slabs whose pages are mapped up front (native/binding.c
 * js_alloc_prefaulted), falling back to Buffer.allocUnsafe per call when the addon cannot
 * give one; undefined when the addon is not built, is an older build, or is forced off.
 */
export function prefaultedAlloc(): ((bytes: number) => Buffer) | undefined {
  if (nativeForcedOff()) return undefined;
  const a = loadAddon();
  const alloc = a?.allocPrefaulted?.bind(a);
  if (alloc === undefined) return undefined;
  return (n) => {
    try {
      return alloc(n) ?? Buffer.allocUnsafe(n);
    } catch {
      return Buffer.allocUnsafe(n); // ENOMEM from mmap: let V8 try (and report) as it would anyway
    }
  };
}

/**
 * The addon's operations on a reserved region, for a pool's slabs (src/memory/slab-arena.ts):
 * reserve a mapping with no page yet, map the whole pages of a slab, give them back.
 * Undefined when the addon is not built, is an older build, or is forced off.
 */
export function regionOps(): { reserve(bytes: number): Buffer | undefined; populate(buf: Buffer): void; discard(buf: Buffer): void } | undefined {
  if (nativeForcedOff()) return undefined;
  const a = loadAddon();
  const { reserveRegion, populateSlab, discardPages } = a ?? {};
  if (!a || !reserveRegion || !populateSlab || !discardPages) return undefined;
  return { reserve: (n) => reserveRegion.call(a, n), populate: (b) => populateSlab.call(a, b), discard: (b) => discardPages.call(a, b) };
}

/** The addon's batch writer of small objects for the disk tier (TierWriteSmall), or undefined when the addon is not built, is an older build, or is forced off. */
export function tierWriteSmallOp(): TierWriteSmall | undefined {
  if (nativeForcedOff()) return undefined;
  const a = loadAddon();
  return a?.tierWriteSmall?.bind(a);
}

/** The addon's cache file opener (TierOpenPair), or undefined when the addon is not built, is older, or is forced off. */
export function tierOpenPairOp(): TierOpenPair | undefined {
  if (nativeForcedOff()) return undefined;
  const a = loadAddon();
  return a?.tierOpenPair?.bind(a);
}

/**
 * The addon's paced FIFO writer (paced-writer.ts), or undefined when the addon is not built,
 * is an older build without it, or is forced off: FifoWriter then writes through a net.Socket.
 */
export function pipeWriterAddon(): PipeWriterAddon | undefined {
  if (nativeForcedOff()) return undefined;
  const a = loadAddon();
  return a?.pipeWriterOpen ? (a as unknown as PipeWriterAddon) : undefined;
}

/**
 * SO_RCVLOWAT for a connected socket (native/binding.c js_set_recv_lowat), for the data
 * path's ranged GETs (../s3/wire.ts); undefined when the addon is not built, is an older
 * build without it, or is forced off (the socket then wakes on every segment burst, as before).
 */
export function recvLowatOp(): ((fd: number, bytes: number) => number) | undefined {
  if (nativeForcedOff()) return undefined;
  const a = loadAddon();
  return a?.setRecvLowat?.bind(a);
}

/** Why the addon is not in use (undefined when it is, or was not tried yet). For logs. */
export function nativeLoadError(): unknown {
  return addonError;
}

const nativeOps = (a: NativeAddon): FifoOps => ({
  backend: 'native',
  mkfifo: async (p, mode) => a.mkfifo(p, mode),
  setPipeSize: (fd, bytes) => a.setPipeSize(fd, bytes),
  getPipeSize: (fd) => a.getPipeSize(fd),
});

/** coreutils' messages for the errors a caller may want to tell apart. */
const MKFIFO_MESSAGES: [RegExp, string][] = [
  [/File exists/i, 'EEXIST'],
  [/No such file or directory/i, 'ENOENT'],
  [/Permission denied/i, 'EACCES'],
  [/Not a directory/i, 'ENOTDIR'],
  [/Read-only file system/i, 'EROFS'],
  [/File name too long/i, 'ENAMETOOLONG'],
  [/No space left/i, 'ENOSPC'],
];

function commandMkfifo(p: string, mode: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    execFile('mkfifo', ['-m', (mode & 0o7777).toString(8), '--', p], (err, _stdout, stderr) => {
      if (!err) {
        resolve();
        return;
      }
      const text = String(stderr).trim() || err.message;
      const code = (err as NodeJS.ErrnoException).code === 'ENOENT' && !stderr
        ? 'ENOSYS' // the mkfifo program itself is missing
        : MKFIFO_MESSAGES.find(([re]) => re.test(text))?.[1] ?? 'EIO';
      reject(Object.assign(new Error(`${code}: ${text}, mkfifo '${p}'`), { code, syscall: 'mkfifo', path: p }));
    });
  }).then(async () => {
    // The program reports success only after mkfifo(3) did; still, check what we made.
    const st = await lstat(p);
    if (!st.isFIFO()) throw Object.assign(new Error(`EEXIST: ${p} is not a FIFO, mkfifo '${p}'`), { code: 'EEXIST', path: p });
  });
}

const commandOps: FifoOps = {
  backend: 'mkfifo-command',
  mkfifo: commandMkfifo,
  setPipeSize: () => undefined,
  getPipeSize: () => undefined,
};

/** True when the environment variable asks for the fallback (also read by src/fuse/native.ts: no C-side reads). */
export function nativeForcedOff(): boolean {
  const v = process.env[NO_NATIVE_ENV];
  return v !== undefined && v !== '' && v !== '0' && v.toLowerCase() !== 'false';
}

/** The FIFO primitives to use now: the addon when it loads and is not forced off, else the mkfifo command. */
export function fifoOps(): FifoOps {
  if (nativeForcedOff()) return commandOps;
  const a = loadAddon();
  return a ? nativeOps(a) : commandOps;
}
