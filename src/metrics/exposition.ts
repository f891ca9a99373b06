/**
 * A reader of the Prometheus text exposition format (version 0.0.4), enough for
 * sluice's own output: `# TYPE` lines and samples `name{label="value",...} value [ts]`.
 * `# HELP` and other comments are skipped; label values unescape \\, \" and \n.
 *
 * Both `sluice status` (a remote daemon's /metrics) and the periodic summary (this
 * process's registry, rendered to text) read metrics through it, so that they compute
 * the same figures the same way.
 */

export interface Sample {
  /** Sample name as exposed, e.g. sluice_read_wait_seconds_bucket. */
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Exposition {
  samples: Sample[];
  /** Metric family name -> type (counter, gauge, histogram, summary, untyped). */
  types: Map<string, string>;
}

const SAMPLE_RE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)(?:\s+-?\d+)?\s*$/;
const LABEL_RE = /\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?/y;

function parseValue(text: string): number {
  if (text === '+Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  return Number(text); // NaN for "NaN" and for garbage alike
}

function unescape(v: string): string {
  return v.replace(/\\(.)/g, (_m, c: string) => (c === 'n' ? '\n' : c));
}

function parseLabels(text: string, line: string): Record<string, string> {
  const labels: Record<string, string> = {};
  const body = text.slice(1, -1);
  LABEL_RE.lastIndex = 0;
  while (LABEL_RE.lastIndex < body.length) {
    const at = LABEL_RE.lastIndex;
    const m = LABEL_RE.exec(body);
    if (!m) {
      if (body.slice(at).trim() === '') break;
      throw new Error(`cannot parse labels in metrics line: ${line}`);
    }
    labels[m[1]!] = unescape(m[2]!);
  }
  return labels;
}

/** Parse exposition text. Throws on a line that is neither a comment nor a sample. */
export function parseExposition(text: string): Exposition {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '') continue;
    if (line.startsWith('#')) {
      const t = /^#\s*TYPE\s+(\S+)\s+(\S+)/.exec(line);
      if (t) types.set(t[1]!, t[2]!);
      continue;
    }
    const m = SAMPLE_RE.exec(line);
    if (!m) throw new Error(`cannot parse metrics line: ${line}`);
    samples.push({ name: m[1]!, labels: m[2] ? parseLabels(m[2], line) : {}, value: parseValue(m[3]!) });
  }
  return { samples, types };
}

/** Label filter: every given label must have the given value. */
export type LabelMatch = Record<string, string | ((value: string) => boolean)>;

function matches(s: Sample, match: LabelMatch | undefined): boolean {
  if (!match) return true;
  for (const [k, want] of Object.entries(match)) {
    const v = s.labels[k] ?? '';
    if (typeof want === 'function' ? !want(v) : v !== want) return false;
  }
  return true;
}

/** Sum of the samples named `name` whose labels match (0 when there are none). */
export function sumOf(e: Exposition, name: string, match?: LabelMatch): number {
  let total = 0;
  for (const s of e.samples) if (s.name === name && matches(s, match)) total += s.value;
  return total;
}

/** True when at least one sample is named `name` and matches. */
export function has(e: Exposition, name: string, match?: LabelMatch): boolean {
  return e.samples.some((s) => s.name === name && matches(s, match));
}

/** Distinct values of `label` over the samples named `name`. */
export function labelValues(e: Exposition, name: string, label: string): string[] {
  const out = new Set<string>();
  for (const s of e.samples) if (s.name === name && s.labels[label] !== undefined) out.add(s.labels[label]!);
  return [...out];
}

/**
 * The q-quantile (0..1) of a histogram from its cumulative `_bucket` samples, by linear
 * interpolation inside the bucket, as PromQL's histogram_quantile() does. NaN when empty.
 */
export function quantileOf(e: Exposition, histogram: string, q: number, match?: LabelMatch): number {
  const byLe = new Map<number, number>();
  for (const s of e.samples) {
    if (s.name !== `${histogram}_bucket` || !matches(s, match)) continue;
    const le = parseValue(s.labels.le ?? 'NaN');
    byLe.set(le, (byLe.get(le) ?? 0) + s.value);
  }
  return quantileFromBuckets([...byLe].sort((a, b) => a[0] - b[0]), q);
}

/** Quantile from sorted [upperBound, cumulativeCount] pairs; the +Inf bucket holds the total. */
export function quantileFromBuckets(buckets: Array<[number, number]>, q: number): number {
  const total = buckets.length ? buckets[buckets.length - 1]![1] : 0;
  if (!(total > 0)) return NaN;
  const rank = q * total;
  let prevLe = 0;
  let prevCount = 0;
  for (const [le, count] of buckets) {
    if (count >= rank) {
      if (le === Infinity) return prevLe; // beyond the last finite bound: report that bound
      if (count === prevCount) return le;
      return prevLe + ((le - prevLe) * (rank - prevCount)) / (count - prevCount);
    }
    prevLe = le;
    prevCount = count;
  }
  return prevLe;
}
