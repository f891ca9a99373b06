/**
 * The disk tier's ledger and eviction: how every sluice process on a node shares one size
 * bound for the tier (--cache-dir-size), and which objects go when it is reached.
 *
 * Accounting across processes (the size bound holds for all of them together): writers
 * take space from ledger.json in grants of GRANT_BYTES under the lock, then write that
 * much without locking. ledger = { files: bytes of cache files, grants: { "pid:start time": bytes } }
 * (the start time from /proc/<pid>/stat, so a reused pid does not keep a dead writer's grant).
 * When files + all grants would pass --cache-dir-size, the grantee evicts, under the
 * lock, least recently used objects first (the sidecar's mtime: a hit touches it, at
 * most once per TOUCH_INTERVAL_MS), until the total is at LOW_WATER of the bound. Grants
 * of pids that no longer run are dropped and trigger a rescan; so does a missing or
 * corrupt ledger, and a ledger older than RESCAN_MS (a rescan recounts the files' real
 * allocation, st_blocks: it is the recovery, there is no other index). Processes sharing
 * a folder must share a pid namespace (one container / pod).
 * Objects in use: a process's open files are protected from its own eviction (pin());
 * another process's are protected by recency (each hit touches the sidecar), and an
 * object evicted under a reader that has it open is still read whole (POSIX unlink).
 * A writer whose cache file was evicted (link count 0) reopens a new one.
 * Free space: no grant is made while the filesystem has less than MIN_FREE_BYTES free
 * (another process filling the disk stops our writes; reads go on).
 *
 *
 * Within this process: reserve(size) takes space from the current grant (refilled from the
 * ledger when short) and returns the grant's sequence number; the writer reports the bytes
 * it really used (consume) and gives the rest back (giveBack) only into the grant it came
 * from, so a refill meanwhile (which returned that grant whole) is never counted twice.
 *
 * Invariants: files + every live grant <= the bound after each refill; a pinned object
 * (open here) is never evicted by this process; the sidecar is unlinked before the data
 * file, so an object half-evicted is absent, never wrong; callers of loadLedger, saveLedger,
 * fit and scan hold the lock.
 */
