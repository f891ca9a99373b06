#!/usr/bin/env node
/**
 * Standalone measurement of the bulk receive path (issue 11): s3rver without latency, 512 MiB
 * objects, `dd bs=1M` through a FRESH mount per round (no page cache to drop), CPU =
 * utime+stime of the sluice daemon over the read (from /proc/PID/stat), every read sha256-
 * verified. "fresh" is the first 512 MiB read of a new daemon, "warm" a second object read
 * right after by the same daemon. Pipe: `sluice run` with one Pipe channel of one 512 MiB
 * object; the training command stamps sluice's CPU (/proc/$PPID/stat) around its read.
 * "cached" (after fresh) reads the fresh object again from the daemon's block cache: its
 * pages are dropped from the kernel's page cache (`dd iflag=nocache count=0`, i.e.
 * POSIX_FADV_DONTNEED on the whole file), so every FUSE read reaches the daemon; and since
 * a sequential reader retires the blocks it has passed (read-cursor.ts), the block cache is
 * first filled by a handle that reads once at a random offset, which makes the random fill
 * fetch the whole file and keep it (held open until the daemon is idle). Then `dd` makes no
 * GET: the figure is the per-FUSE-read cost alone (issue 11's warm-cache moonshot, >= 1 GB/s).
 * Its MB/s is the reader's, though: `dd | sha256sum` runs at about 170-270 MB/s on a 2-core
 * VM, and fuse-native alone serving from one Buffer gets no more through that pipe
 * (a one-off floor script, in git history as scripts/fuse-floor.mjs); compare like with like.
 *
 * Usage: node scripts/bulk-receive-bench.mjs [--rounds N] [--size MiB] [--tls] [--no-pipe | --pipe-only] NAME=DIST_DIR ...
 * --no-pipe skips the Pipe case; --pipe-only skips the mount rounds (only the Pipe case).
 * --pipe-warm runs the Pipe case for 2 epochs and records the second as well ("pipe-warm"): the
 *   same object again through the same process, its slabs already mapped and its code compiled,
 *   i.e. what each further GB of a long job costs. Both epochs are sha256-checked.
 * --pipe-objects N splits the Pipe case's object into N objects of SIZE/N (N <= 10), streamed in
 *   key order, as `sluice bench` streams its datasets' objects; the stream's sha256 is checked.
 * --proxy puts `sluice bench`'s latency proxy (its no-latency profile, its own process) between
 *   the daemon and s3rver, as the bench does (not with --tls). --ttfb MS and --bandwidth MB/s
 *   (per connection) shape it as the bench's s3-like profile does (25 and 80); each implies --proxy.
 * --to-null times mount reads into /dev/null and checks their sha256 right after, untimed
 *   (the Pipe case still hashes as it reads: a FIFO can be read only once).
 * --env NAME:VAR=VALUE sets VAR for variant NAME's mount daemon only (e.g. a GLIBC_TUNABLES
 *   experiment against the same dist); repeatable.
 * (BULK_BENCH_NODE_ARGS: node flags for the mount daemon and the Pipe case's `sluice run`, e.g.
 * '--cpu-prof --cpu-prof-dir=DIR'. BULK_BENCH_THREADS=1: per-thread CPU of each read on stderr;
 * =faults: per-thread minor faults (hundreds); =switches: per-thread context switches (voluntary
 * + involuntary) of each mount read.
 * BULK_BENCH_RUN_ARGS: extra `sluice run` flags for the Pipe case, e.g. '--log-level debug'.
 * BULK_BENCH_PERF_RECORD=FILE: `perf record -g` of the Pipe case's `sluice run` and its children into FILE.)
 * The Pipe case also reports its reader's CPU per GB (the training command's shell's cutime + cstime).
 * Variants are interleaved round by round, so they see the same machine load.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, readSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const args = process.argv.slice(2);
let rounds = 3, sizeMiB = 512, tls = false, pipe = true, pipeOnly = false, toNull = false, pipeWarm = false, viaProxy = false, pipeObjects = 1, ttfbMs = 0, bandwidthMBps = 0;
const variants = [];
/** --env NAME:VAR=VALUE: an environment variable for variant NAME's daemon only (e.g. GLIBC_TUNABLES). */
const variantEnv = {};
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--rounds') rounds = Number(args[++i]);
  else if (args[i] === '--size') sizeMiB = Number(args[++i]);
  else if (args[i] === '--tls') tls = true;
  else if (args[i] === '--no-pipe') pipe = false;
  else if (args[i] === '--pipe-only') pipeOnly = true;
  else if (args[i] === '--to-null') toNull = true;
  else if (args[i] === '--pipe-warm') pipeWarm = true;
  else if (args[i] === '--proxy') viaProxy = true;
  else if (args[i] === '--ttfb') { ttfbMs = Number(args[++i]); viaProxy = true; }
  else if (args[i] === '--bandwidth') { bandwidthMBps = Number(args[++i]); viaProxy = true; }
  else if (args[i] === '--pipe-objects') pipeObjects = Number(args[++i]);
  else if (args[i] === '--env') { const [name, kv] = [args[++i].slice(0, args[i].indexOf(':')), args[i].slice(args[i].indexOf(':') + 1)]; (variantEnv[name] ??= {})[kv.slice(0, kv.indexOf('='))] = kv.slice(kv.indexOf('=') + 1); }
  else { const [name, dist] = args[i].split('='); variants.push({ name, dist: path.resolve(dist) }); }
}
if (variants.length === 0) { console.error('usage: bulk-receive-bench.mjs [--rounds N] [--size MiB] [--tls] NAME=DIST_DIR ...'); process.exit(2); }
/** Extra node flags for the mount daemon only, e.g. BULK_BENCH_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/p'. */
const daemonNodeArgs = (process.env.BULK_BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
/** Extra `sluice mount` flags, e.g. BULK_BENCH_MOUNT_ARGS='--max-prefetch 16MiB'. */
const mountArgs = (process.env.BULK_BENCH_MOUNT_ARGS ?? '').split(' ').filter(Boolean);
/** Extra `sluice run` flags for the Pipe case, e.g. BULK_BENCH_RUN_ARGS='--log-level debug' (its log is then shown). */
const runArgs = (process.env.BULK_BENCH_RUN_ARGS ?? '').split(' ').filter(Boolean);
const TICK = 100; // CLOCK_TICKS_PER_SEC on Linux
/** The fields of a /proc stat line after the command name (which may hold ') '): index 0 is the state, 7 minflt, 11 utime, 12 stime, 13 cutime, 14 cstime. */
const statFields = (stat) => stat.slice(stat.lastIndexOf(')') + 2).split(' ');
const cpuOf = (stat) => { const f = statFields(stat); return (Number(f[11]) + Number(f[12])) / TICK; };
const cpu = (pid) => cpuOf(readFileSync(`/proc/${pid}/stat`, 'utf8'));
/** User CPU seconds alone: on a VM that hands free memory back to its host, first writes to such memory land mostly in sys time (BENCHMARKS.md t14-folio), so user time is the steadier figure of the daemon's own work. */
const userCpu = (pid) => Number(statFields(readFileSync(`/proc/${pid}/stat`, 'utf8'))[11]) / TICK;
/** Voluntary + involuntary context switches of every thread of `pid` (each FUSE request handed to JavaScript costs a few). */
const switches = (pid) => { let n = 0; for (const t of readdirSync(`/proc/${pid}/task`)) { try { const m = readFileSync(`/proc/${pid}/task/${t}/status`, 'utf8').match(/^voluntary_ctxt_switches:\s*(\d+)\nnonvoluntary_ctxt_switches:\s*(\d+)/m); if (m) n += Number(m[1]) + Number(m[2]); } catch { /* gone */ } } return n; };
/** Per-thread CPU (name: s), or with `since` the change since then, as text (BULK_BENCH_THREADS=1). */
function threadCpu(pid, since) {
  const now = {};
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    try { const st = readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8'); const name = st.slice(st.indexOf('(') + 1, st.lastIndexOf(')')); now[`${name}#${t}`] = cpuOf(st); if (process.env.BULK_BENCH_THREADS === "faults") now[`${name}#${t}`] = Number(st.slice(st.lastIndexOf(")") + 2).split(" ")[7]) / 100;
      if (process.env.BULK_BENCH_THREADS === 'switches') { const m = readFileSync(`/proc/${pid}/task/${t}/status`, 'utf8').match(/^voluntary_ctxt_switches:\s*(\d+)\nnonvoluntary_ctxt_switches:\s*(\d+)/m); now[`${name}#${t}`] = m ? Number(m[1]) + Number(m[2]) : 0; } } catch { /* gone */ }
  }
  if (since === undefined) return now;
  const by = {};
  for (const [k, v] of Object.entries(now)) { const n = k; by[n] = (by[n] ?? 0) + v - (since[k] ?? 0); }
  return Object.entries(by).filter(([, v]) => v > 0).map(([n, v]) => `${n}=${process.env.BULK_BENCH_THREADS === 'switches' ? v : v.toFixed(2)}`).join(' ');
}
/** Minor page faults so far: first touches of new memory (costly on a VM guest). */
const minflt = (pid) => Number(statFields(readFileSync(`/proc/${pid}/stat`, 'utf8'))[7]);

