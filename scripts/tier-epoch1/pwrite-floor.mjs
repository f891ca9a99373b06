// What a buffered write costs on this machine against O_DIRECT: 1 GiB in 4 MiB pwrites from one prefaulted
// (2 MiB-aligned) buffer into FILE, truncated first; prints MB/s and this process's user and sys CPU seconds.
// Usage: npm run build; node scripts/tier-epoch1/pwrite-floor.mjs FILE [direct]
import fs from 'node:fs';
const file = process.argv[2]; const direct = process.argv[3] === 'direct';
const { prefaultedAlloc } = await import(new URL('../../dist/native/addon.js', import.meta.url).href);
const buf = prefaultedAlloc()(4 << 20); buf.fill(7);
const fd = fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_CREAT | fs.constants.O_TRUNC | (direct ? fs.constants.O_DIRECT : 0));
const u0 = process.cpuUsage(); const t0 = performance.now();
for (let i = 0; i < 256; i++) fs.writeSync(fd, buf, 0, buf.length, i * buf.length);
const u = process.cpuUsage(u0); const t = (performance.now() - t0) / 1000;
fs.closeSync(fd);
console.log(`${direct ? 'O_DIRECT' : 'buffered'}: ${(1.073741824 / t * 1000).toFixed(0)} MB/s, user ${(u.user / 1e6).toFixed(2)} sys ${(u.system / 1e6).toFixed(2)} s per 1.07 GB`);
