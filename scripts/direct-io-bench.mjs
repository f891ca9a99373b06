#!/usr/bin/env node
/**
 * --direct-io against the page cache, standalone (SEMANTICS.md "Direct I/O"): s3rver without
 * latency, objects of --size MiB, each variant a FRESH mount per round, objects read in turn
 * with `dd bs=BS of=/dev/null`, CPU = utime+stime of the sluice daemon over each read (from
 * /proc/PID/stat). After each timed read its bytes are checked (sha256sum through the mount,
 * untimed). Unlike `sluice bench` (whose readers keep the bytes and whose mounts reuse the
 * page cache the previous mount freed a moment before), the page cache here comes from
 * memory the machine has not used lately, as in a job's first pass over a dataset.
 *
 * Usage: node scripts/direct-io-bench.mjs [--rounds N] [--size MiB] [--bs SIZE] [--reads a,b] [--s3fs] DIST_DIR
 * --reads names the objects read in turn through one mount (default a,b: a fresh daemon's
 * first object, then a second one); a name may repeat (a,b,a reads a again).
 * --s3fs adds s3fs (when installed) with and without its direct_io option, same settings as
 * bench/scenarios/bulk.yaml (parallel_count=16, multipart_size=8): with direct I/O on both
 * sides, neither daemon fills a page cache, so the CPU compared is each daemon's own work.
 * --proxy puts `sluice bench`'s latency proxy (its own process, started as the bench starts it) in
 * front of s3rver with the no-latency profile, as bench/scenarios/bulk.yaml's no-latency rows.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const args = process.argv.slice(2);
let rounds = 2, sizeMiB = 512, bs = '1M', reads = ['a', 'b'], dist, withS3fs = false, viaProxy = false;
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--rounds') rounds = Number(args[++i]);
  else if (args[i] === '--size') sizeMiB = Number(args[++i]);
  else if (args[i] === '--bs') bs = args[++i];
  else if (args[i] === '--reads') reads = args[++i].split(',');
  else if (args[i] === '--s3fs') withS3fs = true;
  else if (args[i] === '--proxy') viaProxy = true;
  else dist = path.resolve(args[i]);
}
if (!dist) { console.error('usage: direct-io-bench.mjs [--rounds N] [--size MiB] [--bs SIZE] [--reads a,b] DIST_DIR'); process.exit(2); }

const TICK = 100; // CLOCK_TICKS_PER_SEC on Linux
const cpu = (pid) => { const s = readFileSync(`/proc/${pid}/stat`, 'utf8'); const f = s.slice(s.lastIndexOf(')') + 2).split(' '); return (Number(f[11]) + Number(f[12])) / TICK; };
const { startLocalS3 } = await import(path.join(dist, 'local/s3-server.js'));
const s3 = await startLocalS3();
const work = mkdtempSync(path.join(os.tmpdir(), 'direct-io-bench-'));
const env = { ...process.env, AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey, AWS_REGION: 'us-east-1' };
const size = sizeMiB * 1024 * 1024;
const sums = {};
await s3.createBucket('dio');
for (const key of new Set(reads)) {
  const body = randomBytes(size);
  sums[key] = createHash('sha256').update(body).digest('hex');
  await s3.putObject('dio', key, body);
}
let endpoint = s3.endpoint;
let proxy;
if (viaProxy) {
  const { startProxyProcess } = await import(path.join(dist, 'bench/runner.js'));
  proxy = await startProxyProcess({ name: 'no-latency', ttfbMs: 0, bytesPerSec: 0 }, Number(new URL(s3.endpoint).port), undefined);
  endpoint = proxy.endpoint;
}
const variants = [{ name: 'page cache', args: [] }, { name: '--direct-io', args: ['--direct-io'] }];
if (withS3fs && spawnSync('sh', ['-c', 'command -v s3fs']).status === 0) {
  writeFileSync(path.join(work, 's3fs.passwd'), `${s3.credentials.accessKeyId}:${s3.credentials.secretAccessKey}\n`, { mode: 0o600 });
  variants.push({ name: 's3fs', s3fs: [] }, { name: 's3fs -o direct_io', s3fs: ['direct_io'] });
}

/** The mount's daemon: sluice, or s3fs in the foreground; resolves once the mount answers. */
function startMount(v, mnt) {
  if (v.s3fs === undefined) {
    const child = spawn(process.execPath, [path.join(dist, 'cli.js'), 'mount', 's3://dio/', mnt, '--endpoint', endpoint, '--path-style', '--metrics-port', '-1', '--log-level', 'warn', ...v.args], { env, stdio: ['ignore', 'pipe', 'inherit'] });
    return { child, ready: new Promise((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d) => { out += d; if (out.includes('ready')) resolve(); });
      child.on('exit', (c) => reject(new Error(`mount exited ${c}`)));
      setTimeout(() => reject(new Error('mount not ready in 60 s')), 60_000);
    }) };
  }
  const opts = ['ro', `url=${endpoint}`, 'use_path_request_style', `passwd_file=${path.join(work, 's3fs.passwd')}`, 'endpoint=us-east-1', 'parallel_count=16', 'multipart_size=8', ...v.s3fs];
  const child = spawn('s3fs', ['dio', mnt, '-f', ...opts.flatMap((o) => ['-o', o])], { stdio: ['ignore', 'ignore', 'inherit'] });
  return { child, ready: (async () => {
    for (let t0 = Date.now(); Date.now() - t0 < 60_000; await new Promise((r) => setTimeout(r, 100))) {
      if (child.exitCode !== null) throw new Error(`s3fs exited ${child.exitCode}`);
      if (readFileSync('/proc/self/mountinfo', 'utf8').includes(` ${mnt} `)) return;
    }
    throw new Error('s3fs not mounted in 60 s');
  })() };
}
const results = {};

