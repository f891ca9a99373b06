/**
 * The contract between the FUSE-free filesystem core (src/fs/) and the thin
 * FUSE adapter (src/fuse/). The core never sees a FUSE type; the adapter never
 * sees S3. Paths are absolute within the mount ('/', '/a/b.jpg').
 *
 * Every method throws (or rejects with) a SluiceError; the adapter turns it
 * into an errno with errnoFor() from ../errors.ts, the only such place.
 */
import type { ReadView } from '../prefetch/read-cursor.js';
import type { CatalogColumns } from './catalog.js';

export type { ReadView };
export { releaseView } from '../prefetch/read-cursor.js';

export interface Attr {
  /** Full st_mode: S_IFDIR | 0o555 for folders, S_IFREG | 0o444 for files. */
  mode: number;
  size: number;
  mtime: Date;
  nlink: number;
  uid: number;
  gid: number;
}

export interface StatFs {
  bsize: number;
  frsize: number;
  blocks: number;
  bfree: number;
  bavail: number;
  files: number;
  ffree: number;
  favail: number;
  namemax: number;
}

/**
 * Metadata calls answer synchronously when the answer is in memory, and with a promise
 * when it is not yet (a FastFile mount that is still listing asks S3; see core.ts).
 */
/** See FsCore.tierOpens. */
export interface TierOpensOf {
  readonly objectsDir: string;
  readonly blockSize: number;
  /**
   * The cache file name of the listed file at `path` when it may be opened outside open() and
   * is at most `maxSize` bytes (default one block). `row`: the path's row in the listing handed
   * over, for setTierHot's marks.
   */
  nameOf(path: string, maxSize?: number, row?: number): string | undefined;
  /** nameOf for file `f` of catalogView()'s catalog, whose row it is then. */
  nameOfFile?(f: number, maxSize?: number): string | undefined;
}

/**
 * The fixed view as the catalog's own columns (FsCore.catalogView), with the attributes every
 * file and every folder share: what getattr answers for each path, read in place by the FUSE
 * thread (native/src/fuse_attrs.c "Catalog").
 */
export interface CatalogView {
  columns: CatalogColumns;
  /** st_mode of every file, of every folder. */
  fileMode: number;
  dirMode: number;
  /** st_size and mtime (ms) of every folder. */
  dirSize: number;
  dirMtimeMs: number;
  uid: number;
  gid: number;
  /** Files (the rows of TierOpensOf.nameOfFile). */
  fileCount: number;
}

/**
 * Bytes of an open file lent to reads answered outside FsCore.read() (core.ts lend). A read
 * [off, off + n) may be answered from them when start <= off and min(off + n, size) <= stop;
 * a read at or past `size` is answered with 0 bytes. The bytes stay valid and unchanged until
 * release(), which the borrower calls once no such read can touch them any more.
 */
export interface BlockLease {
  /** File offset of parts[0]; the parts are contiguous in the file from here. */
  readonly start: number;
  /** The largest read end (exclusive file offset) that may be answered from the lease. */
  readonly stop: number;
  /** The file's size. */
  readonly size: number;
  readonly parts: readonly Buffer[];
  /** Ends the lease (idempotent): the parts may be recycled after it. */
  release(): void;
}

/** A folder's entries as the core holds them, by index in listing order (no array of names: a folder may hold millions). */
export interface DirEntries {
  readonly length: number;
  /** The name of entry i. */
  name(i: number): string;
  /** Whether entry i is a folder. */
  isDir(i: number): boolean;
}

export interface FsCore {
  getattr(path: string): Attr | Promise<Attr>;
  readdir(path: string): string[] | Promise<string[]>;
  /** readdir without the copy, with each entry's kind (issue 46: folders of 1 M files); optional. Waits like readdir. */
  readdirEntries?(path: string): DirEntries | Promise<DirEntries>;
  /** Checks existence and type; returns a file handle number (sync when the answer is in memory; failures reject). */
  open(path: string, flags: number): number | Promise<number>;
  /** Fills `dst[0..n)` with bytes at `position`; n < length only at end of file. */
  /** Sync when every block is cached (no promise on the hot path); a promise when it must wait. */
  /** `opts.signal` settles a waiting read early with AbortedError; it then never writes into `dst` (the FUSE read deadline). */
  /** With `view` (optional in a core), a read whose bytes lie in one buffer may leave `dst` alone and hand over that buffer's bytes and pins instead (see ReadView). */
  read(fh: number, dst: Buffer, length: number, position: number, opts?: { signal?: AbortSignal }, view?: ReadView): number | Promise<number>;
  /** Sync when it can be; failures reject. */
  release(fh: number): void | Promise<void>;
  /** The file's verified bytes when handle `fh` holds them all in memory until release (see core.ts); optional. */
  heldBytes?(fh: number): Buffer | undefined;
  /**
   * Counts reads of `fh` answered outside read(): from heldBytes(), or from a lend(), whose
   * reads reached file offset `end` (see core.ts); optional.
   */
  servedElsewhere?(fh: number, reads: number, bytes: number, end?: number): void;
  /** Resident bytes of handle `fh` that its next reads may be answered from outside read(), until the lease is released (see core.ts); optional. */
  lend?(fh: number): BlockLease | undefined;
  statfs(): StatFs | Promise<StatFs>;
  /**
   * Settles when the view is complete and fixed (FastFile: the listing is done); from then on
   * getattr and readdir answer synchronously and never change. Optional: a core without it
   * has its getattrs answered in JavaScript only (src/fuse/kernel-mount.ts).
   */
  readonly listed?: Promise<void>;
  /**
   * Small files of the disk tier that may be opened outside open() (the FUSE thread,
   * native/src/fuse_open.c "Opens"): the tier's objects folder, its block size, and per
   * listed path the cache file name (hex sha256) under which the file's one block would be,
   * or undefined where only open() may open it. Optional.
   */
  readonly tierOpens?: TierOpensOf;
  /** The fixed view's columns once listed (undefined before, or for a core without a catalog); optional. */
  catalogView?(): CatalogView | undefined;
  /**
   * Given once the listing with tierOpens' names is handed over: marks a row (nameOf's `row`)
   * whose file cross-file prefetch starts fetching into memory, so that the FUSE thread leaves
   * its opens to open() for a while (native/src/fuse_open.c "Fetched into memory").
   */
  setTierHot?(mark: ((row: number) => void) | undefined): void;
  /**
   * Counts what handles opened outside open() (tierOpens) did: `reads` reads served `bytes`,
   * `delivered` files delivered, and `diskFiles` files (`diskBytes` bytes) read from the tier.
   */
  openedElsewhere?(reads: number, bytes: number, diskBytes: number, delivered: number, diskFiles: number): void;
  /** Throws ReadOnlyError naming the operation; the adapter calls it for every write-like op. */
  refuse(op: string): never;
}
