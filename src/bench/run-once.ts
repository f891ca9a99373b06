/**
 * One run of one target in one scenario: start it fresh (a cold cache), read with
 * reader processes (reader.ts), check every byte against the source's sha256,
 * record the target process's peak RSS and CPU time, stop it. A mount's or a Pipe host's
 * CPU time counts from the moment it is ready (the mount answers, the FIFOs exist); its
 * start-up is recorded apart (startupCpuSeconds), as it is paid once, not per GB. A
 * download's covers the whole process: its start-up is inside its timed span. Kinds:
 *  - sequential: reader i of N reads batches i, i+N, ... of BATCH_FILES files in key
 *    order, from the mount, the downloaded copy (time includes the download) or its
 *    Pipe FIFO; the figure is files/s or MB/s over the readers' span;
 *  - random: one reader with `threads` concurrent preads at seeded offsets of one
 *    large file on a fresh mount; checked against the source's bytes at those offsets;
 *  - ttfb: seconds from spawning the mount to the first file's bytes (polled);
 * Reader processes are started, and map the arena they keep bytes in (reader.ts), before
 * the target starts, and get their plan once it is ready: neither node's start-up nor the
 * arena is in any target's time, and a Pipe host gets no head start while readers load.
 * By default they hash after their timed span (ScenarioDef.readerHash), as the link limit
 * does, so a figure over the limit compares the data source with the link alone.
 *  - list: seconds from spawning the mount until a walk sees every key (the run's
 *    deadline is checked inside a walk too, so a stuck listing ends in time).
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, open, readdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { shuffled } from '../channels/shuffle.js';
import { sourceBytes, type SeededObject } from '../local/dataset.js';
import type { ProcStats } from './proc-stats.js';
import { epochMs, randomOffsets, type ReadPlan, type ReaderHashing, type ReadResult } from './read-plan.js';
import type { BenchConfig, ScenarioDef, TargetName } from './scenarios.js';
import { DIST_DIR, TARGET_STYLE, ensureSnapshot, runDownload, startMount, startPipe, type TargetEnv } from './targets.js';

const READER_PATH = path.join(DIST_DIR, 'bench', 'reader.js');
/**
 * Files per data-loader batch: reader i of N takes batches i, i+N, ... as PyTorch DataLoader
 * workers do. A dataset of fewer than N × 16 files (a few large shards) is cut into N batches
 * instead, one per reader, as an IterableDataset splits its shards over the workers; with
 * batches of 16, 4 readers of 4 files ran as one reader reading all four.
 */
const BATCH_FILES = 16;
/** Grace beyond a run's maxSeconds before its readers are killed (startup, the last file in flight). */
const READER_GRACE_MS = 60_000;
/** ttfb/list polls: 2 ms keeps the figure's resolution well under the ~0.1-2 s being measured. */
const POLL_MS = 2;

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
  /** Of cpuSeconds, the user CPU seconds; and the target's minor page faults over the same span (proc-stats.ts). */
  userCpuSeconds?: number;
  minorFaults?: number;
  /**
   * Mount and Pipe targets: CPU seconds the target spent before it was ready (process
   * start, listing, mount or FIFOs). Not in cpuSeconds: CPU s/GB is the cost of the bytes, and a fresh
   * daemon's ~0.8 s of start-up over a run of 0.1-0.3 GB would add 3-8 s/GB to it.
   */
  startupCpuSeconds?: number;
  /** The reader processes' CPU time spent reading (their timed spans, less inline hashing), summed. */
  readerCpuSeconds?: number;
  /** The reader processes' hashing CPU time (inline and after the span), summed. */
  readerHashCpuSeconds?: number;
  /** How the readers hashed, and the bytes they hashed inside the timed span (reader.ts). */
  readerHash?: 'after' | 'inline';
  readerInlineHashedBytes?: number;
  serverCpuSeconds?: number;
  proxyCpuSeconds?: number;
  /**
   * kind ttfb (issue 44), the breakdown beside the total: seconds from the mount command's
   * start until the mount answered (its folder in the mount table), the requests the proxy
   * had seen by the first byte (LIST, HEAD, GET; read-ahead sent with the first GET counts),
   * and the target's CPU seconds by the first byte (cpuSeconds is the same span here).
   */
  mountedSeconds?: number;
  requestsBeforeFirstByte?: number;
  /** The timed span (epoch ms), for the machine's busy figure (./machine-busy.ts). */
  spanStartMs?: number;
  spanEndMs?: number;
  /** Cores' worth of CPU the whole machine used over the timed span, all processes and the kernel. */
  machineBusyCores?: number;
  /**
   * Download targets (File mode, aws s3 cp): seconds from the download's start to its end
   * (File mode's host said "done"; aws exited), without the readers' first read of the
   * files that `seconds` also holds; and `value` over that span alone.
   */
  downloadSeconds?: number;
  downloadValue?: number;
  error?: string;
}

