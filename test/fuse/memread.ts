/**
 * Small files from the disk tier answered in libfuse's worker thread (native/src/fuse_memread.c,
 * native/src/tier_small.c): real kernel mounts over a tier filled once, every byte read compared
 * with its source by sha256 (whole files, reads at offsets and past the end, many readers at
 * once, open/close churn), a mount unmounted with handles open, a corrupt and a missing cache
 * file, and the metrics of what C answered, in each way a small file can be opened: passed
 * through to its cache file (FUSE passthrough, when this kernel has it), read into memory in
 * C (SLUICE_NO_PASSTHROUGH), opened in JavaScript with reads in C (SLUICE_NO_C_OPEN); a file
 * held open in one way while opened in another (the kernel refuses to mix passthrough with
 * other opens of one file), and the fallback without the C path (SLUICE_NO_NATIVE).
 */
import { execFile, spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { skip, type Test } from '../helpers/tap.js';
import '../helpers/exit-watch.js';
import { TIER_FOLDER } from '../../src/cache/tier-layout.js';
import type { FastFileMount } from '../../src/fuse/fastfile.js';
import { sourceBytes, uploadLayout, type SeededObject } from '../../src/local/dataset.js';
import { startLocalS3, type LocalS3 } from '../../src/local/s3-server.js';
import { setLogLevel } from '../../src/log.js';
import { exitedWithin } from '../helpers/stuck.js';
import { metricSum } from '../helpers/metrics.js';
import { useLocalCredentials } from '../helpers/mount-options.js';
import { drained, fillTier, tierMount } from '../helpers/tier-mount.js';

setLogLevel('error');

const MiB = 1024 * 1024;
const BUCKET = 'memread';
const PREFIX = 'ds/';
const BLOCK = 256 * 1024; // the disk tier's block: files up to it are read whole at open (openSmall)
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

const metric = metricSum;
const memReads = () => metric('sluice_fuse_memory_reads_total');
const memOpens = () => metric('sluice_fuse_memory_opens_total');
const ptOpens = () => metric('sluice_fuse_passthrough_opens_total');

/** How small files of the tier are opened: passthrough (the default where the kernel has it), into memory in C, or in JavaScript. */
type Mode = 'passthrough' | 'memory' | 'js';
const MODE_ENV: Record<Mode, Record<string, string>> = { passthrough: {}, memory: { SLUICE_NO_PASSTHROUGH: '1' }, js: { SLUICE_NO_C_OPEN: '1' } };
/** Sets `mode`'s environment for the test's mounts (restored at its end). */
function useMode(t: Test, mode: Mode): void {
  for (const [k, v] of Object.entries(MODE_ENV[mode])) {
    process.env[k] = v;
    t.teardown(() => { delete process.env[k]; });
  }
}
/** Whether this kernel negotiates FUSE passthrough (Linux >= 6.9 with CONFIG_FUSE_PASSTHROUGH, and CAP_SYS_ADMIN), learnt from the first mount. */
let kernelPassthrough: boolean | undefined;
const MODES: Mode[] = ['passthrough', 'memory', 'js'];
const served = () => metric('sluice_served_bytes_total');
const delivered = () => metric('sluice_channel_objects_total');
const readOps = () => metric('sluice_fuse_operations_total', { op: 'read', result: 'ok' });
const gets = () => metric('sluice_s3_requests_total', { operation: 'get' });

/**
 * A reader process: for each file, its sha256 read whole, then each [pos, len] range read
 * with pread after the file's pages were dropped (so the kernel asks the mount again), as
 * sha256 and length; `hold` keeps every file open until stdin closes (prints "open" first);
 * `holdOnly` does that with no other open of the file before it (no whole read).
 * `churn` opens, reads and closes the first file that many times first.
 */
const READER = `
const fs = require('node:fs');
const { createHash } = require('node:crypto');
const { execFileSync } = require('node:child_process');
const a = JSON.parse(process.argv[1]);
const sha = (b) => createHash('sha256').update(b).digest('hex');
for (let i = 0; i < (a.churn || 0); i++) { const fd = fs.openSync(a.files[0], 'r'); fs.readSync(fd, Buffer.alloc(4096), 0, 4096, 0); fs.closeSync(fd); }
const out = [];
const fds = [];
for (const f of a.files) {
  if (a.holdOnly) { const fd = fs.openSync(f, 'r'); fs.readSync(fd, Buffer.alloc(10), 0, 10, 0); fds.push(fd); continue; }
  const whole = fs.readFileSync(f);
  const r = { file: f, sha: sha(whole), size: whole.length, ranges: [] };
  if (a.ranges && a.ranges.length) {
    for (const [pos, len] of a.ranges) {
      execFileSync('dd', ['if=' + f, 'iflag=nocache', 'count=0', 'status=none']);
      const fd = fs.openSync(f, 'r');
      const b = Buffer.alloc(len);
      const n = fs.readSync(fd, b, 0, len, pos);
      fs.closeSync(fd);
      r.ranges.push([sha(b.subarray(0, n)), n]);
    }
  }
  if (a.hold) { const fd = fs.openSync(f, 'r'); fs.readSync(fd, Buffer.alloc(10), 0, 10, 0); fds.push(fd); }
  out.push(r);
}
if (a.hold || a.holdOnly) { process.stdout.write('open\\n'); process.stdin.resume(); process.stdin.on('end', () => process.exit(0)); }
else process.stdout.write(JSON.stringify(out));
`;

interface ReadResult { file: string; sha: string; size: number; ranges: [string, number][] }

function childRead(args: { files: string[]; ranges?: [number, number][]; churn?: number }): Promise<ReadResult[]> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['-e', READER, JSON.stringify(args)], { maxBuffer: 64 * MiB, timeout: 120_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`reader failed: ${stderr || err.message}`));
      else resolve(JSON.parse(stdout) as ReadResult[]);
    });
  });
}

