/**
 * The parallel lister against an in-memory model of ListObjectsV2 (S3's semantics:
 * UTF-8 byte order, StartAfter, Delimiter with CommonPrefixes, continuation tokens),
 * including a model that reports folders wrongly, as s3rver does.
 */
import t from 'tap';
import fc from 'fast-check';
import { compareKeys, discoverBoundaries, justBefore, listAll, midKey, type ListPageFn } from '../../src/s3/lister.js';
import type { ObjectInfo } from '../../src/s3/object-client.js';
import { AbortedError } from '../../src/errors.js';

function info(key: string): ObjectInfo {
  return { key, size: key.length, etag: '"e"', lastModified: new Date(0) };
}

/** An in-memory ListObjectsV2. `lie` drops every other folder and invents an empty one. */
function model(keys: string[], pageSize: number, opts: { lie?: boolean; failOnCall?: number } = {}) {
  const sorted = [...new Set(keys)].sort(compareKeys);
  const stats = { calls: 0 };
  const page: ListPageFn = async (q, signal) => {
    stats.calls++;
    if (signal?.aborted) throw new AbortedError();
    if (opts.failOnCall === stats.calls) throw new Error('injected failure');
    await new Promise((r) => setImmediate(r));
    let i = q.continuationToken !== undefined ? Number(q.continuationToken) : 0;
    const objects: ObjectInfo[] = [];
    const prefixes: string[] = [];
    while (i < sorted.length) {
      const k = sorted[i]!;
      if (!k.startsWith(q.prefix) || (q.continuationToken === undefined && q.startAfter !== undefined && compareKeys(k, q.startAfter) <= 0)) { i++; continue; }
      if (objects.length + prefixes.length === pageSize) return { objects, prefixes: lie(prefixes, q.prefix), nextToken: String(i) };
      const d = q.delimiter ? k.indexOf(q.delimiter, q.prefix.length) : -1;
      if (d >= 0) {
        const cp = k.slice(0, d + 1);
        prefixes.push(cp);
        while (i < sorted.length && sorted[i]!.startsWith(cp)) i++;
        continue;
      }
      objects.push(info(k));
      i++;
    }
    return { objects, prefixes: lie(prefixes, q.prefix) };
  };
  const lie = (prefixes: string[], prefix: string) => (opts.lie ? [...prefixes.filter((_, j) => j % 2 === 1), `${prefix}zz-none/`] : prefixes);
  return { page, stats, sorted };
}

async function collect(it: AsyncIterable<ObjectInfo>): Promise<string[]> {
  const out: string[] = [];
  for await (const o of it) out.push(o.key);
  return out;
}

function tree(): string[] {
  const keys: string[] = [];
  for (let a = 0; a < 5; a++) for (let b = 0; b < 20; b++) for (let c = 0; c < 7; c++) keys.push(`root/a${a}/b${String(b).padStart(2, '0')}/f${c}.bin`);
  keys.push('root/top.txt', 'root/a1.txt', 'root/a1-x/y', 'root/a1/', 'other/x', 'root', 'rootless');
  return keys;
}

t.test('every key of a tree exactly once, parallel and flat', async (t) => {
  for (const concurrency of [1, 2, 16]) {
    for (const pageSize of [3, 1000]) {
      const m = model(tree(), pageSize);
      const got = await collect(listAll('root/', m.page, { concurrency }));
      t.same([...got].sort(compareKeys), m.sorted.filter((k) => k.startsWith('root/')), `concurrency ${concurrency}, pages of ${pageSize}`);
    }
  }
});

t.test('splits a wide tree into parallel ranges', async (t) => {
  const m = model(tree(), 1000);
  const bounds = await discoverBoundaries('root/', m.page, 64, 16);
  t.ok(bounds.length > 5, `found ${bounds.length} boundaries`);
  t.same(bounds, [...bounds].sort(compareKeys), 'sorted');
  t.ok(bounds.every((b) => b.startsWith('root/')), 'under the prefix');
});

t.test('a server that reports folders wrongly changes the parts, not the result', async (t) => {
  const m = model(tree(), 4, { lie: true });
  const got = await collect(listAll('root/', m.page, { concurrency: 8 }));
  t.same([...got].sort(compareKeys), m.sorted.filter((k) => k.startsWith('root/')));
});

