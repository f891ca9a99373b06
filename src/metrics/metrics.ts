/**
 * Every metric sluice exports, declared in this one file on one prom-client
 * registry. docs/METRICS.md documents each of them, and a test checks that the
 * two agree both ways.
 *
 * Rules:
 *  - Names start with `sluice_`; units are in the name (`_bytes`, `_seconds`).
 *  - Label values are bounded sets (operation, status class, reason, channel
 *    name, mode). Never an object key, a path or a credential.
 *  - Histograms use buckets chosen for S3 latencies: 1 ms .. 30 s.
 *  - The process metrics are prom-client's defaults under their standard names
 *    (process_cpu_seconds_total, nodejs_eventloop_lag_p99_seconds, ...), unprefixed, so
 *    stock Node.js dashboards and alerts work; Prometheus' job/pod labels tell processes apart.
 *  - No counter shares its name with a histogram's family (a counter `x_total` next to a
 *    histogram `x` collide under OpenMetrics, which strips `_total`).
 *
 * Lazily built (issue 44): prom-client with @opentelemetry/api is ~0.2 MB of code that cost
 * tens of ms of CPU to compile before a mount could answer. So each metric here is a small
 * stand-in (LazyMetric) that, until the registry exists, folds what it is told into a
 * buffer: a counter's sums and a gauge's values by label set, a histogram's observations
 * (up to HISTOGRAM_BUFFER of them; past that, each further one is folded into its bucket,
 * so counts and buckets stay exact and only _sum is approximate). loadMetrics() imports
 * prom-client, builds the registry and every metric, replays the buffers, and from then on
 * each stand-in forwards to its metric (one property check per call). It runs at the first
 * scrape (`registry.metrics()`), the first `get()`, or when a command calls it (mount: once
 * the mount answers). Nothing counted before is lost.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type * as PromClient from 'prom-client';

type Labels = Record<string, string | number>;
type Kind = 'counter' | 'gauge' | 'histogram';
interface Spec { name: string; help: string; labelNames?: readonly string[]; buckets?: number[] }
type Real = PromClient.Counter<string> & PromClient.Gauge<string> & PromClient.Histogram<string>;

/**
 * 65,536 observations per histogram buffered exactly before the registry exists (~1 MB at
 * most per histogram); a mount builds it within a second of answering, so this is reached
 * only by a process that never builds it and reads a lot.
 */
const HISTOGRAM_BUFFER = 65_536;

const lazyMetrics: LazyMetric[] = [];
let built: { client: typeof PromClient; registry: PromClient.Registry } | undefined;
let building: Promise<PromClient.Registry> | undefined;

function labelKey(l: Labels | undefined): string {
  if (l === undefined) return '';
  return Object.keys(l).sort().map((k) => `${k}\u0000${String(l[k])}`).join('\u0001');
}

/** A metric before and after the registry exists (see the header). */
class LazyMetric {
  /** The prom-client metric, once built. */
  real: Real | undefined;
  /** Counter sums / gauge values by label set, before the registry. */
  private folded = new Map<string, { labels: Labels | undefined; value: number; set: boolean }>();
  /** Histogram observations before the registry; past HISTOGRAM_BUFFER, counts by (label set, bucket). */
  private observed: Array<[Labels | undefined, number]> = [];
  private overflow = new Map<string, { labels: Labels | undefined; value: number; count: number }>();

  constructor(readonly kind: Kind, readonly spec: Spec) {
    lazyMetrics.push(this);
  }

  private add(a: Labels | number | undefined, b: number | undefined, sign: number, set: boolean): void {
    const labels = typeof a === 'object' ? a : undefined;
    const v = typeof a === 'number' ? a : b ?? (set ? 0 : 1);
    const k = labelKey(labels);
    const e = this.folded.get(k);
    if (e === undefined) this.folded.set(k, { labels, value: sign * v, set });
    else if (set) { e.value = v; e.set = true; } else e.value += sign * v;
  }

  inc(a?: Labels | number, b?: number): void {
    if (this.real !== undefined) { (this.real.inc as (x?: Labels | number, y?: number) => void)(a, b); return; }
    this.add(a, b, 1, false);
  }

