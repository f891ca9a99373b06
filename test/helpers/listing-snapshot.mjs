#!/usr/bin/env node
// Issue 46: `sluice snapshot`'s writer (writeListingSnapshot) holds a bounded number of objects.
// Feeds N generated objects as the parallel lister does (pages of 1,000 sorted keys from RANGES
// key ranges, interleaved: no order overall) through writeListingSnapshot with runs of RUN
// objects, reads the file back, checks every key came once in S3 order, and prints one JSON
// line: objects, seconds, the process's peak RSS (VmHWM). Uses the built dist/ (npm run build).
// Usage: node test/helpers/listing-snapshot.mjs OBJECTS [RUN=20000] [DIR=os.tmpdir()] [plain|gzip=plain]
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const n = Number(process.argv[2]);
const run = Number(process.argv[3] ?? 20_000);
const base = process.argv[4] ?? os.tmpdir();
const gzip = process.argv[5] === 'gzip';
if (!Number.isSafeInteger(n) || n < 0) throw new Error(`OBJECTS must be a count, not ${process.argv[2]}`);
const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const { writeListingSnapshot } = await import(path.join(root, 'dist', 'snapshot', 'dataset.js'));
const { scanSnapshot } = await import(path.join(root, 'dist', 'snapshot', 'snapshot.js'));

const RANGES = 8;
const PAGE = 1000;
const T0 = Date.UTC(2026, 5, 1);
const key = (i) => `p/f${String(Math.floor(i / 1000)).padStart(6, '0')}/o${String(i % 1000).padStart(4, '0')}.bin`;
/** Range r holds objects [r*n/RANGES, (r+1)*n/RANGES); pages are taken from the ranges in turn. */
async function* listing() {
  const at = Array.from({ length: RANGES }, (_, r) => Math.floor((r * n) / RANGES));
  const end = (r) => Math.floor(((r + 1) * n) / RANGES);
  for (let busy = true; busy;) {
    busy = false;
    for (let r = RANGES - 1; r >= 0; r--) {
      const stop = Math.min(end(r), at[r] + PAGE);
      const page = [];
      for (; at[r] < stop; at[r]++) {
        const i = at[r];
        page.push({ key: key(i), size: (i * 7919) % 1_000_003, etag: `"${(Math.imul(i, 2654435761) >>> 0).toString(16)}"`, lastModified: new Date(T0 + (i % 86_400) * 1000), storageClass: 'STANDARD' });
      }
      if (page.length > 0) busy = true;
      yield* page;
    }
  }
}
const peakRss = () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))[1]) * 1024;

const dir = mkdtempSync(path.join(base, 'sluice-listing-snap-'));
try {
  const file = path.join(dir, gzip ? 'l.snap.gz' : 'l.snap');
  const ds = { uri: 's3://b/p/', bucket: 'b', prefix: 'p/', snapshot: undefined, filter: undefined, opts: { snapshotOut: file, skipArchived: false }, channel: 'test' };
  const t0 = performance.now();
  const { trailer } = await writeListingSnapshot(ds, listing(), { head: () => { throw new Error('no HEAD expected'); } }, { runObjects: run });
  const t1 = performance.now();
  let i = 0;
  let bad = 0;
  await scanSnapshot(file, (o) => { if (o.key !== key(i++)) bad++; });
  const out = { objects: n, read: i, mismatched: bad, trailerObjects: trailer.objects, fileBytes: statSync(file).size, writeSeconds: +((t1 - t0) / 1000).toFixed(1), peakRssMiB: +(peakRss() / 2 ** 20).toFixed(1), leftovers: readdirCount(dir) };
  process.stdout.write(JSON.stringify(out) + '\n');
  if (i !== n || bad !== 0) process.exitCode = 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
function readdirCount(d) { return readdirSyncSafe(d).length; }
function readdirSyncSafe(d) { try { return readdirSync(d); } catch { return []; } }
import { readdirSync } from 'node:fs';
