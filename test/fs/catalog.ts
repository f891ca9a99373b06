/**
 * The compact catalog (src/fs/catalog.ts, issue 46): the same view as ./tree.ts's rules build
 * (compared on random listings, with odd names, folder markers, shadowed and repeated keys, in
 * and out of S3 order), ETags, sizes and times given back exactly, lookups and readdir by index.
 */
import t from 'tap';
import { CatalogBuilder, catalogOf, dirOfRef, isDirRef, type Catalog } from '../../src/fs/catalog.js';
import { parseObjectBytes } from '../../src/snapshot/line-parser.js';
import { objectLine } from '../../src/snapshot/snapshot.js';
import { buildTree, compareCodePoints, lookupPath, type DirNode } from '../../src/fs/tree.js';
import type { Test } from '../helpers/tap.js';
import type { ObjectBytes, ObjectInfo } from '../../src/s3/object-client.js';

const md5 = (i: number) => (Math.imul(i + 1, 2654435761) >>> 0).toString(16).padStart(8, '0').repeat(4);

/** A small seeded generator (mulberry32), so a failure repeats. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const SEGS = ['a', 'b', 'a0', 'a-b', 'Z', 'é', '\u{1F600}', '\uFF01', 'x.jpg', 'a/', '', '..', 'n\0ul', 'sub'];

function randomListing(r: () => number, n: number): ObjectInfo[] {
  const out: ObjectInfo[] = [];
  for (let i = 0; i < n; i++) {
    const depth = 1 + Math.floor(r() * 3);
    const segs: string[] = [];
    for (let k = 0; k < depth; k++) segs.push(SEGS[Math.floor(r() * SEGS.length)]!);
    const key = `p/${segs.join('/')}`;
    const etag = r() < 0.5 ? `"${md5(i)}"` : r() < 0.5 ? `"${md5(i)}-${1 + Math.floor(r() * 9999)}"` : r() < 0.5 ? `W/"${i}-abc"` : `"${md5(i).toUpperCase()}"`;
    const o: ObjectInfo = {
      key, size: r() < 0.1 ? 2 ** 32 + i : Math.floor(r() * 1e6), etag,
      lastModified: new Date(r() < 0.2 ? 1_700_000_000_123 + i : 1_700_000_000_000 + i * 1000),
    };
    if (r() < 0.7) o.storageClass = r() < 0.8 ? 'STANDARD' : 'GLACIER';
    if (r() < 0.1) o.versionId = `v${i}`;
    if (r() < 0.05) o.restored = true;
    out.push(o);
  }
  return out;
}

/** Every folder of the tree checked against the catalog: names, kinds, nlink, each file's info. */
function same(t: Test, cat: Catalog, root: DirNode): number {
  let checked = 0;
  const walk = (d: DirNode, path: string) => {
    const ref = cat.find(path);
    t.ok(ref !== undefined && isDirRef(ref), `${path} is a folder`);
    const e = cat.entries(dirOfRef(ref!));
    const names = Array.from({ length: e.length }, (_, i) => e.name(i));
    t.same(names, d.names, `${path}: names in listing order`);
    t.equal(cat.subdirs(dirOfRef(ref!)), d.subdirs, `${path}: subfolders`);
    d.names.forEach((name, i) => {
      const c = d.children.get(name)!;
      const p = `${path === '/' ? '' : path}/${name}`;
      t.equal(e.isDir(i), c.kind === 'dir', `${p}: kind`);
      if (c.kind === 'dir') walk(c, p);
      else {
        const f = cat.find(p)!;
        t.notOk(isDirRef(f));
        t.same(cat.info(f), c.info, `${p}: info`);
        checked++;
      }
    });
  };
  walk(root, '/');
  return checked;
}

t.test('the same view as tree.ts on random listings, in S3 order and shuffled', async (t) => {
  for (let seed = 1; seed <= 4; seed++) {
    const r = rng(seed);
    const listing = randomListing(r, 200);
    const sorted = [...listing].sort((a, b) => compareCodePoints(a.key, b.key));
    for (const [how, objects] of [['shuffled', listing], ['S3 order', sorted]] as const) {
      const tree = buildTree(objects, 'p');
      const cat = catalogOf(objects, 'p');
      t.equal(cat.fileCount, tree.fileCount, `seed ${seed} ${how}: files`);
      t.equal(cat.dirCount, tree.dirCount, `seed ${seed} ${how}: folders`);
      t.equal(cat.totalBytes, tree.totalBytes, `seed ${seed} ${how}: bytes`);
      const skip = (s: readonly { key: string; reason: string }[]) => s.map((x) => `${x.key} ${x.reason}`).sort();
      t.same(skip(cat.skipped), skip(tree.skipped), `seed ${seed} ${how}: skipped keys and reasons`);
      t.equal(same(t, cat, tree.root), tree.fileCount);
    }
  }
});

