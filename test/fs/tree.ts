import t from 'tap';
import { buildTree, compareCodePoints, lookupPath, NAME_MAX, normalizePrefix, unsafeReason } from '../../src/fs/tree.js';
import type { ObjectInfo } from '../../src/s3/object-client.js';

const obj = (key: string, size = 1): ObjectInfo => ({ key, size, etag: '"e"', lastModified: new Date(0) });

t.test('a prefix is a folder prefix', async (t) => {
  t.equal(normalizePrefix('data'), 'data/');
  t.equal(normalizePrefix('data/'), 'data/');
  t.equal(normalizePrefix(''), '');
  t.equal(normalizePrefix('/a/b'), 'a/b/');
  const tree = buildTree([obj('data/x'), obj('database/y'), obj('data')], 'data');
  t.same(tree.root.names, ['x'], '"database/y" and "data" are not under "data/"');
});

t.test('folders, markers and listing order', async (t) => {
  const tree = buildTree([obj('p/b/2'), obj('p/a'), obj('p/b/1'), obj('p/empty/'), obj('p/'), obj('p/c', 5)], 'p/');
  t.same(tree.root.names, ['a', 'b', 'c', 'empty']);
  t.equal(tree.fileCount, 4);
  t.equal(tree.dirCount, 2);
  t.equal(tree.totalBytes, 8);
  const b = lookupPath(tree.root, '/b');
  t.equal(b?.kind, 'dir');
  t.same(b?.kind === 'dir' ? b.files.map((f) => f.key) : [], ['p/b/1', 'p/b/2'], 'files in listing order');
  t.equal(lookupPath(tree.root, '/empty')?.kind, 'dir', 'a folder marker makes an (empty) folder');
  t.equal(lookupPath(tree.root, '/nope'), undefined);
  t.equal(lookupPath(tree.root, '/a/x'), undefined, 'a file has no children');
  t.equal(lookupPath(tree.root, '/')?.kind, 'dir');
  t.same(tree.skipped, []);
});

t.test('unsafe keys are skipped with a reason', async (t) => {
  const long = 'x'.repeat(NAME_MAX + 1);
  const keys = ['d/ok', 'd/a//b', 'd//lead', 'd/./x', 'd/../etc/passwd', 'd/x/..', 'd/nul\0x', `d/${long}`, `d/${'é'.repeat(128)}`, 'd/bad\uD800x'];
  const tree = buildTree(keys.map((k) => obj(k)), 'd');
  t.same(tree.root.names, ['ok']);
  t.same(tree.skipped.map((s) => s.key).sort(), keys.filter((k) => k !== 'd/ok').sort());
  t.match(tree.skipped.find((s) => s.key === 'd/nul\0x')?.reason, /NUL/);
  t.match(tree.skipped.find((s) => s.key === `d/${long}`)?.reason, /longer than 255 bytes/);
  t.equal(unsafeReason('x'.repeat(NAME_MAX)), undefined, '255 bytes is fine');
  t.equal(unsafeReason('smile\u{1F600}/ok'), undefined, 'a surrogate pair is fine');
  t.match(unsafeReason('bad\uDC00'), /Unicode/);
  t.ok(unsafeReason('é'.repeat(128)), '256 bytes of UTF-8 is too long even though 128 characters');
});

t.test('a key that is both a file and a folder prefix: the folder wins', async (t) => {
  for (const order of [['d/a', 'd/a/b'], ['d/a/b', 'd/a']]) {
    const tree = buildTree(order.map((k) => obj(k)), 'd/');
    const a = lookupPath(tree.root, '/a');
    t.equal(a?.kind, 'dir', `order ${order.join(', ')}`);
    t.equal(lookupPath(tree.root, '/a/b')?.kind, 'file');
    t.same(tree.skipped, [{ key: 'd/a', reason: 'shadowed by a folder of the same name' }]);
  }
});

t.test('code point order equals UTF-8 byte order', async (t) => {
  const names = ['b', 'a', 'Z', '\u{1F600}', '\uFF01', 'é', 'a0', ''];
  const byBytes = [...names].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
  t.same([...names].sort(compareCodePoints), byBytes);
});
