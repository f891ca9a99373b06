/**
 * Snapshot files (src/snapshot/snapshot.ts): round trips, verification, diff; and the
 * partition/glob filters (src/s3/filters.ts) and a versioned GET's request (range-reader).
 */
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import t from 'tap';
import { SnapshotError } from '../../src/errors.js';
import { KeyFilter, parseFilter } from '../../src/s3/filters.js';
import type { ObjectInfo } from '../../src/s3/object-client.js';
import { RangeReader } from '../../src/s3/range-reader.js';
import { diffSnapshots, readSnapshot, writeSnapshot } from '../../src/snapshot/snapshot.js';

const header = { uri: 's3://b/p/', bucket: 'b', prefix: 'p/', listing: { filters: [], skipArchived: false } };

function objects(n: number): ObjectInfo[] {
  return Array.from({ length: n }, (_, i) => ({
    key: `p/part-${String(i).padStart(7, '0')}.bin`, size: i * 7 + 1, etag: `"${(i * 2654435761 >>> 0).toString(16)}"`,
    lastModified: new Date(Date.UTC(2026, 5, 1) + i * 1000), storageClass: i % 10 === 0 ? 'GLACIER' : 'STANDARD',
    ...(i % 3 === 0 ? { versionId: `v${i}` } : {}),
  }));
}

t.test('round trip, plain and gzip, in S3 order, every field kept', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'snap-'));
  const objs = objects(2500).reverse();
  objs.push({ key: 'p/\u{1F600}', size: 1, etag: '"e"', lastModified: new Date(0), storageClass: 'INTELLIGENT_TIERING', archiveStatus: 'ARCHIVE_ACCESS' });
  objs.push({ key: 'p/\uE000', size: 2, etag: '"f"', lastModified: new Date(0), restored: true, storageClass: 'GLACIER' });
  for (const name of ['a.snap', 'a.snap.gz']) {
    const file = path.join(dir, name);
    const trailer = await writeSnapshot(file, header, objs);
    t.equal(trailer.objects, objs.length);
    const s = await readSnapshot(file);
    t.equal(s.header.uri, 's3://b/p/');
    t.equal(s.objects.length, objs.length);
    // Code point order: U+E000 before the emoji (UTF-16 order would put the emoji first).
    t.equal(s.objects.at(-2)!.key, 'p/\uE000');
    t.equal(s.objects.at(-1)!.key, 'p/\u{1F600}');
    const byKey = new Map(s.objects.map((o) => [o.key, o]));
    for (const o of objs) t.same(byKey.get(o.key), { ...o, storageClass: o.storageClass ?? 'STANDARD' }, o.key);
    const raw = await readFile(file);
    t.equal(raw[0] === 0x1f && raw[1] === 0x8b, name.endsWith('.gz'), 'gzip exactly when the name ends in .gz');
  }
});

t.test('a damaged, truncated or foreign file is refused with one line', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'snap-'));
  const file = path.join(dir, 'x.snap');
  await writeSnapshot(file, header, objects(50));
  const text = await readFile(file, 'utf8');
  await writeFile(file + '.edit', text.replace('"size":8,', '"size":9,'));
  await t.rejects(readSnapshot(file + '.edit'), /does not match its checksum/);
  const lines = text.split('\n');
  await writeFile(file + '.cut', lines.slice(0, 20).join('\n') + '\n');
  await t.rejects(readSnapshot(file + '.cut'), SnapshotError);
  await writeFile(file + '.gzcut', zlib.gzipSync(text).subarray(0, 100));
  await t.rejects(readSnapshot(file + '.gzcut'), /gzip|truncated/);
  await t.rejects(readSnapshot(path.join(dir, 'missing.snap')), /cannot read snapshot/);
  await t.rejects(writeSnapshot(path.join(dir, 'dup.snap'), header, [...objects(3), objects(3)[1]!]), /listed twice/);
});

t.test('diff: added, removed, modified', async (t) => {
  const a = objects(10);
  const b = objects(12).slice(1);
  b[3] = { ...b[3]!, etag: '"changed"' };
  const d = diffSnapshots(a, b);
  t.same(d.added.map((o) => o.key), [a[0]!.key.replace('0000000', '0000010'), a[0]!.key.replace('0000000', '0000011')]);
  t.same(d.removed.map((o) => o.key), [a[0]!.key]);
  t.same(d.modified.map(([x]) => x.key), [b[3]!.key]);
  t.equal(d.unchanged, 10 - 1 - 1);
});

