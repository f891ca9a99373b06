/**
 * The narrow interface every other layer uses to reach object storage.
 *
 * One ObjectClient serves one bucket. The real implementation (`S3ObjectClient`
 * in ./s3-client.ts) lists and HEADs through @aws-sdk/client-s3 and reads
 * through an undici Pool; tests use an in-memory fake (test/helpers/fake-client.ts)
 * and a fault-injecting wrapper. Nothing outside src/s3/ may import the AWS SDK
 * or undici for data.
 *
 * Contract, for every implementation:
 *  - `getRange()` resolves with exactly `endExclusive - start` bytes of the object
 *    version whose ETag is `etag`, or rejects. It never resolves with a short
 *    buffer or with bytes of another version (ObjectChangedError).
 *  - `getStream()` yields the bytes of [start, end) in order, of that version only.
 *  - Errors are SluiceError subclasses from ../errors.ts.
 */
/** What a pruned listing (./lister.ts listPruned) needs of a filter (src/s3/filters.ts, KeyFilter). */
export interface PruneFilter {
  matches(key: string): boolean;
  couldMatchUnder(folder: string): boolean;
  needsDeeper(folder: string): boolean;
}

export interface ObjectInfo {
  /** Full key, including the prefix. */
  key: string;
  size: number;
  /** ETag exactly as the server sends it, quotes included (e.g. "\"9b2c...\""). */
  etag: string;
  lastModified: Date;
  // ---- issue 15: snapshots and archived objects (src/snapshot/) ----
  /** S3 storage class as listed (STANDARD when the server says nothing); see src/s3/archive.ts. */
  storageClass?: string;
  /** Intelligent-Tiering archive tier from HEAD (ARCHIVE_ACCESS, DEEP_ARCHIVE_ACCESS), when asked. */
  archiveStatus?: string;
  /** True when an archived object has a completed restore (readable until it expires). */
  restored?: boolean;
  /** The object version, when the bucket is versioned and the listing or snapshot knows it. */
  versionId?: string;
}

/** firstObjectsUnder()'s answer: at most two objects, in S3's order; `complete` when no key under the prefix was left out. */
export interface FirstObjects {
  objects: ObjectInfo[];
  complete: boolean;
}

/**
 * An object as the bytes of a snapshot line (issue 46, decision 0044): what a reader that keeps
 * no object (the FastFile catalog) needs, without a string or a Date per object. Filled in
 * place by src/snapshot/line-parser.ts parseObjectBytes() for one line at a time: the fields
 * are valid until the next line. Only objects with none of the rare fields (versionId,
 * archiveStatus, restored) come this way.
 */
export interface ObjectBytes {
  /** The line's bytes. */
  buf: Buffer;
  /** The key: bytes [keyStart, keyEnd) of buf, printable ASCII, no escape (so its UTF-8 and its JSON text are the same). */
  keyStart: number;
  keyEnd: number;
  size: number;
  /** The ETag's JSON text (inside the line's quotes, escapes as written): bytes [etagStart, etagEnd). */
  etagStart: number;
  etagEnd: number;
  /** lastModified in ms since the epoch. */
  mtimeMs: number;
  storageClass: string;
}

export interface RequestOptions {
  signal?: AbortSignal;
}

export interface ListOptions extends RequestOptions {
  /**
   * Awaited before each listing request: a background listing uses it to let requests a
   * reader is waiting for go first (src/fs/core.ts). It must resolve within a bounded time.
   */
  beforeRequest?: () => Promise<void>;
  /** Called when a listing page has arrived (the bucket and credentials work). */
  onPage?: () => void;
  /** Issue 15: keep only the keys it matches, and do not list folders that cannot match (src/s3/filters.ts). */
  filter?: PruneFilter;
  /**
   * Issue 15: record each object's version id when the bucket is versioned (a snapshot's
   * listing): one GetBucketVersioning, then ListObjectVersions instead of ListObjectsV2.
   */
  versions?: boolean;
}

export interface RangeOptions extends RequestOptions {
  /**
   * A buffer of exactly `endExclusive - start` bytes to read into. A client that honours
   * it resolves with this very buffer (saving an allocation and its page faults); one that
   * ignores it resolves with a buffer of its own, so callers compare before reusing `into`.
   */
  into?: Buffer;
  /**
   * Called as bytes land in `into` (issue 11, File mode writes them as they arrive): the
   * first `filled` bytes of `into` hold their final, validated bytes and no later attempt
   * writes them again. Called with growing values, any number of times (possibly never,
   * by a client that does not track landing); only when `into` is honoured.
   */
  onFilled?: (filled: number) => void;
  /**
   * With `into`: keeps `into`'s memory from reuse until the function it returns is called
   * (e.g. a pooled buffer's reference). A client that still reads `into` after it resolves
   * (the disk tier's background writer, src/cache/tiered-client.ts) takes it instead of
   * copying the bytes; a client that does not simply never calls it.
   */
  hold?: () => () => void;
  /**
   * Called when some of the range was answered without asking the server (the disk tier,
   * src/cache/tiered-client.ts), before the promise settles: its time says nothing about the
   * link (the shared read-ahead budget, src/prefetch/ahead-share.ts, skips such GETs).
   */
  onLocal?: () => void;
}

export interface StreamOptions extends RequestOptions {
  /** First byte, default 0. */
  start?: number;
  /** End, exclusive; default the object's size (needs `size`). */
  end?: number;
  /** Object size, when known (saves a HEAD). */
  size?: number;
  /**
   * A buffer of exactly `end - start` bytes the client may land the bytes in. A client that
   * honours it yields subarrays of this very buffer, in order (the S3 client yields it whole,
   * once filled); one that ignores it yields buffers of its own.
   */
  into?: Buffer;
}

export interface ObjectClient {
  readonly bucket: string;
  /** Every object under `prefix` (no delimiter), each exactly once. Order is not guaranteed; callers sort. */
  list(prefix: string, opts?: ListOptions): AsyncIterable<ObjectInfo>;
  head(key: string, opts?: RequestOptions): Promise<ObjectInfo>;
  /** The first key (in S3's order) that starts with `prefix`, or undefined: one listing of at most one key. */
  firstKeyUnder(prefix: string, opts?: RequestOptions): Promise<string | undefined>;
  /**
   * Optional (issue 44): the first two objects (in S3's order) whose keys start with `prefix`,
   * from one listing of at most two keys, and whether that listing showed every such key.
   * A folder probe uses it in place of firstKeyUnder: the first key's size and ETag answer a
   * later lookup of that file without a request (src/fs/core.ts, decision 0046).
   */
  firstObjectsUnder?(prefix: string, opts?: RequestOptions): Promise<FirstObjects>;
  getRange(key: string, start: number, endExclusive: number, etag: string, opts?: RangeOptions): Promise<Buffer>;
  getStream(key: string, etag: string, opts?: StreamOptions): AsyncIterable<Buffer>;
  /**
   * Optional (issue 15): pin GETs and HEADs of these keys to these version ids (a
   * snapshot's), so a versioned bucket serves the snapshot's bytes even after an overwrite.
   */
  pinVersions?(versions: ReadonlyMap<string, string>): void;
  close(): Promise<void>;
}
