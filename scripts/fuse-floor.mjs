/**
 * The fuse-native floor: one file served from one Buffer, the mount options of
 * src/fuse/kernel-mount.ts (ro, kernel_cache, attr/entry/negative timeouts, read_ahead_kb),
 * read with `dd bs=1M` after its pages are dropped (`dd iflag=nocache count=0`), as the
 * "cached" row of bulk-receive-bench.mjs. CPU = utime+stime of the serving process.
 * --direct answers reads as src/fuse/native.ts does (no fuse-native wrapper, sync reply).
 * --sha pipes dd into sha256sum, as bulk-receive-bench.mjs's reader does (it then sets the pace).
 * Usage: node scripts/fuse-floor.mjs [--size MiB] [--rounds N] [--read-ahead-kb K] [--direct] [--sha]
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
const arg = (n, d) => { const i = process.argv.indexOf(n); return i < 0 ? d : Number(process.argv[i + 1]); };
const size = arg('--size', 256) * 1048576, rounds = arg('--rounds', 3), raKb = arg('--read-ahead-kb', 1024), direct = process.argv.includes('--direct'), sha = process.argv.includes('--sha');
if (process.argv[2] === 'serve') { // child: node fuse-floor.mjs serve MNT SIZE DIRECT
  const req = createRequire(import.meta.url), Fuse = req('fuse-native'), data = Buffer.alloc(Number(process.argv[4]), 7);
  const st = (mode, s) => ({ mode, size: s, uid: 0, gid: 0, nlink: 1, mtime: new Date(0), atime: new Date(0), ctime: new Date(0), blksize: 131072, blocks: Math.ceil(s / 512) });
  const read = (p, fd, buf, len, pos) => (pos >= data.length ? 0 : data.copy(buf, 0, pos, Math.min(pos + len, data.length)));
  const ops = { getattr: (p, cb) => (p === '/' ? cb(0, st(0o40555, 0)) : p === '/f' ? cb(0, st(0o100444, data.length)) : cb(-2)),
    readdir: (p, cb) => cb(0, ['f']), open: (p, fl, cb) => cb(0, 1), release: (p, fd, cb) => cb(0), read: (p, fd, buf, len, pos, cb) => cb(read(p, fd, buf, len, pos)) };
  const f = new Fuse(process.argv[3], ops, { timeout: 60000, kernelCache: true, attrTimeout: 60, entryTimeout: 60, fsname: 'floor', subtype: 'floor' });
  f._fuseOptions = ((o) => () => `${o.call(f)},ro,negative_timeout=60`)(f._fuseOptions);
  if (process.argv[5] === '1') { // as src/fuse/native.ts: fuse-native's own binding, synchronous reply
    const idx = req.resolve('fuse-native'), b = createRequire(idx)('node-gyp-build')(path.dirname(idx));
    f._handlers[b.op_read] = (locals, _op, p, fh, buf, len, lo, hi) => b.fuse_native_signal_read(locals, read(p, fh, buf, len, hi * 4294967296 + lo), 0, buf.buffer);
  }
  f.mount((err) => { if (err) { console.error(err.message); process.exit(1); } console.log('ready'); });
  process.on('SIGTERM', () => f.unmount(() => process.exit(0)));
} else {
  const mnt = mkdtempSync(path.join(os.tmpdir(), 'fuse-floor-')), file = path.join(mnt, 'f');
  const child = spawn(process.execPath, [new URL(import.meta.url).pathname, 'serve', mnt, String(size), direct ? '1' : '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const cpu = () => { const s = readFileSync(`/proc/${child.pid}/stat`, 'utf8'), f = s.slice(s.lastIndexOf(')') + 2).split(' '); return (Number(f[11]) + Number(f[12])) / 100; };
  try {
    await new Promise((res, rej) => { child.stdout.on('data', (d) => String(d).includes('ready') && res()); child.on('exit', rej); setTimeout(rej, 30000, new Error('not mounted in 30 s')); });
    const bdi = readFileSync('/proc/self/mountinfo', 'utf8').split('\n').find((l) => l.split(' ')[4] === mnt)?.split(' ')[2];
    if (raKb > 0 && bdi) writeFileSync(`/sys/class/bdi/${bdi}/read_ahead_kb`, `${raKb}\n`);
    spawnSync('dd', [`if=${file}`, 'of=/dev/null', 'bs=1M', 'status=none']); // warm the lookup path
    for (let r = 0; r < rounds; r++) {
      spawnSync('dd', [`if=${file}`, 'iflag=nocache', 'count=0', 'status=none']);
      const c0 = cpu(), t0 = process.hrtime.bigint();
      if (sha) spawnSync('sh', ['-c', `dd if="${file}" bs=1M status=none | sha256sum`]);
      else spawnSync('dd', [`if=${file}`, 'of=/dev/null', 'bs=1M', 'status=none']);
      const secs = Number(process.hrtime.bigint() - t0) / 1e9, c = cpu() - c0;
      console.log(`${direct ? 'direct' : 'wrapper'}${sha ? ' |sha256sum' : ''} ra=${raKb} round ${r + 1}: ${(size / 1e6 / secs).toFixed(0)} MB/s, ${(c / (size / 1e9)).toFixed(2)} CPU s/GB`);
    }
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => (child.exitCode !== null ? r() : (child.on('exit', r), setTimeout(r, 5000))));
    spawnSync('fusermount', ['-u', mnt], { stdio: 'ignore' });
    rmSync(mnt, { recursive: true, force: true });
    console.log(`loadavg ${readFileSync('/proc/loadavg', 'utf8').trim()}`);
  }
}
