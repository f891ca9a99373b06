#!/usr/bin/env node
/**
 * Standalone measurement of File mode against `aws s3 cp --recursive` (issue 11: File mode on
 * large objects >= 1.5x aws), side by side, through the bench's latency proxy.
 *
 * s3rver is seeded with COUNT objects of SIZE MiB (the bench's bytes and key layout); every
 * round runs each variant once, in turn, so they share the machine's load:
 *  - NAME=DIST_DIR: sluice's File mode through DIST_DIR/bench/host.js, exactly as `sluice
 *    bench` runs it (part size, in-flight budget and connections as targets.ts passes them,
 *    unless FILE_BENCH_HOST='{"partSize":...}' overrides some); time from spawn to its
 *    {"done"} line, CPU = utime+stime from /proc/PID/stat at that moment (start-up included,
 *    like aws's).
 *  - aws: `aws s3 cp --recursive` with max_concurrent_requests=16, multipart_chunksize=8MB
 *    (file-vs-aws.yaml's peer settings); time to exit, CPU from its rusage (GNU time).
 * The download is not read back (the bench's reader hashes it afterwards; that cost is the
 * same for every target): each file's sha256 is checked after the timing, untimed.
 * Also printed: the link limit of the same proxy (16 x 8 MiB ranged GETs with curl,
 * bytes discarded), measured in each round.
 *
 * Usage: node scripts/file-mode-bench.mjs [--rounds N] [--count N] [--size MiB]
 *          [--profile s3-like|no-latency] [--tls] [--no-limit] [--env NAME:VAR=VALUE] NAME=DIST_DIR ... [aws]
 * --env NAME:VAR=VALUE sets VAR for variant NAME's File-mode host only (e.g.
 *   small:SLUICE_SLAB_SMALL_PAGES=1 against the same dist as another name); repeatable.
 * FILE_BENCH_NODE_ARGS: node flags for the File-mode host, e.g. '--cpu-prof --cpu-prof-dir=DIR'.
 * FILE_BENCH_LOG_LEVEL: the host's SLUICE_LOG_LEVEL (default warn; debug prints part timelines).
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync, createReadStream } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.join(here, '..', 'dist');
const args = process.argv.slice(2);
let rounds = 3, count = 4, sizeMiB = 64, profile = 's3-like', useTls = false, limit = true;
const variants = [];
/** --env NAME:VAR=VALUE: an environment variable for variant NAME's host only. */
const variantEnv = {};
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--rounds') rounds = Number(args[++i]);
  else if (args[i] === '--count') count = Number(args[++i]);
  else if (args[i] === '--size') sizeMiB = Number(args[++i]);
  else if (args[i] === '--profile') profile = args[++i];
  else if (args[i] === '--tls') useTls = true;
  else if (args[i] === '--no-limit') limit = false;
  else if (args[i] === '--env') { const a = args[++i]; const kv = a.slice(a.indexOf(':') + 1); (variantEnv[a.slice(0, a.indexOf(':'))] ??= {})[kv.slice(0, kv.indexOf('='))] = kv.slice(kv.indexOf('=') + 1); }
  else if (args[i] === 'aws') variants.push({ name: 'aws' });
  else { const [name, d] = args[i].split('='); variants.push({ name, dist: path.resolve(d) }); }
}
if (variants.length === 0) { console.error('usage: file-mode-bench.mjs [--rounds N] [--count N] [--size MiB] [--profile P] [--tls] NAME=DIST_DIR ... [aws]'); process.exit(2); }
const PROFILES = { 's3-like': { ttfbMs: 25, bytesPerSec: 80e6 }, 'no-latency': { ttfbMs: 0, bytesPerSec: 0 } };
if (!PROFILES[profile]) { console.error(`unknown profile ${profile}`); process.exit(2); }
const MiB = 1024 * 1024;
const TICK = 100;
const cpuOf = (pid) => { const f = readFileSync(`/proc/${pid}/stat`, 'utf8'); const s = f.slice(f.lastIndexOf(')') + 2).split(' '); return (Number(s[11]) + Number(s[12])) / TICK; };
const statusKb = (pid, field) => Number(readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`${field}:\\s+(\\d+)`))[1]);