  dec(a?: Labels | number, b?: number): void {
    if (this.real !== undefined) { (this.real.dec as (x?: Labels | number, y?: number) => void)(a, b); return; }
    this.add(a, b, -1, false);
  }

  set(a: Labels | number, b?: number): void {
    if (this.real !== undefined) { (this.real.set as (x: Labels | number, y?: number) => void)(a, b); return; }
    this.add(a, b, 1, true);
  }

  observe(a: Labels | number, b?: number): void {
    if (this.real !== undefined) { (this.real.observe as (x: Labels | number, y?: number) => void)(a, b); return; }
    const labels = typeof a === 'object' ? a : undefined;
    const v = typeof a === 'number' ? a : b ?? 0;
    if (this.observed.length < HISTOGRAM_BUFFER) { this.observed.push([labels, v]); return; }
    const buckets = this.spec.buckets ?? [];
    let i = buckets.findIndex((le) => v <= le);
    if (i < 0) i = buckets.length;
    const k = `${labelKey(labels)}\u0002${i}`;
    const e = this.overflow.get(k);
    if (e === undefined) this.overflow.set(k, { labels, value: v, count: 1 });
    else e.count++;
  }

  /** The metric's values, as prom-client gives them (builds the registry). */
  async get(): Promise<PromClient.MetricObjectWithValues<PromClient.MetricValueWithName<string>>> {
    await loadMetrics();
    return this.real!.get() as Promise<PromClient.MetricObjectWithValues<PromClient.MetricValueWithName<string>>>;
  }

  get name(): string { return this.spec.name; }
  get labelNames(): readonly string[] { return this.spec.labelNames ?? []; }
  /** prom-client's type name. */
  get type(): string { return this.kind; }

  /** @internal Makes the prom-client metric and replays the buffer into it. */
  build(client: typeof PromClient, registry: PromClient.Registry): void {
    const o = { ...this.spec, labelNames: [...(this.spec.labelNames ?? [])], registers: [registry] };
    const real = (this.kind === 'counter' ? new client.Counter(o) : this.kind === 'gauge' ? new client.Gauge(o) : new client.Histogram(o)) as unknown as Real;
    for (const e of this.folded.values()) {
      const call = (this.kind === 'gauge' && e.set ? real.set : real.inc) as (x: Labels | number, y?: number) => void;
      if (e.labels !== undefined) call.call(real, e.labels, e.value); else call.call(real, e.value);
    }
    const observe = real.observe as (x: Labels | number, y?: number) => void;
    for (const [labels, v] of this.observed) { if (labels !== undefined) observe.call(real, labels, v); else observe.call(real, v); }
    for (const e of this.overflow.values()) for (let n = 0; n < e.count; n++) { if (e.labels !== undefined) observe.call(real, e.labels, e.value); else observe.call(real, e.value); }
    this.folded.clear();
    this.observed = [];
    this.overflow.clear();
    this.real = real;
  }
}

/** The counter, gauge and histogram stand-ins, typed for their label names. */
export interface LazyCounter<T extends string> { inc(labels?: Partial<Record<T, string | number>> | number, value?: number): void; get: LazyMetric['get'] }
export interface LazyGauge<T extends string> extends LazyCounter<T> { dec(labels?: Partial<Record<T, string | number>> | number, value?: number): void; set(labels: Partial<Record<T, string | number>> | number, value?: number): void }
export interface LazyHistogram<T extends string> { observe(labels: Partial<Record<T, string | number>> | number, value?: number): void; get: LazyMetric['get'] }

function counter<T extends string = never>(spec: Spec & { labelNames?: readonly T[] }): LazyCounter<T> { return new LazyMetric('counter', spec) as LazyCounter<T>; }
function gauge<T extends string = never>(spec: Spec & { labelNames?: readonly T[] }): LazyGauge<T> { return new LazyMetric('gauge', spec) as LazyGauge<T>; }
function histogram<T extends string = never>(spec: Spec & { labelNames?: readonly T[] }): LazyHistogram<T> { return new LazyMetric('histogram', spec) as LazyHistogram<T>; }

