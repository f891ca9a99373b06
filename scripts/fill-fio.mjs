#!/usr/bin/env node
/**
 * Mountpoint's fio read jobs on one large file through a fresh mount per job, sluice builds and
 * s3fs side by side (issue 44, decision 0033): s3rver behind the bench's latency proxy (its own
 * process; default the s3-like shape, +25 ms per request and 80 MB/s per connection).
 *
 * Jobs (Mountpoint's scripts/fio/read/*.fio, shortened): bs=256k, ioengine=sync, time_based,
 * runtime 12 s, --thread: seq_read (rw=read, 1 job), seq_read_4t (4 jobs), rand_read (randread,
 * 1 job), rand_read_4t (4 jobs). time_based re-reads the file from the start when a pass ends.
 * Each job: a fresh mount, fio, then (untimed) sha256 of the whole file through the same mount,
 * compared with the source's. Reports fio's MiB/s, the mount process's CPU s per GB fio read
 * (utime + stime from /proc), and the object GETs the proxy saw.
 *
 * Usage: node scripts/fill-fio.mjs [--size MiB] [--jobs seq_read,rand_read] [--runtime S]
 *        [--ttfb MS] [--bandwidth MB/s] [--no-verify] NAME=DIST_DIR ... [s3fs]
 * e.g.   node scripts/fill-fio.mjs --size 1024 before=dist-main after=dist s3fs
 * s3fs runs as the bench runs it (parallel_count=16, multipart_size=8); FILL_FIO_MOUNT_ARGS adds
 * `sluice mount` flags. Needs fio and s3fs on the PATH, and room in $TMPDIR for the object twice.
 */
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, createReadStream, mkdtempSync, openSync, readSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';

const args = process.argv.slice(2);
let sizeMiB = 1024, runtime = 12, ttfbMs = 25, bandwidthMBps = 80, verify = true;
let jobs = ['seq_read', 'seq_read_4t', 'rand_read', 'rand_read_4t'];
const variants = [];
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--size') sizeMiB = Number(args[++i]);
  else if (a === '--runtime') runtime = Number(args[++i]);
  else if (a === '--ttfb') ttfbMs = Number(args[++i]);
  else if (a === '--bandwidth') bandwidthMBps = Number(args[++i]);
  else if (a === '--jobs') jobs = args[++i].split(',');
  else if (a === '--no-verify') verify = false;
  else if (a === 's3fs') variants.push({ name: 's3fs' });
  else if (a.includes('=')) { const [name, dist] = a.split('='); variants.push({ name, dist: path.resolve(dist) }); }
  else { console.error(`unknown argument ${a}`); process.exit(2); }
}
const JOBS = { seq_read: ['read', 1], seq_read_4t: ['read', 4], rand_read: ['randread', 1], rand_read_4t: ['randread', 4] };
if (variants.length === 0 || jobs.some((j) => !JOBS[j])) {
  console.error(`usage: fill-fio.mjs [--size MiB] [--jobs ${Object.keys(JOBS).join(',')}] NAME=DIST_DIR ... [s3fs]`);
  process.exit(2);
}
const anyDist = variants.find((v) => v.dist)?.dist ?? path.resolve('dist');
const TICK = 100;
const cpu = (pid) => { const s = readFileSync(`/proc/${pid}/stat`, 'utf8'); const f = s.slice(s.lastIndexOf(')') + 2).split(' '); return (Number(f[11]) + Number(f[12])) / TICK; };

const { startLocalS3 } = await import(path.join(anyDist, 'local/s3-server.js'));
const { startProxyProcess } = await import(path.join(anyDist, 'bench/runner.js'));
const s3 = await startLocalS3();
const work = mkdtempSync(path.join(os.tmpdir(), 'fill-fio-'));
const proxy = await startProxyProcess({ name: 'shaped', ttfbMs, bytesPerSec: bandwidthMBps * 1e6 }, Number(new URL(s3.endpoint).port), undefined);
const env = { ...process.env, AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey, AWS_REGION: 'us-east-1' };
const mountArgs = (process.env.FILL_FIO_MOUNT_ARGS ?? '').split(' ').filter(Boolean);
const size = sizeMiB * 1024 * 1024;
const results = [];

async function stopChild(child) {
  if (child.exitCode !== null) return;
  child.kill('SIGTERM');
  await Promise.race([new Promise((r) => child.once('exit', r)), new Promise((r) => setTimeout(r, 5000))]);
  if (child.exitCode === null) child.kill('SIGKILL');
}
const mounted = (dir) => readFileSync('/proc/mounts', 'utf8').split('\n').some((l) => l.split(' ')[1] === dir);

