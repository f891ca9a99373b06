/**
 * SluiceFs: the FUSE-free filesystem core of FastFile mode (implements FsCore).
 *
 * `create()` lists the prefix once and builds the folder view (./tree.ts); the view
 * is fixed while mounted. Each open file handle pins the object's ETag from the
 * listing and gets its own read cursor (src/prefetch/read-cursor.ts); all handles
 * share one block cache, one in-flight budget and one cross-file prefetcher.
 * A read goes cursor -> block cache -> (missing blocks) ranged GETs pinned to the
 * ETag; an object changed since the listing fails the read with
 * ObjectChangedError, never with bytes of two versions.
 *
 * Semantics of the view (./tree.ts has the rules): a prefix is a folder prefix;
 * unsafe keys are skipped and listed in `skippedKeys`; a name that is both a file
 * and a folder is shown as the folder. Files are 0444 regular files, folders 0555;
 * every write-like operation is ReadOnlyError (EROFS).
 *
 * Memory: the block cache (--cache-size) plus GETs in flight (--max-inflight, which
 * read-ahead never exceeds; demand reads may add one read's blocks each). GET buffers
 * are recycled through the cache's pool, bounded by the sum of the two.
 *
 * Starvation metrics: a read served entirely from resident blocks waited 0 s;
 * otherwise its whole duration counts as time waiting on S3.
 */
import { performance } from 'node:perf_hooks';
import { BlockCache } from '../cache/block-cache.js';
import { AbortedError, BadHandleError, InvalidArgumentError, IsDirectoryError, NotDirectoryError, NotFoundError, ReadOnlyError } from '../errors.js';
import { channelObjects, openHandles, readWait, servedBytes } from '../metrics/metrics.js';
import { markFirstByte, markFirstFile } from '../metrics/milestones.js';
import { WaitClock } from '../metrics/wait-clock.js';
import { BlockFetcher } from '../prefetch/block-fetcher.js';
import { CrossFilePrefetcher } from '../prefetch/cross-file.js';
import { InflightBudget } from '../prefetch/inflight-budget.js';
import { ReadCursor } from '../prefetch/read-cursor.js';
import type { ObjectClient, ObjectInfo } from '../s3/object-client.js';
import { buildTree, lookupPath, normalizePrefix, type DirNode, type FileNode, type SkippedKey } from './tree.js';
import type { Attr, FsCore, StatFs } from './types.js';

export interface SluiceFsOptions {
  client: ObjectClient;
  /** Prefix within the client's bucket; treated as a folder ("data" means "data/"). */
  prefix: string;
  /** Channel name for metric labels; default 'fastfile'. */
  channel?: string;
  /** Bytes of the block cache (--cache-size). */
  cacheSize: number;
  /** Bytes of one ranged GET of read-ahead (--part-size). */
  partSize: number;
  /** Largest read-ahead window of one handle (--max-prefetch). */
  maxPrefetch: number;
  /** Bytes in flight across all readers (--max-inflight). */
  maxInflight: number;
  /** Files fetched ahead of a folder walk (--cross-file-prefetch); 0 disables. */
  crossFilePrefetch: number;
  /** Largest file fetched by cross-file prefetch (--cross-file-max-size). */
  crossFileMaxSize: number;
}

export interface ReadOptions {
  /** Settles the read early with AbortedError (e.g. the FUSE layer's deadline). */
  signal?: AbortSignal;
}

/**
 * Cache block size: at most 256 KiB (smaller only when --part-size is). A block is the
 * unit a random read fetches, so it is kept small: 256 KiB costs little more than
 * 4 KiB on a GET whose time is mostly its ~20 ms time to first byte, and it holds two
 * whole 128 KiB kernel reads. Read-ahead still fetches whole parts: a GET fills up to
 * part-size / block-size contiguous blocks.
 */
export const MAX_BLOCK_SIZE = 256 * 1024;

/** Share of --max-inflight that cross-file prefetch may use (see the budget's comment). */
const CROSS_FILE_SHARE = 0.5;

/** statfs block size: what `df` multiplies by; 4 KiB is the page size. */
const STATFS_BSIZE = 4096;

/** Directory size reported by getattr: 4096, as ext4 and most tools expect. */
const DIR_SIZE = 4096;

const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;
/** Access-mode bits of open(2) flags (O_RDONLY 0, O_WRONLY 1, O_RDWR 2). */
const O_ACCMODE = 3;
/**
 * O_TRUNC modifies the file even when opened read-only. (O_CREAT of an existing file
 * and O_APPEND without write access change nothing, so they are allowed, as Linux
 * allows them on a read-only mount.)
 */
