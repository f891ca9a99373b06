/**
 * Runs a scenario file end to end and returns every figure.
 *
 *  1. Start the local S3 server (s3rver, its own process) and seed each dataset
 *     once under its own prefix, straight to the server (no proxy). With `server: stored`,
 *     a cheap server then serves those objects from memory (./stored-s3.ts) instead.
 *  2. Per latency profile, start the latency proxy in its own process and measure
 *     the link limit (raw parallel ranged GETs, limit.ts): one untimed warm-up,
 *     `repetitions` times, then once more before each throughput scenario, since
 *     the load of a shared machine drifts; the limit is the median of them all.
 *  3. For each scenario x profile x target x reader count, `repetitions` runs
 *     (run-once.ts: a fresh target each time, reader processes, bytes checked,
 *     peak RSS and CPU time), with the server's and proxy's CPU time recorded
 *     around each run to tell where the time went. A figure is the median of its runs.
 *     Repetitions are interleaved across targets (rep 1 of each, then rep 2, ...), so a
 *     drift in load does not fall on one target's runs only.
 *     kind fio: per job file, per target, a fresh mount and one fio process (./fio-run.ts);
 *     each job is a figure of its own (scenario "NAME.job").
 *  4. Everything started is stopped in `finally`, also on failure or Ctrl-C.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { AbortedError } from '../errors.js';
import { startLocalS3, type LocalS3 } from '../local/s3-server.js';
import type { SeededObject } from '../local/dataset.js';
import { seedBenchDataset } from './datasets.js';
import { startStoredS3Process } from './stored-s3.js';
import { describeProfile, type LatencyProfile, type LatencyProxyStats } from './latency-proxy.js';
import { createRunCa, type RunCa } from './tls-ca.js';
import { measureLimit, measureLimitCurl, type LimitResult } from './limit.js';
import { describeMemoryProbe, probeMemory, type MemoryProbe } from './memory-probe.js';
import { BusyMeter } from './machine-busy.js';
import { childPids, cmdlineOf, readProcStats, stopChild } from './proc-stats.js';
import { epochMs } from './read-plan.js';
import { runOnce, type RunResult } from './run-once.js';
import type { BenchConfig, ScenarioDef, TargetName } from './scenarios.js';
import { DIST_DIR, TARGET_ROLE, TARGET_STYLE, describeCommand, whyUnavailable, type TargetEnv } from './targets.js';
import { median } from './stats.js';
import { runTier, TIER_PHASES, type TierPhase, type TierRunResult } from './tier.js';
import { fioUnavailable, runFioOnce } from './fio-run.js';

const PROXY_PATH = path.join(DIST_DIR, 'bench', 'proxy-child.js');

export type Unit = 'MB/s' | 'files/s' | 'ops/s' | 's' | 'MiB/s' | 'ms';
export type { RunResult } from './run-once.js';

export interface Figure {
  scenario: string;
  title: string;
  kind: ScenarioDef['kind'];
  /** The scenario measured a warm process (ScenarioDef.warm): a mount's later objects, a Pipe host's second epoch. */
  warm?: boolean;
  profile: string;
  target: TargetName;
  role: 'sluice' | 'peer';
  readers: number;
  unit: Unit;
  higherIsBetter: boolean;
  /** Median over the successful runs; null when none succeeded or the target is unavailable. */
  value: number | null;
  /** Median MB/s of the runs (sequential and random), for the fraction of the limit. */
  mbps: number | null;
  fractionOfLimit: number | null;
  peakRssBytes: number | null;
  /** The target's (sluice daemon or peer) CPU seconds per GB read: utime + stime over the run. */
  cpuSecondsPerGB: number | null;
  /** Mount and Pipe targets: median CPU seconds before the target was ready (paid once; not in cpuSecondsPerGB). */
  startupCpuSeconds?: number | null;
  /** Of cpuSecondsPerGB, the user CPU (the steadier figure on a VM whose host takes back free memory; proc-stats.ts). */
  userCpuSecondsPerGB?: number | null;
  /** The target's minor page faults per GB read: how much new memory it touched for the bytes. */
  minorFaultsPerGB?: number | null;
  /** The reader processes' CPU seconds per GB spent reading (the training job's share of the I/O cost; hashing apart, below). */
  readerCpuSecondsPerGB: number | null;
  /** The reader processes' sha256 CPU seconds per GB, inline or after the span (src/bench/reader.ts). */
  readerHashCpuSecondsPerGB?: number | null;
  /** How the readers hashed, and the share of the bytes hashed inside the timed span (0 when all were kept for after). */
  readerHash?: 'after' | 'inline';
  inlineHashedFraction?: number | null;
  /** s3rver's CPU seconds per GB: the same bytes cost the server about the same, whoever reads them. */
  serverCpuSecondsPerGB: number | null;
  /** Median cores' worth of CPU the whole machine used over the runs' timed spans (./machine-busy.ts). */
  machineBusyCores?: number | null;
  /** Download targets: the median figure over the download alone, without the readers' first read (RunResult.downloadValue). */
  downloadValue?: number | null;
  verified: boolean;
  unavailable?: string;
  /** kind tier: median object GETs the proxy saw during the phase (./tier.ts). */
  s3Gets?: number | null;
  /** kind ttfb (issue 44): medians of the mount answering (s from the command's start), requests by the first byte, CPU s by the first byte. */
  ttfbBreakdown?: { mountedSeconds: number | null; requests: number | null; cpuSeconds: number | null };
  runs: RunResult[];
}