try {
  // The object: random bytes written once to a file, uploaded as a stream (it may be above Buffer's limit).
  const src = path.join(work, 'object');
  spawnSync('sh', ['-c', `head -c ${size} /dev/urandom > "${src}"`]);
  const sum = spawnSync('sha256sum', [src], { encoding: 'utf8' }).stdout.split(' ')[0];
  await s3.createBucket('fio');
  const require = createRequire(path.join(anyDist, 'cli.js'));
  const { S3Client, PutObjectCommand } = require('@aws-sdk/client-s3');
  const sdk = new S3Client({ endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: s3.credentials, requestChecksumCalculation: 'WHEN_REQUIRED' }); // no aws-chunked body: s3rver would store its framing
  await sdk.send(new PutObjectCommand({ Bucket: 'fio', Key: 'file', Body: createReadStream(src), ContentLength: statSync(src).size }));
  sdk.destroy();
  rmSync(src);
  writeFileSync(path.join(work, 'passwd'), `${s3.credentials.accessKeyId}:${s3.credentials.secretAccessKey}\n`, { mode: 0o600 });

  for (const job of jobs) {
    for (const v of variants) {
      const mnt = mkdtempSync(path.join(work, 'mnt-'));
      const child = v.dist
        ? spawn(process.execPath, [path.join(v.dist, 'cli.js'), 'mount', 's3://fio/', mnt, '--endpoint', proxy.endpoint, '--path-style', '--metrics-port', '-1', '--log-level', 'warn', ...mountArgs], { env, stdio: ['ignore', 'ignore', 'inherit'] })
        : spawn('s3fs', ['fio', mnt, '-f', '-o', 'ro', '-o', `url=${proxy.endpoint}`, '-o', 'use_path_request_style', '-o', `passwd_file=${path.join(work, 'passwd')}`, '-o', 'endpoint=us-east-1', '-o', 'parallel_count=16', '-o', 'multipart_size=8'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
      try {
        for (let t0 = Date.now(); !mounted(mnt); await new Promise((r) => setTimeout(r, 50))) {
          if (child.exitCode !== null || Date.now() - t0 > 60_000) throw new Error(`${v.name} did not mount`);
        }
        const file = path.join(mnt, 'file');
        statSync(file); // the lookup, before the timed part
        const [rw, numjobs] = JOBS[job];
        // FILL_FIO_TRACE=1 (with FILL_FIO_METRICS): the fill's progress every 0.5 s after one random read, instead of the job.
        if (v.dist && process.env.FILL_FIO_TRACE) {
          const fd = openSync(file, 'r'); // held open: closing the last handle stops the fill
          readSync(fd, Buffer.alloc(262144), 0, 262144, Math.floor(size / 2 / 262144) * 262144);
          for (let i = 0; i < 30; i++) {
            const text = await (await fetch(`http://127.0.0.1:${process.env.FILL_FIO_METRICS}/metrics`)).text();
            process.stderr.write(`${(i / 2).toFixed(1)} s: ${text.split('\n').filter((l) => /^sluice_(fill_|s3_received|s3_inflight|inflight_bytes|cache_bytes |cache_capacity)/.test(l)).join(' ')}\n`);
            await new Promise((r) => setTimeout(r, 500));
          }
          closeSync(fd);
          continue;
        }
        const g0 = (await proxy.stats()).objectGets;
        const c0 = cpu(child.pid);
        const r = spawnSync('fio', ['--thread', '--name', job, `--filename=${file}`, `--size=${size}`, `--rw=${rw}`, '--bs=256k', '--ioengine=sync', '--time_based', `--runtime=${runtime}`, `--numjobs=${numjobs}`, '--group_reporting', '--fallocate=none', '--output-format=json'], { encoding: 'utf8', timeout: (runtime + 120) * 1000 });
        if (r.status !== 0) throw new Error(`fio failed: ${r.stderr}`);
        const cpuS = cpu(child.pid) - c0;
        // FILL_FIO_METRICS=PORT (with FILL_FIO_MOUNT_ARGS='--metrics-port PORT'): sluice's read-path counters after the job.
        if (v.dist && process.env.FILL_FIO_METRICS) {
          const text = await (await fetch(`http://127.0.0.1:${process.env.FILL_FIO_METRICS}/metrics`)).text();
          process.stderr.write(text.split('\n').filter((l) => /^sluice_(prefetch_bytes|cache_(hits|misses|evictions)|s3_requests|s3_received|fuse_operations_total\{op="read"|fuse_view|served)/.test(l)).join('\n') + '\n');
        }
        const gets = (await proxy.stats()).objectGets - g0;
        const read = JSON.parse(r.stdout.slice(r.stdout.indexOf('{'))).jobs[0].read;
        if (verify) {
          const got = spawnSync('sha256sum', [file], { encoding: 'utf8' }).stdout.split(' ')[0];
          if (got !== sum) throw new Error(`${v.name} ${job}: sha256 mismatch ${got} != ${sum}`);
        }
        const row = { job, variant: v.name, mibps: read.bw_bytes / 1048576, cpuPerGB: cpuS / (read.io_bytes / 1e9), gets };
        results.push(row);
        process.stderr.write(`${job} ${v.name}: ${row.mibps.toFixed(0)} MiB/s, ${row.cpuPerGB.toFixed(2)} CPU s/GB, ${gets} GETs\n`);
      } finally {
        await stopChild(child);
        if (mounted(mnt)) spawnSync('fusermount', ['-uz', mnt], { stdio: 'ignore' });
        rmSync(mnt, { recursive: true, force: true });
      }
    }
  }
} finally {
  await proxy.stop();
  await s3.stop();
  rmSync(work, { recursive: true, force: true });
}
console.log(`${sizeMiB} MiB file, fio ${runtime} s per job, +${ttfbMs} ms per request, ${bandwidthMBps} MB/s per connection (loadavg ${readFileSync('/proc/loadavg', 'utf8').trim()})`);
console.log('| job | variant | MiB/s | CPU s/GB | object GETs |');
console.log('|---|---|---|---|---|');
for (const r of results) console.log(`| ${r.job} | ${r.variant} | ${r.mibps.toFixed(0)} | ${r.cpuPerGB.toFixed(2)} | ${r.gets} |`);