const { startLocalS3 } = await import(path.join(variants[0].dist, 'local/s3-server.js'));
const s3 = await startLocalS3();
const work = mkdtempSync(path.join(os.tmpdir(), 'bulk-bench-'));
let endpoint = s3.endpoint;
let tlsProxy;
const env = { ...process.env, AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey, AWS_REGION: 'us-east-1' };
if (tls) {
  // A TLS terminator in front of s3rver with a CA made for this run (openssl CLI).
  spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${work}/key.pem`, '-out', `${work}/cert.pem`, '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  // In a child process: the reads below block this one (spawnSync), and the proxy must go on forwarding.
  const port = Number(new URL(s3.endpoint).port);
  const script = `const tls = require('node:tls'), net = require('node:net'), fs = require('node:fs');
    const srv = tls.createServer({ key: fs.readFileSync(process.argv[1] + '/key.pem'), cert: fs.readFileSync(process.argv[1] + '/cert.pem') }, (c) => {
      const u = net.connect(${port}, '127.0.0.1'); c.pipe(u).pipe(c); c.on('error', () => u.destroy()); u.on('error', () => c.destroy());
    });
    srv.listen(0, '127.0.0.1', () => console.log(srv.address().port));
    process.stdin.on('end', () => process.exit(0)); process.stdin.resume();`;
  tlsProxy = spawn(process.execPath, ['-e', script, work], { stdio: ['pipe', 'pipe', 'inherit'] });
  const proxyPort = await new Promise((resolve) => tlsProxy.stdout.once('data', (d) => resolve(Number(String(d).trim()))));
  endpoint = `https://127.0.0.1:${proxyPort}`;
  env.NODE_EXTRA_CA_CERTS = `${work}/cert.pem`;
  env.AWS_CA_BUNDLE = `${work}/cert.pem`;
}
let benchProxy;
if (viaProxy && !tls) {
  const { startProxyProcess } = await import(path.join(variants[0].dist, 'bench/runner.js'));
  benchProxy = await startProxyProcess({ name: 'shaped', ttfbMs, bytesPerSec: bandwidthMBps * 1e6 }, Number(new URL(s3.endpoint).port), undefined);
  endpoint = benchProxy.endpoint;
}
await s3.createBucket('bulk');
const size = sizeMiB * 1024 * 1024;
const sums = {};
for (const key of pipeOnly ? [] : ['a', 'b']) {
  const body = randomBytes(size);
  sums[key] = createHash('sha256').update(body).digest('hex');
  await s3.putObject('bulk', key, body);
}
if (pipe) {
  // The Pipe channel streams its objects in key order: the stream's sha256 is that of them all, in turn.
  const whole = createHash('sha256');
  for (let i = 0; i < pipeObjects; i++) {
    const body = randomBytes(Math.floor(size / pipeObjects));
    whole.update(body);
    await s3.putObject('bulk', pipeObjects === 1 ? 'pipe/p' : `pipe/p${i}`, body);
  }
  sums['pipe/p'] = whole.digest('hex');
}
const results = {};
const record = (v, what, secs, cpuS, faults = NaN, userS = NaN, switchCount = NaN, readerS = NaN) => {
  ((results[v] ??= {})[what] ??= []).push({ mbps: size / 1e6 / secs, cpuPerGB: cpuS / (size / 1e9), faultsPerMiB: faults / sizeMiB, userPerGB: userS / (size / 1e9), switchesPerMiB: switchCount / sizeMiB, readerPerGB: readerS / (size / 1e9) });
};
/** CPU seconds of a process's waited-for children (cutime + cstime): the Pipe case's reader, from its shell's stat. */
const childCpuOf = (stat) => { const f = statFields(stat); return (Number(f[13]) + Number(f[14])) / TICK; };

