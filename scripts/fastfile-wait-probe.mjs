#!/usr/bin/env node
/**
 * Where a FastFile read waits (issue 11, BENCHMARKS.md t11-busy): one 512 MiB object on s3rver
 * (no proxy, no latency), a fresh mount, `dd bs=1M` to /dev/null, then
 *  - the daemon's CPU s/GB and s3rver's (s/GB and cores over the read): s3rver is one Node
 *    thread, so near 1 core it is the limit, whatever the client does;
 *  - context switches of the daemon's threads over the read;
 *  - the daemon's own metrics: FUSE reads, the time they waited for bytes from S3
 *    (sluice_read_wait_seconds) and the time the reader was starved.
 * Usage: npm run build; node scripts/fastfile-wait-probe.mjs [DIST_DIR] [sluice mount flags...]
 * (e.g. `dist --max-prefetch 16MiB`). Metrics port 9479 must be free.
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
const dist = path.resolve(process.argv[2] ?? 'dist');
const { startLocalS3 } = await import(path.join(dist, 'local/s3-server.js'));
const s3 = await startLocalS3();
await s3.createBucket('bulk');
const BYTES = 512 * 1024 * 1024;
const GB = BYTES / 1e9;
await s3.putObject('bulk', 'a', randomBytes(BYTES));
const work = mkdtempSync(path.join(os.tmpdir(), 'waitprobe-'));
const mnt = path.join(work, 'mnt');
mkdirSync(mnt);
const env = { ...process.env, AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey, AWS_REGION: 'us-east-1' };
const child = spawn(process.execPath, [path.join(dist, 'cli.js'), 'mount', 's3://bulk/', mnt, '--endpoint', s3.endpoint, '--path-style', '--metrics-port', '9479', '--log-level', 'warn', ...process.argv.slice(3)], { env, stdio: ['ignore', 'pipe', 'inherit'] });
try {
  await new Promise((resolve, reject) => {
    let o = '';
    child.stdout.on('data', (d) => { o += d; if (o.includes('ready')) resolve(); });
    child.on('exit', (c) => reject(new Error(`mount exited ${c}`)));
  });
  readdirSync(mnt); // the listing: lookups are then answered from it
  const sw = (pid) => { let n = {}; for (const t of readdirSync(`/proc/${pid}/task`)) { const st = readFileSync(`/proc/${pid}/task/${t}/status`, 'utf8'); const name = st.match(/^Name:\s*(.*)$/m)[1]; const m = st.match(/^voluntary_ctxt_switches:\s*(\d+)\nnonvoluntary_ctxt_switches:\s*(\d+)/m); n[name] = (n[name] ?? 0) + Number(m[1]) + Number(m[2]); } return n; };
  const cpuOf = (pid) => { const st = readFileSync(`/proc/${pid}/stat`, 'utf8'); const f = st.slice(st.lastIndexOf(')') + 2).split(' '); return (Number(f[11]) + Number(f[12])) / 100; };
  const kids = readdirSync('/proc').filter((x) => /^\d+$/.test(x)).map(Number).filter((p) => { try { const st = readFileSync(`/proc/${p}/stat`, 'utf8'); return Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1]) === process.pid && p !== child.pid; } catch { return false; } });
  const k0 = kids.map(cpuOf), d0 = cpuOf(child.pid);
  const s0 = sw(child.pid);
  const t0 = Date.now();
  spawnSync('dd', [`if=${path.join(mnt, 'a')}`, 'of=/dev/null', 'bs=1M'], { stdio: 'ignore' });
  const secs = (Date.now() - t0) / 1000;
  const s1 = sw(child.pid);
  console.log(`daemon CPU ${((cpuOf(child.pid) - d0) / GB).toFixed(2)} s/GB; s3rver (pids ${kids}) CPU ${kids.map((k, i) => ((cpuOf(k) - k0[i]) / GB).toFixed(2))} s/GB, i.e. ${kids.map((k, i) => ((cpuOf(k) - k0[i]) / secs).toFixed(2))} cores`);
  console.log(`read 512 MiB in ${secs.toFixed(2)} s = ${(BYTES / 1e6 / secs).toFixed(0)} MB/s`);
  console.log('context switches by thread name:', Object.fromEntries(Object.entries(s1).map(([k, v]) => [k, v - (s0[k] ?? 0)])));
  const m = await (await fetch('http://127.0.0.1:9479/metrics')).text();
  for (const l of m.split('\n')) if (/^sluice_(read_wait_seconds_(sum|count)|starved_seconds_total|fuse_operations_total\{op="read"|fuse_read_size_bytes_(sum|count)|s3_requests_total|prefetch_bytes_total)/.test(l)) console.log(l);
} finally {
  child.kill('SIGTERM');
  await new Promise((r) => (child.exitCode !== null ? r() : child.on('exit', r)));
  spawnSync('fusermount', ['-u', mnt], { stdio: 'ignore' });
  await s3.stop();
  rmSync(work, { recursive: true, force: true });
}
