/**
 * --order-file: the training script writes the epoch's file order; FastFile fetches ahead
 * in that order (issue 48). This module watches the file and turns it into a FileOrder
 * (../prefetch/order.ts), which cross-file prefetch walks.
 *
 * Format: UTF-8 text, one path per line, relative to the mount (`cls/img1.jpg`, `./x` too),
 * or absolute under the mount point (`/opt/ml/input/data/train/cls/img1.jpg`); '\r\n'
 * endings are accepted. A line that is empty, holds a NUL, a '.' or '..' segment, or is
 * absolute outside the mount is malformed; a path the mount does not show as a file is
 * unknown. Both are skipped and counted (sluice_order_file_lines_total, one warning per
 * order naming the first), never an error: the script's run goes on.
 *
 * Algorithm. A version of the file is its (inode, size, mtime, ctime). It is looked at
 * when fs.watch reports a change of its name in its folder, and on a reader's open when
 * the last look is STAT_EVERY_MS old (fs.watch misses changes on some file systems, and
 * an open right after a rename must not follow the old order). A new version ends the
 * current order at once (its walks are forgotten, what it fetched ahead and nobody opened
 * is dropped), is read and parsed (yielding every PARSE_CHUNK lines, after the listing),
 * and becomes the order; a missing file means no order (listing-order prefetch again).
 * Writing the file anew, best to a temporary name renamed over it, starts a new order.
 *
 * Checked at start (one line, before anything is mounted): the file's folder exists and
 * the path is not a folder. The file itself may appear later (the script writes it).
 */
