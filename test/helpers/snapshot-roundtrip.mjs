#!/usr/bin/env node
// Issue 43 (deliverable 6): a snapshot of N objects round-trips through bounded memory.
// Writes N generated objects (in S3 order, as a generator: never all in memory) with
// writeSnapshotStream, reads them back with scanSnapshot, checks every object against the
// generator's, and prints one JSON line: objects, file bytes, write and read seconds, and the
// process's peak RSS (VmHWM from /proc/self/status). Uses the built dist/ (npm run build).
// Usage: node test/helpers/snapshot-roundtrip.mjs [OBJECTS=10000000] [plain|gzip=gzip] [DIR=os.tmpdir()]
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const n = Number(process.argv[2] ?? 10_000_000);
const gzip = (process.argv[3] ?? 'gzip') === 'gzip';
const base = process.argv[4] ?? os.tmpdir();
if (!Number.isSafeInteger(n) || n < 0) throw new Error(`OBJECTS must be a count, not ${process.argv[2]}`);
const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const { scanSnapshot, writeSnapshotStream } = await import(path.join(root, 'dist', 'snapshot', 'snapshot.js'));

const T0 = Date.UTC(2026, 5, 1);
/** Object i: a key in S3 order (fixed width), sizes and ETags that vary, a version id on every third. */
function object(i) {
  const o = {
    key: `p/part-${String(i).padStart(10, '0')}.bin`, size: (i * 7919) % 1_000_003, etag: `"${(Math.imul(i, 2654435761) >>> 0).toString(16).padStart(8, '0')}"`,
    lastModified: new Date(T0 + (i % 86_400) * 1000), storageClass: i % 10 === 0 ? 'GLACIER' : 'STANDARD',
  };
  if (i % 3 === 0) o.versionId = `v${i}`;
  return o;
}
function* objects() { for (let i = 0; i < n; i++) yield object(i); }
const peakRss = () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))[1]) * 1024;

const dir = mkdtempSync(path.join(base, 'sluice-snap-rt-'));
try {
  const file = path.join(dir, gzip ? 'big.snap.gz' : 'big.snap');
  const t0 = performance.now();
  const trailer = await writeSnapshotStream(file, { uri: 's3://b/p/', bucket: 'b', prefix: 'p/', listing: { filters: [], skipArchived: false } }, objects());
  const t1 = performance.now();
  const rssAfterWrite = peakRss();
  let i = 0;
  let bad = 0;
  const scan = await scanSnapshot(file, (o) => {
    const e = object(i++);
    if (o.key !== e.key || o.size !== e.size || o.etag !== e.etag || o.versionId !== e.versionId || o.storageClass !== e.storageClass || o.lastModified.getTime() !== e.lastModified.getTime()) bad++;
  });
  const t2 = performance.now();
  const out = {
    objects: n, read: i, mismatched: bad, trailerObjects: scan.trailer.objects, sha256: trailer.sha256 === scan.trailer.sha256,
    fileBytes: statSync(file).size, gzip, writeSeconds: +((t1 - t0) / 1000).toFixed(1), readSeconds: +((t2 - t1) / 1000).toFixed(1),
    peakRssAfterWriteMiB: +(rssAfterWrite / 2 ** 20).toFixed(0), peakRssMiB: +(peakRss() / 2 ** 20).toFixed(0), node: process.version,
  };
  process.stdout.write(JSON.stringify(out) + '\n');
  if (i !== n || bad !== 0 || !out.sha256) process.exitCode = 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
