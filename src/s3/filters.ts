/**
 * Key filters for a channel or a mount (issue 15): `--filter` values, applied while listing.
 *
 * Two kinds, told apart by their form:
 *  - Partition filters, for Hive-style layouts (".../dt=2026-06-01/region=kr/part-0.parquet"):
 *    NAME OP VALUE with OP one of = != >= <= > <, NAME a column name ([A-Za-z_][A-Za-z0-9_.-]*)
 *    and VALUE without '/'. A key passes when one of its folder segments is NAME=V and V
 *    satisfies the comparison: numerically when both sides are decimal numbers, else by
 *    code point (which orders ISO dates). With = and !=, VALUE may hold alternatives
 *    (kr|jp) and wildcards (2026-06-*). A key with no NAME=... segment does not pass.
 *  - Glob filters on the key below the prefix, anything else ("**\/*.jpg", "train/shard-0*"):
 *    * and ? within one segment, ** across segments, [abc] a character class.
 * A key is kept when it passes every partition filter and, if any glob is given, at least
 * one glob (globs are alternatives, partitions narrow).
 *
 * Pruning: `couldMatchUnder(folder)` is false when no key under the folder can pass (a
 * NAME=V segment that fails, or a glob whose leading segments cannot match), so the
 * lister never lists it (src/s3/lister.ts, listPruned). `needsDeeper(folder)` says whether
 * listing one more level with a delimiter can still prune anything below the folder.
 */
import { InvalidArgumentError } from '../errors.js';
import { compareKeys } from './lister.js';

type Op = '=' | '!=' | '>=' | '<=' | '>' | '<';

interface PartitionFilter { kind: 'partition'; text: string; name: string; op: Op; values: string[]; patterns: RegExp[] | undefined }
interface GlobFilter { kind: 'glob'; text: string; segments: string[]; res: (RegExp | '**')[] }
export type Filter = PartitionFilter | GlobFilter;

const PARTITION_RE = /^([A-Za-z_][A-Za-z0-9_.-]*)\s*(!=|>=|<=|=|>|<)\s*([^/]*)$/;
const NUMBER_RE = /^-?\d+(?:\.\d+)?$/;

/** A glob segment ('*', '?', '[...]') as an anchored regular expression. */
function segmentRegExp(glob: string, what: string): RegExp {
  let re = '';
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else if (c === '[') {
      const close = glob.indexOf(']', i + 2);
      if (close < 0) throw new InvalidArgumentError(`--filter ${JSON.stringify(what)}: unclosed [ in a character class`, { hint: 'Close it, e.g. part-[0-3]*' });
      let cls = glob.slice(i + 1, close);
      if (cls.startsWith('!')) cls = `^${cls.slice(1)}`;
      re += `[${cls.replace(/\\/g, '\\\\')}]`;
      i = close;
    } else re += c.replace(/[.+^${}()|\\]/g, '\\$&');
  }
  return new RegExp(`^${re}$`, 'u');
}

