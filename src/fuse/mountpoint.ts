/**
 * Checks that run before a mount, so a user sees one line naming the problem and
 * the fix instead of a native stack trace or a hung `stat`.
 *
 * checkFuseAvailable(): FUSE needs three things from the host, checked in this order:
 *  1. the /dev/fuse character device (absent in a container started without
 *     `--device /dev/fuse --cap-add SYS_ADMIN`);
 *  2. libfuse.so.2, which fuse-native's addon links. A failed dlopen inside
 *     `require('fuse-native')` is an ugly stack, so we look for the file first;
 *  3. `fusermount`, which fuse-native runs to unmount.
 *  Test hooks: SLUICE_DEV_FUSE overrides the device path and SLUICE_LIBFUSE_PATHS
 *  (colon-separated) the candidate library files, so tests can simulate a host
 *  without them. They are for tests only; users never need them.
 *
 * prepareMountpoint(): the folder must exist, be a directory, be empty and not be
 * a live mount. A mount left behind by a killed daemon answers with ENOTCONN
 * ("Transport endpoint is not connected") on `stat`, or on `readdir` when the kernel
 * still had its attributes cached: we detach it (`fusermount -uz`, then `umount -l`)
 * and reuse the folder, so a restart after kill -9 just works.
 *
 * A mount point "/dev/fd/N" is a mount someone else made (fuseFdOf): a CSI driver or an
 * init helper opened /dev/fuse, mounted with fd=N and passed the descriptor on. Then
 * checkFuseFdMount() replaces both checks: only libfuse.so.2 and descriptor N (open, and
 * /dev/fuse) are needed, neither the /dev/fuse device node nor fusermount nor a folder.
 */
import { execFile } from 'node:child_process';
import { accessSync, constants as fsConstants, existsSync, statSync } from 'node:fs';
import { readdir, readFile, stat, statfs } from 'node:fs/promises';
import path from 'node:path';
import { DeadMountError, Errno, FuseUnavailableError, MountpointError } from '../errors.js';
import { loadFuseFdShim } from './native.js';

/** The FUSE device; SLUICE_DEV_FUSE is a test hook. */
function devFusePath(): string {
  return process.env.SLUICE_DEV_FUSE || '/dev/fuse';
}

/** Debian/Ubuntu multiarch folder names for the architectures Node ships on. */
const MULTIARCH: Record<string, string> = {
  x64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu', arm: 'arm-linux-gnueabihf', ppc64: 'powerpc64le-linux-gnu', s390x: 's390x-linux-gnu',
};

/** Where the dynamic loader finds libfuse.so.2 on the distributions we support (plus LD_LIBRARY_PATH). */
export function libfuseCandidates(env: NodeJS.ProcessEnv = process.env): string[] {
  if (env.SLUICE_LIBFUSE_PATHS !== undefined) return env.SLUICE_LIBFUSE_PATHS.split(':').filter(Boolean);
  const multiarch = MULTIARCH[process.arch];
  const dirs = [
    ...(env.LD_LIBRARY_PATH ?? '').split(':').filter(Boolean),
    ...(multiarch ? [`/lib/${multiarch}`, `/usr/lib/${multiarch}`] : []),
    '/lib64', '/usr/lib64', '/lib', '/usr/lib', '/usr/local/lib',
  ];
  return dirs.map((d) => path.join(d, 'libfuse.so.2'));
}

function onPath(cmd: string): boolean {
  return (process.env.PATH ?? '/usr/bin:/bin').split(':').some((d) => d && existsSync(path.join(d, cmd)));
}

/** Throws FuseUnavailableError (one line with the fix) when this host cannot mount FUSE. */
export function checkFuseAvailable(): void {
  const dev = devFusePath();
  let isCharDevice = false;
  try { isCharDevice = statSync(dev).isCharacterDevice(); } catch { /* missing: reported below */ }
  if (!isCharDevice) {
    throw new FuseUnavailableError(`FUSE is not available: ${dev} is missing`, {
      hint: 'In a container, run with --device /dev/fuse --cap-add SYS_ADMIN; on a host, run modprobe fuse',
    });
  }
  if (!libfuseCandidates().some((p) => existsSync(p))) {
    throw new FuseUnavailableError('FUSE is not available: libfuse.so.2 is not installed', {
      hint: 'Install it with: apt-get install -y libfuse2 (libfuse2t64 on Ubuntu 24.04; or: yum install -y fuse-libs)',
    });
  }
  if (!onPath('fusermount')) {
    throw new FuseUnavailableError('FUSE is not available: fusermount is not installed', {
      hint: 'Install it with: apt-get install -y fuse (or: yum install -y fuse)',
    });
  }
  // A user other than root mounts through the setuid fusermount, which opens /dev/fuse as
  // that user: without read-write access libfuse fails with a raw line of its own.
  const uid = process.getuid?.() ?? 0;
  if (uid !== 0) {
    try {
      accessSync(dev, fsConstants.R_OK | fsConstants.W_OK);
    } catch {
      const mode = (statSync(dev).mode & 0o777).toString(8).padStart(4, '0');
      throw new FuseUnavailableError(`FUSE is not available to user ${uid}: ${dev} (mode ${mode}) is not readable and writable by it`, {
        hint: `Run sluice as root, or let this user open ${dev} (its usual mode is 0666: chmod 0666 ${dev})`,
      });
    }
  }
}