/** A reader process holding `files` open (each read 10 bytes into), once it has opened them all; closing its stdin closes them. */
async function holdOpen(t: Test, files: string[], only = false): Promise<{ child: ChildProcessByStdio<Writable, Readable, null>; exited: Promise<unknown> }> {
  const child = spawn(process.execPath, ['-e', READER, JSON.stringify({ files, ...(only ? { holdOnly: true } : { hold: true }) })], { stdio: ['pipe', 'pipe', 'inherit'] });
  t.teardown(() => { child.kill('SIGKILL'); });
  const exited = new Promise((r) => child.on('exit', r));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('reader did not open its files')), 60_000);
    child.stdout.on('data', (b: Buffer) => { if (b.toString().includes('open')) { clearTimeout(timer); resolve(); } });
    child.on('exit', () => reject(new Error('reader exited')));
  });
  return { child, exited };
}

let s3: LocalS3;
let objects: SeededObject[];
let cacheDir: string;
/** Sizes around the page and the block (files up to BLOCK take the C path), and two larger files that do not. */
const ODD_SIZES = [1, 100, 4095, 4096, 4097, 30_000, 65_536, 100_003, BLOCK - 1, BLOCK, BLOCK + 1, 3 * MiB + 17];
const smallObjects = () => objects.filter((o) => o.size <= BLOCK);
const fileOf = (mnt: string, o: SeededObject) => path.join(mnt, o.key.slice(PREFIX.length));

function mount(t: Test, name: string, native = true): Promise<FastFileMount> {
  return tierMount(t, { endpoint: s3.endpoint, uri: `s3://${BUCKET}/${PREFIX}`, cacheDir, name, native });
}

function checkAll(t: Test, got: ReadResult[], objs: SeededObject[], what: string): void {
  let bad = 0;
  for (const [i, o] of objs.entries()) if (got[i]?.sha !== o.sha256 || got[i]?.size !== o.size) bad++;
  t.equal(bad, 0, `${what}: every file's sha256 matches (${objs.length} files)`);
}

