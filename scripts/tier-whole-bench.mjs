#!/usr/bin/env node
/**
 * Standalone measurement of the disk tier's whole-file path through FUSE (issue 14, large
 * files): the same files read from a local folder, and through a FastFile mount whose
 * --cache-dir already holds them whole, by one or more sluice builds side by side.
 *
 * Setup (once): s3rver behind the bench's latency proxy (no latency, no cap: it only counts
 * object GETs), N objects of S MiB of random bytes, each also written to a local folder; a
 * first mount (the first variant) reads every file once, which fills the tier, and exits
 * (its writer drains at close). Tier and local files are then written back (sync) and stay
 * in the page cache: every timed read below is warm, like the bench's `local` and
 * `restarted`.
 * Per round, variants interleaved (same machine load):
 *   local      `dd bs=1M` of each local file to /dev/null (no daemon);
 *   restarted  a NEW mount process on the tier, `dd bs=1M` of each file, one after another;
 *              CPU = the daemon's utime+stime over the reads (/proc/PID/stat);
 *   epoch2     the same mount again after its own page cache of the files is evicted
 *              (`dd iflag=nocache count=0`), so every read reaches the daemon again;
 *   direct     the variant's dist/bench/tier-direct.js (the tier read in-process through
 *              DiskCache.openWhole in 128 KiB reads, no FUSE; its CPU includes a sha256).
 * Every file read through the mount is then checked with sha256sum (untimed), and every
 * phase after the fill must make 0 object GETs (the script fails otherwise).
 *
 * Usage: node scripts/tier-whole-bench.mjs [--rounds N] [--files N] [--size MiB] [--cache-size MiB] NAME=DIST_DIR ...
 * TIER_BENCH_NODE_ARGS: node flags for the mount daemons (e.g. '--cpu-prof --cpu-prof-dir=DIR').
 * TIER_BENCH_MOUNT_ARGS: extra `sluice mount` flags.
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

const args = process.argv.slice(2);
let rounds = 3, files = 2, sizeMiB = 64, cacheMiB = 32;
const variants = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--rounds') rounds = Number(args[++i]);
  else if (args[i] === '--files') files = Number(args[++i]);
  else if (args[i] === '--size') sizeMiB = Number(args[++i]);
  else if (args[i] === '--cache-size') cacheMiB = Number(args[++i]);
  else { const [name, dist] = args[i].split('='); variants.push({ name, dist: path.resolve(dist) }); }
}
if (variants.length === 0) { console.error('usage: tier-whole-bench.mjs [--rounds N] [--files N] [--size MiB] [--cache-size MiB] NAME=DIST_DIR ...'); process.exit(2); }
const nodeArgs = (process.env.TIER_BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
const mountArgs = (process.env.TIER_BENCH_MOUNT_ARGS ?? '').split(' ').filter(Boolean);
const TICK = 100; // CLOCK_TICKS_PER_SEC on Linux
const cpuOf = (stat) => { const f = stat.slice(stat.lastIndexOf(')') + 2).split(' '); return (Number(f[11]) + Number(f[12])) / TICK; };
const cpu = (pid) => cpuOf(readFileSync(`/proc/${pid}/stat`, 'utf8'));
/** TIER_BENCH_THREADS=1: CPU seconds per thread name (main, libuv pool, libfuse workers) over each timed read, on stderr. */
const threads = (pid) => {
  const by = {};
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    try { const st = readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8'); const name = st.slice(st.indexOf('(') + 1, st.lastIndexOf(')')); const key = Number(t) === pid ? 'main' : name; by[key] = (by[key] ?? 0) + cpuOf(st); } catch { /* gone */ }
  }
  return by;
};
const threadDiff = (a, b) => Object.entries(b).map(([k, v]) => [k, v - (a[k] ?? 0)]).filter(([, v]) => v > 0).map(([k, v]) => `${k}=${v.toFixed(2)}`).join(' ');
/** Bounded child run: resolves with stdout, rejects on a nonzero exit or after 300 s. */
const run = (cmd, argv, env) => new Promise((resolve, reject) => {
  const c = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'], ...(env ? { env } : {}) });
  let out = '', err = '';
  const t = setTimeout(() => c.kill('SIGKILL'), 300_000);
  c.stdout.on('data', (d) => { out += d; });
  c.stderr.on('data', (d) => { err += d; });
  c.on('exit', (code) => { clearTimeout(t); code === 0 ? resolve(out) : reject(new Error(`${cmd} ${argv.join(' ').slice(0, 200)}: exit ${code}: ${err.slice(-300)}`)); });
});

