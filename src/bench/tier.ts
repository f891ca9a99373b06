/**
 * The disk tier scenario (kind: tier): epoch 2 and a restarted job, against reading the
 * same files from a local folder. One run, in this order, all on the same proxy:
 *   local           File mode downloads the dataset; the readers then read the folder
 *                   (the figure is the read alone: local disk, what File mode gives a job);
 *                   its files are in the page cache (File mode just wrote them);
 *   local-cold      the same, after the folder's pages are evicted (below);
 *   no-tier         a FastFile mount without --cache-dir, one epoch (epoch 1 as before);
 *   epoch1          a FastFile mount with --cache-dir (a fresh folder), first epoch;
 *   epoch2          the same mount, second epoch, once the tier's background writes are
 *                   done and written back (as `local`'s files are), after the mount's own
 *                   pages of the files are evicted (else the kernel answers from its page cache and
 *                   sluice never sees a read); the memory cache is 4x smaller than the
 *                   dataset, so this reads from the tier;
 *   restarted       a new mount process on the same --cache-dir, one epoch; the tier's
 *                   files are in the page cache (written and read by the epochs before);
 *   restarted-cold  another new mount process, started after the tier's files' pages are
 *                   evicted; both restarted phases start reading once the mount has listed
 *                   its prefix (untilListed: the daemon's start-up and listing are logged,
 *                   not measured, as File mode's download is not in `local`);
 *   direct          the tier read without FUSE (./tier-direct.ts, a process reading each
 *                   object through DiskCache.openWhole in 128 KiB reads, FUSE's read size,
 *                   `readers` objects at a time): restarted against direct is what the FUSE
 *                   hop costs; direct against local what the tier costs over plain files
 *                   (its CPU includes the sha256 of the bytes, as the readers' does).
 * Fairness: the comparisons are warm against warm (local, restarted: every byte already in
 * the page cache, written back to disk first so neither races the kernel's writeback of the
 * phase that wrote it; both measure the software path) and cold against cold (local-cold,
 * restarted-cold). The page cache cannot be dropped as a whole here (/proc/sys/vm/drop_caches
 * needs the host), so cold means each file's clean pages evicted with
 * posix_fadvise(POSIX_FADV_DONTNEED) (`dd iflag=nocache count=0`); the log says how many
 * bytes stayed resident (fincore). "Cold" is cold for the guest's page cache only: the
 * hypervisor may still cache the disk, equally for both.
 * Each phase's readers are the sequential scenario's (reader.ts, BATCH_FILES batches),
 * every byte checked by sha256. Per phase: MB/s and files/s over the readers' span, the
 * sluice process's CPU seconds in it (none for `local`: no daemon), and the object GETs
 * the latency proxy saw during it (listings not counted).
 */
import { execFile, spawn } from 'node:child_process';
import { readdir, stat } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { sourceBytes, type SeededObject } from '../local/dataset.js';
import type { LatencyProxyStats } from './latency-proxy.js';
import { assignBatches, checkHashes, readerHashing, runReader, type RunResult } from './run-once.js';
import type { ScenarioDef } from './scenarios.js';
import { DIST_DIR, runDownload, startMount, type TargetEnv } from './targets.js';
import type { DirectArgs } from './tier-direct.js';
import { tierNamespace } from '../cache/tiered-client.js';

export const TIER_PHASES = ['local', 'local-cold', 'no-tier', 'epoch1', 'epoch2', 'restarted', 'restarted-cold', 'direct'] as const;
export type TierPhase = (typeof TIER_PHASES)[number];

/** Grace beyond maxSeconds before readers are killed (as run-once.ts). */
const READER_GRACE_MS = 60_000;

export interface TierRunResult extends RunResult {
  /** Object GETs the proxy saw during the phase. */
  s3Gets?: number;
  filesPerSec?: number;
  mbps?: number;
}