/**
 * Imports prom-client, builds the registry (with its default process metrics) and every
 * metric, and replays what was counted before. Idempotent; the first call does the work.
 */
export function loadMetrics(): Promise<PromClient.Registry> {
  building ??= import('prom-client').then((m) => {
    const client = ((m as unknown as { default?: typeof PromClient }).default ?? m) as typeof PromClient;
    const registry = new client.Registry();
    client.collectDefaultMetrics({ register: registry });
    for (const lm of lazyMetrics) lm.build(client, registry);
    built = { client, registry };
    return registry;
  });
  return building;
}

/** Whether loadMetrics() has built the registry (tests). */
export function metricsBuilt(): boolean {
  return built !== undefined;
}

/** The one registry, as the endpoint and the summary read it: rendering builds it first. */
export const registry = {
  async metrics(): Promise<string> { return (await loadMetrics()).metrics(); },
  /** sluice's metric `name` (its stand-in: get() builds the registry), or undefined. */
  getSingleMetric(name: string): LazyMetric | undefined { return lazyMetrics.find((m) => m.spec.name === name); },
  /** Every metric (name, type, labelNames): once built prom-client's (process metrics too), else sluice's stand-ins. */
  getMetricsAsArray(): readonly unknown[] { return built !== undefined ? built.registry.getMetricsAsArray() : lazyMetrics; },
  /** Prometheus' text format, as prom-client's registry states it. */
  get contentType(): string { return built?.registry.contentType ?? 'text/plain; version=0.0.4; charset=utf-8'; },
};

/** `count` buckets from `start`, each `factor` times the last (prom-client's exponentialBuckets). */
function exponentialBuckets(start: number, factor: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => start * factor ** i);
}

/** 1 ms .. ~33 s, doubling: covers a cached hit (sub-ms) to a retried, throttled GET. */
const LATENCY_BUCKETS = exponentialBuckets(0.001, 2, 16);
/** Read sizes served to the kernel or a pipe: 4 KiB .. 16 MiB. */
const SIZE_BUCKETS = exponentialBuckets(4096, 4, 8);

// ---- S3 client -------------------------------------------------------------------

export const s3Requests = counter({
  name: 'sluice_s3_requests_total',
  help: 'S3 requests completed, by operation (list, head, get: the source\'s ranged GETs, versioning, cache_get and cache_put: the cache bucket\'s) and HTTP status (or "error" when no reply came).',
  labelNames: ['operation', 'status'] as const,
});
export const s3BytesReceived = counter({
  name: 'sluice_s3_received_bytes_total',
  help: 'Body bytes received from S3 by ranged and streaming GETs (including bytes of attempts later discarded).',
});
export const s3Retries = counter({
  name: 'sluice_s3_retries_total',
  help: 'S3 request attempts that were retried, by reason (throttled, server_error, reset, timeout, short_body, unreachable, expired_credentials).',
  labelNames: ['operation', 'reason'] as const,
});
export const s3FirstByteSeconds = histogram({
  name: 'sluice_s3_first_byte_seconds',
  help: 'Time from sending an S3 request to receiving the response headers, per attempt.',
  labelNames: ['operation'] as const,
  buckets: LATENCY_BUCKETS,
});
export const s3RequestSeconds = histogram({
  name: 'sluice_s3_request_seconds',
  help: 'Total time of an S3 request, including every retry and the whole body.',
  labelNames: ['operation'] as const,
  buckets: LATENCY_BUCKETS,
});
export const s3InflightRequests = gauge({
  name: 'sluice_s3_inflight_requests',
  help: 'S3 requests currently in flight.',
  labelNames: ['operation'] as const,
});

// ---- filesystem (FastFile) -------------------------------------------------------

