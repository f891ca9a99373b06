/**
 * How each target is started against the proxy, the same way every time:
 *  - mounts (sluice FastFile, s3fs-fuse, rclone mount): spawned in the foreground
 *    as their own process at `startMs`; ready when the folder appears in the mount
 *    table; stopped with SIGTERM, then a lazy unmount as a last resort;
 *  - downloads (sluice File mode, `aws s3 cp --recursive`): run to completion
 *    into a fresh folder, then read from local disk;
 *  - Pipe: sluice's Pipe channels in a host process, read through FIFOs.
 * Each target's own process is sampled for peak RSS and CPU time (proc-stats.ts).
 * Peers are "available" when their binary is on PATH; sluice's modes when this
 * build has them. Unavailable targets are reported with the reason, not run.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { detachMount, mountAt } from '../fuse/mountpoint.js';
import { ProcSampler, type ProcStats } from './proc-stats.js';
import { epochMs } from './read-plan.js';
import type { BenchConfig, TargetName } from './scenarios.js';
import type { HostArgs } from './host.js';

export const DIST_DIR = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
export const CLI_PATH = path.join(DIST_DIR, 'cli.js');
const HOST_PATH = path.join(DIST_DIR, 'bench', 'host.js');

/** A mount (ours or a peer's) must answer within 60 s even on a loaded 2-core machine, or the run fails. */
const READY_TIMEOUT_MS = 60_000;
/** Mount-table poll interval: 5 ms resolution on TTFB/ready figures of ~0.1-2 s. */
const POLL_MS = 5;
/** After SIGTERM, wait this long for a clean unmount before detaching lazily. */
const STOP_GRACE_MS = 5_000;
/** 16 connections: what the limit uses, so sluice's pool and the peers' parallelism match the link's. */
export const DEFAULT_CONNECTIONS = 16;
const MiB = 1024 * 1024;

export interface TargetEnv {
  endpoint: string;
  bucket: string;
  /** Dataset prefix, ending in '/'. */
  prefix: string;
  credentials: { accessKeyId: string; secretAccessKey: string };
  /** A fresh folder for this run (mountpoint, caches, downloads). */
  runDir: string;
  config: BenchConfig;
  /** For an https endpoint: the PEM file of the run's CA, given to each client through its own option. */
  caFile?: string;
  /** Issue 15: sluice mounts with --snapshot FILE (written by ensureSnapshot). */
  snapshotFile?: string;
  /** Issue 48: sluice mounts with --order-file FILE (written by the runner before the mount). */
  orderFile?: string;
  /** The latency proxy's counts so far (requests): kind ttfb counts the requests sent by the first byte. */
  proxyStats?: () => Promise<{ requests: number }>;
  /** Called once a warm scenario's untimed warm-up is done: the runner's own CPU samples (s3rver, proxy) start there. */
  afterWarmUp?: () => void;
}

export const TARGET_ROLE: Record<TargetName, 'sluice' | 'peer'> = { File: 'sluice', FastFile: 'sluice', Pipe: 'sluice', s3fs: 'peer', rclone: 'peer', aws: 'peer' };
export const TARGET_STYLE: Record<TargetName, 'mount' | 'download' | 'pipe'> = { File: 'download', FastFile: 'mount', Pipe: 'pipe', s3fs: 'mount', rclone: 'mount', aws: 'download' };

export function onPath(bin: string): string | undefined {
  const r = spawnSync('sh', ['-c', `command -v ${bin}`], { encoding: 'utf8' });
  const p = r.stdout.trim();
  return r.status === 0 && p ? p : undefined;
}