t.test('ETags, sizes and times round-trip exactly', async (t) => {
  const etags = [
    `"${md5(1)}"`, `"${md5(2)}-1"`, `"${md5(3)}-10000"`, `"${md5(4)}-0"`, `"${md5(5)}-01"`, `"${md5(6).toUpperCase()}"`,
    'W/"5-abc"', '"s3rver-etag"', '""', md5(7), `"${md5(8)}-99999"`, `"${md5(9)}-100000"`,
  ];
  const sizes = [0, 1, 2 ** 32 - 2, 2 ** 32 - 1, 2 ** 32, 2 ** 40 + 3, Number.MAX_SAFE_INTEGER];
  const times = [0, 1000, 1_700_000_000_000, 1_700_000_000_001, -1000, 2 ** 32 * 1000, 8.64e15];
  const objects: ObjectInfo[] = etags.map((etag, i) => ({ key: `d/e${String(i).padStart(2, '0')}`, etag, size: sizes[i % sizes.length]!, lastModified: new Date(times[i % times.length]!) }));
  const cat = catalogOf(objects, 'd');
  for (const o of objects) {
    const f = cat.find(`/${o.key.slice(2)}`)!;
    t.same(cat.info(f), o, o.etag);
    t.equal(cat.etag(f), o.etag);
    t.equal(cat.size(f), o.size);
  }
  t.equal(cat.totalBytes, objects.reduce((a, o) => a + o.size, 0));
});

t.test('lookups: folders, files, trailing slashes, missing names', async (t) => {
  const o = (key: string): ObjectInfo => ({ key, size: 1, etag: `"${md5(0)}"`, lastModified: new Date(0) });
  const cat = catalogOf([o('p/a/b/c'), o('p/a/x'), o('p/f'), o('p/empty/')], 'p/');
  const tree = buildTree([o('p/a/b/c'), o('p/a/x'), o('p/f'), o('p/empty/')], 'p/');
  for (const path of ['/', '', '/a', '/a/', '//a//b', '/a/b/c', '/a/b/c/', '/a/b/c/d', '/f', '/f/', '/f/x', '/empty', '/nope', '/a/nope', '/a/x']) {
    const want = lookupPath(tree.root, path);
    const got = cat.find(path);
    t.equal(got === undefined ? 'none' : isDirRef(got) ? 'dir' : 'file', want === undefined ? 'none' : want.kind, path);
  }
});

t.test('a folder of 200 k files with subfolders among them: entries by index, lookups, the holder of each file', async (t) => {
  const N = 200_000;
  const objects: ObjectInfo[] = [];
  for (let i = 0; i < N; i++) objects.push({ key: `p/big/f${String(i).padStart(6, '0')}`, size: i, etag: `"${md5(i)}"`, lastModified: new Date(0) });
  // Subfolders that sort before, among and after the files.
  for (const s of ['a', 'f050000x', 'g']) objects.push({ key: `p/big/${s}/inner`, size: 1, etag: `"${md5(1)}"`, lastModified: new Date(0) });
  objects.sort((a, b) => compareCodePoints(a.key, b.key));
  const cat = catalogOf(objects, 'p');
  const d = dirOfRef(cat.find('/big')!);
  const e = cat.entries(d);
  t.equal(e.length, N + 3);
  t.equal(e.name(0), 'a');
  t.ok(e.isDir(0));
  t.equal(e.name(1), 'f000000');
  const mid = 50_001 + 1; // 'a', f000000..f050000, then 'f050000x'
  t.equal(e.name(mid), 'f050000x');
  t.ok(e.isDir(mid));
  t.equal(e.name(mid + 1), 'f050001');
  t.equal(e.name(N + 2), 'g');
  let prev = '';
  let bad = 0;
  for (let i = 0; i < e.length; i++) {
    const n = e.name(i);
    if (compareCodePoints(prev, n) >= 0) bad++;
    prev = n;
  }
  t.equal(bad, 0, 'names strictly in code point order');
  for (const i of [0, 1, 49_999, 123_456, N - 1]) {
    const f = cat.find(`/big/f${String(i).padStart(6, '0')}`)!;
    t.equal(cat.size(f), i);
    t.equal(cat.dirOfFile(f), d);
    t.equal(cat.key(f), `p/big/f${String(i).padStart(6, '0')}`);
  }
  t.equal(cat.find('/big/f200000'), undefined);
  t.equal(cat.dirOfFile(cat.find('/big/g/inner')!), dirOfRef(cat.find('/big/g')!));
});

