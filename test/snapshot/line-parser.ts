/**
 * Issue 46: the fast snapshot line parser (src/snapshot/line-parser.ts) must read every line it
 * accepts as JSON.parse does, and decline every other one, so that a scan gives the same
 * objects or the same SnapshotError as the JSON.parse-only scan (scanSnapshot fastLines:false).
 */
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import t from 'tap';
import type { ObjectBytes, ObjectInfo } from '../../src/s3/object-client.js';
import { parseObjectBytes, parseObjectLine } from '../../src/snapshot/line-parser.js';
import { compareKeys } from '../../src/s3/lister.js';
import { objectLine, scanSnapshot } from '../../src/snapshot/snapshot.js';

const HEADER = JSON.stringify({ sluiceSnapshot: 1, uri: 's3://b/p/', bucket: 'b', prefix: 'p/', createdAt: '2026-12-07T00:00:00.000Z', listing: { filters: [], skipArchived: false } });

/** The record JSON.parse gives, mapped as scanSnapshot's slow path maps it (undefined: that path refuses the line). */
function reference(line: string): ObjectInfo | undefined {
  let r: unknown;
  try { r = JSON.parse(line); } catch { return undefined; }
  if (typeof r !== 'object' || r === null || Array.isArray(r)) return undefined;
  const x = r as Record<string, unknown>;
  if (typeof x.key !== 'string' || typeof x.size !== 'number' || !Number.isSafeInteger(x.size) || x.size < 0 || typeof x.etag !== 'string') return undefined;
  const o: ObjectInfo = { key: x.key, size: x.size, etag: x.etag, lastModified: new Date(typeof x.lastModified === 'string' ? x.lastModified : 0), storageClass: typeof x.storageClass === 'string' ? x.storageClass : 'STANDARD' };
  if (typeof x.versionId === 'string') o.versionId = x.versionId;
  if (typeof x.archiveStatus === 'string') o.archiveStatus = x.archiveStatus;
  if (x.restored === true) o.restored = true;
  return o;
}

/** Comparable form: Dates by their time (NaN for an invalid one), fields in one order. */
const plain = (o: ObjectInfo | undefined) => o === undefined ? undefined : JSON.stringify({ ...o, lastModified: String(o.lastModified.getTime()), restored: o.restored ?? null, versionId: o.versionId ?? null, archiveStatus: o.archiveStatus ?? null });

const char = fc.constantFrom('a', 'Z', '0', '/', '.', '-', ' ', '"', '\\', '\n', '\t', '\u0001', '\u007f', 'é', '\u2028', '😀', '\ue000');
const str = (max: number) => fc.array(fc.oneof({ weight: 6, arbitrary: fc.constantFrom('a', 'b', '0', '9', '/', '_') }, { weight: 1, arbitrary: char }), { maxLength: max }).map((cs) => cs.join(''));
const objectArb = fc.record({
  key: str(12).map((s) => `p/${s}`),
  size: fc.oneof(fc.nat({ max: 1000 }), fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), fc.constant(999_999_999_999_999), fc.constant(1_000_000_000_000_000)),
  etag: str(10).map((s) => `"${s}"`),
  lastModified: fc.oneof(fc.integer({ min: -62198755200000, max: 253402300799999 }), fc.integer({ min: 0, max: 2 ** 42 }), fc.constant(-62135596800000), fc.constant(-8.64e15)).map((ms) => new Date(ms)),
  storageClass: fc.oneof(fc.constantFrom('STANDARD', 'GLACIER', 'DEEP_ARCHIVE', 'INTELLIGENT_TIERING', 'GLACIER_IR', 'STANDARD_IA', 'ONEZONE_IA', 'STANDARDX', 'STANDAR'), str(6)),
  versionId: fc.option(str(8), { nil: undefined }),
  archiveStatus: fc.option(fc.constantFrom('ARCHIVE_ACCESS', 'DEEP_ARCHIVE_ACCESS'), { nil: undefined }),
  restored: fc.option(fc.constant(true), { nil: undefined }),
}).map((o) => { const r: ObjectInfo = { ...o }; for (const k of ['versionId', 'archiveStatus', 'restored'] as const) if (r[k] === undefined) delete r[k]; return r; });

/** A line changed where a parser may slip: a byte replaced, removed or added, the line cut, or a hand-made field. */
const mutated = fc.tuple(objectArb, fc.nat(), fc.constantFrom('replace', 'delete', 'insert', 'cut', 'raw'), fc.constantFrom('"', '\\', '}', '{', ',', ':', ' ', '0', '9', '-', '.', 'e', 'x', '\u0000', 'é', 'null', 'true', '1e3', '-0', '0.5', '01'))
  .map(([o, at, how, s]) => {
    const line = objectLine(o);
    const i = at % (line.length + 1);
    if (how === 'replace') return line.slice(0, i) + s + line.slice(i + 1);
    if (how === 'delete') return line.slice(0, i) + line.slice(i + 1);
    if (how === 'insert') return line.slice(0, i) + s + line.slice(i);
    if (how === 'cut') return line.slice(0, i);
    return line.replace(/"size":\d+/, `"size":${s}`);
  });