import { statSync, watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { InvalidArgumentError } from '../errors.js';
import { log } from '../log.js';
import { orderFileLines, orderFileLoads, orderFilePosition } from '../metrics/metrics.js';
import type { FileRef } from '../prefetch/block-fetcher.js';
import { FileOrder } from '../prefetch/order.js';

/**
 * Least time between two looks (stat) at the file on opens: 10 ms, so the stat, ~2 µs on
 * the event loop, costs at most 0.02% of a core however fast files are opened, while the
 * first opens after a rewrite follow the new order within 10 ms even where fs.watch is
 * silent.
 */
const STAT_EVERY_MS = 10;

/** Lines parsed between two yields to the event loop: 50,000 (~10 ms), so a million-line order never holds up reads for long. */
const PARSE_CHUNK = 50_000;

export interface OrderFileOptions {
  /** The order file's path (made absolute here). */
  file: string;
  /** The mount point: absolute lines under it are read relative to it. */
  mountpoint?: string | undefined;
  channel: string;
  /** Settles when `resolve` can answer (the listing is complete). */
  ready: Promise<void>;
  /** The listed file at a path relative to the mount, or undefined. */
  resolve(rel: string): FileRef | undefined;
  /** A new order starts (undefined: none); `previous` ended. */
  onOrder(order: FileOrder | undefined, previous: FileOrder | undefined): void;
  /** The readers went past `file` unopened (FileOrder's onSkip). */
  onSkip(file: FileRef): void;
  /** FileOrder's dropBehind (tests). */
  dropBehind?: number;
}

interface Version { ino: number; size: number; mtimeMs: number; ctimeMs: number }

/** One line problem for --order-file at start, or undefined when the path can be watched. */
export function orderFileProblem(file: string): string | undefined {
  const abs = path.resolve(file);
  try {
    if (!statSync(path.dirname(abs)).isDirectory()) return `the folder of --order-file ${abs} is not a folder`;
  } catch {
    return `the folder of --order-file ${abs} does not exist`;
  }
  try {
    if (statSync(abs).isDirectory()) return `--order-file ${abs} is a folder; it must name a file (one path per line)`;
  } catch { /* not written yet: fine */ }
  return undefined;
}

export class OrderFile {
  /** The order being followed, if any. */
  current: FileOrder | undefined;
  /** Orders read so far (tests). */
  loads = 0;
  private readonly file: string;
  private readonly log: typeof log;
  private version: Version | undefined;
  private lastLook = 0;
  private watcher: FSWatcher | undefined;
  /** Bumped by every version seen: a parse whose generation is stale is dropped. */
  private generation = 0;
  private closed = false;
  /** Settles when the load under way (if any) is done (tests). */
  loading: Promise<void> = Promise.resolve();

  constructor(private readonly opts: OrderFileOptions) {
    const problem = orderFileProblem(opts.file);
    if (problem !== undefined) throw new InvalidArgumentError(problem, { hint: 'Point --order-file at a file in an existing folder, e.g. /tmp/order.txt' });
    this.file = path.resolve(opts.file);
    this.log = log.child({ component: 'order-file', channel: opts.channel, file: this.file });
    orderFilePosition.set({ channel: opts.channel }, -1);
    try {
      const base = path.basename(this.file);
      this.watcher = watch(path.dirname(this.file), { persistent: false }, (_ev, name) => {
        if (name === null || name === base) this.look();
      });
      this.watcher.on('error', () => { this.watcher?.close(); this.watcher = undefined; }); // opens still look
    } catch {
      this.watcher = undefined; // no inotify here: opens still look
    }
    void opts.ready.then(() => this.look(), () => undefined);
  }

  /** A reader opened `file`: its place in the current order (after a look at the file when due), or undefined. */
  place(file: FileRef): { files: readonly FileRef[]; index: number } | undefined {
    const now = performance.now();
    if (now - this.lastLook >= STAT_EVERY_MS) this.look(now);
    const order = this.current;
    if (!order) return undefined;
    const index = order.open(file);
    if (index === undefined) return undefined;
    orderFilePosition.set({ channel: this.opts.channel }, order.position);
    return { files: order.files, index };
  }

  close(): void {
    this.closed = true;
    this.watcher?.close();
    this.watcher = undefined;
  }

  /** Stats the file; a new version ends the current order and starts reading the new one. */
  private look(now = performance.now()): void {
    if (this.closed) return;
    this.lastLook = now;
    let v: Version | undefined;
    try {
      const s = statSync(this.file);
      v = { ino: s.ino, size: s.size, mtimeMs: s.mtimeMs, ctimeMs: s.ctimeMs };
    } catch {
      v = undefined;
    }
    const same = v === undefined ? this.version === undefined : this.version !== undefined && v.ino === this.version.ino && v.size === this.version.size && v.mtimeMs === this.version.mtimeMs && v.ctimeMs === this.version.ctimeMs;
    if (same) return;
    this.version = v;
    const gen = ++this.generation;
    this.setOrder(undefined);
    if (v !== undefined) {
      const prev = this.loading;
      this.loading = prev.then(() => this.load(gen));
    }
  }

  private setOrder(order: FileOrder | undefined): void {
    const previous = this.current;
    if (previous === undefined && order === undefined) return;
    previous?.end();
    this.current = order;
    orderFilePosition.set({ channel: this.opts.channel }, -1);
    this.opts.onOrder(order, previous);
  }

  private async load(gen: number): Promise<void> {
    let text: string;
    try {
      await this.opts.ready;
      text = await readFile(this.file, 'utf8');
    } catch (err) {
      if (gen === this.generation && !this.closed) this.log.warn({ err: (err as NodeJS.ErrnoException).code ?? String(err) }, 'cannot read the order file; prefetch follows listing order until it is written again');
      return;
    }
    const lines = text.split('\n');
    if (lines[lines.length - 1] === '') lines.pop(); // the last line's newline
    const files: FileRef[] = [];
    let unknown = 0;
    let malformed = 0;
    let firstBad: string | undefined;
    const base = this.opts.mountpoint === undefined ? undefined : path.resolve(this.opts.mountpoint) + '/';
    for (let i = 0; i < lines.length; i++) {
      if (i > 0 && i % PARSE_CHUNK === 0) {
        await new Promise((r) => setImmediate(r));
        if (gen !== this.generation || this.closed) return;
      }
      let line = lines[i]!;
      if (line.endsWith('\r')) line = line.slice(0, -1);
      if (base !== undefined && line.startsWith(base)) line = line.slice(base.length);
      const rel = line.startsWith('./') ? line.slice(2) : line;
      if (rel === '' || rel.startsWith('/') || rel.includes('\0') || rel.split('/').some((s) => s === '.' || s === '..')) {
        malformed++;
        firstBad ??= `line ${i + 1}: ${JSON.stringify(line.slice(0, 200))} is not a path in the mount`;
        continue;
      }
      const f = this.opts.resolve(rel);
      if (f === undefined) {
        unknown++;
        firstBad ??= `line ${i + 1}: ${JSON.stringify(rel.slice(0, 200))} is not a file of the mount`;
        continue;
      }
      files.push(f);
    }
    if (gen !== this.generation || this.closed) return;
    const labels = { channel: this.opts.channel };
    orderFileLoads.inc(labels);
    orderFileLines.inc({ ...labels, outcome: 'mapped' }, files.length);
    orderFileLines.inc({ ...labels, outcome: 'unknown' }, unknown);
    orderFileLines.inc({ ...labels, outcome: 'malformed' }, malformed);
    this.loads++;
    if (firstBad !== undefined) this.log.warn({ mapped: files.length, unknown, malformed }, `order file: ${unknown + malformed} line(s) skipped; first: ${firstBad}`);
    else this.log.info({ mapped: files.length }, 'order file read: prefetch follows it');
    this.setOrder(files.length > 0 ? new FileOrder(files, (f) => this.opts.onSkip(f), this.opts.dropBehind) : undefined);
  }
}
