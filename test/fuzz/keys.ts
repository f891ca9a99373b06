/**
 * Issue 6, item 6: hostile object keys ("..", ".", leading "/", "//", NUL, very long
 * names, lone surrogates from keys that were not valid UTF-8), at the unit level (s3rver
 * cannot store most of them: it refuses NUL and invalid UTF-8, and crashes on "//").
 *  - File mode: safeTarget() either refuses a key with UnsafeKeyError or returns a path
 *    strictly inside the channel folder whose every name fits NAME_MAX (255 bytes).
 *  - FastFile mode: every key is either shown under a safe name (no "/", NUL, ".", "..",
 *    empty or over-long name, valid Unicode) or listed in skippedKeys with a reason
 *    (src/fuse/fastfile.ts logs those as warnings); building the view never throws.
 */
import fc from 'fast-check';
import path from 'node:path';
import t from 'tap';
import { UnsafeKeyError } from '../../src/errors.js';
import { safeTarget } from '../../src/channels/file-mode.js';
import { SluiceFs } from '../../src/fs/core.js';
import { buildTree, type DirNode } from '../../src/fs/tree.js';
import { FakeObjectClient } from '../helpers/fake-client.js';

const RUNS = 500;
const SEED = 6_2026;
const NAME_MAX = 255;

const SEGMENTS = ['..', '.', '', 'a', 'b', 'x'.repeat(256), 'é'.repeat(128), '\u0000', 'n\u0000ul', '\ud800', '\udc00x', '日本', ' ', '...', '.hidden', 'a\\b', '%2e%2e'];
const hostileRel = fc.oneof(
  fc.array(fc.constantFrom(...SEGMENTS), { minLength: 1, maxLength: 6 }).map((s) => s.join('/')),
  fc.array(fc.constantFrom(...SEGMENTS), { minLength: 1, maxLength: 4 }).map((s) => '/' + s.join('/')),
  fc.string({ unit: 'binary', maxLength: 300 }),
  fc.string({ maxLength: 40 }),
);

t.test('File mode: an unsafe key is refused; a safe one stays inside the channel folder', async (t) => {
  const dir = path.resolve('/tmp/sluice-fuzz/data/train');
  let refused = 0;
  fc.assert(fc.property(hostileRel, (rel) => {
    let target;
    try {
      target = safeTarget(dir, 'train/' + rel, rel);
    } catch (err) {
      if (err instanceof UnsafeKeyError) { refused++; return true; }
      throw err;
    }
    if (target === undefined) return true;
    const p = 'file' in target ? target.file : target.folder;
    if (!p.startsWith(dir + path.sep)) throw new Error(`${JSON.stringify(rel)} escapes to ${p}`);
    if (p.includes('\0')) throw new Error(`${JSON.stringify(rel)} keeps a NUL`);
    for (const seg of path.relative(dir, p).split(path.sep)) {
      if (Buffer.byteLength(seg) > NAME_MAX) throw new Error(`${JSON.stringify(rel).slice(0, 60)}: name of ${Buffer.byteLength(seg)} bytes would fail with ENAMETOOLONG`);
    }
    return true;
  }), { numRuns: RUNS, seed: SEED });
  t.ok(refused > 0, `${refused} hostile keys refused with UnsafeKeyError`);
  for (const rel of ['../x', 'a/../../x', '/etc/passwd', 'a/\u0000', 'x'.repeat(300)]) {
    t.throws(() => safeTarget(dir, rel, rel), UnsafeKeyError, `refuses ${JSON.stringify(rel).slice(0, 30)}`);
  }
});

function walk(d: DirNode, visit: (name: string) => void): number {
  let files = 0;
  for (const [name, child] of d.children) {
    visit(name);
    files += child.kind === 'dir' ? walk(child, visit) : 1;
  }
  return files;
}

t.test('FastFile mode: every key is shown under a safe name or skipped with a reason', async (t) => {
  fc.assert(fc.property(fc.uniqueArray(hostileRel, { maxLength: 12 }), (rels) => {
    const objects = rels.map((r) => ({ key: `p/${r}`, size: 1, etag: '"e"', lastModified: new Date(0) }));
    const tree = buildTree(objects, 'p/');
    const files = walk(tree.root, (name) => {
      const bad = name === '' || name === '.' || name === '..' || name.includes('/') || name.includes('\0') || /\p{Cs}/u.test(name) || Buffer.byteLength(name) > NAME_MAX;
      if (bad) throw new Error(`unsafe name shown: ${JSON.stringify(name).slice(0, 60)}`);
    });
    for (const s of tree.skipped) if (!s.reason) throw new Error(`skipped without a reason: ${s.key}`);
    return files + tree.skipped.length <= rels.length; // no key shown twice
  }), { numRuns: RUNS, seed: SEED });
  t.pass();
});

t.test('FastFile mode through the core: hostile keys are skipped, safe ones read', async (t) => {
  const client = new FakeObjectClient();
  const hostile = ['p/../escape', 'p//abs', 'p/a/./b', `p/${'y'.repeat(300)}`, 'p/nul\u0000x', 'p/lone\ud800'];
  for (const k of hostile) client.put(k, Buffer.from('bad'));
  client.put('p/ok.txt', Buffer.from('good'));
  const fs = await SluiceFs.create({ client, prefix: 'p/', cacheSize: 4 << 20, partSize: 1 << 20, maxPrefetch: 1 << 20, maxInflight: 2 << 20, crossFilePrefetch: 0, crossFileMaxSize: 1 });
  t.teardown(() => fs.close());
  t.same(fs.readdir('/'), ['ok.txt'], 'only the safe key is shown');
  t.same(fs.skippedKeys.map((s) => s.key).sort(), [...hostile].sort(), 'every hostile key is reported as skipped (logged as a warning at mount)');
  const fh = await fs.open('/ok.txt', 0);
  const buf = Buffer.alloc(10);
  t.equal(buf.subarray(0, await fs.read(fh, buf, 10, 0)).toString(), 'good');
});
