#!/usr/bin/env node
/**
 * What the shared read-ahead budget (src/prefetch/ahead-share.ts) changes for 4 readers at
 * once: s3rver without latency, 4 objects of 128 MiB read by 4 `cat | sha256sum` at the same
 * time through a new `sluice mount` daemon per run, with the budget (share) and without it
 * (SLUICE_NO_SHARE=1, noshare). Each round runs both, in alternating order (ABBA): on this VM
 * the first daemon after a pause gets memory the host took back, and pays for it. Per run: MB/s
 * of the 4 readers together, the daemon's CPU and user CPU per GB read (utime+stime from
 * /proc/PID/stat), its minor page faults per GB, its peak RSS (VmHWM), the budget at the end
 * (sluice_prefetch_share_bytes) and the GETs. Every read is sha256-verified.
 *
 * Usage: node scripts/ahead-share.mjs [DIST_DIR] [ROUNDS]   (default: dist, 4)
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
const dist = path.resolve(process.argv[2] ?? 'dist');
const rounds = Number(process.argv[3] ?? 4);
const MiB = 1024 * 1024;
const { startLocalS3 } = await import(path.join(dist, 'local/s3-server.js'));
const s3 = await startLocalS3();
await s3.createBucket('bulk');
const sums = {};
const keys = ['four/a', 'four/b', 'four/c', 'four/d'];
let failed = false;
for (const key of keys) { const body = randomBytes(128 * MiB); sums[key] = createHash('sha256').update(body).digest('hex'); await s3.putObject('bulk', key, body); }
const env0 = { ...process.env, AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey, AWS_REGION: 'us-east-1' };
for (let r = 0; r < rounds; r++) for (const variant of (r % 2 ? ['noshare', 'share'] : ['share', 'noshare'])) {
  const env = { ...env0, ...(variant === 'noshare' ? { SLUICE_NO_SHARE: '1' } : {}) };
  const mnt = mkdtempSync(path.join(os.tmpdir(), 'share-probe-'));
  // A port of its own in the unprivileged range, away from the usual 9090.
  const port = 20000 + Math.floor(Math.random() * 20000);
  const child = spawn(process.execPath, [path.join(dist, 'cli.js'), 'mount', 's3://bulk/', mnt, '--endpoint', s3.endpoint, '--path-style', '--metrics-port', String(port), '--log-level', 'warn', '--cache-size', '1GiB'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    await new Promise((resolve, reject) => { let out = ''; child.stdout.on('data', (d) => { out += d; if (out.includes('ready')) resolve(); }); child.on('exit', (c) => reject(new Error(`mount exited ${c}`))); });
    readdirSync(mnt);
    const stat = () => { const f = readFileSync(`/proc/${child.pid}/stat`, 'utf8').split(') ')[1].split(' '); return { minflt: Number(f[7]), cpu: (Number(f[11]) + Number(f[12])) / 100, user: Number(f[11]) / 100 }; };
    const a = stat(); const t0 = performance.now();
    const ok = (await Promise.all(keys.map((k) => new Promise((resolve) => { const p = spawn('sh', ['-c', `cat "${mnt}/${k}" | sha256sum`]); let o = ''; p.stdout.on('data', (d) => { o += d; }); p.on('exit', () => resolve(o.split(' ')[0] === sums[k])); })))).every(Boolean);
    const secs = (performance.now() - t0) / 1000; const b = stat();
    const m = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const g = (name) => m.split('\n').filter((l) => l.startsWith(name)).map((l) => Number(l.split(' ').pop())).reduce((x, y) => x + y, 0);
    const hwm = readFileSync(`/proc/${child.pid}/status`, 'utf8').match(/VmHWM:\s+(\d+)/)[1];
    const gb = 512 * MiB / 1e9;
    if (!ok) failed = true;
    console.log(`${variant}\t${(512 / secs * 1.048576).toFixed(0)} MB/s\tcpu ${((b.cpu - a.cpu) / gb).toFixed(2)} user ${((b.user - a.user) / gb).toFixed(2)} s/GB\tfaults/GB ${((b.minflt - a.minflt) / gb).toFixed(0)}\tHWM ${(hwm / 1024).toFixed(0)} MiB\tshare ${(g('sluice_prefetch_share_bytes{') / MiB).toFixed(0)} MiB\tgets ${g('sluice_s3_requests_total{')}\t${ok ? 'verified' : 'MISMATCH'}`);
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => (child.exitCode !== null ? r() : child.on('exit', r)));
    spawnSync('fusermount', ['-u', mnt], { stdio: 'ignore' });
    rmSync(mnt, { recursive: true, force: true });
  }
}
await s3.stop();
if (failed) process.exit(1);
