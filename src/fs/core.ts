/**
 * SluiceFs: the FUSE-free filesystem core of FastFile mode (implements FsCore).
 *
 * `start()` returns at once and lists the prefix in the background; when the listing
 * completes it builds the folder view (./tree.ts), which is then fixed while mounted.
 * `create()` is `start()` plus waiting for the listing. Before the listing completes:
 *  - a lookup (getattr, open) of a path asks S3 directly, both at once: HEAD of the key
 *    and a one-key listing of "key/". Any key under "key/" makes it a folder (a folder
 *    wins over a file of the same name, as in the tree); else a HEAD answer makes it a
 *    file pinned to that ETag; else ENOENT. Answers are kept (single-flight per path) and
 *    a path's parent is looked up first, as the kernel does. This is how s3fs answers
 *    every lookup; it lets a training script open a known file before a large prefix
 *    is listed (time to first byte no longer includes the listing). The listing of "key/"
 *    asks for two keys: when the second shows that the first is a file and no folder
 *    (rememberFiles), the lookup of that file, the kernel's next one when it walks to the
 *    first file of a folder, is answered with no request (decision 0046).
 *  - readdir and statfs wait for the listing: a folder's names are never partial.
 *  - Such folders report st_nlink 1 ("count unknown", so find(1) does not assume leaves).
 *  - The listing yields to lookups: it sends its next page only once no lookup has been
 *    in flight for LOOKUP_QUIET_MS, waiting at most LISTING_YIELD_MAX_MS per page. The
 *    kernel looks a path up one folder at a time; a listing page sent in a gap would
 *    make the next lookup queue behind it on a server that answers in order. For the
 *    same reason the owner can hold the listing's pages until the mount is up
 *    (`holdListingUntil`), so the first lookups are not queued behind a page sent while
 *    nothing could look anything up yet.
 * If the listing fails, every later call fails with its error (the mount's owner,
 * src/fuse/fastfile.ts, stops the mount and reports it).
 * Each open file handle pins the object's ETag from the listing (or the early HEAD)
 * and gets its own read cursor (src/prefetch/read-cursor.ts); all handles
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
 * With --order-file (./order-file.ts), an open of a file in the order the training script
 * wrote moves the readers' progress in that order, and cross-file prefetch walks the order
 * (trusted: from the first open) instead of the folder's listing.
 *
 * A file read at random (or read again) that fits half the cache is fetched whole in the
 * background (random fill, src/prefetch/random-fill.ts), so its later reads are cache hits.
 *
 * Memory: the block cache (--cache-size) plus GETs in flight (--max-inflight, which
 * read-ahead and random fill never exceed; demand reads may add one read's blocks each). GET buffers
 * are recycled through the cache's pool, bounded by the sum of the two.
 *
 * Starvation metrics: a read served entirely from resident blocks waited 0 s;
 * otherwise its whole duration counts as time waiting on S3.
 */
import { performance } from 'node:perf_hooks';
import { AHEAD_SHARE, BlockCache } from '../cache/block-cache.js';
import { OPTIONS } from '../config/options.js';
import { AbortedError, BadHandleError, InvalidArgumentError, IsDirectoryError, NoSuchKeyError, NotDirectoryError, NotFoundError, ObjectArchivedError, ReadOnlyError } from '../errors.js';
import { archivedAs, needsProbe } from '../s3/archive.js';
import { compareKeys } from '../s3/lister.js';
import type { PruneFilter } from '../s3/object-client.js';
import { channelObjects, earlyLookups, listingSeconds, openHandles, orderFileSkipped, readWait, servedBytes } from '../metrics/metrics.js';
import { markFirstByte, markFirstFile } from '../metrics/milestones.js';
import { WaitClock } from '../metrics/wait-clock.js';
import { AheadShare } from '../prefetch/ahead-share.js';
import { BlockFetcher } from '../prefetch/block-fetcher.js';
import { CrossFilePrefetcher } from '../prefetch/cross-file.js';
import { InflightBudget } from '../prefetch/inflight-budget.js';
import { RandomFill } from '../prefetch/random-fill.js';
import { ReadCursor, type CursorStats, type ReadView } from '../prefetch/read-cursor.js';
import type { FirstObjects, ObjectClient, ObjectInfo } from '../s3/object-client.js';
import { Catalog, CatalogBuilder, dirOfRef, dirRef, FolderFiles, isDirRef, type Ref } from './catalog.js';
import { newDir, normalizePrefix, unsafeReason, type Node, type SkippedKey } from './tree.js';
import { OrderFile, orderFileProblem } from './order-file.js';
import type { Attr, BlockLease, CatalogView, DirEntries, FsCore, StatFs, TierOpensOf } from './types.js';

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
  /** --order-file: the file in which the training script writes the epoch's file order (./order-file.ts). */
  orderFile?: string | undefined;
  /** The mount point, so that absolute paths under it in the order file are understood. */
  mountpoint?: string | undefined;
  /** Places an unopened file may lag the readers before it counts as skipped (../prefetch/order.ts DROP_BEHIND; tests). */
  orderDropBehind?: number;
  /** Largest file fetched whole once read at random or read again (--random-fill-max-size); default cacheSize / 2, 0 disables. */
  randomFillMaxSize?: number;
  /** The S3 client's connections (--max-connections), to keep the random fill to half of them; default 64. */
  maxConnections?: number;
  /** What files and folders show as owner and permissions (--uid, --gid, --file-mode, --dir-mode); default the process's user, 0444 and 0555. */
  owner?: { uid?: number | undefined; gid?: number | undefined; fileMode?: number | undefined; dirMode?: number | undefined };
  /** Keeps an open file's blocks in the disk tier from eviction until the returned function is called (src/cache/disk-cache.ts). */
  pinObject?: (key: string, etag: string, size: number) => () => void;
  /**
   * The disk tier's whole-file fast path (src/cache/disk-cache.ts openWhole): at open, a
   * reader of the file's cache file when the whole file is on disk. Its reads bypass the
   * block cache and read-ahead; a read it cannot verify returns -1 and the handle goes the
   * usual way from then on. A read that must wait is given the read's signal: once it fires,
   * the read rejects with AbortedError and writes nothing more into dst (issue 43: the FUSE
   * layer has answered and may reuse the buffer).
   */
  openDirect?: (key: string, etag: string, size: number) => { read(dst: Buffer, length: number, position: number, signal?: AbortSignal): number | Promise<number>; close(): void; readonly bytes?: Buffer | undefined } | undefined;
  /**
   * Small files the FUSE thread may open from the disk tier itself (FsCore.tierOpens): the
   * tier's objects folder and block size, the cache file name of an object version, and a
   * count of the blocks read so (metrics). Given with openDirect.
   */
  tierFiles?: { objectsDir: string; blockSize: number; nameOf(key: string, etag: string): string; countHits(blocks: number, bytes: number): void };
  /** The mount's kernel readahead in bytes (--read-ahead-kb), so its out-of-order requests keep a reader sequential; default 0 (the cursor's own tolerances). */
  kernelReadahead?: number;
  /** Whether the sequential readers share one read-ahead budget (../prefetch/ahead-share.ts); default true. */
  shareReadAhead?: boolean;
  // ---- issue 15: snapshots, filters, archived objects ----
  /** The objects to show, from a snapshot: no LIST at all, the view exists before any request. */
  listing?: readonly ObjectInfo[];
  /** The view itself, built from a snapshot as it was read (src/snapshot/dataset.ts): no LIST and no onListing. */
  catalog?: Catalog;
  /** Keep only keys it matches; folders it rules out are never listed (src/s3/filters.ts). */
  filter?: PruneFilter;
  /** Record version ids when the bucket is versioned (the listing is saved by --snapshot-out). */
  versions?: boolean;
  /** Called with the listed objects before the view is built; returns the objects to show (archived probe, --skip-archived, --snapshot-out). */
  onListing?: (objects: ObjectInfo[]) => Promise<ObjectInfo[]>;
  /**
   * With onListing: the objects it must see (archive classes); every other object goes into the
   * view as it is listed, so a listing of 10 M objects never holds 10 M ObjectInfos (issue 46:
   * ~800 bytes each). Absent: onListing sees every object.
   */
  holdBack?: (o: ObjectInfo) => boolean;
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

