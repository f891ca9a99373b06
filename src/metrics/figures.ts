/**
 * The figures an operator reads, computed from an exposition (see exposition.ts):
 * per channel, totals since start and rates between two samples; for the process,
 * the cache, S3 and prefetch at a glance.
 *
 * Per channel (keyed by channel and mode):
 *  - throughput: delta of sluice_served_bytes_total / seconds, in MB/s (10^6 bytes);
 *  - files/s: delta of sluice_channel_objects_total / seconds;
 *  - hit ratio: reads answered without waiting on S3 (the le="0" bucket of
 *    sluice_read_wait_seconds) over all reads; n/a without reads;
 *  - starving %: delta of sluice_starved_seconds_total / seconds: the share of the
 *    window during which at least one read waited on S3 (src/metrics/wait-clock.ts), so
 *    at most 100%, except that a read is counted when it ends, whole: one that began
 *    before a short window can push that window above 100%. A Pipe
 *    channel's reader starves while the FIFO sits empty waiting on S3, so for Pipe the
 *    seconds of sluice_pipe_empty_seconds_total count as waiting too;
 *  - Pipe only: FIFO full % and empty % (which side is slow), and the current epoch.
 * Counters that went down (the daemon restarted between samples) count from zero.
 */
import { type Exposition, has, labelValues, quantileOf, sumOf } from './exposition.js';

export interface ChannelTotals {
  channel: string;
  mode: string;
  servedBytes: number;
  files: number;
  waitSeconds: number;
  reads: number;
  readsWithoutWait: number;
  /** Pipe only (0 otherwise): seconds the FIFO sat full (reader slow) and empty (S3 slow), and the epoch. */
  pipeFullSeconds: number;
  pipeEmptySeconds: number;
  epoch: number;
  /** Seconds from start to the first byte / first whole file; undefined until then. */
  firstByteSeconds: number | undefined;
  firstBatchSeconds: number | undefined;
}

export interface ChannelRates {
  channel: string;
  mode: string;
  /** Length of the window the rates cover. */
  seconds: number;
  mbPerSec: number;
  filesPerSec: number;
  /** 0..1, NaN when no read happened in the window. */
  hitRatio: number;
  /** Percent of the window that readers spent waiting on S3 (reader-seconds per second x 100). */
  starvingPct: number;
  /** Pipe only: percent of the window the FIFO was full / empty. */
  pipeFullPct: number;
  pipeEmptyPct: number;
  totals: ChannelTotals;
}

/** Metrics that carry channel and mode labels, from which the channel list is built. */
const CHANNEL_METRICS = ['sluice_served_bytes_total', 'sluice_channel_objects_total', 'sluice_starved_seconds_total', 'sluice_read_wait_seconds_count'];

export function channelTotals(e: Exposition): ChannelTotals[] {
  const keys = new Map<string, { channel: string; mode: string }>();
  for (const s of e.samples) {
    if (!CHANNEL_METRICS.includes(s.name) || s.labels.channel === undefined) continue;
    const mode = s.labels.mode ?? '';
    keys.set(`${s.labels.channel}\0${mode}`, { channel: s.labels.channel, mode });
  }
  const out: ChannelTotals[] = [];
  for (const { channel, mode } of keys.values()) {
    const m = { channel, mode };
    const pipe = mode === 'Pipe';
    const pipeEmptySeconds = pipe ? sumOf(e, 'sluice_pipe_empty_seconds_total', { channel }) : 0;
    out.push({
      channel,
      mode,
      servedBytes: sumOf(e, 'sluice_served_bytes_total', m),
      files: sumOf(e, 'sluice_channel_objects_total', m),
      waitSeconds: sumOf(e, 'sluice_starved_seconds_total', m) + pipeEmptySeconds,
      pipeFullSeconds: pipe ? sumOf(e, 'sluice_pipe_full_seconds_total', { channel }) : 0,
      pipeEmptySeconds,
      epoch: sumOf(e, 'sluice_channel_epoch', m),
      reads: sumOf(e, 'sluice_read_wait_seconds_count', m),
      readsWithoutWait: sumOf(e, 'sluice_read_wait_seconds_bucket', { ...m, le: (v) => Number(v) === 0 }),
      firstByteSeconds: has(e, 'sluice_time_to_first_byte_seconds', m) ? sumOf(e, 'sluice_time_to_first_byte_seconds', m) : undefined,
      firstBatchSeconds: has(e, 'sluice_time_to_first_batch_seconds', m) ? sumOf(e, 'sluice_time_to_first_batch_seconds', m) : undefined,
    });
  }
  return out.sort((a, b) => a.channel.localeCompare(b.channel) || a.mode.localeCompare(b.mode));
}