const fast = (line: string) => { const b = Buffer.from(line, 'utf8'); return parseObjectLine(b, 0, b.length); };

t.test('a line the fast parser accepts is the record JSON.parse reads', async (t) => {
  let accepted = 0;
  fc.assert(fc.property(fc.oneof(objectArb.map(objectLine), mutated), (line) => {
    const f = fast(line);
    if (f === undefined) return true;
    accepted++;
    return plain(f) === plain(reference(line));
  }), { numRuns: 20_000 });
  t.ok(accepted > 2000, `${accepted} lines took the fast path`);
});

t.test('the writer\'s common lines take the fast path', async (t) => {
  fc.assert(fc.property(objectArb, fc.stringMatching(/^[a-z0-9/_.-]{1,40}$/), fc.stringMatching(/^[0-9a-f]{32}(-[0-9]{1,4})?$/), fc.integer({ min: Date.UTC(1970, 0, 1), max: Date.UTC(2100, 0, 1) }), 
    fc.nat({ max: 1e12 }), (o, key, etag, ms, size) => fast(objectLine({ ...o, key: `p/${key}`, size, storageClass: 'STANDARD', etag: `"${etag}"`, lastModified: new Date(ms), ...(o.versionId !== undefined ? { versionId: key } : {}) })) !== undefined), { numRuns: 2000 });
  t.pass('accepted');
});

t.test('a scan gives the same objects or the same SnapshotError with and without the fast parser', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'line-parser-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const outcome = async (file: string, fastLines: boolean) => {
    const got: string[] = [];
    try {
      await scanSnapshot(file, (o) => { got.push(plain(o)!); }, { fastLines });
      return `ok ${got.join('\n')}`;
    } catch (err) {
      return `${(err as Error).constructor.name}: ${(err as Error).message}`;
    }
  };
  let n = 0;
  let refused = 0;
  await fc.assert(fc.asyncProperty(fc.array(fc.oneof(objectArb.map(objectLine), mutated), { minLength: 1, maxLength: 4 }), async (lines) => {
    const text = [HEADER, ...lines].map((l) => `${l}\n`).join('');
    const sha256 = createHash('sha256').update(text).digest('hex');
    const objs = lines.map(reference);
    const bytes = objs.reduce((s, o) => s + (o?.size ?? 0), 0);
    const file = path.join(dir, `s${n++}.snap`);
    await writeFile(file, `${text}${JSON.stringify({ end: { objects: lines.length, bytes, sha256 } })}\n`);
    const [a, b] = [await outcome(file, true), await outcome(file, false)];
    if (!a.startsWith('ok')) refused++;
    await rm(file);
    return a === b;
  }), { numRuns: 400 });
  t.ok(refused > 20 && refused < 400, `${refused} of 400 files refused (both ways alike)`);
});

/** A line of the common shape (a short ASCII key, an MD5 ETag, a time the shortcut reads), mutated or not: most go the bytes way. */
const simpleLine = fc.record({ k: fc.stringMatching(/^[a-c/.]{0,4}[a-z0-9]{0,6}$/), ms: fc.integer({ min: 0, max: 2 ** 40 }), etag: fc.constantFrom('"0123456789abcdef0123456789abcdef"', '"0123456789abcdef0123456789abcdef-12"', 'W/"x"', '"a\\"b"'), cls: fc.constantFrom('STANDARD', 'GLACIER', 'REDUCED_REDUNDANCY') })
  .map(({ k, ms, etag, cls }) => objectLine({ key: `p/${k}`, size: 3, etag, lastModified: new Date(ms), storageClass: cls }));
const simple = fc.oneof({ weight: 6, arbitrary: simpleLine }, { weight: 1, arbitrary: fc.tuple(simpleLine, fc.nat(), fc.constantFrom('"', '\\', '}', ',', '0', 'é', '\u0000')).map(([l, at, c]) => { const i = at % l.length; return l.slice(0, i) + c + l.slice(i + 1); }) });

/** An ObjectBytes as the ObjectInfo it stands for (the fields scanSnapshot's object path would give). */
const fromBytes = (o: ObjectBytes): ObjectInfo => ({
  key: o.buf.toString('latin1', o.keyStart, o.keyEnd), size: o.size, etag: JSON.parse(`"${o.buf.toString('latin1', o.etagStart, o.etagEnd)}"`) as string,
  lastModified: new Date(o.mtimeMs), storageClass: o.storageClass,
});
const blank = (): ObjectBytes => ({ buf: Buffer.alloc(0), keyStart: 0, keyEnd: 0, size: 0, etagStart: 0, etagEnd: 0, mtimeMs: 0, storageClass: '' });

