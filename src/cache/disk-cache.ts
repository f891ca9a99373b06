/**
 * The disk tier: blocks of S3 objects kept on local disk (--cache-dir), under the memory
 * block cache, shared by every sluice process on the node and kept across restarts. This
 * class is the tier's one face to the rest of sluice (TieredClient, FastFile, the bench);
 * the work is done by five modules beside it, each with its own essay:
 *
 *   tier-layout.ts   the files on disk: one sparse cache file per object version and its
 *                    sidecar of per-block entries (length, CRC32C); names, format, fs helpers
 *   tier-files.ts    the cache files open in this process (a handle table) and the check
 *                    every block read from disk passes (CRC32C) before it is served
 *   tier-ledger.ts   the size bound shared by all processes: grants, the ledger, LRU eviction
 *   tier-writer.ts   the background writer: runs and small-object batches, paced, never waited for
 *   tier-readers.ts  openWhole()'s readers: a ring of verified windows, or a small file whole
 *
 * Reads here: readRange() answers a range of blocks with one verified pread per run of
 * present blocks (a miss never throws); openWhole() is the whole-file fast path FastFile
 * uses when every block is present (tier-readers.ts), with openSmall() for a file of one
 * block, read and checked whole at open.
 *
 * FUSE passthrough (Linux >= 6.9), built for small files: with this layout the backing
 * file exists already (the data file is the object at offset 0). libfuse 2 has no API for
 * it, so native/src/fuse_init.c asks for it in the INIT reply and rewrites the OPEN reply,
 * and native/src/fuse_open.c decides per open (its design note: the kernel's rules for
 * mixing passthrough and other opens of one file). A small file is read and checked whole
 * at open (native/src/tier_small.c), then the kernel reads the cache file itself: no
 * per-read CRC, the price of passthrough (SEMANTICS.md). Eviction unlinks it safely (the
 * kernel holds the file). Larger whole-present files still go kernel -> sluice -> pread ->
 * kernel per read (WholeReader): passing them through would mean reading and checking the
 * whole file before the open returns (first-byte latency of a 128 MiB file from a cold
 * disk) and leaving its bytes unchecked for as long as it stays open; not done. `sluice
 * bench bench/scenarios/tier.yaml` measures what the FUSE hop costs (`restarted` through
 * the mount against `direct`, the same tier read in-process).
 *
 * Invariants: never serves a block that failed its CRC; never blocks a read on a write; the
 * bound holds for all processes together (tier-ledger.ts); a pinned object is not evicted
 * by this process.
 */
import { existsSync, mkdirSync, statSync, writeFileSync, type Stats } from 'node:fs';
import { rm, unlink } from 'node:fs/promises';
import path from 'node:path';
import { crc32c } from './crc32c.js';
import { InvalidArgumentError } from '../errors.js';
import { log } from '../log.js';
import { diskCacheCapacityBytes, diskCacheHits, diskCacheMisses, diskCacheReadBytes } from '../metrics/metrics.js';
import { tierWriteSmallOp } from '../native/addon.js';
import { OpenFiles } from './tier-files.js';
import { DEFAULT_FREE_SHARE, DEFAULT_MIN_BYTES, MIN_FREE_BYTES, readLedger, TierLedger } from './tier-ledger.js';
import {
  DISK_BLOCK_SIZE, ENTRY_BYTES, HEADER_BYTES, makeFolders, objectName, OLD_TIER_FOLDERS, PAGE, preadFull, preadFullSync, statfsFree, TIER_FOLDER,
  type DiskBlockId, type DiskCacheStats, type DiskObjectId, type Handle, type WholeFile, type WholeStats, type WriteEvent,
} from './tier-layout.js';
import {
  RING_MIN, RING_WINDOWS, SMALL_BUFFER_BYTES, SMALL_FILE_MAX, SmallBuffers, SmallFile, WHOLE_BUFFER_BYTES, WholeReader, WINDOW, WINDOW_POOL_KEEP,
} from './tier-readers.js';
import { checkTierFolder, makeTierFolder, tierAccess, type TierAccess } from './tier-trust.js';
import { TierWriter } from './tier-writer.js';

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
  /** Who may use the tier (--cache-dir-group, --cache-dir-mode; ./tier-trust.ts); default this user alone. */
  access?: TierAccess;
}

