#!/usr/bin/env node
/**
 * One FastFile setting against another, side by side: s3rver without latency, N objects of
 * 128 MiB read by N `dd bs=1M` at once through a new `sluice mount` daemon per run, the
 * default against a variant given as environment settings (e.g. SLUICE_NO_VIEW=1). Runs
 * alternate ABBA, so drift in the machine's load falls on both. Per run: MB/s of the readers
 * together, the daemon's CPU and user CPU per GB read (utime+stime from /proc/PID/stat, from
 * the first read to the last byte), its minor faults per GB and the view replies and reads
 * answered in C (from /metrics). The readers write to /dev/shm; every file's sha256 is checked
 * against its source after the timed span, so the hashing does not compete with the daemon.
 *
 * With --proxy, the daemon reaches s3rver through the bench's latency proxy (no added latency,
 * no bandwidth cap; its own process), as `sluice bench`'s no-latency profile does. --ttfb MS and
 * --bandwidth MB/s (per connection) give the proxy the s3-like profile's shape (25 and 80) and
 * imply --proxy. --syscalls counts the daemon's read and epoll_pwait calls over the span (perf stat);
 * every run also reports the daemon's context switches per MB (all its threads, from /proc).
 *
 * Usage: node scripts/variant-abba.mjs [--dist DIR] [--rounds N] [--readers N] [--variant NAME:VAR=VAL[,VAR=VAL]] [--variant-dist DIR] [--proxy] [--ttfb MS] [--bandwidth MBPS] [--syscalls]
 *   default: dist, 7 rounds (14 runs), 4 readers, off:SLUICE_NO_VIEW=1, no proxy
 *   --variant-dist runs the variant from another build (its settings may then be empty, e.g.
 *   `--variant before: --variant-dist /path/to/old/dist`; the build's ../native must hold the addon).
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';

const { values: a } = parseArgs({ options: { dist: { type: 'string', default: 'dist' }, rounds: { type: 'string', default: '7' }, readers: { type: 'string', default: '4' }, variant: { type: 'string', default: 'off:SLUICE_NO_VIEW=1' }, proxy: { type: 'boolean', default: false }, 'variant-dist': { type: 'string' }, ttfb: { type: 'string', default: '0' }, bandwidth: { type: 'string', default: '0' }, syscalls: { type: 'boolean', default: false } } });
if (Number(a.ttfb) > 0 || Number(a.bandwidth) > 0) a.proxy = true;
const dist = path.resolve(a.dist);
const rounds = Number(a.rounds);
const readers = Number(a.readers);
const [vname, vsettings] = a.variant.split(':');
const venv = Object.fromEntries((vsettings ?? '').split(',').filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
// The variant may be another build (e.g. the commit before a change) instead of, or as well as, settings.
const vdist = a['variant-dist'] ? path.resolve(a['variant-dist']) : dist;
const MiB = 1024 * 1024;
const { startLocalS3 } = await import(path.join(dist, 'local/s3-server.js'));
const s3 = await startLocalS3();
await s3.createBucket('bulk');
const keys = Array.from({ length: readers }, (_, i) => `set/f${i}`);
const sums = {};
for (const key of keys) { const body = randomBytes(128 * MiB); sums[key] = createHash('sha256').update(body).digest('hex'); await s3.putObject('bulk', key, body); }
let endpoint = s3.endpoint;
let proxy;
if (a.proxy) {
  const { startProxyProcess } = await import(path.join(dist, 'bench/runner.js'));
  proxy = await startProxyProcess({ name: 'shaped', ttfbMs: Number(a.ttfb), bytesPerSec: Number(a.bandwidth) * 1e6 }, Number(new URL(s3.endpoint).port), undefined);
  endpoint = proxy.endpoint;
}
const env0 = { ...process.env, AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey, AWS_REGION: 'us-east-1' };
const { readProcStats } = await import(path.join(dist, 'bench/proc-stats.js'));
const stat = (pid) => { const p = readProcStats(pid); return { minflt: p.minorFaults, user: p.userCpuSeconds, cpu: p.cpuSeconds }; };
/** Context switches of all the daemon's threads (voluntary + involuntary). */
const switches = (pid) => { let n = 0; for (const t of readdirSync(`/proc/${pid}/task`)) { try { for (const l of readFileSync(`/proc/${pid}/task/${t}/status`, 'utf8').split('\n')) if (l.includes('ctxt_switches')) n += Number(l.split(/\s+/).pop()); } catch { /* thread gone */ } } return n; };
const metric = (text, name) => text.split('\n').filter((l) => l.startsWith(name)).reduce((s, l) => s + Number(l.split(' ').pop()), 0);
const results = { default: [], [vname]: [] };
let failed = false;
for (let r = 0; r < rounds; r++) for (const variant of (r % 2 ? [vname, 'default'] : ['default', vname])) {
  const env = { ...env0, ...(variant === 'default' ? {} : venv) };
  const mnt = mkdtempSync(path.join(os.tmpdir(), 'variant-abba-'));
  const out = mkdtempSync('/dev/shm/variant-abba-');
  const port = 20000 + Math.floor(Math.random() * 20000);
  const child = spawn(process.execPath, [path.join(variant === 'default' ? dist : vdist, 'cli.js'), 'mount', 's3://bulk/', mnt, '--endpoint', endpoint, '--path-style', '--metrics-port', String(port), '--log-level', 'warn', '--cache-size', '1GiB'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    await new Promise((resolve, reject) => { let o = ''; child.stdout.on('data', (d) => { o += d; if (o.includes('ready')) resolve(); }); child.on('exit', (c) => reject(new Error(`mount exited ${c}`))); });
    readdirSync(path.join(mnt, 'set'));
    const perf = a.syscalls ? spawn('perf', ['stat', '-x,', '-e', 'syscalls:sys_enter_read,syscalls:sys_enter_epoll_pwait', '-p', String(child.pid)], { stdio: ['ignore', 'ignore', 'pipe'] }) : undefined;
    let perfOut = '';
    perf?.stderr.on('data', (d) => { perfOut += d; });
    if (perf) await new Promise((r) => setTimeout(r, 300));
    const x0 = switches(child.pid);
    const s0 = stat(child.pid);
    const t0 = performance.now();
    const codes = await Promise.all(keys.map((k, i) => new Promise((res) => { const p = spawn('dd', [`if=${mnt}/${k}`, `of=${out}/${i}`, 'bs=1M', 'status=none'], { stdio: 'ignore' }); p.on('exit', res); })));
    const secs = (performance.now() - t0) / 1000;
    const s1 = stat(child.pid);
    const x1 = switches(child.pid);
    if (perf) { perf.kill('SIGINT'); await new Promise((r) => perf.on('exit', r)); }
    const perfCount = (ev) => { const l = perfOut.split('\n').find((x) => x.includes(ev)); return l ? Number(l.split(',')[0]) : NaN; };
    const m = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const ok = codes.every((c) => c === 0) && keys.every((k, i) => createHash('sha256').update(readFileSync(`${out}/${i}`)).digest('hex') === sums[k]);
    if (!ok) failed = true;
    const gb = readers * 128 * MiB / 1e9;
    const row = { mbps: gb * 1000 / secs, cpu: (s1.cpu - s0.cpu) / gb, user: (s1.user - s0.user) / gb, faultsK: (s1.minflt - s0.minflt) / gb / 1000, switchesPerMB: (x1 - x0) / (gb * 1000), readsPerMB: perfCount('sys_enter_read') / (gb * 1000), waitsPerMB: perfCount('sys_enter_epoll_pwait') / (gb * 1000), views: metric(m, 'sluice_fuse_view_replies_total'), inC: metric(m, 'sluice_fuse_memory_reads_total'), reads: metric(m, 'sluice_fuse_operations_total{op="read"'), ok };
    results[variant].push(row);
    console.log(`${variant.padEnd(8)} ${row.mbps.toFixed(0)} MB/s  CPU ${row.cpu.toFixed(2)} s/GB (user ${row.user.toFixed(2)})  ${row.faultsK.toFixed(0)}k faults/GB  ${row.switchesPerMB.toFixed(1)} switches/MB${a.syscalls ? ` ${row.readsPerMB.toFixed(1)} read()/MB ${row.waitsPerMB.toFixed(1)} epoll_pwait/MB` : ''}  reads ${row.reads}: ${row.inC} in C, ${row.views} views  ${ok ? 'sha256 ok' : 'SHA256 MISMATCH'}`);
  } finally {
    // A daemon that already exited (it failed to mount) has no exit event left to wait for.
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await new Promise((r2) => child.on('exit', r2));
    }
    spawnSync('umount', [mnt]);
    rmSync(out, { recursive: true, force: true });
    rmSync(mnt, { recursive: true, force: true });
  }
}
const med = (xs) => { const s = [...xs].sort((x, y) => x - y); const n = s.length; return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2; };
for (const [k, rows] of Object.entries(results)) {
  console.log(`median ${k.padEnd(8)} ${med(rows.map((x) => x.mbps)).toFixed(0)} MB/s  CPU ${med(rows.map((x) => x.cpu)).toFixed(2)} s/GB (range ${Math.min(...rows.map((x) => x.cpu)).toFixed(2)}-${Math.max(...rows.map((x) => x.cpu)).toFixed(2)})  user ${med(rows.map((x) => x.user)).toFixed(2)}  ${med(rows.map((x) => x.faultsK)).toFixed(0)}k faults/GB  ${med(rows.map((x) => x.switchesPerMB)).toFixed(1)} switches/MB${a.syscalls ? `  ${med(rows.map((x) => x.readsPerMB)).toFixed(1)} read()/MB  ${med(rows.map((x) => x.waitsPerMB)).toFixed(1)} epoll_pwait/MB` : ''}  (${rows.length} runs)`);
}
await proxy?.stop();
await s3.stop?.();
if (failed) { console.error('variant-abba: a read did not match its source'); process.exit(1); }
process.exit(0);
