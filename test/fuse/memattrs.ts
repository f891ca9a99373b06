/**
 * getattr of listed paths answered in libfuse's worker thread from a copy of the listing
 * (native/src/fuse_attrs.c, native.ts MemAttrs): through real kernel mounts, every
 * file's and folder's stat equals what the JavaScript path answers for the same listing
 * (a second mount with SLUICE_NO_NATIVE), the C path did answer them
 * (sluice_fuse_memory_getattrs_total), and paths outside the listing still get ENOENT; a
 * mount whose loop ended leaves C's registry, so later mounts answer from their own tables.
 * Unit cases of the rows built for the table (adapter.ts listedAttrs) are at the end.
 */
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import type { Attr, FsCore } from '../../src/fs/types.js';
import { listedAttrs } from '../../src/fuse/adapter.js';
import { mountFastFile } from '../../src/fuse/fastfile.js';
import { liveFuseMounts } from '../../src/fuse/native.js';
import { uploadLayout } from '../../src/local/dataset.js';
import { startLocalS3, type LocalS3 } from '../../src/local/s3-server.js';
import { setLogLevel } from '../../src/log.js';
import { tempMountpoint } from '../helpers/fuse.js';
import { skip, type Test } from '../helpers/tap.js';
import { metricSum } from '../helpers/metrics.js';
import { testMountOptions, useLocalCredentials } from '../helpers/mount-options.js';

setLogLevel('error');

const BUCKET = 'memattrs';
const PREFIX = 'ds/';
const memGetattrs = () => metricSum('sluice_fuse_memory_getattrs_total');
const getattrOps = () => metricSum('sluice_fuse_operations_total', { op: 'getattr', result: 'ok' });

/** Sizes around the 512-byte st_blocks unit and a 4 GiB-free large one; names with spaces and non-ASCII. */
const LAYOUT = [
  { key: 'empty.bin', size: 0 },
  { key: 'one.bin', size: 1 },
  { key: 'a/511.bin', size: 511 },
  { key: 'a/512.bin', size: 512 },
  { key: 'a/b/513.bin', size: 513 },
  { key: 'a/b/c/large.bin', size: 3 * 1024 * 1024 + 7 },
  { key: 'a/b/c/with space.txt', size: 100 },
  { key: 'día/ñandú 猫.bin', size: 4096 },
  ...Array.from({ length: 24 }, (_, i) => ({ key: `many/f${String(i).padStart(3, '0')}.bin`, size: 1000 + i })),
];

/** Every path of the layout's view, folders included ('' is the root). */
function viewPaths(): string[] {
  const all = new Set<string>(['']);
  for (const { key } of LAYOUT) {
    const parts = key.split('/');
    for (let i = 1; i <= parts.length; i++) all.add(parts.slice(0, i).join('/'));
  }
  return [...all].sort();
}

/** A local S3 server holding LAYOUT under PREFIX, stopped at the test's end, whose credentials the mounts use. */
async function seededS3(t: Test): Promise<LocalS3> {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  useLocalCredentials(s3.credentials);
  await s3.createBucket(BUCKET);
  await uploadLayout(s3, BUCKET, LAYOUT.map((l) => ({ key: PREFIX + l.key, size: l.size })), 7);
  return s3;
}

const FIELDS = ['mode', 'size', 'nlink', 'uid', 'gid', 'blocks', 'blksize', 'mtimeMs', 'atimeMs', 'ctimeMs'] as const;

