/**
 * The periodic throughput summary: once a minute, and once more at exit, one
 * human-readable log line per channel (MB/s, files/s, hit ratio, starving %).
 *
 * Each tick renders this process's registry to text, reads it back with the same
 * parser `sluice status` uses (exposition.ts, figures.ts), and reports the deltas since
 * the previous tick. The final line, written by stop(), covers the whole run instead:
 * that is the figure a person compares between runs. The timer is unref'd, so it never
 * keeps the process alive; a tick that finds no channel writes nothing.
 */
import { log } from '../log.js';
import { parseExposition } from './exposition.js';
import { type ChannelRates, type ChannelTotals, channelRates, channelTotals, formatChannelLine } from './figures.js';
import { registry, snapshotInfo } from './metrics.js';

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
  // The first window starts from the totals at start (usually zero, but not in tests).
  const baseline = totalsNow();
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
  const emit = (rates: ChannelRates[], window: string): string[] => {
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
