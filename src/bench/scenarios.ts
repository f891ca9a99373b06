/**
 * The benchmark's scenario file (YAML), parsed and checked once at startup.
 *
 * A file names latency profiles, datasets (seeded once into the local S3 server,
 * each under its own prefix), the link-limit measurement, the targets' options,
 * and scenarios. A scenario reads one dataset in one way (sequential / random /
 * ttfb / list) under each of its profiles, with each of its sluice modes and
 * peers, at each reader count, `repetitions` times. Anything missing takes the
 * file's top-level default. Every problem is one line naming the field and the fix.
 * See bench/scenarios/default.yaml for a commented example.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { ConfigError } from '../errors.js';
import { parseSize } from '../config/options.js';
import type { DatasetSpec } from '../local/dataset.js';
import { validateProfile, type LatencyProfile } from './latency-proxy.js';
import { parseFioJob, type FioJob } from './fio-job.js';

export const MODES = ['File', 'FastFile', 'Pipe'] as const;
export const PEERS = ['s3fs', 'rclone', 'aws'] as const;
export type ModeName = (typeof MODES)[number];
export type PeerName = (typeof PEERS)[number];
export type TargetName = ModeName | PeerName;
export const SCENARIO_KINDS = ['sequential', 'random', 'ttfb', 'list', 'tier', 'fio'] as const;
export type ScenarioKind = (typeof SCENARIO_KINDS)[number];

export interface ScenarioDef {
  name: string;
  title: string;
  kind: ScenarioKind;
  dataset: string;
  profiles: string[];
  modes: ModeName[];
  peers: PeerName[];
  readers: number[];
  /** sequential: 'files/s' for folders of small files, 'MB/s' for large ones. */
  metric: 'MB/s' | 'files/s';
  /** Bound on one run's reading time; the figure covers what was read by then. */
  maxSeconds: number;
  /**
   * sequential: a warm process. Mount targets: the dataset's first object is read once,
   * untimed, through the fresh mount; the figure (time, bytes and CPU) covers the other
   * objects only. Pipe: the channels serve two epochs of the same objects; the readers
   * read epoch 0 untimed (its bytes checked too), and the figure covers epoch 1, what
   * each further epoch of a long job costs once the process has mapped its buffers and
   * compiled its code. File and aws start a process per run and ignore it.
   */
  warm?: boolean;
  random: { threads: number; blockSize: number; ops: number };
  /** kind tier (./tier.ts): the memory cache of its mounts and the disk tier's bound; default: the file's cache size, 4x the dataset. */
  tier: { cacheSize: number; cacheDirSize: number | undefined };
  /** Issue 15: FastFile mounts from a snapshot of the dataset (written once, not timed) instead of listing. */
  snapshot: boolean;
  /**
   * When the reader processes hash what they read (src/bench/reader.ts): 'after' the timed
   * span (the default: the span measures the data source alone, as the link limit does), or
   * 'inline' inside it (the behaviour before, kept to measure the difference).
   */
  readerHash: 'after' | 'inline';
  /** kind fio (./fio-run.ts): the job files to run, each on a fresh mount of each target. */
  fio?: FioScenario;
  /**
   * sequential (issue 48): the order the objects are read in. 'listing' (the default);
   * 'shuffled', a seeded shuffle (`seed`) of the whole dataset cut into the readers' batches
   * as a DataLoader(shuffle=True) does; 'order-file', the same shuffle with sluice's mount
   * given --order-file, written with that order before the mount starts (peers and the
   * other modes read the shuffle as in 'shuffled').
   */
  order: ReadOrder;
  /** The shuffle's seed (order shuffled or order-file). */
  seed: number;
  /**
   * kind ttfb: the first byte is the first `readBytes` of the dataset's first file (issue 44:
   * the first MiB of a 100 MB file), checked against the source; undefined: the whole file.
   */
  readBytes?: number;
}

/** One fio job of a scenario: its file (kept verbatim), parsed, and the dataset whose one object it reads. */
export interface FioJobDef {
  /** The file's name without .fio (seq_read). */
  name: string;
  /** Path as given in the scenario (read/seq_read.fio) and resolved. */
  file: string;
  path: string;
  text: string;
  job: FioJob;
  dataset: string;
}