async function round(v) {
  const mnt = mkdtempSync(path.join(work, 'mnt-'));
  const { child, ready } = startMount(v, mnt);
  try {
    await ready;
    readdirSync(mnt);
    for (const [i, key] of reads.entries()) {
      const file = path.join(mnt, key);
      const c0 = cpu(child.pid);
      const t0 = process.hrtime.bigint();
      const r = spawnSync('dd', [`if=${file}`, 'of=/dev/null', `bs=${bs}`, 'status=none']);
      const secs = Number(process.hrtime.bigint() - t0) / 1e9;
      const used = cpu(child.pid) - c0;
      if (r.status !== 0) throw new Error(`dd of ${key} failed: ${r.stderr}`);
      const got = spawnSync('sha256sum', [file], { encoding: 'utf8' }).stdout.split(' ')[0];
      if (got !== sums[key]) throw new Error(`sha256 mismatch reading ${key} (${v.name})`);
      ((results[v.name] ??= {})[`${i + 1}: ${key}`] ??= []).push({ mbps: size / 1e6 / secs, cpuPerGB: used / (size / 1e9) });
    }
  } finally {
    spawnSync('umount', [mnt]);
    child.kill();
    await new Promise((r) => (child.exitCode !== null ? r() : child.on('exit', r)));
  }
}

try {
  for (let r = 1; r <= rounds; r++) {
    for (const v of variants) await round(v);
    process.stderr.write(`round ${r}/${rounds} done\n`);
  }
} finally {
  await proxy?.stop();
  await s3.close?.();
  rmSync(work, { recursive: true, force: true });
}
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };
console.log(`${sizeMiB} MiB objects, dd bs=${bs}, ${rounds} rounds${viaProxy ? ', through the latency proxy (no latency)' : ''}, medians (loadavg ${readFileSync('/proc/loadavg', 'utf8').trim()})`);
console.log('| variant | read | daemon CPU s/GB | MB/s | runs (CPU s/GB) |');
console.log('|---|---|---|---|---|');
for (const [name, byRead] of Object.entries(results)) {
  for (const [what, rs] of Object.entries(byRead)) {
    console.log(`| ${name} | ${what} | ${median(rs.map((x) => x.cpuPerGB)).toFixed(2)} | ${median(rs.map((x) => x.mbps)).toFixed(0)} | ${rs.map((x) => x.cpuPerGB.toFixed(2)).join(' ')} |`);
  }
}
process.exit(0);
