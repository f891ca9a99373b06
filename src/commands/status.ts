/**
 * `sluice status`: a one-screen summary of a running sluice, for a person at a terminal.
 *
 * It fetches the daemon's /metrics twice, --interval seconds apart (once with
 * --interval 0), parses the text exposition (metrics/exposition.ts) and prints, per
 * channel, throughput, files/s, starving % and hit ratio over that interval (totals since
 * start with a single sample), then the cache, S3, prefetch and process at a glance. The
 * figures are computed by metrics/figures.ts, the same code as the periodic log summary.
 *
 * The default URL follows --metrics-host/--metrics-port (and their environment
 * variables), so it finds a daemon started with the same settings. With neither --url nor a
 * port given, it also asks the ports a sluice moves to when the default one is taken, and
 * shows every sluice that answers (several mounts on one node).
 */
import { InvalidArgumentError, MetricsUnavailableError } from '../errors.js';
import { helpFor, OPTIONS, parseOptions } from '../config/options.js';
import { METRICS_PORT_FALLBACKS } from '../metrics/server.js';
import { type Exposition, parseExposition } from '../metrics/exposition.js';
import {
  cacheFigures, type ChannelRates, channelRates, channelTotals, fmt, processFigures, s3Figures, tierFigures,
} from '../metrics/figures.js';

export const summary = "Summarise a running sluice's /metrics for a person at a terminal.";

/** A local daemon answers /metrics in milliseconds; 5 s means it is stuck or not sluice. */
const FETCH_TIMEOUT_MS = 5_000;
/** One second between samples: long enough for stable rates, short enough to wait for. */
const DEFAULT_INTERVAL_S = 1;
/** Longest --interval: a status command is interactive. */
const MAX_INTERVAL_S = 600;

const OPTION_NAMES = ['metricsHost', 'metricsPort'] as const;

function usage(): string {
  return [
    'Usage: sluice status [--url http://127.0.0.1:9400/metrics] [--interval SECONDS]',
    '',
    "Fetch a running sluice's /metrics and print per channel: throughput, files/s, starving %",
    'and hit ratio, then the cache, S3 requests/errors/retries, in-flight bytes and the process.',
    '',
    'Options:',
    '  --url URL',
    '      The metrics endpoint. Default: http://<metrics-host>:<metrics-port>/metrics, and with no',
    `      port given the ${METRICS_PORT_FALLBACKS} after it too (where a second sluice on the node listens): each that answers is shown.`,
    '  --interval SECONDS',
    `      Sample twice this far apart and show rates over it (default ${DEFAULT_INTERVAL_S}); 0 samples once and shows totals since start.`,
    helpFor(OPTION_NAMES),
  ].join('\n');
}

/** The URL to fetch: --url as given (a bare host:port gets /metrics), else from the options. */
export function metricsUrl(url: string | undefined, host: string, port: number): string {
  if (url === undefined) {
    const h = host === '0.0.0.0' || host === '' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
    return `http://${h}:${port}/metrics`;
  }
  let u: URL;
  try {
    u = new URL(/^[a-z]+:\/\//i.test(url) ? url : `http://${url}`);
  } catch {
    throw new InvalidArgumentError(`--url ${JSON.stringify(url)} is not a URL`, { hint: 'Use e.g. --url http://127.0.0.1:9400/metrics' });
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') {
    throw new InvalidArgumentError(`--url ${JSON.stringify(url)} is not an http URL`, { hint: 'Use e.g. --url http://127.0.0.1:9400/metrics' });
  }
  if (u.pathname === '/' || u.pathname === '') u.pathname = '/metrics';
  return u.href;
}

function describeFetchError(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  const code = cause?.code ?? (err as { code?: string }).code;
  if ((err as Error).name === 'TimeoutError') return `no answer within ${FETCH_TIMEOUT_MS / 1000} s`;
  if (code === 'ECONNREFUSED') return 'nothing listens there (connection refused)';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'the host name does not resolve';
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH') return 'the host is unreachable';
  return cause?.message ?? (err instanceof Error ? err.message : String(err));
}

/** Fetch and parse one sample. */
export async function scrape(url: string): Promise<Exposition> {
  let text: string;
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
    text = await res.text();
    if (res.status !== 200) throw new MetricsUnavailableError(url, `HTTP ${res.status}`);
  } catch (err) {
    if (err instanceof MetricsUnavailableError) throw err;
    throw new MetricsUnavailableError(url, describeFetchError(err), { cause: err });
  }
  let e: Exposition;
  try {
    e = parseExposition(text);
  } catch {
    throw new MetricsUnavailableError(url, 'the reply is not Prometheus metrics');
  }
  if (!e.samples.some((s) => s.name.startsWith('sluice_'))) throw new MetricsUnavailableError(url, 'the reply has no sluice_ metrics');
  return e;
}