const O_TRUNC = 0o1000;

interface Handle {
  node: FileNode;
  cursor: ReadCursor;
  /** True once a read on this handle returned bytes (the file then counts as delivered at release). */
  served?: boolean;
}

function checkOptions(o: SluiceFsOptions): void {
  const posInt = (v: number, flag: string) => {
    if (!(Number.isSafeInteger(v) && v > 0)) throw new InvalidArgumentError(`--${flag} must be a positive whole number of bytes, got ${v}`, { hint: `Set --${flag}, e.g. 8MiB` });
  };
  posInt(o.cacheSize, 'cache-size');
  posInt(o.partSize, 'part-size');
  posInt(o.maxPrefetch, 'max-prefetch');
  posInt(o.maxInflight, 'max-inflight');
  posInt(o.crossFileMaxSize, 'cross-file-max-size');
  if (!(Number.isSafeInteger(o.crossFilePrefetch) && o.crossFilePrefetch >= 0)) {
    throw new InvalidArgumentError(`--cross-file-prefetch must be 0 or more, got ${o.crossFilePrefetch}`, { hint: 'Set --cross-file-prefetch, e.g. 32 (0 disables)' });
  }
  if (o.maxInflight < o.partSize) {
    throw new InvalidArgumentError(`--max-inflight (${o.maxInflight}) is smaller than --part-size (${o.partSize}), so no read-ahead could ever start`, { hint: 'Raise --max-inflight or lower --part-size' });
  }
  if (o.cacheSize < o.partSize) {
    throw new InvalidArgumentError(`--cache-size (${o.cacheSize}) is smaller than --part-size (${o.partSize})`, { hint: 'Raise --cache-size or lower --part-size' });
  }
}

export class SluiceFs implements FsCore {
  /** Files and folders shown (the root folder excluded). */
  readonly entryCount: number;
  readonly fileCount: number;
  readonly totalBytes: number;
  /** Keys not shown, with the reason (unsafe names, files shadowed by folders). */
  readonly skippedKeys: readonly SkippedKey[];
  readonly channel: string;
  readonly prefix: string;
  readonly cache: BlockCache;
  readonly budget: InflightBudget;
  readonly fetcher: BlockFetcher;
  readonly crossFile: CrossFilePrefetcher;

  private readonly root: DirNode;
  private readonly handles = new Map<number, Handle>();
  private readonly waitClock: WaitClock;
  private nextFh = 1;
  private readonly uid = process.getuid?.() ?? 0;
  private readonly gid = process.getgid?.() ?? 0;
  private readonly mountTime = new Date();
  private closed = false;

  private constructor(private readonly opts: SluiceFsOptions, objects: ObjectInfo[]) {
    this.channel = opts.channel ?? 'fastfile';
    this.prefix = normalizePrefix(opts.prefix);
    const tree = buildTree(objects, this.prefix);
    this.root = tree.root;
    this.entryCount = tree.fileCount + tree.dirCount;
    this.fileCount = tree.fileCount;
    this.totalBytes = tree.totalBytes;
    this.skippedKeys = tree.skipped;
    // GET buffers are recycled (fresh memory costs a page fault per 4 KiB); the pool holds at
    // most what the cache and the GETs in flight may hold anyway, so memory stays bounded.
    this.cache = new BlockCache({
      capacityBytes: opts.cacheSize, blockSize: Math.min(MAX_BLOCK_SIZE, opts.partSize), poolBytes: opts.cacheSize + opts.maxInflight,
    });
    // Cross-file prefetch may take half the budget (at least a part, so a run always fits):
    // sequential read-ahead of large files read at the same time keeps the other half.
    this.budget = new InflightBudget(opts.maxInflight, { cross_file: Math.max(Math.floor(opts.maxInflight * CROSS_FILE_SHARE), opts.partSize) });
    this.fetcher = new BlockFetcher(opts.client, this.cache, this.budget, opts.partSize);
    this.crossFile = new CrossFilePrefetcher(this.fetcher, { depth: opts.crossFilePrefetch, maxSize: opts.crossFileMaxSize });
    this.waitClock = new WaitClock({ channel: this.channel, mode: 'FastFile' });
    openHandles.set({ channel: this.channel }, 0);
  }