const { startLocalS3 } = await import(path.join(dist, 'local/s3-server.js'));
const { writeS3rverObjects, benchLayout } = await import(path.join(dist, 'bench/datasets.js'));
const { createRunCa } = await import(path.join(dist, 'bench/tls-ca.js'));
const root = mkdtempSync(path.join(os.tmpdir(), 'file-mode-bench-'));
const s3 = await startLocalS3({ dir: path.join(root, 's3rver') });
const children = [];
/** What to stop at the end besides the children (the proxy). */
const stops = [];
try {
  const bucket = 'sluice-bench', prefix = 'large-d/';
  await s3.createBucket(bucket);
  const objs = await writeS3rverObjects(s3, bucket, benchLayout(prefix, { largeFiles: { count, size: sizeMiB * MiB } }), 1);
  const total = objs.reduce((n, o) => n + o.size, 0);
  const ca = useTls ? await createRunCa((mkdirSync(path.join(root, 'ca')), path.join(root, 'ca'))) : undefined;
  const { startProxyProcess } = await import(path.join(dist, 'bench/runner.js'));
  const proxy = await startProxyProcess({ name: profile, ...PROFILES[profile], ...(ca ? { https: true } : {}) }, s3.port, ca);
  stops.push(() => proxy.stop());
  const endpoint = proxy.endpoint;
  const results = {};
  const record = (name, secs, cpu, extra = '') => {
    (results[name] ??= []).push({ secs, cpu });
    console.error(`  ${name}: ${(total / 1e6 / secs).toFixed(1)} MB/s, ${(cpu / (total / 1e9)).toFixed(2)} CPU s/GB, ${secs.toFixed(2)} s ${extra}`);
  };
  const verify = async (dir) => {
    for (const o of objs) {
      const h = createHash('sha256');
      await new Promise((res, rej) => createReadStream(path.join(dir, o.key.slice(prefix.length))).on('data', (d) => h.update(d)).on('end', res).on('error', rej));
      if (h.digest('hex') !== o.sha256) throw new Error(`wrong bytes in ${o.key}`);
    }
  };
  const awsBin = spawnSync('pyenv', ['which', 'aws'], { encoding: 'utf8' }).stdout.trim() || 'aws';
  writeFileSync(path.join(root, 'aws.config'), '[default]\nregion = us-east-1\ns3 =\n  addressing_style = path\n  max_concurrent_requests = 16\n  multipart_chunksize = 8MB\n');

  for (let r = 1; r <= rounds; r++) {
    console.error(`round ${r}/${rounds} (loadavg ${readFileSync('/proc/loadavg', 'utf8').trim()})`);
    if (limit) {
      // The link: 16 curl transfers of 8 MiB ranges at once, bytes thrown away.
      const t0 = performance.now();
      const ranges = [];
      for (const o of objs) for (let s = 0; s < o.size; s += 8 * MiB) ranges.push([o.key, s, Math.min(o.size, s + 8 * MiB) - 1]);
      let next = 0;
      await Promise.all(Array.from({ length: 16 }, async () => {
        while (next < ranges.length) {
          const [k, s, e] = ranges[next++];
          await new Promise((res, rej) => {
            const c = spawn('curl', ['-sf', '-o', '/dev/null', ...(ca ? ['--cacert', ca.caFile] : []), '-r', `${s}-${e}`, `${endpoint}/${bucket}/${k}`]);
            c.on('exit', (code) => (code === 0 ? res() : rej(new Error(`curl exit ${code}`))));
          });
        }
      }));
      const secs = (performance.now() - t0) / 1000;
      (results.link ??= []).push({ secs, cpu: 0 });
      console.error(`  link (curl x16): ${(total / 1e6 / secs).toFixed(1)} MB/s`);
    }
    for (const v of variants) {
      const out = path.join(root, `dl-${v.name}-${r}`);
      mkdirSync(out, { recursive: true });
      if (v.name === 'aws') {
        const timeFile = path.join(root, 'aws.time');
        const t0 = performance.now();
        const code = await new Promise((res) => {
          const c = spawn('/usr/bin/time', ['-f', '%U %S', '-o', timeFile, awsBin, 's3', 'cp', '--recursive', `s3://${bucket}/${prefix}`, out, '--endpoint-url', endpoint, '--only-show-errors', '--no-progress'], {
            stdio: ['ignore', 'inherit', 'inherit'],
            env: { ...process.env, AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey, AWS_CONFIG_FILE: path.join(root, 'aws.config'), AWS_SHARED_CREDENTIALS_FILE: '/dev/null', AWS_DEFAULT_REGION: 'us-east-1', ...(ca ? { AWS_CA_BUNDLE: ca.caFile } : {}) },
          });
          c.on('exit', res);
        });
        const secs = (performance.now() - t0) / 1000;
        if (code !== 0) throw new Error(`aws exit ${code}`);
        const [u, s] = readFileSync(timeFile, 'utf8').trim().split(/\s+/).map(Number);
        await verify(out);
        record('aws', secs, u + s);
      } else {
        const host = { mode: 'File', bucket, prefix, endpoint, credentials: s3.credentials, dataDir: out, ...(ca ? { caFile: ca.caFile } : {}), partSize: 8 * MiB, maxInflight: 512 * MiB, maxConnections: 16, ...JSON.parse(process.env.FILE_BENCH_HOST ?? '{}') };
        const argsFile = path.join(root, `host-${v.name}.json`);
        writeFileSync(argsFile, JSON.stringify(host));
        const nodeArgs = (process.env.FILE_BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
        const t0 = performance.now();
        const c = spawn(process.execPath, [...nodeArgs, path.join(v.dist, 'bench/host.js'), argsFile], { stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, SLUICE_LOG_LEVEL: process.env.FILE_BENCH_LOG_LEVEL ?? 'warn', ...variantEnv[v.name] } });
        children.push(c);
        const exited = new Promise((res) => c.once('exit', res));
        await new Promise((res, rej) => {
          let buf = '';
          c.stdout.on('data', (b) => {
            buf += b;
            if (buf.includes('"done"')) res();
            else if (buf.includes('"error"')) rej(new Error(buf));
            else if (process.env.FILE_BENCH_LOG_LEVEL) { process.stderr.write(buf); buf = ''; }
          });
          c.once('exit', (code) => rej(new Error(`host exited ${code}: ${buf}`)));
        });
        const secs = (performance.now() - t0) / 1000;
        const cpu = cpuOf(c.pid);
        const hwm = statusKb(c.pid, 'VmHWM');
        c.stdin.end();
        await exited;
        await verify(path.join(out, 'bench'));
        record(v.name, secs, cpu, `peak RSS ${(hwm / 1024).toFixed(0)} MiB`);
      }
      rmSync(out, { recursive: true, force: true });
    }
  }
  const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor((s.length - 1) / 2)]; };
  console.log(`${profile}${ca ? ' HTTPS' : ' HTTP'}, ${count} x ${sizeMiB} MiB (${(total / 1e6).toFixed(1)} MB), ${rounds} rounds, medians; loadavg ${readFileSync('/proc/loadavg', 'utf8').trim()}`);
  console.log('| target | MB/s | CPU s/GB | s |');
  console.log('|---|---:|---:|---:|');
  for (const [name, rs] of Object.entries(results)) {
    const secs = median(rs.map((x) => x.secs));
    console.log(`| ${name} | ${(total / 1e6 / secs).toFixed(1)} | ${name === 'link' ? '' : (median(rs.map((x) => x.cpu)) / (total / 1e9)).toFixed(2)} | ${secs.toFixed(2)} |`);
  }
  if (results.aws) {
    for (const [name, rs] of Object.entries(results)) {
      if (name === 'aws' || name === 'link') continue;
      // Ratio per round (same load), then the median of the ratios.
      const ratios = rs.map((x, i) => results.aws[i].secs / x.secs);
      console.log(`${name} / aws (median of per-round ratios): ${median(ratios).toFixed(2)}x  [${ratios.map((x) => x.toFixed(2)).join(', ')}]`);
    }
  }
} finally {
  for (const c of children) if (c.exitCode === null) { c.stdin?.end(); c.kill('SIGTERM'); }
  for (const stop of stops) await stop();
  await s3.stop();
  rmSync(root, { recursive: true, force: true });
}