/** A reader process started and set up (its arena mapped), waiting for its plan. */
export interface PreparedReader {
  /** Sends the plan; the result, or an error when the process gave none. The kill timer starts here. */
  run(plan: ReadPlan): Promise<ReadResult>;
  /** Kills it (a run that failed before its plan was sent). */
  kill(): void;
}

/**
 * Starts a reader process (reader.ts, `-`) for plans hashed as `h` and waits until it has
 * mapped its arena, so the target's timed span holds neither process start-up nor set-up.
 */
export async function prepareReader(h: ReaderHashing, threads: number, killAfterMs: number): Promise<PreparedReader> {
  const child = spawn(process.execPath, [READER_PATH, '-'], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, UV_THREADPOOL_SIZE: String(Math.max(4, threads)) },
  });
  let out = '';
  let err = '';
  let readyCb: (() => void) | undefined;
  child.stdout.on('data', (b: Buffer) => {
    out += b.toString();
    if (readyCb && out.startsWith('ready\n')) { out = out.slice(6); readyCb(); readyCb = undefined; }
  });
  child.stderr.on('data', (b: Buffer) => { if (err.length < 4000) err += b.toString(); });
  child.stdin.on('error', () => {}); // EPIPE from a reader that died: its exit code says why
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const why = (code: number | null) => new Error(`reader exited (${code}) without a result: ${err.trim().split('\n').slice(-2).join(' ')}`);
  const ready = new Promise<void>((resolve) => { readyCb = resolve; });
  child.stdin.write(JSON.stringify({ hash: h.hash, keepBytes: h.keepBytes }) + '\n');
  const first = await Promise.race([ready.then(() => 'ready' as const), exited]);
  if (first !== 'ready') throw why(first);
  return {
    async run(plan) {
      const timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
      child.stdin.end(JSON.stringify(plan) + '\n');
      const code = await exited;
      clearTimeout(timer);
      const line = out.trim().split('\n').pop() ?? '';
      try {
        return JSON.parse(line) as ReadResult;
      } catch {
        throw why(code);
      }
    },
    kill() { if (child.exitCode === null) child.kill('SIGKILL'); },
  };
}

/** Prepares a reader for `plan` and runs it. */
export async function runReader(plan: ReadPlan, threads: number, killAfterMs: number): Promise<ReadResult> {
  return (await prepareReader(plan, threads, killAfterMs)).run(plan);
}

/**
 * How a run's readers hash (reader.ts): the scenario's mode, and for 'after' each reader's
 * share of the config's keep budget, no more than the `bytes` it will read.
 */
export function readerHashing(sc: ScenarioDef, config: BenchConfig, readers: number, bytes: number): ReaderHashing {
  if (sc.readerHash === 'inline') return { hash: 'inline' };
  return { hash: 'after', keepBytes: Math.min(bytes, Math.floor(config.readerKeepBytes / Math.max(1, readers))) };
}

/** The readers' figures of a run, summed into `r`. */
export function addReaderFigures(r: RunResult, results: ReadResult[]): void {
  if (results.every((x) => x.cpuSeconds !== undefined)) r.readerCpuSeconds = results.reduce((n, x) => n + x.cpuSeconds!, 0);
  if (results.every((x) => x.hashCpuSeconds !== undefined)) r.readerHashCpuSeconds = results.reduce((n, x) => n + x.hashCpuSeconds!, 0);
  r.readerInlineHashedBytes = results.reduce((n, x) => n + (x.inlineHashedBytes ?? 0), 0);
  const modes = new Set(results.map((x) => x.hash ?? 'inline'));
  r.readerHash = modes.has('inline') ? 'inline' : 'after';
}

/** Reader i's files: batches i, i+N, i+2N, ... of BATCH_FILES consecutive objects (fewer per batch when that leaves a reader none). */
export function assignBatches<T>(objects: T[], readers: number): T[][] {
  const out: T[][] = Array.from({ length: readers }, () => []);
  const size = Math.max(1, Math.min(BATCH_FILES, Math.ceil(objects.length / readers)));
  for (let b = 0; b * size < objects.length; b++) out[b % readers]!.push(...objects.slice(b * size, (b + 1) * size));
  return out;
}

