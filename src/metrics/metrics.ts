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
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import client from 'prom-client';

export const registry = new client.Registry();
client.collectDefaultMetrics({ register: registry });

/** 1 ms .. ~33 s, doubling: covers a cached hit (sub-ms) to a retried, throttled GET. */
const LATENCY_BUCKETS = client.exponentialBuckets(0.001, 2, 16);
/** Read sizes served to the kernel or a pipe: 4 KiB .. 16 MiB. */
const SIZE_BUCKETS = client.exponentialBuckets(4096, 4, 8);

// ---- S3 client -------------------------------------------------------------------

export const s3Requests = new client.Counter({
  name: 'sluice_s3_requests_total',
  help: 'S3 requests completed, by operation (list, head, get, versioning) and HTTP status (or "error" when no reply came).',
  labelNames: ['operation', 'status'] as const,
  registers: [registry],
});
export const s3BytesReceived = new client.Counter({
  name: 'sluice_s3_received_bytes_total',
  help: 'Body bytes received from S3 by ranged and streaming GETs (including bytes of attempts later discarded).',
  registers: [registry],
});
export const s3Retries = new client.Counter({
  name: 'sluice_s3_retries_total',
  help: 'S3 request attempts that were retried, by reason (throttled, server_error, reset, timeout, short_body, unreachable, expired_credentials).',
  labelNames: ['operation', 'reason'] as const,
  registers: [registry],
});
export const s3FirstByteSeconds = new client.Histogram({
  name: 'sluice_s3_first_byte_seconds',
  help: 'Time from sending an S3 request to receiving the response headers, per attempt.',
  labelNames: ['operation'] as const,
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});
export const s3RequestSeconds = new client.Histogram({
  name: 'sluice_s3_request_seconds',
  help: 'Total time of an S3 request, including every retry and the whole body.',
  labelNames: ['operation'] as const,
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});
export const s3InflightRequests = new client.Gauge({
  name: 'sluice_s3_inflight_requests',
  help: 'S3 requests currently in flight.',
  labelNames: ['operation'] as const,
  registers: [registry],
});

// ---- filesystem (FastFile) -------------------------------------------------------

export const fuseOps = new client.Counter({
  name: 'sluice_fuse_operations_total',
  help: 'FUSE operations answered, by operation (getattr, readdir, open, read, release, statfs, ...) and result (ok or the errno name).',
  labelNames: ['op', 'result'] as const,
  registers: [registry],
});
export const fuseOpSeconds = new client.Histogram({
  name: 'sluice_fuse_operation_seconds',
  help: 'Latency of FUSE operations as the kernel sees them, by operation.',
  labelNames: ['op'] as const,
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});
export const fuseReadBytes = new client.Histogram({
  name: 'sluice_fuse_read_size_bytes',
  help: 'Size of read requests from the kernel.',
  buckets: SIZE_BUCKETS,
  registers: [registry],
});
export const servedBytes = new client.Counter({
  name: 'sluice_served_bytes_total',
  help: 'Bytes delivered to the training process (through the mount, a pipe, or written by File mode), by channel and mode.',
  labelNames: ['channel', 'mode'] as const,
  registers: [registry],
});
export const listingSeconds = new client.Gauge({
  name: 'sluice_listing_seconds',
  help: 'How long the FastFile mount took to list its prefix (set when the listing completes; the mount answers lookups from the first moment).',
  labelNames: ['channel'] as const,
  registers: [registry],
});
export const earlyLookups = new client.Counter({
  name: 'sluice_early_lookups_total',
  help: 'Lookups answered while the listing was still running, with a HEAD and a one-key listing, by result (file, folder, missing, error).',
  labelNames: ['channel', 'result'] as const,
  registers: [registry],
});
export const openHandles = new client.Gauge({
  name: 'sluice_open_handles',
  help: 'Files currently open through the mount.',
  labelNames: ['channel'] as const,
  registers: [registry],
});

// ---- starvation: is the GPU waiting on data? ------------------------------------
// The counter is sluice_starved_seconds_total (it was sluice_read_wait_seconds_total, which
// collided with the histogram sluice_read_wait_seconds under OpenMetrics).