export async function runTier(
  sc: ScenarioDef, readers: number, objs: SeededObject[], env: TargetEnv, rep: number, stops: Set<() => Promise<void>>,
  proxyStats: () => Promise<LatencyProxyStats>, logLine?: (s: string) => void,
): Promise<Record<TierPhase, TierRunResult>> {
  const killAfter = sc.maxSeconds * 1000 + READER_GRACE_MS;
  const rel = (key: string) => key.slice(env.prefix.length);
  const shards = assignBatches(objs, readers).filter((s) => s.length > 0);
  const cacheDir = path.join(env.runDir, 'tier-cache');
  const withArgs = (extra: string[]): TargetEnv => ({
    ...env, config: { ...env.config, sluice: { cacheSize: sc.tier.cacheSize, args: [...env.config.sluice.args, ...extra] } },
  });
  const bytes = objs.reduce((n, o) => n + o.size, 0);
  const tierArgs = ['--cache-dir', cacheDir, '--cache-dir-size', String(sc.tier.cacheDirSize ?? 4 * bytes)];

  /** The readers over `dir`; `cpu` gives the daemon's CPU seconds so far. */
  const phase = async (dir: string, tag: string, cpu: () => number | undefined): Promise<TierRunResult> => {
    const r: TierRunResult = { rep, value: null, seconds: 0, bytes: 0, items: 0, verified: false, mismatches: 0, truncated: false };
    const gets0 = (await proxyStats()).objectGets;
    const cpu0 = cpu();
    const plans = shards.map((s) => ({ kind: 'files' as const, paths: s.map((x) => path.join(dir, rel(x.key))), maxSeconds: sc.maxSeconds, ...readerHashing(sc, env.config, shards.length, s.reduce((n, x) => n + x.size, 0)) }));
    const results = await Promise.all(plans.map((p) => runReader(p, 4, killAfter)));
    const cpu1 = cpu();
    r.s3Gets = (await proxyStats()).objectGets - gets0;
    const errors = results.map((x) => x.error).filter(Boolean);
    if (errors.length) throw new Error(`reader (${tag}): ${errors[0]}`);
    r.seconds = (Math.max(...results.map((x) => x.endMs)) - Math.min(...results.map((x) => x.startMs))) / 1000;
    r.bytes = results.reduce((n, x) => n + x.bytes, 0);
    r.items = results.reduce((n, x) => n + x.items, 0);
    r.truncated = results.some((x) => x.truncated);
    r.mismatches = results.reduce((n, x, i) => n + checkHashes(shards[i]!.map((o) => o.sha256), x), 0);
    results.forEach((x, i) => {
      if (x.partial && createHash('sha256').update(sourceBytes(shards[i]![x.items]!, 0, x.partial.bytes)).digest('hex') !== x.partial.sha256) r.mismatches++;
    });
    r.verified = r.mismatches === 0 && r.items > 0;
    if (cpu0 !== undefined && cpu1 !== undefined) r.cpuSeconds = cpu1 - cpu0;
    r.mbps = r.bytes / 1e6 / r.seconds;
    r.filesPerSec = r.items / r.seconds;
    r.value = sc.metric === 'files/s' ? r.filesPerSec : r.mbps;
    return r;
  };

  /** One mount, `epochs` phases on it; `before` runs ahead of each phase (with the mount's folder and its CPU so far). */
  const mounted = async (e: TargetEnv, tags: string[], before?: (tag: string, dir: string, cpu: () => number | undefined) => Promise<void>): Promise<TierRunResult[]> => {
    const m = await startMount('FastFile', e);
    const stopM = () => m.stop();
    stops.add(stopM);
    try {
      await m.ready;
      const out: TierRunResult[] = [];
      for (const tag of tags) {
        await before?.(tag, m.dir, () => m.stats()?.cpuSeconds);
        const res = await phase(m.dir, tag, () => m.stats()?.cpuSeconds);
        res.peakRssBytes = m.stats()?.peakRssBytes;
        out.push(res);
      }
      return out;
    } finally {
      stops.delete(stopM);
      await m.stop();
    }
  };

  const d = await runDownload('File', env, killAfter);
  const localFiles = objs.map((o) => path.join(d.dir, rel(o.key)));
  // Warm phases start after writeback (their files stay cached): else a phase right after the one that wrote the files races the kernel's writeback of them.
  await writeBack(localFiles);
  const local = await phase(d.dir, 'local', () => undefined);
  await evictPages(localFiles, 'local folder', logLine);
  const localCold = await phase(d.dir, 'local-cold', () => undefined);
  const [noTier] = await mounted(withArgs([]), ['no-tier']);
  const [epoch1, epoch2] = await mounted(withArgs(tierArgs), ['epoch1', 'epoch2'], async (tag, dir) => {
    if (tag !== 'epoch2') return;
    // As `local` and `restarted`: epoch 2 starts once the tier's writes are on disk, not while
    // the kernel writes back what epoch 1 wrote (seconds ago here; in a real job, epoch 1
    // lasts long past the kernel's 30 s writeback delay).
    await tierSettled(cacheDir, bytes, logLine);
    await writeBack(await filesUnder(cacheDir));
    await evictPages(objs.map((o) => path.join(dir, rel(o.key))), 'mount (its own pages of the files)', logLine);
  });
  await writeBack(await filesUnder(cacheDir));
  // Both restarted phases read from the moment the mount's view is complete (untilListed),
  // and restarted-cold evicts the tier's pages BEFORE its mount starts: measured 2026-12-01
  // (BENCHMARKS.md, t14-restart), a restarted daemon spends ~0.4-0.65 CPU s after "ready"
  // on its listing (the SDK's XML parse of 800 keys in a fresh process); restarted's readers
  // used to start at once and pay it inside their span, restarted-cold's only after the
  // eviction (seconds later), which made the warm run look slower and costlier than the cold.
  const [restarted] = await mounted(withArgs(tierArgs), ['restarted'], untilListed(logLine));
  await evictPages(await filesUnder(cacheDir), 'disk tier', logLine);
  const [restartedCold] = await mounted(withArgs(tierArgs), ['restarted-cold'], untilListed(logLine));
  const direct = await directPhase({
    cacheDir, cacheDirSize: sc.tier.cacheDirSize ?? 4 * bytes, ns: tierNamespace({ endpoint: env.endpoint, region: 'us-east-1', cacheDirWriteRate: 1 }, env.bucket) /* the mounts' --region (targets.ts) */, bucket: env.bucket,
    objects: objs.map((o) => ({ key: o.key, etag: o.etag, size: o.size })), concurrency: readers,
  }, objs, rep, sc, killAfter, proxyStats);
  return { local, 'local-cold': localCold, 'no-tier': noTier!, epoch1: epoch1!, epoch2: epoch2!, restarted: restarted!, 'restarted-cold': restartedCold!, direct };
}