function readThrough(file, key) {
  const t0 = process.hrtime.bigint();
  // --to-null: the timed read goes to /dev/null (the reader costs next to nothing), and
  // verify() hashes the file afterwards, outside the timing and the CPU sample.
  const r = spawnSync('sh', ['-c', toNull ? `dd if="${file}" of=/dev/null bs=1M status=none` : `dd if="${file}" bs=1M status=none | sha256sum`], { encoding: 'utf8' });
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  if (!toNull) check(key, r.stdout.split(' ')[0], r.stderr);
  return secs;
}

function check(key, got, detail = '') {
  if (got !== sums[key]) throw new Error(`sha256 mismatch reading ${key}: ${got} != ${sums[key]} (${detail})`);
}

/** With --to-null, the bytes of a timed read are checked here, after its CPU sample. */
function verify(file, key) {
  if (!toNull) return;
  const r = spawnSync('sha256sum', [file], { encoding: 'utf8' });
  check(key, r.stdout.split(' ')[0], r.stderr);
}

/** Puts all of `file` in the daemon's block cache and none of it in the page cache (see the top). */
async function fillBlockCache(pid, file) {
  spawnSync('dd', [`if=${file}`, 'iflag=nocache', 'count=0', 'status=none']);
  const fd = openSync(file, 'r');
  try {
    readSync(fd, Buffer.alloc(4096), 0, 4096, Math.floor(size / 4 / 4096) * 4096);
    // Idle = at most 3 CPU ticks in a whole second (a profiler samples even then); bounded: 120 s.
    for (let last = -1, t0 = Date.now(); Date.now() - t0 < 120_000;) {
      await new Promise((r) => setTimeout(r, 1000));
      const c = cpu(pid);
      if (c - last <= 0.03) break;
      last = c;
    }
  } finally {
    closeSync(fd);
  }
  spawnSync('dd', [`if=${file}`, 'iflag=nocache', 'count=0', 'status=none']);
}