/** cur - prev for a counter; a decrease means a restart, so the new value is the delta. */
function delta(cur: number, prev: number | undefined): number {
  if (prev === undefined || cur < prev) return cur;
  return cur - prev;
}

/** Rates per channel over `seconds`; with no `prev`, over the totals since start. */
export function channelRates(prev: ChannelTotals[] | undefined, cur: ChannelTotals[], seconds: number): ChannelRates[] {
  const before = new Map((prev ?? []).map((p) => [`${p.channel}\0${p.mode}`, p]));
  return cur.map((c) => {
    const p = prev ? before.get(`${c.channel}\0${c.mode}`) ?? zeroTotals(c) : zeroTotals(c);
    const s = seconds > 0 ? seconds : NaN;
    const reads = delta(c.reads, p.reads);
    return {
      channel: c.channel,
      mode: c.mode,
      seconds,
      mbPerSec: delta(c.servedBytes, p.servedBytes) / 1e6 / s,
      filesPerSec: delta(c.files, p.files) / s,
      hitRatio: reads > 0 ? delta(c.readsWithoutWait, p.readsWithoutWait) / reads : NaN,
      starvingPct: (100 * delta(c.waitSeconds, p.waitSeconds)) / s,
      pipeFullPct: (100 * delta(c.pipeFullSeconds, p.pipeFullSeconds)) / s,
      pipeEmptyPct: (100 * delta(c.pipeEmptySeconds, p.pipeEmptySeconds)) / s,
      totals: c,
    };
  });
}

function zeroTotals(c: ChannelTotals): ChannelTotals {
  return { ...c, servedBytes: 0, files: 0, waitSeconds: 0, reads: 0, readsWithoutWait: 0, pipeFullSeconds: 0, pipeEmptySeconds: 0 };
}

export const fmt = {
  pct(x: number): string { return Number.isFinite(x) ? `${x.toFixed(1)}%` : 'n/a'; },
  ratio(x: number): string { return Number.isFinite(x) ? `${(100 * x).toFixed(1)}%` : 'n/a'; },
  num(x: number, digits = 1): string { return Number.isFinite(x) ? x.toFixed(digits) : 'n/a'; },
  /** Binary units, as --cache-size takes them. */
  bytes(n: number): string {
    if (!Number.isFinite(n)) return 'n/a';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let v = n;
    let i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return i === 0 ? `${v} B` : `${v.toFixed(1)} ${units[i]}`;
  },
  seconds(s: number | undefined): string {
    if (s === undefined || !Number.isFinite(s)) return '-';
    if (s < 1) return `${(s * 1000).toFixed(0)} ms`;
    if (s < 60) return `${s.toFixed(1)} s`;
    const h = Math.floor(s / 3600);
    const m = Math.floor((s % 3600) / 60);
    return h > 0 ? `${h}h${String(m).padStart(2, '0')}m` : `${m}m${String(Math.floor(s % 60)).padStart(2, '0')}s`;
  },
};

/** One line per channel for the log: `channel train (fastfile): 412.3 MB/s, 96.0 files/s, ...`. */
export function formatChannelLine(r: ChannelRates, window: string): string {
  return `channel ${r.channel} (${r.mode || 'unknown mode'}): ${fmt.num(r.mbPerSec)} MB/s, ${fmt.num(r.filesPerSec)} files/s, `
    + `hit ratio ${fmt.ratio(r.hitRatio)}, starving ${fmt.pct(r.starvingPct)} ${window}`
    + ` (total ${fmt.bytes(r.totals.servedBytes)}, ${r.totals.files} files)`;
}

export interface S3Figures {
  requests: number;
  /** Replies with status >= 400 and requests that got no reply ("error"). */
  errors: number;
  /** Replies with status 503 (SlowDown). */
  throttled: number;
  retries: number;
  retriesByReason: Record<string, number>;
  concurrencyLimit: number | undefined;
  inflightRequests: number;
  inflightBytes: number;
  receivedBytes: number;
  firstByteP50: number;
  firstByteP99: number;
}

const isError = (status: string) => status === 'error' || Number(status) >= 400;