/** N for a mount point "/dev/fd/N" (a mount served from an inherited /dev/fuse descriptor), else undefined. */
export function fuseFdOf(mountpoint: string): number | undefined {
  const m = /^\/dev\/fd\/(\d{1,9})$/.exec(mountpoint);
  return m ? Number(m[1]) : undefined;
}

/** The checks for a "/dev/fd/N" mount point: libfuse.so.2 installed, N an open /dev/fuse descriptor. */
export function checkFuseFdMount(fd: number): void {
  if (!libfuseCandidates().some((p) => existsSync(p))) {
    throw new FuseUnavailableError('FUSE is not available: libfuse.so.2 is not installed', {
      hint: 'Install it with: apt-get install -y libfuse2 (libfuse2t64 on Ubuntu 24.04; or: yum install -y fuse-libs)',
    });
  }
  const res = loadFuseFdShim().checkFuseFd(fd);
  if (res === -Errno.EBADF) {
    throw new MountpointError(`/dev/fd/${fd} is not an open file descriptor of this process`, {
      hint: `Start sluice with the /dev/fuse descriptor the mount was made with open as ${fd} (for example from a CSI driver or an init helper)`,
    });
  }
  if (res !== 0) {
    throw new MountpointError(`/dev/fd/${fd} is not a /dev/fuse descriptor`, {
      hint: 'Pass the descriptor of /dev/fuse that was used to mount (mount option fd=N)',
    });
  }
}

/** One mount table entry (from /proc/self/mountinfo). */
export interface MountEntry {
  /** "major:minor" of the mounted filesystem, e.g. "0:53". */
  dev: string;
  mountpoint: string;
  fstype: string;
  source: string;
}

/** /proc/self/mountinfo escapes space, tab, newline and backslash as octal. */
function unescapeMount(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
}

export async function readMounts(): Promise<MountEntry[]> {
  const text = await readFile('/proc/self/mountinfo', 'utf8');
  const out: MountEntry[] = [];
  for (const line of text.split('\n')) {
    // id parent major:minor root mountpoint options [optional...] - fstype source superopts
    const f = line.split(' ');
    const sep = f.indexOf('-');
    if (f.length < 10 || sep < 6) continue;
    out.push({ dev: f[2]!, mountpoint: unescapeMount(f[4]!), fstype: f[sep + 1]!, source: unescapeMount(f[sep + 2]!) });
  }
  return out;
}

/** The newest mount whose mount point is `dir` (an absolute, resolved path), if any. */
export async function mountAt(dir: string): Promise<MountEntry | undefined> {
  const mounts = await readMounts();
  for (let i = mounts.length - 1; i >= 0; i--) if (mounts[i]!.mountpoint === dir) return mounts[i];
  return undefined;
}

function run(cmd: string, args: string[]): Promise<boolean> {
  return new Promise((resolve) => execFile(cmd, args, { timeout: 10_000 }, (err) => resolve(!err)));
}

/**
 * Detaches whatever is mounted at `dir`, lazily (the kernel drops it once no one
 * uses it). Tries fusermount first (works unprivileged), then umount -l.
 * Resolves with true when something was detached.
 */
export async function detachMount(dir: string): Promise<boolean> {
  if (await run('fusermount', ['-uz', dir])) return true;
  return run('umount', ['-l', dir]);
}

