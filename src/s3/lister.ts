/**
 * Listing a prefix fast and exactly once: partition the key range, list the parts in parallel.
 *
 * ListObjectsV2 returns 1,000 keys per page and pages must be fetched one after another,
 * so one flat listing of 100k keys is 100 round trips in a row. Instead:
 *
 *  1. Discover boundaries (hints only). List the first page of `prefix` with Delimiter '/'
 *     and take its CommonPrefixes ("folders") as boundaries. While there are fewer than
 *     TARGET parts, go one level deeper (at most DISCOVERY_DEPTH levels), listing the first
 *     page of each folder in parallel. Sort the boundaries in S3's order (UTF-8 bytes) and
 *     keep at most TARGET of them, evenly spaced.
 *  2. The boundaries b1 < b2 < ... < bk cut the keys under `prefix` into contiguous ranges
 *     [start, b1), [b1, b2), ..., [bk, end). Each range is listed FLAT (no delimiter):
 *     Prefix=prefix, StartAfter=just before bi (justBefore), following continuation tokens,
 *     keeping keys with bi <= key < b(i+1) and stopping after the first page that reaches
 *     b(i+1). Ranges run in parallel, `concurrency` workers taking them from a queue.
 *  3. Split long ranges (issue 46). A worker that finds the queue empty waits; the next range
 *     that finishes a page without reaching its end cuts the rest (last key seen, end) at a
 *     guessed middle key (midKey) and hands the upper part to that worker. So a flat prefix
 *     (no folders), or the tail of a prefix with more folders than one delimiter page
 *     shows (10,000 folders: the first page names 1,000), is listed by every worker, not
 *     page after page by one. Requests go through the S3 client's AIMD limiter
 *     (--max-connections, halved on 503 SlowDown), so throttling slows the workers' pages,
 *     not their number of ranges.
 *
 * Why exactly once: the ranges partition the key space whatever the boundaries are, so
 * each key is yielded by exactly one range. Delimiter listings only choose where to cut;
 * a server that reports folders wrongly (s3rver omits folders without direct files) makes
 * the parts uneven, never loses or repeats a key. With `concurrency` 1, or when no folders
 * are found, the listing starts as one flat range and splits as workers go idle. A split
 * cuts one range in two at a key strictly inside it, so the ranges stay a partition.
 *
 * Cost: discovery is 1 + (up to TARGET per level) single-page requests; the listing is
 * ~N/1000 pages spread over the parts plus at most one overshooting page per part, plus
 * a few near-empty pages per split that guessed a middle past the last key.
 */
import type { ObjectInfo, PruneFilter } from './object-client.js';
import { AbortedError } from '../errors.js';

export interface ListQuery {
  prefix: string;
  delimiter?: string;
  startAfter?: string;
  continuationToken?: string;
  /** At most this many entries (S3's default and maximum is 1,000). */
  maxKeys?: number;
}

export interface ListPage {
  objects: ObjectInfo[];
  prefixes: string[];
  nextToken?: string | undefined;
  /**
   * The greatest key the page covered, when it covered keys it does not return in `objects`
   * (a versions page drops noncurrent versions and delete markers): a range ends on it too.
   */
  lastKey?: string | undefined;
}

/**
 * One listing request (with retries and error mapping done by the caller's client):
 * ListObjectsV2, or ListObjectVersions when a snapshot records version ids (s3-client.ts).
 * `startAfter` and `continuationToken` mean the same for both: keys after this one, and
 * where the previous page stopped (opaque).
 */
export type ListPageFn = (q: ListQuery, signal?: AbortSignal) => Promise<ListPage>;

export interface ListerOptions {
  /** Ranges listed at once. 1 means one flat listing. */
  concurrency: number;
  signal?: AbortSignal | undefined;
}