export function s3Figures(e: Exposition): S3Figures {
  const retriesByReason: Record<string, number> = {};
  for (const reason of labelValues(e, 'sluice_s3_retries_total', 'reason')) {
    retriesByReason[reason] = sumOf(e, 'sluice_s3_retries_total', { reason });
  }
  return {
    requests: sumOf(e, 'sluice_s3_requests_total'),
    errors: sumOf(e, 'sluice_s3_requests_total', { status: isError }),
    throttled: sumOf(e, 'sluice_s3_requests_total', { status: '503' }),
    retries: sumOf(e, 'sluice_s3_retries_total'),
    retriesByReason,
    concurrencyLimit: has(e, 'sluice_s3_concurrency_limit') ? sumOf(e, 'sluice_s3_concurrency_limit') : undefined,
    inflightRequests: sumOf(e, 'sluice_s3_inflight_requests'),
    inflightBytes: sumOf(e, 'sluice_inflight_bytes'),
    receivedBytes: sumOf(e, 'sluice_s3_received_bytes_total'),
    firstByteP50: quantileOf(e, 'sluice_s3_first_byte_seconds', 0.5),
    firstByteP99: quantileOf(e, 'sluice_s3_first_byte_seconds', 0.99),
  };
}

export interface CacheFigures {
  bytes: number;
  capacity: number;
  hits: number;
  misses: number;
  evictions: number;
  /** Hits over lookups, NaN without lookups. */
  hitRatio: number;
  prefetchUsed: number;
  prefetchWasted: number;
}

export function cacheFigures(e: Exposition): CacheFigures {
  const hits = sumOf(e, 'sluice_cache_hits_total');
  const misses = sumOf(e, 'sluice_cache_misses_total');
  return {
    bytes: sumOf(e, 'sluice_cache_bytes'),
    capacity: sumOf(e, 'sluice_cache_capacity_bytes'),
    hits,
    misses,
    evictions: sumOf(e, 'sluice_cache_evictions_total'),
    hitRatio: hits + misses > 0 ? hits / (hits + misses) : NaN,
    prefetchUsed: sumOf(e, 'sluice_prefetch_bytes_total', { outcome: 'used' }),
    prefetchWasted: sumOf(e, 'sluice_prefetch_bytes_total', { outcome: 'wasted' }),
  };
}

/** The disk tier's and the cache bucket's lookups and writes (issue 48: `sluice status` per tier). */
export interface TierFigures {
  disk: { hits: number; misses: number; readBytes: number; writtenBytes: number; skipped: number };
  bucket: { hits: number; misses: number; missesByReason: Record<string, number>; readBytes: number; writtenBytes: number; dropped: number; failed: number; pendingBytes: number };
}

export function tierFigures(e: Exposition): TierFigures {
  const missesByReason: Record<string, number> = {};
  for (const reason of labelValues(e, 'sluice_cache_bucket_misses_total', 'reason')) missesByReason[reason] = sumOf(e, 'sluice_cache_bucket_misses_total', { reason });
  return {
    disk: {
      hits: sumOf(e, 'sluice_disk_cache_hits_total'),
      misses: sumOf(e, 'sluice_disk_cache_misses_total'),
      readBytes: sumOf(e, 'sluice_disk_cache_read_bytes_total'),
      writtenBytes: sumOf(e, 'sluice_disk_cache_written_bytes_total'),
      skipped: sumOf(e, 'sluice_disk_cache_write_skipped_total'),
    },
    bucket: {
      hits: sumOf(e, 'sluice_cache_bucket_hits_total'),
      misses: sumOf(e, 'sluice_cache_bucket_misses_total'),
      missesByReason,
      readBytes: sumOf(e, 'sluice_cache_bucket_read_bytes_total'),
      writtenBytes: sumOf(e, 'sluice_cache_bucket_written_bytes_total'),
      dropped: sumOf(e, 'sluice_cache_bucket_writes_total', { result: 'dropped' }),
      failed: sumOf(e, 'sluice_cache_bucket_writes_total', { result: 'failed' }),
      pendingBytes: sumOf(e, 'sluice_cache_bucket_pending_bytes'),
    },
  };
}

export interface ProcessFigures {
  /** Seconds since the daemon started, from process_start_time_seconds; undefined when absent. */
  uptimeSeconds: number | undefined;
  rssBytes: number;
  eventLoopLagP99Seconds: number;
}

export function processFigures(e: Exposition, nowMs = Date.now()): ProcessFigures {
  const start = 'process_start_time_seconds';
  return {
    uptimeSeconds: has(e, start) ? nowMs / 1000 - sumOf(e, start) : undefined,
    rssBytes: sumOf(e, 'process_resident_memory_bytes'),
    eventLoopLagP99Seconds: has(e, 'nodejs_eventloop_lag_p99_seconds') ? sumOf(e, 'nodejs_eventloop_lag_p99_seconds') : NaN,
  };
}
