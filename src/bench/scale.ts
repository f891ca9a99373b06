/**
 * The listing cost curve (issue 46): how time, CPU and memory grow with the number of
 * objects. For each size N (folders of `perFolder` objects) the synthetic S3
 * (./synthetic-s3.ts, in this process: no disk, no per-object memory) serves the keys, and
 * one after another, each a fresh process:
 *  - `sluice snapshot` of the prefix: wall time, CPU, peak RSS;
 *  - a live `sluice mount`: time from its start until the whole listing is in (the
 *    sluice_listing_seconds gauge appears on /metrics), CPU and peak RSS by then;
 *  - `sluice mount --snapshot` of that snapshot: the same, from the snapshot file;
 *  - `rclone lsf -R --fast-list` of the prefix (when rclone is installed): wall, CPU, peak RSS.
 * Each figure is also given per object, so that growth shows as a rising per-object cost.
 * `clis` names the sluice builds to compare (e.g. this tree's and main's), run side by side.
 * The scenario file (bench/scenarios/scale.yaml) has `kind: scale`; see it for the fields.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { ConfigError } from '../errors.js';
import { ProcSampler, type ProcStats } from './proc-stats.js';
import { readScenarioFile } from './scenarios.js';
import { startSyntheticS3 } from './synthetic-s3.js';
import { detachMount, mountAt } from '../fuse/mountpoint.js';

export interface ScaleConfig {
  sizes: number[];
  perFolder: number;
  /** Reply delay of the synthetic S3 (its time to first byte), ms. */
  delayMs: number;
  /** Label -> path of a sluice cli.js. */
  clis: Record<string, string>;
  rclone: boolean;
  /** Bound on one step, seconds. */
  maxSeconds: number;
}

export interface ScaleFigure {
  objects: number;
  step: string;
  seconds: number;
  cpuSeconds: number;
  peakRssBytes: number;
}

const BUCKET = 'synth';
const ROOT = 'data/';
const CRED = { AWS_ACCESS_KEY_ID: 'synthetic', AWS_SECRET_ACCESS_KEY: 'synthetic', AWS_REGION: 'us-east-1' };
/** Poll period of the mount's /metrics: 200 ms, small against listings of seconds. */
const POLL_MS = 200;

export function isScaleFile(file: string, text: string): boolean {
  const doc = parseYaml(text) as { kind?: unknown } | null;
  void file;
  return doc !== null && typeof doc === 'object' && doc.kind === 'scale';
}

export function parseScale(file: string, text: string, baseDir: string): ScaleConfig {
  const d = parseYaml(text) as Record<string, unknown>;
  const sizes = d.sizes;
  if (!Array.isArray(sizes) || sizes.length === 0 || !sizes.every((n) => Number.isSafeInteger(n) && n > 0)) throw new ConfigError(`${file}: sizes must be a list of object counts`, { hint: 'e.g. sizes: [100000, 1000000]' });
  const perFolder = d.perFolder ?? 1000;
  if (!Number.isSafeInteger(perFolder) || (perFolder as number) < 1) throw new ConfigError(`${file}: perFolder must be a whole number >= 1`);
  const clis: Record<string, string> = {};
  const raw = (d.clis ?? { sluice: 'dist/cli.js' }) as Record<string, unknown>;
  for (const [k, v] of Object.entries(raw)) {
    if (typeof v !== 'string') throw new ConfigError(`${file}: clis.${k} must be a path to a sluice cli.js`);
    clis[k] = path.resolve(baseDir, v);
  }
  return { sizes: sizes as number[], perFolder: perFolder as number, delayMs: Number(d.delayMs ?? 0), clis, rclone: d.rclone !== false, maxSeconds: Number(d.maxSeconds ?? 1800) };
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => { const p = (s.address() as net.AddressInfo).port; s.close(() => resolve(p)); });
  });
}

interface Run { seconds: number; stats: ProcStats | undefined }

