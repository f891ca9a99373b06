/**
 * The disk tier's layout on disk and its sidecar format: what a cache file is, where it
 * lives, how its blocks are recorded and checked. Every other tier-*.ts module and
 * disk-cache.ts reads and writes files through the names and helpers here; none of them
 * knows another layout.
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
 * Every folder is 0700 and every file 0600 (or the group and mode of --cache-dir-group):
 * ./tier-trust.ts.
 * h = sha256 of (layout, block size, endpoint, region, bucket, key, ETag, version id). Blocks are
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
 * Why this layout (measured, BENCHMARKS.md "Disk tier"; docs/decisions): v1 kept one file per
 * block (write to tmp, rename); a restarted job then read at 13-14% of the local-folder rate,
 * and even without FUSE reading many 256 KiB files ran at 61.8 MB/s: open + readv + read
 * + close and a path lookup per block, all through the libuv pool. One file per object
 * turns that into one pread per WINDOW and keeps the bytes where a FUSE passthrough can
 * hand them to the kernel as they are.
 *
 * Invariants: a cache file is only ever found under the name of the object version it was
 * fetched for (objectName); an entry is non-zero only once its bytes are in the data file;
 * a header that fails its CRC or names another object is never trusted (sidecarHeaderOk).
 */
import { createHash } from 'node:crypto';
import { closeSync, constants as fsc, fchmod, open, openSync, read, readSync, statfs as statfsCb, unlinkSync as rmSyncFile, write } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { getSystemErrorName } from 'node:util';
import { crc32c } from './crc32c.js';
import { makeTierFolder, PRIVATE_FILE_MODE, type TierAccess } from './tier-trust.js';

export const DISK_BLOCK_SIZE = 256 * 1024;
/** Folder of this layout's version inside --cache-dir: a later format gets a new folder. */
export const TIER_FOLDER = 'sluice-tier-v2';
/** The previous layout's folder (one file per block): removed at open, its space given back. */
export const OLD_TIER_FOLDERS = ['sluice-tier-v1'];
/** Sidecar header bytes; entry i is at HEADER_BYTES + ENTRY_BYTES * i. */
export const HEADER_BYTES = 64;
export const ENTRY_BYTES = 8;
const MAGIC = 0x324d4c53; // "SLM2" little-endian
/** Disk space is allocated in pages: a block is counted as its length rounded up to 4 KiB. */
export const PAGE = 4096;

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
   * when a block failed its CRC: the caller reads the usual way from then on. A read that
   * waits (a promise) rejects with AbortedError once `signal` fires, and from then on writes
   * nothing into dst (issue 43: the FUSE layer answered and may reuse the buffer).
   */
  read(dst: Buffer, length: number, position: number, signal?: AbortSignal): number | Promise<number>;
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

/** Test hook of DiskCacheOptions.onWrite: what the writer is about to write, and where. */
export type WriteEvent = { what: 'data' | 'entries'; file: string; first: number; blocks: number; bytes: number };

/** An open cache file: its data and sidecar fds, shared by reads and writes of this process. */
export interface Handle {
  name: string;
  data: number;
  map: number;
  /** Reads and writes using the fds now; they are closed only at 0 once dropped. */
  refs: number;
  dropped: boolean;
  /** The data file opened O_DIRECT for the writer (--cache-dir-direct-write), once it has written. */
  direct?: number | undefined;
}

export const pageUp = (n: number) => Math.ceil(n / PAGE) * PAGE;
export const EBADMSG = os.constants.errno.EBADMSG;
/** A Node-style system error for a negative errno from the addon (code 'ENOSPC', ...). */
export function errnoError(neg: number, what: string): NodeJS.ErrnoException {
  const code = getSystemErrorName(neg);
  return Object.assign(new Error(`${what}: ${code}`), { code, errno: neg });
}
export const O_RW_CREATE = fsc.O_RDWR | fsc.O_CREAT;

/** The cache file name (hex sha256) of an object version. */
export function objectName(id: DiskObjectId, blockSize = DISK_BLOCK_SIZE): string {
  // NUL cannot appear in any field (keys are checked, ETags are quoted hex), so they cannot run together.
  return createHash('sha256').update(`v2\0${blockSize}\0${id.ns}\0${id.key}\0${id.etag}\0${id.versionId ?? ''}`).digest('hex');
}