export const fuseOps = counter({
  name: 'sluice_fuse_operations_total',
  help: 'FUSE operations answered, by operation (getattr, readdir, open, read, release, statfs, ...) and result (ok or the errno name).',
  labelNames: ['op', 'result'] as const,
});
export const fuseOpSeconds = histogram({
  name: 'sluice_fuse_operation_seconds',
  help: 'Latency of FUSE operations as the kernel sees them, by operation.',
  labelNames: ['op'] as const,
  buckets: LATENCY_BUCKETS,
});
export const fuseReadBytes = histogram({
  name: 'sluice_fuse_read_size_bytes',
  help: 'Size of read requests from the kernel.',
  buckets: SIZE_BUCKETS,
});
export const servedBytes = counter({
  name: 'sluice_served_bytes_total',
  help: 'Bytes delivered to the training process (through the mount, a pipe, or written by File mode), by channel and mode.',
  labelNames: ['channel', 'mode'] as const,
});
export const listingSeconds = gauge({
  name: 'sluice_listing_seconds',
  help: 'How long the FastFile mount took to list its prefix (set when the listing completes; the mount answers lookups from the first moment).',
  labelNames: ['channel'] as const,
});
export const earlyLookups = counter({
  name: 'sluice_early_lookups_total',
  help: 'Lookups answered while the listing was still running, with a HEAD and a one-key listing, by result (file, folder, missing, error).',
  labelNames: ['channel', 'result'] as const,
});
export const openHandles = gauge({
  name: 'sluice_open_handles',
  help: 'Files currently open through the mount.',
  labelNames: ['channel'] as const,
});

// ---- starvation: is the GPU waiting on data? ------------------------------------
// The counter is sluice_starved_seconds_total (it was sluice_read_wait_seconds_total, which
// collided with the histogram sluice_read_wait_seconds under OpenMetrics).

export const readWaitSeconds = counter({
  name: 'sluice_starved_seconds_total',
  help: 'Seconds during which at least one read of the channel was blocked waiting on S3 (not served from cache or prefetch), by channel and mode. Overlapping waits count once, so rate() of it is the fraction of time the channel was starving (0..1).',
  labelNames: ['channel', 'mode'] as const,
});
export const readWait = histogram({
  name: 'sluice_read_wait_seconds',
  help: 'Per read: time spent waiting on S3 before the read could be answered (0 when served from cache or completed prefetch).',
  labelNames: ['channel', 'mode'] as const,
  buckets: [0, ...LATENCY_BUCKETS],
});

// ---- block cache -------------------------------------------------------------------

export const cacheHits = counter({
  name: 'sluice_cache_hits_total',
  help: 'Block lookups served from the cache (including blocks still being fetched, which are shared).',
});
export const cacheMisses = counter({
  name: 'sluice_cache_misses_total',
  help: 'Block lookups that had to start a GET.',
});
export const cacheEvictions = counter({
  name: 'sluice_cache_evictions_total',
  help: 'Blocks evicted from the cache to stay within --cache-size.',
});
export const cacheBytes = gauge({
  name: 'sluice_cache_bytes',
  help: 'Bytes currently held by the block cache.',
});
export const cacheCapacityBytes = gauge({
  name: 'sluice_cache_capacity_bytes',
  help: 'The block cache budget (--cache-size).',
});

// ---- prefetch ----------------------------------------------------------------------

export const prefetchBytes = counter({
  name: 'sluice_prefetch_bytes_total',
  help: 'Bytes fetched ahead of the reader, by kind (sequential window, cross_file, or random_fill: the rest of a small file read at random) and outcome (used, or wasted: evicted or dropped unread).',
  labelNames: ['kind', 'outcome'] as const,
});
export const fillFetchedBytes = counter({
  name: 'sluice_fill_fetched_bytes_total',
  help: 'Bytes requested by the fill of files read at random or read again (whole files fetched in the background into the cache, --random-fill-max-size), counted when each GET starts; sluice_prefetch_bytes_total{kind="random_fill"} tells how much of it was read.',
});
export const fillFiles = counter({
  name: 'sluice_fill_files_total',
  help: 'Files whose fill started, completed (every GET of the file sent) or stopped early (its last handle closed, a GET failed, or the mount stopped).',
  labelNames: ['outcome'] as const,
});
export const prefetchShareBytes = gauge({
  name: 'sluice_prefetch_share_bytes',
  help: 'Read-ahead budget shared by the sequential readers of a FastFile channel: each of n readers may read up to this / n ahead (at most --max-prefetch). It starts at --max-prefetch (one window) and grows while ranged GETs keep at least 70% of their best (smoothed) rate.',
  labelNames: ['channel'] as const,
});
export const orderFileLoads = counter({
  name: 'sluice_order_file_loads_total',
  help: 'Orders read from --order-file (each write of the file starts a new order), by channel.',
  labelNames: ['channel'] as const,
});
export const orderFileLines = counter({
  name: 'sluice_order_file_lines_total',
  help: 'Lines of the orders read from --order-file, by outcome: mapped (names a file of the mount), unknown (a path the mount does not show), malformed (empty, or not a path in the mount).',
  labelNames: ['channel', 'outcome'] as const,
});
export const orderFilePosition = gauge({
  name: 'sluice_order_file_position',
  help: 'Furthest place in the current --order-file order that a reader has opened (the readers\' progress; -1 before the first open).',
  labelNames: ['channel'] as const,
});
export const orderFileSkipped = counter({
  name: 'sluice_order_file_skipped_files_total',
  help: 'Files of an --order-file order fetched ahead and dropped unread because the readers went past them (or a new order started).',
  labelNames: ['channel'] as const,
});
export const inflightBytes = gauge({
  name: 'sluice_inflight_bytes',
  help: 'Bytes of GETs in flight (requested but not yet received), bounded by --max-inflight.',
});