function table(rows: string[][]): string[] {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ').trimEnd());
}

const count = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : 'n/a');
const perSec = (d: number, s: number | undefined) => (s ? ` (${fmt.num(d / s)}/s)` : '');

/** The screen, from a sample and (for rates) an earlier one taken `seconds` before. */
export function render(url: string, cur: Exposition, prev?: Exposition, seconds?: number, nowMs = Date.now()): string {
  const windowed = prev !== undefined && seconds !== undefined && seconds > 0;
  const proc = processFigures(cur, nowMs);
  const uptime = proc.uptimeSeconds;
  const span = windowed ? seconds : uptime;
  const lines: string[] = [];
  lines.push(`sluice at ${url}: up ${fmt.seconds(uptime)}, RSS ${fmt.bytes(proc.rssBytes)}, event-loop lag p99 ${fmt.seconds(proc.eventLoopLagP99Seconds)}`);
  lines.push(windowed ? `rates over the last ${fmt.num(seconds)} s` : 'rates averaged since start (use --interval 1 for current rates)');
  lines.push('');

  const rates: ChannelRates[] = span ? channelRates(windowed ? channelTotals(prev) : undefined, channelTotals(cur), span) : [];
  if (rates.length === 0) {
    lines.push('no channel has served data yet');
  } else {
    lines.push(...table([
      ['channel', 'mode', 'MB/s', 'files/s', 'starving', 'hit ratio', 'served', 'files', 'first byte', 'first file'],
      ...rates.map((r) => [
        r.channel, r.mode, fmt.num(r.mbPerSec), fmt.num(r.filesPerSec), fmt.pct(r.starvingPct), fmt.ratio(r.hitRatio),
        fmt.bytes(r.totals.servedBytes), count(r.totals.files), fmt.seconds(r.totals.firstByteSeconds), fmt.seconds(r.totals.firstBatchSeconds),
      ]),
    ]));
  }
  const pipes = rates.filter((r) => r.mode === 'Pipe');
  if (pipes.length > 0) {
    lines.push('');
    lines.push(...table([
      ['pipe', 'epoch', 'FIFO full (reader slow)', 'FIFO empty (S3 slow)'],
      ...pipes.map((r) => [r.channel, String(r.totals.epoch), fmt.pct(r.pipeFullPct), fmt.pct(r.pipeEmptyPct)]),
    ]));
  }
  lines.push('');

  const c = cacheFigures(cur);
  const used = c.capacity > 0 ? ` (${fmt.pct((100 * c.bytes) / c.capacity)})` : '';
  lines.push(`cache     ${fmt.bytes(c.bytes)} of ${fmt.bytes(c.capacity)}${used}, hit ratio ${fmt.ratio(c.hitRatio)} of ${count(c.hits + c.misses)} lookups, ${count(c.evictions)} evictions`);
  const wasted = c.prefetchUsed + c.prefetchWasted > 0 ? ` (${fmt.pct((100 * c.prefetchWasted) / (c.prefetchUsed + c.prefetchWasted))})` : '';
  lines.push(`prefetch  ${fmt.bytes(c.prefetchUsed)} used, ${fmt.bytes(c.prefetchWasted)} wasted${wasted}`);
  // The tiers under the memory cache, each shown once it has been used (issue 48).
  const tf = tierFigures(cur);
  const ratio = (h: number, m: number) => fmt.ratio(h + m > 0 ? h / (h + m) : NaN);
  if (tf.disk.hits + tf.disk.misses + tf.disk.writtenBytes > 0) {
    lines.push(`disk tier hit ratio ${ratio(tf.disk.hits, tf.disk.misses)} of ${count(tf.disk.hits + tf.disk.misses)} lookups, read ${fmt.bytes(tf.disk.readBytes)}, wrote ${fmt.bytes(tf.disk.writtenBytes)}, ${count(tf.disk.skipped)} writes skipped`);
  }
  const b = tf.bucket;
  if (b.hits + b.misses + b.writtenBytes + b.dropped > 0) {
    const why = Object.entries(b.missesByReason).filter(([, n]) => n > 0).map(([r, n]) => `${r} ${count(n)}`).join(', ');
    lines.push(`cache bucket hit ratio ${ratio(b.hits, b.misses)} of ${count(b.hits + b.misses)} lookups${why ? ` (misses: ${why})` : ''}, read ${fmt.bytes(b.readBytes)}`);
    lines.push(`          wrote ${fmt.bytes(b.writtenBytes)}, ${fmt.bytes(b.pendingBytes)} pending, ${count(b.dropped)} dropped, ${count(b.failed)} failed`);
  }

  const s = s3Figures(cur);
  const p = windowed ? s3Figures(prev) : undefined;
  const d = (k: 'requests' | 'errors' | 'throttled' | 'retries' | 'receivedBytes') => (p ? Math.max(0, s[k] - p[k]) : s[k]);
  const reasons = Object.entries(s.retriesByReason).filter(([, n]) => n > 0).map(([r, n]) => `${r} ${count(n)}`).join(', ');
  lines.push(`S3        ${count(s.requests)} requests${perSec(d('requests'), span)}, ${count(s.errors)} errors${perSec(d('errors'), span)}, `
    + `${count(s.throttled)} throttled by 503 SlowDown${perSec(d('throttled'), span)}`);
  lines.push(`          ${count(s.retries)} retries${reasons ? ` (${reasons})` : ''}, received ${fmt.bytes(s.receivedBytes)} (${fmt.num(d('receivedBytes') / 1e6 / (span || NaN))} MB/s)`);
  lines.push(`          in flight ${count(s.inflightRequests)} requests / ${fmt.bytes(s.inflightBytes)}, concurrency limit ${s.concurrencyLimit === undefined ? '-' : count(s.concurrencyLimit)}, `
    + `first byte p50 ${fmt.seconds(s.firstByteP50)} p99 ${fmt.seconds(s.firstByteP99)}`);
  return lines.join('\n');
}

