/**
 * The disk tier: blocks of S3 objects kept on local disk (--cache-dir), under the memory
 * block cache, shared by every sluice process on the node and kept across restarts.
 *
 * Layout (DIR/sluice-tier-v2/), one cache file per object version:
 *   objects/XX/<h>       the object's bytes, sparse: block i at its own offset i * B, so a
 *                        whole-present file is the object, byte for byte (and a range of
 *                        blocks is one pread); XX = h's first two hex digits
 *   objects/XX/<h>.map   its sidecar: a 64-byte header, then one 8-byte entry per block
 *   tmp/ledger-<pid>     the ledger being replaced (write then rename)
 *   tmp/probe-<pid>      written and removed at open, to check the folder is writable
 *   ledger.json          bytes of cache files, and space granted to live writers
 *   lock                 flock(2) target guarding ledger.json and eviction
 * h = sha256 of (layout, block size, endpoint, bucket, key, ETag, version id). Blocks are
 * only ever found under the ETag they were fetched for, so an object changed in S3 (new
 * ETag) never reads old blocks; old versions simply age out by LRU. B = 256 KiB, the
 * memory cache's block (a random read costs no more from the tier than from S3).
 * Sidecar header (little-endian): magic "SLM2", block size u32, 8 reserved, the 32-byte h
 * (so a misplaced sidecar is refused), 12 reserved, CRC32C of the 60 bytes before it.
 * Entry i: stored length u32 (0: absent; < B: a prefix, e.g. the object's last block or a
 * GET that ended inside the block; a read needing more is a miss), CRC32C of those bytes.
 *
 * Checksum: CRC32C (@node-rs/crc32, SIMD): 0.16 CPU s/GiB measured here against 0.67 for
 * sha256; it catches every torn write, truncation and zeroing, and bit flips of up to 3
 * bits in a block. Every read from disk checks each block it returns against its entry;
 * a bad block's entry is zeroed, counted (sluice_disk_cache_checksum_failures_total) and
 * reported as a miss, so the caller fetches it from S3 again. Never served.
 *
 * Writes: a fetched run of blocks is queued as one run (writeRun: TieredClient hands over
 * a GET's whole buffer) and written in jobs of up to WRITE_RUN_BYTES: per job, one read of
 * the sidecar's entries (blocks already present are left alone), then, per run of missing
 * blocks, one pwrite of the bytes at first * B (block i is at i * B, so the run is
 * contiguous in the file) and, once every byte of it is written, one pwrite of the run's
 * entries: a block is marked present only after its bytes are written. Each block's
 * CRC32C is taken when the run is queued, from the bytes as fetched, so a buffer changed
 * before its job wrote it can only give a block that fails its CRC (never served). No
 * copy where the buffer can be held: a pooled GET buffer is kept from reuse by a
 * reference (RangeOptions.hold) until its job is done; only a caller's buffer that cannot
 * be held is copied. No rename, no fsync: a kill -9 between the two pwrites leaves bytes
 * without entries (absent, rewritten by the next GET), and between the entries' pages
 * at worst some entries of the run (each entry's block is whole already); a power loss
 * may leave an entry whose bytes never reached the disk, and its CRC catches that. Two
 * processes writing one block write the same bytes (same ETag), so their races are
 * harmless, and a torn entry fails its CRC. Correctness never rests on the sidecar being
 * right, only on the CRC: a lost sidecar makes the object absent; a sidecar paired with a
 * recreated data file fails its CRCs. Writes happen off the read path, in the background:
 * a queue of at most WRITE_QUEUE_BYTES (full: the run is not cached; never waits),
 * WRITE_CONCURRENCY jobs at once, paced by --cache-dir-write-rate. Small objects (one
 * block, written whole) not open here go to the pool in batches (native/src/tier_small.c
 * tierWriteSmall: per object the bytes, then header and entry in one pwrite) instead of ~7
 * fs calls each, every one a cross-thread wake (BENCHMARKS.md t14-small-write); a batch is
 * sent once SMALL_BATCH objects or WRITE_RUN_BYTES (at most a grant) are queued, a job of another kind queues
 * behind them, or SMALL_BATCH_WAIT_MS passed since the batch's first (t14-batch). They are
 * not kept open after.
 * What a GB of epoch 1
 * costs the writer (BENCHMARKS.md, t14-epoch1): ~256 jobs and ~750 syscalls, the CRCs
 * (~0.16 s), and the kernel's copy into the page cache, which dominates (1-3 CPU s/GB on
 * this kind of VM, whose fresh page-cache pages fault in the host; an O_DIRECT write from
 * the held, aligned buffer would cost ~0.02 s/GB but leave the tier out of the page cache
 * for the next epoch: not done, see BENCHMARKS.md).
 * Reads take few syscalls: a cache file's two fds stay open in this process (HANDLES_KEPT
 * objects, more while in use); a range of present blocks is one pread (entries: one small
 * pread of the sidecar). openWhole() is the whole-file fast path FastFile uses for a file
 * all of whose blocks are present: a ring of RING_WINDOWS buffers of WINDOW bytes, each
 * filled by one pread through the libuv pool and checked block by block (CRC) before any
 * byte of it is served, kept RING_AHEAD windows ahead of the reader and RING_BEHIND behind
 * (the kernel's readahead reads arrive out of order); a read whose window is in answers
 * synchronously, a copy with no promise, like a memory-cache hit. No memory cache, no
 * prefetcher, no S3 client (see WholeReader for the order rules and the measurements).
 * A file of one block (SMALL_FILE_MAX) takes openSmall() instead: read whole and checked
 * at open into a recycled buffer (SmallBuffers), its fds given back at once, every read a
 * copy. A folder of small files then costs per file two preads (entry, bytes), one CRC and
 * no allocation beyond a small reader object.
 *
 * Accounting across processes (the size bound holds for all of them together): writers
 * take space from ledger.json in grants of GRANT_BYTES under the lock, then write that
 * much without locking. ledger = { files: bytes of cache files, grants: { pid: bytes } }.
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
 * Why this layout (measured, BENCHMARKS.md "Disk tier"): v1 kept one file per block
 * (write to tmp, rename); a restarted job then read at 13-14% of the local-folder rate,
 * and even without FUSE reading many 256 KiB files ran at 61.8 MB/s: open + readv + read
 * + close and a path lookup per block, all through the libuv pool. One file per object
 * turns that into one pread per WINDOW and keeps the bytes where a later FUSE passthrough
 * can hand them to the kernel as they are.
 *
 * FUSE passthrough (Linux >= 6.9), built for small files: with this layout the backing
 * file exists already (the data file is the object at offset 0). libfuse 2 has no API for
 * it, so native/src/fuse_init.c asks for it in the INIT reply and rewrites the OPEN reply,
 * and native/src/fuse_memread.c decides per open (its design note: the kernel's rules for
 * mixing passthrough and other opens of one file). A small file is read and checked whole
 * at open (native/src/tier_small.c), then the kernel reads the cache file itself: no
 * per-read CRC, the price of passthrough (SEMANTICS.md). Eviction unlinks it safely (the
 * kernel holds the file). Larger whole-present files still go kernel -> sluice -> pread ->
 * kernel per read (WholeReader): passing them through would mean reading and checking the
 * whole file before the open returns (first-byte latency of a 128 MiB file from a cold
 * disk) and leaving its bytes unchecked for as long as it stays open; not done. `sluice
 * bench bench/scenarios/tier.yaml` measures what the FUSE hop costs (`restarted` through
 * the mount against `direct`, the same tier read in-process).
 */
