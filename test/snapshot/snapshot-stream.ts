/**
 * Issue 43: snapshots read as a stream (defect 4, deliverable 6) and keys outside the
 * snapshot's prefix (defect 8). Files are crafted line by line with a correct trailer, so
 * that the one fault each holds is the one the reader must name.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';
import t from 'tap';
import { SnapshotError } from '../../src/errors.js';
import { readSnapshot, scanSnapshot } from '../../src/snapshot/snapshot.js';
import type { Test } from '../helpers/tap.js';

const HEADER = { sluiceSnapshot: 1, uri: 's3://b/p/', bucket: 'b', prefix: 'p/', createdAt: '2026-12-07T00:00:00.000Z', listing: { filters: [], skipArchived: false } };
const obj = (key: string, size = 1) => JSON.stringify({ key, size, etag: '"e"', lastModified: '2026-06-01T00:00:00.000Z', storageClass: 'STANDARD' });

/** Header, `body` lines, and a trailer whose checksum, count and bytes fit them. */
function craft(body: string[], opts: { objects?: number; bytes?: number; header?: string } = {}): string {
  const text = [opts.header ?? JSON.stringify(HEADER), ...body].map((l) => `${l}\n`).join('');
  const sha256 = createHash('sha256').update(text).digest('hex');
  return `${text}${JSON.stringify({ end: { objects: opts.objects ?? body.length, bytes: opts.bytes ?? body.length, sha256 } })}\n`;
}

async function tmp(t: Test): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'snap-stream-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Reads `file` and returns the SnapshotError's one line, failing the test on any other outcome. */
async function refusal(t: Test, file: string, what: string): Promise<string> {
  try {
    await readSnapshot(file);
  } catch (err) {
    t.ok(err instanceof SnapshotError, `${what}: a SnapshotError (got ${(err as Error).name}: ${(err as Error).message})`);
    const line = err instanceof SnapshotError ? err.oneLine() : String(err);
    t.notOk(line.includes('\n'), `${what}: one line`);
    t.ok(line.includes(file), `${what}: names the file`);
    return line;
  }
  t.fail(`${what}: accepted`);
  return '';
}

t.test('defect 4: every malformed line is a SnapshotError naming the file and the line, plain and gzip', async (t) => {
  const dir = await tmp(t);
  const cases: [string, string, RegExp][] = [
    ['null object line', craft([obj('p/a'), 'null', obj('p/c')]), /line 3 is not an object with key, size and etag/],
    ['array line', craft([obj('p/a'), '[1,2]']), /line 3 is not an object/],
    ['number line', craft(['42']), /line 2 is not an object/],
    ['string line', craft([obj('p/a'), '"p/b"']), /line 3 is not an object/],
    ['not JSON', craft([obj('p/a'), obj('p/b'), '{"key":']), /line 4 is not JSON/],
    ['blank line', craft([obj('p/a'), '']), /line 3 is not JSON/],
    ['size not an integer', craft([JSON.stringify({ key: 'p/a', size: 1.5, etag: '"e"' })]), /line 2 is not an object with key, size and etag/],
    ['null header', craft([obj('p/a')], { header: 'null' }), /not a sluice snapshot/],
    ['header without prefix', craft([obj('p/a')], { header: JSON.stringify({ ...HEADER, prefix: undefined }) }), /line 1 .*lacks uri, bucket or prefix/],
    ['null trailer', `${JSON.stringify(HEADER)}\n${obj('p/a')}\nnull\n`, /truncated \(its last line is not the trailer\)/],
    ['trailer end null', `${JSON.stringify(HEADER)}\n${obj('p/a')}\n{"end":null}\n`, /truncated \(its last line is not the trailer\)/],
    ['out of order', craft([obj('p/b'), obj('p/a')]), /line 3: keys are not in S3 order/],
    ['count differs', craft([obj('p/a')], { objects: 2 }), /holds 1 objects/],
    ['no final newline', craft([obj('p/a')]).slice(0, -1), /truncated \(no final newline\)/],
    ['empty', '', /truncated/],
    ['header only', `${JSON.stringify(HEADER)}\n`, /no trailer line/],
  ];
  for (const [what, text, re] of cases) {
    for (const gz of [false, true]) {
      const file = path.join(dir, `${what.replace(/\W+/g, '-')}.snap${gz ? '.gz' : ''}`);
      await writeFile(file, gz ? zlib.gzipSync(text) : text);
      t.match(await refusal(t, file, `${what}${gz ? ' (gzip)' : ''}`), re, `${what}${gz ? ' (gzip)' : ''}`);
    }
  }
});