export async function run(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(usage() + '\n');
    return 0;
  }
  const { options, positionals, extra, given } = parseOptions('status', argv, OPTION_NAMES, { url: { type: 'string' }, interval: { type: 'string' } });
  if (positionals.length > 0) {
    throw new InvalidArgumentError(`sluice status takes no arguments, got ${JSON.stringify(positionals[0])}`, { hint: 'Pass the endpoint as --url http://HOST:PORT/metrics' });
  }
  const intervalText = (extra.interval as string | undefined) ?? String(DEFAULT_INTERVAL_S);
  const interval = Number(intervalText);
  if (!/^\d+(\.\d+)?$/.test(intervalText.trim()) || interval > MAX_INTERVAL_S) {
    throw new InvalidArgumentError(`--interval ${JSON.stringify(intervalText)} is not a number of seconds between 0 and ${MAX_INTERVAL_S}`, { hint: 'Use e.g. --interval 1, or 0 for a single sample' });
  }
  const port = options.metricsPort < 1 ? OPTIONS.metricsPort.default : options.metricsPort;
  // Without --url or a port of its own, every sluice on the node: the default port and those a
  // later sluice moves to when it is taken (src/metrics/server.ts, METRICS_PORT_FALLBACKS).
  const urls = extra.url === undefined && !given.has('metricsPort')
    ? Array.from({ length: METRICS_PORT_FALLBACKS + 1 }, (_, i) => metricsUrl(undefined, options.metricsHost, port + i))
    : [metricsUrl(extra.url as string | undefined, options.metricsHost, port)];
  const firsts = await Promise.allSettled(urls.map((u) => scrape(u)));
  const found = urls.flatMap((u, i) => (firsts[i]!.status === 'fulfilled' ? [{ url: u, first: (firsts[i] as PromiseFulfilledResult<Exposition>).value }] : []));
  if (found.length === 0) throw (firsts[0] as PromiseRejectedResult).reason;
  if (interval === 0) {
    process.stdout.write(found.map((f) => render(f.url, f.first)).join('\n\n') + '\n');
    return 0;
  }
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, interval * 1000));
  const seconds = (performance.now() - t0) / 1000;
  const seconds2 = await Promise.allSettled(found.map((f) => scrape(f.url)));
  const screens = found.flatMap((f, i) => (seconds2[i]!.status === 'fulfilled' ? [render(f.url, (seconds2[i] as PromiseFulfilledResult<Exposition>).value, f.first, seconds)] : []));
  if (screens.length === 0) throw (seconds2[0] as PromiseRejectedResult).reason;
  process.stdout.write(screens.join('\n\n') + '\n');
  return 0;
}
