#!/usr/bin/env node
/**
 * How fast one reader gets going on large files: N objects (default 4 x 128 MiB) read in turn by
 * one `dd bs=1M` into /dev/null through a NEW `sluice mount` daemon per round, under the bench's
 * s3-like shape (its latency proxy in its own process: +25 ms to first byte, 80 MB/s per
 * connection), as `sluice bench`'s bulk-1 scenario reads them. Per round: MB/s of the whole
 * read, and of the first file alone (the one that starts from the first read-ahead window;
 * later files start from the window the previous one carried, fs/core.ts CARRY_MS). Every
 * file's sha256 is checked right after the timed read (from the page cache the read filled),
 * outside the timing. Variants (NAME=DIST_DIR, e.g. a build of the commit before a change) are
 * alternated round by round, so drift in the machine's load falls on all of them.
 *
 * Usage: node scripts/ramp-bench.mjs [--rounds N] [--files N] [--size MiB] [--ttfb MS] [--bandwidth MBPS] [--env NAME:VAR=VALUE] NAME=DIST_DIR ...
 * --env sets VAR for variant NAME's daemon only (repeatable), e.g. two variants of one dist.
 * A DIST_DIR's ../native must hold the addon and ../node_modules the packages (symlinks do).
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';

const { values: a, positionals } = parseArgs({
  allowPositionals: true,
  options: { rounds: { type: 'string', default: '6' }, files: { type: 'string', default: '4' }, size: { type: 'string', default: '128' }, ttfb: { type: 'string', default: '25' }, bandwidth: { type: 'string', default: '80' }, env: { type: 'string', multiple: true, default: [] } },
});
const variants = positionals.map((p) => ({ name: p.slice(0, p.indexOf('=')), dist: path.resolve(p.slice(p.indexOf('=') + 1)) }));
if (variants.length === 0 || variants.some((v) => !v.name)) {
  console.error('usage: ramp-bench.mjs [--rounds N] [--files N] [--size MiB] [--ttfb MS] [--bandwidth MBPS] NAME=DIST_DIR ...');
  process.exit(2);
}
/** --env NAME:VAR=VALUE, per variant. */
const variantEnv = {};
for (const e of a.env) { const [name, kv] = [e.slice(0, e.indexOf(':')), e.slice(e.indexOf(':') + 1)]; (variantEnv[name] ??= {})[kv.slice(0, kv.indexOf('='))] = kv.slice(kv.indexOf('=') + 1); }
const rounds = Number(a.rounds), files = Number(a.files), size = Number(a.size) * 1024 * 1024;
const { startLocalS3 } = await import(path.join(variants[0].dist, 'local/s3-server.js'));
const { startProxyProcess } = await import(path.join(variants[0].dist, 'bench/runner.js'));
const { median } = await import(path.join(variants[0].dist, 'bench/stats.js'));
const s3 = await startLocalS3();
const env = { ...process.env, AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey, AWS_REGION: 'us-east-1' };
await s3.createBucket('ramp');
const sums = [];
for (let i = 0; i < files; i++) {
  const body = randomBytes(size);
  sums.push(createHash('sha256').update(body).digest('hex'));
  await s3.putObject('ramp', `f${i}`, body);
}
const proxy = await startProxyProcess({ name: 's3-like', ttfbMs: Number(a.ttfb), bytesPerSec: Number(a.bandwidth) * 1e6 }, Number(new URL(s3.endpoint).port), undefined);
const work = mkdtempSync(path.join(os.tmpdir(), 'ramp-bench-'));
const results = Object.fromEntries(variants.map((v) => [v.name, []]));

async function round(v, r) {
  const mnt = path.join(work, `${v.name}-${r}`);
  mkdirSync(mnt);
  const child = spawn(process.execPath, [path.join(v.dist, 'cli.js'), 'mount', 's3://ramp/', mnt, '--endpoint', proxy.endpoint, '--path-style', '--metrics-port', '-1', '--log-level', 'warn'], { env: { ...env, ...variantEnv[v.name] }, stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    await new Promise((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d) => { out += d; if (out.includes('ready')) resolve(); });
      child.on('exit', (c) => reject(new Error(`mount exited ${c}`)));
      setTimeout(() => reject(new Error('mount not ready in 60 s')), 60_000);
    });
    const secs = [];
    for (let i = 0; i < files; i++) {
      const t0 = process.hrtime.bigint();
      const dd = spawnSync('dd', [`if=${mnt}/f${i}`, 'of=/dev/null', 'bs=1M', 'status=none'], { timeout: 120_000 });
      if (dd.status !== 0) throw new Error(`dd f${i} failed: ${dd.stderr}`);
      secs.push(Number(process.hrtime.bigint() - t0) / 1e9);
    }
    for (let i = 0; i < files; i++) {
      const got = spawnSync('sh', ['-c', `sha256sum < "${mnt}/f${i}"`], { encoding: 'utf8', timeout: 120_000 }).stdout.split(' ')[0];
      if (got !== sums[i]) throw new Error(`${v.name}: f${i} sha256 mismatch (${got})`);
    }
    const total = secs.reduce((x, y) => x + y, 0);
    results[v.name].push({ total: (files * size) / 1e6 / total, first: size / 1e6 / secs[0] });
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => (child.exitCode !== null ? r() : child.on('exit', r)));
    spawnSync('fusermount', ['-u', mnt], { stdio: 'ignore' });
  }
}

try {
  for (let r = 0; r < rounds; r++) {
    // ABBA order within pairs of rounds, so neither variant always goes first.
    for (const v of r % 2 === 0 ? variants : [...variants].reverse()) await round(v, r);
    process.stderr.write(`round ${r + 1}/${rounds} done\n`);
  }
} finally {
  await proxy.stop();
  await s3.stop();
  rmSync(work, { recursive: true, force: true });
}
console.log(`${files} x ${a.size} MiB read in turn, +${a.ttfb} ms, ${a.bandwidth} MB/s per connection, ${rounds} rounds, medians (loadavg ${os.loadavg().map((x) => x.toFixed(2)).join(' ')})`);
console.log('| variant | MB/s, all files | MB/s, first file | runs (all / first) |');
console.log('|---|---|---|---|');
for (const v of variants) {
  const xs = results[v.name];
  console.log(`| ${v.name} | ${median(xs.map((x) => x.total)).toFixed(0)} | ${median(xs.map((x) => x.first)).toFixed(0)} | ${xs.map((x) => `${x.total.toFixed(0)}/${x.first.toFixed(0)}`).join(' ')} |`);
}
