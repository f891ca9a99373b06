/**
 * Cross-file prefetch: when the files of a folder are opened one after another in
 * listing order (a data loader walking a dataset), fetch the next files into the
 * block cache before they are opened.
 *
 * Algorithm. The prefetcher keeps up to MAX_WALKS "walks", each the index of the
 * file a reader opened last in one folder's file list (listing order). On each open
 * of file i in a folder:
 *  - the walk of that folder with the greatest last index in [i - MAX_STEP, i - 1] is
 *    advanced to i; several readers walking different parts of one folder (data
 *    loader workers each given a slice) each keep their own walk this way;
 *  - if none matches, a new walk starts at i (the least recently advanced walk is
 *    forgotten when there are MAX_WALKS);
 *  - once a walk has advanced CONFIRM_STEPS times in a row, every step fetches
 *    the files i + 1 .. i + depth that are not already cached or in flight, whole,
 *    skipping files larger than maxSize (a large file gets its own sequential
 *    read-ahead when it is read);
 *  - in a folder where some walk has made TRUSTED_WALK_STEPS steps, a new walk
 *    fetches ahead from its first open; so does a new walk that starts at a
 *    folder's first file while any walk anywhere has made that many steps (a loader
 *    walking a tree folder by folder).
 *  - a list given as trusted (an order the readers announced: ./order.ts, --order-file)
 *    is read in its order by definition, so there a new walk fetches ahead from its
 *    first open, and `forget()` drops its walks when a new order replaces it.
 * The list is the order: a folder's files in listing order, or the epoch's order that
 * the training script wrote; the walks, budgets and waits are the same for both.
 * Fetches run within the in-flight budget and within what the cache can keep unread
 * (BlockCache.roomAhead). When either is used up, a walk waits and resumes when room
 * frees (the fetcher's onRoom), oldest first; it skips files its reader has already
 * opened meanwhile. So however deep --cross-file-prefetch is, a small cache is never
 * filled past its share with files nobody has read yet (which evicted each other).
 *
 * Used and wasted bytes are counted by the block cache (kind 'cross_file'): used
 * when a reader reads the block, wasted when it leaves the cache unread.
 */
import type { BlockFetcher, FileRef } from './block-fetcher.js';

/**
 * Walks tracked at once, over all folders: a data loader has up to ~16 workers per
 * process and a node a handful of processes; 64 keeps a walk for each, while a
 * lookup stays a short scan.
 */
export const MAX_WALKS = 64;

/**
 * Largest forward step between two opens that still continues a walk: loaders skip
 * files they filter out (labels next to images, hidden files), and a worker's
 * opens of one batch may arrive slightly out of order. 8 tolerates that, yet two
 * workers given batches of 32 files never join one walk.
 */
export const MAX_STEP = 8;

/**
 * Steps in listing order a walk must make before it prefetches: one step can be
 * chance (a shuffled loader opening two neighbours); two in a row rarely are, and
 * cost only the walk's first two files.
 */
export const CONFIRM_STEPS = 2;

/**
 * Steps after which a walk proves its folder is read by a sequential loader: 16 files
 * in listing order are no accident. In such a folder a new walk (a loader worker
 * starting its next batch, e.g. PyTorch workers taking batches k, k + W, ...)
 * prefetches from its first open instead of after CONFIRM_STEPS, so a batch of 32
 * misses one file instead of three.
 */
export const TRUSTED_WALK_STEPS = 16;

/**
 * A folder's files in listing order, by index: an array, or the catalog's view of a folder
 * (src/fs/catalog.ts, which makes each entry on demand). One folder is one object: walks
 * compare them by identity.
 */
export interface FolderFileList {
  readonly length: number;
  at(i: number): FileRef | undefined;
}

export interface CrossFileOptions {
  /** Files to fetch ahead of a walk (--cross-file-prefetch); 0 disables. */
  depth: number;
  /** Only files of at most this size are fetched (--cross-file-max-size). */
  maxSize: number;
  /** Called when a walk starts fetching a file (its first block), before the GET: the FUSE thread then leaves its opens to open() for a while (src/fs/core.ts). */
  onFetch?: (file: FileRef) => void;
}