export const readWaitSeconds = new client.Counter({
  name: 'sluice_starved_seconds_total',
  help: 'Seconds during which at least one read of the channel was blocked waiting on S3 (not served from cache or prefetch), by channel and mode. Overlapping waits count once, so rate() of it is the fraction of time the channel was starving (0..1).',
  labelNames: ['channel', 'mode'] as const,
  registers: [registry],
});
export const readWait = new client.Histogram({
  name: 'sluice_read_wait_seconds',
  help: 'Per read: time spent waiting on S3 before the read could be answered (0 when served from cache or completed prefetch).',
  labelNames: ['channel', 'mode'] as const,
  buckets: [0, ...LATENCY_BUCKETS],
  registers: [registry],
});

// ---- block cache -------------------------------------------------------------------

export const cacheHits = new client.Counter({
  name: 'sluice_cache_hits_total',
  help: 'Block lookups served from the cache (including blocks still being fetched, which are shared).',
  registers: [registry],
});
export const cacheMisses = new client.Counter({
  name: 'sluice_cache_misses_total',
  help: 'Block lookups that had to start a GET.',
  registers: [registry],
});
export const cacheEvictions = new client.Counter({
  name: 'sluice_cache_evictions_total',
  help: 'Blocks evicted from the cache to stay within --cache-size.',
  registers: [registry],
});
export const cacheBytes = new client.Gauge({
  name: 'sluice_cache_bytes',
  help: 'Bytes currently held by the block cache.',
  registers: [registry],
});
export const cacheCapacityBytes = new client.Gauge({
  name: 'sluice_cache_capacity_bytes',
  help: 'The block cache budget (--cache-size).',
  registers: [registry],
});

// ---- prefetch ----------------------------------------------------------------------

export const prefetchBytes = new client.Counter({
  name: 'sluice_prefetch_bytes_total',
  help: 'Bytes fetched ahead of the reader, by kind (sequential window, cross_file, or random_fill: the rest of a small file read at random) and outcome (used, or wasted: evicted or dropped unread).',
  labelNames: ['kind', 'outcome'] as const,
  registers: [registry],
});
export const fillFetchedBytes = new client.Counter({
  name: 'sluice_fill_fetched_bytes_total',
  help: 'Bytes requested by the fill of files read at random or read again (whole files fetched in the background into the cache, --random-fill-max-size), counted when each GET starts; sluice_prefetch_bytes_total{kind="random_fill"} tells how much of it was read.',
  registers: [registry],
});
export const fillFiles = new client.Counter({
  name: 'sluice_fill_files_total',
  help: 'Files whose fill started, completed (every GET of the file sent) or stopped early (its last handle closed, a GET failed, or the mount stopped).',
  labelNames: ['outcome'] as const,
  registers: [registry],
});
export const prefetchShareBytes = new client.Gauge({
  name: 'sluice_prefetch_share_bytes',
  help: 'Read-ahead budget shared by the sequential readers of a FastFile channel: each of n readers may read up to this / n ahead (at most --max-prefetch). It starts at --max-prefetch (one window) and grows while ranged GETs keep at least 70% of their best (smoothed) rate.',
  labelNames: ['channel'] as const,
  registers: [registry],
});
export const inflightBytes = new client.Gauge({
  name: 'sluice_inflight_bytes',
  help: 'Bytes of GETs in flight (requested but not yet received), bounded by --max-inflight.',
  registers: [registry],
});

// ---- the operator's view: milestones and S3 concurrency -------------------------
// The two "first" gauges are set once per channel and mode by markFirstByte() and
// markFirstFile() in src/metrics/milestones.ts.

export const timeToFirstByte = new client.Gauge({
  name: 'sluice_time_to_first_byte_seconds',
  help: 'Seconds from sluice start to the first byte delivered on the channel (set once; absent until then).',
  labelNames: ['channel', 'mode'] as const,
  registers: [registry],
});
export const timeToFirstBatch = new client.Gauge({
  name: 'sluice_time_to_first_batch_seconds',
  help: 'Seconds from sluice start to the first whole file delivered on the channel: a proxy for the first training batch (set once; absent until then).',
  labelNames: ['channel', 'mode'] as const,
  registers: [registry],
});
export const s3ConcurrencyLimit = new client.Gauge({
  name: 'sluice_s3_concurrency_limit',
  help: 'Concurrent S3 GETs currently allowed, as the adaptive limiter sets it (it shrinks on 503 SlowDown and grows back).',
  registers: [registry],
});

// ---- channels (sluice run) ---------------------------------------------------------

