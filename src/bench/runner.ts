/**
 * Runs a scenario file end to end and returns every figure.
 *
 *  1. Start the local S3 server (s3rver, its own process) and seed each dataset
 *     once under its own prefix, straight to the server (no proxy).
 *  2. Per latency profile, start the latency proxy in its own process and measure
 *     the link limit (raw parallel ranged GETs, limit.ts): one untimed warm-up,
 *     `repetitions` times, then once more before each throughput scenario, since
 *     the load of a shared machine drifts; the limit is the median of them all.
 *  3. For each scenario x profile x target x reader count, `repetitions` runs:
 *     a fresh mount / download / Pipe host each time (a cold cache), readers in
 *     their own processes (reader.ts), every byte checked against the source's
 *     sha256, the target's process sampled for peak RSS and CPU time, and the
 *     server's and proxy's CPU time recorded to tell where the time went.
 *     A figure is the median of its runs.
 *  4. Everything started is stopped in `finally`, also on failure or Ctrl-C.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, open, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { AbortedError } from '../errors.js';
import { startLocalS3, type LocalS3 } from '../local/s3-server.js';
import { sourceBytes, type SeededObject } from '../local/dataset.js';
import { seedBenchDataset } from './datasets.js';
import { describeProfile, type LatencyProfile } from './latency-proxy.js';
import { measureLimit, measureLimitCurl, type LimitResult } from './limit.js';
import { childPids, cmdlineOf, readProcStats, type ProcStats } from './proc-stats.js';
import { epochMs, randomOffsets, type ReadPlan, type ReadResult } from './read-plan.js';
import type { BenchConfig, ScenarioDef, TargetName } from './scenarios.js';
import {
  DIST_DIR, TARGET_ROLE, TARGET_STYLE, describeCommand, runDownload, startMount, startPipe, whyUnavailable,
  type TargetEnv,
} from './targets.js';
import { median } from './stats.js';

const READER_PATH = path.join(DIST_DIR, 'bench', 'reader.js');
const PROXY_PATH = path.join(DIST_DIR, 'bench', 'proxy-child.js');
/** Files per data-loader batch: reader i of N takes batches i, i+N, ... as PyTorch DataLoader workers do. */
const BATCH_FILES = 16;
/** Grace beyond a run's maxSeconds before its readers are killed (startup, the last file in flight). */
const READER_GRACE_MS = 60_000;
/** ttfb/list polls: 2 ms keeps the figure's resolution well under the ~0.1-2 s being measured. */
const POLL_MS = 2;

export type Unit = 'MB/s' | 'files/s' | 'ops/s' | 's';

export interface RunResult {
  rep: number;
  value: number | null;
  seconds: number;
  bytes: number;
  items: number;
  verified: boolean;
  mismatches: number;
  truncated: boolean;
  /** Target process (sluice or the peer). */
  peakRssBytes?: number;
  cpuSeconds?: number;
  serverCpuSeconds?: number;
  proxyCpuSeconds?: number;
  error?: string;
}

export interface Figure {
  scenario: string;
  title: string;
  kind: ScenarioDef['kind'];
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
  cpuSecondsPerGB: number | null;
  verified: boolean;
  unavailable?: string;
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
}