t.test('property: exactly once for arbitrary keys, prefixes, page sizes and concurrency', async (t) => {
  const segment = fc.string({ unit: fc.constantFrom('a', 'b', 'z', '0', '5', '9', '.', ' ', '-', 'é', '日', '😀', '\u{E000}'), minLength: 1, maxLength: 3 });
  const key = fc.array(segment, { minLength: 1, maxLength: 4 }).chain((segs) => fc.boolean().map((folder) => segs.join('/') + (folder ? '/' : '')));
  await fc.assert(fc.asyncProperty(
    fc.array(key, { maxLength: 60 }), fc.constantFrom(1, 2, 3, 1000), fc.constantFrom(1, 2, 4, 16), fc.nat(), fc.boolean(),
    async (keys, pageSize, concurrency, pick, lie) => {
      const prefix = keys.length === 0 ? '' : keys[pick % keys.length]!.slice(0, pick % 4);
      const m = model(keys, pageSize, { lie });
      const got = await collect(listAll(prefix, m.page, { concurrency }));
      const want = m.sorted.filter((k) => k.startsWith(prefix));
      return got.length === want.length && [...got].sort(compareKeys).every((k, i) => k === want[i]);
    },
  ), { numRuns: 300 });
  t.pass('held for 300 random trees');
});

t.test('a failing page rejects the listing', async (t) => {
  for (const failOnCall of [1, 3, 8]) {
    const m = model(tree(), 5, { failOnCall });
    await t.rejects(collect(listAll('root/', m.page, { concurrency: 4 })), /injected failure/, `call ${failOnCall}`);
  }
});

t.test('breaking out early stops the workers; an abort rejects', async (t) => {
  const m = model(tree(), 2);
  let n = 0;
  for await (const _ of listAll('root/', m.page, { concurrency: 4 })) if (++n === 3) break;
  const calls = m.stats.calls;
  await new Promise((r) => setTimeout(r, 20));
  t.equal(m.stats.calls, calls, 'no more pages after the consumer stopped');
  const ctrl = new AbortController();
  ctrl.abort();
  await t.rejects(collect(listAll('root/', model(tree(), 2).page, { concurrency: 4, signal: ctrl.signal })), AbortedError);
});

t.test('compareKeys is UTF-8 byte order', async (t) => {
  t.ok(compareKeys('\u{E000}', '😀') < 0, 'BMP private use before astral (JS order says the opposite)');
  t.ok('\u{E000}' > '😀', 'JS order differs');
  t.ok(compareKeys('a/', 'a.') > 0);
  t.equal(compareKeys('x', 'x'), 0);
  const ch = fc.constantFrom('a', 'z', '/', ' ', 'é', '\u07ff', '\u0800', '\ud7ff', '\ue000', '\uffff', '😀', '\u{10ffff}', '\u{10000}');
  fc.assert(fc.property(fc.string({ unit: ch, maxLength: 5 }), fc.string({ unit: ch, maxLength: 5 }), (a, b) =>
    Math.sign(compareKeys(a, b)) === Math.sign(Buffer.compare(Buffer.from(a), Buffer.from(b)))), { numRuns: 2000 });
  t.pass('agrees with Buffer.compare of the UTF-8 bytes');
});

t.test('a range ends on a page\'s lastKey even when the page returns no object past it (versions pages)', async (t) => {
  // Keys under p/b/ are "deleted": a versions page covers them (delete markers) but returns
  // no object. Without lastKey, the range [p/a/, p/b/) would read through all of them.
  const keys = [...Array.from({ length: 10 }, (_, i) => `p/a/${i}`), ...Array.from({ length: 100 }, (_, i) => `p/b/${String(i).padStart(3, '0')}`), 'p/c/0'];
  const hidden = (k: string) => k.startsWith('p/b/');
  const run = async (reportLast: boolean) => {
    const m = model(keys, 5);
    const page: ListPageFn = async (q, signal) => {
      const pg = await m.page(q, signal);
      const last = pg.objects.at(-1)?.key;
      return { ...pg, objects: pg.objects.filter((o) => !hidden(o.key)), ...(reportLast && last !== undefined ? { lastKey: last } : {}) };
    };
    const got = await collect(listAll('p/', page, { concurrency: 4 }));
    return { got: got.sort(compareKeys), calls: m.stats.calls };
  };
  const withLast = await run(true);
  const without = await run(false);
  t.same(withLast.got, keys.filter((k) => !hidden(k)), 'every visible key exactly once');
  t.same(without.got, withLast.got);
  t.ok(withLast.calls + 15 <= without.calls, `the range stopped at the first page past its end (${withLast.calls} requests, ${without.calls} without lastKey)`);
});