/** Runs a command to its end, sampling it. */
async function runToEnd(cmd: string, args: string[], env: NodeJS.ProcessEnv, maxSeconds: number, stdout?: (b: Buffer) => void): Promise<Run> {
  const t0 = performance.now();
  const child = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const sampler = new ProcSampler(child.pid ?? -1);
  let err = '';
  child.stdout.on('data', (b: Buffer) => stdout?.(b));
  child.stderr.on('data', (b: Buffer) => { err = (err + b.toString()).slice(-2000); });
  let stats: ProcStats | undefined;
  const timer = setTimeout(() => child.kill('SIGKILL'), maxSeconds * 1000);
  // Sample just before the reap: the exit event comes after /proc is gone.
  const code = await new Promise<number | null>((resolve) => {
    child.once('exit', (c) => resolve(c));
  });
  clearTimeout(timer);
  stats = sampler.stop();
  if (code !== 0) throw new Error(`${cmd} ${args.slice(0, 3).join(' ')} exited ${code}: ${err.trim().split('\n').slice(-2).join(' | ')}`);
  return { seconds: (performance.now() - t0) / 1000, stats };
}

/** Starts a mount; resolves when its listing gauge appears; stops it. */
async function mountUntilListed(cli: string, args: string[], dir: string, env: NodeJS.ProcessEnv, maxSeconds: number): Promise<Run> {
  const port = await freePort();
  const t0 = performance.now();
  const child = spawn(process.execPath, [cli, 'mount', ...args, dir, '--metrics-port', String(port), '--log-level', 'warn'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  const sampler = new ProcSampler(child.pid ?? -1);
  let err = '';
  child.stderr.on('data', (b: Buffer) => { err = (err + b.toString()).slice(-2000); });
  let exited = false;
  const exitP = new Promise<void>((r) => child.once('exit', () => { exited = true; r(); }));
  try {
    for (;;) {
      if (exited) throw new Error(`sluice mount exited: ${err.trim()}`);
      if ((performance.now() - t0) / 1000 > maxSeconds) throw new Error(`sluice mount did not list within ${maxSeconds} s`);
      try {
        const res = await fetch(`http://127.0.0.1:${port}/metrics`);
        const text = await res.text();
        if (/^sluice_listing_seconds\{/m.test(text)) break;
      } catch { /* not up yet */ }
      sampler.sample();
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
    const seconds = (performance.now() - t0) / 1000;
    return { seconds, stats: sampler.stop() };
  } finally {
    sampler.stop();
    if (!exited) child.kill('SIGTERM');
    await Promise.race([exitP, new Promise((r) => setTimeout(r, 10_000))]);
    if (await mountAt(dir)) await detachMount(dir);
    if (!exited) { child.kill('SIGKILL'); await exitP; }
  }
}

/** Runs the scale scenario; returns every figure. `log` gets progress lines. */
export async function runScale(cfg: ScaleConfig, log: (line: string) => void): Promise<ScaleFigure[]> {
  const figures: ScaleFigure[] = [];
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'sluice-scale-'));
  const add = (objects: number, step: string, r: Run) => {
    const f = { objects, step, seconds: r.seconds, cpuSeconds: r.stats?.cpuSeconds ?? NaN, peakRssBytes: r.stats?.peakRssBytes ?? NaN };
    figures.push(f);
    log(`${objects} objects, ${step}: ${f.seconds.toFixed(1)} s, ${f.cpuSeconds.toFixed(1)} CPU s, peak RSS ${(f.peakRssBytes / 2 ** 20).toFixed(0)} MiB`);
  };
  try {
    for (const n of cfg.sizes) {
      const s3 = await startSyntheticS3({ bucket: BUCKET, root: ROOT, total: n, perFolder: cfg.perFolder, delayMs: cfg.delayMs });
      const env = { ...process.env, ...CRED };
      const s3Args = ['--endpoint', s3.endpoint, '--path-style', '--region', 'us-east-1'];
      try {
        for (const [label, cli] of Object.entries(cfg.clis)) {
          const snap = path.join(tmp, `${label}-${n}.jsonl`);
          add(n, `${label}: sluice snapshot`, await runToEnd(process.execPath, [cli, 'snapshot', `s3://${BUCKET}/${ROOT}`, snap, ...s3Args, '--log-level', 'warn'], env, cfg.maxSeconds));
          const mnt = path.join(tmp, `mnt-${label}`);
          await mkdir(mnt, { recursive: true });
          add(n, `${label}: live mount, whole listing`, await mountUntilListed(cli, [`s3://${BUCKET}/${ROOT}`, ...s3Args], mnt, env, cfg.maxSeconds));
          add(n, `${label}: mount --snapshot, ready`, await mountUntilListed(cli, [`s3://${BUCKET}/${ROOT}`, ...s3Args, '--snapshot', snap], mnt, env, cfg.maxSeconds));
          await rm(snap, { force: true });
        }
        if (cfg.rclone) {
          const conf = path.join(tmp, 'rclone.conf');
          await writeFile(conf, '');
          let lines = 0;
          let tail = '';
          const count = (b: Buffer) => { const s = tail + b.toString(); const parts = s.split('\n'); tail = parts.pop()!; lines += parts.length; };
          add(n, 'rclone lsf -R --fast-list', await runToEnd('rclone', ['lsf', '-R', '--fast-list', `synth:${BUCKET}/${ROOT}`], {
            // rclone's S3 backend fails on AWS_CA_BUNDLE ("unsupported transport"); the endpoint is plain http.
            ...Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'AWS_CA_BUNDLE')), RCLONE_CONFIG: conf, RCLONE_CONFIG_SYNTH_TYPE: 's3', RCLONE_CONFIG_SYNTH_PROVIDER: 'Other',
            RCLONE_CONFIG_SYNTH_ENDPOINT: s3.endpoint, RCLONE_CONFIG_SYNTH_ACCESS_KEY_ID: 'synthetic', RCLONE_CONFIG_SYNTH_SECRET_ACCESS_KEY: 'synthetic',
            RCLONE_CONFIG_SYNTH_REGION: 'us-east-1', RCLONE_CONFIG_SYNTH_FORCE_PATH_STYLE: 'true', RCLONE_CONFIG_SYNTH_LIST_VERSION: '2',
          }, cfg.maxSeconds, count));
          const folders = Math.ceil(n / cfg.perFolder);
          if (lines !== n + folders) log(`rclone listed ${lines} lines, expected ${n + folders} (objects and folders)`);
        }
      } finally {
        await s3.close();
      }
    }
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  return figures;
}

/** The figures as a Markdown table, per object in µs of wall and CPU time and bytes of RSS. */
export function scaleTable(figures: ScaleFigure[]): string {
  const rows = ['| objects | step | wall s | CPU s | peak RSS MiB | wall µs/object | CPU µs/object | RSS bytes/object |', '|---:|---|---:|---:|---:|---:|---:|---:|'];
  for (const f of figures) {
    rows.push(`| ${f.objects.toLocaleString('en-US')} | ${f.step} | ${f.seconds.toFixed(1)} | ${f.cpuSeconds.toFixed(1)} | ${(f.peakRssBytes / 2 ** 20).toFixed(0)} | ${(f.seconds / f.objects * 1e6).toFixed(1)} | ${(f.cpuSeconds / f.objects * 1e6).toFixed(1)} | ${(f.peakRssBytes / f.objects).toFixed(0)} |`);
  }
  return rows.join('\n');
}

export async function loadScale(file: string): Promise<ScaleConfig | undefined> {
  const text = readScenarioFile(file);
  return isScaleFile(file, text) ? parseScale(file, text, process.cwd()) : undefined;
}