export interface BenchResults {
  startedAt: string;
  finishedAt: string;
  config: string;
  machine: { nproc: number; memoryBytes: number; kernel: string; node: string; cpu: string };
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

interface ProxyHandle { endpoint: string; pid: number; stop(): Promise<void> }

function startProxyProcess(profile: LatencyProfile, targetPort: number): Promise<ProxyHandle> {
  const child = spawn(process.execPath, [PROXY_PATH, JSON.stringify({ ...profile, targetPort })], { stdio: ['pipe', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let buf = '';
    let err = '';
    child.stderr.on('data', (b: Buffer) => { err += b.toString(); });
    child.once('exit', (code) => reject(new Error(`latency proxy exited (${code}): ${err.trim()}`)));
    child.stdout.on('data', (b: Buffer) => {
      buf += b.toString();
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      const { port } = JSON.parse(buf.slice(0, nl)) as { port: number };
      buf = buf.slice(nl + 1);
      resolve({
        endpoint: `http://127.0.0.1:${port}`,
        pid: child.pid!,
        stop: () => new Promise<void>((res) => {
          if (child.exitCode !== null) return res();
          child.once('exit', () => res());
          child.stdin.end();
          child.kill('SIGTERM');
          setTimeout(() => child.kill('SIGKILL'), 3000).unref();
        }),
      });
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

function runReader(plan: ReadPlan, planFile: string, threads: number, killAfterMs: number): Promise<ReadResult> {
  return (async () => {
    await writeFile(planFile, JSON.stringify(plan));
    const child = spawn(process.execPath, [READER_PATH, planFile], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, UV_THREADPOOL_SIZE: String(Math.max(4, threads)) },
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => { out += b.toString(); });
    child.stderr.on('data', (b: Buffer) => { if (err.length < 4000) err += b.toString(); });
    const timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    clearTimeout(timer);
    const line = out.trim().split('\n').pop() ?? '';
    try {
      return JSON.parse(line) as ReadResult;
    } catch {
      throw new Error(`reader exited (${code}) without a result: ${err.trim().split('\n').slice(-2).join(' ')}`);
    }
  })();
}

/** Reader i's files: batches i, i+N, i+2N, ... of BATCH_FILES consecutive objects. */
export function assignBatches<T>(objects: T[], readers: number): T[][] {
  const out: T[][] = Array.from({ length: readers }, () => []);
  for (let b = 0; b * BATCH_FILES < objects.length; b++) out[b % readers]!.push(...objects.slice(b * BATCH_FILES, (b + 1) * BATCH_FILES));
  return out;
}

function checkHashes(expected: string[], got: ReadResult): number {
  let bad = 0;
  got.sha256.forEach((h, i) => { if (h !== expected[i]) bad++; });
  return bad;
}

async function walkCount(dir: string, limitEntries: number): Promise<string[]> {
  const out: string[] = [];
  const stack = [''];
  while (stack.length > 0 && out.length <= limitEntries) {
    const rel = stack.pop()!;
    for (const e of await readdir(path.join(dir, rel), { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) stack.push(r); else out.push(r);
    }
  }
  return out;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** The unit and direction of a scenario's figure. */
export function unitOf(s: ScenarioDef): { unit: Unit; higherIsBetter: boolean } {
  if (s.kind === 'sequential') return { unit: s.metric, higherIsBetter: true };
  if (s.kind === 'random') return { unit: 'ops/s', higherIsBetter: true };
  return { unit: 's', higherIsBetter: false };
}

/** Which targets a scenario kind applies to. */
export function appliesTo(kind: ScenarioDef['kind'], t: TargetName): boolean {
  if (kind === 'sequential') return true;
  return TARGET_STYLE[t] === 'mount';
}

export async function runBench(config: BenchConfig, o: RunnerOptions): Promise<BenchResults> {
  const startedAt = new Date().toISOString();
  const notes: string[] = [];
  const root = await mkdtemp(path.join(os.tmpdir(), 'sluice-bench-'));
  const stops = new Set<() => Promise<void>>();
  let s3: LocalS3 | undefined;
  const checkAbort = () => { if (o.signal?.aborted) throw new AbortedError('benchmark interrupted'); };
  try {
    s3 = await startLocalS3({ dir: path.join(root, 's3rver') });
    const server = s3;
    const serverPid = findServerPid();
    await s3.createBucket(config.bucket);

    // 1. Datasets.
    const used = new Set([config.limit.dataset, ...config.scenarios.map((s) => s.dataset)]);
    const data: Record<string, SeededObject[]> = {};
    for (const name of used) {
      const t0 = epochMs();
      const objs = await seedBenchDataset(s3, config.bucket, `${name}/`, config.datasets[name]!);
      data[name] = objs;
      const bytes = objs.reduce((n, x) => n + x.size, 0);
      o.log(`seeded dataset ${name}: ${objs.length} objects, ${(bytes / 1e6).toFixed(1)} MB in ${((epochMs() - t0) / 1000).toFixed(1)} s`);
      checkAbort();
    }

    // 2. Proxies and limits.
    const usedProfiles = config.profiles.filter((p) => config.scenarios.some((s) => s.profiles.includes(p.name)));
    const proxies = new Map<string, ProxyHandle>();
    const limits: LimitFigure[] = [];
    const large = data[config.limit.dataset]!.filter((x) => x.key.includes('/large/'));
    const client = config.limit.client === 'curl' && !hasCurl() ? 'undici' : config.limit.client;
    if (client !== config.limit.client) o.log('curl is not installed: measuring the link limit with undici instead');
    const measure = client === 'curl' ? measureLimitCurl : measureLimit;
    const limitOnce = async (profile: string, label: string): Promise<LimitResult> => {
      const r = await measure({ endpoint: proxies.get(profile)!.endpoint, bucket: config.bucket, objects: large, connections: config.limit.connections, partSize: config.limit.partSize });
      o.log(`[limit ${profile} ${label}] ${r.mbps.toFixed(1)} MB/s over ${config.limit.connections} ${client} connections${r.retries ? `, ${r.retries} retried parts` : ''}${r.verified ? ', bytes verified' : `, WRONG BYTES in ${r.mismatches.join(', ')}`}`);
      return r;
    };
    for (const p of usedProfiles) {
      const proxy = await startProxyProcess(p, server.port);
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
      const readerCounts = sc.kind === 'sequential' ? sc.readers : [1];
      for (const profName of sc.profiles) {
        const proxy = proxies.get(profName)!;
        // The machine's load drifts during a run: measure the limit again next to each throughput scenario.
        if (sc.kind === 'sequential') limits.find((l) => l.profile === profName)!.runs.push(await limitOnce(profName, `before ${sc.name}`));
        for (const target of targets) {
          for (const readers of readerCounts) {
            const fig: Figure = {
              scenario: sc.name, title: sc.title, kind: sc.kind, profile: profName, target, role: TARGET_ROLE[target], readers, unit, higherIsBetter,
              value: null, mbps: null, fractionOfLimit: null, peakRssBytes: null, cpuSecondsPerGB: null, verified: false, runs: [],
            };
            figures.push(fig);
            const why = whyUnavailable(target);
            if (why) { fig.unavailable = why; continue; }
            for (let rep = 0; rep < config.repetitions; rep++) {
              checkAbort();
              const runDir = path.join(root, `run-${figures.length}-${rep}`);
              const env: TargetEnv = { endpoint: proxy.endpoint, bucket: config.bucket, prefix: `${sc.dataset}/`, credentials: server.credentials, runDir, config };
              commands[target] ??= describeCommand(target, env);
              const serverCpu0 = cpuOf(serverPid);
              const proxyCpu0 = cpuOf(proxy.pid);
              let r: RunResult;
              try {
                r = await runOnce(sc, target, readers, objs, env, rep, stops);
              } catch (err) {
                r = { rep, value: null, seconds: 0, bytes: 0, items: 0, verified: false, mismatches: 0, truncated: false, error: err instanceof Error ? err.message : String(err) };
              } finally {
                await rm(runDir, { recursive: true, force: true }).catch(() => {});
              }
              const sc1 = cpuOf(serverPid);
              const pc1 = cpuOf(proxy.pid);
              if (serverCpu0 !== undefined && sc1 !== undefined) r.serverCpuSeconds = sc1 - serverCpu0;
              if (proxyCpu0 !== undefined && pc1 !== undefined) r.proxyCpuSeconds = pc1 - proxyCpu0;
              fig.runs.push(r);
              o.log(`[${sc.name} ${profName} ${target} x${readers} rep ${rep + 1}/${config.repetitions}] ${r.error ? `FAILED: ${r.error}` : `${fmt(r.value)} ${unit}${r.verified ? ', bytes verified' : `, ${r.mismatches} WRONG`}${r.truncated ? ' (time limit: partial)' : ''}`}`);
            }
            summarise(fig);
          }
        }
      }
    }

    // The limit of a profile is the median of all its measurements, spread over the run.
    for (const l of limits) l.mbps = median(l.runs.map((r) => r.mbps)) ?? 0;
    for (const f of figures) {
      const l = limits.find((x) => x.profile === f.profile)?.mbps;
      f.fractionOfLimit = f.mbps !== null && l ? f.mbps / l : null;
    }

    const machine = {
      nproc: os.availableParallelism(), memoryBytes: os.totalmem(), kernel: os.release(), node: process.version,
      cpu: os.cpus()[0]?.model ?? 'unknown',
    };
    const datasets = Object.fromEntries(Object.entries(data).map(([k, v]) => [k, { objects: v.length, bytes: v.reduce((n, x) => n + x.size, 0) }]));
    return {
      startedAt, finishedAt: new Date().toISOString(), config: config.file, machine,
      profiles: config.profiles.map((p) => ({ ...p, description: describeProfile(p) })),
      repetitions: config.repetitions, cacheBudgetBytes: config.sluice.cacheSize, datasets, commands, limits, figures, notes,
    };
  } finally {
    for (const stop of [...stops].reverse()) await stop().catch(() => {});
    await s3?.stop().catch(() => {});
    await rm(root, { recursive: true, force: true }).catch(() => {});
  }
}

function fmt(v: number | null): string {
  return v === null ? '-' : v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(3);
}

function summarise(fig: Figure): void {
  const ok = fig.runs.filter((r) => r.value !== null && !r.error);
  fig.value = median(ok.map((r) => r.value!));
  const mbps = ok.filter((r) => r.seconds > 0 && r.bytes > 0).map((r) => r.bytes / 1e6 / r.seconds);
  fig.mbps = fig.kind === 'sequential' || fig.kind === 'random' ? median(mbps) : null;
  const rss = ok.map((r) => r.peakRssBytes).filter((x): x is number => x !== undefined);
  fig.peakRssBytes = rss.length ? Math.max(...rss) : null;
  const cpg = ok.filter((r) => r.cpuSeconds !== undefined && r.bytes > 0).map((r) => r.cpuSeconds! / (r.bytes / 1e9));
  fig.cpuSecondsPerGB = fig.kind === 'sequential' || fig.kind === 'random' ? median(cpg) : null;
  fig.verified = ok.length > 0 && ok.every((r) => r.verified);
}

function applyStats(r: RunResult, s: ProcStats | undefined): void {
  if (!s) return;
  r.peakRssBytes = s.peakRssBytes;
  r.cpuSeconds = s.cpuSeconds;
}

async function runOnce(sc: ScenarioDef, target: TargetName, readers: number, objs: SeededObject[], env: TargetEnv, rep: number, stops: Set<() => Promise<void>>): Promise<RunResult> {
  const style = TARGET_STYLE[target];
  const r: RunResult = { rep, value: null, seconds: 0, bytes: 0, items: 0, verified: false, mismatches: 0, truncated: false };
  const rel = (key: string) => key.slice(env.prefix.length);
  const killAfter = sc.maxSeconds * 1000 + READER_GRACE_MS;
  await mkdir(env.runDir, { recursive: true });

  if (sc.kind === 'ttfb' || sc.kind === 'list') {
    const m = await startMount(target as 'FastFile' | 's3fs' | 'rclone', env);
    const stopM = () => m.stop();
    stops.add(stopM);
    try {
      const deadline = m.startMs + killAfter;
      if (sc.kind === 'ttfb') {
        const first = objs[0]!;
        const file = path.join(m.dir, rel(first.key));
        for (;;) {
          if (epochMs() > deadline) throw new Error(`no first byte within ${killAfter / 1000} s`);
          if (m.exited()) throw new Error(`${target} exited: ${m.tail()}`);
          try {
            const fh = await open(file, 'r');
            try {
              const b = Buffer.alloc(first.size);
              const { bytesRead } = await fh.read(b, 0, b.length, 0);
              if (bytesRead > 0) {
                r.seconds = (epochMs() - m.startMs) / 1000;
                r.value = r.seconds;
                r.bytes = bytesRead;
                r.items = 1;
                r.verified = bytesRead === first.size && createHash('sha256').update(b).digest('hex') === first.sha256;
                r.mismatches = r.verified ? 0 : 1;
                break;
              }
            } finally { await fh.close(); }
          } catch { /* not mounted yet */ }
          await sleep(POLL_MS);
        }
      } else {
        await m.ready;
        const want = new Set(objs.map((x) => rel(x.key)));
        for (;;) {
          if (epochMs() > deadline) throw new Error(`listing incomplete after ${killAfter / 1000} s`);
          const names = await walkCount(m.dir, want.size + 10).catch(() => [] as string[]);
          if (names.length >= want.size) {
            r.seconds = (epochMs() - m.startMs) / 1000;
            r.value = r.seconds;
            r.items = names.length;
            r.mismatches = names.filter((n) => !want.has(n)).length + (names.length === want.size ? 0 : 1);
            r.verified = r.mismatches === 0;
            break;
          }
          await sleep(POLL_MS * 10);
        }
      }
      applyStats(r, m.stats());
    } finally {
      stops.delete(stopM);
      await m.stop();
    }
    return r;
  }

  if (sc.kind === 'random') {
    const big = objs.find((x) => x.key.includes('/large/'))!;
    const m = await startMount(target as 'FastFile' | 's3fs' | 'rclone', env);
    const stopM = () => m.stop();
    stops.add(stopM);
    try {
      await m.ready;
      const plan: ReadPlan = { kind: 'random', path: path.join(m.dir, rel(big.key)), fileSize: big.size, blockSize: sc.random.blockSize, ops: sc.random.ops, threads: sc.random.threads, seed: 7 + rep, maxSeconds: sc.maxSeconds };
      const res = await runReader(plan, path.join(env.runDir, 'plan-0.json'), sc.random.threads, killAfter);
      if (res.error) throw new Error(`reader: ${res.error}`);
      applyStats(r, m.stats());
      const offsets = randomOffsets(plan.seed, res.items, big.size, plan.blockSize);
      const source = sourceBytes(big);
      const h = createHash('sha256');
      for (const off of offsets) h.update(source.subarray(off, Math.min(big.size, off + plan.blockSize)));
      r.seconds = (res.endMs - res.startMs) / 1000;
      r.bytes = res.bytes;
      r.items = res.items;
      r.value = res.items / r.seconds;
      r.truncated = res.truncated;
      r.verified = h.digest('hex') === res.sha256[0];
      r.mismatches = r.verified ? 0 : 1;
    } finally {
      stops.delete(stopM);
      await m.stop();
    }
    return r;
  }

  // Sequential: each reader gets its batches of the dataset.
  const shards = assignBatches(objs, readers).filter((s) => s.length > 0);
  let startMs: number;
  let results: ReadResult[];
  let plans: ReadPlan[];
  if (style === 'mount') {
    const m = await startMount(target as 'FastFile' | 's3fs' | 'rclone', env);
    const stopM = () => m.stop();
    stops.add(stopM);
    try {
      await m.ready;
      plans = shards.map((s) => ({ kind: 'files', paths: s.map((x) => path.join(m.dir, rel(x.key))), maxSeconds: sc.maxSeconds }));
      results = await Promise.all(plans.map((p, i) => runReader(p, path.join(env.runDir, `plan-${i}.json`), 4, killAfter)));
      startMs = Math.min(...results.map((x) => x.startMs));
      applyStats(r, m.stats());
    } finally {
      stops.delete(stopM);
      await m.stop();
    }
  } else if (style === 'download') {
    const d = await runDownload(target as 'File' | 'aws', env, killAfter);
    startMs = d.startMs;
    applyStats(r, d.stats);
    plans = shards.map((s) => ({ kind: 'files', paths: s.map((x) => path.join(d.dir, rel(x.key))), maxSeconds: sc.maxSeconds }));
    results = await Promise.all(plans.map((p, i) => runReader(p, path.join(env.runDir, `plan-${i}.json`), 4, killAfter)));
  } else {
    const p = await startPipe(env, shards.map((s) => s.map((x) => x.key)));
    const stopP = () => p.stop();
    stops.add(stopP);
    try {
      plans = p.fifos.map((f, i) => ({ kind: 'stream', path: f, segments: shards[i]!.map((x) => x.size), maxSeconds: sc.maxSeconds }));
      results = await Promise.all(plans.map((pl, i) => runReader(pl, path.join(env.runDir, `plan-${i}.json`), 4, killAfter)));
      startMs = Math.min(...results.map((x) => x.startMs));
      applyStats(r, p.stats());
    } finally {
      stops.delete(stopP);
      await p.stop();
    }
  }
  const errors = results.map((x) => x.error).filter(Boolean);
  if (errors.length) throw new Error(`reader: ${errors[0]}`);
  const endMs = Math.max(...results.map((x) => x.endMs));
  r.seconds = (endMs - startMs) / 1000;
  r.bytes = results.reduce((n, x) => n + x.bytes, 0);
  r.items = results.reduce((n, x) => n + x.items, 0);
  r.truncated = results.some((x) => x.truncated);
  r.mismatches = results.reduce((n, x, i) => n + checkHashes(shards[i]!.map((o) => o.sha256), x), 0);
  // A stream cut by the time limit: its last object is checked as far as it was read.
  let partialOk = 0;
  results.forEach((x, i) => {
    if (!x.partial) return;
    const obj = shards[i]![x.items]!;
    if (createHash('sha256').update(sourceBytes(obj, 0, x.partial.bytes)).digest('hex') === x.partial.sha256) partialOk++;
    else r.mismatches++;
  });
  r.verified = r.mismatches === 0 && (r.items > 0 || partialOk > 0);
  r.value = sc.metric === 'files/s' ? r.items / r.seconds : r.bytes / 1e6 / r.seconds;
  return r;
}