/** Free bytes for an unprivileged writer on the filesystem of `dir`. */
export function statfsFree(dir: string): Promise<number> {
  return new Promise((resolve, reject) => statfsCb(dir, (err, s) => (err ? reject(err) : resolve(s.bavail * s.bsize))));
}

/** open(2) through the pool; a file it creates gets `mode` (less the umask: see TierAccess.fixFileMode). */
export const openP = (file: string, flags: number, mode = PRIVATE_FILE_MODE) => new Promise<number>((res, rej) => open(file, flags, mode, (e, fd) => (e ? rej(e) : res(fd))));
export const fchmodP = (fd: number, mode: number) => new Promise<void>((res, rej) => fchmod(fd, mode, (e) => (e ? rej(e) : res())));
export const preadP = (fd: number, buf: Buffer, pos: number) => new Promise<number>((res, rej) => read(fd, buf, 0, buf.length, pos, (e, n) => (e ? rej(e) : res(n))));
export const pwriteP = (fd: number, buf: Buffer, pos: number) => new Promise<number>((res, rej) => write(fd, buf, 0, buf.length, pos, (e, n) => (e ? rej(e) : res(n))));

/** Reads until `buf` is full or the file ends; returns the bytes read. */
export async function preadFull(fd: number, buf: Buffer, pos: number): Promise<number> {
  let done = 0;
  while (done < buf.length) {
    const n = await preadP(fd, buf.subarray(done), pos + done);
    if (n === 0) break;
    done += n;
  }
  return done;
}

/** preadFull(), synchronously. */
export function preadFullSync(fd: number, buf: Buffer, pos: number): number {
  let done = 0;
  while (done < buf.length) {
    const n = readSync(fd, buf, done, buf.length - done, pos + done);
    if (n === 0) break;
    done += n;
  }
  return done;
}

/**
 * TierOpenPair (src/native/addon.ts) through Node's fs, for when the addon is absent: cache
 * file `file` and its sidecar opened O_RDWR into fds, up to HEADER_BYTES of the header read;
 * the bytes read, or -1 with nothing left open.
 */
export function openPairSync(file: string, fds: Int32Array, header: Buffer): number {
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

/** A new sidecar's header for cache file `name` (hex) of blocks of `blockSize`. */
export function sidecarHeader(name: string, blockSize: number): Buffer {
  const hdr = Buffer.alloc(HEADER_BYTES);
  hdr.writeUInt32LE(MAGIC, 0);
  hdr.writeUInt32LE(blockSize, 4);
  hdr.write(name, 16, 'hex');
  hdr.writeUInt32LE(crc32c(hdr.subarray(0, 60)), 60);
  return hdr;
}

/** Whether `got` bytes of a sidecar header are a whole, intact header of cache file `name` with blocks of `blockSize`. */
export function sidecarHeaderOk(hdr: Buffer, got: number, name: string, blockSize: number): boolean {
  return got >= HEADER_BYTES && hdr.readUInt32LE(0) === MAGIC && hdr.readUInt32LE(4) === blockSize
    && hdr.readUInt32LE(60) === crc32c(hdr.subarray(0, 60)) && hdr.toString('hex', 16, 48) === name;
}

/**
 * Makes the tier's folders under `root` (root itself, objects/, objects/00..ff, tmp/) with
 * the access's mode and group (./tier-trust.ts), setting back those of an earlier version.
 */
export function makeFolders(root: string, access: TierAccess): void {
  makeTierFolder(root, access);
  makeTierFolder(path.join(root, 'objects'), access);
  for (let i = 0; i < 256; i++) makeTierFolder(path.join(root, 'objects', i.toString(16).padStart(2, '0')), access);
  makeTierFolder(path.join(root, 'tmp'), access);
}

/** unlink(2), quiet when the file is gone already. */
export function unlinkSyncQuiet(file: string): void {
  try {
    rmSyncFile(file);
  } catch {
    /* gone already */
  }
}