export interface FioScenario {
  jobs: FioJobDef[];
  /** The time-based jobs' runtime here (Mountpoint's files say 30 s). */
  runtimeSeconds: number;
}

/** Mountpoint's job files, fetched as data (bench/fio/README.md): the default folder of a fio scenario's jobs, relative to the scenario file. */
const FIO_DIR_DEFAULT = '../fio';

export const READ_ORDERS = ['listing', 'shuffled', 'order-file'] as const;
export type ReadOrder = (typeof READ_ORDERS)[number];

export interface BenchConfig {
  file: string;
  repetitions: number;
  bucket: string;
  /**
   * The S3 server the profiles' proxies stand in front of: s3rver (default), or `stored`, the
   * seeded objects served from memory by a server that costs almost no CPU per request
   * (./stored-s3.ts), for small-file scenarios where s3rver's own CPU would be the bound.
   */
  server: 's3rver' | 'stored';
  profiles: LatencyProfile[];
  datasets: Record<string, DatasetSpec>;
  /** client: curl processes (the yardstick) or one undici pool in the runner. */
  limit: { dataset: string; connections: number; partSize: number; client: 'curl' | 'undici' };
  /** Extra `sluice mount` flags (cache size etc.), also used by File and Pipe hosts where they apply. */
  sluice: { cacheSize: number; args: string[] };
  peerArgs: Record<PeerName, string[]>;
  scenarios: ScenarioDef[];
  /** Bytes a run's readers may keep in memory to hash after the timed span, split evenly over its readers. */
  readerKeepBytes: number;
}

type Obj = Record<string, unknown>;

function fail(file: string, what: string, fix: string): never {
  throw new ConfigError(`${file}: ${what}`, { hint: fix });
}

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function num(file: string, v: unknown, field: string, min: number, max: number, dflt?: number): number {
  if (v === undefined && dflt !== undefined) return dflt;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) fail(file, `${field} must be a number between ${min} and ${max}`, `Fix ${field} in the scenario file`);
  return v;
}

function size(file: string, v: unknown, field: string, dflt?: number): number {
  if (v === undefined && dflt !== undefined) return dflt;
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return v;
  if (typeof v === 'string') {
    try { return parseSize(v.replace(/\/s$/i, ''), field); } catch { /* below */ }
  }
  return fail(file, `${field}: ${JSON.stringify(v)} is not a size`, 'Use bytes or a suffix, e.g. 40KB, 64MiB, 80MB/s');
}

function strList<T extends string>(file: string, v: unknown, field: string, allowed: readonly T[], dflt: T[]): T[] {
  if (v === undefined) return dflt;
  if (!Array.isArray(v)) fail(file, `${field} must be a list`, `Write ${field}: [${allowed.join(', ')}]`);
  for (const x of v) if (!allowed.includes(x as T)) fail(file, `${field}: unknown ${JSON.stringify(x)}`, `Use some of ${allowed.join(', ')}`);
  return v as T[];
}

function intList(file: string, v: unknown, field: string, dflt: number[]): number[] {
  if (v === undefined) return dflt;
  if (!Array.isArray(v) || v.length === 0 || !v.every((x) => Number.isInteger(x) && x >= 1 && x <= 64)) fail(file, `${field} must be a list of integers between 1 and 64`, `Write e.g. ${field}: [1, 8]`);
  return v as number[];
}

function dataset(file: string, name: string, v: unknown): DatasetSpec {
  if (!isObj(v)) fail(file, `datasets.${name} must be a mapping`, 'Give smallFiles: {count, size} and/or largeFiles: {count, size}');
  const out: DatasetSpec = { seed: num(file, v.seed, `datasets.${name}.seed`, 0, 2 ** 31, 1) };
  if (v.smallFiles !== undefined) {
    const s = v.smallFiles as Obj;
    out.smallFiles = {
      count: num(file, s.count, `datasets.${name}.smallFiles.count`, 1, 100_000),
      size: size(file, s.size, `datasets.${name}.smallFiles.size`),
      folders: num(file, s.folders, `datasets.${name}.smallFiles.folders`, 1, 100, 1),
    };
  }
  if (v.largeFiles !== undefined) {
    const s = v.largeFiles as Obj;
    out.largeFiles = { count: num(file, s.count, `datasets.${name}.largeFiles.count`, 1, 1000), size: size(file, s.size, `datasets.${name}.largeFiles.size`) };
  }
  if (!out.smallFiles && !out.largeFiles) fail(file, `datasets.${name} has no files`, 'Give smallFiles and/or largeFiles');
  return out;
}

