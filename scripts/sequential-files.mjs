#!/usr/bin/env node
/**
 * One `sluice mount` daemon, N objects of SIZE MiB read one after another (`dd bs=1M` into
 * /dev/null), s3rver without latency: the daemon's user and system CPU per GB and MB/s of each
 * file, so a new daemon's first file can be told from the steady state after it (BENCHMARKS.md
 * "t11-huge"). Each file's sha256 is checked right after its timed read, outside the timing
 * and the CPU sample (a second read: from the page cache, or through sluice with --direct-io).
 * With SEQ_PERF=FILE, `perf record -g` samples the daemon from the second file on, into FILE.
 * With SEQ_DROP_CACHES=1, the kernel's clean page cache is dropped (`sync; echo 1 >
 * /proc/sys/vm/drop_caches`) before each timed read, so the page cache the read fills comes
 * from memory freed a moment before rather than from memory the host may have taken back.
 *
 * Usage: npm run build; node scripts/sequential-files.mjs [N=4] [SIZE_MIB=256] [sluice mount options, e.g. --direct-io]
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const dist = new URL('../dist/', import.meta.url).pathname;
const n = Number(process.argv[2] ?? 4);
const size = Number(process.argv[3] ?? 256) * 1024 * 1024;
const mountArgs = process.argv.slice(4);
const { startLocalS3 } = await import(path.join(dist, 'local/s3-server.js'));
const s3 = await startLocalS3();
await s3.createBucket('bulk');
const sums = [];
for (let i = 0; i < n; i++) {
  const body = randomBytes(size);
  sums.push(createHash('sha256').update(body).digest('hex'));
  await s3.putObject('bulk', `set/f${i}`, body);
}
const env = { ...process.env, AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey, AWS_REGION: 'us-east-1' };
const { readProcStats } = await import(path.join(dist, 'bench/proc-stats.js'));
/** The daemon's user and system CPU seconds and minor faults (the bench's own /proc reader). */
const stat = (pid) => {
  const p = readProcStats(pid);
  return { minflt: p.minorFaults, user: p.userCpuSeconds, sys: p.cpuSeconds - p.userCpuSeconds };
};
const mnt = mkdtempSync(path.join(os.tmpdir(), 'sequential-files-'));
const child = spawn(process.execPath, [path.join(dist, 'cli.js'), 'mount', 's3://bulk/', mnt, '--endpoint', s3.endpoint, '--path-style', '--metrics-port', '-1', '--log-level', 'warn', ...mountArgs], { env, stdio: ['ignore', 'pipe', 'inherit'] });
let failed = false;
let perf;
try {
  await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => { out += d; if (out.includes('ready')) resolve(); });
    child.on('exit', (c) => reject(new Error(`mount exited ${c}`)));
  });
  readdirSync(path.join(mnt, 'set')); // the listing, before the first timed read
  for (let i = 0; i < n; i++) {
    if (i === 1 && process.env.SEQ_PERF) {
      perf = spawn('perf', ['record', '-F', '1999', '-g', '-o', process.env.SEQ_PERF, '-p', String(child.pid)], { stdio: 'ignore' });
      await new Promise((r) => setTimeout(r, 500));
    }
    const file = path.join(mnt, 'set', `f${i}`);
    if (process.env.SEQ_DROP_CACHES === '1') spawnSync('sh', ['-c', 'sync; echo 1 > /proc/sys/vm/drop_caches']);
    const s0 = stat(child.pid);
    const t0 = performance.now();
    const r = spawnSync('dd', [`if=${file}`, 'of=/dev/null', 'bs=1M', 'status=none']);
    const secs = (performance.now() - t0) / 1000;
    const s1 = stat(child.pid);
    const ok = r.status === 0 && spawnSync('sha256sum', [file], { encoding: 'utf8' }).stdout.split(' ')[0] === sums[i];
    if (!ok) failed = true;
    const gb = size / 1e9;
    console.log(`file ${i}: ${(gb * 1000 / secs).toFixed(0)} MB/s  user ${((s1.user - s0.user) / gb).toFixed(2)} sys ${((s1.sys - s0.sys) / gb).toFixed(2)} CPU s/GB  ${((s1.minflt - s0.minflt) / gb / 1000).toFixed(0)}k new pages/GB  ${ok ? 'sha256 ok' : 'SHA256 MISMATCH'}`);
  }
} finally {
  if (perf) { perf.kill('SIGINT'); await new Promise((r) => perf.on('exit', r)); }
  if (child.exitCode === null && child.signalCode === null) { child.kill('SIGTERM'); await new Promise((r) => child.on('exit', r)); }
  spawnSync('umount', [mnt]);
  rmSync(mnt, { recursive: true, force: true });
  await s3.stop?.();
}
if (failed) { console.error('sequential-files: a read did not match its source'); process.exit(1); }
