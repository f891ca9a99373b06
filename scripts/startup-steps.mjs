#!/usr/bin/env node
/**
 * Where `sluice mount`'s time to first byte goes (issue 15), step by step, through the
 * bench's latency proxy. The chain is sluice -> a recording hop (this script) -> the
 * latency proxy (+TTFB_MS per request) -> s3rver. The recording hop stamps each request as
 * it leaves sluice and the first response bytes as they come back, so the first LIST and
 * the first GET are timed from outside, on the same clock as the spawn.
 *
 * Steps, ms from spawning `node dist/cli.js mount` (the child's marks come from its
 * "start-up steps" log line, aligned through its performance.timeOrigin):
 *   node      process start until cli.js (and its static imports) has run
 *   command   mount's modules loaded (the AWS SDK, pino, prom-client, ...)
 *   config    options parsed and checked, logging configured
 *   metrics   the metrics endpoint bound (--metrics-port 0)
 *   req1      the first request leaves (LIST, or with --snapshot the first GET)
 *   ans1      its answer's first bytes arrive
 *   ready     "ready <mountpoint>" printed
 *   getOut    the first GET leaves
 *   ttfb      the first file's bytes read through the mount (sha256-checked)
 *   lsR       a full walk of the mount (ls -R) sees every key
 * Modes alternate within each round (list, snapshot), so both see the same machine load.
 *
 * With --large SIZE (issue 44's peer run: one object of SIZE bytes, e.g. 100MiB) the prefix holds
 * that one file and `ttfb` is its first --read bytes (default 1 MiB) read through the mount;
 * `reqs` counts the requests (LIST, HEAD, GET) that left before those bytes arrived, and the
 * JSON rows on stderr list them. Snapshot mode is left out there (--modes list,snapshot to choose).
 *
 * --node-arg ARG (repeatable) goes to the mount's node, e.g. --node-arg=--cpu-prof --node-arg=--cpu-prof-dir=/tmp/p.
 * Usage: node scripts/startup-steps.mjs [--keys N | --large 100MiB [--read 1MiB]] [--rounds R] [--ttfb-ms 25] [--modes list,snapshot] [--cli dist/cli.js --cli OTHER/cli.js]
 * (several --cli: each round runs each of them in turn, e.g. the bundle against tsc's output).
 * Node 24: PATH=~/.cache/sluice-node/node-24-linux-x64/bin:$PATH node scripts/startup-steps.mjs
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, open, readdir, readFile, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const dist = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'dist');
const { values } = parseArgs({ options: { cli: { type: 'string', multiple: true, default: [path.join(dist, 'cli.js')] }, keys: { type: 'string', default: '5000' }, rounds: { type: 'string', default: '3' }, 'ttfb-ms': { type: 'string', default: '25' }, large: { type: 'string' }, read: { type: 'string', default: '1MiB' }, modes: { type: 'string' }, 'node-arg': { type: 'string', multiple: true, default: [] } } });
const bytesOf = (v) => { const m = /^(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB|KB|MB|GB)?$/i.exec(v); if (!m) throw new Error(`bad size ${v}`); return Math.round(Number(m[1]) * ({ b: 1, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3, kb: 1e3, mb: 1e6, gb: 1e9 })[(m[2] ?? 'b').toLowerCase()]); };
const LARGE = values.large !== undefined ? bytesOf(values.large) : undefined;
const READ = bytesOf(values.read);
const MODES = (values.modes ?? (LARGE ? 'list' : 'list,snapshot')).split(',');
const N = values.large !== undefined ? 1 : Number(values.keys);
const CLIS = values.cli.map((c) => path.resolve(c));
const CLI = CLIS[0];
const ROUNDS = Number(values.rounds);
/** One mount's budget: start, first byte and a full walk; a run past it is killed and reported. */
const RUN_LIMIT_MS = 120_000;
/** Keys per folder: the bench's small-file layout (src/bench/datasets.ts), 10 folders at 100k. */
const FOLDERS = N > 10_000 ? 10 : 1;