/** 1 GiB per run: holds every dataset of bench/scenarios (the largest, cpu-per-gb's, is 1 GiB) on a 24 GiB machine. */
const READER_KEEP_DEFAULT = 1024 * 1024 * 1024;

function readerHash(file: string, v: unknown, field: string, dflt: 'after' | 'inline'): 'after' | 'inline' {
  if (v === undefined) return dflt;
  if (v === 'after' || v === 'inline') return v;
  return fail(file, `${field} ${JSON.stringify(v)} is unknown`, 'Use after (hash once the clock stops) or inline (hash inside the timed span)');
}

function limitClient(file: string, v: unknown): 'curl' | 'undici' {
  if (v === undefined || v === 'curl') return 'curl';
  if (v === 'undici') return 'undici';
  return fail(file, `limit.client ${JSON.stringify(v)} is unknown`, 'Use curl or undici');
}

/** The one object of a dataset meant for fio, or undefined when it has more or none. */
function singleObjectSize(spec: DatasetSpec): number | undefined {
  const n = (spec.largeFiles?.count ?? 0) + (spec.smallFiles?.count ?? 0);
  if (n !== 1) return undefined;
  return spec.largeFiles?.size ?? spec.smallFiles?.size;
}

/**
 * A fio scenario's jobs: each file read and parsed. A job smaller than the scenario dataset's
 * object reads the object of exactly its size from `fio.smallFiles`' datasets when one has it
 * (Mountpoint lays out a file of the job's size: 5 MiB, 1 byte); any other job reads the
 * scenario's object (the first `size` bytes of it, or all of it with `size` cut to the
 * object's when the job's is larger: ./fio-job.ts).
 */
function fioScenario(file: string, name: string, v: unknown, ds: string, datasets: Record<string, DatasetSpec>, quick: boolean): FioScenario {
  const f = `scenarios.${name}.fio`;
  if (!isObj(v)) fail(file, `${f} must be a mapping`, 'Give fio: {jobs: [read/seq_read.fio, ...], runtime: 12}');
  const big = singleObjectSize(datasets[ds]!);
  if (big === undefined) fail(file, `scenarios.${name}.dataset must hold exactly one object for fio`, 'Give it largeFiles: {count: 1, size: ...}');
  const small = v.smallFiles === undefined ? [] : v.smallFiles;
  if (!Array.isArray(small)) fail(file, `${f}.smallFiles must be a list of dataset names`, 'Write e.g. smallFiles: [fio-5mib, fio-1b]');
  const smallSizes = small.map((n: unknown) => {
    if (typeof n !== 'string' || !(n in datasets)) fail(file, `${f}.smallFiles: unknown dataset ${JSON.stringify(n)}`, `Use some of ${Object.keys(datasets).join(', ')}`);
    const sz = singleObjectSize(datasets[n]!);
    if (sz === undefined) fail(file, `${f}.smallFiles: dataset ${n} must hold exactly one object`, 'Give it largeFiles: {count: 1, size: ...}');
    return { name: n, size: sz };
  });
  const dir = path.resolve(path.dirname(file), typeof v.dir === 'string' ? v.dir : FIO_DIR_DEFAULT);
  if (!Array.isArray(v.jobs) || v.jobs.length === 0 || !v.jobs.every((j) => typeof j === 'string')) fail(file, `${f}.jobs must be a non-empty list of job files`, `Write e.g. jobs: [read/seq_read.fio] (paths under ${dir})`);
  const runtime = num(file, v.runtime, `${f}.runtime`, 1, 3600, 12);
  const jobs = (v.jobs as string[]).map((rel): FioJobDef => {
    const p = path.resolve(dir, rel);
    let text: string;
    try { text = readFileSync(p, 'utf8'); } catch (err) {
      return fail(file, `${f}.jobs: cannot read ${p} (${(err as NodeJS.ErrnoException).code ?? String(err)})`, `Give a path under ${dir}, or set ${f}.dir`);
    }
    let job: FioJob;
    try { job = parseFioJob(text); } catch (err) {
      return fail(file, `${f}.jobs: ${rel}: ${err instanceof Error ? err.message : String(err)}`, 'Give a fio file of one read job');
    }
    const dataset = job.sizeBytes < big ? smallSizes.find((x) => x.size === job.sizeBytes)?.name ?? ds : ds;
    return { name: path.basename(rel).replace(/\.fio$/, ''), file: rel, path: p, text, job, dataset };
  });
  if (new Set(jobs.map((j) => j.name)).size !== jobs.length) fail(file, `${f}.jobs: two job files of one name`, 'List each job once');
  return { jobs, runtimeSeconds: quick ? Math.max(1, Math.ceil(runtime / 2)) : runtime };
}