t.test('columns(): what the FUSE thread reads in place gives every file its size and mtime, sparse values as sorted pairs', async (t) => {
  const objs: ObjectInfo[] = [];
  for (let i = 0; i < 50; i++) {
    objs.push({ key: `p/d${i % 3}/f${String(49 - i).padStart(2, '0')}`, size: i % 7 === 0 ? 2 ** 32 + i : i, etag: `"${md5(i)}"`, lastModified: new Date(i % 5 === 0 ? 1000 * i + 7 : 1000 * i) });
  }
  const cat = catalogOf(objs, 'p/');
  const c = cat.columns();
  const pairs = (a: Float64Array) => Array.from({ length: a.length / 2 }, (_, i) => [a[2 * i]!, a[2 * i + 1]!] as const);
  for (const p of [pairs(c.bigSize), pairs(c.oddMtime)]) t.same(p.map(([f]) => f), p.map(([f]) => f).sort((a, b) => a - b), 'sorted by file');
  const big = new Map(pairs(c.bigSize));
  const odd = new Map(pairs(c.oddMtime));
  let wrong = 0;
  for (let f = 0; f < cat.fileCount; f++) {
    const size = c.size[f] === 0xffffffff ? big.get(f) : c.size[f];
    const mtime = c.mtime[f] === 0xffffffff ? odd.get(f) : c.mtime[f]! * 1000;
    if (size !== cat.size(f) || mtime !== cat.mtimeMs(f)) wrong++;
  }
  t.equal(wrong, 0);
  t.ok(big.size > 0 && odd.size > 0, 'both sparse maps used');
  t.equal(c.fileStart[c.subStart.length], cat.fileCount, 'file ranges end at the last file');
});

t.test('addBytes (decision 0044): objects read as snapshot-line bytes build the same catalog as add()', async (t) => {
  // ASCII names, with what unsafeReason refuses (empty, ".", "..", too long), folder markers,
  // keys outside the prefix; ETags of every shape, escaped ones too.
  const segs = ['a', 'b', 'a0', 'a-b', 'Z', 'x.jpg', 'a/', '', '.', '..', 'sub', 'n'.repeat(256), 'm'.repeat(255), 'd'.repeat(200)];
  const etags = (i: number) => [`"${md5(i)}"`, `"${md5(i)}-${1 + (i % 10000)}"`, `"${md5(i)}-10000"`, `"${md5(i)}-10001"`, `"${md5(i)}-0"`, `"${md5(i)}-01"`, 'W/"5-abc"', '"a\\"b"', '""', md5(i), `"${md5(i).toUpperCase()}"`, `"${md5(i).slice(1)}"`];
  let viaBytes = 0;
  for (let seed = 1; seed <= 6; seed++) {
    const r = rng(seed);
    const listing: ObjectInfo[] = [];
    for (let i = 0; i < 400; i++) {
      const depth = 1 + Math.floor(r() * 3);
      const parts: string[] = [];
      for (let k = 0; k < depth; k++) parts.push(segs[Math.floor(r() * segs.length)]!);
      const key = `${r() < 0.03 ? 'q/' : r() < 0.02 ? 'p' : 'p/'}${parts.join('/')}${r() < 0.005 ? '/'.repeat(3000) : ''}`;
      const e = etags(i);
      listing.push({
        key, size: r() < 0.1 ? 2 ** 32 + i : Math.floor(r() * 1e6), etag: e[Math.floor(r() * e.length)]!,
        lastModified: new Date(r() < 0.2 ? 1_700_000_000_123 + i : r() < 0.1 ? -5000 * i : 1_700_000_000_000 + i * 1000),
        storageClass: r() < 0.8 ? 'STANDARD' : 'INTELLIGENT_TIERING',
      });
    }
    const sorted = [...listing].sort((a, b) => compareCodePoints(a.key, b.key));
    for (const [how, objects] of [['shuffled', listing], ['S3 order', sorted]] as const) {
      const ref = catalogOf(objects, 'p');
      const b = new CatalogBuilder('p');
      const ob: ObjectBytes = { buf: Buffer.alloc(0), keyStart: 0, keyEnd: 0, size: 0, etagStart: 0, etagEnd: 0, mtimeMs: 0, storageClass: '' };
      for (const o of objects) {
        const line = Buffer.from(`--${objectLine(o)}--`);
        if (parseObjectBytes(line, 2, line.length - 2, ob)) {
          viaBytes++;
          b.addBytes(ob);
        } else b.add(o);
      }
      const cat = b.finish();
      // Every column, map and table, and the skipped keys in the same order with the same reasons.
      t.same((cat as unknown as { p: unknown }).p, (ref as unknown as { p: unknown }).p, `seed ${seed} ${how}: the same catalog`);
    }
  }
  t.ok(viaBytes > 3000, `${viaBytes} objects added as bytes`);
});