// ---- the operator's view: milestones and S3 concurrency -------------------------
// The two "first" gauges are set once per channel and mode by markFirstByte() and
// markFirstFile() in src/metrics/milestones.ts.

export const timeToFirstByte = gauge({
  name: 'sluice_time_to_first_byte_seconds',
  help: 'Seconds from sluice start to the first byte delivered on the channel (set once; absent until then).',
  labelNames: ['channel', 'mode'] as const,
});
export const timeToFirstBatch = gauge({
  name: 'sluice_time_to_first_batch_seconds',
  help: 'Seconds from sluice start to the first whole file delivered on the channel: a proxy for the first training batch (set once; absent until then).',
  labelNames: ['channel', 'mode'] as const,
});
export const s3ConcurrencyLimit = gauge({
  name: 'sluice_s3_concurrency_limit',
  help: 'Concurrent S3 GETs currently allowed, as the adaptive limiter sets it (it shrinks on 503 SlowDown and grows back).',
});

// ---- channels (sluice run) ---------------------------------------------------------

export const channelObjects = counter({
  name: 'sluice_channel_objects_total',
  help: 'Objects (or augmented-manifest records) delivered to the training process, by channel and mode: downloaded or found present by File mode, streamed whole by Pipe mode, read and closed through a FastFile mount.',
  labelNames: ['channel', 'mode'] as const,
});
export const channelEpoch = gauge({
  name: 'sluice_channel_epoch',
  help: 'The epoch a Pipe channel is currently streaming (0 for the first; File and FastFile channels stay at 0).',
  labelNames: ['channel', 'mode'] as const,
});
export const channelSkippedBytes = counter({
  name: 'sluice_channel_skipped_bytes_total',
  help: 'Bytes File mode did not download because the file was already present with the same size and ETag, by channel.',
  labelNames: ['channel'] as const,
});

// ---- Pipe mode: which side is slow? ------------------------------------------------
// The reader's consumption rate is rate(sluice_served_bytes_total{mode="Pipe"}).

export const pipeFullSeconds = counter({
  name: 'sluice_pipe_full_seconds_total',
  help: 'Seconds a Pipe channel waited with data ready because the FIFO was full: the training process reads slower than S3 delivers. rate() near 1 means the reader is the bottleneck.',
  labelNames: ['channel'] as const,
});
export const pipeEmptySeconds = counter({
  name: 'sluice_pipe_empty_seconds_total',
  help: 'Seconds a Pipe channel had nothing to write because it was waiting on S3 (the pipe drains while it waits). rate() near 1 means S3 is the bottleneck.',
  labelNames: ['channel'] as const,
});

// ---- build ---------------------------------------------------------------------------