/** Parses and checks a scenario file's text. `quick` keeps one repetition and halves time limits. */
export function parseBenchConfig(text: string, file: string, opts: { quick?: boolean } = {}): BenchConfig {
  let doc: unknown;
  try { doc = parseYaml(text); } catch (err) {
    fail(file, `not valid YAML (${err instanceof Error ? err.message.split('\n')[0] : String(err)})`, 'Fix the YAML syntax');
  }
  if (!isObj(doc)) fail(file, 'the top level must be a mapping', 'See bench/scenarios/default.yaml');
  const d = doc;
  const defaults = (isObj(d.defaults) ? d.defaults : {}) as Obj;

  if (!Array.isArray(d.profiles) || d.profiles.length === 0) fail(file, 'profiles must be a non-empty list', 'Add e.g. - {name: s3-like, ttfbMs: 25, bandwidth: 80MB/s}');
  const profiles: LatencyProfile[] = d.profiles.map((p: unknown, i: number) => {
    if (!isObj(p)) fail(file, `profiles[${i}] must be a mapping`, 'Give name, ttfbMs and bandwidth');
    if (p.https !== undefined && typeof p.https !== 'boolean') fail(file, `profiles[${i}].https must be true or false`, 'Set https: true for a profile served over TLS');
    const prof: LatencyProfile = { name: String(p.name ?? ''), ttfbMs: num(file, p.ttfbMs, `profiles[${i}].ttfbMs`, 0, 10_000, 0), bytesPerSec: p.bandwidth === 0 || p.bandwidth === 'none' || p.bandwidth === undefined ? 0 : size(file, p.bandwidth, `profiles[${i}].bandwidth`), ...(p.https === true ? { https: true } : {}) };
    const problem = validateProfile(prof);
    if (problem) fail(file, problem, 'Fix the profile');
    return prof;
  });
  const profileNames = profiles.map((p) => p.name);
  if (new Set(profileNames).size !== profileNames.length) fail(file, 'profile names must be unique', 'Rename one of them');

  if (!isObj(d.datasets)) fail(file, 'datasets must be a mapping of name -> spec', 'See bench/scenarios/default.yaml');
  const datasets: Record<string, DatasetSpec> = {};
  for (const [name, v] of Object.entries(d.datasets)) {
    if (!/^[a-z0-9-]+$/.test(name)) fail(file, `dataset name ${JSON.stringify(name)} is not lower-case letters, digits and dashes`, 'Rename it (it becomes an S3 prefix)');
    datasets[name] = dataset(file, name, v);
  }
  const dsName = (v: unknown, field: string): string => {
    if (typeof v !== 'string' || !(v in datasets)) fail(file, `${field}: unknown dataset ${JSON.stringify(v)}`, `Use one of ${Object.keys(datasets).join(', ')}`);
    return v;
  };

  const lim = (isObj(d.limit) ? d.limit : {}) as Obj;
  const limit = {
    dataset: dsName(lim.dataset, 'limit.dataset'),
    connections: num(file, lim.connections, 'limit.connections', 1, 256, 16),
    partSize: size(file, lim.partSize, 'limit.partSize', 8 * 1024 * 1024),
    client: limitClient(file, lim.client),
  };
  if (!datasets[limit.dataset]!.largeFiles) fail(file, 'limit.dataset must have largeFiles', 'Point limit.dataset at a dataset of large files');

  const sl = (isObj(d.sluice) ? d.sluice : {}) as Obj;
  const sluiceArgs = Array.isArray(sl.args) ? sl.args.map(String) : [];
  const sluice = { cacheSize: size(file, sl.cacheSize, 'sluice.cacheSize', 512 * 1024 * 1024), args: sluiceArgs };
  const pa = (isObj(d.peerArgs) ? d.peerArgs : {}) as Obj;
  const peerArgs = Object.fromEntries(PEERS.map((p) => [p, Array.isArray(pa[p]) ? (pa[p] as unknown[]).map(String) : []])) as Record<PeerName, string[]>;

  const dModes = strList(file, defaults.modes, 'defaults.modes', MODES, [...MODES]);
  const dPeers = strList(file, defaults.peers, 'defaults.peers', PEERS, [...PEERS]);
  const dReaders = intList(file, defaults.readers, 'defaults.readers', [1, 8]);
  const dProfiles = strList(file, defaults.profiles, 'defaults.profiles', profileNames, [profileNames[0]!]);
  const dMax = num(file, defaults.maxSeconds, 'defaults.maxSeconds', 1, 3600, 60);
  const dHash = readerHash(file, defaults.readerHash, 'defaults.readerHash', 'after');
  const quick = opts.quick === true;

  if (!Array.isArray(d.scenarios) || d.scenarios.length === 0) fail(file, 'scenarios must be a non-empty list', 'See bench/scenarios/default.yaml');
  const names = new Set<string>();
  const scenarios: ScenarioDef[] = d.scenarios.map((s: unknown, i: number) => {
    if (!isObj(s)) fail(file, `scenarios[${i}] must be a mapping`, 'Give at least name, kind and dataset');
    const name = String(s.name ?? '');
    if (!/^[A-Za-z0-9_-]+$/.test(name) || names.has(name)) fail(file, `scenarios[${i}].name ${JSON.stringify(name)} is missing, repeated or not [A-Za-z0-9_-]`, 'Give each scenario a unique short name');
    names.add(name);
    const kind = s.kind ?? 'sequential';
    if (!SCENARIO_KINDS.includes(kind as ScenarioKind)) fail(file, `scenarios.${name}.kind ${JSON.stringify(kind)} is unknown`, `Use one of ${SCENARIO_KINDS.join(', ')}`);
    const ds = dsName(s.dataset, `scenarios.${name}.dataset`);
    const spec = datasets[ds]!;
    const small = spec.smallFiles && !spec.largeFiles;
    const r = (isObj(s.random) ? s.random : {}) as Obj;
    const maxSeconds = num(file, s.maxSeconds, `scenarios.${name}.maxSeconds`, 1, 3600, dMax);
    const sc: ScenarioDef = {
      name,
      title: String(s.title ?? name),
      kind: kind as ScenarioKind,
      dataset: ds,
      profiles: strList(file, s.profiles, `scenarios.${name}.profiles`, profileNames, dProfiles),
      modes: strList(file, s.modes, `scenarios.${name}.modes`, MODES, dModes),
      peers: strList(file, s.peers, `scenarios.${name}.peers`, PEERS, dPeers),
      readers: intList(file, s.readers, `scenarios.${name}.readers`, dReaders),
      metric: s.metric === 'MB/s' || s.metric === 'files/s' ? s.metric : small ? 'files/s' : 'MB/s',
      maxSeconds: quick ? Math.max(1, Math.ceil(maxSeconds / 2)) : maxSeconds,
      random: {
        threads: num(file, r.threads, `scenarios.${name}.random.threads`, 1, 64, 8),
        blockSize: size(file, r.blockSize, `scenarios.${name}.random.blockSize`, 64 * 1024),
        ops: num(file, r.ops, `scenarios.${name}.random.ops`, 1, 1_000_000, 1000),
      },
      tier: { cacheSize: sluice.cacheSize, cacheDirSize: undefined },
      snapshot: s.snapshot === true,
      readerHash: readerHash(file, s.readerHash, `scenarios.${name}.readerHash`, dHash),
      order: s.order === undefined ? 'listing' : READ_ORDERS.includes(s.order as ReadOrder) ? s.order as ReadOrder : fail(file, `scenarios.${name}.order ${JSON.stringify(s.order)} is unknown`, `Use one of ${READ_ORDERS.join(', ')}`),
      seed: num(file, s.seed, `scenarios.${name}.seed`, 0, 2 ** 31, 7),
      ...(s.readBytes !== undefined ? { readBytes: Math.max(1, size(file, s.readBytes, `scenarios.${name}.readBytes`)) } : {}),
    };
    if (sc.order !== 'listing' && sc.kind !== 'sequential') fail(file, `scenarios.${name}: order applies to sequential scenarios only`, 'Remove order, or make the scenario sequential');
    const tr = (isObj(s.tier) ? s.tier : {}) as Obj;
    sc.tier = {
      cacheSize: size(file, tr.cacheSize, `scenarios.${name}.tier.cacheSize`, sluice.cacheSize),
      cacheDirSize: tr.cacheDirSize === undefined ? undefined : size(file, tr.cacheDirSize, `scenarios.${name}.tier.cacheDirSize`),
    };
    if (s.warm !== undefined && typeof s.warm !== 'boolean') fail(file, `scenarios.${name}.warm must be true or false`, 'Set warm: true to measure a warm process (a mount that has read the first object, a Pipe host in its second epoch)');
    if (s.warm === true) {
      if (sc.kind !== 'sequential') fail(file, `scenarios.${name}: warm applies to sequential scenarios only`, 'Remove warm, or make the scenario sequential');
      if ((spec.largeFiles?.count ?? 0) + (spec.smallFiles?.count ?? 0) < 2) fail(file, `scenarios.${name}: warm needs a dataset of at least 2 objects (one warms the daemon)`, 'Add an object to the dataset');
      sc.warm = true;
    }
    if (sc.kind === 'fio') sc.fio = fioScenario(file, name, s.fio, ds, datasets, quick);
    if (sc.kind === 'random' && !spec.largeFiles) fail(file, `scenarios.${name}: a random scenario needs a dataset with largeFiles`, 'Point it at a dataset of large files');
    return sc;
  });

  return {
    file,
    repetitions: quick ? 1 : num(file, d.repetitions, 'repetitions', 1, 100, 3),
    bucket: typeof d.bucket === 'string' && /^[a-z0-9.-]{3,63}$/.test(d.bucket) ? d.bucket : 'sluice-bench',
    server: d.server === undefined || d.server === 's3rver' ? 's3rver' : d.server === 'stored' ? 'stored' : fail(file, 'server must be s3rver or stored', 'Set server: stored to serve the seeded objects from memory (cheap per request), or remove it for s3rver'),
    profiles, datasets, limit, sluice, peerArgs, scenarios,
    readerKeepBytes: size(file, d.readerKeep, 'readerKeep', READER_KEEP_DEFAULT),
  };
}

