#!/usr/bin/env node
// What new memory costs on this machine, for reading `sluice bench` figures (BENCHMARKS.md
// "t14-folio"). On a VM that hands free memory back to its host (virtio-balloon free page
// reporting: see /sys/module/page_reporting), the first write to a page the host took back
// costs a host fault, and which pages a write gets depends on how large a block it asks for.
// Three probes, each printed with wall time and this process's sys CPU:
//  1. slabs: 8 MiB receive slabs from the addon's allocPrefaulted (what a fresh daemon or a
//     File-mode process touches first), ms per slab.
//  2. writes: ROUNDS rounds of SIZE MiB buffered pwrites into a new file in 4 MiB pieces,
//     then in 128 KiB pieces, each file deleted and IDLE s waited before the next.
//  3. cold reads: the same file written each way, flushed, its pages evicted (dd
//     iflag=nocache), read back with 1 MiB reads 1 s later.
// Usage: npm run build; node scripts/vm-memory-probe.mjs [SIZE_MIB=512] [ROUNDS=3] [IDLE_S=3] [DIR=/tmp]
import { closeSync, fdatasyncSync, openSync, readSync, unlinkSync, writeSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const sizeMiB = Number(process.argv[2] ?? 512);
const rounds = Number(process.argv[3] ?? 3);
const idleS = Number(process.argv[4] ?? 3);
const dir = process.argv[5] ?? '/tmp';
const size = sizeMiB * 1024 * 1024;
const { prefaultedAlloc } = await import(new URL('../dist/native/addon.js', import.meta.url).href);
const sleep = (s) => new Promise((r) => setTimeout(r, s * 1000));
const timed = (fn) => {
  const u0 = process.cpuUsage();
  const t0 = performance.now();
  fn();
  return { s: (performance.now() - t0) / 1000, sys: process.cpuUsage(u0).system / 1e6 };
};
const perGiB = (x) => (x * 1073741824) / size;

// 1. Slabs, kept (as a pool keeps them) so every one is new memory.
const alloc = prefaultedAlloc();
const slabs = [];
const ms = [];
for (let i = 0; i < 16; i++) ms.push(timed(() => slabs.push(alloc(8 << 20))).s * 1000);
console.log(`slabs: 16 x 8 MiB from allocPrefaulted, ms each: ${ms.map((m) => m.toFixed(1)).join(' ')}`);
const src = slabs[0].subarray(0, 4 << 20).fill(7);
slabs.length = 0;

const file = path.join(dir, `sluice-vm-memory-probe-${process.pid}`);
const writeFile = (piece) => {
  const fd = openSync(file, 'w');
  try {
    for (let at = 0; at < size; at += piece) writeSync(fd, src, 0, Math.min(piece, size - at), at);
    fdatasyncSync(fd);
  } finally {
    closeSync(fd);
  }
};
const pieces = [4 << 20, 128 << 10];
const name = (p) => (p >= 1 << 20 ? `${p >> 20} MiB` : `${p >> 10} KiB`);

// 2. Buffered writes, memory recycled between rounds.
for (let r = 1; r <= rounds; r++) {
  for (const piece of pieces) {
    const t = timed(() => writeFile(piece));
    console.log(`writes: round ${r}, ${sizeMiB} MiB in ${name(piece)} pwrites: ${(size / 1e6 / t.s).toFixed(0)} MB/s, ${perGiB(t.sys).toFixed(2)} sys s/GiB`);
    unlinkSync(file);
    await sleep(idleS);
  }
}

// 3. Cold reads of a file whose pages were just evicted.
const buf = Buffer.allocUnsafe(1 << 20);
for (let r = 1; r <= rounds; r++) {
  for (const piece of pieces) {
    writeFile(piece);
    spawnSync('dd', [`if=${file}`, 'iflag=nocache', 'count=0'], { stdio: 'ignore' });
    await sleep(1);
    const fd = openSync(file, 'r');
    const t = timed(() => {
      for (let at = 0; at < size; ) at += readSync(fd, buf, 0, buf.length, at);
    });
    closeSync(fd);
    unlinkSync(file);
    console.log(`cold read: round ${r}, written in ${name(piece)} pwrites: ${(size / 1e6 / t.s).toFixed(0)} MB/s, ${perGiB(t.sys).toFixed(2)} sys s/GiB`);
    await sleep(idleS);
  }
}