async function mountRound(v) {
  const mnt = mkdtempSync(path.join(work, 'mnt-'));
  const child = spawn(process.execPath, [...daemonNodeArgs, path.join(v.dist, 'cli.js'), 'mount', 's3://bulk/', mnt, '--endpoint', endpoint, '--path-style', '--metrics-port', '-1', '--log-level', 'warn', ...mountArgs], { env: { ...env, ...variantEnv[v.name] }, stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    await new Promise((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d) => { out += d; if (out.includes('ready')) resolve(); });
      child.on('exit', (c) => reject(new Error(`mount exited ${c}`)));
      setTimeout(() => reject(new Error('mount not ready in 60 s')), 60_000);
    });
    readdirSync(mnt); // waits for the listing: lookups are then answered from it, not by HEAD
    for (const [key, what] of [['a', 'fresh'], ['a', 'cached'], ['b', 'warm']]) {
      // Every read of `cached` reaches the daemon and is answered from its block cache.
      if (what === 'cached') await fillBlockCache(child.pid, path.join(mnt, key));
      const c0 = cpu(child.pid), f0 = minflt(child.pid), t0 = threadCpu(child.pid), u0 = userCpu(child.pid), x0 = switches(child.pid);
      const secs = readThrough(path.join(mnt, key), key);
      record(v.name, what, secs, cpu(child.pid) - c0, minflt(child.pid) - f0, userCpu(child.pid) - u0, switches(child.pid) - x0);
      verify(path.join(mnt, key), key);
      if (process.env.BULK_BENCH_THREADS) process.stderr.write(`${v.name} ${what} threads: ${threadCpu(child.pid, t0)}\n`);
    }
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => (child.exitCode !== null ? r() : child.on('exit', r)));
    spawnSync('fusermount', ['-u', mnt], { stdio: 'ignore' });
    rmSync(mnt, { recursive: true, force: true });
  }
}