import { readdir, readFile, rename, rm, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { log } from '../log.js';
import { diskCacheEvictions, diskCacheUsedBytes } from '../metrics/metrics.js';
import { DiskLock, identityAlive, pidAlive, processIdentity } from './disk-lock.js';

/**
 * Space a writer takes from the ledger at once: 1/32 of the bound, between 1 and 64 MiB.
 * Each grant is one lock round trip (~1 ms); 64 MiB at 1 GiB/s of writes is 16 per
 * second. The bound can be overshot by nothing (grants are counted), but a process's
 * unused grant is unavailable to the others until it refills: 1/32 keeps that small.
 */
export const GRANT_MAX = 64 * 1024 * 1024;
export const GRANT_MIN = 1024 * 1024;
export const GRANT_SHARE = 1 / 32;
/** Eviction frees down to 90% of the bound, so it runs once per ~10% of new data, not per grant. */
const LOW_WATER = 0.9;
/** A ledger older than this is recounted from the files (drift from overwrites, deletions of bad blocks). */
const RESCAN_MS = 5 * 60_000;
/** Oldest objects a scan keeps as eviction candidates: enough for several grants' worth of eviction before the next scan. */
const CANDIDATES_KEPT = 8192;
/** No grant while the filesystem has less free than this: leave room for the job's own files. */
export const MIN_FREE_BYTES = 1024 * 1024 * 1024;
/**
 * Default --cache-dir-size: half of the free space at start, plus what the tier already
 * holds (so a restart does not shrink the bound by what the last run stored).
 */
export const DEFAULT_FREE_SHARE = 0.5;
/** Smallest default bound: 64 MiB (a full disk then simply gets no grant; reads go on). */
export const DEFAULT_MIN_BYTES = 64 * 1024 * 1024;

export interface Ledger {
  version: 2;
  files: number;
  grants: Record<string, number>;
  scannedAt: number;
}

interface Candidate { name: string; dir: string; mtimeMs: number; alloc: number }


/** Hooks of the ledger into the rest of the tier. */
export interface LedgerHooks {
  /** Whether this process has object `name` open (never evicted by us). */
  isPinned(name: string): boolean;
  /** Object `name` was just evicted (its files unlinked): drop any open handle, count it. */
  onEvicted(name: string): void;
  /** A refill found the lock busy (the write is skipped). */
  onLockBusy(): void;
}

export class TierLedger {
  readonly lock: DiskLock;
  /** Space a writer takes from the ledger at once (see GRANT_SHARE). */
  readonly grantBytes: number;
  private readonly tmpDir: string;
  /** Grant left to write into, and bytes written from it (not yet in the ledger's files). */
  private left = 0;
  private consumed = 0;
  /** Bumped by each refill: a write's unused reservation goes back only into the grant it was taken from. */
  private grantSeq = 0;
  private refilling: Promise<number> | undefined;
  private candidates: Candidate[] = [];
  /** Last used bytes seen in the ledger (files + grants), for the gauge. */
  private reportedUsed = 0;

  constructor(
    private readonly root: string, private readonly objectsDir: string, private readonly maxBytes: number,
    private readonly freeBytes: (dir: string) => Promise<number>, private readonly hooks: LedgerHooks,
  ) {
    this.tmpDir = path.join(root, 'tmp');
    this.lock = new DiskLock(root);
    this.grantBytes = Math.max(GRANT_MIN, Math.min(GRANT_MAX, Math.floor(maxBytes * GRANT_SHARE)));
  }

  /** At open, under the lock: the ledger recounted from the files, dead writers' grants dropped, evicted down to the bound. */
  async recover(): Promise<void> {
    await this.lock.with(async () => {
      const l = await this.loadLedger(true);
      await this.fit(l, 0);
      await this.saveLedger(l);
    });
  }

  /** Bytes the writer really used from a reservation (counted into the ledger at the next refill). */
  consume(bytes: number): void {
    this.consumed += bytes;
  }

  /** Gives `bytes` of a reservation back into grant `grant`, if it is still the current one. */
  giveBack(grant: number, bytes: number): void {
    if (grant === this.grantSeq) this.left += bytes;
  }

  /** Gives the unused grant back and counts what was written (close). */
  async close(): Promise<void> {
    await this.lock.with(async () => {
      const l = await this.loadLedger(false);
      l.files += this.consumed;
      delete l.grants[SELF];
      this.consumed = 0;
      this.left = 0;
      this.grantSeq++;
      await this.saveLedger(l);
    }).catch((err: unknown) => log.warn({ err }, 'disk tier: could not update the ledger at close (the next process recounts)'));
    this.lock.close();
  }

  /** Bytes of cache files and grants as the ledger says (runs a locked read). */
  async usedBytes(): Promise<number> {
    const r = await this.lock.with(async () => {
      const l = await this.loadLedger(false);
      return l.files + this.consumed + Object.values(l.grants).reduce((a, b) => a + b, 0);
    });
    return r?.value ?? this.reportedUsed;
  }

  /** Recounts the cache files on disk (bytes allocated, objects), without the lock. */
  async scanBytes(): Promise<{ bytes: number; files: number }> {
    const s = await this.scan(false);
    return { bytes: s.bytes, files: s.files };
  }

  /**
   * Space for `size` bytes from this process's grant, refilled from the ledger when short:
   * the grant's sequence number to give unused bytes back to, or undefined when there is no
   * room (the caller skips). Jobs waiting on one refill share the new grant: one that finds
   * it taken by the others refills again.
   */
  async reserve(size: number): Promise<number | undefined> {
    while (this.left < size) {
      this.refilling ??= this.refill().finally(() => { this.refilling = undefined; });
      if ((await this.refilling) < size) return undefined;
    }
    // Reserved now (jobs run concurrently and await after this).
    this.left -= size;
    return this.grantSeq;
  }

  /** Takes a new grant from the ledger (evicting if the bound needs it) and returns its bytes. Leaves `left` 0 when none could be had. */
  private async refill(): Promise<number> {
    const r = await this.lock.with(async () => {
      const l = await this.loadLedger(false);
      l.files += this.consumed;
      this.consumed = 0;
      this.left = 0;
      this.grantSeq++;
      delete l.grants[SELF];
      let grant = this.grantBytes;
      const free = await this.freeBytes(this.root).catch(() => 0);
      if (free - grant < MIN_FREE_BYTES) grant = 0;
      if (grant > 0) {
        await this.fit(l, grant);
        if (l.files + sumGrants(l) + grant > this.maxBytes) grant = 0;
      }
      if (grant > 0) l.grants[SELF] = grant;
      await this.saveLedger(l);
      return grant;
    });
    if (!r) {
      this.hooks.onLockBusy();
      return 0;
    }
    this.left = r.value;
    return r.value;
  }

  // ---- ledger, scan, eviction (callers hold the lock) ----

  private get ledgerFile(): string {
    return path.join(this.root, 'ledger.json');
  }

  /** The ledger, recounted from the files when missing, corrupt, stale, or a writer died (or `force`). */
  private async loadLedger(force: boolean): Promise<Ledger> {
    const l = await readLedger(this.ledgerFile);
    let rescan = force || !l || Date.now() - l.scannedAt > RESCAN_MS;
    const grants: Record<string, number> = {};
    for (const [id, bytes] of Object.entries(l?.grants ?? {})) {
      if (id !== SELF && !identityAlive(id)) rescan = true; // its writes are not in `files`
      else grants[id] = bytes;
    }
    if (!rescan) return { ...l!, grants };
    const s = await this.scan(true);
    this.candidates = s.oldest;
    // A rescan counts what this process wrote too.
    this.consumed = 0;
    return { version: 2, files: s.bytes, grants, scannedAt: Date.now() };
  }

  private async saveLedger(l: Ledger): Promise<void> {
    const tmp = path.join(this.tmpDir, `ledger-${process.pid}`);
    await writeFile(tmp, JSON.stringify(l));
    await rename(tmp, this.ledgerFile);
    this.reportedUsed = l.files + sumGrants(l);
    diskCacheUsedBytes.set(this.reportedUsed);
  }

  /** Evicts least recently used objects until files + grants + `extra` is at most LOW_WATER of the bound (or nothing is left to evict). */
  private async fit(l: Ledger, extra: number): Promise<void> {
    const over = () => l.files + sumGrants(l) + extra > this.maxBytes;
    if (!over()) return;
    const target = Math.floor(this.maxBytes * LOW_WATER);
    let rescanned = false;
    while (l.files + sumGrants(l) + extra > target) {
      const c = this.candidates.shift();
      if (!c) {
        if (rescanned) break;
        rescanned = true;
        const s = await this.scan(true);
        l.files = s.bytes + this.consumed;
        this.candidates = s.oldest;
        continue;
      }
      if (this.hooks.isPinned(c.name)) continue;
      const file = path.join(c.dir, c.name);
      const st = await stat(`${file}.map`).catch(() => undefined);
      if (st && st.mtimeMs > c.mtimeMs) continue; // used since the scan: no longer among the oldest
      // The sidecar first: once it is gone nobody finds the object, so the data file can follow.
      await unlink(`${file}.map`).catch(() => undefined);
      await unlink(file).catch(() => undefined);
      this.hooks.onEvicted(c.name);
      l.files = Math.max(0, l.files - c.alloc);
      diskCacheEvictions.inc();
    }
  }

  /** Counts cache files (their real allocation); keeps the CANDIDATES_KEPT oldest objects; with `cleanTmp`, deletes tmp files of dead pids. */
  private async scan(cleanTmp: boolean): Promise<{ bytes: number; files: number; oldest: Candidate[] }> {
    let bytes = 0;
    let files = 0;
    let oldest: Candidate[] = [];
    for (let i = 0; i < 256; i++) {
      const sub = path.join(this.objectsDir, i.toString(16).padStart(2, '0'));
      const names = await readdir(sub).catch(() => [] as string[]);
      const here = new Map<string, Candidate>();
      for (const entry of names) {
        const m = /^([0-9a-f]{64})(\.map)?$/.exec(entry);
        if (!m) continue; // not ours: neither counted nor deleted
        const st = await stat(path.join(sub, entry)).catch(() => undefined);
        if (!st?.isFile()) continue;
        const a = Math.max(st.blocks * 512, 0);
        bytes += a;
        let c = here.get(m[1]!);
        if (!c) {
          c = { name: m[1]!, dir: sub, mtimeMs: st.mtimeMs, alloc: 0 };
          here.set(m[1]!, c);
          files++;
        }
        c.alloc += a;
        // An object's age is its sidecar's (touched by hits); a data file without one ages from its own mtime.
        if (m[2]) c.mtimeMs = st.mtimeMs;
      }
      if (here.size > 0) {
        oldest = oldest.concat([...here.values()]).sort((x, y) => x.mtimeMs - y.mtimeMs);
        if (oldest.length > CANDIDATES_KEPT) oldest.length = CANDIDATES_KEPT;
      }
    }
    if (cleanTmp) {
      for (const name of await readdir(this.tmpDir).catch(() => [] as string[])) {
        // Every tmp file is named <kind>-<pid> (ledger-, probe-): a writer killed between the probe's write and unlink at open leaves one too.
        const pid = Number(/^(?:[a-z]+-)?(\d+)/.exec(name)?.[1]);
        if (Number.isInteger(pid) && pid !== process.pid && !pidAlive(pid)) await rm(path.join(this.tmpDir, name), { force: true });
      }
    }
    return { bytes, files, oldest };
  }
}

/**
 * This process's key in the ledger's grants: pid and start time (issue 43: a grant keyed by
 * the pid alone stayed alive when the pid was reused, holding its space for good).
 */
const SELF = processIdentity();

function sumGrants(l: Ledger): number {
  let s = 0;
  for (const v of Object.values(l.grants)) s += v;
  return s;
}

/** ledger.json as written by saveLedger, or undefined when missing or not one. */
export async function readLedger(file: string): Promise<Ledger | undefined> {
  try {
    const l = JSON.parse(await readFile(file, 'utf8')) as Ledger;
    if (l.version !== 2 || !Number.isSafeInteger(l.files) || typeof l.grants !== 'object' || l.grants === null || !Number.isFinite(l.scannedAt)) return undefined;
    return l;
  } catch {
    return undefined;
  }
}