  /** Checks the options, lists the prefix and builds the view. Rejects with the client's error (e.g. NoSuchBucketError). */
  static async create(opts: SluiceFsOptions): Promise<SluiceFs> {
    checkOptions(opts);
    const prefix = normalizePrefix(opts.prefix);
    const objects: ObjectInfo[] = [];
    for await (const o of opts.client.list(prefix)) objects.push(o);
    // The caller logs skippedKeys (src/fuse/fastfile.ts): the core stays free of I/O policy.
    return new SluiceFs(opts, objects);
  }

  getattr(path: string): Attr {
    const node = this.node(path);
    if (node.kind === 'dir') {
      return { mode: S_IFDIR | 0o555, size: DIR_SIZE, mtime: this.mountTime, nlink: 2 + node.subdirs, uid: this.uid, gid: this.gid };
    }
    return { mode: S_IFREG | 0o444, size: node.info.size, mtime: node.info.lastModified, nlink: 1, uid: this.uid, gid: this.gid };
  }

  /** The folder's names in listing order, without "." and "..". */
  readdir(path: string): string[] {
    const node = this.node(path);
    if (node.kind !== 'dir') throw new NotDirectoryError(path);
    return [...node.names];
  }

  async open(path: string, flags: number): Promise<number> {
    this.checkOpen();
    if ((flags & O_ACCMODE) !== 0 || (flags & O_TRUNC) !== 0) throw new ReadOnlyError('open for writing');
    const node = this.node(path);
    if (node.kind === 'dir') throw new IsDirectoryError(path);
    const fh = this.nextFh++;
    const file = node.parent.files[node.index]!;
    this.handles.set(fh, { node, cursor: new ReadCursor(file, this.fetcher, this.opts.maxPrefetch) });
    openHandles.set({ channel: this.channel }, this.handles.size);
    this.crossFile.onOpen(node.parent.files, node.index);
    return fh;
  }

  /**
   * Fills dst[0..n) with the file's bytes at `position`; n < length only at end of
   * file. Always settles: with the bytes, or with the S3 client's error (its own
   * deadlines and retries bound the wait), or AbortedError when `opts.signal` fires.
   */
  async read(fh: number, dst: Buffer, length: number, position: number, opts: ReadOptions = {}): Promise<number> {
    const h = this.handles.get(fh);
    if (!h) throw new BadHandleError(fh);
    if (!(Number.isSafeInteger(position) && position >= 0 && Number.isSafeInteger(length) && length >= 0)) {
      throw new InvalidArgumentError(`read of ${length} bytes at ${position}: offset and length must be whole numbers >= 0`);
    }
    const t0 = performance.now();
    const { bytes, waited } = await h.cursor.read(dst, length, position, opts.signal);
    const t1 = performance.now();
    const labels = { channel: this.channel, mode: 'FastFile' };
    readWait.observe(labels, waited ? (t1 - t0) / 1000 : 0);
    if (waited) this.waitClock.add(t0, t1);
    if (bytes > 0) {
      servedBytes.inc(labels, bytes);
      markFirstByte(this.channel, 'FastFile');
      h.served = true;
    }
    return bytes;
  }

  async release(fh: number): Promise<void> {
    const h = this.handles.get(fh);
    if (!h || !this.handles.delete(fh)) throw new BadHandleError(fh);
    openHandles.set({ channel: this.channel }, this.handles.size);
    // A file counts as delivered when a handle that served bytes from it is closed.
    if (h.served) {
      channelObjects.inc({ channel: this.channel, mode: 'FastFile' });
      markFirstFile(this.channel, 'FastFile');
    }
  }

  statfs(): StatFs {
    const blocks = Math.ceil(this.totalBytes / STATFS_BSIZE);
    return {
      bsize: STATFS_BSIZE, frsize: STATFS_BSIZE, blocks, bfree: 0, bavail: 0,
      files: this.entryCount + 1, ffree: 0, favail: 0, namemax: 255,
    };
  }

  refuse(op: string): never {
    throw new ReadOnlyError(op);
  }

  /** Open handles, for tests and summaries. */
  get openHandleCount(): number {
    return this.handles.size;
  }

  /** Stops prefetch and drops the cache (the ObjectClient belongs to the caller). Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.crossFile.close();
    this.handles.clear();
    this.cache.close();
    openHandles.set({ channel: this.channel }, 0);
  }

  private node(path: string) {
    const n = lookupPath(this.root, path);
    if (!n) throw new NotFoundError(path);
    return n;
  }

  private checkOpen(): void {
    if (this.closed) throw new AbortedError('the filesystem is closed');
  }
}