t.before(async () => {
  s3 = await startLocalS3();
  useLocalCredentials(s3.credentials);
  await s3.createBucket(BUCKET);
  const layout = [
    ...Array.from({ length: 32 }, (_, i) => ({ key: `${PREFIX}many/f${String(i).padStart(3, '0')}.bin`, size: 40_000 })),
    ...ODD_SIZES.map((size) => ({ key: `${PREFIX}odd/s${size}.bin`, size })),
  ];
  objects = await uploadLayout(s3, BUCKET, layout, 1414);
  cacheDir = await mkdtemp(path.join(os.tmpdir(), 'sluice-memread-'));
  // Epoch 1 fills the tier (the unmount flushes its writes).
  kernelPassthrough = await fillTier(t, { endpoint: s3.endpoint, uri: `s3://${BUCKET}/${PREFIX}`, cacheDir, name: 'memread-fill' }, (mnt) => childRead({ files: objects.map((o) => fileOf(mnt, o)) }));
});
t.teardown(async () => {
  await s3?.stop();
  if (cacheDir) await rm(cacheDir, { recursive: true, force: true });
});

for (const mode of MODES) {
  t.test(`a restarted mount answers small files in C (${mode}): bytes right, no GET, metrics counted`, async (t) => {
    if (mode === 'passthrough' && !kernelPassthrough) return skip(t, 'this kernel does not offer FUSE passthrough');
    useMode(t, mode);
    const m = await mount(t, 'memread-whole');
    t.equal(m.passthrough, mode !== 'memory' && kernelPassthrough, 'passthrough negotiated unless turned off');
    const count = (labels: Record<string, string>) => metric('sluice_fuse_operations_total', labels);
    const [r0, s0, d0, o0, g0, m0, p0, h0, hb0, op0, rel0] = [await memReads(), await served(), await delivered(), await readOps(), await gets(), await memOpens(), await ptOpens(),
      await metric('sluice_disk_cache_hits_total'), await metric('sluice_disk_cache_read_bytes_total'), await count({ op: 'open', result: 'ok' }), await count({ op: 'release', result: 'ok' })];
    const got = await childRead({ files: objects.map((o) => fileOf(m.mountpoint, o)) });
    checkAll(t, got, objects, 'whole files');
    t.ok(await drained(m), 'every handle released in C was released in the core');
    const small = smallObjects();
    const smallBytes = small.reduce((a, o) => a + o.size, 0);
    const inC = (await memReads()) - r0;
    t.equal((await memOpens()) - m0, mode === 'memory' ? small.length : 0, 'small files opened into memory in C: in that mode only');
    // Passthrough takes files of any size up to 256 MiB: the two larger ones too.
    t.equal((await ptOpens()) - p0, mode === 'passthrough' ? objects.length : 0, 'every file passed through: in that mode only');
    if (mode === 'passthrough') t.equal(inC, 0, 'no read reaches sluice: the kernel reads the cache files');
    else t.ok(inC >= small.length, `reads answered in C (${inC}) cover every small file (${small.length})`);
    t.ok((await readOps()) - o0 >= inC, 'reads answered in C are counted as read operations');
    t.equal((await count({ op: 'open', result: 'ok' })) - op0, objects.length, 'every open counted once, however answered');
    t.equal((await count({ op: 'release', result: 'ok' })) - rel0, objects.length, 'every release counted once');
    const total = objects.reduce((a, o) => a + o.size, 0);
    t.equal((await served()) - s0, mode === 'passthrough' ? 0 : total, mode === 'passthrough' ? 'served bytes: none (the kernel read every file itself)' : 'served bytes count every byte, C and JavaScript alike');
    t.equal((await delivered()) - d0, objects.length, 'every file counted as delivered');
    t.equal((await gets()) - g0, 0, 'no GET: every block from the tier');
    // Small files are one block each; the two large ones (BLOCK + 1, 3 MiB + 17) are read through the tier's other paths.
    t.ok((await metric('sluice_disk_cache_hits_total')) - h0 >= small.length, 'each small file is a disk-tier hit');
    t.ok((await metric('sluice_disk_cache_read_bytes_total')) - hb0 >= smallBytes, 'and its bytes are counted as read from the tier');
  });
}

