#!/usr/bin/env node
// Issue 14 (t14-large): how fast the disk tier's whole-file check at OPEN runs
// (native/src/tier_small.c, sluice_tier_open_verified, as FUSE passthrough calls it), on one
// cache file of SIZE MiB in the page cache, through the mapping and with pread, and the
// CRC32C itself (the CPU's instruction and the portable table, beside @node-rs/crc32).
// Writes the cache file with the addon's own CRC (same layout as src/cache/disk-cache.ts),
// then times ROUNDS checks of each kind in this process. ROOT: a checkout whose native addon
// is built (default this one), to compare builds.
// Usage: node scripts/tier-check-speed.mjs [SIZE_MIB=128] [ROUNDS=12] [ROOT]
import { createRequire } from 'node:module';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const sizeMiB = Number(process.argv[2] ?? 128);
const rounds = Number(process.argv[3] ?? 12);
const root = path.resolve(process.argv[4] ?? path.join(path.dirname(fileURLToPath(import.meta.url)), '..'));
const require = createRequire(path.join(root, 'package.json'));
const addon = require(path.join(root, 'native', 'build', 'Release', 'sluice_native.node'));
const { crc32c } = require('@node-rs/crc32');
const B = 256 * 1024; // DISK_BLOCK_SIZE
const size = sizeMiB * 1024 * 1024;

const dir = mkdtempSync(path.join(os.tmpdir(), 'sluice-check-speed-'));
try {
  const name = randomBytes(32);
  const h = name.toString('hex');
  mkdirSync(path.join(dir, h.slice(0, 2)));
  const data = randomBytes(size);
  writeFileSync(path.join(dir, h.slice(0, 2), h), data);
  const n = Math.ceil(size / B);
  const side = Buffer.alloc(64 + 8 * n);
  side.writeUInt32LE(0x324d4c53, 0); // "SLM2"
  side.writeUInt32LE(B, 4);
  name.copy(side, 16);
  side.writeUInt32LE(crc32c(side.subarray(0, 60)), 60);
  for (let i = 0; i < n; i++) {
    const block = data.subarray(i * B, Math.min(size, (i + 1) * B));
    side.writeUInt32LE(block.length, 64 + 8 * i);
    side.writeUInt32LE(crc32c(block), 68 + 8 * i);
  }
  writeFileSync(path.join(dir, h.slice(0, 2), `${h}.map`), side);

  const gbps = (bytes, ns) => (bytes / ns).toFixed(2);
  const time = (fn) => { const t0 = process.hrtime.bigint(); fn(); return Number(process.hrtime.bigint() - t0); };
  const kinds = addon.tierSetMapped ? [['mapped', true], ['pread', false]] : [['as built', undefined]];
  for (const [kind, mapped] of kinds) {
    if (mapped !== undefined) addon.tierSetMapped(mapped);
    const runs = [];
    for (let r = 0; r < rounds; r++) {
      let fd = -1;
      const ns = time(() => { fd = addon.tierOpenVerified(dir, name, B, size); });
      if (fd < 0) throw new Error(`check failed: ${fd}`);
      closeSync(fd);
      runs.push(gbps(size, ns));
    }
    console.log(`whole-file check, ${kind}, ${sizeMiB} MiB in the page cache: ${runs.join(' ')} GB/s`);
  }
  if (addon.tierSetMapped) addon.tierSetMapped(true);
  const buf = data.subarray(0, Math.min(size, 64 << 20));
  for (const [what, fn] of [['tierCrc32c (instruction)', () => addon.tierCrc32c(buf, false)], ['tierCrc32c (table)', () => addon.tierCrc32c(buf, true)], ['@node-rs/crc32', () => crc32c(buf)]]) {
    fn();
    console.log(`CRC32C, ${what}: ${gbps(buf.length * 4, time(() => { for (let i = 0; i < 4; i++) fn(); }))} GB/s`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
