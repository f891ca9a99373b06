// The disk tier's lookup of an absent object, alone (issue 14, BENCHMARKS.md t14-batch):
//   node scripts/tier-lookup-bench.mjs DIST
// DiskCache.openWhole of 20,000 absent objects in a loop, through Node's openSync
// (SLUICE_NO_NATIVE=1 while the tier opens) and through the addon's tierOpenPair, twice each
// in turn; prints wall time and CPU (user + sys) per miss. Writes under /var/tmp, removed at the end.
import fs from 'node:fs'; import os from 'node:os'; import path from 'node:path';
const dist = process.argv[2];
const { DiskCache } = await import(path.resolve(dist, 'cache/disk-cache.js'));
const dir = fs.mkdtempSync('/var/tmp/missb-');
for (const mode of ['node', 'addon', 'node', 'addon']) {
  if (mode === 'node') process.env.SLUICE_NO_NATIVE = '1';
  const c = await DiskCache.open({ dir, maxBytes: 1 << 30, writeBytesPerSec: 1 << 30, freeBytes: async () => 1e15 });
  delete process.env.SLUICE_NO_NATIVE;
  const out = Buffer.alloc(40000);
  for (let i = 0; i < 2000; i++) await c.readRange({ ns: 'x', key: `warm${i}`, etag: 'e' }, 0, 40000, out);
  const c0 = process.cpuUsage(); const t0 = performance.now();
  const N = 20000;
  for (let i = 0; i < N; i++) c.openWhole({ ns: 'x', key: `k${mode}${i}`, etag: 'e' }, 40000);
  const c1 = process.cpuUsage(c0);
  console.log(`${mode}: openWhole miss ${((performance.now() - t0) / N * 1000).toFixed(1)} us wall, user ${(c1.user / N).toFixed(1)} + sys ${(c1.system / N).toFixed(1)} us`);
  await c.close();
}
fs.rmSync(dir, { recursive: true });