export function checkHashes(expected: string[], got: ReadResult): number {
  let bad = 0;
  got.sha256.forEach((h, i) => { if (h !== expected[i]) bad++; });
  return bad;
}

/** Thrown by walkCount when its deadline passes, in the middle of a walk too. */
export class WalkDeadlineError extends Error { override name = 'WalkDeadlineError'; }

type Readdir = (p: string) => Promise<{ name: string; isDirectory(): boolean }[]>;
const readdirTyped: Readdir = (p) => readdir(p, { withFileTypes: true });

/**
 * Every file under `dir` (stops past `limitEntries`). Checks `deadlineMs` (epoch ms) before
 * each folder and races each readdir against it, so a listing stuck inside one walk (a
 * slow or hung mount) ends at the deadline, not when the walk would have finished; the
 * stuck readdir itself ends when the runner stops the mount.
 */
export async function walkCount(dir: string, limitEntries: number, deadlineMs = Infinity, list: Readdir = readdirTyped): Promise<string[]> {
  const out: string[] = [];
  const stack = [''];
  while (stack.length > 0 && out.length <= limitEntries) {
    const rel = stack.pop()!;
    const left = deadlineMs - epochMs();
    if (left <= 0) throw new WalkDeadlineError('deadline passed during the walk');
    let timer: NodeJS.Timeout | undefined;
    const late = Number.isFinite(left) ? new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new WalkDeadlineError('deadline passed in a readdir')), left); }) : undefined;
    try {
      const entries = late ? await Promise.race([list(path.join(dir, rel)), late]) : await list(path.join(dir, rel));
      for (const e of entries) {
        const r = rel ? `${rel}/${e.name}` : e.name;
        if (e.isDirectory()) stack.push(r); else out.push(r);
      }
    } finally {
      clearTimeout(timer);
    }
  }
  return out;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** The target's figures of the run: `s` at its end, less what it had spent by `since` (when it became ready: start-up is apart). */
export function applyStats(r: RunResult, s: ProcStats | undefined, since?: ProcStats): void {
  if (!s) return;
  r.peakRssBytes = s.peakRssBytes;
  r.cpuSeconds = s.cpuSeconds - (since?.cpuSeconds ?? 0);
  r.userCpuSeconds = s.userCpuSeconds - (since?.userCpuSeconds ?? 0);
  r.minorFaults = s.minorFaults - (since?.minorFaults ?? 0);
}

