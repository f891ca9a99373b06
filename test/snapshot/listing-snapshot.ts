/**
 * Issue 46: `sluice snapshot` writes its listing through an external sort (writeListingSnapshot,
 * src/snapshot/spill.ts) instead of holding it. The file must be the one the old path wrote
 * (the listing held, then writeSnapshot) byte for byte, plain and gzip, whatever the listing's
 * order and the run size; archived objects are found and dropped as settle() does; memory
 * does not grow with the count.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import t from 'tap';
import { SnapshotError } from '../../src/errors.js';
import type { ObjectClient, ObjectInfo } from '../../src/s3/object-client.js';
import { settle, writeListingSnapshot, type Dataset } from '../../src/snapshot/dataset.js';
import { readSnapshot, writeSnapshot } from '../../src/snapshot/snapshot.js';
import type { Test } from '../helpers/tap.js';

const CREATED = '2026-12-07T00:00:00.000Z';

async function tmp(t: Test): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'listing-snap-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

function dataset(file: string, skipArchived = false): Dataset {
  return { uri: 's3://b/p/', bucket: 'b', prefix: 'p/', snapshot: undefined, filter: undefined, opts: { snapshotOut: file, skipArchived }, channel: 'test' };
}

/** HEAD answers by key: an Intelligent-Tiering object in the archive tier, a restored GLACIER one. */
const client = { head: async (key: string) => ({ archiveStatus: key.includes('deep') ? 'DEEP_ARCHIVE_ACCESS' : undefined, restored: key.includes('back') }) } as unknown as ObjectClient;

async function* each(objects: ObjectInfo[]): AsyncGenerator<ObjectInfo> { yield* objects; }

const copy = (os: ObjectInfo[]) => os.map((o) => ({ ...o }));

// Keys that sort differently in UTF-16 and UTF-8 (an astral character against U+E000..U+FFFF),
// escapes JSON writes (quote, backslash, control characters), and plain ones.
const keyChar = fc.constantFrom('a', 'b', 'z', '0', '9', '/', '-', '"', '\\', '\n', '\u0001', 'é', '\ue000', '\uffff', '😀', '𝄞');
const objectArb = fc.record({
  key: fc.array(keyChar, { minLength: 1, maxLength: 6 }).map((cs) => `p/${cs.join('')}`),
  size: fc.nat({ max: 2 ** 40 }),
  etag: fc.string({ maxLength: 8 }).map((s) => `"${s}"`),
  lastModified: fc.integer({ min: 0, max: 2 ** 42 }).map((ms) => new Date(ms)),
  storageClass: fc.constantFrom('STANDARD', 'STANDARD', 'GLACIER_IR', 'INTELLIGENT_TIERING'),
  versionId: fc.option(fc.string({ maxLength: 6 }), { nil: undefined }),
}).map((o) => { const r: ObjectInfo = { ...o }; if (o.versionId === undefined) delete r.versionId; return r; });

t.test('same bytes as the held listing written by writeSnapshot, plain and gzip, any order and run size', async (t) => {
  const dir = await tmp(t);
  let n = 0;
  await fc.assert(fc.asyncProperty(
    fc.uniqueArray(objectArb, { selector: (o) => o.key, maxLength: 60 }), fc.integer({ min: 1, max: 9 }), fc.boolean(),
    async (objects, runObjects, gz) => {
      const ext = gz ? '.snap.gz' : '.snap';
      const a = path.join(dir, `old-${n}${ext}`);
      const b = path.join(dir, `new-${n++}${ext}`);
      const header = { uri: 's3://b/p/', bucket: 'b', prefix: 'p/', listing: { filters: [], skipArchived: false }, generator: 'sluice', createdAt: CREATED };
      await writeSnapshot(a, header, copy(objects));
      const r = await writeListingSnapshot(dataset(b), each(copy(objects)), client, { createdAt: CREATED, runObjects });
      const [x, y] = await Promise.all([readFile(a), readFile(b)]);
      if (!x.equals(y)) throw new Error(`files differ (${objects.length} objects, runs of ${runObjects}, ${ext})`);
      if (r.trailer.objects !== objects.length) throw new Error('count');
    }), { numRuns: 60 });
  t.same((await readdir(dir)).filter((f) => f.startsWith('.')), [], 'no run folder or temp file left behind');
});

