// The Pipe cells of the pipe-order.yaml runs in this folder (BENCHMARKS.md "t11-tlsfloor"):
//   node bench/results/t11-tlsfloor/order-medians.mjs
// Per file, scenario (what ran before each Pipe run) and profile: the new Pipe process's
// daemon CPU s/GB per run and their median, the system share (CPU minus user), and MB/s.
// Medians are the bench's own (dist/bench/stats.js): run `npm run build` first.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const dir = path.dirname(new URL(import.meta.url).pathname);
const { median } = await import(path.join(dir, '../../../dist/bench/stats.js'));

for (const f of readdirSync(dir).filter((n) => /^order-.*\.json$/.test(n)).sort()) {
  console.log(f);
  for (const fg of JSON.parse(readFileSync(path.join(dir, f), 'utf8')).figures) {
    if (fg.target !== 'Pipe') continue;
    const cpu = fg.runs.map((r) => r.cpuSeconds / (r.bytes / 1e9));
    const sys = fg.runs.map((r) => (r.cpuSeconds - r.userCpuSeconds) / (r.bytes / 1e9));
    console.log(`  ${fg.scenario} ${fg.profile}: CPU s/GB ${median(cpu).toFixed(2)} (${cpu.map((x) => x.toFixed(2)).join(' ')}), system ${median(sys).toFixed(2)}, ${median(fg.runs.map((r) => r.value)).toFixed(0)} MB/s`);
  }
}