export async function runOnce(sc: ScenarioDef, target: TargetName, readers: number, objs: SeededObject[], env: TargetEnv, rep: number, stops: Set<() => Promise<void>>): Promise<RunResult> {
  const style = TARGET_STYLE[target];
  const r: RunResult = { rep, value: null, seconds: 0, bytes: 0, items: 0, verified: false, mismatches: 0, truncated: false };
  const rel = (key: string) => key.slice(env.prefix.length);
  const killAfter = sc.maxSeconds * 1000 + READER_GRACE_MS;
  await mkdir(env.runDir, { recursive: true });

  if (sc.kind === 'ttfb' || sc.kind === 'list') {
    // Issue 15: a snapshot scenario mounts sluice from a snapshot written once beforehand (untimed).
    if (sc.snapshot && target === 'FastFile') env = { ...env, snapshotFile: await ensureSnapshot(env, path.dirname(env.runDir)) };
    const requests0 = sc.kind === 'ttfb' ? (await env.proxyStats?.())?.requests : undefined;
    const m = await startMount(target as 'FastFile' | 's3fs' | 'rclone', env);
    const stopM = () => m.stop();
    stops.add(stopM);
    let mountedMs: number | undefined;
    m.ready.then(() => { mountedMs = epochMs(); }, () => undefined);
    try {
      const deadline = m.startMs + killAfter;
      if (sc.kind === 'ttfb') {
        const first = objs[0]!;
        const file = path.join(m.dir, rel(first.key));
        // The first readBytes of the file (issue 44: the first MiB of a large one), else all of it.
        const want = Math.min(first.size, sc.readBytes ?? first.size);
        for (;;) {
          if (epochMs() > deadline) throw new Error(`no first byte within ${killAfter / 1000} s`);
          if (m.exited()) throw new Error(`${target} exited: ${m.tail()}`);
          try {
            const fh = await open(file, 'r');
            try {
              const b = Buffer.alloc(want);
              let bytesRead = 0;
              for (;;) {
                const n = (await fh.read(b, bytesRead, want - bytesRead, bytesRead)).bytesRead;
                bytesRead += n;
                if (n === 0 || bytesRead === want) break;
              }
              if (bytesRead > 0) {
                r.seconds = (epochMs() - m.startMs) / 1000;
                r.value = r.seconds;
                r.bytes = bytesRead;
                r.items = 1;
                const requests1 = requests0 !== undefined ? (await env.proxyStats?.())?.requests : undefined;
                if (requests1 !== undefined) r.requestsBeforeFirstByte = requests1 - requests0!;
                if (mountedMs !== undefined) r.mountedSeconds = (mountedMs - m.startMs) / 1000;
                r.verified = bytesRead === want && (want === first.size
                  ? createHash('sha256').update(b).digest('hex') === first.sha256
                  : b.equals(sourceBytes(first, 0, want)));
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
          const names = await walkCount(m.dir, want.size + 10, deadline).catch((err: unknown) => {
            if (err instanceof WalkDeadlineError) throw new Error(`listing incomplete after ${killAfter / 1000} s (a walk was still running)`);
            return [] as string[];
          });
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
    const hashing = readerHashing(sc, env.config, 1, sc.random.ops * sc.random.blockSize);
    const reader = await prepareReader(hashing, sc.random.threads, killAfter);
    let m: Awaited<ReturnType<typeof startMount>> | undefined;
    const stopM = () => m?.stop() ?? Promise.resolve();
    stops.add(stopM);
    try {
      m = await startMount(target as 'FastFile' | 's3fs' | 'rclone', env);
      await m.ready;
      const ready = m.stats();
      r.startupCpuSeconds = ready?.cpuSeconds ?? 0;
      const plan: ReadPlan = { kind: 'random', path: path.join(m.dir, rel(big.key)), fileSize: big.size, blockSize: sc.random.blockSize, ops: sc.random.ops, threads: sc.random.threads, seed: 7 + rep, maxSeconds: sc.maxSeconds, ...hashing };
      const res = await reader.run(plan);
      if (res.error) throw new Error(`reader: ${res.error}`);
      applyStats(r, m.stats(), ready);
      const offsets = randomOffsets(plan.seed, res.items, big.size, plan.blockSize);
      const source = sourceBytes(big);
      const h = createHash('sha256');
      for (const off of offsets) h.update(source.subarray(off, Math.min(big.size, off + plan.blockSize)));
      r.seconds = (res.endMs - res.startMs) / 1000;
      r.spanStartMs = res.startMs;
      r.spanEndMs = res.endMs;
      r.bytes = res.bytes;
      r.items = res.items;
      addReaderFigures(r, [res]);
      r.value = res.items / r.seconds;
      r.truncated = res.truncated;
      r.verified = h.digest('hex') === res.sha256[0];
      r.mismatches = r.verified ? 0 : 1;
    } finally {
      reader.kill();
      stops.delete(stopM);
      await stopM();
    }
    return r;
  }

  // Sequential: each reader gets its batches of the dataset (a warm mount: but the first object;
  // a warm Pipe: all of them, twice, see Scenario.warm).
  const warm = sc.warm === true && style !== 'download';
  // Issue 48: a shuffled scenario reads one seeded shuffle of the dataset (the same for every target and repetition).
  const timed = warm && style === 'mount' ? objs.slice(1) : objs;
  const ordered = sc.order === 'listing' ? timed : shuffled(timed, sc.seed, 0);
  const shards = assignBatches(ordered, readers).filter((s) => s.length > 0);
  if (sc.order === 'order-file' && target === 'FastFile') {
    // Written whole before the mount starts, renamed into place as the documented Sampler does.
    const file = path.join(env.runDir, 'order.txt');
    await writeFile(`${file}.tmp`, ordered.map((x) => rel(x.key)).join('\n') + '\n');
    await rename(`${file}.tmp`, file);
    env = { ...env, orderFile: file };
  }
  const hashing = (i: number) => readerHashing(sc, env.config, shards.length, shards[i]!.reduce((n, x) => n + x.size, 0));
  let startMs: number;
  let results: ReadResult[];
  let plans: ReadPlan[];
  // Readers start and map their arenas before the target starts: neither is in its time.
  const prepared = await Promise.all(shards.map((_, i) => prepareReader(hashing(i), 4, killAfter)));
  const runAll = (ps: ReadPlan[]) => Promise.all(ps.map((p, i) => prepared[i]!.run(p)));
  try {
    if (style === 'mount') {
      const m = await startMount(target as 'FastFile' | 's3fs' | 'rclone', env);
      const stopM = () => m.stop();
      stops.add(stopM);
      try {
        await m.ready;
        // CPU from here on is the bytes' (see RunResult.startupCpuSeconds); the warm-up read's is not.
        let warmed = m.stats();
        r.startupCpuSeconds = warmed?.cpuSeconds ?? 0;
        if (warm) {
          const w = await runReader({ kind: 'files', paths: [path.join(m.dir, rel(objs[0]!.key))], maxSeconds: sc.maxSeconds, ...readerHashing(sc, env.config, 1, objs[0]!.size) }, 4, killAfter);
          if (w.error || checkHashes([objs[0]!.sha256], w) > 0 || w.items !== 1) throw new Error(`warm-up read of ${objs[0]!.key}: ${w.error ?? 'wrong bytes'}`);
          warmed = m.stats();
          env.afterWarmUp?.();
        }
        plans = shards.map((s, i) => ({ kind: 'files', paths: s.map((x) => path.join(m.dir, rel(x.key))), maxSeconds: sc.maxSeconds, ...hashing(i) }));
        results = await runAll(plans);
        startMs = Math.min(...results.map((x) => x.startMs));
        applyStats(r, m.stats(), warmed);
      } finally {
        stops.delete(stopM);
        await m.stop();
      }
    } else if (style === 'download') {
      const d = await runDownload(target as 'File' | 'aws', env, killAfter);
      startMs = d.startMs;
      r.downloadSeconds = (d.endMs - d.startMs) / 1000;
      applyStats(r, d.stats);
      plans = shards.map((s, i) => ({ kind: 'files', paths: s.map((x) => path.join(d.dir, rel(x.key))), maxSeconds: sc.maxSeconds, ...hashing(i) }));
      results = await runAll(plans);
    } else {
      const p = await startPipe(env, shards.map((s) => s.map((x) => x.key)), warm ? 2 : 1);
      const stopP = () => p.stop();
      stops.add(stopP);
      try {
        // As for a mount: CPU from here on (its FIFOs exist) is the bytes'; start-up is apart.
        let ready = p.stats();
        r.startupCpuSeconds = ready?.cpuSeconds ?? 0;
        const streams = (epoch: number, h: (i: number) => ReaderHashing): ReadPlan[] => p.epochFifos[epoch]!.map((f, i) => ({ kind: 'stream', path: f, segments: shards[i]!.map((x) => x.size), maxSeconds: sc.maxSeconds, ...h(i) }));
        if (warm) {
          // Epoch 0, untimed, by readers of its own (a prepared reader runs once) that hash as
          // they read (nothing kept), every object's bytes checked.
          const w = await Promise.all(streams(0, () => ({ hash: 'inline' })).map((plan) => runReader(plan, 4, killAfter)));
          const bad = w.findIndex((x, i) => x.error || x.truncated || x.items !== shards[i]!.length || checkHashes(shards[i]!.map((o) => o.sha256), x) > 0);
          if (bad >= 0) {
            const x = w[bad]!;
            throw new Error(`warm-up epoch of Pipe channel ${bad}: ${x.error ?? (x.truncated ? 'cut off by maxSeconds' : x.items !== shards[bad]!.length ? `${x.items} of ${shards[bad]!.length} objects` : 'wrong bytes')}`);
          }
          ready = p.stats();
          env.afterWarmUp?.();
        }
        plans = streams(warm ? 1 : 0, hashing);
        results = await runAll(plans);
        startMs = Math.min(...results.map((x) => x.startMs));
        applyStats(r, p.stats(), ready);
      } finally {
        stops.delete(stopP);
        await p.stop();
      }
    }
  } finally {
    for (const p of prepared) p.kill();
  }
  const errors = results.map((x) => x.error).filter(Boolean);
  if (errors.length) throw new Error(`reader: ${errors[0]}`);
  const endMs = Math.max(...results.map((x) => x.endMs));
  r.seconds = (endMs - startMs) / 1000;
  r.spanStartMs = startMs;
  r.spanEndMs = endMs;
  r.bytes = results.reduce((n, x) => n + x.bytes, 0);
  r.items = results.reduce((n, x) => n + x.items, 0);
  addReaderFigures(r, results);
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
  const over = (seconds: number) => (sc.metric === 'files/s' ? r.items / seconds : r.bytes / 1e6 / seconds);
  r.value = over(r.seconds);
  if (r.downloadSeconds !== undefined && r.downloadSeconds > 0) r.downloadValue = over(r.downloadSeconds);
  return r;
}