/**
 * Default --random-fill-max-size: half the cache, the share the cache lets bytes fetched ahead
 * and unread take (AHEAD_SHARE, src/cache/block-cache.ts). A fill's blocks are such bytes until
 * read, so a larger file could not be filled whole before its reader reached it; and the files
 * being filled at once add up to at most this (src/prefetch/random-fill.ts), so the other half
 * of the cache keeps everyone else's blocks, and LRU takes those older blocks before any of
 * the filling file's own. It was a quarter until issue 44: a 1 GiB file under the default
 * cache of a 24 GiB machine (2.9 GiB) was then never filled, and fio's rand_read on it ran at
 * 8 MiB/s, one GET per read, against s3fs's 500+ (decision 0033).
 */
const RANDOM_FILL_CACHE_SHARE = AHEAD_SHARE;

/**
 * Random fill GETs in flight at once: at most 16, and at most half of --max-connections, so
 * demand GETs always find a free connection (the S3 client's limiter queues GETs in
 * order). 16 GETs of RANDOM_FILL_GET_SIZE (32 MiB in flight) at ~80 MB/s per stream
 * fetch ~600 MB/s despite the ~25 ms to first byte of each.
 */
const RANDOM_FILL_MAX_GETS = 16;

/**
 * Random fill GETs plus readers' own GETs in flight, while any reader's GET is: 4 (the fill
 * keeps one GET at least). The fill's bytes go through the same event loop (receive, copy,
 * fresh pages mapped: ~36 ms per 8 MiB slab on the shared VM) as the readers' bytes, so 16
 * fill GETs made each of fio rand_read_4t's reads wait behind them (3 MiB/s against 13
 * without the fill, one run); 4 fill GETs beside 4 readers still 8, 1 beside 4 readers 13,
 * while one reader beside 3-4 fill GETs had its file filled within the job (decision 0033).
 * 4 GETs of 2 MiB fetch ~160 MB/s at 25 ms + 80 MB/s per stream.
 */
const RANDOM_FILL_SHARED_GETS = 4;

/**
 * Bytes of one random fill GET: 2 MiB (or --part-size if smaller). A read of a block that a
 * fill GET is fetching waits for that GET (single flight), so it is kept close to the cost
 * of the read's own GET: 25 ms to first byte + 26 ms at 80 MB/s, against 25 + 3 ms for one
 * 256 KiB block. Measured on the bench's random scenario (8 threads, 64 MiB file, s3-like
 * proxy): 8 x 1 MiB, 16 x 2 MiB and 8 x 8 MiB fills were within the noise of each other.
 */
const RANDOM_FILL_GET_SIZE = 2 * 1024 * 1024;

/**
 * A lookup burst counts as over after 10 ms without one: the kernel sends a path's
 * lookups back to back (microseconds apart), while a page held back 10 ms costs a
 * listing little (a page takes 30-300 ms).
 */
const LOOKUP_QUIET_MS = 10;

/**
 * The longest a listing page waits for lookups: 200 ms, so a reader that looks up files
 * without pause slows the listing (and so `ls`) at most to one page per 200 ms, and
 * never stops it.
 */
const LISTING_YIELD_MAX_MS = 200;

/** statfs block size: what `df` multiplies by; 4 KiB is the page size. */
/**
 * How long a folder's carried read-ahead window (ReadCursor step 3) stays good after a
 * handle read a file of it to the end sequentially: a loader opens its next file within
 * milliseconds, or after decoding a shard for a few seconds at most. Later, or after a
 * handle that read but stopped short (or went random), the next file ramps up from the
 * first window again; so a reader that only peeks at files costs one window at most.
 */
