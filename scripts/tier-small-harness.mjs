// Small files from the disk tier through the mount, side by side for several builds (t14-small, BENCHMARKS.md):
//   node scripts/tier-small-harness.mjs '{"dists":{"before":"/tmp/main/dist","after":"dist"},"rounds":3}'
// Options: root (work folder, default /tmp/t14s/h; wiped), count (files), readers, phases, prof (node --cpu-prof the
// daemon into ROOT/prof; ROOT/window-<phase>.json holds the measured span, in CLOCK_MONOTONIC microseconds as the profile's), strace
// (strace -c -f the daemon during each measured phase, into ROOT/strace-<phase>.txt), perf (perf record -a -g the whole
// machine during each measured phase, into ROOT/perf-<phase>.data), extra (more mount arguments), env ({ distName: { VAR: value } }:
// the environment of that dist's daemons, e.g. two names for one dist with SLUICE_NO_PASSTHROUGH=1 on one).
// Seeds tier-small (800 x 40 KB, 4 folders) in a local s3rver (no latency proxy: tier phases make no GETs),
// writes the same files to a local folder, fills one tier dir per dist (epoch 1), then per round and per dist:
// epoch2 (same mount as a warm-up epoch, mount pages evicted), restarted (warm), restarted-cold; and local warm.
// Prints files/s, daemon CPU ms per file, FUSE ops per file (memRead: of the reads, those answered in libfuse's thread,
// native/src/fuse_memread.c), GET count (from metrics).
import { spawn, execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync, readFileSync, readdirSync, rmSync, existsSync } from 'node:fs';
import path from 'node:path';
import os from 'node:os';

const cfg = JSON.parse(process.argv[2] ?? '{}');
const dists = Object.fromEntries(Object.entries(cfg.dists ?? { cur: 'dist' }).map(([k, v]) => [k, path.resolve(v)]));
const rounds = cfg.rounds ?? 1;
const count = cfg.count ?? 800;
const readers = cfg.readers ?? 4;
const phases = cfg.phases ?? ['local', 'epoch2', 'restarted', 'restarted-cold'];
const firstDist = Object.values(dists)[0];
const { startLocalS3 } = await import(path.join(firstDist, 'local/s3-server.js'));
const { seedBenchDataset } = await import(path.join(firstDist, 'bench/datasets.js'));
const { sourceBytes } = await import(path.join(firstDist, 'local/dataset.js'));

const root = cfg.root ?? '/tmp/t14s/h';
rmSync(root, { recursive: true, force: true });
mkdirSync(root, { recursive: true });
const s3 = await startLocalS3({});
const bucket = 'bench';
const prefix = 'small/';
await s3.createBucket(bucket);
const objs = await seedBenchDataset(s3, bucket, prefix, { smallFiles: { count, size: 40_000, folders: 4 } });
const rel = (k) => k.slice(prefix.length);
const localDir = path.join(root, 'local');
for (const o of objs) { mkdirSync(path.dirname(path.join(localDir, rel(o.key))), { recursive: true }); writeFileSync(path.join(localDir, rel(o.key)), sourceBytes(o)); }
execFileSync('sync');
const BATCH = 16;
const shards = Array.from({ length: readers }, () => []);
for (let b = 0; b * BATCH < objs.length; b++) shards[b % readers].push(...objs.slice(b * BATCH, (b + 1) * BATCH));

const cpuOf = (pid) => { const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' '); return (Number(f[11]) + Number(f[12])) / 100; };

