/**
 * An epoch's file order announced by the readers (--order-file; ../fs/order-file.ts reads
 * it): the list cross-file prefetch (./cross-file.ts) walks instead of a folder's listing.
 *
 * Algorithm. `open(file)` gives an opened file's place in the order: its first occurrence
 * not yet opened (a file listed twice is opened twice), marks it opened and moves the
 * readers' progress, `position`, to the furthest place opened. Cross-file prefetch then
 * walks the order from that place exactly as it walks a folder (one walk per reader,
 * fetching the next --cross-file-prefetch files within the budgets). Places the readers
 * left behind unopened by DROP_BEHIND or more were skipped: every SCAN_STRIDE places of
 * progress, those are handed to `onSkip` (which drops their unread blocks), each once; so
 * are all unopened places when a new order replaces this one (`end()`).
 */
import type { FileRef } from './block-fetcher.js';

/**
 * Places an unopened file may lag the furthest open before it counts as skipped: 1024.
 * A PyTorch DataLoader keeps workers x prefetch_factor batches outstanding, each worker
 * opening its own batch in order: 16 workers x 2 x 32 files = 1024 places between the
 * oldest file still to be opened and the newest opened. A file that far behind is not
 * being waited for; its prefetched blocks would only hold the cache's room ahead.
 */
export const DROP_BEHIND = 1024;

/**
 * Progress, in places, between two scans for skipped files: 64, so a scan (a few cache
 * lookups per place passed) runs once per 64 opens at most, and a skipped file's blocks
 * leave at most 64 places after DROP_BEHIND.
 */
export const SCAN_STRIDE = 64;

export class FileOrder {
  /** Furthest place opened; -1 before the first open. */
  position = -1;
  /** Places handed to onSkip (skipped, or left unopened by end()). */
  skipped = 0;
  /** Places of each key (a file's refs may be distinct objects: the catalog makes them on demand). */
  private readonly places = new Map<string, number | number[]>();
  private readonly opened: Uint8Array;
  /** Places before this one were scanned for skipped files. */
  private scanned = 0;
  private ended = false;

  /** `files` in the order's sequence (a FileRef may appear more than once); `onSkip` is told each file the readers went past unopened. */
  constructor(readonly files: readonly FileRef[], private readonly onSkip: (file: FileRef) => void, private readonly dropBehind = DROP_BEHIND) {
    this.opened = new Uint8Array(files.length);
    files.forEach((f, i) => {
      const p = this.places.get(f.key);
      if (p === undefined) this.places.set(f.key, i);
      else if (typeof p === 'number') this.places.set(f.key, [p, i]);
      else p.push(i);
    });
  }

  /** The place of an open of `file` (undefined when the order does not hold it); moves the readers' progress. */
  open(file: FileRef): number | undefined {
    if (this.ended) return undefined;
    const p = this.places.get(file.key);
    if (p === undefined) return undefined;
    let at: number;
    if (typeof p === 'number') at = p;
    else at = p.find((i) => this.opened[i] === 0) ?? p[p.length - 1]!;
    this.opened[at] = 1;
    if (at > this.position) {
      this.position = at;
      if (at - this.dropBehind - this.scanned >= SCAN_STRIDE) this.skipUpTo(at - this.dropBehind);
    }
    return at;
  }

  /** A new order replaces this one: hands every unopened place not yet scanned to onSkip. */
  end(): void {
    if (this.ended) return;
    this.skipUpTo(this.files.length);
    this.ended = true;
  }

  private skipUpTo(end: number): void {
    for (let i = this.scanned; i < end; i++) {
      if (this.opened[i] === 0) {
        this.skipped++;
        this.onSkip(this.files[i]!);
      }
    }
    this.scanned = Math.max(this.scanned, end);
  }
}