const CARRY_MS = 5000;
/**
 * Share of the cache that blocks lent to reads outside read() (lend()) may take: an eighth.
 * A sequential reader's lend reaches at most half its window ahead of it (where its next
 * batch is due: 32 MiB at the default --max-prefetch), so a 256 MiB cache (the smallest
 * default) lends fully to one reader, and the default 1/8 of RAM to several; a reader
 * refused a lend is answered in JavaScript as before. It is also the most a lend can add to
 * the cache's memory (see lend()).
 */
const LEND_SHARE = 1 / 8;

/** Parts of one lend: native/src/fuse_lend.c LEND_RANGES, the most it takes. */
const LEND_PARTS = 16;
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

/**
 * What a path names: a listed entry of the catalog (a Ref), or before the listing completes
 * a node found by asking S3 (see the module comment).
 */
type Entry = Ref | Node;

/** Folders whose file lists cross-file prefetch walks keep their FolderFiles (walks compare them by identity): a few per walk (MAX_WALKS is 64). */
const FOLDER_VIEWS = 256;

interface Handle {
  file: { key: string; etag: string; size: number };
  /** The listed folder holding the file (its carry, see CARRY_MS), or -1 for a file found before the listing completed. */
  dir: number;
  cursor: ReadCursor;
  /** True once a read on this handle returned bytes (the file then counts as delivered at release). */
  served?: boolean;
  /** Lets the disk tier evict the file's blocks again (see SluiceFsOptions.pinObject). */
  unpin?: () => void;
  /** The file read straight from the disk tier (see SluiceFsOptions.openDirect). */
  direct?: ReturnType<NonNullable<SluiceFsOptions['openDirect']>>;
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
  const orderProblem = o.orderFile === undefined ? undefined : orderFileProblem(o.orderFile);
  if (orderProblem !== undefined) throw new InvalidArgumentError(orderProblem, { hint: 'Point --order-file at a file in an existing folder, e.g. /tmp/order.txt (the script writes it)' });
  if (o.maxInflight < o.partSize) {
    throw new InvalidArgumentError(`--max-inflight (${o.maxInflight}) is smaller than --part-size (${o.partSize}), so no read-ahead could ever start`, { hint: 'Raise --max-inflight or lower --part-size' });
  }
  if (o.randomFillMaxSize !== undefined && !(Number.isSafeInteger(o.randomFillMaxSize) && o.randomFillMaxSize >= 0 && o.randomFillMaxSize <= o.cacheSize)) {
    throw new InvalidArgumentError(`--random-fill-max-size must be between 0 and --cache-size (${o.cacheSize}), got ${o.randomFillMaxSize}`, { hint: 'Lower --random-fill-max-size (0 disables), or raise --cache-size' });
  }
  if (o.cacheSize < o.partSize) {
    throw new InvalidArgumentError(`--cache-size (${o.cacheSize}) is smaller than --part-size (${o.partSize})`, { hint: 'Raise --cache-size or lower --part-size' });
  }
}

export class SluiceFs implements FsCore {
  /** Files and folders shown (the root folder excluded). */
  readonly channel: string;
  /** The channel's metric labels, built once (the read path uses them for every read). */
  private readonly readLabels: { channel: string; mode: 'FastFile' };
  readonly prefix: string;
  readonly cache: BlockCache;
  readonly budget: InflightBudget;
  readonly fetcher: BlockFetcher;
  /** The read-ahead budget the channel's sequential readers share (../prefetch/ahead-share.ts). */
  readonly share: AheadShare | undefined;
  readonly crossFile: CrossFilePrefetcher;
  /** The order the training script announced (--order-file), if given. */
  readonly order: OrderFile | undefined;
  /** Marks a listing row hot in the FUSE thread (setTierHot), once the listing is handed over. */
  private tierHot: ((row: number) => void) | undefined;
  readonly randomFill: RandomFill;
  /** Reads of closed handles by how their cursor classified them (for tests and the bench). */
  readonly readStats: CursorStats = { sequentialReads: 0, randomReads: 0 };

  /** Settles when the listing is complete (the view is then fixed), or rejects with its error. */
  readonly listed: Promise<void>;
  /** Settles when the listing's first page arrives (bucket and credentials work), or rejects with its error. */
  readonly firstAnswer: Promise<void>;

  /** The complete view; undefined while the listing runs. */
  private cat: Catalog | undefined;
  /** Per listed file, its row in the listing handed to the FUSE thread (tierOpens' nameOf), or -1; only with tierOpens. */
  private rows: Int32Array | undefined;
  /** Folders' file lists handed to cross-file prefetch, most recent last (at most FOLDER_VIEWS). */
  private readonly folderViews = new Map<number, FolderFiles>();
  /** Read-ahead windows carried to a folder's next file (release(); -1 for early files), and when set. */
  private readonly carries = new Map<number, { window: number; atMs: number }>();
  private listError: unknown;
  /** Lookups answered before the listing completed, by path (dropped once it completes). */
  private readonly early = new Map<string, Node>();
  private readonly probes = new Map<string, Promise<Entry>>();
  /**
   * Files a folder probe's two-key listing showed to be files and no folders (see
   * rememberFiles), by key: a later probe of one is answered from here, without a request
   * (dropped once the listing completes).
   */
  private readonly seenFiles = new Map<string, ObjectInfo>();
  /** Stands in for the root, and for the parent of early files, until the tree exists. */
  private readonly earlyRoot = newDir('', undefined);
  private readonly stop = new AbortController();
  private lookupsInFlight = 0;
  private lookupsIdleSince = 0;
  private listingGate: Promise<void> | undefined;
  private readonly handles = new Map<number, Handle>();
  /** Bytes of blocks lent (lend()) and not yet given back. */
  private lentBytes = 0;
  private readonly waitClock: WaitClock;
  private nextFh = 1;
  private readonly uid: number;
  private readonly gid: number;
  /** Permission bits shown; write bits are cleared (the mount is read-only whatever they say). */
  private readonly fileMode: number;
  private readonly dirMode: number;
  private readonly mountTime = new Date();
  private closed = false;