async function runReaders(dir, tag) {
  const t0 = Date.now();
  const res = await Promise.all(shards.map((s, i) => new Promise((resolve, reject) => {
    const plan = path.join(root, `plan-${tag}-${i}.json`);
    writeFileSync(plan, JSON.stringify({ kind: 'files', paths: s.map((o) => path.join(dir, rel(o.key))), maxSeconds: 120 }));
    const c = spawn(process.execPath, [path.join(firstDist, 'bench/reader.js'), plan], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = ''; c.stdout.on('data', (b) => { out += b; });
    c.on('exit', () => { try { resolve(JSON.parse(out.trim().split('\n').pop())); } catch (e) { reject(new Error(out)); } });
  })));
  let bad = 0;
  res.forEach((r, i) => { if (r.error) throw new Error(r.error); r.sha256.forEach((h, j) => { if (h !== shards[i][j].sha256) bad++; }); });
  const start = Math.min(...res.map((r) => r.startMs)); const end = Math.max(...res.map((r) => r.endMs));
  const items = res.reduce((n, r) => n + r.items, 0);
  return { secs: (end - start) / 1000, items, bad, wall: (Date.now() - t0) / 1000 };
}

async function metrics(port) {
  const t = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  if (cfg.debugMetrics) console.error(t.split("\n").filter((l) => /early|listing|fuse_operations/.test(l)).join("\n"));
  const ops = {}; let gets = 0; let early = 0; let listed;
  for (const line of t.split('\n')) {
    let m = /^sluice_fuse_operations_total\{op="(\w+)",result="(\w+)"\} (\d+)/.exec(line);
    if (m) ops[m[1]] = (ops[m[1]] ?? 0) + Number(m[3]);
    m = /^sluice_s3_requests_total\{[^}]*operation="get"[^}]*\} (\d+)/.exec(line);
    if (m) gets += Number(m[1]);
    m = /^sluice_fuse_memory_reads_total (\d+)/.exec(line);
    if (m) ops.memRead = Number(m[1]);
    m = /^sluice_early_lookups_total\{[^}]*\} (\d+)/.exec(line);
    if (m) early += Number(m[1]);
    m = /^sluice_listing_seconds\{[^}]*\} ([\d.e-]+)/.exec(line);
    if (m) listed = Number(m[1]);
  }
  return { ops, gets, early, listed };
}

function evict(files) {
  for (let i = 0; i < files.length; i += 256) {
    const b = files.slice(i, i + 256);
    execFileSync('sync', ['--data', ...b]);
    execFileSync('sh', ['-c', 'for f in "$@"; do dd if="$f" iflag=nocache count=0 status=none || exit 1; done', 'e', ...b]);
  }
}
function filesUnder(d) { return readdirSync(d, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name)); }

async function startDaemon(dist, name, tierDir, prof) {
  const mnt = path.join(root, `mnt-${name}`);
  mkdirSync(mnt, { recursive: true });
  const args = [...(prof ? ['--cpu-prof', `--cpu-prof-dir=${path.join(root, 'prof')}`] : []), path.join(dist, 'cli.js'), 'mount', `s3://${bucket}/${prefix}`, mnt,
    '--endpoint', s3.endpoint, '--path-style', '--region', 'us-east-1', '--metrics-port', '0', '--log-level', 'warn',
    '--cache-size', String(8 * 1024 * 1024), '--max-prefetch', String(16 * 1024 * 1024), ...(tierDir ? ['--cache-dir', tierDir, '--cache-dir-size', String(4 * count * 40_000)] : []), ...(cfg.extra ?? [])];
  const c = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...(cfg.env?.[name] ?? {}), AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey } });
  let err = ''; c.stderr.on('data', (b) => { err += b; });
  await new Promise((resolve, reject) => {
    let out = ''; c.stdout.on('data', (b) => { out += b; if (out.includes('ready')) resolve(); });
    c.on('exit', (code) => reject(new Error(`daemon exited ${code}: ${err}`)));
    setTimeout(() => reject(new Error('no ready')), 60000);
  });
  const ss = execFileSync('ss', ['-ltnpH']).toString().split('\n').find((l) => l.includes(`pid=${c.pid},`));
  const port = Number(/127\.0\.0\.1:(\d+)/.exec(ss)[1]);
  return {
    mnt, pid: c.pid, port,
    async stop() { const done = new Promise((r) => c.on('exit', r)); c.kill('SIGTERM'); await done; },
  };
}