export function parseFilter(text: string): Filter {
  const t = text.trim();
  if (t === '') throw new InvalidArgumentError('--filter is empty', { hint: "Use NAME OP VALUE (e.g. 'dt>=2026-06-01') or a glob on the key (e.g. '**/*.jpg')" });
  const m = PARTITION_RE.exec(t);
  if (m) {
    const op = m[2] as Op;
    const values = op === '=' || op === '!=' ? m[3]!.split('|') : [m[3]!];
    if (values.some((v) => v === '')) throw new InvalidArgumentError(`--filter ${JSON.stringify(text)}: the value is empty`, { hint: "E.g. 'region=kr' or 'region=kr|jp'" });
    const wild = values.some((v) => /[*?[]/.test(v));
    return { kind: 'partition', text: t, name: m[1]!, op, values, patterns: wild ? values.map((v) => segmentRegExp(v, text)) : undefined };
  }
  const segments = t.replace(/^\/+/, '').split('/');
  if (segments.some((s) => s === '')) throw new InvalidArgumentError(`--filter ${JSON.stringify(text)}: empty path segment`, { hint: "E.g. 'train/**/*.jpg'" });
  return { kind: 'glob', text: t, segments, res: segments.map((s) => (s === '**' ? '**' : segmentRegExp(s, text))) };
}

function compareValues(a: string, b: string): number {
  if (NUMBER_RE.test(a) && NUMBER_RE.test(b)) return Number(a) - Number(b);
  return compareKeys(a, b);
}

function partitionPasses(f: PartitionFilter, value: string): boolean {
  switch (f.op) {
    case '=': return f.patterns ? f.patterns.some((r) => r.test(value)) : f.values.includes(value);
    case '!=': return f.patterns ? !f.patterns.some((r) => r.test(value)) : !f.values.includes(value);
    case '>=': return compareValues(value, f.values[0]!) >= 0;
    case '<=': return compareValues(value, f.values[0]!) <= 0;
    case '>': return compareValues(value, f.values[0]!) > 0;
    case '<': return compareValues(value, f.values[0]!) < 0;
  }
}

/**
 * Glob segments res[gi..] against path segments segs[si..]. `partial`: segs are the
 * folders above a key not yet seen, so running out of them means "could still match".
 */
function globMatch(res: readonly (RegExp | '**')[], segs: readonly string[], gi: number, si: number, partial: boolean): boolean {
  if (si === segs.length) return partial || res.slice(gi).every((r) => r === '**');
  if (gi === res.length) return false;
  const r = res[gi]!;
  if (r === '**') return globMatch(res, segs, gi + 1, si, partial) || globMatch(res, segs, gi, si + 1, partial);
  return r.test(segs[si]!) && globMatch(res, segs, gi + 1, si + 1, partial);
}

export class KeyFilter {
  readonly partitions: PartitionFilter[];
  readonly globs: GlobFilter[];
  private readonly names: Set<string>;

  /** `prefix`: the listing's prefix; globs match what follows it (a folder prefix's folder). */
  constructor(readonly texts: readonly string[], readonly prefix: string) {
    const fs = texts.map(parseFilter);
    this.partitions = fs.filter((f): f is PartitionFilter => f.kind === 'partition');
    this.globs = fs.filter((f): f is GlobFilter => f.kind === 'glob');
    this.names = new Set(this.partitions.map((p) => p.name));
  }

  get empty(): boolean {
    return this.partitions.length === 0 && this.globs.length === 0;
  }

  private rel(key: string): string {
    const base = this.prefix === '' || this.prefix.endsWith('/') ? this.prefix : this.prefix.slice(0, this.prefix.lastIndexOf('/') + 1);
    return key.startsWith(base) ? key.slice(base.length) : key;
  }

  /** Checks each NAME=V folder segment against the partition filters; `seen` collects the names met. */
  private segmentsPass(folders: readonly string[], seen?: Set<string>): boolean {
    for (const seg of folders) {
      const eq = seg.indexOf('=');
      if (eq <= 0) continue;
      const name = seg.slice(0, eq);
      if (!this.names.has(name)) continue;
      seen?.add(name);
      const value = seg.slice(eq + 1);
      for (const p of this.partitions) if (p.name === name && !partitionPasses(p, value)) return false;
    }
    return true;
  }

  /** True when `key` is kept. */
  matches(key: string): boolean {
    const segs = key.split('/');
    const seen = new Set<string>();
    if (!this.segmentsPass(segs.slice(0, -1), seen) || seen.size !== this.names.size) return false;
    if (this.globs.length === 0) return true;
    const relSegs = this.rel(key).split('/');
    return this.globs.some((g) => globMatch(g.res, relSegs, 0, 0, false));
  }

  /** False when no key under `folder` (a prefix ending in '/') can be kept. */
  couldMatchUnder(folder: string): boolean {
    if (!this.segmentsPass(folder.split('/').slice(0, -1))) return false;
    if (this.globs.length === 0) return true;
    const relSegs = this.rel(folder).split('/').slice(0, -1);
    return this.globs.some((g) => globMatch(g.res, relSegs, 0, 0, true));
  }

  /** True when listing `folder`'s subfolders could still prune: a partition name not met yet, or a glob segment still to check. */
  needsDeeper(folder: string): boolean {
    const seen = new Set<string>();
    this.segmentsPass(folder.split('/').slice(0, -1), seen);
    if (seen.size < this.names.size) return true;
    const depth = this.rel(folder).split('/').length - 1;
    // A glob prunes at a level only through segments before its first '**' (after it, any depth matches).
    return this.globs.some((g) => {
      const fixed = g.res.indexOf('**');
      return (fixed < 0 ? g.res.length - 1 : fixed) > depth;
    });
  }
}