  private constructor(private readonly opts: SluiceFsOptions) {
    this.channel = opts.channel ?? 'fastfile';
    this.readLabels = { channel: this.channel, mode: 'FastFile' };
    this.prefix = normalizePrefix(opts.prefix);
    this.uid = opts.owner?.uid ?? process.getuid?.() ?? 0;
    this.gid = opts.owner?.gid ?? process.getgid?.() ?? 0;
    this.fileMode = (opts.owner?.fileMode ?? 0o444) & 0o555;
    this.dirMode = (opts.owner?.dirMode ?? 0o555) & 0o555;
    this.earlyRoot.provisional = true;
    // GET buffers are recycled (fresh memory costs a page fault per 4 KiB); the pool holds at
    // most what the cache and the GETs in flight may hold anyway, so memory stays bounded.
    this.cache = new BlockCache({
      capacityBytes: opts.cacheSize, blockSize: Math.min(MAX_BLOCK_SIZE, opts.partSize), poolBytes: opts.cacheSize + opts.maxInflight,
    });
    // Cross-file prefetch may take half the budget (at least a part, so a run always fits):
    // sequential read-ahead of large files read at the same time keeps the other half.
    this.budget = new InflightBudget(opts.maxInflight, { cross_file: Math.max(Math.floor(opts.maxInflight * CROSS_FILE_SHARE), opts.partSize) });
    this.fetcher = new BlockFetcher(opts.client, this.cache, this.budget, opts.partSize);
    if (opts.shareReadAhead !== false) {
      const share = (this.share = new AheadShare({ maxPrefetch: opts.maxPrefetch, partSize: opts.partSize, channel: this.channel }));
      this.fetcher.onPartTimed = (ms) => share.sample(ms);
    }
    this.crossFile = new CrossFilePrefetcher(this.fetcher, {
      depth: opts.crossFilePrefetch,
      maxSize: opts.crossFileMaxSize,
      onFetch: (f) => {
        // A file the FUSE thread could open from the tier: let it leave this file's opens to open() (openNode).
        const row = (f as { row?: number }).row;
        if (this.tierHot !== undefined && row !== undefined && row >= 0) this.tierHot(row);
      },
    });
    this.randomFill = new RandomFill(this.fetcher, {
      maxFileSize: opts.randomFillMaxSize ?? Math.floor(opts.cacheSize * RANDOM_FILL_CACHE_SHARE),
      maxGets: Math.max(1, Math.min(RANDOM_FILL_MAX_GETS, Math.floor((opts.maxConnections ?? OPTIONS.maxConnections.default) / 2))),
      sharedGets: RANDOM_FILL_SHARED_GETS,
      getSize: Math.min(RANDOM_FILL_GET_SIZE, opts.partSize),
    });
    this.waitClock = new WaitClock({ channel: this.channel, mode: 'FastFile' });
    openHandles.set({ channel: this.channel }, 0);
    let answered!: () => void;
    let failedFirst!: (err: unknown) => void;
    this.firstAnswer = new Promise<void>((resolve, reject) => { answered = resolve; failedFirst = reject; });
    this.firstAnswer.catch(() => undefined); // observed by the owner; never an unhandled rejection
    this.listed = this.runListing(answered);
    this.listed.catch((err: unknown) => { this.listError = err; failedFirst(err); });
    this.order = opts.orderFile === undefined ? undefined : new OrderFile({
      file: opts.orderFile,
      mountpoint: opts.mountpoint,
      channel: this.channel,
      ready: this.listed,
      resolve: (rel) => {
        const f = this.cat?.find('/' + rel);
        if (f === undefined || isDirRef(f)) return undefined;
        return { key: this.cat!.key(f), etag: this.cat!.etag(f), size: this.cat!.size(f), row: this.rows ? this.rows[f]! : -1 };
      },
      onOrder: (_order, previous) => { if (previous) this.crossFile.forget(previous.files); },
      onSkip: (f) => { if (this.fetcher.discardUnread(f)) orderFileSkipped.inc({ channel: this.channel }); },
      ...(opts.orderDropBehind !== undefined ? { dropBehind: opts.orderDropBehind } : {}),
    });
  }

  /**
   * Checks the options and starts listing the prefix; returns at once. Lookups work from
   * now on (see the module comment); `listed` and `firstAnswer` report on the listing.
   */
  static start(opts: SluiceFsOptions): SluiceFs {
    checkOptions(opts);
    return new SluiceFs(opts);
  }

  /** `start()`, then wait for the listing. Rejects with the client's error (e.g. NoSuchBucketError). */
  static async create(opts: SluiceFsOptions): Promise<SluiceFs> {
    const fs = SluiceFs.start(opts);
    try {
      await fs.listed;
    } catch (err) {
      await fs.close();
      throw err;
    }
    return fs;
  }

  private async runListing(answered: () => void): Promise<void> {
    const t0 = performance.now();
    if (this.opts.catalog) {
      answered();
      this.installCatalog(this.opts.catalog, t0);
      return;
    }
    // Objects go into the catalog's compact columns as they come; only those onListing must
    // see (holdBack) wait in `held` for the listing's end.
    const builder = new CatalogBuilder(this.prefix);
    const held: ObjectInfo[] = [];
    const onListing = this.opts.onListing;
    const hold = onListing ? (this.opts.holdBack ?? (() => true)) : () => false;
    const take = (o: ObjectInfo) => { if (hold(o)) held.push(o); else builder.add(o); };
    const beforeRequest = () => this.afterLookups();
    const filter = this.opts.filter;
    if (this.opts.listing) for (const o of this.opts.listing) take(o);
    else {
      for await (const o of this.opts.client.list(this.prefix, { signal: this.stop.signal, beforeRequest, onPage: answered, ...(filter ? { filter } : {}), ...(this.opts.versions ? { versions: true } : {}) })) {
        if (!filter || filter.matches(o.key)) take(o);
      }
    }
    answered(); // also for a client that does not report pages (onPage is optional)
    // The catalog takes objects in any order (./catalog.ts), so the held ones may come last.
    for (const o of onListing ? await onListing(held) : held) builder.add(o);
    // The caller logs skippedKeys (src/fuse/fastfile.ts): the core stays free of I/O policy.
    this.installCatalog(builder.finish(), t0);
  }