t.test('getattr answered in C equals the JavaScript answer for every listed path', async (t) => {
  const s3 = await seededS3(t);
  const paths = viewPaths();

  /** Mounts, stats every path once (a fresh mount: each is a kernel LOOKUP), unmounts; the stats and the C answers counted. */
  const statAll = async (name: string) => {
    const dir = await tempMountpoint(t, name);
    const m = await mountFastFile({ uri: `s3://${BUCKET}/${PREFIX}`, mountpoint: dir, options: testMountOptions(s3.endpoint) });
    const before = await memGetattrs();
    const opsBefore = await getattrOps();
    const stats = new Map<string, Record<string, number>>();
    let missing: unknown;
    try {
      await m.listed;
      t.equal(await m.attrTable, name === 'memattrs-c', `${name}: the listing is answered in C only with the addon`);
      for (const p of paths) {
        const st = await stat(path.join(dir, p));
        stats.set(p, Object.fromEntries(FIELDS.map((f) => [f, st[f]])));
      }
      t.same((await readdir(path.join(dir, 'many'))).length, 24, `${name}: readdir still lists the folder`);
      missing = await stat(path.join(dir, 'a/not-there.bin')).catch((e: NodeJS.ErrnoException) => e.code);
    } finally {
      await m.unmount();
    }
    return { stats, inC: (await memGetattrs()) - before, ops: (await getattrOps()) - opsBefore, missing };
  };

  const c = await statAll('memattrs-c');
  process.env.SLUICE_NO_NATIVE = '1';
  let js: Awaited<ReturnType<typeof statAll>>;
  try {
    js = await statAll('memattrs-js');
  } finally {
    delete process.env.SLUICE_NO_NATIVE;
  }

  t.equal(js.inC, 0, 'without the addon no getattr is answered in C');
  // Each path but the root (looked up at mount, before the listing is in) is a fresh LOOKUP.
  t.ok(c.inC >= paths.length - 1, `with it, the lookups of listed paths were answered in C (${c.inC} for ${paths.length} paths)`);
  t.ok(c.ops >= c.inC, `getattrs answered in C are counted as getattr operations too (${c.ops} >= ${c.inC})`);
  t.equal(c.missing, 'ENOENT', 'a path outside the listing: ENOENT (answered in JavaScript)');
  t.equal(js.missing, 'ENOENT');
  const TIMES = ['mtimeMs', 'atimeMs', 'ctimeMs'];
  for (const p of paths) {
    const a = c.stats.get(p)!;
    const b = js.stats.get(p)!;
    if ((a.mode! & 0o170000) === 0o040000) {
      // A folder's times are its mount's start (two mounts here): compared within the mount.
      const rest = (x: Record<string, number>) => Object.fromEntries(Object.entries(x).filter(([k]) => !TIMES.includes(k)));
      t.same(rest(a), rest(b), `/${p}: the same stat from C as from JavaScript (times aside)`);
      t.same(TIMES.map((k) => a[k]), TIMES.map(() => c.stats.get('')!.mtimeMs), `/${p}: the mount's start as its times`);
    } else {
      t.same(a, b, `/${p}: the same stat from C as from JavaScript`);
    }
  }
  const large = c.stats.get('a/b/c/large.bin')!;
  t.equal(large.size, 3 * 1024 * 1024 + 7, 'the large file\'s size');
  t.equal(large.blocks, Math.ceil(large.size! / 512), 'st_blocks in 512-byte units');
  t.equal(c.stats.get('a')!.mode! & 0o170000, 0o040000, 'a folder is a folder');
  t.equal(c.stats.get('a')!.nlink, 3, 'a folder\'s nlink counts its subfolders');
});

t.test('a mount whose loop ended is forgotten in C: each later mount answers from its own table', async (t) => {
  // Requests find their table by libfuse's struct fuse, which the next mount may get at the
  // same address once freed (native/src/fuse_memread.c "Ended mounts"): an ended mount must
  // leave the registry, or that mount's requests would be answered from the ended one's table.
  const s3 = await seededS3(t);
  const live0 = liveFuseMounts();
  if (live0 === undefined) return skip(t, 'the native addon is not built');
  const files = LAYOUT.filter((l) => l.key.startsWith('many/')).map((l) => l.key);
  for (let k = 0; k < 3; k++) {
    const dir = await tempMountpoint(t, `memattrs-ended-${k}`);
    const m = await mountFastFile({ uri: `s3://${BUCKET}/${PREFIX}`, mountpoint: dir, options: testMountOptions(s3.endpoint) });
    let unmounted = false;
    t.teardown(() => (unmounted ? undefined : m.unmount()));
    await m.listed;
    t.equal(await m.attrTable, true, `mount ${k}: the listing is handed to C`);
    t.equal(liveFuseMounts(), live0 + 1, `mount ${k}: one mount registered for requests`);
    const before = await memGetattrs();
    for (const f of files) await stat(path.join(dir, f));
    m.takeCounts(); // C's counts reach the metrics once a second, or now
    t.ok((await memGetattrs()) - before >= files.length, `mount ${k}: its lookups answered in C from its own table`);
    await m.unmount();
    unmounted = true;
    // fuse-native's thread destroys the struct fuse a little after the unmount (it is not joined).
    let live = liveFuseMounts();
    for (let i = 0; i < 200 && live !== live0; i++) {
      await new Promise((r) => setTimeout(r, 50));
      live = liveFuseMounts();
    }
    t.equal(live, live0, `mount ${k}: once its loop ended, it is no longer registered for requests`);
  }
});

