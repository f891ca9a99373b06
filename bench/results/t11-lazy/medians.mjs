// Medians of the Pipe figures of the ABBA runs in this folder (BENCHMARKS.md "t11-lazy"):
//   node bench/results/t11-lazy/medians.mjs http|https
// Per scenario, profile and build: daemon CPU s/GB per run (all runs of both files of that
// build, in file order), MB/s, × link per file, start-up CPU s, minor faults per GB.
// Medians are the bench's own (dist/bench/stats.js): run `npm run build` first.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const dir = path.dirname(new URL(import.meta.url).pathname);
const { median } = await import(path.join(dir, '../../../dist/bench/stats.js'));

const which = process.argv[2] ?? 'http';
const rows = new Map();
for (const build of ['before', 'after']) {
  for (const f of readdirSync(dir).filter((n) => n.startsWith(`pipe-warm-${which}-${build}-`)).sort()) {
    for (const fg of JSON.parse(readFileSync(path.join(dir, f), 'utf8')).figures) {
      if (fg.target !== 'Pipe') continue;
      const key = `${fg.scenario} ${fg.profile} ${build}`;
      const r = rows.get(key) ?? { cpu: [], mbps: [], startup: [], faults: [], link: [] };
      for (const run of fg.runs) {
        const gb = run.bytes / 1e9;
        r.cpu.push(run.cpuSeconds / gb); r.mbps.push(run.value); r.startup.push(run.startupCpuSeconds); r.faults.push(run.minorFaults / gb);
      }
      r.link.push(fg.fractionOfLimit);
      rows.set(key, r);
    }
  }
}
for (const [key, r] of [...rows].sort(([a], [b]) => a.localeCompare(b))) {
  console.log(`${key}: CPU s/GB ${median(r.cpu).toFixed(2)} (${r.cpu.map((x) => x.toFixed(2)).join(' ')}), ${median(r.mbps).toFixed(0)} MB/s, × link ${r.link.map((x) => `${(100 * x).toFixed(0)}%`).join(' ')}, start-up ${median(r.startup).toFixed(2)} CPU s, ${median(r.faults).toFixed(0)} faults/GB`);
}
