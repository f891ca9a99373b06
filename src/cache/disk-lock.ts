/**
 * The disk tier's cross-process lock: one lock file in the tier's folder, held while a
 * process changes the shared ledger or evicts (src/cache/disk-cache.ts).
 *
 * Preferred: flock(2) through our addon (native/binding.c). The kernel drops the lock
 * when the holder's file is closed or the process dies, kill -9 included, so a crash can
 * never leave the folder locked. The addon's call never blocks: a busy lock is retried
 * every LOCK_POLL_MS (the event loop keeps serving reads meanwhile).
 *
 * Fallback (addon not built): an O_EXCL file `lock.excl` holding the owner's pid. A lock
 * whose pid no longer runs is stale and is taken over; that take-over is not atomic
 * against a third process doing the same at the same instant, which is why flock is
 * preferred. The worst outcome is two processes evicting at once, which wastes a little
 * of the cache (and the next rescan corrects the ledger), never a wrong byte: a block is
 * marked present only once its bytes are written, and every read is checksummed.
 *
 * Waiting is bounded (LOCK_WAIT_MS): a caller that cannot get the lock skips what it
 * wanted to do (a write to the tier), it never fails a read.
 */
import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import path from 'node:path';
import { flockOps } from '../native/addon.js';

/** Retry period of a busy lock: short against the ~1 ms a holder keeps it for a ledger update. */
const LOCK_POLL_MS = 2;
/** Longest wait for the lock: a rescan of a large tier can hold it for seconds; a writer gives up after this. */
export const LOCK_WAIT_MS = 10_000;

export class DiskLock {
  private fd: number | undefined;
  private readonly flock = flockOps();
  private held = false;

  constructor(private readonly dir: string) {}

  /** 'flock' or 'pidfile', for logs and tests. */
  get kind(): 'flock' | 'pidfile' {
    return this.flock ? 'flock' : 'pidfile';
  }

  /** Runs `fn` while holding the lock. Resolves with undefined (without running `fn`) when the lock stays busy past `waitMs`. */
  async with<T>(fn: () => Promise<T>, waitMs = LOCK_WAIT_MS): Promise<{ value: T } | undefined> {
    const deadline = Date.now() + waitMs;
    while (!this.tryAcquire()) {
      if (Date.now() >= deadline) return undefined;
      await new Promise((r) => setTimeout(r, LOCK_POLL_MS));
    }
    try {
      return { value: await fn() };
    } finally {
      this.release();
    }
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }

  private tryAcquire(): boolean {
    // One holder per process at a time too (flock on one fd is re-entrant, which we do not want).
    if (this.held) return false;
    if (this.flock) {
      this.fd ??= openSync(path.join(this.dir, 'lock'), 'a');
      this.held = this.flock.tryLock(this.fd, true);
      return this.held;
    }
    const file = path.join(this.dir, 'lock.excl');
    try {
      const fd = openSync(file, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      this.held = true;
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    let pid = NaN;
    try {
      pid = Number(readFileSync(file, 'utf8'));
    } catch {
      return false; // released meanwhile: the next poll takes it
    }
    // An empty file is a holder between open and write: wait for it.
    if (Number.isInteger(pid) && pid > 0 && !pidAlive(pid)) {
      try {
        unlinkSync(file);
      } catch {
        /* someone else took it over first */
      }
    }
    return false;
  }

  private release(): void {
    if (!this.held) return;
    this.held = false;
    if (this.flock) this.flock.unlock(this.fd!);
    else unlinkSync(path.join(this.dir, 'lock.excl'));
  }
}

/**
 * A process's start time: field 22 of /proc/<pid>/stat (clock ticks after boot), or
 * undefined when no such process runs (or there is no /proc). With the pid it names one
 * process for good: a pid is reused, a (pid, start time) pair is not while the host runs.
 */
export function processStartTime(pid: number): string | undefined {
  if (!(Number.isSafeInteger(pid) && pid > 0)) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    // "pid (comm) state ppid ...": comm may hold spaces and ')', so fields count from the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const start = fields[22 - 3];
    return start !== undefined && /^\d+$/.test(start) ? start : undefined;
  } catch {
    return undefined;
  }
}

/** This process as the ledger names it: "pid:start time" (issue 43), or the pid alone without /proc. */
export function processIdentity(pid: number = process.pid): string {
  const start = processStartTime(pid);
  return start === undefined ? String(pid) : `${pid}:${start}`;
}

/**
 * Whether the process a ledger entry names still runs. "pid:start": that pid runs and started
 * then (a reused pid is another process). A bare pid (an older sluice, or a host without
 * /proc) counts only where this host has no /proc to tell. Never pid 0 or below: kill(0, 0)
 * and kill(-1, 0) signal process groups and always succeed.
 */
export function identityAlive(id: string): boolean {
  const m = /^(\d+)(?::(\d+))?$/.exec(id);
  if (!m) return false;
  const pid = Number(m[1]);
  if (!(Number.isSafeInteger(pid) && pid > 0)) return false;
  if (m[2] !== undefined) return processStartTime(pid) === m[2];
  return processStartTime(process.pid) === undefined && pidAlive(pid);
}

/** Whether a process with this pid runs (EPERM: it runs as another user). */
export function pidAlive(pid: number): boolean {
  if (!(Number.isSafeInteger(pid) && pid > 0)) return false; // 0 and negatives name process groups
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
