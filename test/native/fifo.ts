/**
 * The N-API addon (native/) and its fallback. The addon is built here when it is
 * missing (node-gyp, with the local Node headers when present, so no download).
 */
import t from 'tap';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { constants, lstat, open, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { fifoOps, NO_NATIVE_ENV, prefaultedAlloc } from '../../src/native/addon.js';
import { prefaultedPoolOptions } from '../../src/memory/slab-pool.js';
import { PerformanceObserver, constants as perfConstants } from 'node:perf_hooks';
import { readFileSync } from 'node:fs';
import { tempDir } from '../helpers/pipe.js';

const NATIVE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'native');
const BUILT = path.join(NATIVE_DIR, 'build', 'Release', 'sluice_native.node');

async function ensureBuilt(): Promise<string | undefined> {
  if (existsSync(BUILT)) return undefined;
  const require = createRequire(import.meta.url);
  const gyp = path.join(path.dirname(require.resolve('node-gyp/package.json')), 'bin', 'node-gyp.js');
  const nodedir = existsSync('/usr/include/node/common.gypi') ? ['--nodedir=/usr'] : [];
  try {
    await promisify(execFile)(process.execPath, [gyp, 'rebuild', ...nodedir], { cwd: NATIVE_DIR, timeout: 240_000 });
    return undefined;
  } catch (err) {
    return `native addon cannot be built here: ${(err as Error).message.split('\n')[0]}`;
  }
}

const cannotBuild = await ensureBuilt();
const savedEnv = process.env[NO_NATIVE_ENV];
t.teardown(() => {
  if (savedEnv === undefined) delete process.env[NO_NATIVE_ENV];
  else process.env[NO_NATIVE_ENV] = savedEnv;
});

t.test('native addon: mkfifo, F_SETPIPE_SZ to 1 MiB, F_GETPIPE_SZ', { skip: cannotBuild ?? false }, async (t) => {
  delete process.env[NO_NATIVE_ENV];
  const ops = fifoOps();
  t.equal(ops.backend, 'native');
  const dir = await tempDir(t);
  const fifo = path.join(dir, 'f');
  await ops.mkfifo(fifo, 0o600);
  const st = await lstat(fifo);
  t.ok(st.isFIFO(), 'a FIFO');
  t.equal(st.mode & 0o777, 0o600 & ~process.umask());
  await t.rejects(ops.mkfifo(fifo, 0o600), { code: 'EEXIST', syscall: 'mkfifo', path: fifo }, 'Node-style system error');
  await t.rejects(ops.mkfifo(path.join(dir, 'no', 'f'), 0o600), { code: 'ENOENT' });

  // O_RDWR opens a FIFO without waiting for a peer (Linux), enough to size its buffer.
  const fh = await open(fifo, constants.O_RDWR);
  t.teardown(() => fh.close());
  t.equal(ops.getPipeSize(fh.fd), 64 * 1024, 'kernel default');
  t.equal(ops.setPipeSize(fh.fd, 1024 * 1024), 1024 * 1024);
  t.equal(ops.getPipeSize(fh.fd), 1024 * 1024);
  t.equal(ops.setPipeSize(fh.fd, 100_000), 128 * 1024, 'the kernel rounds up to a power of two of pages');

  const file = path.join(dir, 'plain');
  await writeFile(file, 'x');
  const plain = await open(file, 'r');
  t.teardown(() => plain.close());
  t.throws(() => ops.setPipeSize(plain.fd, 1024 * 1024), { code: 'EBADF' }, 'not a pipe');
  t.throws(() => ops.getPipeSize(-1), { code: 'EINVAL' }, 'a negative fd is refused before the kernel');
});