t.test('midKey is strictly between its bounds; justBefore is below its key', async (t) => {
  const ch = fc.constantFrom('a', 'z', '0', '1', '9', '/', ' ', 'é', '\ue000', '\uffff', '😀', '\u{10ffff}');
  fc.assert(fc.property(fc.string({ unit: ch, maxLength: 6 }), fc.option(fc.string({ unit: ch, maxLength: 6 })), (last, hi) => {
    const m = midKey(last, hi ?? undefined);
    if (m === undefined) return hi !== null && (compareKeys(last, hi) >= 0 || hi === last + "\0");
    return compareKeys(m, last) > 0 && (hi === null || compareKeys(m, hi) < 0);
  }), { numRuns: 3000 });
  fc.assert(fc.property(fc.string({ unit: ch, minLength: 1, maxLength: 6 }), (s) => compareKeys(justBefore(s), s) < 0), { numRuns: 2000 });
  t.equal(midKey('o0000999', 'o1'), 'o05', 'digits split within the digits');
  // With the page's first key: cut where the next pages vary (one place before the page's own variation).
  fc.assert(fc.property(fc.string({ unit: ch, maxLength: 6 }), fc.string({ unit: ch, maxLength: 6 }), fc.option(fc.string({ unit: ch, maxLength: 6 })), (a, b, hi) => {
    const [first, last] = compareKeys(a, b) <= 0 ? [a, b] : [b, a];
    const m = midKey(last, hi ?? undefined, first);
    if (m === undefined) return hi !== null && (compareKeys(last, hi) >= 0 || hi === last + "\0");
    return compareKeys(m, last) > 0 && (hi === null || compareKeys(m, hi) < 0);
  }), { numRuns: 3000 });
  t.equal(midKey('o0999', undefined, 'o0000'), 'o5', 'an open end: the middle of the place before the page varies, not a key far out');
  t.equal(midKey('o1999', 'o5', 'o1000'), 'o3', 'a near end: the first difference with it');
  t.equal(midKey('o0999', undefined), 'u', 'without the first key: the old guess (for comparison)');
  t.equal(justBefore('f05'), 'f04\u{10ffff}');
  t.pass('held');
});

t.test('a flat prefix (no folders) is listed by several workers at once, each key once', async (t) => {
  const keys = Array.from({ length: 3000 }, (_, i) => `flat/o${String(i).padStart(5, '0')}`);
  const m = model(keys, 20);
  let inflight = 0;
  let peak = 0;
  const page: ListPageFn = async (q, s) => {
    inflight++; peak = Math.max(peak, inflight);
    try { return await m.page(q, s); } finally { inflight--; }
  };
  const got = await collect(listAll('flat/', page, { concurrency: 8 }));
  t.same(got.sort(compareKeys), keys, 'every key exactly once');
  t.ok(peak >= 4, `pages in flight at once: ${peak}`);
  t.ok(m.stats.calls < 3000 / 20 * 1.5, `${m.stats.calls} requests for ${3000 / 20} pages of keys`);
});

t.test('a prefix with more folders than a page names: its tail is split too', async (t) => {
  const keys: string[] = [];
  for (let f = 0; f < 200; f++) for (let o = 0; o < 10; o++) keys.push(`d/f${String(f).padStart(4, '0')}/o${o}`);
  const m = model(keys, 25); // the first delimiter page names 25 of the 200 folders
  let inflight = 0;
  let peakLate = 0;
  let seen = 0;
  const page: ListPageFn = async (q, s) => {
    inflight++;
    if (seen > 1000) peakLate = Math.max(peakLate, inflight);
    try { const pg = await m.page(q, s); seen += pg.objects.length; return pg; } finally { inflight--; }
  };
  const got = await collect(listAll('d/', page, { concurrency: 8 }));
  t.same(got.sort(compareKeys), keys, 'every key exactly once');
  t.ok(peakLate >= 3, `pages in flight once half the keys were seen: ${peakLate}`);
});
