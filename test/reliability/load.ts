/**
 * Issue 6, item 3: bounded under load. 16 reader processes, half sequential (whole files,
 * 64 KiB reads) and half random (pread at random offsets and sizes), over large and small
 * files through one real mount, for a bounded time. Every byte is checked against the
 * source (regenerated from the dataset seed in each reader). The peak RSS of the sluice
 * process (VmHWM) must stay under --cache-size + --max-inflight + FIXED_OVERHEAD (the
 * figure SEMANTICS.md documents). The figures are printed, never timed.
 * Needs a build (dist/).
 */
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { seedDataset } from '../../src/local/dataset.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { startCli, waitExit, type RunningCli } from '../helpers/cli.js';
import { tempMountpoint } from '../helpers/fuse.js';
import { FIXED_OVERHEAD_MIB } from '../helpers/memory-budget.js';

const MiB = 1024 * 1024;
const READERS = 16;
/** How long the readers run: long enough for many evictions, short enough for CI. */
const DURATION_MS = 15_000;
const CACHE = 24 * MiB;
const INFLIGHT = 16 * MiB;
const FIXED_OVERHEAD = FIXED_OVERHEAD_MIB * MiB;

const DATASET = fileURLToPath(new URL('../../dist/local/dataset.js', import.meta.url));

/** A reader process: argv = [mode, seed, durationMs, JSON [{path, key, size}]]; prints {bytes, reads, bad}. */
const READER = `
const fs = require('fs');
(async () => {
  const { generateBytes } = await import(${JSON.stringify(DATASET)});
  const [mode, seed, duration, list] = [process.argv[1], Number(process.argv[2]), Number(process.argv[3]), JSON.parse(process.argv[4])];
  const src = new Map();
  const source = (f) => { if (!src.has(f.key)) { if (src.size > 4) src.clear(); src.set(f.key, generateBytes(f.key, f.size, seed)); } return src.get(f.key); };
  let x = (process.pid * 2654435761) >>> 0 || 1;
  const rnd = (n) => { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; return x % n; };
  const end = Date.now() + duration;
  let bytes = 0, reads = 0, bad = 0, i = 0;
  const buf = Buffer.alloc(1024 * 1024);
  while (Date.now() < end && reads < 200000) {
    const f = list[(i++) % list.length];
    const want = source(f);
    const fd = fs.openSync(f.path, 'r');
    try {
      if (mode === 'seq') {
        for (let pos = 0; pos < f.size && Date.now() < end;) {
          const n = fs.readSync(fd, buf, 0, 65536, pos);
          if (n === 0 || !buf.subarray(0, n).equals(want.subarray(pos, pos + n))) { bad++; break; }
          pos += n; bytes += n; reads++;
        }
      } else {
        for (let k = 0; k < 20; k++) {
          const at = rnd(f.size + 1), len = 1 + rnd(Math.min(buf.length, 300000));
          const n = fs.readSync(fd, buf, 0, len, at);
          if (!buf.subarray(0, n).equals(want.subarray(at, at + len))) bad++;
          bytes += n; reads++;
        }
      }
    } finally { fs.closeSync(fd); }
  }
  process.stdout.write(JSON.stringify({ bytes, reads, bad }));
})().catch((e) => { process.stdout.write(JSON.stringify({ error: String(e && e.stack || e) })); });
`;

function runReader(args: string[]): Promise<{ bytes: number; reads: number; bad: number; error?: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['-e', READER, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => { out += b.toString(); });
    child.stderr.on('data', (b: Buffer) => { err += b.toString(); });
    const timer = setTimeout(() => child.kill('SIGKILL'), DURATION_MS + 60_000);
    child.on('exit', () => {
      clearTimeout(timer);
      try { resolve(JSON.parse(out)); } catch { resolve({ bytes: 0, reads: 0, bad: 0, error: `no report: ${err.slice(0, 500)}` }); }
    });
  });
}

async function vmHwm(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = /VmHWM:\s+(\d+) kB/.exec(status)?.[1];
  return Number(kb) * 1024;
}

t.test('16 concurrent readers through one mount: correct bytes, bounded memory', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket('load');
  const seed = 11;
  const objects = await seedDataset(s3, 'load', 'ds/', { smallFiles: { count: 60, size: 24 * 1024, folders: 4 }, largeFiles: { count: 4, size: 6 * MiB + 123 }, seed });
  const dir = await tempMountpoint(t, 'load');
  const env: NodeJS.ProcessEnv = { ...process.env, NODE_NO_WARNINGS: '1', AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_REGION: 'us-east-1', SLUICE_LOG_LEVEL: 'warn' };
  const mount: RunningCli = await startCli(['mount', 's3://load/ds/', dir, '--endpoint', s3.endpoint, '--path-style', '--metrics-port=-1',
    '--cache-size', String(CACHE), '--max-inflight', String(INFLIGHT), '--part-size', '1MiB', '--max-prefetch', '4MiB', '--cross-file-prefetch', '8'], env);
  t.teardown(() => { mount.child.kill('SIGKILL'); });
  const idle = await vmHwm(mount.child.pid!);

  const files = objects.map((o) => ({ path: path.join(dir, o.key.slice('ds/'.length)), key: o.key, size: o.size }));
  const large = files.filter((f) => f.key.includes('/large/'));
  const small = files.filter((f) => f.key.includes('/small/'));
  const jobs = Array.from({ length: READERS }, (_, i) => {
    const mode = i % 2 === 0 ? 'seq' : 'random';
    // Rotate the lists so readers start in different places; quarter of the readers stay on small files.
    const pool = i % 4 === 3 ? small : [...large, ...small.slice(0, 10)];
    const list = pool.slice(i % pool.length).concat(pool.slice(0, i % pool.length));
    return runReader([mode, String(seed), String(DURATION_MS), JSON.stringify(list)]);
  });
  const results = await Promise.all(jobs);
  const peak = await vmHwm(mount.child.pid!);
  const total = results.reduce((a, r) => ({ bytes: a.bytes + r.bytes, reads: a.reads + r.reads, bad: a.bad + r.bad }), { bytes: 0, reads: 0, bad: 0 });
  for (const [i, r] of results.entries()) t.notOk(r.error, `reader ${i} ran (${r.error ?? 'ok'})`);
  t.equal(total.bad, 0, 'no wrong byte');
  t.ok(total.bytes > 0, 'bytes were read');
  const bound = CACHE + INFLIGHT + FIXED_OVERHEAD;
  t.comment(`load: ${READERS} readers x ${DURATION_MS / 1000} s: ${total.reads} reads, ${(total.bytes / MiB).toFixed(1)} MiB verified`);
  t.comment(`load: sluice VmHWM ${(idle / MiB).toFixed(1)} MiB idle, ${(peak / MiB).toFixed(1)} MiB peak; bound ${(bound / MiB).toFixed(0)} MiB = cache ${CACHE / MiB} + in-flight ${INFLIGHT / MiB} + overhead ${FIXED_OVERHEAD / MiB}`);
  t.ok(peak <= bound, 'peak RSS within cache + in-flight + fixed overhead');
  t.equal(mount.child.exitCode, null, 'the daemon is still up');
  mount.child.kill('SIGTERM');
  t.equal((await waitExit(mount)).code, 0, 'clean exit');
});