/** Why a target cannot run here, or undefined when it can. Cached per process. */
const availability = new Map<TargetName, string | undefined>();
export function whyUnavailable(t: TargetName): string | undefined {
  if (availability.has(t)) return availability.get(t);
  let why: string | undefined;
  switch (t) {
    case 's3fs': why = onPath('s3fs') ? undefined : 's3fs is not installed (apt-get install -y s3fs)'; break;
    case 'rclone': why = onPath('rclone') ? undefined : 'rclone is not installed (apt-get install -y rclone)'; break;
    case 'aws': why = awsBinary() ? undefined : 'the aws CLI is not installed (pip install awscli)'; break;
    case 'FastFile': {
      const r = spawnSync(process.execPath, [CLI_PATH, 'mount', '--help'], { encoding: 'utf8', timeout: 30_000 });
      why = r.status === 0 ? undefined : `sluice mount is not available in this build (${(r.stderr || r.stdout).trim().split('\n')[0]})`;
      break;
    }
    case 'File':
    case 'Pipe': {
      const r = spawnSync(process.execPath, [HOST_PATH, '--check', t], { encoding: 'utf8', timeout: 30_000 });
      try {
        const reason = (JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}') as { reason?: string | null }).reason;
        why = reason ? `${t} mode is not available in this build: ${reason}` : undefined;
      } catch {
        why = `${t} mode is not available in this build (${r.stderr.trim().split('\n')[0]})`;
      }
      break;
    }
  }
  availability.set(t, why);
  return why;
}

/** The aws CLI; a pyenv shim is resolved to the real script so its ~0.5 s of shell hooks do not count against aws. */
let awsPath: string | undefined | null = null;
function awsBinary(): string | undefined {
  if (awsPath !== null) return awsPath;
  let p = onPath('aws') ?? (existsSync('/root/.pyenv/shims/aws') ? '/root/.pyenv/shims/aws' : undefined);
  if (p?.includes('/shims/')) {
    const r = spawnSync('pyenv', ['which', 'aws'], { encoding: 'utf8' });
    if (r.status === 0 && r.stdout.trim()) p = r.stdout.trim();
  }
  awsPath = p;
  return p;
}

function withoutKeys(env: NodeJS.ProcessEnv, keys: string[]): NodeJS.ProcessEnv {
  const out = { ...env };
  for (const k of keys) delete out[k];
  return out;
}

function sizeMiB(n: number): string {
  return `${Math.max(1, Math.round(n / MiB))}`;
}