/**
 * `sluice bench --https`: every plain-HTTP profile gets an HTTPS twin, NAME-https (same
 * latency and bandwidth, TLS terminated by the proxy), and every scenario that runs under
 * NAME runs under its twin too, right after it: each throughput figure and the link limit
 * are then measured both ways in one run.
 */
export function withHttpsTwins(c: BenchConfig): BenchConfig {
  const twin = (name: string) => `${name}-https`;
  const plain = c.profiles.filter((p) => !p.https && !c.profiles.some((q) => q.name === twin(p.name)));
  const profiles = c.profiles.flatMap((p) => (plain.includes(p) ? [p, { ...p, name: twin(p.name), https: true }] : [p]));
  const scenarios = c.scenarios.map((s) => ({ ...s, profiles: s.profiles.flatMap((n) => (plain.some((p) => p.name === n) ? [n, twin(n)] : [n])) }));
  return { ...c, profiles, scenarios };
}

/** A scenario file's text; one line naming the file when it cannot be read (every kind of scenario file). */
export function readScenarioFile(file: string): string {
  try { return readFileSync(file, 'utf8'); } catch (err) {
    throw new ConfigError(`cannot read scenario file ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, { hint: 'Give the path of a YAML scenario file, e.g. bench/scenarios/default.yaml' });
  }
}

export function loadBenchConfig(file: string, opts: { quick?: boolean } = {}): BenchConfig {
  return parseBenchConfig(readScenarioFile(file), file, opts);
}