t.test('archived objects: probed, counted and dropped as settle() does', async (t) => {
  const dir = await tmp(t);
  const objects: ObjectInfo[] = [];
  const classes = ['STANDARD', 'GLACIER', 'DEEP_ARCHIVE', 'INTELLIGENT_TIERING', 'GLACIER_IR'];
  for (let i = 0; i < 200; i++) {
    const c = classes[i % classes.length]!;
    const tag = i % 7 === 0 ? 'deep' : i % 11 === 0 ? 'back' : 'x';
    objects.push({ key: `p/${String((i * 37) % 200).padStart(3, '0')}-${tag}`, size: i, etag: `"${i}"`, lastModified: new Date(i * 1000), storageClass: c });
  }
  for (const skipArchived of [false, true]) {
    const a = path.join(dir, `old-${skipArchived}.snap`);
    const b = path.join(dir, `new-${skipArchived}.snap`);
    const old = await settle(dataset(a, skipArchived), copy(objects), client);
    const r = await writeListingSnapshot(dataset(b, skipArchived), each(copy(objects)), client, { runObjects: 16 });
    const [x, y] = await Promise.all([readSnapshot(a), readSnapshot(b)]);
    t.same(y.objects, x.objects, `skipArchived ${skipArchived}: the same objects`);
    t.same({ ...y.header, createdAt: '' }, { ...x.header, createdAt: '' }, 'the same header but for createdAt');
    t.equal(r.archived, old.archived.length, `skipArchived ${skipArchived}: ${r.archived} archived counted, as settle()`);
    t.ok(skipArchived ? r.archived === 0 && x.objects.length < objects.length : r.archived > 0, 'archived objects were found');
  }
});

t.test('a key listed twice is refused in one line, and nothing is left behind', async (t) => {
  const dir = await tmp(t);
  const file = path.join(dir, 'dup.snap.gz');
  const o = (key: string): ObjectInfo => ({ key, size: 1, etag: '"e"', lastModified: new Date(0), storageClass: 'STANDARD' });
  const listing = [o('p/c'), o('p/a'), o('p/b'), o('p/d'), o('p/b'), o('p/e')];
  let err: unknown;
  try {
    await writeListingSnapshot(dataset(file), each(listing), client, { runObjects: 2 });
  } catch (e) {
    err = e;
  }
  t.ok(err instanceof SnapshotError, `a SnapshotError (got ${String(err)})`);
  t.match((err as SnapshotError).oneLine(), /^[^\n]*key "p\/b" is listed twice[^\n]*$/, 'names the key, in one line');
  t.same(await readdir(dir), [], 'no snapshot, run folder or temp file');
});

/** Old space given to the child: 400,000 held objects need over 160 MiB; bounded runs of 10,000 far less. */
const HEAP_MIB = 48;
/** Young-generation semi-space given to the child (see run below). */
const SEMI_MIB = 2;

t.test('memory does not grow with the count (external sort)', async (t) => {
  const script = fileURLToPath(new URL('../helpers/listing-snapshot.mjs', import.meta.url));
  const dir = await tmp(t);
  const run = (n: number) => new Promise<{ objects: number; read: number; mismatched: number; peakRssMiB: number; writeSeconds: number }>((resolve, reject) => {
    // A small heap: V8 grows its heap lazily when it may, so a bounded one measures what is held.
    // The young generation too: it grows with the allocation rate (on Node 24 by ~100 MiB
    // between 20,000 and 400,000 objects, with nothing more held), so its semi-spaces are capped.
    execFile(process.execPath, [`--max-old-space-size=${HEAP_MIB}`, `--max-semi-space-size=${SEMI_MIB}`, script, String(n), '10000', dir], { timeout: 120_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${err.message}\n${stderr}`));
      else resolve(JSON.parse(stdout.split('\n')[0]!) as never);
    });
  });
  // Both sizes past many runs: below ~800,000 objects Node 20's memory is still settling on a
  // capped heap (peak RSS 98 MiB at 200,000, 133 at 800,000, 136 at 1,600,000; Node 24: flat
  // from 200,000), so the growth is taken between 400,000 and 1,600,000.
  const small = await run(400_000);
  const large = await run(1_600_000);
  for (const r of [small, large]) t.equal(r.read === r.objects && r.mismatched === 0, true, `${r.objects}: every key once, in order`);
  const growth = (large.peakRssMiB - small.peakRssMiB) * 2 ** 20;
  const more = large.objects - small.objects;
  t.comment(`peak RSS ${small.peakRssMiB} MiB at ${small.objects} objects, ${large.peakRssMiB} MiB at ${large.objects} (${large.writeSeconds} s)`);
  // Holding the listing costs 430 bytes an object in the V8 heap (and cannot fit the 48 MiB
  // heap at 1,600,000); a quarter of that bounds the growth, leaving room for the heap's own variance.
  t.ok(growth < more * 100, `peak RSS grew by ${(growth / 2 ** 20).toFixed(1)} MiB for ${more} more objects: under 100 bytes an object`);
});