/** A child whose stderr tail is kept for error messages. */
function launch(cmd: string, args: string[], env: NodeJS.ProcessEnv): { child: ChildProcess; tail: () => string } {
  const child = spawn(cmd, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
  let tail = '';
  const keep = (b: Buffer) => { tail = (tail + b.toString()).slice(-4000); };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  child.on('error', (e) => keep(Buffer.from(String(e))));
  return { child, tail: () => tail.trim().split('\n').slice(-3).join(' | ') };
}

export interface RunningMount {
  dir: string;
  startMs: number;
  pid: number;
  /** Resolves when the folder is in the mount table; rejects if the process exits first or READY_TIMEOUT_MS passes. */
  ready: Promise<void>;
  /** Figures of the target's process so far. */
  stats(): ProcStats | undefined;
  stop(): Promise<void>;
  exited(): boolean;
  tail(): string;
}

function mountCommand(t: 'FastFile' | 's3fs' | 'rclone', e: TargetEnv, dir: string): { cmd: string; args: string[]; env: NodeJS.ProcessEnv } {
  const cred = { AWS_ACCESS_KEY_ID: e.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: e.credentials.secretAccessKey, AWS_REGION: 'us-east-1' };
  const extra = e.config.peerArgs;
  switch (t) {
    case 'FastFile':
      return {
        cmd: process.execPath,
        args: [CLI_PATH, 'mount', `s3://${e.bucket}/${e.prefix}`, dir, '--endpoint', e.endpoint, '--path-style', '--region', 'us-east-1',
          '--metrics-port=-1', '--log-level', 'warn', '--cache-size', String(e.config.sluice.cacheSize), ...e.config.sluice.args,
          ...(e.snapshotFile !== undefined ? ['--snapshot', e.snapshotFile] : []),
          ...(e.orderFile !== undefined ? ['--order-file', e.orderFile] : [])],
        env: { ...process.env, ...cred, ...(e.caFile ? { AWS_CA_BUNDLE: e.caFile } : {}) },
      };
    case 's3fs':
      return {
        cmd: 's3fs',
        args: [`${e.bucket}:/${e.prefix.replace(/\/$/, '')}`, dir, '-f', '-o', 'ro', '-o', `url=${e.endpoint}`, '-o', 'use_path_request_style',
          '-o', `passwd_file=${path.join(e.runDir, 's3fs.passwd')}`, '-o', 'endpoint=us-east-1', ...extra.s3fs.flatMap((o) => (o.startsWith('-') ? [o] : ['-o', o]))],
        // s3fs's libcurl takes its CA file from CURL_CA_BUNDLE.
        env: { ...process.env, ...(e.caFile ? { CURL_CA_BUNDLE: e.caFile } : {}) },
      };
    case 'rclone':
      return {
        cmd: 'rclone',
        args: ['mount', `bench:${e.bucket}/${e.prefix}`, dir, '--read-only', '--cache-dir', path.join(e.runDir, 'rclone-cache'), ...(e.caFile ? ['--ca-cert', e.caFile] : []), ...extra.rclone],
        env: {
          // rclone's S3 backend fails on AWS_CA_BUNDLE ("unsupported transport"); the endpoint is plain http on loopback.
          ...withoutKeys(process.env, ['AWS_CA_BUNDLE']),
          RCLONE_CONFIG: path.join(e.runDir, 'rclone.conf'),
          RCLONE_CONFIG_BENCH_TYPE: 's3', RCLONE_CONFIG_BENCH_PROVIDER: 'Other', RCLONE_CONFIG_BENCH_ENDPOINT: e.endpoint,
          RCLONE_CONFIG_BENCH_ACCESS_KEY_ID: e.credentials.accessKeyId, RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY: e.credentials.secretAccessKey,
          RCLONE_CONFIG_BENCH_REGION: 'us-east-1', RCLONE_CONFIG_BENCH_FORCE_PATH_STYLE: 'true',
        },
      };
  }
}

/** The exact command line of a target, for the report (credentials are in the environment or a file, never here). */
export function describeCommand(t: TargetName, e: TargetEnv): string {
  if (t === 'FastFile' || t === 's3fs' || t === 'rclone') {
    const c = mountCommand(t, e, 'MNT');
    return [t === 'FastFile' ? 'node dist/cli.js' : c.cmd, ...(t === 'FastFile' ? c.args.slice(1) : c.args)].join(' ').replaceAll(e.runDir, 'RUN');
  }
  if (t === 'aws') return awsCommand(e, 'DIR').args.join(' ').replaceAll(e.runDir, 'RUN');
  return `node dist/bench/host.js (sluice ${t} mode, part size ${sizeMiB(8 * MiB)} MiB, ${DEFAULT_CONNECTIONS} connections)`;
}

export async function startMount(t: 'FastFile' | 's3fs' | 'rclone', e: TargetEnv): Promise<RunningMount> {
  const dir = path.join(e.runDir, `mnt-${t}`);
  await mkdir(dir, { recursive: true });
  if (t === 's3fs') await writeFile(path.join(e.runDir, 's3fs.passwd'), `${e.credentials.accessKeyId}:${e.credentials.secretAccessKey}\n`, { mode: 0o600 });
  if (t === 'rclone') await writeFile(path.join(e.runDir, 'rclone.conf'), '');
  const c = mountCommand(t, e, dir);
  const startMs = epochMs();
  const { child, tail } = launch(c.cmd, c.args, c.env);
  const sampler = new ProcSampler(child.pid ?? -1);
  let exited = false;
  const exitedP = new Promise<void>((resolve) => child.once('exit', () => { exited = true; resolve(); }));
  const ready = (async () => {
    while (epochMs() - startMs < READY_TIMEOUT_MS) {
      if (exited) throw new Error(`${t} exited before mounting: ${tail()}`);
      if (await mountAt(dir)) return;
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
    throw new Error(`${t} did not mount within ${READY_TIMEOUT_MS} ms: ${tail()}`);
  })();
  ready.catch(() => {}); // observed by the caller; never an unhandled rejection
  let last: ProcStats | undefined;
  return {
    dir, startMs, pid: child.pid ?? -1, ready,
    stats: () => (last = sampler.sample() ?? last),
    exited: () => exited,
    tail,
    async stop() {
      last = sampler.stop() ?? last;
      if (!exited) {
        child.kill('SIGTERM');
        await Promise.race([exitedP, new Promise((r) => setTimeout(r, STOP_GRACE_MS))]);
      }
      if (await mountAt(dir)) await detachMount(dir);
      if (!exited) {
        child.kill('SIGKILL');
        await Promise.race([exitedP, new Promise((r) => setTimeout(r, STOP_GRACE_MS))]);
      }
    },
  };
}

function awsCommand(e: TargetEnv, dir: string): { cmd: string; args: string[]; env: NodeJS.ProcessEnv; config: string } {
  const settings = e.config.peerArgs.aws.filter((a) => !a.startsWith('-') && a.includes('='));
  const flags = e.config.peerArgs.aws.filter((a) => !settings.includes(a));
  const config = ['[default]', 'region = us-east-1', 's3 =', '  addressing_style = path', ...settings.map((s) => `  ${s.replace('=', ' = ')}`)].join('\n') + '\n';
  return {
    cmd: awsBinary() ?? 'aws',
    args: ['aws', 's3', 'cp', '--recursive', `s3://${e.bucket}/${e.prefix}`, dir, '--endpoint-url', e.endpoint, '--only-show-errors', '--no-progress', ...flags],
    env: {
      ...process.env, AWS_ACCESS_KEY_ID: e.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: e.credentials.secretAccessKey,
      AWS_CONFIG_FILE: path.join(e.runDir, 'aws.config'), AWS_SHARED_CREDENTIALS_FILE: '/dev/null', AWS_DEFAULT_REGION: 'us-east-1',
      ...(e.caFile ? { AWS_CA_BUNDLE: e.caFile } : {}),
    },
    config,
  };
}

export interface DownloadResult {
  dir: string;
  startMs: number;
  endMs: number;
  stats: ProcStats | undefined;
}

/** Runs a download target to completion into a fresh folder under runDir. */
export async function runDownload(t: 'File' | 'aws', e: TargetEnv, timeoutMs: number): Promise<DownloadResult & { hostStop?: () => Promise<void> }> {
  const dir = path.join(e.runDir, `dl-${t}`);
  await mkdir(dir, { recursive: true });
  let cmd: string;
  let args: string[];
  let env: NodeJS.ProcessEnv;
  let outDir = dir;
  if (t === 'aws') {
    const c = awsCommand(e, dir);
    await writeFile(path.join(e.runDir, 'aws.config'), c.config);
    cmd = c.cmd; args = c.args.slice(1); env = c.env;
  } else {
    const hostArgs: HostArgs = {
      mode: 'File', bucket: e.bucket, prefix: e.prefix, endpoint: e.endpoint, credentials: e.credentials, dataDir: dir, ...(e.caFile ? { caFile: e.caFile } : {}),
      partSize: 8 * MiB, maxInflight: 512 * MiB, maxConnections: DEFAULT_CONNECTIONS,
    };
    const argsFile = path.join(e.runDir, 'host-file.json');
    await writeFile(argsFile, JSON.stringify(hostArgs));
    cmd = process.execPath; args = [HOST_PATH, argsFile]; env = { ...process.env, SLUICE_LOG_LEVEL: 'warn' };
    outDir = path.join(dir, 'bench');
  }
  const startMs = epochMs();
  const { child, tail } = launch(cmd, args, env);
  const sampler = new ProcSampler(child.pid ?? -1);
  const exitedP = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let killTimer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => { killTimer = setTimeout(() => resolve('timeout'), timeoutMs); });
  try {
    if (t === 'aws') {
      const code = await Promise.race([exitedP, timeout]);
      const endMs = epochMs();
      const stats = sampler.stop();
      if (code === 'timeout') { child.kill('SIGKILL'); throw new Error(`aws s3 cp did not finish within ${timeoutMs / 1000} s`); }
      if (code !== 0) throw new Error(`aws s3 cp failed (exit ${code}): ${tail()}`);
      return { dir: outDir, startMs, endMs, stats };
    }
    // The host prints {"done":...} when the download completed, then waits for stdin to close.
    const done = new Promise<void>((resolve, reject) => {
      let buf = '';
      child.stdout!.on('data', (b: Buffer) => {
        buf += b.toString();
        for (const line of buf.split('\n').slice(0, -1)) {
          try {
            const m = JSON.parse(line) as { done?: boolean; error?: string };
            if (m.done) resolve();
            if (m.error) reject(new Error(`File mode host: ${m.error}`));
          } catch { /* a log line */ }
        }
        buf = buf.slice(buf.lastIndexOf('\n') + 1);
      });
      void exitedP.then((code) => reject(new Error(`File mode host exited (${code}): ${tail()}`)));
    });
    const r = await Promise.race([done, timeout]);
    const endMs = epochMs();
    const stats = sampler.stop();
    child.stdin!.end();
    if (r === 'timeout') { child.kill('SIGKILL'); throw new Error(`File mode did not finish within ${timeoutMs / 1000} s`); }
    await Promise.race([exitedP, new Promise((res) => setTimeout(res, STOP_GRACE_MS))]);
    return { dir: outDir, startMs, endMs, stats };
  } finally {
    clearTimeout(killTimer);
    sampler.stop();
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

export interface RunningPipe {
  startMs: number;
  /** Epoch 0's FIFO of each reader's channel. */
  fifos: string[];
  /** Each epoch's FIFOs (epochFifos[0] is `fifos`). */
  epochFifos: string[][];
  stats(): ProcStats | undefined;
  stop(): Promise<void>;
}

/**
 * Starts sluice's Pipe channels, one per reader, each serving `epochs` epochs of its shard;
 * resolves once epoch 0's FIFOs exist.
 */
export async function startPipe(e: TargetEnv, shards: string[][], epochs = 1): Promise<RunningPipe> {
  const dataDir = path.join(e.runDir, 'pipe');
  await mkdir(dataDir, { recursive: true });
  const hostArgs: HostArgs = {
    mode: 'Pipe', bucket: e.bucket, prefix: e.prefix, endpoint: e.endpoint, credentials: e.credentials, dataDir, ...(e.caFile ? { caFile: e.caFile } : {}),
    // 128 MiB in flight in all: Pipe's own default for one channel, shared by the readers' channels.
    partSize: 8 * MiB, maxInflight: 128 * MiB, maxConnections: DEFAULT_CONNECTIONS, shards, epochs,
  };
  const argsFile = path.join(e.runDir, 'host-pipe.json');
  await writeFile(argsFile, JSON.stringify(hostArgs));
  const startMs = epochMs();
  const { child, tail } = launch(process.execPath, [HOST_PATH, argsFile], { ...process.env, SLUICE_LOG_LEVEL: 'warn' });
  const sampler = new ProcSampler(child.pid ?? -1);
  const exitedP = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const epochFifos = await new Promise<string[][]>((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`Pipe host did not start within ${READY_TIMEOUT_MS} ms: ${tail()}`)), READY_TIMEOUT_MS);
    child.stdout!.on('data', (b: Buffer) => {
      buf += b.toString();
      for (const line of buf.split('\n').slice(0, -1)) {
        try {
          const m = JSON.parse(line) as { fifos?: string[]; epochFifos?: string[][]; error?: string };
          if (m.fifos) { clearTimeout(timer); resolve(m.epochFifos ?? [m.fifos]); }
          if (m.error) { clearTimeout(timer); reject(new Error(`Pipe host: ${m.error}`)); }
        } catch { /* a log line */ }
      }
      buf = buf.slice(buf.lastIndexOf('\n') + 1);
    });
    void exitedP.then(() => { clearTimeout(timer); reject(new Error(`Pipe host exited: ${tail()}`)); });
  }).catch(async (err: unknown) => { child.kill('SIGKILL'); sampler.stop(); throw err; });
  let last: ProcStats | undefined;
  return {
    startMs, fifos: epochFifos[0]!, epochFifos,
    stats: () => (last = sampler.sample() ?? last),
    async stop() {
      last = sampler.stop() ?? last;
      child.stdin!.end();
      child.kill('SIGTERM');
      await Promise.race([exitedP, new Promise((r) => setTimeout(r, STOP_GRACE_MS))]);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}

// ---- issue 15: snapshots for start-up scenarios ----------------------------------------

/** Snapshots written in this bench run, by dataset location: each is written once. */
const snapshots = new Map<string, Promise<string>>();

/**
 * The snapshot of the dataset at `e` (in `dir`), written once per bench run with
 * `sluice snapshot` through the same endpoint. Its write time and the command's peak RSS
 * are printed (the round trip's figures; the load is part of every mount from it).
 */
export function ensureSnapshot(e: TargetEnv, dir: string): Promise<string> {
  const id = `${e.endpoint} ${e.bucket}/${e.prefix}`;
  let p = snapshots.get(id);
  if (!p) {
    const file = path.join(dir, `${e.bucket}-${e.prefix.replace(/[^A-Za-z0-9]+/g, '_')}.snap.gz`);
    p = (async () => {
      const t0 = performance.now();
      // Not spawnSync: the bench's proxies may share this event loop.
      const r = await new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
        const c = spawn('/bin/sh', ['-c', 'command -v /usr/bin/time >/dev/null && exec /usr/bin/time -f "%M" "$@" || exec "$@"', 'sh', process.execPath, CLI_PATH, 'snapshot', `s3://${e.bucket}/${e.prefix}`, file,
          '--endpoint', e.endpoint, '--path-style', '--region', 'us-east-1', '--log-level', 'warn',
          // s3rver walks a whole folder (a stat per file) for every LIST page: at 100,000 keys on a
          // loaded machine a page took over the default 10 s, 10 times in a row (measured), and
          // the snapshot failed. A slow local server is not what the scenario measures.
          '--request-timeout', '120000'], {
          stdio: ['ignore', 'pipe', 'pipe'], timeout: 600_000,
          env: { ...process.env, AWS_ACCESS_KEY_ID: e.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: e.credentials.secretAccessKey },
        });
        let stdout = '';
        let stderr = '';
        c.stdout!.on('data', (d: Buffer) => { stdout += d; });
        c.stderr!.on('data', (d: Buffer) => { stderr += d; });
        c.on('close', (status) => resolve({ status, stdout, stderr }));
      });
      // /usr/bin/time adds its own lines (peak RSS, "Command exited with non-zero status N"): skip them.
      if (r.status !== 0) throw new Error(`sluice snapshot failed (exit ${r.status}): ${(r.stderr || r.stdout || '').trim().split('\n').filter((l) => !/^\d+\s*$|^Command exited with non-zero status/.test(l)).pop() ?? ''}`);
      const peakKb = Number(/^(\d+)\s*$/m.exec(r.stderr)?.[1] ?? NaN);
      process.stderr.write(`bench: snapshot of s3://${e.bucket}/${e.prefix}: ${r.stdout.trim()} (wall ${((performance.now() - t0) / 1000).toFixed(2)} s${Number.isFinite(peakKb) ? `, peak RSS ${(peakKb / 1024).toFixed(0)} MiB` : ''})\n`);
      return file;
    })();
    snapshots.set(id, p);
  }
  return p;
}