async function pipeRound(v) {
  const root = mkdtempSync(path.join(work, 'root-'));
  // Per-thread stats (BULK_BENCH_THREADS=1): every task's stat line, before and after the read.
  const tasks = (f) => process.env.BULK_BENCH_THREADS ? `; for t in /proc/$PPID/task/*; do echo "\${t##*/} $(cat $t/stat)"; done > ${root}/${f}` : '';
  // BULK_BENCH_PIPE_READER: the reader's command with FIFO where the FIFO goes (default `sha256sum < FIFO`); it must print the digest first.
  const reader = (fifo) => (process.env.BULK_BENCH_PIPE_READER ?? 'sha256sum < FIFO').replaceAll('FIFO', fifo);
  // r0..r2: the shell's own stat, whose cutime + cstime is the CPU of the readers it has waited for (and of cat and date, ~0).
  const script = `cat /proc/$PPID/stat > ${root}/s0${tasks('k0')}; cat /proc/$$/stat > ${root}/r0; date +%s.%N > ${root}/t0; ${reader(`${root}/input/data/train_0`)} > ${root}/sum; date +%s.%N > ${root}/t1; cat /proc/$PPID/stat > ${root}/s1${tasks('k1')}; cat /proc/$$/stat > ${root}/r1` +
    // Epoch 2 is timed from epoch 1's end stamps (t1, s1), taken right before its reader starts.
    (pipeWarm ? `; ${reader(`${root}/input/data/train_1`)} > ${root}/sum1; date +%s.%N > ${root}/t2; cat /proc/$PPID/stat > ${root}/s2; cat /proc/$$/stat > ${root}/r2` : '');
  // BULK_BENCH_PERF_STAT=EVENTS: `perf stat -e EVENTS` around the whole `sluice run` (its start-up and both epochs too,
  // and, as perf follows children, the training command's reader: compare counts only between runs with the same reader); printed.
  // BULK_BENCH_PERF_RECORD=FILE: `perf record -g -o FILE` around the same (with BULK_BENCH_NODE_ARGS=--perf-basic-prof for JS names).
  const perfWrap = process.env.BULK_BENCH_PERF_STAT ? ['perf', 'stat', '-x,', '-e', process.env.BULK_BENCH_PERF_STAT, '--']
    : process.env.BULK_BENCH_PERF_RECORD ? ['perf', 'record', '-q', '-g', '-F', '999', '-o', process.env.BULK_BENCH_PERF_RECORD, '--'] : [];
  const r = spawnSync(perfWrap[0] ?? process.execPath, [...perfWrap.slice(1), ...(perfWrap.length ? [process.execPath] : []), ...daemonNodeArgs, path.join(v.dist, 'cli.js'), 'run', '--channel', 'train=s3://bulk/pipe/,mode=Pipe', '--epochs', pipeWarm ? '2' : '1', '--root', root, '--endpoint', endpoint, '--path-style', '--metrics-port', '-1', '--log-level', 'warn', ...runArgs, '--', 'sh', '-c', script], { env: { ...env, ...variantEnv[v.name] }, encoding: 'utf8', timeout: 300_000 });
  if (r.status !== 0) throw new Error(`pipe run failed: ${r.stderr}`);
  if (runArgs.length > 0) process.stderr.write(r.stderr);
  if (process.env.BULK_BENCH_PERF_STAT) process.stderr.write(`${v.name} perf stat: ${r.stderr.trim().split('\n').filter((l) => /^\d/.test(l)).map((l) => `${l.split(',')[2]}=${l.split(',')[0]}`).join(' ')}\n`);
  const got = readFileSync(`${root}/sum`, 'utf8').split(' ')[0];
  if (got !== sums['pipe/p']) throw new Error(`pipe sha256 mismatch: ${got}`);
  const secs = Number(readFileSync(`${root}/t1`, 'utf8')) - Number(readFileSync(`${root}/t0`, 'utf8'));
  const readerCpu = (a, b) => childCpuOf(readFileSync(`${root}/${b}`, 'utf8')) - childCpuOf(readFileSync(`${root}/${a}`, 'utf8'));
  record(v.name, 'pipe', secs, cpuOf(readFileSync(`${root}/s1`, 'utf8')) - cpuOf(readFileSync(`${root}/s0`, 'utf8')), NaN, NaN, NaN, readerCpu('r0', 'r1'));
  if (pipeWarm) {
    const got1 = readFileSync(`${root}/sum1`, 'utf8').split(' ')[0];
    if (got1 !== sums['pipe/p']) throw new Error(`pipe epoch 2 sha256 mismatch: ${got1}`);
    const secs1 = Number(readFileSync(`${root}/t2`, 'utf8')) - Number(readFileSync(`${root}/t1`, 'utf8'));
    record(v.name, 'pipe-warm', secs1, cpuOf(readFileSync(`${root}/s2`, 'utf8')) - cpuOf(readFileSync(`${root}/s1`, 'utf8')), NaN, NaN, NaN, readerCpu('r1', 'r2'));
  }
  if (process.env.BULK_BENCH_THREADS) {
    const load = (f) => Object.fromEntries(readFileSync(`${root}/${f}`, 'utf8').trim().split('\n').map((l) => { const st = l.slice(l.indexOf(' ') + 1); const f = statFields(st); return [`${st.slice(st.indexOf('(') + 1, st.lastIndexOf(')'))}#${l.slice(0, l.indexOf(' '))}`, { u: Number(f[11]) / TICK, s: Number(f[12]) / TICK }]; }));
    const k0 = load('k0'), k1 = load('k1');
    const total = cpuOf(readFileSync(`${root}/s1`, 'utf8')) - cpuOf(readFileSync(`${root}/s0`, 'utf8'));
    const live = Object.entries(k1).map(([k, c]) => [k, c.u + c.s - (k0[k] ? k0[k].u + k0[k].s : 0), c.u - (k0[k]?.u ?? 0), c.s - (k0[k]?.s ?? 0)]).filter(([, d]) => d > 0);
    // A thread that ended during the read (the paced writer closes the FIFO and exits at EOF) is
    // in the process total but no longer listed: the remainder is charged to it.
    const gone = total - live.reduce((a, [, d]) => a + d, 0);
    process.stderr.write(`${v.name} pipe threads (s, user+sys): ${live.map(([k, d, u, sy]) => `${k}=${d.toFixed(2)}(${u.toFixed(2)}+${sy.toFixed(2)})`).join(' ')} ended=${gone.toFixed(2)} total=${total.toFixed(2)}\n`);
  }
  rmSync(root, { recursive: true, force: true });
}