const { startLocalS3 } = await import(path.join(variants[0].dist, 'local/s3-server.js'));
const { startLatencyProxy } = await import(path.join(variants[0].dist, 'bench/latency-proxy.js'));
const { tierNamespace } = await import(path.join(variants[0].dist, 'cache/tiered-client.js'));
const s3 = await startLocalS3();
const proxy = await startLatencyProxy({ name: 'count', ttfbMs: 0, bytesPerSec: 0, targetPort: s3.port });
const work = mkdtempSync(path.join(os.tmpdir(), 'tier-whole-'));
const env = { ...process.env, AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey, AWS_REGION: 'us-east-1' };
const size = sizeMiB * 1024 * 1024;
const total = files * size;
const tier = path.join(work, 'tier');
const local = path.join(work, 'local');
mkdirSync(local);
const objs = [];
await s3.createBucket('tier');
for (let i = 0; i < files; i++) {
  const key = `f${i}`;
  const body = randomBytes(size);
  const etag = await s3.putObject('tier', key, body);
  writeFileSync(path.join(local, key), body);
  objs.push({ key, etag, size, sha256: createHash('sha256').update(body).digest('hex') });
}
const tierArgs = ['--cache-dir', tier, '--cache-dir-size', String(4 * total), '--cache-size', `${cacheMiB}MiB`, '--max-prefetch', `${Math.min(16, cacheMiB / 2)}MiB`];
const results = {};
const record = (v, what, secs, cpuS) => { ((results[v] ??= {})[what] ??= []).push({ mbps: total / 1e6 / secs, cpuPerGB: cpuS === undefined ? NaN : cpuS / (total / 1e9) }); };
const ddAll = async (dir) => {
  const t0 = process.hrtime.bigint();
  for (const o of objs) await run('dd', [`if=${path.join(dir, o.key)}`, 'of=/dev/null', 'bs=1M', 'status=none']);
  return Number(process.hrtime.bigint() - t0) / 1e9;
};
const verifyAll = async (dir) => {
  for (const o of objs) {
    const got = (await run('sha256sum', [path.join(dir, o.key)])).split(' ')[0];
    if (got !== o.sha256) throw new Error(`sha256 mismatch reading ${o.key} through ${dir}`);
  }
};
const evict = (dir) => Promise.all(objs.map((o) => run('dd', [`if=${path.join(dir, o.key)}`, 'iflag=nocache', 'count=0', 'status=none'])));

/** A mount of variant `v` on the tier; `body(mnt, pid)` runs while it is up. */
async function withMount(v, body) {
  const mnt = mkdtempSync(path.join(work, 'mnt-'));
  const child = spawn(process.execPath, [...nodeArgs, path.join(v.dist, 'cli.js'), 'mount', 's3://tier/', mnt, '--endpoint', proxy.endpoint, '--path-style', '--metrics-port', '-1', '--log-level', 'warn', ...tierArgs, ...mountArgs], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    await new Promise((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d) => { out += d; if (out.includes('ready')) resolve(); });
      child.on('exit', (c) => reject(new Error(`mount exited ${c}`)));
      setTimeout(() => reject(new Error('mount not ready in 60 s')), 60_000);
    });
    await readdir(mnt); // the listing (async: the proxy runs on this event loop): lookups are then answered from it
    return await body(mnt, child.pid);
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => (child.exitCode !== null ? r() : child.on('exit', r)));
    await run('fusermount', ['-u', mnt]).catch(() => undefined);
    rmSync(mnt, { recursive: true, force: true });
  }
}

/** A phase that must make no GET (everything is in the tier). */
async function noGets(what, f) {
  const g0 = proxy.stats.objectGets;
  const r = await f();
  if (proxy.stats.objectGets !== g0) throw new Error(`${what}: ${proxy.stats.objectGets - g0} object GETs (the tier should hold every block)`);
  return r;
}