export const channelObjects = new client.Counter({
  name: 'sluice_channel_objects_total',
  help: 'Objects (or augmented-manifest records) delivered to the training process, by channel and mode: downloaded or found present by File mode, streamed whole by Pipe mode, read and closed through a FastFile mount.',
  labelNames: ['channel', 'mode'] as const,
  registers: [registry],
});
export const channelEpoch = new client.Gauge({
  name: 'sluice_channel_epoch',
  help: 'The epoch a Pipe channel is currently streaming (0 for the first; File and FastFile channels stay at 0).',
  labelNames: ['channel', 'mode'] as const,
  registers: [registry],
});
export const channelSkippedBytes = new client.Counter({
  name: 'sluice_channel_skipped_bytes_total',
  help: 'Bytes File mode did not download because the file was already present with the same size and ETag, by channel.',
  labelNames: ['channel'] as const,
  registers: [registry],
});

// ---- Pipe mode: which side is slow? ------------------------------------------------
// The reader's consumption rate is rate(sluice_served_bytes_total{mode="Pipe"}).

export const pipeFullSeconds = new client.Counter({
  name: 'sluice_pipe_full_seconds_total',
  help: 'Seconds a Pipe channel waited with data ready because the FIFO was full: the training process reads slower than S3 delivers. rate() near 1 means the reader is the bottleneck.',
  labelNames: ['channel'] as const,
  registers: [registry],
});
export const pipeEmptySeconds = new client.Counter({
  name: 'sluice_pipe_empty_seconds_total',
  help: 'Seconds a Pipe channel had nothing to write because it was waiting on S3 (the pipe drains while it waits). rate() near 1 means S3 is the bottleneck.',
  labelNames: ['channel'] as const,
  registers: [registry],
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
export const buildInfo = new client.Gauge({
  name: 'sluice_build_info',
  help: 'Always 1; labels: version (sluice), node (Node.js version), fuse (the fuse-native binding version and the libfuse ABI it links).',
  labelNames: ['version', 'node', 'fuse'] as const,
  registers: [registry],
});
buildInfo.set({
  // package.json sits two levels above both src/metrics/ and dist/metrics/.
  version: (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version,
  node: process.version,
  fuse: `fuse-native ${packageVersion('fuse-native', import.meta.url)}, libfuse.so.2`,
}, 1);
// ---- Disk tier (--cache-dir, src/cache/disk-cache.ts) ------------------------------

export const diskCacheHits = new client.Counter({
  name: 'sluice_disk_cache_hits_total',
  help: 'Block lookups in the disk tier that found the block whole and verified (CRC32C).',
  registers: [registry],
});
export const diskCacheMisses = new client.Counter({
  name: 'sluice_disk_cache_misses_total',
  help: 'Block lookups in the disk tier that found nothing usable (absent, too short, or corrupt); the block is read from S3.',
  registers: [registry],
});
export const diskCacheReadBytes = new client.Counter({
  name: 'sluice_disk_cache_read_bytes_total',
  help: 'Bytes served from the disk tier instead of S3.',
  registers: [registry],
});
export const diskCacheWrittenBytes = new client.Counter({
  name: 'sluice_disk_cache_written_bytes_total',
  help: 'Block bytes written to the disk tier (sidecars not included).',
  registers: [registry],
});
export const diskCacheWriteSkipped = new client.Counter({
  name: 'sluice_disk_cache_write_skipped_total',
  help: 'Blocks not written to the disk tier, by reason (queue_full: writes lag behind reads; no_space: bound or free space reached; lock_busy; closed; error).',
  labelNames: ['reason'] as const,
  registers: [registry],
});
export const diskCacheEvictions = new client.Counter({
  name: 'sluice_disk_cache_evictions_total',
  help: 'Objects (cache files with all their blocks) deleted by this process to keep the disk tier within --cache-dir-size (least recently used first).',
  registers: [registry],
});
export const diskCacheChecksumFailures = new client.Counter({
  name: 'sluice_disk_cache_checksum_failures_total',
  help: 'Blocks read from the disk tier that failed verification (torn, truncated, corrupt, or a damaged sidecar); each was discarded and read from S3 instead. Above 0 points at a failing disk.',
  registers: [registry],
});
export const diskCacheUsedBytes = new client.Gauge({
  name: 'sluice_disk_cache_used_bytes',
  help: 'Bytes the disk tier holds across all processes sharing the folder (cache files plus space granted to writers), as last seen in its ledger.',
  registers: [registry],
});
export const diskCacheCapacityBytes = new client.Gauge({
  name: 'sluice_disk_cache_capacity_bytes',
  help: 'The disk tier bound (--cache-dir-size) of this process.',
  registers: [registry],
});

// ---- fetched but never read (issue 11) -----------------------------------------------

export const prefetchEvictedUnreadBytes = new client.Counter({
  name: 'sluice_prefetch_evicted_unread_bytes_total',
  help: 'Bytes fetched ahead of the reader that the cache evicted (LRU pressure) before anyone read them, by kind: fetched for nothing, and fetched again if read later. Non-zero means read-ahead outruns --cache-size.',
  labelNames: ['kind'] as const,
  registers: [registry],
});

// ---- snapshots, archived objects, partition filters (issue 15) ---------------------

export const snapshotInfo = new client.Gauge({
  name: 'sluice_snapshot_info',
  help: 'Set to 1 for the snapshot a channel (or mount) reads from: its file name (without the folder) and the first 12 hex digits of its checksum. Absent when the channel listed S3.',
  labelNames: ['channel', 'name', 'checksum'] as const,
  registers: [registry],
});
export const snapshotObjects = new client.Gauge({
  name: 'sluice_snapshot_objects',
  help: 'Objects in the snapshot a channel reads from (after --skip-archived).',
  labelNames: ['channel'] as const,
  registers: [registry],
});
export const archivedObjects = new client.Gauge({
  name: 'sluice_archived_objects',
  help: 'Objects of a channel found archived (GLACIER, DEEP_ARCHIVE, Intelligent-Tiering archive tiers) at listing or snapshot time, restored ones excluded.',
  labelNames: ['channel'] as const,
  registers: [registry],
});
export const archivedSkipped = new client.Counter({
  name: 'sluice_archived_skipped_objects_total',
  help: 'Archived objects left out of a channel by --skip-archived.',
  labelNames: ['channel'] as const,
  registers: [registry],
});

// ---- FUSE reads answered from memory in libfuse's thread (issue 14, native/src/fuse_memread.c) ----

export const fuseMemoryReads = new client.Counter({
  name: 'sluice_fuse_memory_reads_total',
  help: 'FUSE reads answered in libfuse\'s worker thread from a small file\'s verified bytes held in memory, without a hop to JavaScript (also counted in sluice_fuse_operations_total{op="read"}, when the handle is released).',
  registers: [registry],
});

export const fuseViewReplies = new client.Counter({
  name: 'sluice_fuse_view_replies_total',
  help: 'FUSE reads answered in JavaScript whose reply the kernel copied straight from the block cache\'s buffer, with no copy into libfuse\'s buffer first (native/src/fuse_lend.c "Views"; also counted in sluice_fuse_operations_total{op="read"}).',
  registers: [registry],
});

export const fuseMemoryOpens = new client.Counter({
  name: 'sluice_fuse_memory_opens_total',
  help: 'FUSE opens of small files answered in libfuse\'s worker thread from the disk tier (read whole and CRC32C-checked there), without a hop to JavaScript; their reads and release are answered there too (all counted in sluice_fuse_operations_total, and the disk reads in sluice_disk_cache_hits_total, once released).',
  registers: [registry],
});

export const fusePassthroughOpens = new client.Counter({
  name: 'sluice_fuse_passthrough_opens_total',
  help: 'FUSE opens of small files of the disk tier answered with FUSE passthrough (Linux 6.9 or later): the kernel reads the verified cache file itself, so the handle\'s reads never reach sluice (its file\'s whole size counts in sluice_served_bytes_total at its release, and the file in sluice_channel_objects_total).',
  registers: [registry],
});

export const fusePassthroughChecksAhead = new client.Counter({
  name: 'sluice_fuse_passthrough_checks_ahead_total',
  help: 'Checks of large disk-tier files (8 MiB or more) started ahead of their open, while the file before them in the listing was read; sluice_fuse_passthrough_checked_ahead_total counts those an open used. A reader out of listing order stops them after one unused.',
  registers: [registry],
});

export const fusePassthroughCheckedAhead = new client.Counter({
  name: 'sluice_fuse_passthrough_checked_ahead_total',
  help: 'Passthrough opens of large disk-tier files (8 MiB or more) that used a check made ahead, while the file before it in the listing was being read (the file unchanged since), instead of checking the file at its own open.',
  registers: [registry],
});

export const fuseMemoryGetattrs = new client.Counter({
  name: 'sluice_fuse_memory_getattrs_total',
  help: 'FUSE getattrs (lookups) of listed paths answered in libfuse\'s worker thread from a copy of the listing, without a hop to JavaScript (also counted in sluice_fuse_operations_total{op="getattr"}, within a second).',
  registers: [registry],
});
