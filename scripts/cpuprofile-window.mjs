// node scripts/cpuprofile-window.mjs FILE.cpuprofile [WINDOW.json]: self and inclusive busy time by function of a
// node --cpu-prof profile, only samples inside the window ({from, to} in microseconds of CLOCK_MONOTONIC, as
// scripts/tier-small-harness.mjs writes it; process.hrtime and V8's profile clock are both CLOCK_MONOTONIC on Linux).
import { readFileSync } from 'node:fs';
const p = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const win = process.argv[3] ? JSON.parse(readFileSync(process.argv[3], 'utf8')) : { from: 0, to: Infinity };
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const name = (n) => `${n.callFrame.functionName || '(anon)'} ${n.callFrame.url.split('/').slice(-2).join('/')}:${n.callFrame.lineNumber + 1}`;
const stack = (id) => { const s = []; for (let x = id; x !== undefined; x = parent.get(x)) s.push(x); return s; };
let t = p.startTime; let started = false; let total = 0;
const self = new Map(); const incl = new Map();
for (let i = 0; i < p.samples.length; i++) {
  t += p.timeDeltas[i];
  const dt = (p.timeDeltas[i + 1] ?? 0);
  const st = stack(p.samples[i]);
  if (t < win.from || t > win.to) continue;
  const leaf = byId.get(p.samples[i]);
  if (leaf.callFrame.functionName === '(idle)') continue;
  total += dt;
  self.set(name(leaf), (self.get(name(leaf)) ?? 0) + dt);
  for (const k of new Set(st.map((x) => name(byId.get(x))))) incl.set(k, (incl.get(k) ?? 0) + dt);
}
console.log(`busy ms in the window: ${(total / 1000).toFixed(1)}`);
const top = (m, k) => [...m].sort((a, b) => b[1] - a[1]).slice(0, k).map(([n, v]) => `${(v / 1000).toFixed(1).padStart(8)} ms ${(100 * v / total).toFixed(1).padStart(5)}%  ${n}`).join('\n');
console.log('--- self'); console.log(top(self, 40));
console.log('--- inclusive'); console.log(top(incl, 50));