/** Parts per worker: 4 lets fast workers take over the ranges of a slow one (uneven folders). */
const PARTS_PER_WORKER = 4;
/** Levels of folders explored for boundaries: enough for bucket/dataset/split/class layouts. */
const DISCOVERY_DEPTH = 3;
/** Listed objects buffered ahead of a slow consumer before range workers pause. */
const HIGH_WATER = 20_000;

/**
 * S3 sorts keys by their UTF-8 bytes, i.e. by code point. JS compares UTF-16 code units,
 * which agrees except between a surrogate (an astral character, e.g. an emoji) and a BMP
 * character >= U+E000: UTF-16 puts the surrogate first, code point order puts it last.
 * Compared without allocating, since the lister compares every key it sees.
 */
export function compareKeys(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    const xs = x >= 0xd800 && x <= 0xdfff;
    const ys = y >= 0xd800 && y <= 0xdfff;
    if (xs !== ys && (x >= 0xe000 || y >= 0xe000)) return xs ? 1 : -1;
    return x - y;
  }
  return a.length - b.length;
}

/**
 * A StartAfter for a range that starts at `s`: every key >= `s` is > the result, and few
 * keys < `s` are (they are listed and dropped). `s` with its last code point one lower and
 * then U+10FFFF, the greatest code point ("f05" gives "f04\u{10FFFF}"); dropping the last
 * code point instead ("f0") would list every key from "f0" to "f05" only to drop them.
 */
export function justBefore(s: string): string {
  const cps = Array.from(s, (c) => c.codePointAt(0)!);
  const c = cps.pop();
  if (c === undefined) return '';
  // Below 1 there is nothing; U+E000 - 1 is a lone surrogate, which has no UTF-8.
  if (c === 0 || c === 0xe000) return String.fromCodePoint(...cps);
  return String.fromCodePoint(...cps, c - 1, 0x10ffff);
}

async function mapLimit<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) { const i = next++; out[i] = await fn(items[i]!); }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  return out;
}

/** Step 1: sorted, de-duplicated cut points under `prefix` (at most `target`). */
export async function discoverBoundaries(prefix: string, page: ListPageFn, target: number, concurrency: number, signal?: AbortSignal): Promise<string[]> {
  const found = new Set<string>();
  let frontier = [prefix];
  for (let depth = 0; depth < DISCOVERY_DEPTH && frontier.length > 0; depth++) {
    const pages = await mapLimit(frontier, concurrency, (p) => page({ prefix: p, delimiter: '/' }, signal));
    const children = pages.flatMap((pg) => pg.prefixes).filter((c) => c.startsWith(prefix) && c.length > prefix.length);
    for (const c of children) found.add(c);
    if (found.size >= target) break;
    frontier = children;
  }
  const sorted = [...found].sort(compareKeys);
  if (sorted.length <= target) return sorted;
  const step = sorted.length / target;
  return Array.from({ length: target }, (_, i) => sorted[Math.floor(i * step)]!).filter((b, i, a) => i === 0 || b !== a[i - 1]);
}

/** Characters a key holds at one place, by the class of the character seen there (see midKey). */
function classEnd(c: number): number {
  if (c >= 0x30 && c <= 0x39) return 0x3a; // digits: "0".."9"
  if (c >= 0x61 && c <= 0x7a) return 0x7b; // lower case letters
  if (c >= 0x41 && c <= 0x5a) return 0x5b; // upper case letters
  if (c < 0x80) return 0x80; // other ASCII
  return 0x110000;
}

/**
 * A key strictly between `last` and `hi` (undefined: the end of the key space) that splits
 * the keys between them about in half, or undefined when none can be had. S3 cannot be
 * asked where the middle is, so it is guessed from the characters: at the first place the
 * two differ, the middle of `last`'s character and `hi`'s, where `hi`'s is capped at the
 * end of the class of `last`'s (digits, letters, ASCII): a key of digits is followed by
 * digits far more often than by anything else. One character apart: keep `last`'s and
 * split the rest of `last` against the end of the space. A wrong guess only makes a part
 * empty or long (which is split again); the parts still partition the keys.
 *
 * With `first`, the page's first key: the page's keys share their head up to the place p
 * where `first` and `last` differ, so the next pages most likely vary one place earlier
 * (a page o0000..o0999 is followed by o1..., o2...). When that place, p - 1, comes at or after
 * the first difference with `hi` (always, for an open end), the cut is the middle of that
 * place's class after `last`'s character ("o5"), not a guess far out in the key space ("u"),
 * which would cost a few near-empty pages per character before a cut lands among the keys.
 */
