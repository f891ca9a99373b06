/**
 * The disk tier's background writer: fetched blocks queued by DiskCache.writeRun() and
 * written into their cache files off the read path.
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
 *
 * Invariants: a block's entry is written only after all of its bytes are (so an entry
 * never names bytes that are not there); its CRC is the one taken when it was queued; a
 * job that finds no room (queue full, tier closed, writes paused, no grant) is dropped,
 * never waited for; a held caller buffer is released exactly once, when its job settles.
 */
import { constants as fsc } from 'node:fs';
import { crc32c } from './crc32c.js';
import { log } from '../log.js';
import { diskCacheWriteSkipped, diskCacheWrittenBytes } from '../metrics/metrics.js';
import type { TierWriteSmall } from '../native/addon.js';
import type { OpenFiles } from './tier-files.js';
import type { TierLedger } from './tier-ledger.js';
import {
  EBADMSG, ENTRY_BYTES, errnoError, HEADER_BYTES, makeFolders, objectName, openP, PAGE, pageUp, pwriteP,
  type DiskBlockId, type DiskCacheStats, type Handle, type WriteEvent,
} from './tier-layout.js';

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
/** After ENOSPC, writes pause this long (the disk is full: retrying per block would only fail again). */
const ENOSPC_PAUSE_MS = 5_000;

/**
 * Blocks [first, first + crcs.length) of one object to write: `data` holds them back to
 * back (the last may be a prefix); each block's CRC32C was taken when queued, from the
 * bytes as fetched. `release` gives back the caller's buffer (a held GET buffer) once the
 * job is done or dropped.
 */
interface WriteJob { name: string; first: number; data: Buffer; crcs: number[]; release: (() => void) | undefined }

/** Space a small job may take from the grant: its block and a sidecar page (what writeJob reserves for one block). */
const smallSize = (job: WriteJob) => PAGE + pageUp(job.data.length);

export interface WriterOptions {
  /** --cache-dir-write-rate, bytes per second. */
  writeBytesPerSec: number;
  /** Test hook: called right before each write syscall (bytes of a run, or its entries). */
  onWrite?: ((e: WriteEvent) => void) | undefined;
  /** --cache-dir-direct-write. */
  directWrite: boolean;
  /** The addon's one-hop writer of small objects (native/src/tier_small.c), if any. */
  writeSmall: TierWriteSmall | undefined;
}

export class TierWriter {
  /** The tier is closed: every job from now on is skipped. */
  closed = false;
  private readonly writeRate: number;
  private readonly onWrite: ((e: WriteEvent) => void) | undefined;
  /** O_DIRECT writes: asked for, and not refused by the filesystem so far. */
  private direct: boolean;
  /** The one-hop writer of small objects (native/src/tier_small.c), unless the addon is absent or a test watches the writes (onWrite). */
  private readonly writeSmall: TierWriteSmall | undefined;
  /** Buffers an O_DIRECT write refused (not aligned): written the ordinary way from then on. */
  private readonly unaligned = new WeakSet<ArrayBufferLike>();
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