import { createHash } from 'node:crypto';
import { closeSync, constants as fsc, existsSync, fstatSync, futimesSync, mkdirSync, open, openSync, read, readSync, statfs as statfsCb, unlinkSync as rmSyncFile, write, writeFileSync, writeSync } from 'node:fs';
import { readdir, readFile, rename, rm, stat, unlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { getSystemErrorName } from 'node:util';
import { crc32c } from '@node-rs/crc32';
import { LRUCache } from 'lru-cache';
import { InvalidArgumentError } from '../errors.js';
import { log } from '../log.js';
import {
  diskCacheCapacityBytes, diskCacheChecksumFailures, diskCacheEvictions, diskCacheHits, diskCacheMisses,
  diskCacheReadBytes, diskCacheUsedBytes, diskCacheWriteSkipped, diskCacheWrittenBytes,
} from '../metrics/metrics.js';
import { DiskLock, pidAlive } from './disk-lock.js';
import { tierOpenPairOp, tierWriteSmallOp, type TierOpenPair, type TierWriteSmall } from '../pipe/native.js';

/** Block size of the tier: the memory cache's largest block (src/fs/core.ts MAX_BLOCK_SIZE). */
export const DISK_BLOCK_SIZE = 256 * 1024;
/** Folder of this layout's version inside --cache-dir: a later format gets a new folder. */
export const TIER_FOLDER = 'sluice-tier-v2';
/** The previous layout's folder (one file per block): removed at open, its space given back. */
const OLD_TIER_FOLDERS = ['sluice-tier-v1'];
/** Sidecar header bytes; entry i is at HEADER_BYTES + ENTRY_BYTES * i. */
export const HEADER_BYTES = 64;
export const ENTRY_BYTES = 8;
const MAGIC = 0x324d4c53; // "SLM2" little-endian
/** Disk space is allocated in pages: a block is counted as its length rounded up to 4 KiB. */
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
/** Oldest objects a scan keeps as eviction candidates: enough for several grants' worth of eviction before the next scan. */
const CANDIDATES_KEPT = 8192;
/** A hit moves an object's sidecar mtime (its LRU age) at most once a minute: one futimes per object per minute. */
const TOUCH_INTERVAL_MS = 60_000;
/** Objects whose last touch is remembered (for TOUCH_INTERVAL_MS): 64 Ki x ~100 B. */
const TOUCH_MEMORY = 65_536;
/**
 * Bytes waiting to be written: 64 MiB, the tier's whole share of memory (held GET buffers
 * or, where the caller's buffer cannot be held, copies). Past it a run is not cached.
 */
export const WRITE_QUEUE_BYTES = 64 * 1024 * 1024;
/**
 * Largest write job: 4 MiB (16 blocks), one pwrite of the bytes and one of the entries.
 * A GET's run (up to --part-size, 8 MiB) is split into jobs of this size so one job holds
 * a pool thread for a few ms at most (a 4 MiB pwrite into the page cache), not the time
 * of a whole part; per GB that is ~256 jobs, ~750 syscalls, against ~16k when each
 * 256 KiB block was its own job (BENCHMARKS.md, t14-epoch1).
 */
export const WRITE_RUN_BYTES = 4 * 1024 * 1024;
/**
 * Jobs at once: 2. Each is one large pwrite on a libuv pool thread (4 threads): two keep
 * the page cache (and the NVMe behind it) fed at GB/s, and leave two threads to reads
 * (openWhole's windows) even when the kernel throttles dirty pages and a write blocks.
 */
const WRITE_CONCURRENCY = 2;
/**
 * Small objects per batch: at most 32 (the addon takes up to 64). At the 300-2,000 small
 * files/s of an epoch 1 on S3, SMALL_BATCH_WAIT_MS gathers 6-32 of them, so a pool thread
 * and Node's thread wake once per batch instead of once per file (t14-batch); more would
 * only lengthen the time one pool thread is held.
 */
const SMALL_BATCH = 32;
/**
 * How long a small object may wait for others to join its batch: 20 ms, nothing beside an
 * epoch, and the bytes are in the memory cache meanwhile; a reader who re-reads the file
 * in that time is served from there. Below ~50 files/s a batch is mostly one object.
 */
const SMALL_BATCH_WAIT_MS = 20;
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
/** Cache files whose fds stay open when no read or write uses them: 64 x 2 fds, far below any fd limit, and a reader of a folder of small files reuses them within an epoch's working set. */
const HANDLES_KEPT = 64;
/**
 * openWhole's window, its unit of read and verification: 1 MiB (4 blocks), one pread and 4
 * CRCs per 8 kernel reads of 128 KiB. Larger windows gained nothing measurable
 * (BENCHMARKS.md "Disk tier v2"); smaller ones cost a trip through the libuv pool per
 * fewer bytes.
 */
export const WINDOW = 4 * DISK_BLOCK_SIZE;
/**
 * Windows a reader keeps behind the furthest window it has been asked for, for reads
 * that arrive late. The kernel sends a FUSE file system at most max_background (12)
 * readahead requests at once, of 128 KiB each, and libfuse's threads hand them to us in
 * any order: a read can trail the furthest one by up to 12 x 128 KiB = 1.5 MiB, whatever
 * the readahead size. 2 windows cover that; a read further behind is still served (alone,
 * one pread of its blocks), just not from the ring.
 */
export const RING_BEHIND = 2;
/**
 * Windows read ahead of the furthest one asked for: 5 MiB. At 1 GB/s a window lasts ~1 ms,
 * and a 1 MiB pread through the pool takes 0.1-0.3 ms from the page cache and ~0.5-1 ms
 * from NVMe, so five in hand keep a sequential reader from ever waiting on the disk, and
 * all four pool threads can be busy at once when a stream starts.
 */
export const RING_AHEAD = 5;
/** A large file's ring: behind + the current window + ahead = 8 windows, 8 MiB. */
export const RING_WINDOWS = RING_BEHIND + 1 + RING_AHEAD;
/** The smallest ring worth having when the budget is short: 1 window ahead. Below that the file is read the usual way. */
const RING_MIN = RING_BEHIND + 2;
/**
 * Window buffers of all openWhole() files together (in use and kept for reuse): 64 MiB,
 * 8 large files read at full ring at once (then rings of RING_MIN, 16 files); past it a
 * file is read the usual way (memory cache, from the tier block by block).
 */
export const WHOLE_BUFFER_BYTES = 64 * 1024 * 1024;
/**
 * Idle window buffers kept for the next large file (two rings): a new buffer costs a page
 * fault per 4 KiB on first touch, ~0.1 CPU s per GB of new buffer on this VM, which a
 * reader opening file after file would pay per byte read. Beyond this they go to the GC.
 */
const WINDOW_POOL_KEEP = 2 * RING_WINDOWS;
/**
 * A window this small is read synchronously: a page-cache-hot 256 KiB pread takes ~20 us
 * on the event loop, less than a trip through the libuv pool and a promise. Larger
 * windows go through the pool, read ahead of the reader.
 */
const SYNC_READ_MAX = DISK_BLOCK_SIZE;
/**
 * openWhole's small-file branch (openSmall): a file of at most one block is read whole at
 * open, synchronously (one pread of at most SYNC_READ_MAX, its one CRC), into a pooled
 * buffer, and its reads are copies from it: no window, no fd held while it is open.
 */
const SMALL_FILE_MAX = DISK_BLOCK_SIZE;
/**
 * Buffers of small files open at once, in use and kept for reuse together: 16 MiB (256
 * files of 40 KB, 64 of one block). Past it a file is read the usual way.
 */
const SMALL_BUFFER_BYTES = 16 * 1024 * 1024;
/** Smallest pooled buffer (a page); classes double up to SMALL_FILE_MAX, so a file wastes less than half its buffer. */
const SMALL_MIN_BUFFER = 4096;

export interface DiskObjectId {
  /** Where the object lives: endpoint and bucket (TieredClient makes it). */
  ns: string;
  key: string;
  etag: string;
  versionId?: string;
}

export interface DiskBlockId extends DiskObjectId {
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
  /** Test hook: called right before each write syscall of the writer (bytes of a run, or its entries). */
  onWrite?: (e: WriteEvent) => void;
  /** --cache-dir-direct-write: whole blocks are written with O_DIRECT where the buffer and filesystem allow it. */
  directWrite?: boolean;
}

export interface DiskCacheStats {
  hits: number;
  misses: number;
  checksumFailures: number;
  written: number;
  writtenBytes: number;
  evictions: number;
  skipped: number;
  /** Write syscalls of block bytes (one per run of blocks) and of sidecar entries (one per run). */
  dataWrites: number;
  entryWrites: number;
  /** Bytes written with O_DIRECT (--cache-dir-direct-write). */
  directBytes: number;
  /** Batches of small objects sent to the addon (tierWriteSmall), each one trip to the pool. */
  smallBatches: number;
}

/** A whole-present object read straight from its cache file (openWhole). */
export interface WholeFile {
  /**
   * Fills dst[0..n) with the object's bytes at `position` (n < length only at its end),
   * verified. A number when the bytes were in a window already; -1 (or a promise of it)
   * when a block failed its CRC: the caller reads the usual way from then on.
   */
  read(dst: Buffer, length: number, position: number): number | Promise<number>;
  close(): void;
  /**
   * The whole file's verified bytes (exactly its size), when the reader holds them all in
   * memory until close() (openSmall's): reads may be answered from them elsewhere (the FUSE
   * thread, native/src/fuse_memread.c) as long as that stops before close().
   */
  readonly bytes?: Buffer;
  /** What the reader did so far (tests, bench): see WholeStats (the ring reader; openSmall's has none). */
  readonly stats?: WholeStats;
}

/** A whole-file reader's counts. */
export interface WholeStats {
  /** Reads answered (any path) and their bytes. */
  reads: number;
  bytes: number;
  /** Reads that had to wait for a window being read (a promise), and reads served alone (one pread of their blocks, outside the ring). */
  waited: number;
  strays: number;
  /** Bytes read from the cache file (each verified once): bytes / preadBytes is the read amplification. */
  preadBytes: number;
}

interface Ledger {
  version: 2;
  files: number;
  grants: Record<string, number>;
  scannedAt: number;
}

interface Candidate { name: string; dir: string; mtimeMs: number; alloc: number }

/**
 * Blocks [first, first + crcs.length) of one object to write: `data` holds them back to
 * back (the last may be a prefix); each block's CRC32C was taken when queued, from the
 * bytes as fetched. `release` gives back the caller's buffer (a held GET buffer) once the
 * job is done or dropped.
 */
interface WriteJob { name: string; first: number; data: Buffer; crcs: number[]; release: (() => void) | undefined }

/** Test hook of DiskCacheOptions.onWrite: what the writer is about to write, and where. */
export type WriteEvent = { what: 'data' | 'entries'; file: string; first: number; blocks: number; bytes: number };

/** An open cache file: its data and sidecar fds, shared by reads and writes of this process. */
interface Handle {
  name: string;
  data: number;
  map: number;
  /** Reads and writes using the fds now; they are closed only at 0 once dropped. */
  refs: number;
  dropped: boolean;
  /** The data file opened O_DIRECT for the writer (--cache-dir-direct-write), once it has written. */
  direct?: number | undefined;
}

const pageUp = (n: number) => Math.ceil(n / PAGE) * PAGE;
/** Space a small job may take from the grant: its block and a sidecar page (what writeJob reserves for one block). */
const smallSize = (job: WriteJob) => PAGE + pageUp(job.data.length);
const EBADMSG = os.constants.errno.EBADMSG;
/** A Node-style system error for a negative errno from the addon (code 'ENOSPC', ...). */
function errnoError(neg: number, what: string): NodeJS.ErrnoException {
  const code = getSystemErrorName(neg);
  return Object.assign(new Error(`${what}: ${code}`), { code, errno: neg });
}
const O_RW_CREATE = fsc.O_RDWR | fsc.O_CREAT;

/** The cache file name (hex sha256) of an object version. */
export function objectName(id: DiskObjectId, blockSize = DISK_BLOCK_SIZE): string {
  // NUL cannot appear in any field (keys are checked, ETags are quoted hex), so they cannot run together.
  return createHash('sha256').update(`v2\0${blockSize}\0${id.ns}\0${id.key}\0${id.etag}\0${id.versionId ?? ''}`).digest('hex');
}

/** Free bytes for an unprivileged writer on the filesystem of `dir`. */
function statfsFree(dir: string): Promise<number> {
  return new Promise((resolve, reject) => statfsCb(dir, (err, s) => (err ? reject(err) : resolve(s.bavail * s.bsize))));
}

const openP = (file: string, flags: number) => new Promise<number>((res, rej) => open(file, flags, 0o644, (e, fd) => (e ? rej(e) : res(fd))));
const preadP = (fd: number, buf: Buffer, pos: number) => new Promise<number>((res, rej) => read(fd, buf, 0, buf.length, pos, (e, n) => (e ? rej(e) : res(n))));
const pwriteP = (fd: number, buf: Buffer, pos: number) => new Promise<number>((res, rej) => write(fd, buf, 0, buf.length, pos, (e, n) => (e ? rej(e) : res(n))));

/** Reads until `buf` is full or the file ends; returns the bytes read. */
async function preadFull(fd: number, buf: Buffer, pos: number): Promise<number> {
  let done = 0;
  while (done < buf.length) {
    const n = await preadP(fd, buf.subarray(done), pos + done);
    if (n === 0) break;
    done += n;
  }
  return done;
}

/** preadFull(), synchronously. */
function preadFullSync(fd: number, buf: Buffer, pos: number): number {
  let done = 0;
  while (done < buf.length) {
    const n = readSync(fd, buf, done, buf.length - done, pos + done);
    if (n === 0) break;
    done += n;
  }
  return done;
}

/**
 * TierOpenPair (src/pipe/native.ts) through Node's fs, for when the addon is absent: cache
 * file `file` and its sidecar opened O_RDWR into fds, up to HEADER_BYTES of the header read;
 * the bytes read, or -1 with nothing left open.
 */
function openPairSync(file: string, fds: Int32Array, header: Buffer): number {
  let data: number | undefined;
  let map: number | undefined;
  try {
    data = openSync(file, fsc.O_RDWR);
    map = openSync(`${file}.map`, fsc.O_RDWR);
    const got = preadFullSync(map, header.subarray(0, HEADER_BYTES), 0);
    fds[0] = data;
    fds[1] = map;
    return got;
  } catch {
    if (data !== undefined) closeSync(data);
    if (map !== undefined) closeSync(map);
    return -1;
  }
}

export class DiskCache {
  readonly blockSize = DISK_BLOCK_SIZE;
  readonly root: string;
  readonly maxBytes: number;
  readonly stats: DiskCacheStats = { hits: 0, misses: 0, checksumFailures: 0, written: 0, writtenBytes: 0, evictions: 0, skipped: 0, dataWrites: 0, entryWrites: 0, directBytes: 0, smallBatches: 0 };
  readonly grantBytes: number;
  /** openWhole() readers' counts, summed as they close. */
  readonly wholeStats: WholeStats = { reads: 0, bytes: 0, waited: 0, strays: 0, preadBytes: 0 };

  private readonly lock: DiskLock;
  private readonly objectsDir: string;
  private readonly tmpDir: string;
  private readonly freeBytes: (dir: string) => Promise<number>;
  private readonly writeRate: number;
  private readonly onWrite: ((e: WriteEvent) => void) | undefined;
  /** O_DIRECT writes: asked for, and not refused by the filesystem so far. */
  private direct: boolean;
  /** The one-hop writer of small objects (native/src/tier_small.c), unless the addon is absent or a test watches the writes (onWrite). */
  private readonly writeSmall: TierWriteSmall | undefined;
  /** The addon's opener for acquire() (a miss without an exception; openPairSync without the addon), and the fds it opens. */
  private readonly openPair: TierOpenPair | undefined = tierOpenPairOp();
  private readonly pairFds = new Int32Array(2);
  /** Buffers an O_DIRECT write refused (not aligned): written the ordinary way from then on. */
  private readonly unaligned = new WeakSet<ArrayBufferLike>();
  /** Grant left to write into, and bytes written from it (not yet in the ledger's files). */
  private left = 0;
  private consumed = 0;
  /** Bumped by each refill: a write's unused reservation goes back only into the grant it was taken from. */
  private grantSeq = 0;
  private refilling: Promise<number> | undefined;
  private candidates: Candidate[] = [];
  private readonly touched = new LRUCache<string, number>({ max: TOUCH_MEMORY });
  private readonly pins = new Map<string, number>();
  /** Open cache files, least recently used first. */
  private readonly handles = new Map<string, Handle>();
  /** Window buffers held by openWhole() readers, and idle WINDOW buffers kept for the next (WINDOW_POOL_KEEP). */
  private wholeBufferBytes = 0;
  private readonly windowPool: Buffer[] = [];
  /** Buffers of openSmall(), recycled (see SmallBuffers). */
  private readonly smallBuffers = new SmallBuffers(SMALL_BUFFER_BYTES);
  /** One sidecar entry, read by openSmall() (synchronously: never shared by two calls at once). */
  private readonly smallEntry = Buffer.alloc(ENTRY_BYTES);
  private readonly queue: WriteJob[] = [];
  private queuedBytes = 0;
  private writing = 0;
  /** Small objects at the queue's head wait for this timer to fill a batch (SMALL_BATCH_WAIT_MS). */
  private batchTimer: NodeJS.Timeout | undefined;
  private batchDue = false;
  /** flush() calls waiting: batches go at once. */
  private hurry = 0;
  private idle: (() => void)[] = [];
  private paceAt = 0;
  private pausedUntil = 0;
  private closed = false;
  /** Last used bytes seen in the ledger (files + grants), for the gauge. */
  private reportedUsed = 0;

  private constructor(dir: string, maxBytes: number, o: DiskCacheOptions) {
    this.root = path.join(dir, TIER_FOLDER);
    this.objectsDir = path.join(this.root, 'objects');
    this.tmpDir = path.join(this.root, 'tmp');
    this.maxBytes = maxBytes;
    this.lock = new DiskLock(this.root);
    this.freeBytes = o.freeBytes ?? statfsFree;
    this.writeRate = o.writeBytesPerSec;
    this.onWrite = o.onWrite;
    this.direct = o.directWrite === true;
    this.writeSmall = o.onWrite ? undefined : tierWriteSmallOp();
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
    // The folder itself is created when missing, but not a whole tree (issue 45): a typo in
    // --cache-dir must not leave folders on a disk the user never meant.
    const dir = path.resolve(o.dir);
    if (!existsSync(dir) && !existsSync(path.dirname(dir))) {
      throw new InvalidArgumentError(`--cache-dir ${o.dir}: its parent folder ${path.dirname(dir)} does not exist`, { hint: 'Create the parent first, or point --cache-dir at a folder on a local disk (e.g. the instance NVMe)' });
    }
    try {
      mkdirSync(dir, { recursive: false, mode: 0o755 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') {
        throw new InvalidArgumentError(`--cache-dir ${o.dir} cannot be created: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, { hint: 'Point --cache-dir at a local folder sluice may write to (e.g. on the instance NVMe), or leave it unset' });
      }
    }
    try {
      makeFolders(root);
      const probe = path.join(root, 'tmp', `probe-${process.pid}`);
      writeFileSync(probe, '');
      await unlink(probe);
    } catch (err) {
      throw new InvalidArgumentError(`--cache-dir ${o.dir} is not a writable folder: ${(err as Error).message}`, { hint: 'Point --cache-dir at a local folder sluice may write to (e.g. on the instance NVMe), or leave it unset' });
    }
    if (!(Number.isSafeInteger(o.writeBytesPerSec) && o.writeBytesPerSec > 0)) throw new InvalidArgumentError(`--cache-dir-write-rate must be > 0, got ${o.writeBytesPerSec}`);
    for (const old of OLD_TIER_FOLDERS) {
      // An earlier sluice's layout: its files are not counted by this one, so give their space back.
      rm(path.join(o.dir, old), { recursive: true, force: true }).catch(() => undefined);
    }
    let maxBytes = o.maxBytes;
    if (maxBytes === undefined) {
      const free = await (o.freeBytes ?? statfsFree)(o.dir);
      const ledger = await readLedger(path.join(root, 'ledger.json'));
      // At least DEFAULT_MIN_BYTES, so a nearly full disk still starts (no grant is made below MIN_FREE_BYTES free anyway).
      maxBytes = Math.max(DEFAULT_MIN_BYTES, Math.floor(Math.max(0, free - MIN_FREE_BYTES) * DEFAULT_FREE_SHARE) + (ledger?.files ?? 0));
    }
    if (!(Number.isSafeInteger(maxBytes) && maxBytes >= 2 * PAGE)) {
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

  /** Bytes of window buffers openWhole() readers hold now (at most WHOLE_BUFFER_BYTES). */
  get wholeBufferInUse(): number {
    return this.wholeBufferBytes;
  }

  /** Bytes of openSmall()'s buffers: in use by open files, and allocated (in use or kept for reuse). For tests. */
  get smallBufferBytes(): { inUse: number; allocated: number } {
    return { inUse: this.smallBuffers.inUse, allocated: this.smallBuffers.allocated };
  }

  /** The lock in use ('flock' through the addon, or the 'pidfile' fallback). */
  get lockKind(): string {
    return this.lock.kind;
  }

  /** The folder of the cache files (objects/XX/<h>), for readers outside this class (native/src/tier_small.c). */
  get objectsFolder(): string {
    return path.resolve(this.objectsDir);
  }

  /** Counts `blocks` blocks (`bytes` in all) read and verified outside this class (native/src/tier_small.c), as hits. */
  countHitsElsewhere(blocks: number, bytes: number): void {
    if (blocks <= 0) return;
    this.stats.hits += blocks;
    diskCacheHits.inc(blocks);
    diskCacheReadBytes.inc(bytes);
  }

  /** Paths of an object's cache file and sidecar (for tests and tools). */
  filesOf(id: DiskObjectId): { data: string; map: string } {
    const name = objectName(id, this.blockSize);
    const data = this.fileOf(name);
    return { data, map: `${data}.map` };
  }

  /**
   * Fills `dst` with bytes [offset, offset + dst.length) of the block, verified. Returns
   * false (a miss) when the block is absent, holds fewer bytes, or fails its checksum.
   * Never throws: a disk error is a miss. `dst` may be written to even on a miss.
   */
  async readInto(id: DiskBlockId, dst: Buffer, offset = 0): Promise<boolean> {
    const start = id.index * this.blockSize + offset;
    if (dst.length === 0 || offset + dst.length > this.blockSize) return false;
    return (await this.readRange(id, start, start + dst.length, dst))[0]!;
  }

  /**
   * Fills out[0..end - start) with the object's bytes [start, end) where the tier has them:
   * one verified pread per run of present blocks. Returns, per block from floor(start / B)
   * to floor((end - 1) / B), whether its part of `out` was filled. Never throws.
   */
  async readRange(id: DiskObjectId, start: number, end: number, out: Buffer): Promise<boolean[]> {
    const B = this.blockSize;
    const first = Math.floor(start / B);
    const n = Math.floor((end - 1) / B) - first + 1;
    const found = new Array<boolean>(n).fill(false);
    const h = this.acquire(objectName(id, B));
    if (h) {
      try {
        await this.readRuns(h, first, n, start, end, out, found);
      } catch (err) {
        log.debug({ err, object: h.name }, 'disk tier read failed; reading from S3');
      } finally {
        this.release(h);
      }
    }
    let hits = 0;
    for (const f of found) if (f) hits++;
    this.stats.hits += hits;
    this.stats.misses += n - hits;
    if (hits > 0) diskCacheHits.inc(hits);
    if (hits < n) diskCacheMisses.inc(n - hits);
    return found;
  }

  private async readRuns(h: Handle, first: number, n: number, start: number, end: number, out: Buffer, found: boolean[]): Promise<void> {
    const B = this.blockSize;
    const ents = this.entries(h, first, n);
    const len = (i: number) => ents.readUInt32LE(i * ENTRY_BYTES);
    const need = (i: number) => Math.min(end, (first + i + 1) * B) - (first + i) * B;
    let read = 0;
    for (let i = 0; i < n; i++) {
      if (len(i) < need(i) || len(i) > B) continue;
      let j = i;
      while (j + 1 < n && len(j) === B && len(j + 1) >= need(j + 1) && len(j + 1) <= B) j++;
      const a = (first + i) * B;
      const b = (first + j) * B + len(j);
      // Straight into `out` when the run lies within it; else through a scratch buffer.
      const direct = a >= start && b <= end;
      const buf = direct ? out.subarray(a - start, b - start) : Buffer.allocUnsafe(b - a);
      const got = await preadFull(h.data, buf, a);
      for (let k = i; k <= j; k++) {
        const at = (k - i) * B;
        const l = len(k);
        if (got < at + l) {
          this.corrupt(h, first + k, 'truncated data');
          continue;
        }
        if (crc32c(buf.subarray(at, at + l)) !== ents.readUInt32LE(k * ENTRY_BYTES + 4)) {
          this.corrupt(h, first + k, 'checksum mismatch');
          continue;
        }
        if (!direct) {
          const from = Math.max(start, a + at);
          const to = Math.min(end, a + at + l);
          buf.copy(out, from - start, from - a, to - a);
        }
        found[k] = true;
        read += Math.min(end, a + at + B) - Math.max(start, a + at);
      }
      i = j;
    }
    if (read > 0) {
      diskCacheReadBytes.inc(read);
      this.touch(h);
    }
  }

  /**
   * The whole-file fast path: a reader of the object's cache file when every one of its
   * blocks is present (entries say so; each window is still verified as it is read), else
   * undefined (as when the buffer budget is spent). Holds the fds until close().
   */
  openWhole(id: DiskObjectId, size: number): WholeFile | undefined {
    const B = this.blockSize;
    if (this.closed || size <= 0) return undefined;
    if (size <= SMALL_FILE_MAX) return this.openSmall(id, size);
    const n = Math.ceil(size / B);
    // One window for a file that fits one (its own buffer, its size); else a ring of pooled windows.
    const windows = Math.ceil(size / WINDOW);
    const single = windows === 1 ? n * B : 0;
    const ring = single ? 1 : [Math.min(RING_WINDOWS, windows), Math.min(RING_MIN, windows)].find((k) => this.wholeBufferBytes + k * WINDOW <= WHOLE_BUFFER_BYTES);
    if (ring === undefined || this.wholeBufferBytes + (single || ring * WINDOW) > WHOLE_BUFFER_BYTES) return undefined;
    const h = this.acquire(objectName(id, B));
    if (!h) return undefined;
    let ents: Buffer;
    try {
      ents = this.entries(h, 0, n);
    } catch {
      this.release(h);
      return undefined;
    }
    for (let i = 0; i < n; i++) {
      if (ents.readUInt32LE(i * ENTRY_BYTES) !== Math.min(B, size - i * B)) {
        this.release(h);
        return undefined;
      }
    }
    const bytes = single || ring * WINDOW;
    this.wholeBufferBytes += bytes;
    const bufs = single ? [Buffer.allocUnsafe(single)] : Array.from({ length: ring }, () => this.windowPool.pop() ?? Buffer.allocUnsafeSlow(WINDOW));
    return new WholeReader(this, h, ents, size, single || WINDOW, bufs, (st) => {
      for (const k of Object.keys(st) as (keyof WholeStats)[]) this.wholeStats[k] += st[k];
      log.debug({ object: h.name, size, ...st }, 'disk tier: whole-file reader closed');
      this.wholeBufferBytes -= bytes;
      if (!single) for (const b of bufs) if (this.windowPool.length < WINDOW_POOL_KEEP) this.windowPool.push(b);
      this.release(h);
    });
  }

  /**
   * openWhole() for a file of one block: its entry and its bytes read now (two preads on a
   * kept cache file), checked against the entry's CRC, into a pooled buffer; the fds go back
   * at once. Undefined when the block is absent or short (a miss), bad (zeroed and counted,
   * as any bad block: the caller fetches it again), or the buffer budget is spent.
   */
  private openSmall(id: DiskObjectId, size: number): WholeFile | undefined {
    const buf = this.smallBuffers.take(size);
    if (!buf) return undefined;
    const h = this.acquire(objectName(id, this.blockSize));
    if (!h) {
      this.smallBuffers.give(buf);
      return undefined;
    }
    let ok = false;
    try {
      const ent = this.smallEntry;
      ok = preadFullSync(h.map, ent, HEADER_BYTES) === ENTRY_BYTES && ent.readUInt32LE(0) === size;
      if (ok) {
        const crc = ent.readUInt32LE(4);
        const bytes = size === buf.length ? buf : buf.subarray(0, size);
        if (preadFullSync(h.data, bytes, 0) < size) ok = this.corrupt(h, 0, 'truncated data');
        else if (crc32c(bytes) !== crc) ok = this.corrupt(h, 0, 'checksum mismatch');
      }
    } catch {
      ok = false;
    } finally {
      if (ok) {
        this.stats.hits++;
        diskCacheHits.inc(1);
        diskCacheReadBytes.inc(size);
        this.touch(h);
      }
      this.release(h);
    }
    if (!ok) {
      this.smallBuffers.give(buf);
      return undefined;
    }
    return new SmallFile(buf, size, this.smallBuffers);
  }

  /** Checks blocks [first, first + count) of `buf` (read from block `first`) against `ents`; false after zeroing the first bad one. (WholeReader) */
  verifyWindow(h: Handle, ents: Buffer, first: number, count: number, buf: Buffer, got: number, size: number): boolean {
    const B = this.blockSize;
    for (let k = 0; k < count; k++) {
      const i = first + k;
      const l = Math.min(B, size - i * B);
      if (got < k * B + l) return this.corrupt(h, i, 'truncated data');
      if (crc32c(buf.subarray(k * B, k * B + l)) !== ents.readUInt32LE(i * ENTRY_BYTES + 4)) return this.corrupt(h, i, 'checksum mismatch');
    }
    this.stats.hits += count;
    diskCacheHits.inc(count);
    diskCacheReadBytes.inc(Math.min(got, size - first * B));
    this.touch(h);
    return true;
  }

  /** Entries [first, first + n) of the sidecar, read now (other processes add blocks); absent ones are zero. */
  private entries(h: Handle, first: number, n: number): Buffer {
    const ents = Buffer.alloc(n * ENTRY_BYTES);
    preadFullSync(h.map, ents, HEADER_BYTES + first * ENTRY_BYTES);
    return ents;
  }

  /** A block that failed its check: its entry is zeroed (so nobody serves it), counted, reported as a miss. */
  private corrupt(h: Handle, index: number, why: string): false {
    this.stats.checksumFailures++;
    diskCacheChecksumFailures.inc();
    log.warn({ file: this.fileOf(h.name), block: index, why }, 'disk tier: bad block discarded; reading it from S3');
    try {
      writeSync(h.map, Buffer.alloc(ENTRY_BYTES), 0, ENTRY_BYTES, HEADER_BYTES + index * ENTRY_BYTES);
    } catch {
      /* read-only: it stays refused by its CRC at every read */
    }
    return false;
  }

  /**
   * Queues a block (a prefix of it: data.length <= blockSize) to be written in the
   * background: writeRun() of one block.
   */
  write(id: DiskBlockId, data: Buffer, owned = false): void {
    if (data.length === 0 || data.length > this.blockSize) return;
    this.writeRun(id, data, owned ? { owned } : {});
  }

  /**
   * Queues blocks id.index, id.index + 1, ... of an object, held back to back in `data`
   * (the last may be a prefix), to be written in the background, in jobs of at most
   * WRITE_RUN_BYTES. Each block's CRC32C is taken now, from the bytes as they are.
   * Memory: with `hold`, `data` is written from as it is, with no copy, and hold() is
   * called once per job to keep its memory from reuse until the job calls what hold()
   * returned (a pooled GET buffer's reference); with `owned`, the caller gives `data` up;
   * else each job copies its bytes. A buffer changed all the same before its job wrote it
   * can only make the block fail its CRC at read (never served). A job that finds no room
   * (queue full, tier closed, writes paused) is dropped, never waited for.
   */
  writeRun(id: DiskBlockId, data: Buffer, o: { owned?: boolean; hold?: () => () => void } = {}): void {
    const B = this.blockSize;
    const name = objectName(id, B);
    // A job must fit in one grant (with its sidecar page): small bounds get smaller jobs.
    const per = Math.max(1, Math.min(Math.floor(WRITE_RUN_BYTES / B), Math.floor((this.grantBytes - PAGE) / B))) * B;
    for (let at = 0; at < data.length; at += per) {
      const part = data.subarray(at, Math.min(data.length, at + per));
      if (this.closed || this.queuedBytes + part.length > WRITE_QUEUE_BYTES || Date.now() < this.pausedUntil) {
        this.skip(this.closed ? 'closed' : Date.now() < this.pausedUntil ? 'no_space' : 'queue_full');
        continue;
      }
      const crcs: number[] = [];
      for (let b = 0; b < part.length; b += B) crcs.push(crc32c(part.subarray(b, Math.min(part.length, b + B))));
      let bytes = part;
      let release: (() => void) | undefined;
      if (o.hold) release = o.hold();
      else if (!o.owned) bytes = Buffer.from(part);
      this.queue.push({ name, first: id.index + at / B, data: bytes, crcs, release });
      this.queuedBytes += part.length;
    }
    this.pump();
  }

  /** Whether the write queue has room for `bytes` more (callers skip the copy when not). */
  hasRoom(bytes: number): boolean {
    return !this.closed && this.queuedBytes + bytes <= WRITE_QUEUE_BYTES && Date.now() >= this.pausedUntil;
  }

  /**
   * Keeps an object's cache file from this process's eviction while it is open (a FastFile
   * handle, a Pipe or File mode transfer). Returns the matching unpin.
   */
  pin(ns: string, key: string, etag: string, _size: number, versionId?: string): () => void {
    const name = objectName(versionId !== undefined ? { ns, key, etag, versionId } : { ns, key, etag }, this.blockSize);
    this.pins.set(name, (this.pins.get(name) ?? 0) + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const c = (this.pins.get(name) ?? 1) - 1;
      if (c <= 0) this.pins.delete(name);
      else this.pins.set(name, c);
    };
  }

  /** Resolves once every queued write has finished (for tests and close()). */
  async flush(): Promise<void> {
    this.hurry++;
    try {
      this.pump();
      while (this.queue.length > 0 || this.writing > 0) await new Promise<void>((r) => this.idle.push(r));
    } finally {
      this.hurry--;
    }
  }

  /** Finishes queued writes, gives the unused grant back, closes idle fds and the lock. Idempotent. */
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
      this.grantSeq++;
      await this.saveLedger(l);
    }).catch((err: unknown) => log.warn({ err }, 'disk tier: could not update the ledger at close (the next process recounts)'));
    for (const h of [...this.handles.values()]) this.drop(h);
    this.lock.close();
    diskCacheCapacityBytes.dec(this.maxBytes);
  }

  /** Bytes of cache files and grants as the ledger says (runs a locked read). */
  async usedBytes(): Promise<number> {
    const r = await this.lock.with(async () => {
      const l = await this.loadLedger(false);
      return l.files + this.consumed + Object.values(l.grants).reduce((a, b) => a + b, 0);
    });
    return r?.value ?? this.reportedUsed;
  }

  /** Recounts the cache files on disk (bytes allocated, objects), without the lock: for tests and `status`. */
  async scanBytes(): Promise<{ bytes: number; files: number }> {
    const s = await this.scan(false);
    return { bytes: s.bytes, files: s.files };
  }

  // ---- open cache files ----

  /**
   * The open cache file `name` (one ref taken): the kept one unless another process evicted
   * it (link count 0), else opened now; undefined when it is absent or its sidecar is not
   * (yet) valid. Synchronous (open of an existing file, a 64-byte read): the read paths.
   */
  private acquire(name: string): Handle | undefined {
    const kept = this.liveKept(name);
    if (kept) return kept;
    // The addon opens both files and reads the header in one call, with no exception for a
    // miss (a first epoch looks every object up, mostly in vain); else Node's openSync.
    const hdr = Buffer.allocUnsafe(HEADER_BYTES);
    const got = this.openPair ? this.openPair(this.objectsDir, Buffer.from(name, 'hex'), this.pairFds, hdr) : openPairSync(this.fileOf(name), this.pairFds, hdr);
    if (got < 0) return undefined;
    const data = this.pairFds[0]!;
    const map = this.pairFds[1]!;
    if (!this.headerOk(hdr, got, name, this.fileOf(name))) {
      closeSync(data);
      closeSync(map);
      return undefined;
    }
    return this.keep({ name, data, map, refs: 1, dropped: false });
  }

  /**
   * The kept open cache file `name`, one ref taken and moved to the recent end, unless
   * another process evicted it (link count 0) or its descriptor was closed under us: that
   * one is dropped, so no later acquire reuses it, and undefined is returned.
   */
  private liveKept(name: string): Handle | undefined {
    const h = this.handles.get(name);
    if (!h) return undefined;
    let gone = true;
    try {
      gone = fstatSync(h.map).nlink === 0;
    } catch { /* closed under us: reopen */ }
    if (gone) {
      this.drop(h);
      return undefined;
    }
    this.handles.delete(name); // to the recent end
    this.handles.set(name, h);
    h.refs++;
    return h;
  }

  /**
   * acquire() for the background writer, creating the cache file and its sidecar when
   * absent, with every syscall that may touch the disk through the libuv pool, off the
   * event loop that serves reads. Throws what open/write throw (the write is then skipped).
   */
  private async acquireForWrite(name: string): Promise<{ h: Handle; created: boolean } | undefined> {
    const kept = this.liveKept(name);
    if (kept) return { h: kept, created: false };
    let created = false;
    const file = this.fileOf(name);
    let data: number | undefined;
    let map: number | undefined;
    try {
      data = await openP(file, O_RW_CREATE);
      map = await openP(`${file}.map`, O_RW_CREATE);
      const hdr = Buffer.alloc(HEADER_BYTES);
      const got = await preadFull(map, hdr, 0);
      if (got === 0) {
        await pwriteP(map, this.header(name), 0);
        created = true;
      } else if (!this.headerOk(hdr, got, name, file)) {
        closeSync(data);
        closeSync(map);
        return undefined;
      }
    } catch (err) {
      if (data !== undefined) closeSync(data);
      if (map !== undefined) closeSync(map);
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
        // The folder was removed under us (by hand, or a cleanup): make it again for the next blocks.
        try { makeFolders(this.root); } catch { /* still unusable: the write fails and is counted */ }
      }
      throw err;
    }
    const other = this.handles.get(name);
    if (other && !other.dropped) {
      // Another read or write opened it meanwhile: use that one.
      closeSync(data);
      closeSync(map);
      other.refs++;
      return { h: other, created };
    }
    return { h: this.keep({ name, data, map, refs: 1, dropped: false }), created };
  }

  /** Whether a sidecar header (`got` bytes of it read) is this object's; a damaged or foreign one (not an empty, new one) is counted and its files removed. */
  private headerOk(hdr: Buffer, got: number, name: string, file: string): boolean {
    if (got >= HEADER_BYTES && hdr.readUInt32LE(0) === MAGIC && hdr.readUInt32LE(4) === this.blockSize
      && hdr.readUInt32LE(60) === crc32c(hdr.subarray(0, 60)) && hdr.toString('hex', 16, 48) === name) return true;
    if (got > 0) this.discardDamaged(file);
    return false;
  }

  /** A damaged or foreign sidecar: nothing in it can be trusted; the object starts over. */
  private discardDamaged(file: string): void {
    this.stats.checksumFailures++;
    diskCacheChecksumFailures.inc();
    log.warn({ file, why: 'bad sidecar header' }, 'disk tier: cache file discarded; reading it from S3');
    unlinkSyncQuiet(`${file}.map`);
    unlinkSyncQuiet(file);
  }

  /** Registers a newly opened cache file, closing the least recently used idle ones past HANDLES_KEPT. */
  private keep(h: Handle): Handle {
    this.handles.set(h.name, h);
    if (this.handles.size > HANDLES_KEPT) {
      for (const o of this.handles.values()) {
        if (this.handles.size <= HANDLES_KEPT) break;
        if (o.refs === 0) this.drop(o);
      }
    }
    return h;
  }

  private release(h: Handle): void {
    h.refs--;
    if (h.dropped && h.refs === 0) this.closeFds(h);
  }

  /** Forgets an open cache file; its fds close once no read or write uses them. */
  private drop(h: Handle): void {
    if (this.handles.get(h.name) === h) this.handles.delete(h.name);
    if (h.dropped) return;
    h.dropped = true;
    if (h.refs === 0) this.closeFds(h);
  }

  private closeFds(h: Handle): void {
    try { closeSync(h.data); } catch { /* ignore */ }
    try { closeSync(h.map); } catch { /* ignore */ }
    if (h.direct !== undefined) try { closeSync(h.direct); } catch { /* ignore */ }
  }

  private header(name: string): Buffer {
    const hdr = Buffer.alloc(HEADER_BYTES);
    hdr.writeUInt32LE(MAGIC, 0);
    hdr.writeUInt32LE(this.blockSize, 4);
    hdr.write(name, 16, 'hex');
    hdr.writeUInt32LE(crc32c(hdr.subarray(0, 60)), 60);
    return hdr;
  }

  // ---- writing ----

  private skip(reason: string): void {
    this.stats.skipped++;
    diskCacheWriteSkipped.inc({ reason });
  }

  private pump(): void {
    while (this.writing < WRITE_CONCURRENCY && this.queue.length > 0) {
      let jobs: WriteJob[];
      let work: Promise<void>;
      if (this.isSmall(this.queue[0]!)) {
        // Within WRITE_RUN_BYTES and one grant (as writeRun bounds a job), sidecar pages counted:
        // a batch then fits whole in a fresh grant, or no write fits at all.
        const bound = Math.min(WRITE_RUN_BYTES, this.grantBytes);
        let k = 0;
        let size = 0;
        while (k < this.queue.length && k < SMALL_BATCH && this.isSmall(this.queue[k]!) && size + smallSize(this.queue[k]!) <= bound) size += smallSize(this.queue[k++]!);
        // Full, closed by a job of another kind (or one over the bound), due, or flushed.
        if (k < SMALL_BATCH && k === this.queue.length && !this.batchDue && this.hurry === 0) {
          this.batchTimer ??= setTimeout(() => {
            this.batchTimer = undefined;
            this.batchDue = true;
            this.pump();
          }, SMALL_BATCH_WAIT_MS);
          return;
        }
        this.batchDue = false;
        clearTimeout(this.batchTimer);
        this.batchTimer = undefined;
        jobs = this.queue.splice(0, k);
        work = this.writeSmallBatch(jobs);
      } else {
        jobs = [this.queue.shift()!];
        work = this.writeJob(jobs[0]!);
      }
      this.writing++;
      work.catch((err: unknown) => {
        this.skip('error');
        log.debug({ err }, 'disk tier write failed');
      }).finally(() => {
        this.writing--;
        for (const job of jobs) {
          this.queuedBytes -= job.data.length;
          job.release?.();
        }
        this.pump();
        if (this.writing === 0 && this.queue.length === 0) for (const r of this.idle.splice(0)) r();
      });
    }
  }

  /** Whether a job goes in a small batch: one block, block 0, not open here (its fds would be the ones to use), no O_DIRECT. */
  private isSmall(job: WriteJob): boolean {
    return this.writeSmall !== undefined && job.crcs.length === 1 && job.first === 0 && !this.direct && !this.handles.has(job.name);
  }

  /** A write that failed for want of space (ENOSPC, EDQUOT): writes pause ENOSPC_PAUSE_MS and it counts as skipped for no_space. False for any other error. */
  private pausedForSpace(err: NodeJS.ErrnoException): boolean {
    if (err.code !== 'ENOSPC' && err.code !== 'EDQUOT') return false;
    this.pausedUntil = Date.now() + ENOSPC_PAUSE_MS;
    this.skip('no_space');
    return true;
  }

  /** Token bucket: resolves once the bytes before these have had their time at --cache-dir-write-rate. */
  private async pace(bytes: number): Promise<void> {
    const now = Date.now();
    this.paceAt = Math.max(now, this.paceAt) + (bytes / this.writeRate) * 1000;
    const wait = this.paceAt - now - (bytes / this.writeRate) * 1000;
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }

  /**
   * Space for `size` bytes from this process's grant, refilled from the ledger when short:
   * the grant's sequence number to give unused bytes back to, or undefined when there is no
   * room (the caller skips). Jobs waiting on one refill share the new grant: one that finds
   * it taken by the others refills again.
   */
  private async reserve(size: number): Promise<number | undefined> {
    while (this.left < size) {
      this.refilling ??= this.refill().finally(() => { this.refilling = undefined; });
      if ((await this.refilling) < size) return undefined;
    }
    // Reserved now (jobs run concurrently and await after this).
    this.left -= size;
    return this.grantSeq;
  }

  /**
   * Writes a batch of small objects in one trip to the pool (tierWriteSmall), then counts
   * each as writeJob would. pump() keeps a batch within one grant, so when the grant cannot
   * take it, no write fits: each object is skipped for no_space.
   */
  private async writeSmallBatch(jobs: WriteJob[]): Promise<void> {
    const B = this.blockSize;
    let bytes = 0;
    let size = 0;
    for (const job of jobs) {
      bytes += job.data.length;
      size += smallSize(job);
    }
    await this.pace(bytes);
    const grant = await this.reserve(size);
    if (grant === undefined) {
      for (let i = 0; i < jobs.length; i++) this.skip('no_space');
      return;
    }
    let used = 0;
    try {
      const names = Buffer.allocUnsafe(32 * jobs.length);
      const crcs = new Uint32Array(jobs.length);
      jobs.forEach((job, i) => {
        names.write(job.name, 32 * i, 'hex');
        crcs[i] = job.crcs[0]!;
      });
      this.stats.smallBatches++;
      const res = await this.writeSmall!(this.objectsDir, B, names, jobs.map((j) => j.data), crcs);
      for (let i = 0; i < jobs.length; i++) {
        const status = res[2 * i]!;
        const len = jobs[i]!.data.length;
        if (status === -EBADMSG) {
          this.discardDamaged(this.fileOf(jobs[i]!.name));
        } else if (status < 0) {
          const err = errnoError(status, 'disk tier write');
          if (this.pausedForSpace(err)) continue;
          // The folder was removed under us (by hand, or a cleanup): make it again for the next writes.
          if (err.code === 'ENOENT') try { makeFolders(this.root); } catch { /* still unusable: counted as a failed write */ }
          this.skip('error');
          log.debug({ err }, 'disk tier write failed');
        } else if (status > 0) {
          const cost = (status === 1 ? PAGE : 0) + pageUp(len) - pageUp(Math.min(res[2 * i + 1]!, B));
          used += cost;
          this.consumed += cost;
          this.stats.dataWrites++;
          this.stats.entryWrites++;
          this.stats.written++;
          this.stats.writtenBytes += len;
          diskCacheWrittenBytes.inc(len);
        }
      }
    } finally {
      // Back into the grant it came from (a refill meanwhile returned that grant whole to the ledger).
      if (grant === this.grantSeq) this.left += size - used;
    }
  }

  /**
   * Writes one job: its blocks not already on disk (the sidecar's entries, one read), as
   * runs of contiguous blocks, each run one pwrite of its bytes at first * B (block i
   * lives at i * B, so a run is contiguous in the file) and then, once those bytes are
   * all in the file, one pwrite of the run's entries: a block is marked present only
   * after its bytes are written.
   */
  private async writeJob(job: WriteJob): Promise<void> {
    const B = this.blockSize;
    const n = job.crcs.length;
    const len = (k: number) => Math.min(B, job.data.length - k * B);
    await this.pace(job.data.length);
    // Space for the blocks and a sidecar page (what is not used goes back in `finally`).
    let size = PAGE;
    for (let k = 0; k < n; k++) size += pageUp(len(k));
    const grant = await this.reserve(size);
    if (grant === undefined) {
      this.skip('no_space');
      return;
    }
    let used = 0;
    let h: Handle | undefined;
    try {
      const got = await this.acquireForWrite(job.name);
      if (!got) return; // a damaged sidecar was just removed: the next write of this object makes a new one
      h = got.h;
      if (got.created) {
        used += PAGE;
        this.consumed += PAGE;
      }
      // Entries as they are now (another reader or process may have written some blocks): a
      // small read of the sidecar, synchronous as on the read paths.
      const old = this.entries(h, job.first, n);
      const oldLen = (k: number) => old.readUInt32LE(k * ENTRY_BYTES);
      const needed = (k: number) => !(oldLen(k) >= len(k) && oldLen(k) <= B);
      for (let i = 0; i < n; i++) {
        if (!needed(i)) continue;
        let j = i;
        // Only a whole block can be followed by another in one run (a prefix ends its run).
        while (j + 1 < n && len(j) === B && needed(j + 1)) j++;
        const bytes = job.data.subarray(i * B, j * B + len(j));
        const at = (job.first + i) * B;
        this.onWrite?.({ what: 'data', file: this.fileOf(h.name), first: job.first + i, blocks: j - i + 1, bytes: bytes.length });
        await this.writeBytes(h, bytes, at);
        this.stats.dataWrites++;
        // The bytes are in the file: only now are the blocks marked present.
        const ents = Buffer.allocUnsafe((j - i + 1) * ENTRY_BYTES);
        let cost = 0;
        for (let k = i; k <= j; k++) {
          ents.writeUInt32LE(len(k), (k - i) * ENTRY_BYTES);
          ents.writeUInt32LE(job.crcs[k]!, (k - i) * ENTRY_BYTES + 4);
          cost += pageUp(len(k)) - pageUp(Math.min(oldLen(k), B));
        }
        this.onWrite?.({ what: 'entries', file: `${this.fileOf(h.name)}.map`, first: job.first + i, blocks: j - i + 1, bytes: ents.length });
        if ((await pwriteP(h.map, ents, HEADER_BYTES + (job.first + i) * ENTRY_BYTES)) !== ents.length) throw new Error('short write of sidecar entries');
        this.stats.entryWrites++;
        used += cost;
        this.consumed += cost;
        this.stats.written += j - i + 1;
        this.stats.writtenBytes += bytes.length;
        diskCacheWrittenBytes.inc(bytes.length);
        i = j;
      }
    } catch (err) {
      if (this.pausedForSpace(err as NodeJS.ErrnoException)) return;
      throw err;
    } finally {
      // Back into the grant it came from (a refill meanwhile returned that grant whole to the ledger).
      if (grant === this.grantSeq) this.left += size - used;
      if (h) this.release(h);
    }
  }

  /**
   * pwrite of all of `bytes` at `at`. With --cache-dir-direct-write, its whole 4 KiB pages go
   * through an O_DIRECT fd (no copy into the page cache: the device reads the buffer, which
   * the job holds until then) and the rest, a last block's tail, the ordinary way. A
   * buffer O_DIRECT refuses (EINVAL: not aligned) is remembered and written the ordinary
   * way; a filesystem that refuses it at open turns O_DIRECT off for this process.
   */
  private async writeBytes(h: Handle, bytes: Buffer, at: number): Promise<void> {
    let done = 0;
    const aligned = Math.floor(bytes.length / PAGE) * PAGE;
    if (this.direct && aligned > 0 && at % PAGE === 0 && !this.unaligned.has(bytes.buffer)) {
      try {
        h.direct ??= await openP(this.fileOf(h.name), fsc.O_WRONLY | fsc.O_DIRECT);
        while (done < aligned) {
          const w = await pwriteP(h.direct, bytes.subarray(done, aligned), at + done);
          if (w <= 0 || w % PAGE !== 0) throw Object.assign(new Error('short O_DIRECT write'), { code: 'EINVAL' });
          done += w;
          this.stats.directBytes += w;
        }
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EINVAL') throw err;
        if (h.direct === undefined) this.direct = false; // the filesystem has no O_DIRECT (tmpfs)
        else this.unaligned.add(bytes.buffer);
      }
    }
    while (done < bytes.length) {
      const w = await pwriteP(h.data, bytes.subarray(done), at + done);
      if (w <= 0) throw new Error('pwrite wrote nothing');
      done += w;
    }
  }

  /** Takes a new grant from the ledger (evicting if the bound needs it) and returns its bytes. Leaves `left` 0 when none could be had. */
  private async refill(): Promise<number> {
    const r = await this.lock.with(async () => {
      const l = await this.loadLedger(false);
      l.files += this.consumed;
      this.consumed = 0;
      this.left = 0;
      this.grantSeq++;
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
    for (const [pid, bytes] of Object.entries(l?.grants ?? {})) {
      if (Number(pid) !== process.pid && !pidAlive(Number(pid))) rescan = true; // its writes are not in `files`
      else grants[pid] = bytes;
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
      if (this.pins.has(c.name)) continue;
      const file = path.join(c.dir, c.name);
      const st = await stat(`${file}.map`).catch(() => undefined);
      if (st && st.mtimeMs > c.mtimeMs) continue; // used since the scan: no longer among the oldest
      // The sidecar first: once it is gone nobody finds the object, so the data file can follow.
      await unlink(`${file}.map`).catch(() => undefined);
      await unlink(file).catch(() => undefined);
      const h = this.handles.get(c.name);
      if (h) this.drop(h);
      l.files = Math.max(0, l.files - c.alloc);
      this.stats.evictions++;
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

  private fileOf(name: string): string {
    return path.join(this.objectsDir, name.slice(0, 2), name);
  }

  /**
   * A hit makes the object recent for LRU: its sidecar's mtime is set to now, at most once
   * per TOUCH_INTERVAL_MS per object, through the fd already open (futimes: one syscall).
   */
  private touch(h: Handle): void {
    const now = Date.now();
    const last = this.touched.get(h.name);
    if (last !== undefined && now - last < TOUCH_INTERVAL_MS) return;
    this.touched.set(h.name, now);
    const t = now / 1000;
    try {
      futimesSync(h.map, t, t);
    } catch {
      /* a read-only or odd filesystem: LRU age stays the write time */
    }
  }
}

/** One window of a WholeReader: the bytes of window `win` (-1: none), once read and verified. */
interface RingSlot {
  win: number;
  readonly buf: Buffer;
  /** A pread is writing into buf (it must not be given another window until it is done). */
  filling: boolean;
  /** Every block of the window passed its CRC (meaningful once !filling). */
  ok: boolean;
  /** Reads waiting for the fill in flight. */
  waiters: (() => void)[];
}

/** Reads until `bytes` are in buf or the file ends, through the libuv pool; no promise. */
function preadWindow(fd: number, buf: Buffer, bytes: number, pos: number, cb: (err: Error | null, got: number) => void, done = 0): void {
  read(fd, buf, done, bytes - done, pos + done, (err, n) => {
    if (err) cb(err, done);
    else if (n === 0 || done + n >= bytes) cb(null, done + n);
    else preadWindow(fd, buf, bytes, pos, cb, done + n);
  });
}

/**
 * openWhole()'s reader. The file is cut into windows of `windowBytes` (block-aligned);
 * window w lives in slot w % K of a ring of K buffers (K = 1 for a file of one window).
 * A window is read with one pread and every block of it checked against its CRC before
 * any byte of it is served; from then on reads inside it are copies, answered
 * synchronously (a number, no promise). Verified bytes stay in memory, so a block that
 * goes bad on disk later is caught when it is next read from disk, never served.
 *
 * Order: the kernel's readahead reaches us as up to 12 reads of 128 KiB at once, in any
 * order (libfuse's threads race). The reader follows one stream: `hi`, the furthest
 * window asked for. A read from a ring behind it to RING_AHEAD + 1 past it continues the
 * stream (a later hi moves it on); any other is a jump, which starts a new stream there.
 * The live span is [hi - RING_BEHIND, hi + ahead] (ahead = RING_AHEAD for a full ring).
 * Each time hi moves on, windows hi + 1 .. hi + ahead are read ahead through the pool (a
 * slot is reused only for a window outside the live span, and never while a pread writes
 * into it), so a sequential reader finds its window ready. A stream that
 * starts mid-file reads ahead only once it has moved on by a window (a random reader
 * costs one window per read, not six). A read whose window is being read waits for it
 * (a promise); a read whose slot holds a window still live (it lags more than
 * RING_BEHIND) is served alone: one pread of its blocks, verified, into a buffer of its own.
 * Windows no larger than SYNC_READ_MAX are read synchronously, so a small file is
 * answered without a promise even on its first read.
 */
class WholeReader implements WholeFile {
  readonly stats: WholeStats = { reads: 0, bytes: 0, waited: 0, strays: 0, preadBytes: 0 };
  private readonly ring: RingSlot[];
  private readonly lastWin: number;
  /** Windows read ahead of hi: RING_AHEAD for a full ring. */
  private readonly ahead: number;
  /** The stream: its furthest window, and the window it started at. */
  private hi = -1;
  private start = 0;
  /** Preads in flight: the fds and buffers go back after the last one settles. */
  private inflight = 0;
  private failed = false;
  private closed = false;
  private released = false;

  constructor(
    private readonly cache: DiskCache, private readonly h: Handle, private readonly ents: Buffer,
    private readonly size: number, private readonly windowBytes: number, bufs: Buffer[], private readonly onClose: (stats: WholeStats) => void,
  ) {
    this.ring = bufs.map((buf) => ({ win: -1, buf, filling: false, ok: false, waiters: [] }));
    this.lastWin = Math.ceil(size / windowBytes) - 1;
    // A ring that holds the whole file reads all of it ahead; a smaller one keeps RING_BEHIND windows for late reads.
    this.ahead = bufs.length > this.lastWin ? this.lastWin : bufs.length - 1 - RING_BEHIND;
  }

  read(dst: Buffer, length: number, position: number): number | Promise<number> {
    if (this.failed || this.closed) return -1;
    const n = Math.max(0, Math.min(length, this.size - position));
    if (n === 0) return 0;
    const W = this.windowBytes;
    const w = Math.floor(position / W);
    const s = this.ring[w % this.ring.length]!;
    const moved = w !== this.hi && this.follow(w);
    // Its own window first (before any read-ahead queues behind it in the pool).
    if (s.win !== w && !s.filling && !this.live(s.win)) this.fill(s, w);
    if (moved) this.readAhead();
    if (s.win !== w || s.filling) return this.readSlow(dst, n, position);
    if (!s.ok) return this.fail();
    const off = position - w * W;
    const inWin = Math.min(n, W - off);
    s.buf.copy(dst, 0, off, off + inWin);
    if (inWin < n) {
      // Across a window's end (a read larger than, or not aligned to, the kernel's 128 KiB).
      const rest = this.read(dst.subarray(inWin), n - inWin, position + inWin);
      if (typeof rest === 'number') return rest < 0 ? rest : inWin + rest;
      return rest.then((r) => (r < 0 ? r : inWin + r));
    }
    this.stats.reads++;
    this.stats.bytes += n;
    return n;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    // A pread still in flight writes into its buffer: give the fds and buffers back once it settles.
    if (this.inflight === 0) this.release();
  }

  /**
   * Moves the stream to window w (a read of a window other than hi); true when hi moved on
   * and read-ahead is due. Up to a ring behind and RING_AHEAD + 1 ahead is the same stream
   * (late reads, the kernel's readahead running ahead); anything else is a jump.
   */
  private follow(w: number): boolean {
    if (this.hi >= 0 && w >= this.hi - this.ring.length && w <= this.hi + RING_AHEAD + 1) {
      if (w < this.hi) return false;
      this.hi = w;
      return true;
    }
    this.hi = w;
    this.start = w;
    return w === 0; // a file read from its start is read through: read ahead at once
  }

  /** Whether window x is still wanted by the stream (its slot must not be given to another window). */
  private live(x: number): boolean {
    return x >= 0 && x >= this.hi - RING_BEHIND && x <= this.hi + this.ahead;
  }

  /** Starts reading windows hi + 1 .. hi + ahead that are neither read nor being read. */
  private readAhead(): void {
    if (this.hi === this.start && this.start !== 0) return;
    const K = this.ring.length;
    const last = Math.min(this.lastWin, this.hi + this.ahead);
    for (let t = this.hi + 1; t <= last; t++) {
      const s = this.ring[t % K]!;
      if (s.win !== t && !s.filling && !this.live(s.win)) this.fill(s, t);
    }
  }

  /** Reads window x into slot s: synchronously when small, else through the pool (s.filling until verified). */
  private fill(s: RingSlot, x: number): void {
    const B = this.cache.blockSize;
    const at = x * this.windowBytes;
    const bytes = Math.min(this.windowBytes, this.size - at);
    const first = at / B;
    const count = Math.ceil(bytes / B);
    s.win = x;
    s.ok = false;
    this.stats.preadBytes += bytes;
    if (bytes <= SYNC_READ_MAX) {
      try {
        s.ok = this.cache.verifyWindow(this.h, this.ents, first, count, s.buf, preadFullSync(this.h.data, s.buf.subarray(0, bytes), at), this.size);
      } catch {
        s.ok = false;
      }
      return;
    }
    s.filling = true;
    this.inflight++;
    preadWindow(this.h.data, s.buf, bytes, at, (err, got) => {
      this.inflight--;
      s.filling = false;
      s.ok = !err && !this.closed && this.cache.verifyWindow(this.h, this.ents, first, count, s.buf, got, this.size);
      if (this.closed && this.inflight === 0) this.release();
      const waiters = s.waiters;
      if (waiters.length > 0) {
        s.waiters = [];
        for (const wake of waiters) wake();
      }
    });
  }

  /** A read whose window is not ready: waits for it, or is served alone when its slot holds a window still live. */
  private async readSlow(dst: Buffer, n: number, position: number): Promise<number> {
    const W = this.windowBytes;
    let waited = false;
    let done = 0;
    while (done < n) {
      if (this.failed || this.closed) return -1;
      const at = position + done;
      const x = Math.floor(at / W);
      const take = Math.min(n - done, (x + 1) * W - at);
      const s = this.ring[x % this.ring.length]!;
      if (s.win === x && !s.filling) {
        if (!s.ok) return this.fail();
        s.buf.copy(dst, done, at - x * W, at - x * W + take);
        done += take;
        continue;
      }
      // Wait (once) for its window: being read, or read now into a slot nobody needs.
      if (!waited && (s.win === x || (!s.filling && !this.live(s.win)))) {
        if (s.win !== x) this.fill(s, x);
        if (s.filling) {
          waited = true;
          await new Promise<void>((wake) => s.waiters.push(wake));
        }
        continue;
      }
      const r = await this.readAlone(dst.subarray(done, done + take), at);
      if (r < 0) return r;
      done += take;
    }
    if (waited) this.stats.waited++;
    this.stats.reads++;
    this.stats.bytes += n;
    return n;
  }

  /** Serves dst.length bytes at `at` outside the ring: one pread of the blocks holding them, verified, into a buffer of its own. */
  private readAlone(dst: Buffer, at: number): Promise<number> {
    const B = this.cache.blockSize;
    const first = Math.floor(at / B);
    const from = first * B;
    const bytes = Math.min(this.size, Math.ceil((at + dst.length) / B) * B) - from;
    const buf = Buffer.allocUnsafe(bytes);
    this.stats.strays++;
    this.stats.preadBytes += bytes;
    this.inflight++;
    return new Promise((resolve) => preadWindow(this.h.data, buf, bytes, from, (err, got) => {
      this.inflight--;
      const ok = !err && !this.closed && this.cache.verifyWindow(this.h, this.ents, first, Math.ceil(bytes / B), buf, got, this.size);
      if (this.closed && this.inflight === 0) this.release();
      if (!ok) return resolve(this.closed ? -1 : this.fail());
      buf.copy(dst, 0, at - from, at - from + dst.length);
      resolve(dst.length);
    }));
  }

  /** A block failed its check: from now on -1 (the caller reads the usual way), and the fds and buffers go back. */
  private fail(): number {
    this.failed = true;
    this.close();
    return -1;
  }

  private release(): void {
    if (this.released) return;
    this.released = true;
    this.onClose(this.stats);
  }
}

/** openSmall()'s reader: the verified bytes of the whole file, in a pooled buffer; every read is a copy. */
class SmallFile implements WholeFile {
  private closed = false;

  constructor(private readonly buf: Buffer, private readonly size: number, private readonly pool: SmallBuffers) {}

  get bytes(): Buffer | undefined {
    if (this.closed) return undefined;
    return this.size === this.buf.length ? this.buf : this.buf.subarray(0, this.size);
  }

  read(dst: Buffer, length: number, position: number): number {
    if (this.closed) return -1;
    const n = Math.max(0, Math.min(length, this.size - position));
    if (n > 0) this.buf.copy(dst, 0, position, position + n);
    return n;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.pool.give(this.buf);
  }
}

/**
 * Buffers for openSmall(), in classes of powers of two from SMALL_MIN_BUFFER to
 * SMALL_FILE_MAX, recycled: a folder of small files read epoch after epoch allocates a
 * few buffers once, not one per open (fresh memory per open costs page faults, and
 * V8 collects garbage for the external memory). Buffers in use and kept free together
 * stay within `maxBytes`; when a class has none free and the bound is reached, free
 * buffers of other classes are let go first.
 */
export class SmallBuffers {
  private readonly free: Buffer[][] = [];
  /** Bytes of buffers in use and free. */
  private bytes = 0;
  private freeBytes = 0;

  constructor(private readonly maxBytes: number) {}

  /** A buffer of at least `size` bytes (size <= SMALL_FILE_MAX), or undefined when the bound is reached. */
  take(size: number): Buffer | undefined {
    let cls = 0;
    while (SMALL_MIN_BUFFER << cls < size) cls++;
    const got = this.free[cls]?.pop();
    if (got) {
      this.freeBytes -= got.length;
      return got;
    }
    const len = SMALL_MIN_BUFFER << cls;
    for (let c = this.free.length - 1; c >= 0 && this.bytes + len > this.maxBytes; c--) {
      const list = this.free[c];
      while (list && list.length > 0 && this.bytes + len > this.maxBytes) {
        const b = list.pop()!;
        this.bytes -= b.length;
        this.freeBytes -= b.length;
      }
    }
    if (this.bytes + len > this.maxBytes) return undefined;
    this.bytes += len;
    return Buffer.allocUnsafeSlow(len);
  }

  /** Takes back a buffer from take(). */
  give(buf: Buffer): void {
    let cls = 0;
    while (SMALL_MIN_BUFFER << cls < buf.length) cls++;
    (this.free[cls] ??= []).push(buf);
    this.freeBytes += buf.length;
  }

  /** Bytes of buffers in use (for tests). */
  get inUse(): number {
    return this.bytes - this.freeBytes;
  }

  /** Bytes of buffers allocated, in use or free (for tests). */
  get allocated(): number {
    return this.bytes;
  }
}

function makeFolders(root: string): void {
  for (let i = 0; i < 256; i++) mkdirSync(path.join(root, 'objects', i.toString(16).padStart(2, '0')), { recursive: true });
  mkdirSync(path.join(root, 'tmp'), { recursive: true });
}

function unlinkSyncQuiet(file: string): void {
  try {
    rmSyncFile(file);
  } catch {
    /* gone already */
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
    if (l.version !== 2 || !Number.isSafeInteger(l.files) || typeof l.grants !== 'object' || l.grants === null || !Number.isFinite(l.scannedAt)) return undefined;
    return l;
  } catch {
    return undefined;
  }
}