export function midKey(last: string, hi: string | undefined, first?: string): string | undefined {
  const a = Array.from(last, (c) => c.codePointAt(0)!);
  const b = hi === undefined ? undefined : Array.from(hi, (c) => c.codePointAt(0)!);
  let i = 0;
  while (b !== undefined && i < a.length && i < b.length && a[i] === b[i]) i++;
  if (hi !== undefined && compareKeys(last, hi) >= 0) return undefined;
  if (first !== undefined && compareKeys(first, last) < 0) {
    const f = Array.from(first, (c) => c.codePointAt(0)!);
    let p = 0;
    while (p < f.length && p < a.length && f[p] === a[p]) p++;
    const q = p - 1;
    if (q >= i && q < a.length) {
      const x = a[q]!;
      // hi caps this place only when it shares last's head up to it.
      const y = q === i && b !== undefined && q < b.length ? b[q]! : 0x110000;
      const up = Math.min(y, classEnd(x));
      if (up - x >= 2) return String.fromCodePoint(...a.slice(0, q), (x + up) >>> 1);
    }
  }
  const head = a.slice(0, i);
  for (let open = b === undefined; ; open = true) {
    const y = open ? 0x110000 : b![i]!;
    if (i >= a.length) {
      // Past last's end: any character below y follows last and precedes hi; from "/"
      // (below digits and letters) when there is room, else from the lowest.
      const lo = y > 0x30 ? 0x2f : 0;
      const up = Math.min(y, classEnd(lo));
      return up > lo ? String.fromCodePoint(...head, (lo + up) >>> 1) : undefined;
    }
    const x = a[i]!;
    const up = Math.min(y, classEnd(x)); // > x: y > x at the first difference
    if (up - x >= 2) return String.fromCodePoint(...head, (x + up) >>> 1);
    head.push(x);
    i++;
  }
}

/** One part of the key space, [lo, hi) ('' lo = from the start, undefined hi = to the end). */
interface Range { lo: string; hi: string | undefined }

/**
 * Step 2 for one range. After each page that did not finish the range, `split` may take
 * the rest's upper part (a worker is idle): the range then ends at the returned key.
 */
async function listRange(prefix: string, r: Range, page: ListPageFn, emit: (objs: ObjectInfo[]) => Promise<void>, split: (last: string, hi: string | undefined, first?: string) => string | undefined, signal?: AbortSignal): Promise<void> {
  let token: string | undefined;
  for (;;) {
    if (signal?.aborted) throw new AbortedError();
    const q: ListQuery = { prefix };
    if (token !== undefined) q.continuationToken = token;
    else if (r.lo !== '') q.startAfter = justBefore(r.lo);
    const pg = await page(q, signal);
    let reachedEnd = false;
    const keep: ObjectInfo[] = [];
    let last: string | undefined = pg.lastKey;
    for (const o of pg.objects) {
      if (last === undefined || compareKeys(o.key, last) > 0) last = o.key;
      if (r.lo !== '' && compareKeys(o.key, r.lo) < 0) continue;
      if (r.hi !== undefined && compareKeys(o.key, r.hi) >= 0) { reachedEnd = true; continue; }
      keep.push(o);
    }
    if (r.hi !== undefined && last !== undefined && compareKeys(last, r.hi) >= 0) reachedEnd = true;
    if (keep.length > 0) await emit(keep);
    if (reachedEnd || pg.nextToken === undefined) return;
    if (last !== undefined) r.hi = split(last, r.hi, pg.objects[0]?.key) ?? r.hi;
    token = pg.nextToken;
  }
}

