#!/usr/bin/env node
// Issue 46: how fast scanSnapshot reads (inflates, hashes, parses and checks) a snapshot file.
// Prints one JSON line per pass: objects, wall and CPU seconds, objects per CPU second; with
// `both`, alternates the fast line parser and JSON.parse-only (fastLines: false) in one process.
// Uses the built dist/ (npm run build). Files: node test/helpers/snapshot-roundtrip.mjs writes them.
// Usage: node test/helpers/snapshot-read.mjs FILE [fast|json|both=both] [PASSES=2]
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const [file, mode = 'both', passes = '2'] = process.argv.slice(2);
if (!file) throw new Error('usage: snapshot-read.mjs FILE [fast|json|both] [PASSES]');
const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const { scanSnapshot } = await import(path.join(root, 'dist', 'snapshot', 'snapshot.js'));
const modes = mode === 'both' ? ['json', 'fast'] : [mode];
for (let i = 0; i < Number(passes); i++) {
  for (const m of modes) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    let n = 0;
    await scanSnapshot(file, () => { n++; }, { fastLines: m === 'fast' });
    const s = (performance.now() - t0) / 1000;
    const u = process.cpuUsage(c0);
    const cpu = (u.user + u.system) / 1e6;
    process.stdout.write(JSON.stringify({ file: path.basename(file), parser: m, objects: n, seconds: +s.toFixed(2), cpuSeconds: +cpu.toFixed(2), objectsPerCpuSecond: Math.round(n / cpu), objectsPerSecond: Math.round(n / s) }) + '\n');
  }
}