for (const mode of MODES) {
t.test(`reads at offsets and past the end (${mode})`, async (t) => {
  if (mode === 'passthrough' && !kernelPassthrough) return skip(t, 'this kernel does not offer FUSE passthrough');
  useMode(t, mode);
  const m = await mount(t, 'memread-ranges');
  const objs = objects.filter((o) => o.key.includes('/odd/'));
  const ranges: [number, number][] = [[0, 1], [1, 4096], [4095, 2], [4096, 8192], [12_345, 70_000], [BLOCK - 3, 10], [BLOCK, 100], [3 * MiB, 4096], [10 * MiB, 10]];
  const [r0, p0] = [await memReads(), await ptOpens()];
  const got = await childRead({ files: objs.map((o) => fileOf(m.mountpoint, o)), ranges });
  checkAll(t, got, objs, 'whole files');
  let bad = 0;
  for (const [i, o] of objs.entries()) {
    const src = sourceBytes(o);
    for (const [j, [pos, len]] of ranges.entries()) {
      const want = src.subarray(Math.min(pos, src.length), Math.min(pos + len, src.length));
      const [h, n] = got[i]!.ranges[j]!;
      if (n !== want.length || h !== sha(want)) {
        bad++;
        t.fail(`${o.key} [${pos}, +${len}): ${n} bytes, want ${want.length}`);
      }
    }
  }
  t.equal(bad, 0, `every range of ${objs.length} files matches its source, past the end too`);
  t.ok(await drained(m), 'every handle released');
  // Each file is opened once whole, then twice per range (dd drops its pages, then the range is read).
  if (mode === 'passthrough') t.equal((await ptOpens()) - p0, objs.length * (1 + 2 * ranges.length), 'every open was passed through');
  else t.ok((await memReads()) - r0 > objs.length, 'range reads were answered in C');
});
}

for (const mode of MODES) {
t.test(`many readers at once, of the same and of different files, and open/close churn (${mode})`, async (t) => {
  if (mode === 'passthrough' && !kernelPassthrough) return skip(t, 'this kernel does not offer FUSE passthrough');
  useMode(t, mode);
  const m = await mount(t, 'memread-many');
  const small = smallObjects();
  const [r0, p0] = [await memReads(), await ptOpens()];
  const orders = Array.from({ length: 6 }, (_, k) => (k % 2 === 0 ? small : [...small].reverse()).slice(k % 3));
  const runs = await Promise.all([
    ...orders.map((objs) => childRead({ files: objs.map((o) => fileOf(m.mountpoint, o)) })),
    childRead({ files: [fileOf(m.mountpoint, small[0]!)], churn: 300 }),
    childRead({ files: [fileOf(m.mountpoint, small[1]!)], churn: 300 }),
  ]);
  orders.forEach((objs, k) => checkAll(t, runs[k]!, objs, `reader ${k}`));
  checkAll(t, runs[6]!, [small[0]!], 'churn reader 1');
  checkAll(t, runs[7]!, [small[1]!], 'churn reader 2');
  t.ok(await drained(m), 'after 600 opens and closes, every handle is released in the core');
  if (mode === 'passthrough') {
    // The same files open in several readers at once share one backing file (the kernel requires it).
    const opens = orders.reduce((a, o) => a + o.length, 0) + 2 * 301;
    t.equal((await ptOpens()) - p0, opens, `all ${opens} opens passed through`);
  } else t.ok((await memReads()) - r0 > 0, 'answered in C');
});
}

for (const mode of MODES) {
t.test(`unmount while handles answered in C are open (${mode})`, async (t) => {
  if (mode === 'passthrough' && !kernelPassthrough) return skip(t, 'this kernel does not offer FUSE passthrough');
  useMode(t, mode);
  const m = await mount(t, 'memread-unmount');
  const small = smallObjects();
  const [s0, m0, p0] = [await served(), await memOpens(), await ptOpens()];
  const { child, exited } = await holdOpen(t, small.map((o) => fileOf(m.mountpoint, o)));
  // Handles opened in C are not the core's: they show in the count of opens in C, taken at the unmount.
  const inCore = m.core.openHandleCount;
  const dev = (await stat(m.mountpoint)).dev;
  await m.unmount(); // busy: detached lazily; the entries left in C are counted and dropped
  const inC = (await memOpens()) - m0 + (await ptOpens()) - p0;
  t.ok(inCore + inC >= small.length, `${inCore} handles open in the core and ${inC} in C`);
  if (mode !== 'js') t.ok(inC > 0, 'some of them opened in C');
  // Passthrough reads never reach sluice: only the others' bytes are counted.
  if (mode !== 'passthrough') t.ok((await served()) - s0 >= small.length * 10, 'the bytes read before the unmount are counted');
  child.stdin.end();
  child.kill('SIGKILL');
  // The reader's exit closes its files through the detached mount (FLUSH, RELEASE), which the
  // daemon must still answer. A reader stuck there fails here, with where it and our threads
  // wait, instead of at the suite's timeout (its FUSE connection is aborted to free it).
  const stuck = await exitedWithin(child, exited, 30_000, dev);
  t.equal(stuck, undefined, 'the reader exits: every request of the detached mount is answered');
});
}