t.test('parseObjectBytes (decision 0044): a line it accepts is the record JSON.parse reads, with none of the rare fields', async (t) => {
  let accepted = 0;
  fc.assert(fc.property(fc.oneof(simple, objectArb.map(objectLine), mutated), (line) => {
    const b = Buffer.from(`xx${line}yy`, 'utf8');
    const o = blank();
    if (!parseObjectBytes(b, 2, b.length - 2, o)) return true;
    accepted++;
    const ref = reference(line);
    return ref !== undefined && ref.versionId === undefined && ref.archiveStatus === undefined && ref.restored === undefined && plain(fromBytes(o)) === plain(ref)
      && fast(line) !== undefined;
  }), { numRuns: 20_000 });
  t.ok(accepted > 2000, `${accepted} lines read as bytes`);
});

t.test('parseObjectBytes: times of one hour in a row (its shortcut) read as new Date() reads them', async (t) => {
  const hours = [Date.UTC(2024, 0, 1, 5), Date.UTC(1969, 11, 31, 23), Date.UTC(100, 0, 1, 0), Date.UTC(2026, 1, 28, 23), Date.UTC(9999, 11, 28, 23)];
  let declined = 0;
  fc.assert(fc.property(fc.array(fc.tuple(fc.constantFrom(...hours), fc.nat({ max: 3_600_000 + 5000 }), fc.constantFrom('', '', '', ':60.', ':61.', 'T24:')), { minLength: 1, maxLength: 30 }), (times) => {
    for (const [h, off, bad] of times) {
      const iso = new Date(h + off).toISOString();
      // A minute or second out of range, or hour 24: new Date() refuses or rolls over; the parser must decline.
      const text = bad === '' ? iso : bad.startsWith('T') ? iso.replace(/T\d\d:/, bad) : iso.replace(/:\d\d\./, bad);
      const line = `{"key":"p/a","size":1,"etag":"\\"e\\"","lastModified":"${text}","storageClass":"STANDARD"}`;
      const b = Buffer.from(line);
      const o = blank();
      if (!parseObjectBytes(b, 0, b.length, o)) {
        declined++;
        if (bad === '' && new Date(h + off).getUTCDate() <= 28) return false;
        continue;
      }
      if (bad !== '' || o.mtimeMs !== new Date(text).getTime()) return false;
    }
    return true;
  }), { numRuns: 2000 });
  t.ok(declined > 100, `${declined} bad times declined`);
});

t.test('a scan with onBytes gives the same objects or the same SnapshotError as without the fast parser', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'line-bytes-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const outcome = async (file: string, how: 'ref' | 'bytes', decline: (i: number) => boolean) => {
    const got: string[] = [];
    let i = 0;
    try {
      if (how === 'ref') await scanSnapshot(file, (o) => { got.push(plain(o)!); }, { fastLines: false });
      else await scanSnapshot(file, (o) => { got.push(plain(o)!); }, { onBytes: (o) => { if (decline(i++)) return false; got.push(plain(fromBytes(o))!); return true; } });
      return `ok ${got.join('\n')}`;
    } catch (err) {
      return `${(err as Error).constructor.name}: ${(err as Error).message}`;
    }
  };
  let n = 0;
  let refused = 0;
  let bytesRead = 0;
  await fc.assert(fc.asyncProperty(fc.array(fc.oneof({ weight: 8, arbitrary: simple }, { weight: 1, arbitrary: objectArb.map(objectLine) }, { weight: 1, arbitrary: mutated }), { minLength: 1, maxLength: 6 }), fc.nat(), fc.boolean(), async (lines, seed, inOrder) => {
    // Most files in S3 order, so that a scan reaches more than its first lines.
    if (inOrder) lines.sort((x, y) => compareKeys(reference(x)?.key ?? '', reference(y)?.key ?? ''));
    const text = [HEADER, ...lines].map((l) => `${l}\n`).join('');
    const sha256 = createHash('sha256').update(text).digest('hex');
    const bytes = lines.map(reference).reduce((s, o) => s + (o?.size ?? 0), 0);
    const file = path.join(dir, `s${n++}.snap`);
    await writeFile(file, `${text}${JSON.stringify({ end: { objects: lines.length, bytes, sha256 } })}\n`);
    const a = await outcome(file, 'ref', () => false);
    const b = await outcome(file, 'bytes', (i) => { bytesRead++; return ((seed >> (i % 30)) & 1) === 1; });
    if (!a.startsWith('ok')) refused++;
    await rm(file);
    return a === b;
  }), { numRuns: 500 });
  t.ok(refused > 20 && refused < 500, `${refused} of 500 files refused (both ways alike)`);
  t.ok(bytesRead > 300, `${bytesRead} lines offered as bytes`);
});