t.test('defect 4: a line longer than any listing line, or a gzip that inflates past its bound, is refused without reading it whole', async (t) => {
  const dir = await tmp(t);
  // One 256 MiB "line" with no newline, 256 KiB on disk: a reader that buffered it would hold it all.
  const long = path.join(dir, 'long.snap.gz');
  const huge = Buffer.alloc(256 * 1024 * 1024, 0x61);
  await writeFile(long, zlib.gzipSync(Buffer.concat([Buffer.from(`${JSON.stringify(HEADER)}\n{"key":"p/`), huge])));
  t.match(await refusal(t, long, 'long line'), /line 2 is longer than \d+ bytes/);
  // The inflate bound, lowered for the test: output past it stops the read.
  const many = path.join(dir, 'many.snap.gz');
  const body = Array.from({ length: 20_000 }, (_, i) => obj(`p/${String(i).padStart(6, '0')}`));
  await writeFile(many, zlib.gzipSync(craft(body)));
  let seen = 0;
  await t.rejects(scanSnapshot(many, () => { seen++; }, { maxInflatedBytes: 64 * 1024 }), { code: 'SLUICE_SNAPSHOT', message: /inflates to more than 65536 bytes/ });
  t.ok(seen < body.length, `stopped early (${seen} of ${body.length} objects handed over)`);
  let all = 0;
  const scan = await scanSnapshot(many, () => { all++; });
  t.equal(all, body.length, 'with the default bound, the same file reads whole');
  t.equal(scan.trailer.objects, body.length);
});

t.test('defect 8: a key outside the snapshot\'s prefix is refused with one line naming the file, the line and the key', async (t) => {
  const dir = await tmp(t);
  const cases: [string, string[], string][] = [
    ['before the prefix', ['"a/x"', '"p/a"'], 'a/x'],
    ['after the prefix', ['"p/a"', '"q/z"'], 'q/z'],
    ['a sibling sharing its first letters', ['"p/a"', '"p0"'], 'p0'],
  ];
  for (const [what, keys, badKey] of cases) {
    const file = path.join(dir, `${what.replace(/\W+/g, '-')}.snap`);
    await writeFile(file, craft(keys.map((k) => obj(JSON.parse(k) as string))));
    const line = await refusal(t, file, what);
    t.ok(line.includes(JSON.stringify(badKey)), `${what}: names the key ${badKey}: ${line}`);
    t.match(line, new RegExp(`line ${keys.findIndex((k) => k === JSON.stringify(badKey)) + 2}: key .* is outside the snapshot's prefix "p/"`), what);
  }
  // A snapshot of a whole bucket (prefix "") holds any key.
  const whole = path.join(dir, 'whole.snap');
  await writeFile(whole, craft([obj('a'), obj('z/y')], { header: JSON.stringify({ ...HEADER, uri: 's3://b/', prefix: '' }) }));
  t.equal((await readSnapshot(whole)).objects.length, 2);
});

t.test('deliverable 6: a round trip holds memory that does not grow with the count (test/helpers/snapshot-roundtrip.mjs)', async (t) => {
  // Two counts, each in a fresh process, the larger twice the smaller: a reader or writer that
  // held the file (or its objects) would grow by the difference of the files (137 MiB at the
  // default 1 M -> 2 M). Both counts are past the heap's own start-up growth: below ~1 M
  // objects V8 is still sizing its heap (Node 24 sizes it larger: 149 MiB peak at 500 k, 219
  // at 1 M, 217 at 2 M; Node 20: 137 at 1 M, 146 at 2 M), which is headroom, not growth.
  // SLUICE_SNAPSHOT_ROUNDTRIP=N runs N as the larger count instead (10000000: the figure;
  // 5 M then 10 M, about 16 minutes here, so with npx tap --timeout=3600).
  const script = fileURLToPath(new URL('../helpers/snapshot-roundtrip.mjs', import.meta.url));
  const dir = await tmp(t);
  const big = Number(process.env.SLUICE_SNAPSHOT_ROUNDTRIP ?? 2_000_000);
  const run = (n: number) => new Promise<{ objects: number; read: number; mismatched: number; sha256: boolean; fileBytes: number; peakRssMiB: number }>((resolve, reject) => {
    execFile(process.execPath, [script, String(n), 'plain', dir], { timeout: 3_600_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${err.message}\n${stderr}`));
      else resolve(JSON.parse(stdout) as never);
    });
  });
  const small = await run(Math.max(1, Math.floor(big / 2)));
  const large = await run(big);
  for (const r of [small, large]) {
    t.equal(r.read, r.objects, `${r.objects}: every object read back`);
    t.equal(r.mismatched, 0, `${r.objects}: every object equal to the one written`);
    t.ok(r.sha256, `${r.objects}: the same checksum`);
  }
  const growth = (large.peakRssMiB - small.peakRssMiB) * 2 ** 20;
  t.comment(`peak RSS ${small.peakRssMiB} MiB at ${small.objects} objects, ${large.peakRssMiB} MiB at ${large.objects} (file ${(large.fileBytes / 2 ** 20).toFixed(0)} MiB)`);
  const more = large.fileBytes - small.fileBytes;
  t.ok(growth < more / 2, `peak RSS grew by ${(growth / 2 ** 20).toFixed(0)} MiB for a file ${(more / 2 ** 20).toFixed(0)} MiB larger: less than half of it`);
});