/**
 * A `before` hook: waits until the mount has listed its prefix (readdir of the root waits
 * for the listing, src/fs/core.ts), so a phase measures reading, not the daemon's start-up;
 * logs the daemon's CPU up to then (start-up and listing), which the phase then excludes.
 */
function untilListed(logLine?: (s: string) => void): (tag: string, dir: string, cpu: () => number | undefined) => Promise<void> {
  return async (tag, dir, cpu) => {
    await readdir(dir);
    const s = cpu();
    logLine?.(`${tag}: the mount listed its prefix; daemon CPU so far (start-up and listing, not in the phase): ${s === undefined ? '?' : s.toFixed(2)} s`);
  };
}

/** The `direct` phase: ./tier-direct.ts in its own process. */
async function directPhase(
  args: DirectArgs, objs: SeededObject[], rep: number, sc: ScenarioDef, killAfter: number, proxyStats: () => Promise<LatencyProxyStats>,
): Promise<TierRunResult> {
  const gets0 = (await proxyStats()).objectGets;
  const out = await new Promise<string>((resolve, reject) => {
    execFile(process.execPath, [path.join(DIST_DIR, 'bench', 'tier-direct.js'), JSON.stringify(args)], { timeout: killAfter, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`direct tier read failed: ${stderr.trim().split('\n').slice(-2).join(' ') || err.message}`));
      else resolve(stdout);
    });
  });
  const d = JSON.parse(out.trim().split('\n').pop()!) as { startMs: number; endMs: number; bytes: number; items: number; sha256: string[]; cpuSeconds: number };
  const r: TierRunResult = { rep, value: null, seconds: (d.endMs - d.startMs) / 1000, bytes: d.bytes, items: d.items, verified: false, mismatches: 0, truncated: false, cpuSeconds: d.cpuSeconds };
  r.mismatches = d.sha256.filter((h, i) => h !== objs[i]!.sha256).length;
  r.verified = r.mismatches === 0 && r.items > 0;
  r.s3Gets = (await proxyStats()).objectGets - gets0;
  r.mbps = r.bytes / 1e6 / r.seconds;
  r.filesPerSec = r.items / r.seconds;
  r.value = sc.metric === 'files/s' ? r.filesPerSec : r.mbps;
  return r;
}