function errCode(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

const STALE_CODES = new Set(['ENOTCONN', 'ECONNABORTED']);
/**
 * Stale mounts we detach before giving up: a folder killed under twice holds two
 * stacked mounts, each detached in turn; more than this means detaching does not work.
 */
const MAX_STALE_DETACH = 3;

function staleError(abs: string, code: string): MountpointError {
  return new MountpointError(`mount point ${abs} holds a stale mount that could not be removed (${code})`, {
    hint: `Run: fusermount -uz ${abs} (or umount -l ${abs}) as root, then retry`,
  });
}

/**
 * The dead FUSE mount at `p` or at the nearest folder above it that is one: a FUSE entry
 * of /proc/self/mountinfo whose statfs fails with ENOTCONN (its daemon is gone; statfs,
 * unlike stat, is never answered from the kernel's attribute cache). Only asked after an
 * ENOTCONN, to name the folder to unmount.
 */
export async function deadMountAt(p: string): Promise<string | undefined> {
  const fuse = new Set((await readMounts()).filter((m) => m.fstype === 'fuse' || m.fstype.startsWith('fuse.')).map((m) => m.mountpoint));
  for (let d = path.resolve(p); ; d = path.dirname(d)) {
    if (fuse.has(d) && isStale(await statfs(d).then(() => undefined, errCode))) return d;
    if (d === path.dirname(d)) return undefined;
  }
}

/**
 * `err` as a one-line DeadMountError when it is an ENOTCONN from a dead FUSE mount at or
 * above the path it names (else `fallback`'s); any other error is returned unchanged.
 */
export async function explainDeadMount(err: unknown, what: string, fallback: string): Promise<unknown> {
  if (!isStale(errCode(err))) return err;
  const at = (err as NodeJS.ErrnoException).path ?? fallback;
  const dead = await deadMountAt(at);
  return dead === undefined ? err : new DeadMountError(what, at, dead, { cause: err });
}

/**
 * Throws a one-line DeadMountError when `p` is, or is under, a dead FUSE mount (statfs
 * reaches the daemon; ENOENT and other errors are left to the caller's own use of `p`).
 * `sluice run` asks it of --root first, before any file under it is read.
 */
export async function refuseDeadMount(p: string, what: string): Promise<void> {
  const err = await statfs(p).then(() => undefined, (e: unknown) => e);
  if (err === undefined) return;
  const explained = await explainDeadMount(err, what, p);
  if (explained instanceof DeadMountError) throw explained;
}

/**
 * Makes `dir` ready to mount on, or throws MountpointError with the fix.
 * A stale FUSE mount is detached and the folder reused. `stat` alone does not reveal
 * one: the kernel may answer it from attributes it cached before the daemon died,
 * so a folder that is a mount is probed with readdir, which always reaches the daemon.
 */
export async function prepareMountpoint(dir: string): Promise<void> {
  return prepare(path.resolve(dir), MAX_STALE_DETACH);
}

function isStale(code: string | undefined): code is string {
  return code !== undefined && STALE_CODES.has(code);
}

/** A dead FUSE mount ("Transport endpoint is not connected") is detached, then the folder checked again. */
async function recoverStale(abs: string, code: string, detachesLeft: number): Promise<void> {
  if (detachesLeft === 0) throw staleError(abs, code);
  await detachMount(abs);
  return prepare(abs, detachesLeft - 1);
}

async function prepare(abs: string, detachesLeft: number): Promise<void> {
  let st;
  try {
    st = await stat(abs);
  } catch (err) {
    const code = errCode(err);
    if (isStale(code)) {
      // A dead mount above the mount point is not ours to detach: name it and the fix.
      const dead = await deadMountAt(abs);
      if (dead !== undefined && dead !== abs) throw new DeadMountError('mount point', abs, dead, { cause: err });
      return recoverStale(abs, code, detachesLeft);
    }
    if (code === 'ENOENT') throw new MountpointError(`mount point ${abs} does not exist`, { hint: `Create it first: mkdir -p ${abs}` });
    if (code === 'EACCES' || code === 'EPERM') throw new MountpointError(`mount point ${abs} is not accessible (${code})`, { hint: 'Run as a user who can read the folder, or choose another one' });
    if (code === 'ENOTDIR') throw new MountpointError(`mount point ${abs} is not a directory (a parent is a file)`, { hint: 'Choose a folder path' });
    throw new MountpointError(`cannot use mount point ${abs}: ${code ?? String(err)}`, { hint: 'Choose another folder' });
  }
  if (!st.isDirectory()) {
    throw new MountpointError(`mount point ${abs} is not a directory`, { hint: 'Choose an empty folder, or create one with mkdir -p' });
  }
  let entries: string[];
  try {
    entries = await readdir(abs);
  } catch (err) {
    const code = errCode(err);
    if (isStale(code)) return recoverStale(abs, code, detachesLeft);
    throw new MountpointError(`cannot list mount point ${abs}: ${code ?? String(err)}`, { hint: 'Choose an empty folder you can read' });
  }
  const live = await mountAt(abs);
  if (live) {
    throw new MountpointError(`mount point ${abs} is already a mount (${live.fstype} ${live.source})`, {
      hint: `Unmount it first (fusermount -u ${abs} or umount ${abs}), or choose another folder`,
    });
  }
  if (entries.length > 0) {
    throw new MountpointError(`mount point ${abs} is not empty (${entries.length} entr${entries.length === 1 ? 'y' : 'ies'})`, {
      hint: 'Choose an empty folder: mounting would hide its contents',
    });
  }
}