export class DiskCache {
  readonly blockSize: number;
  readonly root: string;
  readonly maxBytes: number;
  readonly stats: DiskCacheStats = { hits: 0, misses: 0, checksumFailures: 0, written: 0, writtenBytes: 0, evictions: 0, skipped: 0, dataWrites: 0, entryWrites: 0, directBytes: 0, smallBatches: 0 };
  readonly grantBytes: number;
  /** openWhole() readers' counts, summed as they close. */
  readonly wholeStats: WholeStats = { reads: 0, bytes: 0, waited: 0, strays: 0, preadBytes: 0 };

  private readonly objectsDir: string;
  private readonly files: OpenFiles;
  private readonly ledger: TierLedger;
  private readonly writer: TierWriter;
  private readonly pins = new Map<string, number>();
  /** Window buffers held by openWhole() readers, and idle WINDOW buffers kept for the next (WINDOW_POOL_KEEP). */
  private wholeBufferBytes = 0;
  private readonly windowPool: Buffer[] = [];
  /** Buffers of openSmall(), recycled (see SmallBuffers). */
  private readonly smallBuffers = new SmallBuffers(SMALL_BUFFER_BYTES);
  /** One sidecar entry, read by openSmall() (synchronously: never shared by two calls at once). */
  private readonly smallEntry = Buffer.alloc(ENTRY_BYTES);
  private closed = false;