/** Every object under `prefix`, each exactly once, in no particular order. */
export async function* listAll(prefix: string, page: ListPageFn, opts: ListerOptions): AsyncGenerator<ObjectInfo> {
  // Our own controller, so that a consumer that stops early also cancels the pages in flight.
  const ctrl = new AbortController();
  const onAbort = () => ctrl.abort(opts.signal?.reason);
  if (opts.signal?.aborted) onAbort(); else opts.signal?.addEventListener('abort', onAbort, { once: true });
  const signal = ctrl.signal;
  const concurrency = Math.max(1, Math.floor(opts.concurrency));
  let bounds: string[] = [];
  try {
    if (concurrency > 1) bounds = await discoverBoundaries(prefix, page, concurrency * PARTS_PER_WORKER, concurrency, signal);
  } catch (err) {
    opts.signal?.removeEventListener('abort', onAbort);
    throw err;
  }
  const ranges: Range[] = [];
  const cuts = ['', ...bounds];
  for (let i = 0; i < cuts.length; i++) ranges.push({ lo: cuts[i]!, hi: cuts[i + 1] });

  // A small queue between range workers (producers) and this generator (the consumer).
  const buffered: ObjectInfo[][] = [];
  let bufferedCount = 0;
  let failed: { err: unknown } | undefined;
  let stopped = false;
  let finished = false;
  let wakeConsumer: (() => void) | undefined;
  let wakeProducers: (() => void)[] = [];
  const notifyConsumer = () => { const w = wakeConsumer; wakeConsumer = undefined; w?.(); };
  const emit = async (objs: ObjectInfo[]) => {
    while (bufferedCount >= HIGH_WATER && !stopped) await new Promise<void>((r) => wakeProducers.push(r));
    if (stopped) throw new AbortedError('listing stopped');
    buffered.push(objs);
    bufferedCount += objs.length;
    notifyConsumer();
  };

  // Workers take ranges from the queue; a worker that finds it empty waits. A range still
  // listing gives the upper part of its rest to a waiting worker (split), so a long range
  // (a flat prefix, or the last folders of a prefix with more than a page of them) is
  // listed by several workers. Ranges only ever split in two: they stay a partition.
  let idle: ((r: Range | undefined) => void)[] = [];
  let running = 0;
  const split = (last: string, hi: string | undefined, first?: string): string | undefined => {
    if (idle.length === 0 || stopped || !last.startsWith(prefix) || (hi !== undefined && !hi.startsWith(prefix))) return undefined;
    // Split what follows the prefix: every key starts with it, and so must the cut.
    const rest = midKey(last.slice(prefix.length), hi?.slice(prefix.length), first?.startsWith(prefix) ? first.slice(prefix.length) : undefined);
    if (rest === undefined) return undefined;
    const mid = prefix + rest;
    if (compareKeys(mid, last) <= 0 || (hi !== undefined && compareKeys(mid, hi) >= 0)) return undefined;
    running++; // counted from the hand-over, so that the count never drops to 0 in between
    idle.shift()!({ lo: mid, hi });
    return mid;
  };
  const next = (): Promise<Range | undefined> => {
    const r = ranges.shift();
    if (r) { running++; return Promise.resolve(r); }
    if (running === 0 || stopped) return Promise.resolve(undefined);
    return new Promise((resolve) => idle.push(resolve));
  };
  const worker = async () => {
    for (;;) {
      const r = await next();
      if (!r) return;
      try {
        await listRange(prefix, r, page, emit, concurrency > 1 ? split : () => undefined, signal);
      } finally {
        running--;
        // The last range done: nobody can split any more, the waiting workers are done too.
        if (running === 0 && ranges.length === 0) { const w = idle; idle = []; w.forEach((f) => f(undefined)); }
      }
    }
  };
  const work = Promise.all(Array.from({ length: concurrency }, worker))
    .then(() => { finished = true; }, (err) => { failed ??= { err }; finished = true; })
    .finally(notifyConsumer);

  try {
    for (;;) {
      const batch = buffered.shift();
      if (batch) {
        bufferedCount -= batch.length;
        const ws = wakeProducers; wakeProducers = []; ws.forEach((w) => w());
        yield* batch;
        continue;
      }
      if (failed) throw failed.err;
      if (finished) return;
      await new Promise<void>((r) => { wakeConsumer = r; });
    }
  } finally {
    stopped = true;
    ctrl.abort();
    opts.signal?.removeEventListener('abort', onAbort);
    const ws = wakeProducers; wakeProducers = []; ws.forEach((w) => w());
    const w = idle; idle = []; w.forEach((f) => f(undefined));
    await work;
  }
}