t.test('100k keys write and load (figures in BENCHMARKS.md)', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'snap-'));
  const objs = objects(100_000);
  const file = path.join(dir, 'big.snap.gz');
  const t0 = performance.now();
  await writeSnapshot(file, header, objs);
  const t1 = performance.now();
  const s = await readSnapshot(file);
  const t2 = performance.now();
  t.equal(s.objects.length, 100_000);
  t.same(s.objects[99_999], objs[99_999]);
  t.comment(`100k keys: write ${(t1 - t0).toFixed(0)} ms, read ${(t2 - t1).toFixed(0)} ms, rss ${(process.memoryUsage().rss / 2 ** 20).toFixed(0)} MiB`);
});

t.test('partition and glob filters', async (t) => {
  t.equal(parseFilter('dt>=2026-06-01').kind, 'partition');
  t.equal(parseFilter('**/*.jpg').kind, 'glob');
  t.throws(() => parseFilter(''), /empty/);
  const f = new KeyFilter(['dt>=2026-06-01', 'dt<2026-06-03', 'region=kr|jp'], 'tbl/');
  t.ok(f.matches('tbl/dt=2026-06-01/region=kr/part-0'));
  t.ok(f.matches('tbl/dt=2026-06-02/region=jp/x/part-0'));
  t.notOk(f.matches('tbl/dt=2026-06-03/region=kr/part-0'));
  t.notOk(f.matches('tbl/dt=2026-05-31/region=kr/part-0'));
  t.notOk(f.matches('tbl/dt=2026-06-01/region=us/part-0'));
  t.notOk(f.matches('tbl/dt=2026-06-01/part-0'), 'a key without the partition column does not pass');
  t.notOk(f.couldMatchUnder('tbl/dt=2026-05-31/'));
  t.ok(f.couldMatchUnder('tbl/dt=2026-06-02/'));
  t.ok(f.needsDeeper('tbl/dt=2026-06-02/'), 'region is not decided yet');
  t.notOk(f.needsDeeper('tbl/dt=2026-06-02/region=kr/'));
  const n = new KeyFilter(['hour>9', 'hour<=12'], '');
  t.ok(n.matches('hour=10/a'), 'numeric comparison');
  t.notOk(n.matches('hour=9/a'));
  t.ok(n.matches('hour=12/a'));
  const w = new KeyFilter(['dt=2026-06-*'], 'tbl/');
  t.ok(w.matches('tbl/dt=2026-06-17/a'));
  t.notOk(w.matches('tbl/dt=2026-07-01/a'));
  const g = new KeyFilter(['train/shard-0*/**/*.jpg', '*.txt'], 'ds/');
  t.ok(g.matches('ds/train/shard-01/a/b.jpg'));
  t.ok(g.matches('ds/train/shard-01/b.jpg'));
  t.ok(g.matches('ds/readme.txt'));
  t.notOk(g.matches('ds/train/shard-11/b.jpg'));
  t.notOk(g.couldMatchUnder('ds/train/shard-11/'));
  t.ok(g.couldMatchUnder('ds/train/'));
  t.notOk(g.couldMatchUnder('ds/val/'));
  t.ok(g.needsDeeper('ds/train/'));
  t.notOk(g.needsDeeper('ds/train/shard-01/'));
});

t.test('a GET pinned to a version id asks for that version, signed with it', async (t) => {
  const signed: { path: string; query: Record<string, string> | undefined }[] = [];
  const reader = new RangeReader({
    bucket: 'b',
    addressing: { pathFor: (k: string) => `/b/${k}` } as never,
    pool: {} as never,
    sign: async (p, headers, _date, query) => { signed.push({ path: p, query }); return { ...headers, authorization: 'x' }; },
    maxAttempts: 1, requestTimeoutMs: 1000,
  });
  const plain = await reader.signedGet('k1', 0, 10, '"e"');
  t.equal(plain.path, '/b/k1');
  t.equal(plain.headers['if-match'], '"e"');
  reader.pinVersions(new Map([['k1', "3/L4kqtJl+x(y)!"]]));
  const pinned = await reader.signedGet('k1', 0, 10, '"e"');
  t.equal(pinned.path, '/b/k1?versionId=3%2FL4kqtJl%2Bx%28y%29%21', 'RFC 3986 encoding of the version id');
  t.same(signed.at(-1)!.query, { versionId: "3/L4kqtJl+x(y)!" }, 'the version id is part of the signature');
  t.equal(pinned.headers.range, 'bytes=0-9');
  t.equal(pinned.headers['if-match'], '"e"', 'still pinned to the ETag');
});