const { startLocalS3 } = await import(path.join(dist, 'local', 's3-server.js'));
const { startLatencyProxy } = await import(path.join(dist, 'bench', 'latency-proxy.js'));
const { benchLayout } = await import(path.join(dist, 'bench', 'datasets.js'));
const { uploadLayout, sourceBytes } = await import(path.join(dist, 'local', 'dataset.js'));

const s3 = await startLocalS3();
const tmp = await mkdtemp(path.join(os.tmpdir(), 'sluice-startup-'));
let proxy;
let hop;
try {
  await s3.createBucket('startup');
  const t0 = performance.now();
  const objs = await uploadLayout(s3, 'startup', benchLayout('k/', LARGE ? { largeFiles: { count: 1, size: LARGE } } : { smallFiles: { count: N, size: 1000, folders: FOLDERS } }), 1);
  process.stderr.write(`seeded ${N} keys in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
  proxy = await startLatencyProxy({ name: 's3-like', ttfbMs: Number(values['ttfb-ms']), bytesPerSec: 80e6, targetPort: s3.port });

  // The recording hop: one line per request, with when it left and when its answer began.
  let events = [];
  hop = net.createServer((client) => {
    const up = net.connect(proxy.port, '127.0.0.1');
    let pending = [];
    client.on('data', (b) => {
      const m = /^(GET|HEAD|PUT|POST) (\S+)/.exec(b.subarray(0, 2048).toString('latin1'));
      if (m) { const e = { method: m[1], url: m[2], out: Date.now(), ans: undefined }; events.push(e); pending.push(e); }
      up.write(b);
    });
    up.on('data', (b) => { const e = pending.shift(); if (e) e.ans = Date.now(); client.write(b); });
    client.on('close', () => up.destroy());
    up.on('close', () => client.destroy());
    client.on('error', () => up.destroy());
    up.on('error', () => client.destroy());
  });
  await new Promise((r) => hop.listen(0, '127.0.0.1', r));
  const endpoint = `http://127.0.0.1:${hop.address().port}`;
  const common = ['--endpoint', endpoint, '--path-style', '--region', 'us-east-1'];
  const env = { ...process.env, AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey };

  const snap = path.join(tmp, 'keys.snap.gz');
  await new Promise((resolve, reject) => {
    const c = spawn(process.execPath, [CLI, 'snapshot', `s3://startup/k/`, snap, ...common], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = ''; c.stderr.on('data', (d) => { err += d; });
    c.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`sluice snapshot failed: ${err.trim()}`))));
  });

  const first = objs.reduce((a, b) => (b.key < a.key ? b : a));
  const rel = first.key.slice('k/'.length);

  /** The first file whole, or with --large its first --read bytes. */
  async function readHead(file) {
    if (!LARGE) return readFile(file);
    const fh = await open(file, 'r');
    try {
      const b = Buffer.alloc(Math.min(READ, first.size));
      let n = 0;
      while (n < b.length) { const { bytesRead } = await fh.read(b, n, b.length - n, n); if (bytesRead === 0) break; n += bytesRead; }
      return b.subarray(0, n);
    } finally { await fh.close(); }
  }

  async function walk(dir) {
    let n = 0; const stack = [dir];
    while (stack.length) { const d = stack.pop(); for (const e of await readdir(d, { withFileTypes: true })) { if (e.isDirectory()) stack.push(path.join(d, e.name)); else n++; } }
    return n;
  }

  async function once(mode, cli) {
    const mnt = path.join(tmp, `m-${mode}-${Date.now()}`);
    await mkdir(mnt);
    events = [];
    const spawnAt = Date.now();
    const args = ['mount', 's3://startup/k/', mnt, ...common, '--metrics-port', '0', '--log-level', 'info', ...(mode === 'snapshot' ? ['--snapshot', snap] : [])];
    const c = spawn(process.execPath, [...values['node-arg'], cli, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    c.stderr.on('data', (d) => { err += d; });
    const killer = setTimeout(() => c.kill('SIGKILL'), RUN_LIMIT_MS);
    try {
      c.on('exit', () => undefined);
      const ok = await Promise.race([new Promise((r) => c.stdout.once('data', () => r(true))), new Promise((r) => c.once('exit', () => r(false)))]);
      if (!ok) throw new Error(`mount failed: ${err.trim().split('\n').pop()}`);
      const body = await readHead(path.join(mnt, rel)).catch((e) => { throw new Error(`${e.message}; sluice: ${err.trim().split('\n').slice(-3).join(' | ')}`); });
      const ttfb = Date.now() - spawnAt;
      const before = events.filter((e) => e.out <= ttfb + spawnAt);
      if (LARGE ? !body.equals(sourceBytes(first, 0, body.length)) || body.length !== Math.min(READ, first.size) : createHash('sha256').update(body).digest('hex') !== first.sha256) throw new Error('first file: wrong bytes');
      const files = await walk(mnt);
      const lsR = Date.now() - spawnAt;
      if (files !== N) throw new Error(`walk saw ${files} files, not ${N}`);
      c.kill('SIGTERM');
      await new Promise((r) => (c.exitCode !== null ? r() : c.once('exit', r)));
      const line = err.split('\n').find((l) => l.includes('startupMs'));
      const log = line ? JSON.parse(line) : undefined;
      const at = (ms) => (log ? Math.round(log.timeOrigin + ms - spawnAt) : undefined);
      const req1 = events[0];
      const get = events.find((e) => e.method === 'GET' && !/[?&](list-type|prefix)=/.test(e.url));
      return {
        mode: CLIS.length > 1 ? `${mode} ${path.relative(process.cwd(), cli)}` : mode,
        node: at(log?.startupMs.cli), command: at(log?.startupMs.command), config: at(log?.startupMs.config), metrics: at(log?.startupMs.metrics),
        req1: req1 ? req1.out - spawnAt : undefined, ans1: req1?.ans ? req1.ans - spawnAt : undefined, ready: at(log?.startupMs.ready),
        getOut: get ? get.out - spawnAt : undefined, ttfb, lsR, reqs: before.length, requests: events.length,
        before: before.map((e) => `${e.out - spawnAt} ${e.method} ${e.url.replace(/^\/startup/, '')}`),
      };
    } finally {
      clearTimeout(killer);
      if (c.exitCode === null) { c.kill('SIGKILL'); await new Promise((r) => c.once('exit', r)); }
      // a killed mount leaves its mount point behind: unmount it (no-op when already gone)
      await new Promise((r) => spawn('fusermount', ['-u', '-q', mnt], { stdio: 'ignore' }).once('exit', r));
    }
  }

  const rows = [];
  for (let r = 0; r < ROUNDS; r++) {
    for (const [mode, cli] of MODES.flatMap((m) => CLIS.map((c) => [m, c]))) {
      try { rows.push(await once(mode, cli)); } catch (err) { process.stderr.write(`${mode} round ${r + 1}: ${err.message}\n`); }
    }
  }
  const load = (await readFile('/proc/loadavg', 'utf8')).trim();
  const cols = ['node', 'command', 'config', 'metrics', 'req1', 'ans1', 'ready', 'getOut', 'ttfb', 'lsR', 'reqs'];
  const median = (xs) => { const s = xs.filter((x) => x !== undefined).sort((a, b) => a - b); return s.length ? s[(s.length - 1) >> 1] : undefined; };
  process.stdout.write(`node ${process.version}, ${LARGE ? `one ${LARGE}-byte file, first ${READ} bytes` : `${N} keys`}, +${values['ttfb-ms']} ms per request, ${ROUNDS} rounds, load ${load}\n`);
  process.stdout.write(`| mode | ${cols.join(' | ')} |\n|---|${cols.map(() => '---:').join('|')}|\n`);
  for (const mode of [...new Set(rows.map((x) => x.mode))]) {
    const mine = rows.filter((x) => x.mode === mode);
    process.stdout.write(`| ${mode} (median ms) | ${cols.map((k) => median(mine.map((x) => x[k])) ?? '–').join(' | ')} |\n`);
  }
  process.stderr.write(JSON.stringify(rows) + '\n');
} finally {
  hop?.close();
  await proxy?.close();
  await s3.stop();
  await rm(tmp, { recursive: true, force: true });
}
