// What a buffered write costs on this machine against O_DIRECT, and O_DIRECT with the disk tier's
// read-back (native readBack: the range mapped, MADV_HUGEPAGE, MADV_POPULATE_READ): 1 GiB in 4 MiB
// pwrites from one prefaulted (2 MiB-aligned) buffer into FILE, truncated first. Prints MB/s and this
// process's user and sys CPU seconds for the writes (with the read-back, until the pages are in), the
// bytes then in the page cache (fincore), and one read(2) pass over the file in 1 MiB reads (MB/s,
// CPU): what the next epoch pays for the pages each way.
// Usage: npm run build; node scripts/tier-epoch1/pwrite-floor.mjs FILE [buffered|direct|readback]
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
const file = process.argv[2]; const mode = process.argv[3] ?? 'buffered';
if (!['buffered', 'direct', 'readback'].includes(mode)) throw new Error(`unknown mode ${mode}`);
const direct = mode !== 'buffered';
const { prefaultedAlloc, readBackOp } = await import(new URL('../../dist/pipe/native.js', import.meta.url).href);
const readBack = mode === 'readback' ? readBackOp() : undefined;
if (mode === 'readback' && !readBack) throw new Error('the native addon (with readBack) is not built: npm run build:native');
const buf = prefaultedAlloc()(4 << 20); buf.fill(7);
const fd = fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_CREAT | fs.constants.O_TRUNC | (direct ? fs.constants.O_DIRECT : 0));
const u0 = process.cpuUsage(); const t0 = performance.now();
for (let i = 0; i < 256; i++) {
  fs.writeSync(fd, buf, 0, buf.length, i * buf.length);
  if (readBack) {
    const err = await readBack(fd, i * buf.length, buf.length);
    if (err !== 0) throw new Error(`readBack: errno ${err}`);
  }
}
const u = process.cpuUsage(u0); const t = (performance.now() - t0) / 1000;
fs.closeSync(fd);
const resident = Number(execFileSync('fincore', ['--bytes', '--noheadings', '--output', 'RES', file], { encoding: 'utf8' }).trim());
const rfd = fs.openSync(file, fs.constants.O_RDONLY); const rbuf = Buffer.alloc(1 << 20);
const r0 = process.cpuUsage(); const rt0 = performance.now();
let pos = 0;
for (let n; (n = fs.readSync(rfd, rbuf, 0, rbuf.length, pos)) > 0;) pos += n;
const ru = process.cpuUsage(r0); const rt = (performance.now() - rt0) / 1000;
fs.closeSync(rfd);
console.log(`${mode}: ${(1.073741824 / t * 1000).toFixed(0)} MB/s, user ${(u.user / 1e6).toFixed(2)} sys ${(u.system / 1e6).toFixed(2)} s per 1.07 GB; `
  + `${(resident / 2 ** 20).toFixed(0)} MiB in the page cache; read back ${(pos / 1e6 / rt).toFixed(0)} MB/s, ${((ru.user + ru.system) / 1e6).toFixed(2)} CPU s`);