t.test('mmap of files passed through, and of files read into memory: the same bytes', async (t) => {
  // Training code maps files (numpy.load(mmap_mode=...)); python3 maps each file and hashes the mapping.
  const MAPPER = 'import hashlib, mmap, sys\nfor f in sys.argv[1:]:\n  with open(f, "rb") as h:\n    m = mmap.mmap(h.fileno(), 0, prot=mmap.PROT_READ)\n    print(hashlib.sha256(m).hexdigest())\n    m.close()\n';
  for (const mode of ['passthrough', 'memory'] as Mode[]) {
    if (mode === 'passthrough' && !kernelPassthrough) continue;
    await t.test(mode, async (t) => {
      useMode(t, mode);
      const m = await mount(t, `memread-mmap-${mode}`);
      const objs = objects.filter((o) => o.size > 0);
      const p0 = await ptOpens();
      const out = await new Promise<string>((resolve, reject) => {
        execFile('python3', ['-c', MAPPER, ...objs.map((o) => fileOf(m.mountpoint, o))], { timeout: 60_000, maxBuffer: 16 * MiB }, (err, stdout, stderr) => (err ? reject(new Error(stderr || err.message)) : resolve(stdout)));
      });
      const got = out.trim().split('\n');
      t.equal(objs.filter((o, i) => got[i] !== o.sha256).length, 0, `${mode}: every mapped file's sha256 matches (${objs.length} files)`);
      t.ok(await drained(m), 'every handle released');
      if (mode === 'passthrough') t.equal((await ptOpens()) - p0, objs.length, 'each passed through');
    });
  }
});

t.test('a corrupt cache file is never served: its CRC fails at open and the file comes from S3', async (t) => {
  const objs = await readdir(path.join(cacheDir, TIER_FOLDER, 'objects'));
  let victim: string | undefined;
  for (const sub of objs) {
    for (const f of await readdir(path.join(cacheDir, TIER_FOLDER, 'objects', sub))) {
      const file = path.join(cacheDir, TIER_FOLDER, 'objects', sub, f);
      if (!f.endsWith('.map') && (await readFile(file)).length === 40_000) victim = file;
    }
  }
  t.ok(victim, 'a 40 KB cache file to damage');
  const b = await readFile(victim!);
  b[20_000]! ^= 0x10;
  await writeFile(victim!, b);
  const m = await mount(t, 'memread-corrupt');
  const [f0, g0] = [await metric('sluice_disk_cache_checksum_failures_total'), await gets()];
  const got = await childRead({ files: objects.map((o) => fileOf(m.mountpoint, o)) });
  checkAll(t, got, objects, 'with one damaged cache file');
  t.equal((await metric('sluice_disk_cache_checksum_failures_total')) - f0, 1, 'the damaged block was detected');
  t.ok((await gets()) - g0 >= 1, 'and its file read from S3');
  // C refused it (the CRC failed there too) and left it to JavaScript, which counted and repaired it: the others were opened in C.
  t.ok(await drained(m), 'every handle released');
});

t.test('a cache file removed under the mount is read from S3, the others still opened in C', async (t) => {
  const m = await mount(t, 'memread-removed');
  const victim = smallObjects()[3]!;
  // The tier's own name for it (what C looks up): the same file the JavaScript path would open.
  const tier = m.core.tierOpens!;
  const name = tier.nameOf('/' + victim.key.slice(PREFIX.length))!;
  t.match(name, /^[0-9a-f]{64}$/, 'the file has a cache file name');
  await rm(path.join(tier.objectsDir, name.slice(0, 2), name));
  const [g0, m0, p0] = [await gets(), await memOpens(), await ptOpens()];
  const got = await childRead({ files: objects.map((o) => fileOf(m.mountpoint, o)) });
  checkAll(t, got, objects, 'with one cache file removed');
  t.ok(await drained(m), 'every handle released');
  t.ok((await gets()) - g0 >= 1, 'the removed file came from S3');
  const pt = (await ptOpens()) - p0;
  // Passthrough takes the two larger files too, where the mount has it.
  t.equal((await memOpens()) - m0 + pt, (pt > 0 ? objects.length : smallObjects().length) - 1, 'every other file that can be was opened in C');
});

