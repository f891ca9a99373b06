#!/usr/bin/env node
// Issue 46: memory of a FastFile mount per listed object (record 0036). For each object count
// it writes (once, kept in --dir) a snapshot of that many objects in folders of --per-folder
// files, mounts it with `sluice mount --snapshot FILE` for each build given, and prints one
// JSON line per (build, count): seconds until "ready", VmRSS at ready and once settled (the
// listing handed to the FUSE thread; RSS steady for SETTLE_MS), and bytes per object =
// (settled RSS - the same build's RSS for an empty snapshot) / objects. The settle clock starts
// once the daemon logs that the listing was handed to C (it runs at --log-level debug for that;
// on a loaded machine a slow hand-over can otherwise look settled before it ends), and
// handedS is when that happened. It also checks the
// root lists every folder and that random files stat to their listed size. No S3 traffic: a
// snapshot mount sends no request until a file is read.
// Usage: node scripts/catalog-rss.mjs [--objects 100000,1000000] [--per-folder 1000] [--dir DIR]
//        [--wait-s 240] [NAME=DIST_DIR ...]   (default: after=dist)
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  if (i < 0) return dflt;
  const v = args[i + 1];
  args.splice(i, 2);
  return v;
};
const counts = opt('objects', '100000,1000000').split(',').map(Number);
const perFolder = Number(opt('per-folder', '1000'));
const dir = opt('dir', path.join(os.tmpdir(), 'sluice-catalog-rss'));
/** Longest wait for "ready", for the hand-over and for RSS to settle (--wait-s): a 10 M listing takes minutes on a loaded machine. */
const WAIT_MS = Number(opt('wait-s', '240')) * 1000;
const builds = args.length > 0 ? args.map((a) => { const [name, dist] = a.split('='); return [name, path.resolve(dist)]; }) : [['after', path.join(root, 'dist')]];
/** RSS counts as settled once it moved less than 1 MiB in this long (the hand-over to C is done and GC has run). */
const SETTLE_MS = 3000;
/** Random files stat-checked per mount. */
const PROBES = 20;

const T0 = Date.UTC(2026, 0, 1);
/** Object i: folder d<i/perFolder>, MD5-shaped ETags (a few multipart), sizes past 2^32 now and then. */
function object(i) {
  const d = Math.floor(i / perFolder);
  const h = (Math.imul(i, 2654435761) >>> 0).toString(16).padStart(8, '0');
  return {
    key: `ds/d${String(d).padStart(5, '0')}/f${String(i).padStart(8, '0')}.jpg`,
    size: i % 1000 === 7 ? 2 ** 32 + i : (i * 7919) % 1_000_003,
    etag: i % 100 === 3 ? `"${h.repeat(4)}-${(i % 50) + 2}"` : `"${h.repeat(4)}"`,
    lastModified: new Date(T0 + (i % 86_400) * 1000), storageClass: 'STANDARD',
  };
}

async function snapshotOf(n) {
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `n${n}-f${perFolder}.snap`);
  if (existsSync(file)) return file;
  const { writeSnapshotStream } = await import(path.join(builds[0][1], 'snapshot', 'snapshot.js'));
  function* all() { for (let i = 0; i < n; i++) yield object(i); }
  await writeSnapshotStream(file, { uri: 's3://bucket/ds/', bucket: 'bucket', prefix: 'ds/', listing: { filters: [], skipArchived: false } }, all());
  return file;
}

const rssOf = (pid) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) * 1024;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function measure(dist, file, n) {
  const mnt = mkdtempSync(path.join(os.tmpdir(), 'sluice-catalog-mnt-'));
  const t0 = performance.now();
  const child = spawn(process.execPath, [path.join(dist, 'cli.js'), 'mount', '--snapshot', file, mnt, '--metrics-port', '-1', '--endpoint', 'http://127.0.0.1:9', '--region', 'us-east-1', '--log-level', 'debug'], {
    stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, AWS_ACCESS_KEY_ID: 'x', AWS_SECRET_ACCESS_KEY: 'x' },
  });
  let err = '';
  child.stderr.on('data', (d) => { err += d; });
  try {
    const readyMs = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no "ready" in ${WAIT_MS} ms`)), WAIT_MS);
      let out = '';
      child.stdout.on('data', (d) => { out += d; if (out.includes('ready ')) { clearTimeout(timer); resolve(performance.now() - t0); } });
      child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`mount exited ${code}: ${err.slice(-500)}`)); });
    });
    const atReady = rssOf(child.pid);
    // The hand-over to C (kernel-mount.ts installListedAttrs logs it at debug).
    const handedMs = await new Promise((resolve) => {
      const done = () => resolve(performance.now() - t0);
      if (/listing handed to C/.test(err)) return done();
      const timer = setTimeout(() => resolve(undefined), WAIT_MS);
      child.stderr.on('data', () => { if (/listing handed to C/.test(err)) { clearTimeout(timer); done(); } });
    });
    let last = rssOf(child.pid);
    let stableSince = performance.now();
    const until = performance.now() + WAIT_MS;
    while (performance.now() - stableSince < SETTLE_MS && performance.now() < until) {
      await sleep(250);
      const r = rssOf(child.pid);
      if (Math.abs(r - last) > 1024 * 1024) stableSince = performance.now();
      last = r;
    }
    const settled = rssOf(child.pid);
    const folders = n === 0 ? 0 : Math.ceil(n / perFolder);
    const rootNames = readdirSync(mnt).length;
    let wrong = 0;
    for (let k = 0; k < Math.min(PROBES, n); k++) {
      const i = Math.floor(Math.random() * n);
      const o = object(i);
      if (statSync(path.join(mnt, o.key.slice(3))).size !== o.size) wrong++;
    }
    return { readyS: +(readyMs / 1000).toFixed(2), handedS: handedMs === undefined ? null : +(handedMs / 1000).toFixed(2), rssReadyMiB: +(atReady / 2 ** 20).toFixed(1), rssSettled: settled, rootOk: rootNames === folders, statWrong: wrong };
  } finally {
    child.kill('SIGINT');
    await new Promise((r) => (child.exitCode !== null ? r() : child.on('exit', r)));
    if (readFileSync('/proc/mounts', 'utf8').includes(mnt)) spawn('fusermount', ['-uz', mnt]);
    rmSync(mnt, { recursive: true, force: true });
  }
}

const empty = await snapshotOf(0);
const files = [];
for (const n of counts) files.push([n, await snapshotOf(n)]);
for (const [name, dist] of builds) {
  const base = await measure(dist, empty, 0);
  process.stdout.write(JSON.stringify({ build: name, objects: 0, readyS: base.readyS, rssSettledMiB: +(base.rssSettled / 2 ** 20).toFixed(1) }) + '\n');
  for (const [n, file] of files) {
    const m = await measure(dist, file, n);
    process.stdout.write(JSON.stringify({
      build: name, objects: n, readyS: m.readyS, handedS: m.handedS, rssReadyMiB: m.rssReadyMiB, rssSettledMiB: +(m.rssSettled / 2 ** 20).toFixed(1),
      bytesPerObject: Math.round((m.rssSettled - base.rssSettled) / n), rootListsAllFolders: m.rootOk, statWrong: m.statWrong,
    }) + '\n');
  }
}