  private installCatalog(cat: Catalog, t0: number): void {
    if (this.opts.tierFiles && this.opts.openDirect) this.rows = new Int32Array(cat.fileCount).fill(-1);
    this.cat = cat;
    this.early.clear();
    this.seenFiles.clear();
    listingSeconds.set({ channel: this.channel }, (performance.now() - t0) / 1000);
  }

  /**
   * Holds the listing's next pages until `ready` settles (at most LISTING_YIELD_MAX_MS per
   * page), then counts lookups as quiet from that moment: the owner passes the mount.
   */
  holdListingUntil(ready: Promise<unknown>): void {
    this.listingGate = ready.then(() => { this.lookupsIdleSince = performance.now(); }, () => undefined);
  }

  /** Resolves once no lookup has been in flight for LOOKUP_QUIET_MS, or after LISTING_YIELD_MAX_MS. */
  private async afterLookups(): Promise<void> {
    const until = performance.now() + LISTING_YIELD_MAX_MS;
    if (this.listingGate) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([this.listingGate, new Promise((r) => { timer = setTimeout(r, LISTING_YIELD_MAX_MS); })]);
      clearTimeout(timer);
    }
    for (;;) {
      const now = performance.now();
      const quietAt = this.lookupsInFlight > 0 ? now + LOOKUP_QUIET_MS : this.lookupsIdleSince + LOOKUP_QUIET_MS;
      if (quietAt <= now || now >= until || this.stop.signal.aborted) return;
      await new Promise((r) => setTimeout(r, Math.min(quietAt, until) - now));
    }
  }

  /** True once the listing has completed and the view is fixed. */
  get isListed(): boolean {
    return this.cat !== undefined;
  }

  /** Files and folders shown (the root folder excluded); 0 until listed. */
  get entryCount(): number {
    return this.cat ? this.cat.fileCount + this.cat.dirCount : 0;
  }

  get fileCount(): number {
    return this.cat?.fileCount ?? 0;
  }

  get totalBytes(): number {
    return this.cat?.totalBytes ?? 0;
  }

  /** Keys not shown, with the reason (unsafe names, files shadowed by folders); empty until listed. */
  get skippedKeys(): readonly SkippedKey[] {
    return this.cat?.skipped ?? [];
  }

  /** Sync once listed; before that a promise (the lookup may ask S3). */
  getattr(path: string): Attr | Promise<Attr> {
    if (this.cat) return this.attrOf(this.node(path));
    return this.earlyNode(path).then((n) => this.attrOf(n));
  }

  /** The folder's names in listing order, without "." and "..". Waits for the listing. */
  readdir(path: string): string[] | Promise<string[]> {
    if (this.cat) return this.names(path);
    return this.listed.then(() => this.names(path));
  }

  /** The folder's entries by index (no array of its names: a folder may hold millions) and each entry's kind. Waits for the listing. */
  readdirEntries(path: string): DirEntries | Promise<DirEntries> {
    if (this.cat) return this.entries(path);
    return this.listed.then(() => this.entries(path));
  }

  /**
   * A file handle for `path`. Synchronous once listed (the kernel's open waits for no
   * promise); a promise before (the lookup may ask S3). Failures are always a rejection.
   */
  open(path: string, flags: number): number | Promise<number> {
    try {
      this.checkOpen();
      if ((flags & O_ACCMODE) !== 0 || (flags & O_TRUNC) !== 0) throw new ReadOnlyError('open for writing');
      return this.cat ? this.openNode(this.node(path), path) : this.openEarly(path);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  private async openEarly(path: string): Promise<number> {
    const node = this.cat ? this.node(path) : await this.earlyNode(path);
    this.checkOpen();
    return this.openNode(node, path);
  }

  /** A handle on `node` (open() has checked the flags). */
  private openNode(node: Entry, path: string): number {
    if (typeof node === 'number' ? isDirRef(node) : node.kind === 'dir') throw new IsDirectoryError(path);
    // An early file (dir -1) has no known siblings, so no cross-file prefetch follows it.
    let info: ObjectInfo;
    let dir = -1;
    if (typeof node === 'number') {
      dir = this.cat!.dirOfFile(node);
      info = this.cat!.info(node, dir);
    } else info = (node as Extract<Node, { kind: 'file' }>).info;
    // Shown, but not readable until restored: a clear error now, not EIO mid-epoch (issue 15).
    const archived = archivedAs(info);
    if (archived !== undefined) throw new ObjectArchivedError(this.opts.client.bucket, info.key, archived);
    const fh = this.nextFh++;
    const file = { key: info.key, etag: info.etag, size: info.size };
    // Whole in the memory cache (fetched ahead this epoch, most likely also just written to the
    // tier): read from memory and let cross-file prefetch go on, as without the tier
    // (BENCHMARKS.md t14-hot). The tier's direct path is for files memory no longer holds.
    const direct = this.opts.openDirect !== undefined && !this.fetcher.cachedWhole(file) ? this.opts.openDirect(file.key, file.etag, file.size) : undefined;
    const carry = this.carries.get(dir);
    const startWindow = carry !== undefined && performance.now() - carry.atMs < CARRY_MS ? carry.window : 0;
    this.handles.set(fh, { file, dir, cursor: new ReadCursor(file, this.fetcher, this.opts.maxPrefetch, this.randomFill, this.opts.kernelReadahead ?? 0, startWindow, this.share), unpin: this.opts.pinObject?.(file.key, file.etag, file.size), direct });
    openHandles.set({ channel: this.channel }, this.handles.size);
    // A file whole on disk: its neighbours most likely are too (same epoch), so no cross-file prefetch (it would copy them into memory for nothing).
    // In the announced order (--order-file): the readers' progress moves even for a file read from disk.
    const inOrder = typeof node === 'number' ? this.order?.place(file) : undefined;
    if (typeof node === 'number' && !direct) {
      if (inOrder) this.crossFile.onOpen(inOrder.files, inOrder.index, true);
      else {
        const files = this.folderFiles(dir);
        this.crossFile.onOpen(files, node - files.first);
      }
    }
    return fh;
  }

  /** Folder d's file list for cross-file prefetch: the same object while its walks may last (FOLDER_VIEWS). */
  private folderFiles(d: number): FolderFiles {
    let v = this.folderViews.get(d);
    if (v) this.folderViews.delete(d);
    else v = new FolderFiles(this.cat!, d, this.rows);
    this.folderViews.set(d, v);
    if (this.folderViews.size > FOLDER_VIEWS) this.folderViews.delete(this.folderViews.keys().next().value!);
    return v;
  }

  /**
   * Fills dst[0..n) with the file's bytes at `position`; n < length only at end of
   * file. Always settles: with the bytes, or with the S3 client's error (its own
   * deadlines and retries bound the wait), or AbortedError when `opts.signal` fires.
   * With `view` (ReadCursor.readNow), a read whose bytes lie in one cache buffer leaves dst
   * alone and hands the caller that buffer's bytes and pins instead.
   */
  read(fh: number, dst: Buffer, length: number, position: number, opts: ReadOptions = {}, view?: ReadView): number | Promise<number> {
    const h = this.handles.get(fh);
    if (!h) throw new BadHandleError(fh);
    if (!(Number.isSafeInteger(position) && position >= 0 && Number.isSafeInteger(length) && length >= 0)) {
      throw new InvalidArgumentError(`read of ${length} bytes at ${position}: offset and length must be whole numbers >= 0`);
    }
    // Blocks in cache answer synchronously: no promise, no await on the hot path.
    const t0 = performance.now();
    if (h.direct) {
      const r = h.direct.read(dst, length, position, opts.signal);
      if (typeof r === 'number') {
        if (r >= 0) return this.served(h, r, false, t0);
        h.direct = undefined;
      } else {
        return r.then((n) => {
          if (n >= 0) return this.served(h, n, true, t0);
          h.direct = undefined;
          // Given up meanwhile: the usual way would copy resident blocks into dst at once.
          if (opts.signal?.aborted) throw new AbortedError('read aborted', { cause: opts.signal.reason });
          return this.read(fh, dst, length, position, opts);
        });
      }
    }
    const r = h.cursor.readNow(dst, length, position, opts.signal, view);
    if (typeof r === 'number') return this.served(h, r, false, t0);
    return r.then((res) => this.served(h, res.bytes, res.waited, t0));
  }

  /** Records a read of `bytes` that started at `t0` (and waited for a fetch, or not). */
  private served(h: { served?: boolean }, bytes: number, waited: boolean, t0: number): number {
    const labels = this.readLabels;
    if (waited) {
      const t1 = performance.now();
      readWait.observe(labels, (t1 - t0) / 1000);
      this.waitClock.add(t0, t1);
    } else readWait.observe(labels, 0);
    if (bytes > 0) {
      servedBytes.inc(labels, bytes);
      markFirstByte(this.channel, 'FastFile');
      h.served = true;
    }
    return bytes;
  }

  /**
   * The whole file's verified bytes when handle `fh` holds them in memory until its release
   * (a small file read whole from the disk tier at open), else undefined. Reads may then be
   * answered from them outside read() (the FUSE thread: native/src/fuse_memread.c) until the
   * handle is released; servedElsewhere() counts them.
   */
  heldBytes(fh: number): Buffer | undefined {
    return this.handles.get(fh)?.direct?.bytes;
  }

  /**
   * Files the FUSE thread may open from the disk tier without open() (FsCore.tierOpens):
   * listed files (of one block, or up to the size asked) that open() would read from the
   * tier too. Not archived ones (open() refuses those) and not empty ones (nothing to read).
   */
  get tierOpens(): TierOpensOf | undefined {
    const t = this.opts.tierFiles;
    if (!t || !this.opts.openDirect) return undefined;
    return {
      objectsDir: t.objectsDir,
      blockSize: t.blockSize,
      nameOf: (path: string, maxSize = t.blockSize, row?: number): string | undefined => {
        const cat = this.cat;
        if (!cat) return undefined;
        const f = cat.find(path);
        if (f === undefined || isDirRef(f)) return undefined;
        const size = cat.size(f);
        if (!(size > 0 && size <= maxSize)) return undefined;
        const info = cat.info(f);
        if (archivedAs(info) !== undefined) return undefined;
        if (row !== undefined && this.rows) this.rows[f] = row;
        return t.nameOf(info.key, info.etag);
      },
      nameOfFile: (f: number, maxSize = t.blockSize): string | undefined => {
        const cat = this.cat;
        if (!cat || !(f >= 0 && f < cat.fileCount)) return undefined;
        const size = cat.size(f);
        if (!(size > 0 && size <= maxSize)) return undefined;
        const info = cat.info(f);
        if (archivedAs(info) !== undefined) return undefined;
        if (this.rows) this.rows[f] = f;
        return t.nameOf(info.key, info.etag);
      },
    };
  }

  /** See FsCore.catalogView: the same attributes attrOf() gives, as the catalog's columns. */
  catalogView(): CatalogView | undefined {
    const cat = this.cat;
    if (!cat) return undefined;
    return {
      columns: cat.columns(), fileMode: S_IFREG | this.fileMode, dirMode: S_IFDIR | this.dirMode, dirSize: DIR_SIZE,
      dirMtimeMs: this.mountTime.getTime(), uid: this.uid, gid: this.gid, fileCount: cat.fileCount,
    };
  }

  /** See FsCore.setTierHot. */
  setTierHot(mark: ((row: number) => void) | undefined): void {
    this.tierHot = mark;
  }

  /** See FsCore.openedElsewhere: counted as open() and read() would count these handles. */
  openedElsewhere(reads: number, bytes: number, diskBytes: number, delivered: number, diskFiles: number): void {
    this.countServedElsewhere(reads, bytes);
    if (delivered > 0) {
      channelObjects.inc({ channel: this.channel, mode: 'FastFile' }, delivered);
      markFirstFile(this.channel, 'FastFile');
    }
    this.opts.tierFiles?.countHits(diskFiles, diskBytes);
  }

  /**
   * Counts `reads` reads of handle `fh` that were answered outside read() (from heldBytes(),
   * or from a lend() whose reads reached offset `end`), `bytes` in all, as read() would.
   */
  servedElsewhere(fh: number, reads: number, bytes: number, end?: number): void {
    const h = this.handles.get(fh);
    if (!h) return;
    this.countServedElsewhere(reads, bytes);
    if (bytes > 0) h.served = true;
    if (end !== undefined && end > 0) h.cursor.servedTo(end);
  }

  /** Bytes lent by lend() and not yet given back (tests: every lease ends by release or unmount). */
  get lent(): number {
    return this.lentBytes;
  }

  /**
   * The resident blocks a sequential handle's next reads may be answered from outside
   * read() (the FUSE thread: native/src/fuse_lend.c), up to the read its cursor must see
   * (ReadCursor.lend, step 6), as at most LEND_PARTS contiguous parts; undefined when its
   * reads must all come here. Bytes lent and not yet given back are bounded by LEND_SHARE
   * of the cache: lent blocks stay in the cache's count, but one evicted while lent keeps
   * its buffer until the lease ends, so that is the most they can add to the cache's memory.
   */
  lend(fh: number): BlockLease | undefined {
    const h = this.handles.get(fh);
    if (!h || h.direct) return undefined;
    const room = Math.floor(this.cache.capacityBytes * LEND_SHARE) - this.lentBytes;
    if (room < this.cache.blockSize) return undefined;
    const l = h.cursor.lend(room);
    if (!l) return undefined;
    // Runs of blocks that follow each other in one buffer (one GET's), each lent as one part.
    const runs: { first: Buffer; length: number }[] = [];
    let covered = 0;
    for (const b of l.blocks) {
      const run = runs[runs.length - 1];
      if (run && run.first.buffer === b.buffer && run.first.byteOffset + run.length === b.byteOffset) run.length += b.length;
      else if (runs.length < LEND_PARTS) runs.push({ first: b, length: b.length });
      else break;
      covered += b.length;
    }
    const parts = runs.map((r) => (r.length === r.first.length ? r.first : Buffer.from(r.first.buffer, r.first.byteOffset, r.length)));
    const stop = Math.min(l.stop, l.start + covered);
    this.lentBytes += covered;
    let ended = false;
    return {
      start: l.start, stop, size: h.cursor.file.size, parts,
      release: () => {
        if (ended) return;
        ended = true;
        this.lentBytes -= covered;
        for (const p of l.pins) p.unref();
      },
    };
  }

  /** `reads` reads answered at once outside read(), `bytes` in all, counted as read() counts them. */
  private countServedElsewhere(reads: number, bytes: number): void {
    const labels = this.readLabels;
    for (let i = 0; i < reads; i++) readWait.observe(labels, 0);
    if (bytes > 0) {
      servedBytes.inc(labels, bytes);
      markFirstByte(this.channel, 'FastFile');
    }
  }

  /** Synchronous; an unknown handle is a rejection (BadHandleError). */
  release(fh: number): void | Promise<void> {
    const h = this.handles.get(fh);
    if (!h || !this.handles.delete(fh)) return Promise.reject(new BadHandleError(fh));
    h.cursor.close();
    // Step 3 of ReadCursor: a file read to its end sequentially carries its window to the
    // folder's next file; one read otherwise (stopped short, random) ends the carry.
    const { window, read } = h.cursor.carry();
    if (window > 0) this.carries.set(h.dir, { window, atMs: performance.now() });
    else if (read) this.carries.delete(h.dir);
    h.direct?.close();
    h.unpin?.();
    this.readStats.sequentialReads += h.cursor.stats.sequentialReads;
    this.readStats.randomReads += h.cursor.stats.randomReads;
    openHandles.set({ channel: this.channel }, this.handles.size);
    // A file counts as delivered when a handle that served bytes from it is closed.
    if (h.served) {
      channelObjects.inc({ channel: this.channel, mode: 'FastFile' });
      markFirstFile(this.channel, 'FastFile');
    }
  }

  /** Waits for the listing (the totals need it). */
  statfs(): StatFs | Promise<StatFs> {
    if (this.cat) return this.statfsNow();
    return this.listed.then(() => this.statfsNow());
  }

  private statfsNow(): StatFs {
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
    this.stop.abort();
    await this.listed.catch(() => undefined);
    this.order?.close();
    this.crossFile.close();
    this.randomFill.close();
    this.handles.clear();
    this.cache.close();
    openHandles.set({ channel: this.channel }, 0);
  }

  private node(path: string): Ref {
    const n = this.cat!.find(path);
    if (n === undefined) throw new NotFoundError(path);
    return n;
  }

  private names(path: string): string[] {
    const e = this.entries(path);
    const out = new Array<string>(e.length);
    for (let i = 0; i < e.length; i++) out[i] = e.name(i);
    return out;
  }

  private entries(path: string): DirEntries {
    const node = this.node(path);
    if (!isDirRef(node)) throw new NotDirectoryError(path);
    return this.cat!.entries(dirOfRef(node));
  }

  private attrOf(node: Entry): Attr {
    if (typeof node === 'number') {
      const cat = this.cat!;
      if (isDirRef(node)) return { mode: S_IFDIR | this.dirMode, size: DIR_SIZE, mtime: this.mountTime, nlink: 2 + cat.subdirs(dirOfRef(node)), uid: this.uid, gid: this.gid };
      return { mode: S_IFREG | this.fileMode, size: cat.size(node), mtime: new Date(cat.mtimeMs(node)), nlink: 1, uid: this.uid, gid: this.gid };
    }
    if (node.kind === 'dir') {
      // nlink 1 = "count unknown", for a folder found before its subfolders were listed.
      const nlink = node.provisional ? 1 : 2 + node.subdirs;
      return { mode: S_IFDIR | this.dirMode, size: DIR_SIZE, mtime: this.mountTime, nlink, uid: this.uid, gid: this.gid };
    }
    return { mode: S_IFREG | this.fileMode, size: node.info.size, mtime: node.info.lastModified, nlink: 1, uid: this.uid, gid: this.gid };
  }

  /** A path's node before the listing completes, asked of S3 once per path (see the module comment). */
  private earlyNode(path: string): Promise<Entry> {
    if (this.cat) {
      try {
        return Promise.resolve(this.node(path));
      } catch (err) {
        return Promise.reject(err);
      }
    }
    // The root always exists (so a failed listing can still be unmounted cleanly).
    if (path === '/' || path === '') return Promise.resolve(this.earlyRoot);
    if (this.listError !== undefined) return Promise.reject(this.listError);
    const known = this.early.get(path);
    if (known) return Promise.resolve(known);
    let p = this.probes.get(path);
    if (!p) {
      p = this.probe(path).finally(() => this.probes.delete(path));
      this.probes.set(path, p);
    }
    return p;
  }

  private async probe(path: string): Promise<Entry> {
    const rel = path.replace(/^\/+/, '');
    const cut = rel.lastIndexOf('/');
    const name = rel.slice(cut + 1);
    if (unsafeReason(rel)) throw new NotFoundError(path);
    // The parent first (the kernel has usually looked it up already): nothing lives under a file.
    if (cut >= 0) {
      const parent = await this.earlyNode(`/${rel.slice(0, cut)}`);
      if (typeof parent === 'number' ? !isDirRef(parent) : parent.kind !== 'dir') throw new NotFoundError(path);
    }
    if (this.cat) return this.node(path);
    const key = this.prefix + rel;
    // A filtered mount shows no key the filter drops, before the listing as after it.
    const filter = this.opts.filter;
    if (filter && !filter.couldMatchUnder(`${key}/`) && !filter.matches(key)) throw new NotFoundError(path);
    const signal = this.stop.signal;
    const count = (result: string) => earlyLookups.inc({ channel: this.channel, result });
    // The parent's probe listed this key as a file with no key under "key/" (the kernel looks
    // a path up one folder at a time, so the first file of a folder costs no round trip).
    const seen = this.seenFiles.get(key);
    if (seen !== undefined && (!filter || filter.matches(key))) {
      const node: Node = { kind: 'file', name, info: seen, parent: this.earlyRoot, index: -1 };
      count('file');
      this.early.set(path, node);
      return node;
    }
    let under: string | undefined;
    let info: ObjectInfo | undefined;
    const client = this.opts.client;
    this.lookupsInFlight++;
    try {
      [under, info] = await Promise.all([
        client.firstObjectsUnder && !this.opts.versions
          ? client.firstObjectsUnder(`${key}/`, { signal }).then((first) => { this.rememberFiles(first); return first.objects[0]?.key; })
          : client.firstKeyUnder(`${key}/`, { signal }),
        this.opts.client.head(key, { signal }).catch((err: unknown) => {
          if (err instanceof NoSuchKeyError) return undefined;
          throw err;
        }),
      ]);
    } catch (err) {
      count('error');
      throw err;
    } finally {
      if (--this.lookupsInFlight === 0) this.lookupsIdleSince = performance.now();
    }
    // The listing, if it completed meanwhile, is the authority. So it is when the first key
    // under the folder cannot be shown (the folder may hold nothing else): wait for it.
    if (this.cat) return this.node(path);
    if (under !== undefined && unsafeReason(under.slice(this.prefix.length).replace(/\/$/, ''))) {
      await this.listed;
      return this.node(path);
    }
    let node: Node;
    if (under !== undefined) {
      const dir = newDir(name, undefined);
      dir.provisional = true;
      node = dir;
    } else if (info && (!filter || filter.matches(key))) {
      node = { kind: 'file', name, info, parent: this.earlyRoot, index: -1 };
    } else {
      count('missing');
      throw new NotFoundError(path);
    }
    count(node.kind === 'dir' ? 'folder' : 'file');
    this.early.set(path, node);
    return node;
  }

  /**
   * Keeps the first of a folder probe's two keys as a known file when the listing shows it
   * is no folder: no key starts with "first/". Keys under "first/" sort right after it, save
   * keys between that differ from it at its end by a byte below "/" ("a.x" between "a" and
   * "a/b"); so the second key decides unless it sorts before "first/" (then nothing is kept
   * and the file's own probe asks S3, as before). Same answer as that probe's HEAD and
   * one-key listing, pinned to the ETag listed a moment before (the listed view pins listed
   * ETags too). Not for objects whose class needs a HEAD to tell a restore (archive.ts).
   */
  private rememberFiles(first: FirstObjects): void {
    const [a, b] = first.objects;
    if (a === undefined || this.cat || needsProbe(a) || unsafeReason(a.key.slice(this.prefix.length))) return;
    const folderPrefix = `${a.key}/`;
    const noFolder = b === undefined
      ? first.complete
      : !b.key.startsWith(folderPrefix) && compareKeys(b.key, folderPrefix) > 0;
    if (noFolder) this.seenFiles.set(a.key, a);
  }

  private checkOpen(): void {
    if (this.closed) throw new AbortedError('the filesystem is closed');
  }
}