/** A core with a fixed two-level view whose attributes `attrOf` gives. */
function fakeCore(attrOf: (p: string) => Attr): FsCore {
  const tree: Record<string, string[]> = { '/': ['d', 'f'], '/d': ['g'] };
  return {
    getattr: (p) => attrOf(p),
    readdir: (p) => tree[p] ?? [],
    open: () => 0,
    read: () => 0,
    release: () => undefined,
    statfs: () => ({ bsize: 4096, frsize: 4096, blocks: 0, bfree: 0, bavail: 0, files: 0, ffree: 0, favail: 0, namemax: 255 }),
    refuse: () => { throw new Error('read-only'); },
  };
}
const dirAttr = (): Attr => ({ mode: 0o040555, size: 4096, mtime: new Date(1_700_000_000_123), nlink: 3, uid: 5, gid: 6 });
const fileAttr = (size: number): Attr => ({ mode: 0o100444, size, mtime: new Date(1_600_000_000_456), nlink: 1, uid: 5, gid: 6 });

t.test('listedAttrs: every path with its mode, nlink, size and mtime; refused when the table cannot hold the view', async (t) => {
  const core = fakeCore((p) => (p === '/' || p === '/d' ? dirAttr() : fileAttr(p === '/f' ? 10 : 2 ** 40)));
  const rows = await listedAttrs(core);
  t.ok(rows, 'built');
  t.equal(rows!.count, 4);
  t.equal(rows!.uid, 5);
  t.equal(rows!.gid, 6);
  const names: string[] = [];
  let at = 0;
  for (let i = 0; i < rows!.count; i++) {
    const len = rows!.rows[5 * i]!;
    names.push(rows!.paths.subarray(at, at + len).toString());
    at += len;
  }
  t.equal(at, rows!.paths.length, 'the paths\' lengths add up to the paths buffer');
  t.same([...names].sort(), ['/', '/d', '/d/g', '/f']);
  const row = (p: string) => { const i = names.indexOf(p); return Array.from(rows!.rows.subarray(5 * i, 5 * i + 5)); };
  t.same(row('/d/g').slice(1), [0o100444, 1, 2 ** 40, 1_600_000_000_456], '/d/g: mode, nlink, size, mtime ms');

  t.equal(await listedAttrs(fakeCore((p) => ({ ...fileAttr(1), mode: p === '/' || p === '/d' ? 0o040555 : 0o100444, uid: p === '/f' ? 9 : 5 }))), undefined,
    'paths of different owners: no table');
  t.equal(await listedAttrs(fakeCore((p) => ({ ...(p === '/' || p === '/d' ? dirAttr() : fileAttr(1)), mtime: new Date(-1000) }))), undefined,
    'an mtime before 1970: no table');
});

t.test('listedAttrs with tierOpens: each file row carries its cache file name, folders and files without one carry zeros', async (t) => {
  const named = 'ab'.repeat(32);
  const asked: string[] = [];
  const rowOf = new Map<string, number | undefined>();
  const core: FsCore = {
    ...fakeCore((p) => (p === '/' || p === '/d' ? dirAttr() : fileAttr(100))),
    tierOpens: { objectsDir: '/tier/objects', blockSize: 262_144, nameOf: (p, _max, row) => { asked.push(p); rowOf.set(p, row); return p === '/d/g' ? named : p === '/f' ? 'not-hex' : undefined; } },
  };
  const rows = await listedAttrs(core);
  t.ok(rows?.tier, 'built, with the tier');
  t.equal(rows!.tier!.objectsDir, '/tier/objects');
  t.equal(rows!.tier!.blockSize, 262_144);
  t.equal(rows!.tier!.names.length, 32 * rows!.count, '32 bytes per row');
  t.same([...asked].sort(), ['/d/g', '/f'], 'names asked for files only');
  let at = 0;
  const byPath = new Map<string, string>();
  const rowByPath = new Map<string, number>();
  for (let i = 0; i < rows!.count; i++) {
    const len = rows!.rows[5 * i]!;
    const p = rows!.paths.subarray(at, at + len).toString();
    byPath.set(p, rows!.tier!.names.toString('hex', 32 * i, 32 * i + 32));
    rowByPath.set(p, i);
    at += len;
  }
  for (const p of ['/d/g', '/f']) t.equal(rowOf.get(p), rowByPath.get(p), `${p}: nameOf is told its row in the listing (what tierHotMark names)`);
  t.equal(byPath.get('/d/g'), named, 'a file with a name: its 32 bytes');
  t.equal(byPath.get('/f'), '00'.repeat(32), 'a name that is not 64 hex digits: zeros (opened in JavaScript)');
  t.equal(byPath.get('/d'), '00'.repeat(32), 'a folder: zeros');
  t.equal((await listedAttrs(fakeCore(() => dirAttr())))?.tier, undefined, 'a core without tierOpens: no tier');
});