try {
  for (let r = 0; r < rounds; r++) {
    for (const v of variants) { if (!pipeOnly) await mountRound(v); if (pipe) await pipeRound(v); }
    process.stderr.write(`round ${r + 1}/${rounds} done\n`);
  }
} finally {
  tlsProxy?.kill();
  await benchProxy?.stop();
  await s3.stop();
  rmSync(work, { recursive: true, force: true });
}
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };
console.log(`${tls ? 'HTTPS' : 'HTTP'}, ${sizeMiB} MiB, ${rounds} rounds, medians (loadavg ${readFileSync('/proc/loadavg', 'utf8').trim()})`);
console.log('| variant | read | daemon CPU s/GB | of it user | MB/s | page faults/MiB | context switches/MiB | Pipe reader CPU s/GB | runs (CPU s/GB) |');
console.log('|---|---|---|---|---|---|---|---|---|');
const fmt = (x, d) => (Number.isNaN(x) ? '–' : x.toFixed(d));
for (const v of variants) for (const [what, xs] of Object.entries(results[v.name] ?? {})) {
  console.log(`| ${v.name} | ${what} | ${median(xs.map((x) => x.cpuPerGB)).toFixed(2)} | ${fmt(median(xs.map((x) => x.userPerGB)), 2)} | ${median(xs.map((x) => x.mbps)).toFixed(0)} | ${fmt(median(xs.map((x) => x.faultsPerMiB)), 0)} | ${fmt(median(xs.map((x) => x.switchesPerMiB)), 1)} | ${fmt(median(xs.map((x) => x.readerPerGB)), 2)} | ${xs.map((x) => x.cpuPerGB.toFixed(2)).join(' ')} |`);
}
