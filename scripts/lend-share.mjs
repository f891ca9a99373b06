#!/usr/bin/env node
/**
 * How many of a large sequential read's FUSE reads libfuse's thread answers from lent cache
 * blocks (native/src/fuse_lend.c), read off a real `sluice mount` daemon's /metrics
 * (sluice_fuse_memory_reads_total against sluice_fuse_operations_total{op="read"}): s3rver
 * without latency, `cat` of one 512 MiB object and then a second, then 4 objects of 128 MiB
 * read by 4 `cat`s at once (twice, pages dropped between), GETs and bytes received beside.
 * Every read is sha256-verified. Counts, not times: the share depends on how far the cache is
 * ahead of the reader, so it is a property of the design (issue 11, BENCHMARKS.md t11-lend).
 *
 * Usage: node scripts/lend-share.mjs [DIST_DIR] [sluice mount flags...]
 *   e.g. node scripts/lend-share.mjs dist --cache-size 1GiB
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const dist = path.resolve(process.argv[2] ?? 'dist');
const mountFlags = process.argv.slice(3);
const MiB = 1024 * 1024;
const { startLocalS3 } = await import(path.join(dist, 'local/s3-server.js'));
const s3 = await startLocalS3();
await s3.createBucket('bulk');
const sums = {};
const objects = [['big/a', 512], ['big/b', 512], ['four/a', 128], ['four/b', 128], ['four/c', 128], ['four/d', 128]];
for (const [key, mib] of objects) {
  const body = randomBytes(mib * MiB);
  sums[key] = createHash('sha256').update(body).digest('hex');
  await s3.putObject('bulk', key, body);
}
const mnt = mkdtempSync(path.join(os.tmpdir(), 'lend-share-'));
const env = { ...process.env, AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey, AWS_REGION: 'us-east-1' };
// A port of its own in the unprivileged range, away from the usual 9090 (bound by the metrics server; a clash fails the mount).
const port = 20000 + Math.floor(Math.random() * 20000);
const child = spawn(process.execPath, [path.join(dist, 'cli.js'), 'mount', 's3://bulk/', mnt, '--endpoint', s3.endpoint, '--path-style', '--metrics-port', String(port), '--log-level', 'warn', ...mountFlags], { env, stdio: ['ignore', 'pipe', 'inherit'] });
let failed = false;
try {
  await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => { out += d; if (out.includes('ready')) resolve(); });
    child.on('exit', (c) => reject(new Error(`mount exited ${c}`)));
  });
  readdirSync(mnt);
  const metrics = async () => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const sum = (text, name, label = '') => text.split('\n').filter((l) => l.startsWith(name) && l.includes(label)).reduce((n, l) => n + Number(l.split(' ').pop()), 0);
  const counts = async () => {
    const t = await metrics();
    return { inC: sum(t, 'sluice_fuse_memory_reads_total'), reads: sum(t, 'sluice_fuse_operations_total{', 'op="read",result="ok"'), gets: sum(t, 'sluice_s3_requests_total{', 'operation="get"'), bytes: sum(t, 'sluice_s3_received_bytes_total') };
  };
  const catSha = (key) => new Promise((resolve) => {
    const p = spawn('sh', ['-c', `cat "${mnt}/${key}" | sha256sum`]);
    let o = '';
    p.stdout.on('data', (d) => { o += d; });
    p.on('exit', () => resolve(o.split(' ')[0] === sums[key]));
  });
  const measure = async (what, keys) => {
    for (const k of keys) spawnSync('dd', [`if=${mnt}/${k}`, 'iflag=nocache', 'count=0', 'status=none']);
    const a = await counts();
    const ok = (await Promise.all(keys.map(catSha))).every(Boolean);
    await new Promise((r) => setTimeout(r, 1500)); // reads answered in C reach the metrics within a second
    const b = await counts();
    if (!ok) failed = true;
    const inC = b.inC - a.inC, reads = b.reads - a.reads;
    console.log(`| ${what} | ${inC} of ${reads} (${(100 * inC / reads).toFixed(0)}%) | ${b.gets - a.gets} | ${((b.bytes - a.bytes) / MiB).toFixed(0)} MiB | ${ok ? 'verified' : 'MISMATCH'} |`);
  };
  console.log('| read | FUSE reads answered in C | GETs | received | bytes |\n|---|---|---:|---:|---|');
  await measure('512 MiB, first object', ['big/a']);
  await measure('512 MiB, second object', ['big/b']);
  await measure('4 × 128 MiB at once', ['four/a', 'four/b', 'four/c', 'four/d']);
  await measure('4 × 128 MiB at once, again', ['four/a', 'four/b', 'four/c', 'four/d']);
} finally {
  child.kill('SIGTERM');
  await new Promise((r) => (child.exitCode !== null ? r() : child.on('exit', r)));
  spawnSync('fusermount', ['-u', mnt], { stdio: 'ignore' });
  rmSync(mnt, { recursive: true, force: true });
  await s3.stop();
}
if (failed) process.exit(1);