interface Walk {
  files: FolderFileList;
  /** Index of the file opened last. */
  last: number;
  /** Steps in listing order so far. */
  steps: number;
  /** Next file index to fetch, and the first block of it not yet fetched. */
  nextFile: number;
  nextBlock: number;
  /** Fetch files with index < limit. */
  limit: number;
}

export interface CrossFileStats {
  walksStarted: number;
  /** Files whose fetch ahead started (or that were already cached when their turn came). */
  filesRequested: number;
}

export class CrossFilePrefetcher {
  readonly stats: CrossFileStats = { walksStarted: 0, filesRequested: 0 };
  // Ordered least recently advanced first.
  private readonly walks: Walk[] = [];
  // Walks with work left that the budget refused, oldest first.
  private readonly waiting = new Set<Walk>();
  private readonly unsubscribe: () => void;
  private closed = false;

  constructor(private readonly fetcher: BlockFetcher, private readonly opts: CrossFileOptions) {
    this.unsubscribe = fetcher.onRoom(() => this.resume());
  }

  /**
   * Called on every open: `files` is the folder's file list in listing order (or an order the
   * readers announced, with `trusted`), `index` the opened file's place in it.
   */
  onOpen(files: FolderFileList, index: number, trusted = false): void {
    if (this.closed || this.opts.depth <= 0) return;
    let best: Walk | undefined;
    for (const w of this.walks) {
      if (w.files !== files) continue;
      if (w.last === index) return; // the same file again: not a step
      if (w.last < index && index - w.last <= MAX_STEP && (!best || w.last > best.last)) best = w;
    }
    if (!best) {
      const w: Walk = { files, last: index, steps: 0, nextFile: index + 1, nextBlock: 0, limit: index + 1 };
      this.walks.push(w);
      this.stats.walksStarted++;
      if (this.walks.length > MAX_WALKS) this.waiting.delete(this.walks.shift()!);
      // A loader that walked this folder at length is most likely starting its next batch;
      // one that walked any folder at length and now opens a folder's first file is
      // most likely walking the tree folder by folder.
      if (!trusted && !this.walks.some((o) => o.steps >= TRUSTED_WALK_STEPS && (o.files === files || index === 0))) return;
      best = w;
    } else {
      best.last = index;
      best.steps++;
      this.walks.splice(this.walks.indexOf(best), 1);
      this.walks.push(best);
      if (best.steps < CONFIRM_STEPS && !trusted) return;
    }
    if (best.nextFile <= index) {
      best.nextFile = index + 1;
      best.nextBlock = 0;
    }
    best.limit = Math.min(files.length, index + 1 + this.opts.depth);
    this.pump(best);
  }

  /** Forgets the walks over `files` (an order replaced by a new one): they fetch nothing more. */
  forget(files: readonly FileRef[]): void {
    for (let i = this.walks.length - 1; i >= 0; i--) {
      const w = this.walks[i]!;
      if (w.files !== files) continue;
      this.walks.splice(i, 1);
      this.waiting.delete(w);
    }
  }

  /** Stops starting fetches (those in flight complete into the cache). */
  close(): void {
    this.closed = true;
    this.unsubscribe();
    this.waiting.clear();
    this.walks.length = 0;
  }

  /** Issues the walk's fetches until done or refused; returns false when refused. */
  private pump(w: Walk): boolean {
    while (w.nextFile < w.limit) {
      const f = w.files.at(w.nextFile)!;
      const blocks = this.fetcher.blockCount(f);
      if (f.size > this.opts.maxSize || blocks === 0 || w.nextBlock >= blocks) {
        w.nextFile++;
        w.nextBlock = 0;
        continue;
      }
      if (w.nextBlock === 0) this.opts.onFetch?.(f);
      const next = this.fetcher.prefetch(f, w.nextBlock, blocks - 1, 'cross_file');
      if (w.nextBlock === 0 && next > 0) this.stats.filesRequested++;
      w.nextBlock = next;
      if (next < blocks) {
        this.waiting.add(w);
        return false;
      }
    }
    this.waiting.delete(w);
    return true;
  }

  private resume(): void {
    if (this.closed) return;
    for (const w of [...this.waiting]) {
      this.waiting.delete(w);
      if (!this.pump(w)) return;
    }
  }
}