const hugeKiB = (): number => Number(/AnonHugePages:\s+(\d+)/.exec(readFileSync('/proc/self/smaps_rollup', 'utf8'))?.[1] ?? 0);
const thp = existsSync('/sys/kernel/mm/transparent_hugepage/enabled') ? readFileSync('/sys/kernel/mm/transparent_hugepage/enabled', 'utf8').match(/\[(\w+)\]/)?.[1] ?? 'absent' : 'absent';
/** KiB of this process's mappings advised MADV_HUGEPAGE (VmFlags "hg" in /proc/self/smaps), whatever the kernel then managed to give. */
function hugeAdvisedKiB(): number {
  let kib = 0;
  let size = 0;
  for (const line of readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    if (line.startsWith('Size:')) size = Number(/(\d+)/.exec(line)![1]);
    else if (line.startsWith('VmFlags:') && / hg\b/.test(line)) kib += size;
  }
  return kib;
}

t.test('allocPrefaulted: a buffer of the length asked, mapped up front, holding what is written (slabs of Pipe and File mode)', { skip: cannotBuild ?? false }, async (t) => {
  delete process.env[NO_NATIVE_ENV];
  const alloc = prefaultedAlloc();
  if (alloc === undefined) return t.fail('the built addon has allocPrefaulted');
  const rssKiB = (): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1]);
  const [before, hgBefore, hugeBefore] = [rssKiB(), hugeAdvisedKiB(), hugeKiB()];
  const n = 8 * 1024 * 1024 + 123; // not a whole number of pages
  const buf = alloc(n);
  t.equal(buf.length, n);
  t.ok(rssKiB() - before >= 7 * 1024, `its pages are resident before any write (RSS +${rssKiB() - before} KiB)`);
  // Its whole 2 MiB blocks (8 MiB of it) are advised into huge pages, its 4 KiB tail is not (native/binding.c, huge_inside).
  if (thp === 'absent') t.comment('no transparent huge pages in this kernel: nothing to check');
  else t.equal(hugeAdvisedKiB() - hgBefore, 8192, `its 4 whole 2 MiB blocks advised huge, not its tail (AnonHugePages +${hugeKiB() - hugeBefore} KiB; THP ${thp})`);
  process.env.SLUICE_SLAB_SMALL_PAGES = '1';
  const hgSmall = hugeAdvisedKiB();
  const small = alloc(n);
  delete process.env.SLUICE_SLAB_SMALL_PAGES;
  t.equal(hugeAdvisedKiB() - hgSmall, 0, 'with SLUICE_SLAB_SMALL_PAGES=1 none is (4 KiB pages, to measure one against the other)');
  t.equal(small.length, n);
  for (let i = 0; i < n; i += 4096) buf[i] = i & 0xff;
  buf[n - 1] = 0xab;
  let ok = buf[n - 1] === 0xab;
  for (let i = 0; i < n && ok; i += 4096) ok = buf[i] === (i & 0xff);
  t.ok(ok, 'every byte written reads back');
  t.throws(() => alloc(Number.NaN), 'a bad length is refused');
  process.env[NO_NATIVE_ENV] = '1';
  t.equal(prefaultedAlloc(), undefined, `no allocator with ${NO_NATIVE_ENV}=1: callers use Buffer.allocUnsafe`);
  delete process.env[NO_NATIVE_ENV];
});