t.test('a file open through JavaScript is not passed through meanwhile, and is once it is closed', async (t) => {
  if (!kernelPassthrough) return skip(t, 'this kernel does not offer FUSE passthrough');
  const addon = createRequire(import.meta.url)(path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'native', 'build', 'Release', 'sluice_native.node')) as
    { tierReadSmall(dir: string, name: Buffer, block: number, size: number): Buffer | number };
  const m = await mount(t, 'memread-mixed');
  const victim = smallObjects().find((o) => o.size === 40_000 && !o.key.endsWith('f000.bin'))!;
  const tier = m.core.tierOpens!;
  const name = tier.nameOf('/' + victim.key.slice(PREFIX.length))!;
  const data = path.join(tier.objectsDir, name.slice(0, 2), name);
  // Damage it: the first open finds it bad in C and goes to JavaScript, which reads it from S3 and rewrites the tier.
  const b = await readFile(data);
  b[100]! ^= 0x01;
  await writeFile(data, b);
  const file = fileOf(m.mountpoint, victim);
  // C hands its counts over once a second (or when asked): take them before each baseline, so a
  // count can only land in the window it belongs to.
  m.takeCounts();
  const [mB, pB] = [await memOpens(), await ptOpens()];
  // One open only: a whole read first would close a JavaScript handle whose background repair of
  // the tier can land before the holding open, which would then be passed through (seen 1 in 20).
  const { child: holder, exited: held } = await holdOpen(t, [file], true);
  m.takeCounts();
  t.equal((await ptOpens()) - pB, 0, 'the damaged file is not passed through');
  t.equal((await memOpens()) - mB, 0, 'nor read into memory in C: JavaScript opens it');
  // Wait (bounded) until the tier holds the file again, checked as C checks it.
  let repaired = false;
  for (let i = 0; i < 100 && !repaired; i++) {
    repaired = Buffer.isBuffer(addon.tierReadSmall(tier.objectsDir, Buffer.from(name, 'hex'), tier.blockSize, victim.size));
    if (!repaired) await new Promise((r) => setTimeout(r, 50));
  }
  t.ok(repaired, 'the tier holds the file again');
  // Open while the JavaScript handle is open: passthrough here would fail the open (EIO), so it is read into memory in C.
  m.takeCounts();
  const [m0, p0] = [await memOpens(), await ptOpens()];
  checkAll(t, await childRead({ files: [file] }), [victim], 'opened while held in JavaScript');
  m.takeCounts();
  t.equal((await ptOpens()) - p0, 0, 'not passed through while another handle is not');
  t.equal((await memOpens()) - m0, 1, 'read into memory in C instead');
  holder.stdin.end();
  await held;
  t.ok(await drained(m), 'the held handle is released');
  checkAll(t, await childRead({ files: [file] }), [victim], 'opened once it was closed');
  m.takeCounts();
  t.equal((await ptOpens()) - p0, 1, 'then passed through');
});

t.test('SLUICE_NO_NATIVE: no reads in C, the same bytes and metrics through JavaScript', async (t) => {
  process.env.SLUICE_NO_NATIVE = '1';
  t.teardown(() => { delete process.env.SLUICE_NO_NATIVE; });
  const m = await mount(t, 'memread-off', false);
  const [r0, s0, d0] = [await memReads(), await served(), await delivered()];
  const got = await childRead({ files: objects.map((o) => fileOf(m.mountpoint, o)) });
  checkAll(t, got, objects, 'without the C path');
  t.equal((await memReads()) - r0, 0, 'no read answered in C');
  t.ok(await drained(m), 'every handle released');
  t.equal((await served()) - s0, objects.reduce((a, o) => a + o.size, 0), 'served bytes counted');
  t.equal((await delivered()) - d0, objects.length, 'every file delivered');
});