  constructor(private readonly files: OpenFiles, private readonly ledger: TierLedger, private readonly stats: DiskCacheStats, o: WriterOptions) {
    this.writeRate = o.writeBytesPerSec;
    this.onWrite = o.onWrite;
    this.direct = o.directWrite;
    this.writeSmall = o.writeSmall;
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
    const B = this.files.blockSize;
    const name = objectName(id, B);
    // A job must fit in one grant (with its sidecar page): small bounds get smaller jobs.
    const per = Math.max(1, Math.min(Math.floor(WRITE_RUN_BYTES / B), Math.floor((this.ledger.grantBytes - PAGE) / B))) * B;
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

  skip(reason: string): void {
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
        const bound = Math.min(WRITE_RUN_BYTES, this.ledger.grantBytes);
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
    return this.writeSmall !== undefined && job.crcs.length === 1 && job.first === 0 && !this.direct && !this.files.has(job.name);
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
   * Writes a batch of small objects in one trip to the pool (tierWriteSmall), then counts
   * each as writeJob would. pump() keeps a batch within one grant, so when the grant cannot
   * take it, no write fits: each object is skipped for no_space.
   */
  private async writeSmallBatch(jobs: WriteJob[]): Promise<void> {
    const B = this.files.blockSize;
    let bytes = 0;
    let size = 0;
    for (const job of jobs) {
      bytes += job.data.length;
      size += smallSize(job);
    }
    await this.pace(bytes);
    const grant = await this.ledger.reserve(size);
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
      const res = await this.writeSmall!(this.files.objectsDir, B, names, jobs.map((j) => j.data), crcs, this.files.access.fileMode, this.files.access.fixFileMode);
      for (let i = 0; i < jobs.length; i++) {
        const status = res[2 * i]!;
        const len = jobs[i]!.data.length;
        if (status === -EBADMSG) {
          this.files.discardDamaged(this.files.fileOf(jobs[i]!.name));
        } else if (status < 0) {
          const err = errnoError(status, 'disk tier write');
          if (this.pausedForSpace(err)) continue;
          // The folder was removed under us (by hand, or a cleanup): make it again for the next writes.
          if (err.code === 'ENOENT') try { makeFolders(this.files.root, this.files.access); } catch { /* still unusable: counted as a failed write */ }
          this.skip('error');
          log.debug({ err }, 'disk tier write failed');
        } else if (status > 0) {
          const cost = (status === 1 ? PAGE : 0) + pageUp(len) - pageUp(Math.min(res[2 * i + 1]!, B));
          used += cost;
          this.ledger.consume(cost);
          this.stats.dataWrites++;
          this.stats.entryWrites++;
          this.stats.written++;
          this.stats.writtenBytes += len;
          diskCacheWrittenBytes.inc(len);
        }
      }
    } finally {
      // Back into the grant it came from (a refill meanwhile returned that grant whole to the ledger).
      this.ledger.giveBack(grant, size - used);
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
    const B = this.files.blockSize;
    const n = job.crcs.length;
    const len = (k: number) => Math.min(B, job.data.length - k * B);
    await this.pace(job.data.length);
    // Space for the blocks and a sidecar page (what is not used goes back in `finally`).
    let size = PAGE;
    for (let k = 0; k < n; k++) size += pageUp(len(k));
    const grant = await this.ledger.reserve(size);
    if (grant === undefined) {
      this.skip('no_space');
      return;
    }
    let used = 0;
    let h: Handle | undefined;
    try {
      const got = await this.files.acquireForWrite(job.name);
      if (!got) return; // a damaged sidecar was just removed: the next write of this object makes a new one
      h = got.h;
      if (got.created) {
        used += PAGE;
        this.ledger.consume(PAGE);
      }
      // Entries as they are now (another reader or process may have written some blocks): a
      // small read of the sidecar, synchronous as on the read paths.
      const old = this.files.entries(h, job.first, n);
      const oldLen = (k: number) => old.readUInt32LE(k * ENTRY_BYTES);
      const needed = (k: number) => !(oldLen(k) >= len(k) && oldLen(k) <= B);
      for (let i = 0; i < n; i++) {
        if (!needed(i)) continue;
        let j = i;
        // Only a whole block can be followed by another in one run (a prefix ends its run).
        while (j + 1 < n && len(j) === B && needed(j + 1)) j++;
        const bytes = job.data.subarray(i * B, j * B + len(j));
        const at = (job.first + i) * B;
        this.onWrite?.({ what: 'data', file: this.files.fileOf(h.name), first: job.first + i, blocks: j - i + 1, bytes: bytes.length });
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
        this.onWrite?.({ what: 'entries', file: `${this.files.fileOf(h.name)}.map`, first: job.first + i, blocks: j - i + 1, bytes: ents.length });
        if ((await pwriteP(h.map, ents, HEADER_BYTES + (job.first + i) * ENTRY_BYTES)) !== ents.length) throw new Error('short write of sidecar entries');
        this.stats.entryWrites++;
        used += cost;
        this.ledger.consume(cost);
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
      this.ledger.giveBack(grant, size - used);
      if (h) this.files.release(h);
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
        h.direct ??= await openP(this.files.fileOf(h.name), fsc.O_WRONLY | fsc.O_DIRECT);
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
}
