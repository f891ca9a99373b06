// The disk tier's write path for small objects, alone (issue 14, BENCHMARKS.md t14-small-write):
//   node scripts/tier-write-bench.mjs tier DIST [N=800] [SIZE=40000]   DiskCache.writeRun of N objects, then flush
//   node scripts/tier-write-bench.mjs floor [N=800] [SIZE=40000]       the same files made with bare sync syscalls in a row
// Prints wall time and CPU (user + sys) per object. Both write under /var/tmp (a disk, as a tier
// would be), into a fresh folder removed at the end. Compare the two in one run, alternating:
// ext4's inode allocation cost moves with the filesystem's recent deletions.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

const [mode, ...rest] = process.argv.slice(2);
const dist = mode === 'tier' ? rest.shift() : undefined;
const N = Number(rest[0] ?? 800);
const SIZE = Number(rest[1] ?? 40000);
const bodies = Array.from({ length: N }, () => crypto.randomBytes(SIZE));
const dir = fs.mkdtempSync('/var/tmp/sluice-tier-write-');
const report = (what, c, t) => console.log(`${what}: ${N} objects of ${SIZE} B: ${(t / N * 1000).toFixed(0)} us wall, user ${(c.user / N).toFixed(0)} + sys ${(c.system / N).toFixed(0)} us CPU per object`);
try {
  if (mode === 'tier') {
    const { DiskCache } = await import(path.resolve(dist, 'cache', 'disk-cache.js'));
    const c = await DiskCache.open({ dir, maxBytes: 8 * 2 ** 30, writeBytesPerSec: 1024 * 2 ** 20, freeBytes: async () => 1e15 });
    const c0 = process.cpuUsage(), t0 = performance.now();
    for (let i = 0; i < N; i++) c.writeRun({ ns: 'http://bench\0bucket', key: `k/${i}`, etag: '"e"', index: 0 }, bodies[i]);
    await c.flush();
    report(`tier (${dist})`, process.cpuUsage(c0), performance.now() - t0);
    if (c.stats.written !== N) console.log(`only ${c.stats.written} written, ${c.stats.skipped} skipped`);
    await c.close();
  } else if (mode === 'floor') {
    for (let i = 0; i < 256; i++) fs.mkdirSync(path.join(dir, i.toString(16).padStart(2, '0')));
    const side = Buffer.alloc(72, 1);
    const c0 = process.cpuUsage(), t0 = performance.now();
    for (let i = 0; i < N; i++) {
      const h = crypto.createHash('sha256').update(String(i)).digest('hex');
      const f = path.join(dir, h.slice(0, 2), h);
      const d = fs.openSync(f, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o644);
      const m = fs.openSync(`${f}.map`, fs.constants.O_RDWR | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o644);
      fs.writeSync(d, bodies[i], 0, SIZE, 0);
      fs.writeSync(m, side, 0, side.length, 0);
      fs.closeSync(d);
      fs.closeSync(m);
    }
    report('floor', process.cpuUsage(c0), performance.now() - t0);
  } else {
    console.error('usage: node scripts/tier-write-bench.mjs tier DIST [N] [SIZE] | floor [N] [SIZE]');
    process.exitCode = 2;
  }
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