  private constructor(dir: string, maxBytes: number, o: DiskCacheOptions, access: TierAccess) {
    this.root = path.join(dir, TIER_FOLDER);
    this.objectsDir = path.join(this.root, 'objects');
    this.maxBytes = maxBytes;
    this.files = new OpenFiles(this.root, this.objectsDir, DISK_BLOCK_SIZE, this.stats, access);
    this.blockSize = this.files.blockSize;
    this.ledger = new TierLedger(this.root, this.objectsDir, maxBytes, o.freeBytes ?? statfsFree, {
      isPinned: (name) => this.pins.has(name),
      onEvicted: (name) => {
        const h = this.files.get(name);
        if (h) this.files.drop(h);
        this.stats.evictions++;
      },
      onLockBusy: () => this.writer.skip('lock_busy'),
    }, access);
    this.grantBytes = this.ledger.grantBytes;
    this.writer = new TierWriter(this.files, this.ledger, this.stats, {
      writeBytesPerSec: o.writeBytesPerSec,
      onWrite: o.onWrite,
      directWrite: o.directWrite === true,
      writeSmall: o.onWrite ? undefined : tierWriteSmallOp(),
    });
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
    const access = o.access ?? tierAccess();
    // --cache-dir itself is created when missing, but not a whole tree (issue 45): a typo in
    // --cache-dir must not leave folders on a disk the user never meant.
    const dir = path.resolve(o.dir);
    if (!existsSync(dir) && !existsSync(path.dirname(dir))) {
      throw new InvalidArgumentError(`--cache-dir ${o.dir}: its parent folder ${path.dirname(dir)} does not exist`, { hint: 'Create the parent first, or point --cache-dir at a folder on a local disk (e.g. the instance NVMe)' });
    }
    try {
      // Who may read or plant bytes (./tier-trust.ts): --cache-dir, made when missing, and
      // the tier's folder in it, checked before anything is written there.
      if (mkdirSync(o.dir, { recursive: true, mode: access.dirMode & 0o777 }) !== undefined) makeTierFolder(o.dir, access);
      checkTierFolder(o.dir, access);
      const st = statOrUndefined(root);
      if (st !== undefined && st.uid !== process.geteuid?.()) checkTierFolder(root, access, `the disk tier's folder ${root}`, st);
      makeFolders(root, access);
      const probe = path.join(root, 'tmp', `probe-${process.pid}`);
      writeFileSync(probe, '', { mode: access.fileMode });
      await unlink(probe);
    } catch (err) {
      if (err instanceof InvalidArgumentError) throw err;
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
    const c = new DiskCache(o.dir, maxBytes, o, access);
    await c.ledger.recover();
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
    return this.ledger.lock.kind;
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
    const data = this.files.fileOf(name);
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
    const h = this.files.acquire(objectName(id, B));
    if (h) {
      try {
        await this.readRuns(h, first, n, start, end, out, found);
      } catch (err) {
        log.debug({ err, object: h.name }, 'disk tier read failed; reading from S3');
      } finally {
        this.files.release(h);
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
    const ents = this.files.entries(h, first, n);
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
          this.files.corrupt(h, first + k, 'truncated data');
          continue;
        }
        if (crc32c(buf.subarray(at, at + l)) !== ents.readUInt32LE(k * ENTRY_BYTES + 4)) {
          this.files.corrupt(h, first + k, 'checksum mismatch');
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
      this.files.touch(h);
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
    const h = this.files.acquire(objectName(id, B));
    if (!h) return undefined;
    let ents: Buffer;
    try {
      ents = this.files.entries(h, 0, n);
    } catch {
      this.files.release(h);
      return undefined;
    }
    for (let i = 0; i < n; i++) {
      if (ents.readUInt32LE(i * ENTRY_BYTES) !== Math.min(B, size - i * B)) {
        this.files.release(h);
        return undefined;
      }
    }
    const bytes = single || ring * WINDOW;
    this.wholeBufferBytes += bytes;
    const bufs = single ? [Buffer.allocUnsafe(single)] : Array.from({ length: ring }, () => this.windowPool.pop() ?? Buffer.allocUnsafeSlow(WINDOW));
    return new WholeReader(this.files, h, ents, size, single || WINDOW, bufs, (st) => {
      for (const k of Object.keys(st) as (keyof WholeStats)[]) this.wholeStats[k] += st[k];
      log.debug({ object: h.name, size, ...st }, 'disk tier: whole-file reader closed');
      this.wholeBufferBytes -= bytes;
      if (!single) for (const b of bufs) if (this.windowPool.length < WINDOW_POOL_KEEP) this.windowPool.push(b);
      this.files.release(h);
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
    const h = this.files.acquire(objectName(id, this.blockSize));
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
        if (preadFullSync(h.data, bytes, 0) < size) ok = this.files.corrupt(h, 0, 'truncated data');
        else if (crc32c(bytes) !== crc) ok = this.files.corrupt(h, 0, 'checksum mismatch');
      }
    } catch {
      ok = false;
    } finally {
      if (ok) {
        this.stats.hits++;
        diskCacheHits.inc(1);
        diskCacheReadBytes.inc(size);
        this.files.touch(h);
      }
      this.files.release(h);
    }
    if (!ok) {
      this.smallBuffers.give(buf);
      return undefined;
    }
    return new SmallFile(buf, size, this.smallBuffers);
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
    this.writer.writeRun(id, data, o);
  }

  /** Whether the write queue has room for `bytes` more (callers skip the copy when not). */
  hasRoom(bytes: number): boolean {
    return this.writer.hasRoom(bytes);
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
    await this.writer.flush();
  }

  /** Finishes queued writes, gives the unused grant back, closes idle fds and the lock. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    await this.writer.flush();
    this.closed = true;
    this.writer.closed = true;
    await this.ledger.close();
    this.files.dropAll();
    diskCacheCapacityBytes.dec(this.maxBytes);
  }

  /** Bytes of cache files and grants as the ledger says (runs a locked read). */
  async usedBytes(): Promise<number> {
    return this.ledger.usedBytes();
  }

  /** Recounts the cache files on disk (bytes allocated, objects), without the lock: for tests and `status`. */
  async scanBytes(): Promise<{ bytes: number; files: number }> {
    return this.ledger.scanBytes();
  }
}

function statOrUndefined(p: string): Stats | undefined {
  try {
    return statSync(p);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}
