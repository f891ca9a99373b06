import { constants } from 'node:fs';
import { open, readdir, readFile, stat, writeFile, unlink, rename, mkdir, rmdir, truncate, chmod, symlink } from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { ObjectChangedError } from '../../src/errors.js';
import { mountCore } from '../../src/fuse/kernel-mount.js';
import { mountAt } from '../../src/fuse/mountpoint.js';
import { getReadaheadKb } from '../../src/fuse/readahead.js';
import { registry } from '../../src/metrics/metrics.js';
import { MemCore } from '../helpers/mem-core.js';
import { tempMountpoint } from '../helpers/fuse.js';

/** fuse-native's own default per-operation timeout (node_modules/fuse-native/index.js). */
const FUSE_NATIVE_DEFAULT_TIMEOUT_MS = 15_000;
async function waitUntil(ok: () => boolean, ms = 5000): Promise<void> {
  for (const end = Date.now() + ms; !ok() && Date.now() < end;) await new Promise((r) => setTimeout(r, 20));
}
const bytes = (n: number, seed: number) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 31 + seed) & 0xff));

t.test('an in-memory core through the kernel', async (t) => {
  const files = { '/a.bin': bytes(300_000, 1), '/dir/b.txt': Buffer.from('hello\n'), '/dir/sub/c.bin': bytes(5000, 2), '/bad.bin': bytes(10, 3) };
  const core = new MemCore(files);
  core.failRead = (p) => (p === '/bad.bin' ? new ObjectChangedError('b', 'bad.bin', '"x"', '"y"') : undefined);
  const dir = await tempMountpoint(t);
  const m = await mountCore(core, dir, { allowOther: false, attrTimeoutSec: 60, readaheadKb: 1024, fuseTimeoutMs: 60_000 });
  t.teardown(() => m.unmount());

  const entry = await mountAt(dir);
  t.equal(entry?.fstype, 'fuse.sluice', 'fstype is fuse.sluice');
  t.equal(entry?.source, 'sluice', 'fsname is sluice');
  t.match(await readFile('/proc/self/mountinfo', 'utf8'), new RegExp(`${dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} ro[,\\s]`), 'mounted read-only');
  const line = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n').find((l) => l.split(' ')[4] === dir) ?? '';
  t.notMatch(line, /allow_other/, 'allow_other only when asked');
  t.equal(m.readaheadKb, 1024);
  t.equal(await getReadaheadKb(dir), 1024, 'readahead set on the bdi');

  t.test('bytes, listings and sizes', async (t) => {
    for (const [p, b] of Object.entries(files)) {
      if (p === '/bad.bin') continue;
      t.same(await readFile(path.join(dir, p)), b, `${p} bytes`);
      t.equal((await stat(path.join(dir, p))).size, b.length, `${p} size`);
    }
    t.same((await readdir(dir)).sort(), ['a.bin', 'bad.bin', 'dir']);
    t.same((await readdir(path.join(dir, 'dir'))).sort(), ['b.txt', 'sub']);
    const ents = await readdir(path.join(dir, 'dir'), { withFileTypes: true });
    t.same(ents.map((e) => [e.name, e.isDirectory()]).sort(), [['b.txt', false], ['sub', true]], 'd_type from readdir');
    const st = await stat(path.join(dir, 'a.bin'));
    t.equal(st.mode & 0o777, 0o444);
    t.equal(st.blksize, 128 * 1024, 'st_blksize asks buffered readers for 128 KiB reads');
    t.ok((await stat(path.join(dir, 'dir'))).isDirectory());
    const fh = await open(path.join(dir, 'a.bin'));
    const buf = Buffer.alloc(1000);
    const { bytesRead } = await fh.read(buf, 0, 1000, 123_456);
    await fh.close();
    t.equal(bytesRead, 1000);
    t.same(buf, files['/a.bin'].subarray(123_456, 124_456), 'pread at an offset');
  });

  t.test('errors', async (t) => {
    const p = (x: string) => path.join(dir, x);
    await t.rejects(readFile(p('missing')), { code: 'ENOENT' });
    await t.rejects(readFile(p('dir/nope/x')), { code: 'ENOENT' });
    await t.rejects(readFile(p('bad.bin')), { name: 'Error', errno: -116 }, 'core errors map through errnoFor (ESTALE; libuv has no name for it)');
    await t.rejects(writeFile(p('new.txt'), 'x'), { code: 'EROFS' }, 'create');
    await t.rejects(writeFile(p('a.bin'), 'x'), { code: 'EROFS' }, 'overwrite');
    await t.rejects(open(p('a.bin'), constants.O_RDWR), { code: 'EROFS' }, 'open O_RDWR');
    await t.rejects(unlink(p('a.bin')), { code: 'EROFS' }, 'unlink');
    await t.rejects(rename(p('a.bin'), p('z.bin')), { code: 'EROFS' }, 'rename');
    await t.rejects(mkdir(p('newdir')), { code: 'EROFS' }, 'mkdir');
    await t.rejects(rmdir(p('dir')), { code: 'EROFS' }, 'rmdir');
    await t.rejects(truncate(p('a.bin'), 0), { code: 'EROFS' }, 'truncate');
    await t.rejects(chmod(p('a.bin'), 0o777), { code: 'EROFS' }, 'chmod');
    await t.rejects(symlink('a.bin', p('link')), { code: 'EROFS' }, 'symlink');
    await t.rejects(readdir(p('a.bin')), { code: 'ENOTDIR' }, 'readdir of a file');
  });

  t.test('metrics', async (t) => {
    const text = await registry.metrics();
    t.match(text, /sluice_fuse_operations_total\{op="read",result="ok"\} [1-9]/);
    t.match(text, /sluice_fuse_operations_total\{op="read",result="ESTALE"\} [1-9]/);
    t.match(text, /sluice_fuse_operations_total\{op="getattr",result="ENOENT"\} [1-9]/);
    t.match(text, /sluice_fuse_operation_seconds_count\{op="open"\} [1-9]/);
    t.match(text, /sluice_fuse_read_size_bytes_count [1-9]/);
  });

  t.test("fuse-native's timer answers ETIMEDOUT only after the timeout we set", async (t) => {
    // A second mount with a 1 s timeout and a 3 s read: the timer fires. The late reply
    // of the core (into a buffer fuse-native has let go) must not crash anything.
    const core2 = new MemCore({ '/slow.bin': bytes(4096, 9) });
    core2.slowRead = { path: '/slow.bin', ms: 3000 };
    const dir2 = await tempMountpoint(t, 'timeout');
    const m2 = await mountCore(core2, dir2, { allowOther: false, attrTimeoutSec: 1, readaheadKb: 0, fuseTimeoutMs: 1000 });
    t.teardown(() => m2.unmount());
    await t.rejects(readFile(path.join(dir2, 'slow.bin')), { code: 'ETIMEDOUT' });
    await new Promise((r) => setTimeout(r, 3000)); // let the late reply land
    core2.slowRead = undefined;
    t.same(await readFile(path.join(dir2, 'slow.bin')), bytes(4096, 9), 'the mount still answers afterwards');
  });

  t.test('a read stuck past the deadline fails with ETIMEDOUT, and the mount goes on', async (t) => {
    // Reads bypass fuse-native's wrapper and its timer (native.ts); the mount's
    // ReadDeadlines (deadline.ts) answers them instead, within timeout + 2 sweep periods.
    const core2 = new MemCore({ '/hung.bin': bytes(4096, 7), '/ok.bin': bytes(5000, 8) });
    const dir2 = await tempMountpoint(t, 'hung');
    const m2 = await mountCore(core2, dir2, { allowOther: false, attrTimeoutSec: 1, readaheadKb: 0, fuseTimeoutMs: 1000 });
    t.teardown(() => m2.unmount());
    t.equal(m2.directRead, true, "reads take the direct path with this fuse-native version (native.ts DIRECT_READ_VERSIONS)");

    core2.hungRead = { path: '/hung.bin' };
    let t0 = Date.now();
    await t.rejects(readFile(path.join(dir2, 'hung.bin')), { code: 'ETIMEDOUT' }, 'a core that honours the signal');
    let took = Date.now() - t0;
    t.ok(took >= 1000, `not before the timeout (${took} ms)`);
    t.ok(core2.aborted >= 1, "the core was told to give up (it never writes into the kernel's buffer after)");

    core2.hungRead = { path: '/hung.bin', abortIgnored: true };
    t0 = Date.now();
    await t.rejects(readFile(path.join(dir2, 'hung.bin')), { code: 'ETIMEDOUT' }, 'a core that never answers at all');
    took = Date.now() - t0;
    t.ok(took >= 1000, `not before the timeout (${took} ms)`);

    core2.hungRead = undefined;
    t.same(await readFile(path.join(dir2, 'ok.bin')), bytes(5000, 8), 'other reads are answered');
    t.same(await readFile(path.join(dir2, 'hung.bin')), bytes(4096, 7), 'and the same file, once the core answers');
    const text = await registry.metrics();
    t.match(text, /sluice_fuse_operations_total\{op="read",result="ETIMEDOUT"\} [1-9]/, 'counted as ETIMEDOUT');
    await m2.unmount();
    t.equal(await mountAt(dir2), undefined, 'no stale mount');
  });

  t.test("a read slower than fuse-native's 15 s default still succeeds", async (t) => {
    // The main mount's timeout is 60 s (fuseTimeoutMs() gives 301 s with the defaults).
    // A file never read before, so the page cache cannot answer for the core.
    core.files.set('/late.txt', Buffer.from('hello\n'));
    core.slowRead = { path: '/late.txt', ms: FUSE_NATIVE_DEFAULT_TIMEOUT_MS + 1500 };
    t.teardown(() => { core.slowRead = undefined; });
    const t0 = Date.now();
    const fh = await open(path.join(dir, 'late.txt'));
    const buf = Buffer.alloc(6);
    const { bytesRead } = await fh.read(buf, 0, 6, 0);
    await fh.close();
    t.equal(bytesRead, 6);
    t.equal(buf.toString(), 'hello\n');
    t.ok(Date.now() - t0 >= FUSE_NATIVE_DEFAULT_TIMEOUT_MS, 'the read really went through the slow core');
  });

  t.test('getattr, open and release answer on the direct path, synchronously or after a promise, with their deadline', async (t) => {
    t.equal(m.directMeta, true, 'getattr, open and release bypass fuse-native\'s wrapper with this fuse-native version (native.ts)');
    const count = async (op: string, result = 'ok') => {
      const v = (await registry.getSingleMetric('sluice_fuse_operations_total')!.get()).values;
      return v.filter((x) => x.labels.op === op && x.labels.result === result).reduce((a, x) => a + x.value, 0);
    };
    const core2 = new MemCore({ '/s/a.bin': bytes(70_000, 4), '/s/b.bin': bytes(10, 5), '/slow.bin': bytes(100, 6) });
    const dir2 = await tempMountpoint(t, 'meta');
    const m2 = await mountCore(core2, dir2, { allowOther: false, attrTimeoutSec: 60, readaheadKb: 0, fuseTimeoutMs: 1000 });
    t.teardown(() => m2.unmount());
    for (const sync of [true, false]) {
      core2.syncOpen = sync;
      const what = sync ? 'sync' : 'after a promise';
      const [g0, o0, r0] = [await count('getattr'), await count('open'), core2.released];
      for (const [p, b] of [['s/a.bin', bytes(70_000, 4)], ['s/b.bin', bytes(10, 5)]] as const) {
        const fh = await open(path.join(dir2, p));
        const st = await fh.stat();
        t.equal(st.size, b.length, `${what}: ${p} size`);
        t.equal(st.mode & 0o777, 0o444, `${what}: ${p} mode`);
        t.equal(st.mtimeMs, new Date('2024-01-01T00:00:00Z').getTime(), `${what}: ${p} mtime`);
        t.same(await fh.readFile(), b, `${what}: ${p} bytes`);
        await fh.close();
      }
      await waitUntil(() => core2.released - r0 === 2);
      t.equal(core2.released - r0, 2, `${what}: both handles released`);
      t.equal(await count('open') - o0, 2, `${what}: opens answered and counted`);
      if (sync) t.ok(await count('getattr') - g0 >= 3, 'lookups answered and counted (folder and files)');
      await t.rejects(stat(path.join(dir2, 's', 'none')), { code: 'ENOENT' }, `${what}: a missing file`);
      await t.rejects(open(path.join(dir2, 's', 'a.bin'), constants.O_RDWR), { code: 'EROFS' }, `${what}: open for writing`);
    }
    // An open that waits past the deadline: ETIMEDOUT, as fuse-native's own timer answers; the late answer is dropped.
    core2.slowOpen = { path: '/slow.bin', ms: 2500 };
    await t.rejects(readFile(path.join(dir2, 'slow.bin')), { code: 'ETIMEDOUT' }, 'a slow open times out');
    await new Promise((r) => setTimeout(r, 2000)); // let the late answer land
    core2.slowOpen = undefined;
    t.same(await readFile(path.join(dir2, 'slow.bin')), bytes(100, 6), 'the mount still answers afterwards');
  });

  t.test('unmount', async (t) => {
    await m.unmount();
    await m.unmount();
    t.equal(await mountAt(dir), undefined, 'gone from the mount table');
    t.same(await readdir(dir), [], 'the folder is empty again');
  });
});