async function measure(d, tag) {
  // settleMs: wait this long after the mount is ready before reading (the daemon's start-up work then falls outside the measured span); its CPU is reported.
  const s0 = cpuOf(d.pid);
  const w0 = Number(process.hrtime.bigint() / 1000n);
  if (cfg.settleMs) await new Promise((r) => setTimeout(r, cfg.settleMs));
  writeFileSync(path.join(root, `window-settle-${tag}.json`), JSON.stringify({ from: w0, to: Number(process.hrtime.bigint() / 1000n) }));
  const settleCpuMs = Math.round((cpuOf(d.pid) - s0) * 1000);
  const m0 = await metrics(d.port);
  let st;
  if (cfg.strace) { st = spawn('strace', ['-c', '-f', '-p', String(d.pid), '-o', path.join(root, `strace-${tag}.txt`)], { stdio: 'ignore' }); await new Promise((r) => setTimeout(r, 1000)); }
  // perf: the whole machine (readers, kernel, daemon) sampled during the measured phase, into ROOT/perf-<tag>.data.
  if (cfg.perf) { st = spawn('perf', ['record', '-q', '-F', '1999', '-a', '-g', '-o', path.join(root, `perf-${tag}.data`)], { stdio: 'ignore' }); await new Promise((r) => setTimeout(r, 1000)); }
  const c0 = cpuOf(d.pid);
  const h0 = process.hrtime.bigint() / 1000n;
  const r = await runReaders(d.mnt, tag);
  writeFileSync(path.join(root, `window-${tag}.json`), JSON.stringify({ from: Number(h0), to: Number(process.hrtime.bigint() / 1000n) }));
  if (st) { const done = new Promise((r) => st.on('exit', r)); st.kill('SIGINT'); await done; }
  const c1 = cpuOf(d.pid); const m1 = await metrics(d.port);
  const ops = Object.fromEntries(Object.keys(m1.ops).map((k) => [k, +(((m1.ops[k] - (m0.ops[k] ?? 0)) / r.items).toFixed(2))]).filter(([, v]) => v > 0));
  return { settleCpuMs, fps: Math.round(r.items / r.secs), cpuMsPerFile: +((c1 - c0) * 1000 / r.items).toFixed(3), gets: m1.gets - m0.gets, early: m1.early - m0.early, listedAtStart: m0.listed !== undefined, listingSecs: m1.listed, ops, bad: r.bad };
}

const out = [];
const log = (x) => { out.push(x); console.log(JSON.stringify(x)); };
const tiers = {};
for (const [name, dist] of Object.entries(dists)) {
  tiers[name] = path.join(root, `tier-${name}`);
  const d = await startDaemon(dist, name, tiers[name], false);
  try { log({ dist: name, phase: 'epoch1', ...(await measure(d, `e1-${name}`)) }); } finally { await d.stop(); }
}
execFileSync('sync');
for (let round = 0; round < rounds; round++) {
  for (const [name, dist] of Object.entries(dists)) {
    if (phases.includes('local')) log({ round, phase: 'local', ...(await runReaders(localDir, 'local')) , load: readFileSync('/proc/loadavg', 'utf8').trim() });
    if (phases.includes('epoch2')) {
      const d = await startDaemon(dist, name, tiers[name], cfg.prof);
      try {
        await runReaders(d.mnt, 'warm'); // epoch 1 of this mount (from the tier)
        evict(objs.map((o) => path.join(d.mnt, rel(o.key))));
        log({ round, dist: name, phase: 'epoch2', ...(await measure(d, `e2-${name}`)) });
      } finally { await d.stop(); }
    }
    if (phases.includes('restarted')) {
      const d = await startDaemon(dist, name, tiers[name], cfg.prof);
      try { log({ round, dist: name, phase: 'restarted', ...(await measure(d, `rs-${name}`)) }); } finally { await d.stop(); }
    }
    if (phases.includes('restarted-cold')) {
      evict(filesUnder(tiers[name]));
      const d = await startDaemon(dist, name, tiers[name], false);
      try { log({ round, dist: name, phase: 'restarted-cold', ...(await measure(d, `rc-${name}`)) }); } finally { await d.stop(); }
    }
  }
}
await s3.stop();
for (const n of readdirSync(root)) if (n.startsWith('mnt-') && existsSync(path.join(root, n))) { /* daemons unmount on SIGTERM */ }
