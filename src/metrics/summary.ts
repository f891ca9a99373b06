/**
 * The periodic throughput summary: once a minute, and once more at exit, one
 * human-readable log line per channel (MB/s, files/s, hit ratio, starving %).
 *
 * Each tick renders this process's registry to text, reads it back with the same
 * parser `sluice status` uses (exposition.ts, figures.ts), and reports the deltas since
 * the previous tick. The final line, written by stop(), covers the whole run instead:
 * that is the figure a person compares between runs. The timer is unref'd, so it never
 * keeps the process alive; a tick that finds no channel writes nothing.
 *
 * File mode channels are left out of these lines: their bytes all arrive in the download,
 * before the training command (and this summary) starts, so every window would say 0 MB/s.
 * summarizeDownload() reports each download instead, with the download as its window.
 */
import { log } from '../log.js';
import { parseExposition } from './exposition.js';
import { type ChannelRates, type ChannelTotals, channelRates, channelTotals, formatChannelLine } from './figures.js';
import { metricsBuilt, registry, snapshotInfo } from './metrics.js';

/** Prometheus scrapes every 15-60 s; a line a minute is a readable log, not a metric stream. */
export const SUMMARY_INTERVAL_MS = 60_000;

export interface SummaryOptions {
  /** Milliseconds between lines. Default SUMMARY_INTERVAL_MS. */
  intervalMs?: number;
  /** Where each line goes. Default: `log.info({ summary: figures }, line)`. */
  sink?: (line: string, rates: ChannelRates) => void;
}

export interface Summary {
  /** Write the lines for the window since the previous tick now (also what the timer does). */
  tick(): Promise<string[]>;
  /** Stop the timer and write the whole-run lines. Never rejects (a failure is logged); later calls return []. */
  stop(): Promise<string[]>;
}

function defaultSink(line: string, r: ChannelRates): void {
  log.info({
    summary: {
      channel: r.channel, mode: r.mode, seconds: Number(r.seconds.toFixed(3)), mbPerSec: r.mbPerSec, filesPerSec: r.filesPerSec,
      hitRatio: Number.isFinite(r.hitRatio) ? r.hitRatio : null, starvingPct: r.starvingPct,
    },
  }, line);
}

async function totalsNow(): Promise<ChannelTotals[]> {
  return channelTotals(parseExposition(await registry.metrics()));
}

/** Start the summary; call stop() before exit (mount and run do, on unmount or child exit). */
export function startSummary(opts: SummaryOptions = {}): Summary {
  const intervalMs = opts.intervalMs ?? SUMMARY_INTERVAL_MS;
  if (!(intervalMs > 0)) throw new RangeError(`summary interval must be > 0 ms, got ${intervalMs}`);
  const sink = opts.sink ?? defaultSink;
  const startedAt = performance.now();
  // The first window starts from the totals at start (usually zero, but not in tests). Before
  // the registry is built (prom-client loads after the mount answers, ./metrics.ts), rendering
  // it would load it now, on the start-up path, and settle only after the counts that follow
  // this call: the first window then starts from zero, which is what a process that has read
  // nothing yet holds.
  const baseline = metricsBuilt() ? totalsNow() : Promise.resolve<ChannelTotals[]>([]);
  baseline.catch(() => undefined); // awaited by the first tick or stop(), which report a failure
  let prev: { at: number; totals: Promise<ChannelTotals[]> } = { at: startedAt, totals: baseline };
  let stopped = false; // set when the final lines are written; later ticks write nothing
  let stopCalled = false;
  // Ticks run one at a time, so windows never overlap.
  let chain: Promise<unknown> = Promise.resolve();

  // Issue 15: a channel read from a snapshot says which (sluice_snapshot_info), so two runs'
  // lines can be compared knowing they read the same data.
  let snapshots = new Map<string, string>();
  const refreshSnapshots = async () => {
    const m = await snapshotInfo.get();
    snapshots = new Map(m.values.filter((v) => v.value === 1).map((v) => [String(v.labels.channel), `snapshot ${String(v.labels.name)} ${String(v.labels.checksum)}`]));
  };
  const emit = (all: ChannelRates[], window: string): string[] => {
    const rates = all.filter((r) => r.mode !== 'File');
    const lines = rates.map((r) => {
      const line = formatChannelLine(r, window);
      const snap = snapshots.get(r.channel);
      return snap === undefined ? line : `${line} (${snap})`;
    });
    lines.forEach((line, i) => sink(line, rates[i]!));
    return lines;
  };

  const tick = (): Promise<string[]> => {
    const run = chain.then(async () => {
      if (stopped) return [];
      const at = performance.now();
      const totals = await totalsNow();
      const seconds = (at - prev.at) / 1000;
      const rates = channelRates(await prev.totals, totals, seconds);
      prev = { at, totals: Promise.resolve(totals) };
      await refreshSnapshots();
      return emit(rates, `over the last ${Math.round(seconds)} s`);
    });
    chain = run.catch(() => undefined);
    return run;
  };

  const timer = setInterval(() => {
    tick().catch((err: unknown) => log.warn({ err }, 'throughput summary failed'));
  }, intervalMs);
  timer.unref();

  return {
    tick,
    stop(): Promise<string[]> {
      if (stopCalled) return Promise.resolve([]);
      stopCalled = true;
      clearInterval(timer);
      const run = chain.then(async () => {
        stopped = true;
        const totals = await totalsNow();
        const seconds = (performance.now() - startedAt) / 1000;
        await refreshSnapshots();
        return emit(channelRates(await baseline, totals, seconds), `over the whole run (${Math.round(seconds)} s)`);
      }).catch((err: unknown) => {
        log.warn({ err }, 'throughput summary failed');
        return [] as string[];
      });
      chain = run.catch(() => undefined);
      return run;
    },
  };
}

/**
 * Runs `download` (File mode's) and writes the summary line of `channel` for it: bytes and
 * files it delivered over its own duration. Resolves with the download's result.
 */
export async function summarizeDownload<T>(channel: string, download: () => Promise<T>, sink: SummaryOptions['sink'] = defaultSink): Promise<T> {
  const before = await totalsNow();
  const t0 = performance.now();
  const result = await download();
  const seconds = (performance.now() - t0) / 1000;
  for (const r of channelRates(before, await totalsNow(), seconds)) {
    if (r.channel === channel && r.mode === 'File') sink!(formatChannelLine(r, `for the download (${seconds.toFixed(1)} s)`), r);
  }
  return result;
}