/** Every file under `dir` (the tier's cache files and sidecars). */
async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { recursive: true, withFileTypes: true })) if (e.isFile()) out.push(path.join(e.parentPath, e.name));
  return out;
}

/**
 * Waits until the daemon's background writer has put `want` bytes of cache files in `dir`
 * (their allocated size: data files are written block by block), or until that size has
 * not grown for SETTLE_QUIET_MS (a write skipped for lack of budget never comes), at most
 * SETTLE_MAX_MS; logs what it found.
 */
async function tierSettled(dir: string, want: number, logLine?: (s: string) => void): Promise<void> {
  const t0 = Date.now();
  let last = -1, since = t0, have = 0;
  for (;;) {
    have = 0;
    for (const f of await filesUnder(dir)) if (!f.endsWith('.map')) have += await stat(f).then((s) => s.blocks * 512, () => 0);
    const now = Date.now();
    if (have !== last) (last = have), (since = now);
    if (have >= want || now - since >= SETTLE_QUIET_MS || now - t0 >= SETTLE_MAX_MS) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  logLine?.(`epoch2: the tier holds ${have} bytes of cache files for a ${want}-byte dataset after ${Date.now() - t0} ms`);
}

/** 1 s without growth: the writer's budget (--cache-dir-write-rate) moves far more than a block a second. 30 s: a bound for a stuck run. */
const SETTLE_QUIET_MS = 1000;
const SETTLE_MAX_MS = 30_000;

/** Writes back the dirty pages of `files` (fdatasync each), leaving them cached. */
async function writeBack(files: string[]): Promise<void> {
  for (let i = 0; i < files.length; i += EVICT_BATCH) {
    await new Promise<void>((resolve, reject) => execFile('sync', ['--data', ...files.slice(i, i + EVICT_BATCH)], (err) => (err ? reject(err) : resolve())));
  }
}

/** Files evicted at once per dd/fincore command line. */
const EVICT_BATCH = 256;

/**
 * Evicts the page-cache pages of `files`: fdatasync (dirty pages cannot be evicted, and
 * these files were just written), then posix_fadvise DONTNEED through `dd iflag=nocache
 * count=0` (which does exactly that for the whole file); then logs how many of their bytes
 * are still resident (fincore), so a failed eviction shows.
 */
async function evictPages(files: string[], what: string, logLine?: (s: string) => void): Promise<void> {
  const run = (cmd: string, args: string[]) => new Promise<string>((resolve, reject) => {
    const c = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    c.stdout.on('data', (b: Buffer) => { out += b.toString(); });
    c.stderr.on('data', (b: Buffer) => { err += b.toString(); });
    c.on('error', reject);
    c.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${cmd} failed (${code}): ${err.trim().slice(0, 300)}`))));
  });
  let resident = 0;
  let bytes = 0;
  for (let i = 0; i < files.length; i += EVICT_BATCH) {
    const batch = files.slice(i, i + EVICT_BATCH);
    // Dirty pages cannot be evicted (File mode and the tier just wrote these files): write them back first (sync --data: fdatasync per file).
    await run('sync', ['--data', ...batch]);
    // One shell per batch: a dd per file (dd takes one input).
    await run('sh', ['-c', 'for f in "$@"; do dd if="$f" iflag=nocache count=0 status=none || exit 1; done', 'evict', ...batch]);
    const rows = await run('fincore', ['--bytes', '--noheadings', '--raw', '--output', 'RES,SIZE', ...batch]).catch(() => '');
    for (const line of rows.trim().split('\n')) {
      const [res, size] = line.trim().split(/\s+/).map(Number);
      if (Number.isFinite(res)) resident += res!;
      if (Number.isFinite(size)) bytes += size!;
    }
  }
  logLine?.(`evicted the page cache of ${files.length} files (${what}): ${resident} of ${bytes} bytes still resident`);
}
