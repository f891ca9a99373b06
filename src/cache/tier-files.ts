/**
 * The disk tier's open cache files in this process: a table of handles (a cache file's data
 * and sidecar fds), shared by the readers and the writer, and the checks every block read
 * from disk passes before it is served.
 *
 * Algorithm: acquire(name) returns the kept handle (moved to the recent end, one reference
 * taken) unless another process evicted the file (link count 0) or its descriptor was closed
 * under us; else it opens both files and reads the sidecar's header in one call (the addon's
 * tierOpenPair: a miss costs no exception), or through Node's fs without the addon. At most
 * HANDLES_KEPT idle handles stay open; the least recently used idle ones are closed first.
 * acquireForWrite() does the same for the background writer, creating the files, with every
 * syscall that may touch the disk through the libuv pool.
 *
 * Verification: verifyWindow() and corrupt() are the one place a block is judged. A block
 * whose bytes are short or fail their CRC32C has its entry zeroed (so nobody serves it),
 * is counted and logged, and is reported as a miss: the caller fetches it from S3 again.
 * A hit touches the sidecar's mtime (its LRU age for eviction, tier-ledger.ts), at most
 * once per TOUCH_INTERVAL_MS per object.
 *
 * Invariants: a handle's fds are closed only once it is dropped and no read or write holds
 * a reference (refs 0); a dropped handle is never handed out again; a header that fails
 * sidecarHeaderOk is never used (its files are removed and the object starts over).
 */
import { closeSync, fstatSync, futimesSync, writeSync } from 'node:fs';
import path from 'node:path';
import { crc32c } from './crc32c.js';
import { LRUCache } from 'lru-cache';
import { log } from '../log.js';
import { diskCacheChecksumFailures, diskCacheHits, diskCacheReadBytes } from '../metrics/metrics.js';
import { tierOpenPairOp, type TierOpenPair } from '../native/addon.js';
import {
  ENTRY_BYTES, fchmodP, HEADER_BYTES, makeFolders, openP, openPairSync, O_RW_CREATE, preadFull, preadFullSync, pwriteP, sidecarHeader, sidecarHeaderOk,
  unlinkSyncQuiet, type DiskCacheStats, type Handle,
} from './tier-layout.js';
import type { TierAccess } from './tier-trust.js';

/** A hit moves an object's sidecar mtime (its LRU age) at most once a minute: one futimes per object per minute. */
const TOUCH_INTERVAL_MS = 60_000;
/** Objects whose last touch is remembered (for TOUCH_INTERVAL_MS): 64 Ki x ~100 B. */
const TOUCH_MEMORY = 65_536;
/** Cache files whose fds stay open when no read or write uses them: 64 x 2 fds, far below any fd limit, and a reader of a folder of small files reuses them within an epoch's working set. */
const HANDLES_KEPT = 64;

export class OpenFiles {
  /** The addon's opener for acquire() (a miss without an exception; openPairSync without the addon), and the fds it opens. */
  private readonly openPair: TierOpenPair | undefined = tierOpenPairOp();
  private readonly pairFds = new Int32Array(2);
  private readonly touched = new LRUCache<string, number>({ max: TOUCH_MEMORY });
  /** Open cache files, least recently used first. */
  private readonly handles = new Map<string, Handle>();

  constructor(
    readonly root: string, readonly objectsDir: string, readonly blockSize: number,
    /** The tier's counts (DiskCache.stats): hits and checksum failures are counted here. */
    private readonly stats: DiskCacheStats,
    /** Modes and group of what the tier creates (./tier-trust.ts). */
    readonly access: TierAccess,
  ) {}

  /** Whether cache file `name` is open here (the writer then writes through its fds). */
  has(name: string): boolean {
    return this.handles.has(name);
  }

  /** The open handle of `name`, if any (eviction drops it). */
  get(name: string): Handle | undefined {
    return this.handles.get(name);
  }

  /** Drops every handle (close): fds close once no read or write holds them. */
  dropAll(): void {
    for (const h of [...this.handles.values()]) this.drop(h);
  }

  /**
   * The open cache file `name` (one ref taken): the kept one unless another process evicted
   * it (link count 0), else opened now; undefined when it is absent or its sidecar is not
   * (yet) valid. Synchronous (open of an existing file, a 64-byte read): the read paths.
   */
  acquire(name: string): Handle | undefined {
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
  async acquireForWrite(name: string): Promise<{ h: Handle; created: boolean } | undefined> {
    const kept = this.liveKept(name);
    if (kept) return { h: kept, created: false };
    let created = false;
    const file = this.fileOf(name);
    let data: number | undefined;
    let map: number | undefined;
    try {
      data = await openP(file, O_RW_CREATE, this.access.fileMode);
      map = await openP(`${file}.map`, O_RW_CREATE, this.access.fileMode);
      if (this.access.fixFileMode) await Promise.all([fchmodP(data, this.access.fileMode), fchmodP(map, this.access.fileMode)]);
      const hdr = Buffer.alloc(HEADER_BYTES);
      const got = await preadFull(map, hdr, 0);
      if (got === 0) {
        await pwriteP(map, sidecarHeader(name, this.blockSize), 0);
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
        try { makeFolders(this.root, this.access); } catch { /* still unusable: the write fails and is counted */ }
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
    if (sidecarHeaderOk(hdr, got, name, this.blockSize)) return true;
    if (got > 0) this.discardDamaged(file);
    return false;
  }

  /** A damaged or foreign sidecar: nothing in it can be trusted; the object starts over. */
  discardDamaged(file: string): void {
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

  release(h: Handle): void {
    h.refs--;
    if (h.dropped && h.refs === 0) this.closeFds(h);
  }

  /** Forgets an open cache file; its fds close once no read or write uses them. */
  drop(h: Handle): void {
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
  entries(h: Handle, first: number, n: number): Buffer {
    const ents = Buffer.alloc(n * ENTRY_BYTES);
    preadFullSync(h.map, ents, HEADER_BYTES + first * ENTRY_BYTES);
    return ents;
  }

  /** A block that failed its check: its entry is zeroed (so nobody serves it), counted, reported as a miss. */
  corrupt(h: Handle, index: number, why: string): false {
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

  /** The data file's path of cache file `name` (its sidecar: + '.map'). */
  fileOf(name: string): string {
    return path.join(this.objectsDir, name.slice(0, 2), name);
  }

  /**
   * A hit makes the object recent for LRU: its sidecar's mtime is set to now, at most once
   * per TOUCH_INTERVAL_MS per object, through the fd already open (futimes: one syscall).
   */
  touch(h: Handle): void {
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
