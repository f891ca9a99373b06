/**
 * fio job files as data (issue 44: Mountpoint for S3's read jobs, bench/fio/).
 *
 *  1. parseFioJob: the INI text into [global] and its one job section; the job's effective
 *     options are the section's over the global's (fio's own precedence).
 *  2. fioOverrides: what this bench changes for a run: `size` becomes the object's size when
 *     the job's is larger (a read-only mount cannot grow the file), `runtime` the scenario's
 *     for time-based jobs. applyFioOverrides rewrites those `key=value` lines in a copy of
 *     the text: fio lets a section's own options win over the command line, so `--size`
 *     on the command line would not override `size=100G`.
 *  3. parseFioOutput: fio's `--output-format=json` into the figures: read bandwidth summed
 *     over the job's threads, mean completion latency weighted by each thread's I/Os.
 * Problems are ConfigErrors: a job file, like a scenario file, is the bench's input.
 */
import { ConfigError } from '../errors.js';

export interface FioJob {
  /** The job section's name ([sequential_read]). */
  section: string;
  /** Effective options: the job section's over [global]'s, keys lower-case, values as written. */
  options: Record<string, string>;
  /** `size`, in bytes (fio's base-2 suffixes). */
  sizeBytes: number;
  timeBased: boolean;
  /** True for read_latency jobs: their figure is latency (ms), not bandwidth. */
  latency: boolean;
}


/** fio's size syntax: a number with an optional k/m/g/t/p suffix (base 2, fio's default kb_base) and an optional b/ib. */
export function parseFioSize(v: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b)?\s*$/i.exec(v);
  if (!m) throw new ConfigError(`"${v}" is not a fio size`);
  const pow = ['', 'k', 'm', 'g', 't', 'p'].indexOf(m[2]!.toLowerCase());
  return Math.round(Number(m[1]) * 1024 ** pow);
}

/** Sections of an INI job file, in order: name -> options (comments and blank lines dropped). */
function sections(text: string): [string, Record<string, string>][] {
  const out: [string, Record<string, string>][] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const head = /^\[(.+)\]$/.exec(line);
    if (head) { out.push([head[1]!.trim(), {}]); continue; }
    if (out.length === 0) throw new ConfigError(`option "${line}" before any [section]`);
    const eq = line.indexOf('=');
    const key = (eq < 0 ? line : line.slice(0, eq)).trim().toLowerCase();
    out[out.length - 1]![1][key] = eq < 0 ? '' : line.slice(eq + 1).trim();
  }
  return out;
}

export function parseFioJob(text: string): FioJob {
  const secs = sections(text);
  const global = secs.find(([n]) => n === 'global')?.[1] ?? {};
  const jobs = secs.filter(([n]) => n !== 'global');
  if (jobs.length !== 1) throw new ConfigError(`${jobs.length} job sections; the bench runs files of exactly one job`);
  const [section, own] = jobs[0]!;
  const options = { ...global, ...own };
  const rw = options.rw ?? options.readwrite ?? 'read';
  if (!/^(rand)?read(:|$)/.test(rw)) throw new ConfigError(`rw=${rw} is not a read job; the bench mounts read-only`);
  if (options.size === undefined) throw new ConfigError('no size= option');
  return { section, options, sizeBytes: parseFioSize(options.size), timeBased: 'time_based' in options, latency: 'io_limit' in options || !('time_based' in options) };
}

/** The options a run changes: the file's size for a larger job size, the scenario's runtime for time-based jobs. */
export function fioOverrides(job: FioJob, fileSize: number, runtimeSeconds: number): Record<string, string> {
  const o: Record<string, string> = {};
  if (job.sizeBytes > fileSize) o.size = String(fileSize);
  if (job.timeBased) o.runtime = `${runtimeSeconds}s`;
  return o;
}

/**
 * The job text with each `key=value` line whose key is overridden given the new value
 * (wherever it is set: [global] or the job's section); a key set nowhere is added to the
 * job's section. Everything else is kept byte for byte.
 */
export function applyFioOverrides(text: string, overrides: Record<string, string>): string {
  const seen = new Set<string>();
  const lines = text.split('\n').map((raw) => {
    const m = /^(\s*)([A-Za-z_]+)(\s*)=/.exec(raw);
    const key = m?.[2]!.toLowerCase();
    if (!m || key === undefined || !(key in overrides)) return raw;
    seen.add(key);
    return `${m[1]}${m[2]}${m[3]}=${overrides[key]}`;
  });
  const missing = Object.keys(overrides).filter((k) => !seen.has(k)).map((k) => `${k}=${overrides[k]}`);
  if (missing.length > 0) {
    const end = lines.length > 0 && lines[lines.length - 1] === '' ? lines.length - 1 : lines.length;
    lines.splice(end, 0, ...missing);
  }
  return lines.join('\n');
}

export interface FioFigures {
  /** Read bandwidth, bytes/s, summed over the job's threads. */
  readBytesPerSec: number;
  /** Mean completion latency of the reads, ms (weighted by each thread's I/O count). */
  clatMeanMs: number;
  /** Bytes read, all threads. */
  ioBytes: number;
  ios: number;
  /** The longest thread's read runtime, seconds. */
  seconds: number;
}

interface FioJsonJob { jobname?: string; error?: number; read?: { io_bytes?: number; bw_bytes?: number; bw?: number; total_ios?: number; runtime?: number; clat_ns?: { mean?: number } } }

/** fio's JSON output (text: fio may print notices before the JSON object). */
export function parseFioOutput(text: string): FioFigures {
  const at = text.indexOf('{');
  let doc: { jobs?: FioJsonJob[] };
  try { doc = JSON.parse(at < 0 ? text : text.slice(at)) as { jobs?: FioJsonJob[] }; } catch (err) {
    throw new ConfigError(`fio's output is not JSON (${err instanceof Error ? err.message : String(err)})`);
  }
  const jobs = doc.jobs ?? [];
  if (jobs.length === 0) throw new ConfigError("fio's output has no jobs");
  const failed = jobs.find((j) => (j.error ?? 0) !== 0);
  if (failed) throw new ConfigError(`fio job ${failed.jobname ?? '?'} failed with error ${failed.error}`);
  let bw = 0; let bytes = 0; let ios = 0; let clatSum = 0; let seconds = 0;
  for (const j of jobs) {
    const r = j.read ?? {};
    bw += r.bw_bytes ?? (r.bw ?? 0) * 1024;
    bytes += r.io_bytes ?? 0;
    const n = r.total_ios ?? 0;
    ios += n;
    clatSum += (r.clat_ns?.mean ?? 0) * n;
    seconds = Math.max(seconds, (r.runtime ?? 0) / 1000);
  }
  if (ios === 0) throw new ConfigError('fio read nothing');
  return { readBytesPerSec: bw, clatMeanMs: clatSum / ios / 1e6, ioBytes: bytes, ios, seconds };
}
