#!/usr/bin/env node
/**
 * Summarises a V8 .cpuprofile (node --cpu-prof): share of busy main-thread time in garbage
 * collection, in "(program)" (native code outside JS: syscalls, libuv, FUSE glue), and the
 * functions with the most self time. Busy = all samples but "(idle)".
 * Usage: node scripts/cpu-profile-summary.mjs FILE.cpuprofile [TOP]
 */
import { readFileSync } from 'node:fs';

const [file, topArg] = process.argv.slice(2);
const prof = JSON.parse(readFileSync(file, 'utf8'));
const byId = new Map(prof.nodes.map((n) => [n.id, n]));
const self = new Map();
for (let i = 0; i < prof.samples.length; i++) {
  const n = byId.get(prof.samples[i]);
  const dt = prof.timeDeltas[i] ?? 0;
  const f = n.callFrame;
  const name = `${f.functionName || '(anonymous)'} ${f.url ? f.url.replace(/^.*\/(node_modules\/|dist\/|node:)/, '$1') : ''}${f.url ? `:${f.lineNumber + 1}` : ''}`.trim();
  self.set(name, (self.get(name) ?? 0) + dt);
}
const idle = self.get('(idle)') ?? 0;
const total = [...self.values()].reduce((a, b) => a + b, 0);
const busy = total - idle;
const pct = (x) => `${((100 * x) / busy).toFixed(1)}%`;
console.log(`busy ${(busy / 1e6).toFixed(2)} s of ${(total / 1e6).toFixed(2)} s; GC ${pct(self.get('(garbage collector)') ?? 0)}; (program) ${pct(self.get('(program)') ?? 0)}`);
for (const [name, us] of [...self].filter(([n]) => n !== '(idle)').sort((a, b) => b[1] - a[1]).slice(0, Number(topArg ?? 15))) {
  console.log(`${pct(us).padStart(6)}  ${name}`);
}