// ---- issue 15: partition pruning ----------------------------------------------------

/**
 * Folder levels walked with a delimiter before the rest is listed flat: Hive tables have
 * a few partition columns; a filter naming a column the layout lacks must not walk forever.
 */
const PRUNE_MAX_DEPTH = 8;

/**
 * Every object under `prefix` that `filter` keeps, without listing folders that cannot
 * hold one. Walk: list a folder with Delimiter '/' (all its pages); keep its direct objects
 * that match; drop each subfolder that cannot match (couldMatchUnder); walk on into the
 * others while that can still prune (needsDeeper, at most PRUNE_MAX_DEPTH levels); list
 * the rest flat and in parallel (listAll) and keep what matches. Each key is yielded
 * once: the walked folders' direct objects and the flat-listed subtrees are disjoint.
 * Cost: one delimiter listing per walked folder, plus the listings of the kept subtrees.
 * A prefix that is not a folder ("data/tr") is listed whole and filtered (no pruning).
 */
export async function* listPruned(prefix: string, page: ListPageFn, opts: ListerOptions, filter: PruneFilter): AsyncGenerator<ObjectInfo> {
  const concurrency = Math.max(1, Math.floor(opts.concurrency));
  const out: ObjectInfo[] = [];
  const leaves: string[] = [];
  const walk = async (folder: string, depth: number): Promise<void> => {
    const subfolders: string[] = [];
    let token: string | undefined;
    do {
      if (opts.signal?.aborted) throw new AbortedError();
      const q: ListQuery = { prefix: folder, delimiter: '/' };
      if (token !== undefined) q.continuationToken = token;
      const pg = await page(q, opts.signal);
      for (const o of pg.objects) if (filter.matches(o.key)) out.push(o);
      for (const p of pg.prefixes) if (p.startsWith(folder) && p.length > folder.length && filter.couldMatchUnder(p)) subfolders.push(p);
      token = pg.nextToken;
    } while (token !== undefined);
    const deeper = subfolders.filter((p) => depth + 1 < PRUNE_MAX_DEPTH && filter.needsDeeper(p));
    for (const p of subfolders) if (!deeper.includes(p)) leaves.push(p);
    await mapLimit(deeper, concurrency, (p) => walk(p, depth + 1));
  };
  if (prefix !== '' && !prefix.endsWith('/')) {
    for await (const o of listAll(prefix, page, opts)) if (filter.matches(o.key)) out.push(o);
  } else {
    await walk(prefix, 0);
    // One kept subtree: listed in parallel ranges. Several: each listed flat, `concurrency`
    // subtrees at a time (a partition is usually small; discovery would cost a request each).
    const flat = leaves.length > 1 ? { ...opts, concurrency: 1 } : opts;
    await mapLimit(leaves, leaves.length > 1 ? concurrency : 1, async (leaf) => {
      for await (const o of listAll(leaf, page, flat)) if (filter.matches(o.key)) out.push(o);
    });
  }
  yield* out;
}
