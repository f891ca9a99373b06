import { compareKeys, listAll, type ListPageFn } from './src/s3/lister.js';
const keys: string[] = [];
for (let f = 0; f < 1000; f++) for (let i = 0; i < 100; i++) keys.push(`train/class-${String(f).padStart(4, '0')}/img-${i}.jpg`);
const sorted = keys.sort(compareKeys);
const lowerBound = (s: string) => { let lo = 0, hi = sorted.length; while (lo < hi) { const m = (lo + hi) >> 1; if (compareKeys(sorted[m]!, s) <= 0) lo = m + 1; else hi = m; } return lo; };
let calls = 0;
const page: ListPageFn = async (q) => {
  calls++;
  await new Promise((r) => setTimeout(r, 30));
  let i = q.continuationToken ? Number(q.continuationToken) : lowerBound(q.startAfter ?? q.prefix);
  if (!q.continuationToken && !q.startAfter) i = lowerBound(q.prefix) ; 
  while (i > 0 && sorted[i - 1]!.startsWith(q.prefix) && !q.continuationToken && !q.startAfter) i--;
  const objects = []; const prefixes: string[] = [];
  for (; i < sorted.length; i++) {
    const k = sorted[i]!;
    if (!k.startsWith(q.prefix)) { if (compareKeys(k, q.prefix) > 0) break; continue; }
    if (objects.length + prefixes.length === 1000) return { objects, prefixes, nextToken: String(i) };
    const d = q.delimiter ? k.indexOf('/', q.prefix.length) : -1;
    if (d >= 0) { const cp = k.slice(0, d + 1); prefixes.push(cp); while (i + 1 < sorted.length && sorted[i + 1]!.startsWith(cp)) i++; continue; }
    objects.push({ key: k, size: 1, etag: '', lastModified: new Date(0) });
  }
  return { objects, prefixes };
};
for (const c of [1, 16]) {
  calls = 0; const t0 = Date.now(); let n = 0; const seen = new Set<string>();
  for await (const o of listAll('train/', page, { concurrency: c })) { n++; seen.add(o.key); }
  console.log(`concurrency ${c}: ${n} keys (${seen.size} unique), ${calls} pages, ${Date.now() - t0} ms (30 ms per page)`);
}