export interface LimitFigure {
  profile: string;
  /** What fetched the ranges: curl processes, or an undici pool when curl is missing or not chosen. */
  client: 'curl' | 'undici';
  mbps: number;
  runs: LimitResult[];
  connections: number;
  partSize: number;
  /** Median cores busy on the whole machine over the limit's runs. */
  machineBusyCores?: number | null;
}

export interface BenchResults {
  startedAt: string;
  finishedAt: string;
  config: string;
  /** The S3 server behind the proxies (BenchConfig.server); absent from older result files (s3rver). */
  server?: 's3rver' | 'stored';
  /** `memory`: what first-touched memory costs here (./memory-probe.ts), measured before anything else runs; absent when the probe failed. */
  /** openssl: the version Node's TLS uses (HTTPS costs depend on it: BENCHMARKS.md "t11-growth"); absent from older result files. */
  machine: { nproc: number; memoryBytes: number; kernel: string; node: string; openssl?: string; cpu: string; memory?: MemoryProbe };
  profiles: (LatencyProfile & { description: string })[];
  repetitions: number;
  cacheBudgetBytes: number;
  datasets: Record<string, { objects: number; bytes: number }>;
  commands: Record<string, string>;
  limits: LimitFigure[];
  figures: Figure[];
  notes: string[];
}

export interface RunnerOptions {
  log: (line: string) => void;
  signal?: AbortSignal;
}

export interface ProxyHandle {
  endpoint: string;
  pid: number;
  /** The proxy's counts so far (requests, object GETs, bytes). */
  stats(): Promise<LatencyProxyStats>;
  stop(): Promise<void>;
}

/**
 * The latency proxy in its own process (proxy-child.ts) in front of 127.0.0.1:`targetPort`,
 * resolved once it listens. Also what scripts/ use to put the bench's proxy in their runs.
 */
export function startProxyProcess(profile: LatencyProfile, targetPort: number, ca: RunCa | undefined): Promise<ProxyHandle> {
  const tls = profile.https && ca ? { tls: { key: ca.key, cert: ca.cert } } : {};
  const child = spawn(process.execPath, [PROXY_PATH, JSON.stringify({ ...profile, targetPort, ...tls })], { stdio: ['pipe', 'pipe', 'pipe'] });
  const waiting: ((s: LatencyProxyStats) => void)[] = [];
  return new Promise((resolve, reject) => {
    let buf = '';
    let err = '';
    child.stderr.on('data', (b: Buffer) => { err += b.toString(); });
    child.once('exit', (code) => reject(new Error(`latency proxy exited (${code}): ${err.trim()}`)));
    child.stdout.on('data', (b: Buffer) => {
      buf += b.toString();
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const msg = JSON.parse(buf.slice(0, nl)) as { port?: number; stats?: LatencyProxyStats };
        buf = buf.slice(nl + 1);
        if (msg.stats) waiting.shift()?.(msg.stats);
        if (msg.port === undefined) continue;
        resolve({
          endpoint: `${profile.https ? 'https' : 'http'}://127.0.0.1:${msg.port}`,
          pid: child.pid!,
          stats: () => new Promise<LatencyProxyStats>((res) => { waiting.push(res); child.stdin.write('stats\n'); }),
          stop: () => stopChild(child),
        });
      }
    });
  });
}