/** A package's version from its package.json, without loading the package ('unknown' when absent). */
function packageVersion(name: string, from: string): string {
  try {
    const require = createRequire(from);
    return (JSON.parse(readFileSync(require.resolve(`${name}/package.json`), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

/** What is running, for dashboards and for comparing hosts: always 1, the facts are labels. */
export const buildInfo = gauge({
  name: 'sluice_build_info',
  help: 'Always 1; labels: version (sluice), node (Node.js version), fuse (the fuse-native binding version and the libfuse ABI it links).',
  labelNames: ['version', 'node', 'fuse'] as const,
});
buildInfo.set({
  // package.json sits two levels above both src/metrics/ and dist/metrics/.
  version: (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version,
  node: process.version,
  fuse: `fuse-native ${packageVersion('fuse-native', import.meta.url)}, libfuse.so.2`,
}, 1);
// ---- Disk tier (--cache-dir, src/cache/disk-cache.ts) ------------------------------

export const diskCacheHits = counter({
  name: 'sluice_disk_cache_hits_total',
  help: 'Block lookups in the disk tier that found the block whole and verified (CRC32C).',
});
export const diskCacheMisses = counter({
  name: 'sluice_disk_cache_misses_total',
  help: 'Block lookups in the disk tier that found nothing usable (absent, too short, or corrupt); the block is read from S3.',
});
export const diskCacheReadBytes = counter({
  name: 'sluice_disk_cache_read_bytes_total',
  help: 'Bytes served from the disk tier instead of S3.',
});
export const diskCacheWrittenBytes = counter({
  name: 'sluice_disk_cache_written_bytes_total',
  help: 'Block bytes written to the disk tier (sidecars not included).',
});
export const diskCacheWriteSkipped = counter({
  name: 'sluice_disk_cache_write_skipped_total',
  help: 'Blocks not written to the disk tier, by reason (queue_full: writes lag behind reads; no_space: bound or free space reached; lock_busy; closed; error).',
  labelNames: ['reason'] as const,
});
export const diskCacheEvictions = counter({
  name: 'sluice_disk_cache_evictions_total',
  help: 'Objects (cache files with all their blocks) deleted by this process to keep the disk tier within --cache-dir-size (least recently used first).',
});
export const diskCacheChecksumFailures = counter({
  name: 'sluice_disk_cache_checksum_failures_total',
  help: 'Blocks read from the disk tier that failed verification (torn, truncated, corrupt, or a damaged sidecar); each was discarded and read from S3 instead. Above 0 points at a failing disk.',
});
export const diskCacheUsedBytes = gauge({
  name: 'sluice_disk_cache_used_bytes',
  help: 'Bytes the disk tier holds across all processes sharing the folder (cache files plus space granted to writers), as last seen in its ledger.',
});
export const diskCacheCapacityBytes = gauge({
  name: 'sluice_disk_cache_capacity_bytes',
  help: 'The disk tier bound (--cache-dir-size) of this process.',
});

// ---- Cache bucket (--cache-bucket, src/cache/cache-bucket.ts; issue 48) --------------

export const cacheBucketHits = counter({
  name: 'sluice_cache_bucket_hits_total',
  help: 'Block lookups in the cache bucket that found the block, of this object version, whole and verified (identity and CRC32C).',
});
export const cacheBucketHitBytes = counter({
  name: 'sluice_cache_bucket_read_bytes_total',
  help: 'Bytes served from the cache bucket instead of the source.',
});
export const cacheBucketMisses = counter({
  name: 'sluice_cache_bucket_misses_total',
  help: 'Block lookups in the cache bucket that found nothing usable, by reason (absent, short, corrupt, foreign, error); the block is read from the source.',
  labelNames: ['reason'] as const,
});
export const cacheBucketWrites = counter({
  name: 'sluice_cache_bucket_writes_total',
  help: 'Blocks offered to the cache bucket, by result (written, failed, dropped: the write budget was full, or the client closing).',
  labelNames: ['result'] as const,
});
export const cacheBucketWrittenBytes = counter({
  name: 'sluice_cache_bucket_written_bytes_total',
  help: 'Bytes PUT to the cache bucket (cache objects: header and block).',
});
export const cacheBucketPendingBytes = gauge({
  name: 'sluice_cache_bucket_pending_bytes',
  help: 'Bytes of cache objects queued or being PUT to the cache bucket (bounded by the write budget).',
});

// ---- fetched but never read (issue 11) -----------------------------------------------

export const prefetchEvictedUnreadBytes = counter({
  name: 'sluice_prefetch_evicted_unread_bytes_total',
  help: 'Bytes fetched ahead of the reader that the cache evicted (LRU pressure) before anyone read them, by kind: fetched for nothing, and fetched again if read later. Non-zero means read-ahead outruns --cache-size.',
  labelNames: ['kind'] as const,
});

// ---- snapshots, archived objects, partition filters (issue 15) ---------------------

export const snapshotInfo = gauge({
  name: 'sluice_snapshot_info',
  help: 'Set to 1 for the snapshot a channel (or mount) reads from: its file name (without the folder) and the first 12 hex digits of its checksum. Absent when the channel listed S3.',
  labelNames: ['channel', 'name', 'checksum'] as const,
});
export const snapshotObjects = gauge({
  name: 'sluice_snapshot_objects',
  help: 'Objects in the snapshot a channel reads from (after --skip-archived).',
  labelNames: ['channel'] as const,
});
export const archivedObjects = gauge({
  name: 'sluice_archived_objects',
  help: 'Objects of a channel found archived (GLACIER, DEEP_ARCHIVE, Intelligent-Tiering archive tiers) at listing or snapshot time, restored ones excluded.',
  labelNames: ['channel'] as const,
});
export const archivedSkipped = counter({
  name: 'sluice_archived_skipped_objects_total',
  help: 'Archived objects left out of a channel by --skip-archived.',
  labelNames: ['channel'] as const,
});

// ---- FUSE reads answered from memory in libfuse's thread (issue 14, native/src/fuse_memread.c) ----

export const fuseMemoryReads = counter({
  name: 'sluice_fuse_memory_reads_total',
  help: 'FUSE reads answered in libfuse\'s worker thread from a small file\'s verified bytes held in memory, without a hop to JavaScript (also counted in sluice_fuse_operations_total{op="read"}, when the handle is released).',
});

export const fuseViewReplies = counter({
  name: 'sluice_fuse_view_replies_total',
  help: 'FUSE reads answered in JavaScript whose reply the kernel copied straight from the block cache\'s buffer, with no copy into libfuse\'s buffer first (native/src/fuse_lend.c "Views"; also counted in sluice_fuse_operations_total{op="read"}).',
});

export const fuseMemoryOpens = counter({
  name: 'sluice_fuse_memory_opens_total',
  help: 'FUSE opens of small files answered in libfuse\'s worker thread from the disk tier (read whole and CRC32C-checked there), without a hop to JavaScript; their reads and release are answered there too (all counted in sluice_fuse_operations_total, and the disk reads in sluice_disk_cache_hits_total, once released).',
});

export const fusePassthroughOpens = counter({
  name: 'sluice_fuse_passthrough_opens_total',
  help: 'FUSE opens of small files of the disk tier answered with FUSE passthrough (Linux 6.9 or later): the kernel reads the verified cache file itself, so the handle\'s reads never reach sluice (its file\'s whole size counts in sluice_served_bytes_total at its release, and the file in sluice_channel_objects_total).',
});

export const fusePassthroughChecksAhead = counter({
  name: 'sluice_fuse_passthrough_checks_ahead_total',
  help: 'Checks of large disk-tier files (8 MiB or more) started ahead of their open, while the file before them in the listing was read; sluice_fuse_passthrough_checked_ahead_total counts those an open used. A reader out of listing order stops them after one unused.',
});

export const fusePassthroughCheckedAhead = counter({
  name: 'sluice_fuse_passthrough_checked_ahead_total',
  help: 'Passthrough opens of large disk-tier files (8 MiB or more) that used a check made ahead, while the file before it in the listing was being read (the file unchanged since), instead of checking the file at its own open.',
});

export const fuseMemoryGetattrs = counter({
  name: 'sluice_fuse_memory_getattrs_total',
  help: 'FUSE getattrs (lookups) of listed paths answered in libfuse\'s worker thread from a copy of the listing, without a hop to JavaScript (also counted in sluice_fuse_operations_total{op="getattr"}, within a second).',
});