try {
  await withMount(variants[0], async (mnt) => { await ddAll(mnt); await verifyAll(mnt); });
  const tierFiles = (await run('find', [tier, '-type', 'f'])).trim().split('\n');
  await run('sync', ['--data', ...tierFiles, ...objs.map((o) => path.join(local, o.key))]);
  for (let r = 0; r < rounds; r++) {
    await ddAll(local); // warm-up: every local page in the page cache
    record('local', 'local', await ddAll(local));
    for (const v of variants) {
      await noGets(`${v.name} restarted`, () => withMount(v, async (mnt, pid) => {
        let c0 = cpu(pid), t0 = threads(pid);
        // TIER_BENCH_PERF=PREFIX: `perf record` of the daemon over the restarted read (PREFIX-NAME.data).
        const perf = process.env.TIER_BENCH_PERF ? spawn('perf', ['record', '-q', '-F', '1999', '-g', '-p', String(pid), '-o', `${process.env.TIER_BENCH_PERF}-${v.name}.data`], { stdio: 'ignore' }) : undefined;
        if (perf) await new Promise((r) => setTimeout(r, 500));
        let secs = await ddAll(mnt);
        if (perf) { perf.kill('SIGINT'); await new Promise((r) => perf.on('exit', r)); }
        record(v.name, 'restarted', secs, cpu(pid) - c0);
        if (process.env.TIER_BENCH_THREADS) process.stderr.write(`${v.name} restarted threads: ${threadDiff(t0, threads(pid))}\n`);
        await verifyAll(mnt);
        await evict(mnt);
        c0 = cpu(pid); t0 = threads(pid);
        secs = await ddAll(mnt);
        record(v.name, 'epoch2', secs, cpu(pid) - c0);
        if (process.env.TIER_BENCH_THREADS) process.stderr.write(`${v.name} epoch2 threads: ${threadDiff(t0, threads(pid))}\n`);
        await verifyAll(mnt);
      }));
      const out = await noGets(`${v.name} direct`, () => run(process.execPath, [path.join(v.dist, 'bench', 'tier-direct.js'), JSON.stringify({
        cacheDir: tier, cacheDirSize: 4 * total, ns: tierNamespace({ endpoint: proxy.endpoint, cacheDirWriteRate: 1 }, 'tier'), bucket: 'tier',
        objects: objs.map((o) => ({ key: o.key, etag: o.etag, size: o.size })), concurrency: 1,
      })]));
      const d = JSON.parse(out.trim().split('\n').pop());
      if (d.sha256.some((h, i) => h !== objs[i].sha256)) throw new Error(`${v.name} direct: sha256 mismatch`);
      record(v.name, 'direct', (d.endMs - d.startMs) / 1000, d.cpuSeconds);
    }
    process.stderr.write(`round ${r + 1}/${rounds} done\n`);
  }
} finally {
  await proxy.close();
  await s3.stop();
  rmSync(work, { recursive: true, force: true });
}
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };
const localMbps = median(results.local.local.map((x) => x.mbps));
console.log(`${files} x ${sizeMiB} MiB, memory cache ${cacheMiB} MiB, ${rounds} rounds, medians, all warm (loadavg ${readFileSync('/proc/loadavg', 'utf8').trim()})`);
console.log(`local folder: ${localMbps.toFixed(0)} MB/s (runs ${results.local.local.map((x) => x.mbps.toFixed(0)).join(' ')})`);
console.log('| variant | phase | MB/s | of local | daemon CPU s/GB | runs (MB/s) |');
console.log('|---|---|---:|---:|---:|---|');
for (const v of variants) for (const [what, xs] of Object.entries(results[v.name] ?? {})) {
  const m = median(xs.map((x) => x.mbps));
  console.log(`| ${v.name} | ${what} | ${m.toFixed(0)} | ${(100 * m / localMbps).toFixed(0)}% | ${median(xs.map((x) => x.cpuPerGB)).toFixed(2)} | ${xs.map((x) => x.mbps.toFixed(0)).join(' ')} |`);
}