t.test('pool slabs come from a region V8 counts once, at the pool\'s start: no collection while they are handed out; a discarded slab\'s pages go back at once', { skip: cannotBuild ?? false }, async (t) => {
  delete process.env[NO_NATIVE_ENV];
  const MiB = 1024 * 1024;
  const rssKiB = (): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1]);
  let major = 0;
  // Only full collections V8 started for external memory (flags carry ALL_EXTERNAL_MEMORY:
  // 40 = 32 | 8 on Node 20 and 24): what a pool's slabs can cause. A full collection for
  // the heap's own reasons (the test runner's garbage, the memory reducer on a loaded
  // machine) may land in any window and says nothing about the slabs.
  const obs = new PerformanceObserver((l) => {
    for (const e of l.getEntries()) {
      const d = (e as unknown as { detail?: { kind?: number; flags?: number } }).detail;
      if (d?.kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR && ((d.flags ?? 0) & perfConstants.NODE_PERFORMANCE_GC_FLAGS_ALL_EXTERNAL_MEMORY) !== 0) major++;
    }
  });
  obs.observe({ entryTypes: ['gc'] });
  t.teardown(() => obs.disconnect());
  const pause = (): Promise<void> => new Promise((r) => setTimeout(r, 100)); // gc entries come in a later task
  const rss0 = rssKiB();
  const { alloc, discard } = prefaultedPoolOptions(256 * MiB);
  if (!alloc || !discard) return t.fail('the built addon gives pool slabs');
  t.ok(rssKiB() - rss0 < 8 * 1024, `the region costs no memory until used (RSS +${rssKiB() - rss0} KiB for 256 MiB)`);
  await pause();
  const slabs: Buffer[] = [];
  let before = major;
  for (let i = 0; i < 24; i++) slabs.push(alloc(8 * MiB));
  await pause();
  t.equal(major - before, 0, '24 slabs of 8 MiB out of the region: no full collection for external memory');
  t.ok(rssKiB() - rss0 >= 160 * 1024, `their pages are mapped as they are handed out (RSS +${rssKiB() - rss0} KiB)`);
  // The measure itself: as many buffers of V8's own, as a pool without a region had.
  const own: Buffer[] = [];
  before = major;
  for (let i = 0; i < 24; i++) own.push(Buffer.allocUnsafe(8 * MiB));
  await pause();
  t.ok(major - before >= 1, `24 buffers of 8 MiB of V8's own: ${major - before} full collection(s) for external memory`);
  const s = slabs[3]!;
  s.fill(0x5a);
  const [rss, hg] = [rssKiB(), hugeAdvisedKiB()];
  discard(s);
  t.ok(rss - rssKiB() >= 6 * 1024, `a discarded slab's pages go back at once (RSS -${rss - rssKiB()} KiB)`);
  t.ok(s[0] === 0 && s[s.length - 1] === 0, 'and it reads zeros, never other bytes');
  if (thp !== 'absent') t.equal(hg - hugeAdvisedKiB(), 8192, 'and its range is no longer advised huge');
  t.equal(alloc(8 * MiB).byteOffset, s.byteOffset, 'its range is handed out again');
  if (thp !== 'absent') t.equal(hugeAdvisedKiB(), hg, 'advised huge again as it is handed out');
  own.length = 0;
});

t.test('the addon checks its argument types', { skip: cannotBuild ?? false }, async (t) => {
  const require = createRequire(import.meta.url);
  const addon = require('node-gyp-build')(NATIVE_DIR) as Record<string, (...a: unknown[]) => unknown>;
  t.throws(() => addon.mkfifo!(42, 0o600), { code: 'ERR_INVALID_ARG_TYPE' });
  t.throws(() => addon.mkfifo!('/tmp/x'), { code: 'ERR_MISSING_ARGS' });
  t.throws(() => addon.setPipeSize!('3', 4096), { code: 'ERR_INVALID_ARG_TYPE' });
  t.throws(() => addon.mkfifo!('/tmp/a\0b', 0o600), { code: 'ERR_INVALID_ARG_VALUE' });
});

t.test(`fallback (${NO_NATIVE_ENV}=1): the mkfifo command, pipe size unsupported`, async (t) => {
  process.env[NO_NATIVE_ENV] = '1';
  t.teardown(() => { delete process.env[NO_NATIVE_ENV]; });
  const ops = fifoOps();
  t.equal(ops.backend, 'mkfifo-command');
  const dir = await tempDir(t);
  const fifo = path.join(dir, 'f');
  await ops.mkfifo(fifo, 0o640);
  const st = await lstat(fifo);
  t.ok(st.isFIFO());
  t.equal(st.mode & 0o777, 0o640);
  await t.rejects(ops.mkfifo(fifo, 0o640), { code: 'EEXIST', path: fifo });
  await t.rejects(ops.mkfifo(path.join(dir, 'no', 'f'), 0o640), { code: 'ENOENT' });
  const fh = await open(fifo, constants.O_RDWR);
  t.teardown(() => fh.close());
  t.equal(ops.setPipeSize(fh.fd, 1024 * 1024), undefined);
  t.equal(ops.getPipeSize(fh.fd), undefined);
});
