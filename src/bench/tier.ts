/**
 * The disk tier scenario (kind: tier): epoch 2 and a restarted job, against reading the
 * same files from a local folder. One run, in this order, all on the same proxy:
 *   local         File mode downloads the dataset; the readers then read the folder
 *                 (the figure is the read alone: local disk, what File mode gives a job);
 *   no-tier       a FastFile mount without --cache-dir, one epoch (epoch 1 as before);
 *   epoch1        a FastFile mount with --cache-dir (a fresh folder), first epoch;
 *   epoch2        the same mount, second epoch (the memory cache is 4x smaller than
 *                 the dataset in the scenario files, so this reads from the tier);
 *   restarted     a new mount process on the same --cache-dir, one epoch;
 *   direct        the same tier read without FUSE (./tier-direct.ts, a process reading
 *                 through TieredClient, `readers` objects at a time): restarted against
 *                 direct is what the FUSE hop costs, direct against local what the tier
 *                 costs over plain files (its CPU includes the sha256 of the bytes).
 * Each phase's readers are the sequential scenario's (reader.ts, BATCH_FILES batches),
 * every byte checked by sha256. Per phase: MB/s and files/s over the readers' span, the
 * sluice process's CPU seconds in it (none for `local`: no daemon), and the object GETs
 * the latency proxy saw during it (listings not counted).
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { sourceBytes, type SeededObject } from '../local/dataset.js';
import type { LatencyProxyStats } from './latency-proxy.js';
import { assignBatches, checkHashes, runReader, type RunResult } from './run-once.js';
import type { ScenarioDef } from './scenarios.js';
import { DIST_DIR, runDownload, startMount, type TargetEnv } from './targets.js';
import type { DirectArgs } from './tier-direct.js';
import { tierNamespace } from '../cache/tiered-client.js';

export const TIER_PHASES = ['local', 'no-tier', 'epoch1', 'epoch2', 'restarted', 'direct'] as const;
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
  proxyStats: () => Promise<LatencyProxyStats>,
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
    const plans = shards.map((s) => ({ kind: 'files' as const, paths: s.map((x) => path.join(dir, rel(x.key))), maxSeconds: sc.maxSeconds }));
    const results = await Promise.all(plans.map((p, i) => runReader(p, path.join(env.runDir, `plan-${tag}-${i}.json`), 4, killAfter)));
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

  /** One mount, `epochs` phases on it. */
  const mounted = async (e: TargetEnv, tags: string[]): Promise<TierRunResult[]> => {
    const m = await startMount('FastFile', e);
    const stopM = () => m.stop();
    stops.add(stopM);
    try {
      await m.ready;
      const out: TierRunResult[] = [];
      for (const tag of tags) {
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
  const local = await phase(d.dir, 'local', () => undefined);
  const [noTier] = await mounted(withArgs([]), ['no-tier']);
  const [epoch1, epoch2] = await mounted(withArgs(tierArgs), ['epoch1', 'epoch2']);
  const [restarted] = await mounted(withArgs(tierArgs), ['restarted']);
  const direct = await directPhase({
    cacheDir, cacheDirSize: sc.tier.cacheDirSize ?? 4 * bytes, ns: tierNamespace({ endpoint: env.endpoint, cacheDirWriteRate: 1 }, env.bucket), bucket: env.bucket,
    objects: objs.map((o) => ({ key: o.key, etag: o.etag, size: o.size })), concurrency: readers,
  }, objs, rep, sc, killAfter, proxyStats);
  return { local, 'no-tier': noTier!, epoch1: epoch1!, epoch2: epoch2!, restarted: restarted!, direct };
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
