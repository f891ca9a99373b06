/**
 * The disk tier: blocks of S3 objects kept on local disk (--cache-dir), under the memory
 * block cache, shared by every sluice process on the node and kept across restarts.
 *
 * Layout (DIR/sluice-tier-v1/):
 *   blocks/XX/<sha256 hex>   one file per block; XX = the name's first two hex digits
 *                            (256 folders keep each folder's listing small)
 *   tmp/<pid>-<n>            a block being written; renamed into blocks/ once whole
 *   ledger.json              bytes in block files, and space granted to live writers
 *   lock                     flock(2) target guarding ledger.json and eviction
 *
 * Key: sha256 of (block size, endpoint, bucket, key, ETag, version id, block index). A
 * block is only ever found under the ETag it was fetched for, so an object changed in S3
 * (new ETag) never reads old blocks; old versions simply age out by LRU.
 * Block i covers object bytes [i * B, (i + 1) * B), B = blockSize (256 KiB, the memory
 * cache's block: a random read costs no more from the tier than from S3). A file may
 * hold a prefix of its block (the bytes of a GET that ended inside it, e.g. the object's
 * last block); a read that needs more of the block than is stored is a miss, and the
 * next GET stores the longer prefix.
 *
 * File format: a 64-byte header, then the data. Header (little-endian): magic "SLB1",
 * data length u32, CRC32C of the data u32, 4 reserved, the 32-byte key hash (the file
 * name, so a misplaced file is refused), 12 reserved, CRC32C of the 60 bytes before it.
 * Checksum: CRC32C (@node-rs/crc32, SIMD): 0.16 CPU s/GiB measured here against 0.67
 * for sha256 (node:crypto); it catches every torn write, truncation, and bit flip of
 * up to 3 bits in a block. Every read from disk verifies the header and the data; a bad
 * block is deleted, counted (sluice_disk_cache_checksum_failures_total) and reported
 * as a miss, so the caller fetches it from S3 again. Never served.
 *
 * Writes are atomic: tmp file (O_EXCL), one writev, close, rename(2) into blocks/. A
 * kill -9 leaves at worst a tmp file, which the next scan deletes once its pid is gone.
 * No fsync: after a power loss a block may be torn, and the checksum catches that.
 * Writes happen off the read path, in the background: a queue of at most
 * WRITE_QUEUE_BYTES (full: the block is not cached; never waits), WRITE_CONCURRENCY
 * writes at once, paced by --cache-dir-write-rate (a token bucket).
 *
 * Accounting across processes (the size bound holds for all of them together): writers
 * take space from ledger.json in grants of GRANT_BYTES under the lock, then write that
 * much without locking. ledger = { files: bytes of block files, grants: { pid: bytes } }.
 * When files + all grants would pass --cache-dir-size, the grantee evicts, under the
 * lock, least recently used blocks first (file mtime: a hit touches it, at most once
 * per TOUCH_INTERVAL_MS), until the total is at LOW_WATER of the bound. Grants of pids
 * that no longer run are dropped and trigger a rescan; so does a missing or corrupt
 * ledger, and a ledger older than RESCAN_MS (a rescan recounts the files: it is the
 * recovery, there is no other index). Space is counted in 4 KiB pages per file.
 * Processes sharing a folder must share a pid namespace (one container / pod).
 * Blocks in use: a process's open files are protected from its own eviction (pin());
 * another process's are protected by recency (each hit touches the block), and a
 * block deleted under a reader that has it open is still read whole (POSIX unlink).
 * Free space: no grant is made while the filesystem has less than MIN_FREE_BYTES free
 * (another process filling the disk stops our writes; reads go on).
 *
 * Whole-file fast path and FUSE passthrough (not built yet; for a later issue): the
 * tier stores blocks, so a FUSE read of a cached file still goes kernel -> sluice ->
 * open/readv/close of block files -> kernel. Linux >= 6.9 FUSE passthrough lets open()
 * hand the kernel a backing fd, after which reads go straight to that file with no
 * trip through sluice. It would take: (1) a whole-file layout: one file per object
 * version (data only, checksum verified once when assembled, as each block is now);
 * (2) libfuse >= 3.16 (fuse_passthrough_open / FOPEN_PASSTHROUGH): fuse-native is
 * libfuse 2, so our own small low-level FUSE binding in native/; (3) CAP_SYS_ADMIN in
 * the daemon (the kernel requires it for passthrough); (4) giving up the per-read
 * checksum, since the kernel reads the file directly: verify at assembly and rely on
 * the file being immutable (0444, renamed in once whole). bench: `sluice bench
 * --scenario tier` measures the FUSE hop against reading the same files from local disk.
 */