function hasCurl(): boolean {
  return spawnSync('curl', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** The s3rver child of this process (startLocalS3 does not expose its pid). */
function findServerPid(): number | undefined {
  return childPids(process.pid).find((p) => cmdlineOf(p).includes('--openssl-legacy-provider'));
}

function cpuOf(pid: number | undefined): number | undefined {
  return pid === undefined ? undefined : readProcStats(pid)?.cpuSeconds;
}






/** The unit and direction of a scenario's figure. */
export function unitOf(s: ScenarioDef): { unit: Unit; higherIsBetter: boolean } {
  if (s.kind === 'sequential' || s.kind === 'tier') return { unit: s.metric, higherIsBetter: true };
  if (s.kind === 'random') return { unit: 'ops/s', higherIsBetter: true };
  return { unit: 's', higherIsBetter: false };
}

/** Which targets a scenario kind applies to. */
export function appliesTo(kind: ScenarioDef['kind'], t: TargetName): boolean {
  if (kind === 'sequential') return true;
  if (kind === 'tier') return t === 'FastFile';
  return TARGET_STYLE[t] === 'mount';
}

export async function runBench(config: BenchConfig, o: RunnerOptions): Promise<BenchResults> {
  const startedAt = new Date().toISOString();
  const notes: string[] = [];
  const root = await mkdtemp(path.join(os.tmpdir(), 'sluice-bench-'));
  const stops = new Set<() => Promise<void>>();
  let s3: LocalS3 | undefined;
  const checkAbort = () => { if (o.signal?.aborted) throw new AbortedError('benchmark interrupted'); };
  // Before s3rver and the dataset: the probe's child should get the memory a new daemon would.
  const memory = probeMemory();
  if (memory) o.log(describeMemoryProbe(memory));
  // How busy the machine was during each timed span: a figure taken with every core busy was
  // bound by this machine's CPU, whatever the link allowed (./machine-busy.ts).
  const meter = new BusyMeter();
  if (!meter.start()) o.log('/proc/stat cannot be read: no machine-busy figures');
  try {
    s3 = await startLocalS3({ dir: path.join(root, 's3rver') });
    const local = s3;
    let serverPid = findServerPid();
    await s3.createBucket(config.bucket);

    // 1. Datasets.
    const used = new Set([config.limit.dataset, ...config.scenarios.flatMap((s) => [s.dataset, ...(s.fio?.jobs.map((j) => j.dataset) ?? [])])]);
    const data: Record<string, SeededObject[]> = {};
    for (const name of used) {
      const t0 = epochMs();
      const objs = await seedBenchDataset(s3, config.bucket, `${name}/`, config.datasets[name]!);
      data[name] = objs;
      const bytes = objs.reduce((n, x) => n + x.size, 0);
      o.log(`seeded dataset ${name}: ${objs.length} objects, ${(bytes / 1e6).toFixed(1)} MB in ${((epochMs() - t0) / 1000).toFixed(1)} s`);
      checkAbort();
    }
    // `server: stored`: the proxies stand in front of the stored server (the same objects, from
    // memory), whose CPU is then the one recorded as the server's; s3rver stays up, idle.
    let server: { port: number; endpoint: string; credentials: LocalS3['credentials'] } = local;
    if (config.server === 'stored') {
      const stored = await startStoredS3Process(local.dir, config.bucket, Object.values(data).flat().map((x) => ({ key: x.key, etag: x.etag, size: x.size })));
      stops.add(() => stored.stop());
      server = { port: stored.port, endpoint: stored.endpoint, credentials: local.credentials };
      serverPid = stored.pid;
      o.log(`stored S3 server ${stored.endpoint}: the seeded objects from memory (scenario server: stored)`);
    }

    // 2. Proxies and limits.
    const usedProfiles = config.profiles.filter((p) => config.scenarios.some((s) => s.profiles.includes(p.name)));
    // HTTPS profiles: one CA for the run, trusted by each client through its own option (targets.ts).
    let ca: RunCa | undefined;
    if (usedProfiles.some((p) => p.https)) {
      await mkdir(path.join(root, 'tls'));
      ca = await createRunCa(path.join(root, 'tls'));
      o.log(`HTTPS profiles: a CA made for this run, ${ca.caFile}`);
    }
    const caFor = (profile: string) => (config.profiles.find((p) => p.name === profile)?.https ? ca?.caFile : undefined);
    const proxies = new Map<string, ProxyHandle>();
    const limits: LimitFigure[] = [];
    const large = data[config.limit.dataset]!.filter((x) => x.key.includes('/large/'));
    const client = config.limit.client === 'curl' && !hasCurl() ? 'undici' : config.limit.client;
    if (client !== config.limit.client) o.log('curl is not installed: measuring the link limit with undici instead');
    const measure = client === 'curl' ? measureLimitCurl : measureLimit;
    const limitOnce = async (profile: string, label: string): Promise<LimitResult> => {
      const caFile = caFor(profile);
      const r = await measure({ endpoint: proxies.get(profile)!.endpoint, bucket: config.bucket, objects: large, connections: config.limit.connections, partSize: config.limit.partSize, ...(caFile ? { caFile } : {}) });
      if (r.startMs !== undefined && r.endMs !== undefined) r.machineBusyCores = meter.coresBusy(r.startMs, r.endMs);
      o.log(`[limit ${profile} ${label}] ${r.mbps.toFixed(1)} MB/s over ${config.limit.connections} ${client} connections${r.retries ? `, ${r.retries} retried parts` : ''}${r.verified ? ', bytes verified' : `, WRONG BYTES in ${r.mismatches.join(', ')}`}`);
      return r;
    };
    for (const p of usedProfiles) {
      const proxy = await startProxyProcess(p, server.port, ca);
      stops.add(() => proxy.stop());
      proxies.set(p.name, proxy);
      o.log(`latency proxy ${proxy.endpoint} -> ${server.endpoint}: ${describeProfile(p)}`);
      // The first pass over fresh connections and a cold JIT runs slow: warm up, untimed.
      await limitOnce(p.name, 'warm-up, not counted');
      const runs: LimitResult[] = [];
      for (let rep = 0; rep < config.repetitions; rep++) {
        checkAbort();
        runs.push(await limitOnce(p.name, `rep ${rep + 1}/${config.repetitions}`));
      }
      limits.push({ profile: p.name, client, mbps: 0, runs, connections: config.limit.connections, partSize: config.limit.partSize });
    }

    // 3. Scenarios.
    const figures: Figure[] = [];
    const commands: Record<string, string> = {};
    for (const sc of config.scenarios) {
      const objs = data[sc.dataset]!;
      const { unit, higherIsBetter } = unitOf(sc);
      const targets: TargetName[] = [...sc.modes, ...sc.peers].filter((t) => appliesTo(sc.kind, t));
      const readerCounts = sc.kind === 'sequential' || sc.kind === 'tier' ? sc.readers : [1];
      for (const profName of sc.profiles) {
        const proxy = proxies.get(profName)!;
        // The machine's load drifts during a run: measure the limit again next to each throughput scenario.
        if (sc.kind === 'fio') {
          await fioFigures(sc, profName, proxy, data, targets, config, root, figures, commands, stops, o, checkAbort, serverPid, server.credentials, caFor(profName), meter);
          continue;
        }
        if (sc.kind === 'tier') {
          for (const readers of readerCounts) await tierFigures(sc, profName, proxy, readers, objs, config, root, figures, stops, o, checkAbort, server.credentials);
          continue;
        }
        if (sc.kind === 'sequential') limits.find((l) => l.profile === profName)!.runs.push(await limitOnce(profName, `before ${sc.name}`));
        // Repetitions are interleaved (rep 1 of every target, then rep 2, ...), so that a drift in
        // the machine's load falls on every target alike and their ratios stay side by side.
        const cells: { fig: Figure; target: TargetName; readers: number }[] = [];
        for (const target of targets) {
          for (const readers of readerCounts) {
            const fig: Figure = {
              scenario: sc.name, title: sc.title, kind: sc.kind, ...(sc.warm ? { warm: true } : {}), profile: profName, target, role: TARGET_ROLE[target], readers, unit, higherIsBetter,
              value: null, mbps: null, fractionOfLimit: null, peakRssBytes: null, cpuSecondsPerGB: null, readerCpuSecondsPerGB: null, serverCpuSecondsPerGB: null, verified: false, runs: [],
            };
            figures.push(fig);
            const why = whyUnavailable(target);
            if (why) { fig.unavailable = why; continue; }
            cells.push({ fig, target, readers });
          }
        }
        for (const { cell: { fig, target, readers }, rep } of runOrder(cells, config.repetitions)) {
          checkAbort();
          const runDir = path.join(root, `run-${figures.indexOf(fig)}-${rep}`);
          const caFile = caFor(profName);
          let serverCpu0 = cpuOf(serverPid);
          let proxyCpu0 = cpuOf(proxy.pid);
          // A warm scenario's warm-up is not the figure's: the server's and proxy's CPU count from its end.
          const afterWarmUp = () => { serverCpu0 = cpuOf(serverPid); proxyCpu0 = cpuOf(proxy.pid); };
          const env: TargetEnv = { endpoint: proxy.endpoint, bucket: config.bucket, prefix: `${sc.dataset}/`, credentials: server.credentials, runDir, config, afterWarmUp, proxyStats: () => proxy.stats(), ...(caFile ? { caFile } : {}) };
          commands[target] ??= describeCommand(target, env);
          const r = await measuredRun(rep, runDir, () => runOnce(sc, target, readers, objs, env, rep, stops), serverPid, proxy.pid, () => [serverCpu0, proxyCpu0], meter);
          fig.runs.push(r);
          o.log(`[${sc.name} ${profName} ${target} x${readers} rep ${rep + 1}/${config.repetitions}] ${r.error ? `FAILED: ${r.error}` : `${fmt(r.value)} ${unit}${r.verified ? ', bytes verified' : `, ${r.mismatches} WRONG`}${r.truncated ? ' (time limit: partial)' : ''}${ttfbNote(r)}`}`);
        }
        for (const { fig } of cells) summarise(fig);
      }
    }

    // The limit of a profile is the median of all its measurements, spread over the run.
    for (const l of limits) {
      l.mbps = median(l.runs.map((r) => r.mbps)) ?? 0;
      l.machineBusyCores = median(l.runs.map((r) => r.machineBusyCores));
    }
    for (const f of figures) {
      const l = limits.find((x) => x.profile === f.profile)?.mbps;
      f.fractionOfLimit = f.mbps !== null && l ? f.mbps / l : null;
    }

    const machine = {
      nproc: os.availableParallelism(), memoryBytes: os.totalmem(), kernel: os.release(), node: process.version, openssl: process.versions.openssl,
      cpu: os.cpus()[0]?.model ?? 'unknown', ...(memory ? { memory } : {}),
    };
    const datasets = Object.fromEntries(Object.entries(data).map(([k, v]) => [k, { objects: v.length, bytes: v.reduce((n, x) => n + x.size, 0) }]));
    return {
      startedAt, finishedAt: new Date().toISOString(), config: config.file, server: config.server, machine,
      profiles: config.profiles.map((p) => ({ ...p, description: describeProfile(p) })),
      repetitions: config.repetitions, cacheBudgetBytes: config.sluice.cacheSize, datasets, commands, limits, figures, notes,
    };
  } finally {
    meter.stop();
    for (const stop of [...stops].reverse()) await stop().catch(() => {});
    await s3?.stop().catch(() => {});
    await rm(root, { recursive: true, force: true }).catch(() => {});
  }
}

/** The order of a scenario's runs: repetition 1 of every cell, then repetition 2, and so on. */
export function runOrder<T>(cells: readonly T[], repetitions: number): { cell: T; rep: number }[] {
  const order: { cell: T; rep: number }[] = [];
  for (let rep = 0; rep < repetitions; rep++) for (const cell of cells) order.push({ cell, rep });
  return order;
}

/**
 * kind fio: a figure per job and target (scenario "NAME.job"; MiB/s, or ms of mean completion
 * latency for the latency jobs), each run a fresh mount and one fio process (./fio-run.ts).
 * Repetitions are interleaved across targets within a job, as elsewhere.
 */
async function fioFigures(
  sc: ScenarioDef, profName: string, proxy: ProxyHandle, data: Record<string, SeededObject[]>, targets: TargetName[], config: BenchConfig, root: string,
  figures: Figure[], commands: Record<string, string>, stops: Set<() => Promise<void>>, o: RunnerOptions, checkAbort: () => void,
  serverPid: number | undefined, credentials: TargetEnv['credentials'], caFile: string | undefined, meter: BusyMeter,
): Promise<void> {
  const noFio = fioUnavailable();
  for (const job of sc.fio!.jobs) {
    const obj = data[job.dataset]![0]!;
    const latency = job.job.latency;
    const cells: { fig: Figure; target: TargetName }[] = [];
    for (const target of targets) {
      const fig: Figure = {
        scenario: `${sc.name}.${job.name}`, title: `${sc.title}: ${job.file} (${obj.size >= 2 ** 20 ? `${obj.size / 2 ** 20} MiB` : `${obj.size} B`} object)`, kind: sc.kind, profile: profName, target,
        role: TARGET_ROLE[target], readers: Number(job.job.options.numjobs ?? 1), unit: latency ? 'ms' : 'MiB/s', higherIsBetter: !latency,
        value: null, mbps: null, fractionOfLimit: null, peakRssBytes: null, cpuSecondsPerGB: null, readerCpuSecondsPerGB: null, serverCpuSecondsPerGB: null, verified: false, runs: [],
      };
      figures.push(fig);
      const why = noFio ?? whyUnavailable(target);
      if (why) { fig.unavailable = why; continue; }
      cells.push({ fig, target });
    }
    for (const { cell: { fig, target }, rep } of runOrder(cells, config.repetitions)) {
      checkAbort();
      const runDir = path.join(root, `run-${figures.indexOf(fig)}-${rep}`);
      const env: TargetEnv = { endpoint: proxy.endpoint, bucket: config.bucket, prefix: `${job.dataset}/`, credentials, runDir, config, ...(caFile ? { caFile } : {}) };
      commands[target] ??= describeCommand(target, env);
      commands.fio ??= `fio --thread --output-format=json --output=RUN/JOB.json --directory=MNT --filename=OBJECT --readonly --eta=never RUN/JOB.fio (bench/fio/JOB.fio with size= the object's when larger, runtime=${sc.fio!.runtimeSeconds}s when time-based)`;
      const cpu0: [number | undefined, number | undefined] = [cpuOf(serverPid), cpuOf(proxy.pid)];
      const r = await measuredRun(rep, runDir, () => runFioOnce(sc, job, target as 'FastFile' | 's3fs' | 'rclone', obj, env, rep, stops), serverPid, proxy.pid, () => cpu0, meter);
      fig.runs.push(r);
      o.log(`[${fig.scenario} ${profName} ${target} rep ${rep + 1}/${config.repetitions}] ${r.error ? `FAILED: ${r.error}` : `${fmt(r.value)} ${fig.unit}${r.cpuSeconds !== undefined && r.bytes > 0 && !latency ? `, ${(r.cpuSeconds / (r.bytes / 1e9)).toFixed(2)} CPU s/GB` : ''}${r.verified ? ', bytes verified' : `, ${r.mismatches} WRONG`}`}`);
    }
    for (const { fig } of cells) summarise(fig);
  }
}

/** kind tier: one figure per phase (scenario "NAME.phase"), filled from `repetitions` runs of ./tier.ts. */
async function tierFigures(
  sc: ScenarioDef, profName: string, proxy: ProxyHandle, readers: number, objs: SeededObject[], config: BenchConfig, root: string,
  figures: Figure[], stops: Set<() => Promise<void>>, o: RunnerOptions, checkAbort: () => void, credentials: TargetEnv['credentials'],
): Promise<void> {
  const { unit, higherIsBetter } = unitOf(sc);
  const figs = new Map<TierPhase, Figure>();
  for (const phase of TIER_PHASES) {
    const fig: Figure = {
      scenario: `${sc.name}.${phase}`, title: `${sc.title}: ${phase}`, kind: sc.kind, profile: profName, target: phase.startsWith('local') ? 'File' : 'FastFile',
      role: 'sluice', readers, unit, higherIsBetter, value: null, mbps: null, fractionOfLimit: null, peakRssBytes: null, cpuSecondsPerGB: null,
      readerCpuSecondsPerGB: null, serverCpuSecondsPerGB: null,
      verified: false, s3Gets: null, runs: [],
    };
    figs.set(phase, fig);
    figures.push(fig);
  }
  // Each repetition's folder (File mode's download, the disk tier) stays until the bench's
  // folder is removed at the end of the run, not before the next repetition or scenario: on
  // a filesystem without a journal (this kind of VM's ext4), allocating an inode skips every
  // inode freed in the last ~30 s (ext4 find_inode_bit, recently_deleted) at a cache lookup
  // each, so epoch 1's cache files cost ~0.3 ms per create right after a repetition's ~2,400
  // files were removed, against ~0.01 ms on a fresh node (BENCHMARKS.md t14-hot). The folders
  // of every repetition are on disk at once: 2x the dataset each.
  for (let rep = 0; rep < config.repetitions; rep++) {
    checkAbort();
    const runDir = path.join(root, `run-tier-${sc.name}-${readers}-${rep}`);
    const env: TargetEnv = { endpoint: proxy.endpoint, bucket: config.bucket, prefix: `${sc.dataset}/`, credentials, runDir, config };
    try {
      const res = await runTier(sc, readers, objs, env, rep, stops, () => proxy.stats(), o.log);
      for (const phase of TIER_PHASES) {
        const r = res[phase];
        figs.get(phase)!.runs.push(r);
        o.log(`[${sc.name}.${phase} ${profName} x${readers} rep ${rep + 1}/${config.repetitions}] ${fmt(r.mbps ?? null)} MB/s, ${fmt(r.filesPerSec ?? null)} files/s, ${r.s3Gets} S3 GETs${r.cpuSeconds !== undefined ? `, ${(r.cpuSeconds / (r.bytes / 1e9)).toFixed(2)} CPU s/GB${r.userCpuSeconds !== undefined ? ` (user ${(r.userCpuSeconds / (r.bytes / 1e9)).toFixed(2)})` : ''}` : ''}${r.verified ? ', bytes verified' : `, ${r.mismatches} WRONG`}`);
      }
    } catch (err) {
      const error = err instanceof Error ? err.message : String(err);
      for (const f of figs.values()) f.runs.push({ rep, value: null, seconds: 0, bytes: 0, items: 0, verified: false, mismatches: 0, truncated: false, error });
      o.log(`[${sc.name} ${profName} x${readers} rep ${rep + 1}/${config.repetitions}] FAILED: ${error}`);
    }
  }
  for (const f of figs.values()) {
    summarise(f);
    f.s3Gets = median(f.runs.map((r) => (r as TierRunResult).s3Gets));
  }
}

/**
 * One run of a target: a failure becomes a failed RunResult, the run's folder is removed, and
 * the server's and the proxy's CPU since `cpu0()` (read after the run: a warm-up may move it)
 * and the machine's busy cores over the timed span are added.
 */
async function measuredRun(
  rep: number, runDir: string, run: () => Promise<RunResult>, serverPid: number | undefined, proxyPid: number | undefined,
  cpu0: () => [number | undefined, number | undefined], meter: BusyMeter,
): Promise<RunResult> {
  let r: RunResult;
  try {
    r = await run();
  } catch (err) {
    r = { rep, value: null, seconds: 0, bytes: 0, items: 0, verified: false, mismatches: 0, truncated: false, error: err instanceof Error ? err.message : String(err) };
  } finally {
    await rm(runDir, { recursive: true, force: true }).catch(() => {});
  }
  const [server0, proxy0] = cpu0();
  const server1 = cpuOf(serverPid);
  const proxy1 = cpuOf(proxyPid);
  if (server0 !== undefined && server1 !== undefined) r.serverCpuSeconds = server1 - server0;
  if (proxy0 !== undefined && proxy1 !== undefined) r.proxyCpuSeconds = proxy1 - proxy0;
  if (r.spanStartMs !== undefined && r.spanEndMs !== undefined) r.machineBusyCores = meter.coresBusy(r.spanStartMs, r.spanEndMs);
  return r;
}

function fmt(v: number | null): string {
  return v === null ? '-' : v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(3);
}

/** kind ttfb (issue 44): the run's breakdown, for its log line. */
function ttfbNote(r: RunResult): string {
  if (r.mountedSeconds === undefined && r.requestsBeforeFirstByte === undefined) return '';
  return ` (mounted at ${r.mountedSeconds?.toFixed(3) ?? '–'} s, ${r.requestsBeforeFirstByte ?? '–'} requests by the first byte, CPU ${r.cpuSeconds?.toFixed(2) ?? '–'} s)`;
}

function summarise(fig: Figure): void {
  const ok = fig.runs.filter((r) => r.value !== null && !r.error);
  fig.value = median(ok.map((r) => r.value!));
  const mbps = ok.filter((r) => r.seconds > 0 && r.bytes > 0).map((r) => r.bytes / 1e6 / r.seconds);
  // A fio latency job reads 10 bytes: no rate, no CPU per GB.
  const rates = fig.kind === 'sequential' || fig.kind === 'random' || fig.kind === 'tier' || (fig.kind === 'fio' && fig.unit === 'MiB/s');
  fig.mbps = rates ? median(mbps) : null;
  const rss = ok.map((r) => r.peakRssBytes).filter((x): x is number => x !== undefined);
  fig.peakRssBytes = rss.length ? Math.max(...rss) : null;
  const perGB = (pick: (r: RunResult) => number | undefined) => {
    if (!rates) return null;
    return median(ok.filter((r) => pick(r) !== undefined && r.bytes > 0).map((r) => pick(r)! / (r.bytes / 1e9)));
  };
  fig.cpuSecondsPerGB = perGB((r) => r.cpuSeconds);
  fig.userCpuSecondsPerGB = perGB((r) => r.userCpuSeconds);
  fig.minorFaultsPerGB = perGB((r) => r.minorFaults);
  const startup = median(ok.map((r) => r.startupCpuSeconds));
  if (startup !== null) fig.startupCpuSeconds = startup;
  fig.readerCpuSecondsPerGB = perGB((r) => r.readerCpuSeconds);
  fig.readerHashCpuSecondsPerGB = perGB((r) => r.readerHashCpuSeconds);
  const hashed = ok.filter((r) => r.readerHash !== undefined && r.bytes > 0);
  if (hashed.length > 0) {
    fig.readerHash = hashed.some((r) => r.readerHash === 'inline') ? 'inline' : 'after';
    fig.inlineHashedFraction = hashed.reduce((n, r) => n + (r.readerInlineHashedBytes ?? 0), 0) / hashed.reduce((n, r) => n + r.bytes, 0);
  }
  fig.serverCpuSecondsPerGB = perGB((r) => r.serverCpuSeconds);
  if (rates) fig.machineBusyCores = median(ok.map((r) => r.machineBusyCores));
  if (fig.kind === 'ttfb') {
    fig.ttfbBreakdown = { mountedSeconds: median(ok.map((r) => r.mountedSeconds)), requests: median(ok.map((r) => r.requestsBeforeFirstByte)), cpuSeconds: median(ok.map((r) => r.cpuSeconds)) };
  }
  const download = median(ok.map((r) => r.downloadValue));
  if (download !== null) fig.downloadValue = download;
  fig.verified = ok.length > 0 && ok.every((r) => r.verified);
}


