// What handing a FastFile view to C for getattr costs (src/fuse/adapter.ts listedAttrs, BENCHMARKS.md t14-attrs):
//   npm run build && node scripts/listed-attrs-cost.mjs 1000000
// Walks a fake core of N files in 1,000 folders; prints wall and CPU time and the rows' sizes.
import { listedAttrs } from '../dist/fuse/adapter.js';
const N = Number(process.argv[2] ?? 100000);
const dirs = 1000;
const d = new Date(1_700_000_000_000);
const names = Array.from({ length: N / dirs }, (_, i) => `sample-${String(i).padStart(8, '0')}.jpg`);
const core = { getattr: (p) => (p === '/' || p.split('/').length === 2 ? { mode: 0o40555, size: 4096, mtime: d, nlink: 2, uid: 0, gid: 0 } : { mode: 0o100444, size: 123456, mtime: d, nlink: 1, uid: 0, gid: 0 }),
  readdir: (p) => (p === '/' ? Array.from({ length: dirs }, (_, i) => `shard-${i}`) : names) };
const r0 = process.memoryUsage().rss; const t0 = performance.now(); const c0 = process.cpuUsage();
const rows = await listedAttrs(core);
const c = process.cpuUsage(c0);
console.log(`${rows.count} paths: ${(performance.now() - t0).toFixed(0)} ms wall, ${((c.user + c.system) / 1000).toFixed(0)} ms CPU, rows ${(rows.rows.byteLength / 1e6).toFixed(1)} MB, paths ${(rows.paths.length / 1e6).toFixed(1)} MB, rss +${((process.memoryUsage().rss - r0) / 1e6).toFixed(0)} MB`);