import { createHash } from 'node:crypto';
import { close, closeSync, futimesSync, mkdirSync, open, openSync, read, readv, statfs as statfsCb, writeFileSync, writev } from 'node:fs';
import { readdir, readFile, rename, rm, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { crc32c } from '@node-rs/crc32';
import { LRUCache } from 'lru-cache';
import { InvalidArgumentError } from '../errors.js';
import { log } from '../log.js';
import {
  diskCacheCapacityBytes, diskCacheChecksumFailures, diskCacheEvictions, diskCacheHits, diskCacheMisses,
  diskCacheReadBytes, diskCacheUsedBytes, diskCacheWriteSkipped, diskCacheWrittenBytes,
} from '../metrics/metrics.js';
import { DiskLock, pidAlive } from './disk-lock.js';

/** Block size of the tier: the memory cache's largest block (src/fs/core.ts MAX_BLOCK_SIZE). */
export const DISK_BLOCK_SIZE = 256 * 1024;
/** Folder of this layout's version inside --cache-dir: a later format gets a new folder. */
export const TIER_FOLDER = 'sluice-tier-v1';
export const HEADER_BYTES = 64;
const MAGIC = 0x31424c53; // "SLB1" little-endian
/** Disk space is allocated in pages: a file is counted as its size rounded up to 4 KiB. */
const PAGE = 4096;
/**
 * Space a writer takes from the ledger at once: 1/32 of the bound, between 1 and 64 MiB.
 * Each grant is one lock round trip (~1 ms); 64 MiB at 1 GiB/s of writes is 16 per
 * second. The bound can be overshot by nothing (grants are counted), but a process's
 * unused grant is unavailable to the others until it refills: 1/32 keeps that small.
 */
const GRANT_MAX = 64 * 1024 * 1024;
const GRANT_MIN = 1024 * 1024;
const GRANT_SHARE = 1 / 32;
/** Eviction frees down to 90% of the bound, so it runs once per ~10% of new data, not per grant. */
const LOW_WATER = 0.9;
/** A ledger older than this is recounted from the files (drift from overwrites, deletions of bad blocks). */
const RESCAN_MS = 5 * 60_000;
/** Oldest blocks a scan keeps as eviction candidates: 8192 x 256 KiB = 2 GiB to evict before the next scan. */
const CANDIDATES_KEPT = 8192;
/** A hit moves a block's mtime (its LRU age) at most once a minute: one utimes per block per minute. */
const TOUCH_INTERVAL_MS = 60_000;
/** Blocks whose last touch is remembered (for TOUCH_INTERVAL_MS): 64 Ki x ~100 B. */
const TOUCH_MEMORY = 65_536;
/** Bytes waiting to be written: 64 MiB of copies, the tier's whole share of memory. */
export const WRITE_QUEUE_BYTES = 64 * 1024 * 1024;
/** Writes at once: 4 keeps an NVMe busy from the libuv pool (4 threads) without starving reads. */
const WRITE_CONCURRENCY = 4;
/** No grant while the filesystem has less free than this: leave room for the job's own files. */
export const MIN_FREE_BYTES = 1024 * 1024 * 1024;
/** After ENOSPC, writes pause this long (the disk is full: retrying per block would only fail again). */
const ENOSPC_PAUSE_MS = 5_000;
/**
 * Default --cache-dir-size: half of the free space at start, plus what the tier already
 * holds (so a restart does not shrink the bound by what the last run stored).
 */
export const DEFAULT_FREE_SHARE = 0.5;
/** Smallest default bound: 64 MiB (a full disk then simply gets no grant; reads go on). */
const DEFAULT_MIN_BYTES = 64 * 1024 * 1024;

export interface DiskBlockId {
  /** Where the object lives: endpoint and bucket (TieredClient makes it). */
  ns: string;
  key: string;
  etag: string;
  versionId?: string;
  index: number;
}

export interface DiskCacheOptions {
  /** --cache-dir. */
  dir: string;
  /** --cache-dir-size; undefined: DEFAULT_FREE_SHARE of the free space (+ what is stored). */
  maxBytes?: number;
  /** --cache-dir-write-rate, bytes per second. */
  writeBytesPerSec: number;
  /** Test hook: free bytes of the filesystem (default statfs). */
  freeBytes?: (dir: string) => Promise<number>;
}

export interface DiskCacheStats {
  hits: number;
  misses: number;
  checksumFailures: number;
  written: number;
  writtenBytes: number;
  evictions: number;
  skipped: number;
}

interface Ledger {
  version: 1;
  files: number;
  grants: Record<string, number>;
  scannedAt: number;
}

interface Candidate { file: string; name: string; mtimeMs: number; alloc: number }

interface WriteJob { name: string; data: Buffer }

const alloc = (n: number) => Math.ceil((HEADER_BYTES + n) / PAGE) * PAGE;

/** The file name (hex sha256) of a block. */
export function blockName(id: DiskBlockId, blockSize = DISK_BLOCK_SIZE): string {
  // NUL cannot appear in any field (keys are checked, ETags are quoted hex), so they cannot run together.
  return createHash('sha256').update(`v1\0${blockSize}\0${id.ns}\0${id.key}\0${id.etag}\0${id.versionId ?? ''}\0${id.index}`).digest('hex');
}

/** Free bytes for an unprivileged writer on the filesystem of `dir`. */
function statfsFree(dir: string): Promise<number> {
  return new Promise((resolve, reject) => statfsCb(dir, (err, s) => (err ? reject(err) : resolve(s.bavail * s.bsize))));
}

const openP = (file: string, flags: string) => new Promise<number>((res, rej) => open(file, flags, (e, fd) => (e ? rej(e) : res(fd))));
const closeP = (fd: number) => new Promise<void>((res) => close(fd, () => res()));
const readvP = (fd: number, bufs: Buffer[], pos: number) => new Promise<number>((res, rej) => readv(fd, bufs, pos, (e, n) => (e ? rej(e) : res(n))));
const readP = (fd: number, buf: Buffer, pos: number) => new Promise<number>((res, rej) => read(fd, buf, 0, buf.length, pos, (e, n) => (e ? rej(e) : res(n))));

export class DiskCache {
  readonly blockSize = DISK_BLOCK_SIZE;
  readonly root: string;
  readonly maxBytes: number;
  readonly stats: DiskCacheStats = { hits: 0, misses: 0, checksumFailures: 0, written: 0, writtenBytes: 0, evictions: 0, skipped: 0 };
  readonly grantBytes: number;

  private readonly lock: DiskLock;
  private readonly blocksDir: string;
  private readonly tmpDir: string;
  private readonly freeBytes: (dir: string) => Promise<number>;
  private readonly writeRate: number;
  /** Grant left to write into, and bytes written from it (not yet in the ledger's files). */
  private left = 0;
  private consumed = 0;
  private refilling: Promise<void> | undefined;
  private candidates: Candidate[] = [];
  private readonly touched = new LRUCache<string, number>({ max: TOUCH_MEMORY });
  private readonly pins = new Map<string, number>();
  private readonly queue: WriteJob[] = [];
  private queuedBytes = 0;
  private writing = 0;
  private idle: (() => void)[] = [];
  private paceAt = 0;
  private pausedUntil = 0;
  private tmpSeq = 0;
  private closed = false;
  /** Last used bytes seen in the ledger (files + grants), for the gauge. */
  private reportedUsed = 0;

  private constructor(dir: string, maxBytes: number, o: DiskCacheOptions) {
    this.root = path.join(dir, TIER_FOLDER);
    this.blocksDir = path.join(this.root, 'blocks');
    this.tmpDir = path.join(this.root, 'tmp');
    this.maxBytes = maxBytes;
    this.lock = new DiskLock(this.root);
    this.freeBytes = o.freeBytes ?? statfsFree;
    this.writeRate = o.writeBytesPerSec;
    this.grantBytes = Math.max(GRANT_MIN, Math.min(GRANT_MAX, Math.floor(maxBytes * GRANT_SHARE)));
    diskCacheCapacityBytes.inc(maxBytes);
  }

  /**
   * Opens (creating) the tier in `o.dir`: checks the folder is usable (InvalidArgumentError
   * naming it otherwise), then, under the lock, recovers the ledger from the files when it
   * is missing or stale, drops dead writers' grants and their tmp files, and evicts down to
   * the bound (which may have shrunk since the last run).
   */
  static async open(o: DiskCacheOptions): Promise<DiskCache> {
    const root = path.join(o.dir, TIER_FOLDER);
    try {
      for (let i = 0; i < 256; i++) mkdirSync(path.join(root, 'blocks', i.toString(16).padStart(2, '0')), { recursive: true });
      mkdirSync(path.join(root, 'tmp'), { recursive: true });
      const probe = path.join(root, 'tmp', `probe-${process.pid}`);
      writeFileSync(probe, '');
      await unlink(probe);
    } catch (err) {
      throw new InvalidArgumentError(`--cache-dir ${o.dir} is not a writable folder: ${(err as Error).message}`, { hint: 'Point --cache-dir at a local folder sluice may write to (e.g. on the instance NVMe), or leave it unset' });
    }
    if (!(Number.isSafeInteger(o.writeBytesPerSec) && o.writeBytesPerSec > 0)) throw new InvalidArgumentError(`--cache-dir-write-rate must be > 0, got ${o.writeBytesPerSec}`);
    let maxBytes = o.maxBytes;
    if (maxBytes === undefined) {
      const free = await (o.freeBytes ?? statfsFree)(o.dir);
      const ledger = await readLedger(path.join(root, 'ledger.json'));
      // At least DEFAULT_MIN_BYTES, so a nearly full disk still starts (no grant is made below MIN_FREE_BYTES free anyway).
      maxBytes = Math.max(DEFAULT_MIN_BYTES, Math.floor(Math.max(0, free - MIN_FREE_BYTES) * DEFAULT_FREE_SHARE) + (ledger?.files ?? 0));
    }
    if (!(Number.isSafeInteger(maxBytes) && maxBytes >= HEADER_BYTES + PAGE)) {
      throw new InvalidArgumentError(`--cache-dir-size is ${maxBytes} bytes: too small to hold a block`, { hint: 'Set --cache-dir-size to a few GiB (or free space on the disk of --cache-dir)' });
    }
    const c = new DiskCache(o.dir, maxBytes, o);
    await c.lock.with(async () => {
      const l = await c.loadLedger(true);
      await c.fit(l, 0);
      await c.saveLedger(l);
    });
    return c;
  }

  /** The lock in use ('flock' through the addon, or the 'pidfile' fallback). */
  get lockKind(): string {
    return this.lock.kind;
  }

  /**
   * Fills `dst` with bytes [offset, offset + dst.length) of the block, verified. Returns
   * false (a miss) when the block is absent, holds fewer bytes, or fails its checksum
   * (then it is deleted). Never throws: a disk error is a miss. `dst` may be written to
   * even on a miss.
   */
  async readInto(id: DiskBlockId, dst: Buffer, offset = 0): Promise<boolean> {
    const name = blockName(id, this.blockSize);
    const file = this.fileOf(name);
    // open and close synchronously: both are metadata operations of a few microseconds (no data
    // I/O), and each would otherwise cost a trip through the libuv pool; only the read goes there.
    let fd: number;
    try {
      fd = openSync(file, 'r');
    } catch {
      this.miss();
      return false;
    }
    let ok = false;
    try {
      ok = await this.readOpen(fd, name, file, dst, offset);
      if (ok) this.touch(name, fd);
    } catch (err) {
      log.debug({ err, file }, 'disk tier read failed; reading from S3');
    } finally {
      closeSync(fd);
    }
    if (!ok) {
      this.miss();
      return false;
    }
    this.stats.hits++;
    diskCacheHits.inc();
    diskCacheReadBytes.inc(dst.length);
    return true;
  }

  private async readOpen(fd: number, name: string, file: string, dst: Buffer, offset: number): Promise<boolean> {
    const hdr = Buffer.allocUnsafe(HEADER_BYTES);
    const need = offset + dst.length;
    // Straight into dst when it starts the block; else the block into a scratch buffer.
    const direct = offset === 0;
    const first = direct ? dst : Buffer.allocUnsafe(Math.min(this.blockSize, need));
    const n = await readvP(fd, [hdr, first], 0);
    if (n < HEADER_BYTES) return this.corrupt(file, 'truncated header');
    if (hdr.readUInt32LE(0) !== MAGIC || hdr.readUInt32LE(60) !== crc32c(hdr.subarray(0, 60)) || hdr.toString('hex', 16, 48) !== name) {
      return this.corrupt(file, 'bad header');
    }
    const len = hdr.readUInt32LE(4);
    if (len > this.blockSize) return this.corrupt(file, 'bad length');
    if (len < need) return false; // a shorter prefix of the block: not enough, not corrupt
    if (n < HEADER_BYTES + first.length) return this.corrupt(file, 'truncated data');
    let crc = crc32c(first);
    let rest: Buffer | undefined;
    if (len > first.length) {
      rest = Buffer.allocUnsafe(len - first.length);
      const m = await readP(fd, rest, HEADER_BYTES + first.length);
      if (m < rest.length) return this.corrupt(file, 'truncated data');
      crc = crc32c(rest, crc);
    }
    if (crc !== hdr.readUInt32LE(8)) return this.corrupt(file, 'checksum mismatch');
    if (!direct) {
      const whole = rest ? Buffer.concat([first, rest]) : first;
      whole.copy(dst, 0, offset, need);
    }
    return true;
  }

  private corrupt(file: string, why: string): false {
    this.stats.checksumFailures++;
    diskCacheChecksumFailures.inc();
    log.warn({ file, why }, 'disk tier: bad block discarded; reading it from S3');
    unlink(file).catch(() => undefined);
    return false;
  }

  private miss(): void {
    this.stats.misses++;
    diskCacheMisses.inc();
  }

  /**
   * Queues a block (a prefix of it: data.length <= blockSize) to be written in the
   * background. Copies `data` unless `owned` (the caller gives it up). Dropped, never
   * waited for, when the queue is full, the tier is closed, or writes are paused.
   */
  write(id: DiskBlockId, data: Buffer, owned = false): void {
    if (data.length === 0 || data.length > this.blockSize) return;
    if (this.closed || this.queuedBytes + data.length > WRITE_QUEUE_BYTES || Date.now() < this.pausedUntil) {
      this.skip(this.closed ? 'closed' : Date.now() < this.pausedUntil ? 'no_space' : 'queue_full');
      return;
    }
    const copy = owned ? data : Buffer.from(data);
    this.queue.push({ name: blockName(id, this.blockSize), data: copy });
    this.queuedBytes += copy.length;
    this.pump();
  }

  /** Whether the write queue has room for `bytes` more (callers skip the copy when not). */
  hasRoom(bytes: number): boolean {
    return !this.closed && this.queuedBytes + bytes <= WRITE_QUEUE_BYTES && Date.now() >= this.pausedUntil;
  }

  /**
   * Keeps an object's blocks from this process's eviction while it is open (a FastFile
   * handle, a Pipe or File mode transfer). Returns the matching unpin.
   */
  pin(ns: string, key: string, etag: string, size: number, versionId?: string): () => void {
    const names: string[] = [];
    const blocks = Math.ceil(size / this.blockSize);
    for (let i = 0; i < blocks; i++) names.push(blockName(versionId !== undefined ? { ns, key, etag, versionId, index: i } : { ns, key, etag, index: i }, this.blockSize));
    for (const n of names) this.pins.set(n, (this.pins.get(n) ?? 0) + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      for (const n of names) {
        const c = (this.pins.get(n) ?? 1) - 1;
        if (c <= 0) this.pins.delete(n);
        else this.pins.set(n, c);
      }
    };
  }

  /** Resolves once every queued write has finished (for tests and close()). */
  async flush(): Promise<void> {
    while (this.queue.length > 0 || this.writing > 0) await new Promise<void>((r) => this.idle.push(r));
  }

  /** Finishes queued writes, gives the unused grant back, and closes the lock. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    await this.flush();
    this.closed = true;
    await this.lock.with(async () => {
      const l = await this.loadLedger(false);
      l.files += this.consumed;
      delete l.grants[process.pid];
      this.consumed = 0;
      this.left = 0;
      await this.saveLedger(l);
    }).catch((err: unknown) => log.warn({ err }, 'disk tier: could not update the ledger at close (the next process recounts)'));
    this.lock.close();
    diskCacheCapacityBytes.dec(this.maxBytes);
  }

  /** Bytes of block files and grants as the ledger says (runs a locked read). */
  async usedBytes(): Promise<number> {
    const r = await this.lock.with(async () => {
      const l = await this.loadLedger(false);
      return l.files + this.consumed + Object.values(l.grants).reduce((a, b) => a + b, 0);
    });
    return r?.value ?? this.reportedUsed;
  }

  /** Recounts the block files on disk (bytes, files), without the lock: for tests and `status`. */
  async scanBytes(): Promise<{ bytes: number; files: number }> {
    const s = await this.scan(false);
    return { bytes: s.bytes, files: s.files };
  }

  // ---- writing ----

  private skip(reason: string): void {
    this.stats.skipped++;
    diskCacheWriteSkipped.inc({ reason });
  }

  private pump(): void {
    while (this.writing < WRITE_CONCURRENCY && this.queue.length > 0) {
      const job = this.queue.shift()!;
      this.writing++;
      this.writeOne(job).catch((err: unknown) => {
        this.skip('error');
        log.debug({ err }, 'disk tier write failed');
      }).finally(() => {
        this.writing--;
        this.queuedBytes -= job.data.length;
        this.pump();
        if (this.writing === 0 && this.queue.length === 0) for (const r of this.idle.splice(0)) r();
      });
    }
  }

  private async writeOne(job: WriteJob): Promise<void> {
    // Token bucket: the write may start once the bytes before it have had their time.
    const now = Date.now();
    this.paceAt = Math.max(now, this.paceAt) + (job.data.length / this.writeRate) * 1000;
    const wait = this.paceAt - now - (job.data.length / this.writeRate) * 1000;
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const size = alloc(job.data.length);
    if (this.left < size) {
      this.refilling ??= this.refill().finally(() => { this.refilling = undefined; });
      await this.refilling;
      if (this.left < size) {
        this.skip('no_space');
        return;
      }
    }
    this.left -= size;
    const hdr = Buffer.alloc(HEADER_BYTES);
    hdr.writeUInt32LE(MAGIC, 0);
    hdr.writeUInt32LE(job.data.length, 4);
    hdr.writeUInt32LE(crc32c(job.data), 8);
    hdr.write(job.name, 16, 'hex');
    hdr.writeUInt32LE(crc32c(hdr.subarray(0, 60)), 60);
    const tmp = path.join(this.tmpDir, `${process.pid}-${this.tmpSeq++}`);
    let fd: number | undefined;
    try {
      fd = await openP(tmp, 'wx');
      const bufs = [hdr, job.data];
      const total = HEADER_BYTES + job.data.length;
      let done = 0;
      while (done < total) {
        const n = await new Promise<number>((res, rej) => writev(fd!, bufs, done, (e, w) => (e ? rej(e) : res(w))));
        if (n <= 0) throw new Error('writev wrote nothing');
        done += n;
        if (done < total) dropFront(bufs, n);
      }
      await closeP(fd);
      fd = undefined;
      await rename(tmp, this.fileOf(job.name));
      this.consumed += size;
      this.stats.written++;
      this.stats.writtenBytes += job.data.length;
      diskCacheWrittenBytes.inc(job.data.length);
    } catch (err) {
      this.left += size; // nothing (kept) was written
      if (fd !== undefined) closeSync(fd);
      await unlink(tmp).catch(() => undefined);
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
        // The folder was removed under us (by hand, or a cleanup): make it again for the next blocks.
        try {
          mkdirSync(this.tmpDir, { recursive: true });
          mkdirSync(path.dirname(this.fileOf(job.name)), { recursive: true });
          for (let i = 0; i < 256; i++) mkdirSync(path.join(this.blocksDir, i.toString(16).padStart(2, '0')), { recursive: true });
        } catch {
          /* still unusable: the next write fails the same way and is counted */
        }
      }
      if ((err as NodeJS.ErrnoException).code === 'ENOSPC' || (err as NodeJS.ErrnoException).code === 'EDQUOT') {
        this.pausedUntil = Date.now() + ENOSPC_PAUSE_MS;
        this.skip('no_space');
        return;
      }
      throw err;
    }
  }

  /** Takes a new grant from the ledger (evicting if the bound needs it). Leaves `left` 0 when none could be had. */
  private async refill(): Promise<void> {
    const r = await this.lock.with(async () => {
      const l = await this.loadLedger(false);
      l.files += this.consumed;
      this.consumed = 0;
      this.left = 0;
      delete l.grants[process.pid];
      let grant = this.grantBytes;
      const free = await this.freeBytes(this.root).catch(() => 0);
      if (free - grant < MIN_FREE_BYTES) grant = 0;
      if (grant > 0) {
        await this.fit(l, grant);
        if (l.files + sumGrants(l) + grant > this.maxBytes) grant = 0;
      }
      if (grant > 0) l.grants[process.pid] = grant;
      await this.saveLedger(l);
      return grant;
    });
    if (!r) {
      this.skip('lock_busy');
      return;
    }
    this.left = r.value;
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
    for (const [pid, bytes] of Object.entries(l?.grants ?? {})) {
      if (Number(pid) !== process.pid && !pidAlive(Number(pid))) rescan = true; // its writes are not in `files`
      else grants[pid] = bytes;
    }
    if (!rescan) return { ...l!, grants };
    const s = await this.scan(true);
    this.candidates = s.oldest;
    // A rescan counts what this process wrote too.
    this.consumed = 0;
    return { version: 1, files: s.bytes, grants, scannedAt: Date.now() };
  }

  private async saveLedger(l: Ledger): Promise<void> {
    const tmp = path.join(this.tmpDir, `ledger-${process.pid}`);
    await writeFile(tmp, JSON.stringify(l));
    await rename(tmp, this.ledgerFile);
    this.reportedUsed = l.files + sumGrants(l);
    diskCacheUsedBytes.set(this.reportedUsed);
  }

  /** Evicts least recently used blocks until files + grants + `extra` is at most LOW_WATER of the bound (or nothing is left to evict). */
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
      if (this.pins.has(c.name)) continue;
      const st = await stat(c.file).catch(() => undefined);
      if (!st || st.mtimeMs > c.mtimeMs) continue; // gone, or used since the scan: no longer among the oldest
      try {
        await unlink(c.file);
      } catch {
        continue;
      }
      l.files = Math.max(0, l.files - c.alloc);
      this.stats.evictions++;
      diskCacheEvictions.inc();
    }
  }

  /** Counts block files; keeps the CANDIDATES_KEPT oldest; with `cleanTmp`, deletes tmp files of dead pids. */
  private async scan(cleanTmp: boolean): Promise<{ bytes: number; files: number; oldest: Candidate[] }> {
    let bytes = 0;
    let files = 0;
    let oldest: Candidate[] = [];
    for (let i = 0; i < 256; i++) {
      const sub = path.join(this.blocksDir, i.toString(16).padStart(2, '0'));
      const names = await readdir(sub).catch(() => [] as string[]);
      const here: Candidate[] = [];
      for (const name of names) {
        if (!/^[0-9a-f]{64}$/.test(name)) continue; // not ours: neither counted nor deleted
        const file = path.join(sub, name);
        const st = await stat(file).catch(() => undefined);
        if (!st?.isFile()) continue;
        const a = Math.ceil(st.size / PAGE) * PAGE;
        bytes += a;
        files++;
        here.push({ file, name, mtimeMs: st.mtimeMs, alloc: a });
      }
      if (here.length > 0) {
        oldest = oldest.concat(here).sort((x, y) => x.mtimeMs - y.mtimeMs);
        if (oldest.length > CANDIDATES_KEPT) oldest.length = CANDIDATES_KEPT;
      }
    }
    if (cleanTmp) {
      for (const name of await readdir(this.tmpDir).catch(() => [] as string[])) {
        const pid = Number(/^(?:ledger-)?(\d+)/.exec(name)?.[1]);
        if (Number.isInteger(pid) && pid !== process.pid && !pidAlive(pid)) await rm(path.join(this.tmpDir, name), { force: true });
      }
    }
    return { bytes, files, oldest };
  }

  private fileOf(name: string): string {
    return path.join(this.blocksDir, name.slice(0, 2), name);
  }

  /**
   * A hit makes the block recent for LRU: its mtime is set to now, at most once per
   * TOUCH_INTERVAL_MS per block, through the fd already open (futimes: one syscall on the
   * event loop; utimes by path through the libuv pool cost ~2x the CPU of the read itself).
   */
  private touch(name: string, fd: number): void {
    const now = Date.now();
    const last = this.touched.get(name);
    if (last !== undefined && now - last < TOUCH_INTERVAL_MS) return;
    this.touched.set(name, now);
    const t = now / 1000;
    try {
      futimesSync(fd, t, t);
    } catch {
      /* a read-only or odd filesystem: LRU age stays the write time */
    }
  }

}

function sumGrants(l: Ledger): number {
  let s = 0;
  for (const v of Object.values(l.grants)) s += v;
  return s;
}

async function readLedger(file: string): Promise<Ledger | undefined> {
  try {
    const l = JSON.parse(await readFile(file, 'utf8')) as Ledger;
    if (l.version !== 1 || !Number.isSafeInteger(l.files) || typeof l.grants !== 'object' || l.grants === null || !Number.isFinite(l.scannedAt)) return undefined;
    return l;
  } catch {
    return undefined;
  }
}

/** Drops the first `n` bytes of `bufs` in place. */
function dropFront(bufs: Buffer[], n: number): void {
  while (n > 0 && bufs.length > 0) {
    if (n >= bufs[0]!.length) n -= bufs.shift()!.length;
    else {
      bufs[0] = bufs[0]!.subarray(n);
      n = 0;
    }
  }
}
