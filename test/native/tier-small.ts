/**
 * The disk tier's small-file reader in C (native/src/tier_small.c), which libfuse's thread
 * uses to answer OPENs: against cache files written by src/cache/disk-cache.ts, it returns
 * exactly the object's bytes, and refuses (never returns bytes) for every fault DiskCache
 * itself refuses: a flipped data byte, a short data file, a wrong or zeroed entry, a damaged
 * or foreign sidecar header, a missing file. Its CRC32C equals @node-rs/crc32's, on the CPU's
 * instruction and on the portable table. Its batch writer of small objects (tierWriteSmall)
 * writes what DiskCache and this reader read back, and never writes over a damaged sidecar.
 */
import { existsSync } from 'node:fs';
import { closeSync, fstatSync, readSync } from 'node:fs';
import { copyFile, mkdtemp, readFile, rm, stat, truncate, unlink, utimes, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { crc32c } from '@node-rs/crc32';
import t from 'tap';
import type { Test } from '../helpers/tap.js';
import { DiskCache } from '../../src/cache/disk-cache.js';
import { DISK_BLOCK_SIZE, objectName, TIER_FOLDER } from '../../src/cache/tier-layout.js';
import { patternBytes } from '../helpers/fake-client.js';

const B = DISK_BLOCK_SIZE;
const MiB = 1024 * 1024;
const NS = 'http://fake\0bucket';
const EBADMSG = -74;
const ENOENT = -2;
const BUILT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'native', 'build', 'Release', 'sluice_native.node');

interface TierAddon {
  tierOpenVerified(objectsDir: string, name: Buffer, blockSize: number, size: number): number;
  tierCrc32c(bytes: Buffer, portable: boolean): number;
  tierReadSmall(objectsDir: string, name: Buffer, blockSize: number, size: number): Buffer | number;
  tierSetMapped(on: boolean): void;
  tierShrinkAfterMap(path: string, size: number): void;
  tierWriteSmall(objectsDir: string, blockSize: number, names: Buffer, bytes: Buffer[], crcs: Uint32Array): Promise<Int32Array>;
}
const addon = existsSync(BUILT) ? (createRequire(import.meta.url)(BUILT) as Partial<TierAddon>) : undefined;
const skip = addon?.tierReadSmall ? false : 'native addon not built (npm run build:native)';

/** A disk tier in a folder of its own, closed and removed at the test's end, and the folder of its cache files. */
async function tierIn(t: Test): Promise<{ c: DiskCache; objects: string }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-tier-small-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const c = await DiskCache.open({ dir, maxBytes: 1024 * MiB, writeBytesPerSec: 4096 * MiB, freeBytes: async () => 1e15 });
  t.teardown(() => c.close());
  return { c, objects: path.join(dir, TIER_FOLDER, 'objects') };
}

t.test('CRC32C in C equals @node-rs/crc32 (instruction and table), at every length and alignment', { skip }, async (t) => {
  const a = addon as TierAddon;
  const big = patternBytes(3 * DISK_BLOCK_SIZE, 99);
  let bad = 0;
  let cases = 0;
  for (const portable of [false, true]) {
    for (let len = 0; len <= 300; len++) {
      for (const off of [0, 1, 3, 7]) {
        const b = big.subarray(off, off + len);
        cases++;
        if (a.tierCrc32c(b, portable) !== crc32c(b)) bad++;
      }
    }
    // Around the instruction path's rounds of three 4 KiB lanes (12 KiB), and a block's 21 rounds and 4 KiB.
    const lane = 4096;
    for (const len of [lane, 3 * lane - 1, 3 * lane, 3 * lane + 1, 3 * lane + 8, 6 * lane - 1, 6 * lane, 6 * lane + 7, 40_000, B - 1, B, B + 1, 3 * B - 9]) {
      for (const off of [0, 5]) {
        const b = big.subarray(off, off + len);
        cases++;
        if (a.tierCrc32c(b, portable) !== crc32c(b)) bad++;
      }
    }
  }
  t.equal(bad, 0, `${cases} buffers, same CRC`);
  t.equal(a.tierCrc32c(Buffer.from('123456789'), false), 0xe3069283, 'the check value of CRC-32C');
});

t.test('reads what DiskCache wrote, and refuses every damaged or foreign file', { skip }, async (t) => {
  const a = addon as TierAddon;
  const { c, objects } = await tierIn(t);
  const sizes = [1, 4095, 4096, 40_000, B - 1, B];
  const bodies = new Map<number, Buffer>();
  for (const size of sizes) {
    const body = patternBytes(size, size);
    bodies.set(size, body);
    c.write({ ns: NS, key: `k${size}`, etag: '"e"', index: 0 }, body);
  }
  await c.flush();
  t.equal(c.objectsFolder, path.resolve(objects), 'objectsFolder is where the cache files are');
  const nameOf = (size: number) => objectName({ ns: NS, key: `k${size}`, etag: '"e"' });
  const read = (size: number, asked = size) => a.tierReadSmall(objects, Buffer.from(nameOf(size), 'hex'), B, asked);
  const fileOf = (size: number) => path.join(objects, nameOf(size).slice(0, 2), nameOf(size));

  for (const size of sizes) {
    const got = read(size);
    t.ok(Buffer.isBuffer(got) && got.equals(bodies.get(size)!), `${size} bytes: the object's bytes`);
  }

  // A hit makes the object recent: the sidecar's mtime is the LRU age.
  const old = new Date(Date.now() - 3600_000);
  await utimes(`${fileOf(40_000)}.map`, old, old);
  read(40_000);
  t.ok((await stat(`${fileOf(40_000)}.map`)).mtimeMs > Date.now() - 60_000, 'a read touches the sidecar');

  t.equal(read(40_000, 39_999), EBADMSG, 'an entry that does not hold exactly the size asked: refused');
  t.equal(read(4095, 4096), EBADMSG, 'a size larger than stored: refused');
  t.equal(a.tierReadSmall(objects, Buffer.alloc(32, 7), B, 100), ENOENT, 'no such cache file: ENOENT');
  t.equal(a.tierReadSmall(objects, Buffer.from(nameOf(4096), 'hex'), B * 2, 4096), EBADMSG, 'another block size in the header: refused');

  // A flipped data byte.
  const data = await readFile(fileOf(40_000));
  data[12_345]! ^= 0x01;
  await writeFile(fileOf(40_000), data);
  t.equal(read(40_000), EBADMSG, 'one flipped bit in the bytes: refused (CRC)');

  // A data file cut short.
  await truncate(fileOf(4096), 4000);
  t.equal(read(4096), EBADMSG, 'a short data file: refused');

  // The entry zeroed (what DiskCache does to a bad block).
  const map = await readFile(`${fileOf(B)}.map`);
  map.fill(0, 64, 72);
  await writeFile(`${fileOf(B)}.map`, map);
  t.equal(read(B), EBADMSG, 'an absent entry: refused');

  // A damaged header, and a sidecar of another object in place of this one's.
  const map2 = await readFile(`${fileOf(B - 1)}.map`);
  map2[20]! ^= 0x80;
  await writeFile(`${fileOf(B - 1)}.map`, map2);
  t.equal(read(B - 1), EBADMSG, 'a header that fails its CRC: refused');
  await copyFile(`${fileOf(1)}.map`, `${fileOf(4095)}.map`);
  t.equal(read(4095), EBADMSG, 'another object\'s sidecar: refused (its name is not this one\'s)');

  // Sidecar present, data file gone.
  await unlink(fileOf(1));
  t.equal(read(1), ENOENT, 'a sidecar without its data file: ENOENT');
});

t.test('a file of many blocks, checked whole for passthrough: its descriptor when every block is right, refused otherwise', { skip }, async (t) => {
  const a = addon as TierAddon;
  const { c, objects } = await tierIn(t);
  // 1 MiB + 5 blocks and a bit: one full check chunk, a partial one, a short last block.
  const sizes = [B + 1, 3 * B, 9 * B + 12_345];
  for (const size of sizes) {
    const body = patternBytes(size, size + 1);
    for (let k = 0; k * B < size; k++) c.write({ ns: NS, key: `v${size}`, etag: '"e"', index: k }, body.subarray(k * B, Math.min(size, (k + 1) * B)));
  }
  await c.flush();
  const nameOf = (size: number) => objectName({ ns: NS, key: `v${size}`, etag: '"e"' });
  const fileOf = (size: number) => path.join(objects, nameOf(size).slice(0, 2), nameOf(size));
  const check = (size: number) => a.tierOpenVerified(objects, Buffer.from(nameOf(size), 'hex'), B, size);
  for (const size of sizes) {
    const fd = check(size);
    t.ok(fd >= 0, `${size} bytes: checked, descriptor ${fd}`);
    if (fd >= 0) {
      t.equal(fstatSync(fd).size, size, 'the descriptor is the data file');
      const first = Buffer.alloc(16);
      readSync(fd, first, 0, 16, 0);
      t.same(first, patternBytes(size, size + 1).subarray(0, 16), 'with the object\'s bytes');
      closeSync(fd);
    }
  }
  t.equal(a.tierOpenVerified(objects, Buffer.from(nameOf(3 * B), 'hex'), B, 3 * B - 1), EBADMSG, 'a size the entries do not hold: refused');
  const big = 9 * B + 12_345;
  const data = await readFile(fileOf(big));
  data[6 * B + 77]! ^= 0x04; // a block of the second check chunk
  await writeFile(fileOf(big), data);
  t.equal(check(big), EBADMSG, 'one flipped bit in block 6: refused');
  const map = await readFile(`${fileOf(3 * B)}.map`);
  map.fill(0, 64 + 8, 64 + 16); // block 1 absent
  await writeFile(`${fileOf(3 * B)}.map`, map);
  t.equal(check(3 * B), EBADMSG, 'an absent middle block: refused');
  await truncate(fileOf(B + 1), B);
  t.equal(check(B + 1), EBADMSG, 'a data file missing its last byte: refused');
});

t.test('a file large enough to be checked on several threads: every part checked, a fault in any part refuses it, mapped or read', { skip }, async (t) => {
  const a = addon as TierAddon;
  const { c, objects } = await tierIn(t);
  t.teardown(() => a.tierSetMapped(true));
  // 96 MiB and a bit: three parts of tier_small.c's PARALLEL_MIN (32 MiB), checked on up to
  // as many threads as this process may use (2 here; 1 on a single CPU, where the parts run in turn).
  const size = 96 * MiB + 4097;
  const body = patternBytes(size, 7);
  for (let k = 0; k * B < size; k++) {
    c.write({ ns: NS, key: 'big', etag: '"e"', index: k }, body.subarray(k * B, Math.min(size, (k + 1) * B)));
    if (k % 128 === 127) await c.flush(); // 32 MiB at a time: the writer's queue holds 64 MiB (WRITE_QUEUE_BYTES) and skips beyond
  }
  await c.flush();
  const name = objectName({ ns: NS, key: 'big', etag: '"e"' });
  const file = path.join(objects, name.slice(0, 2), name);
  const check = () => a.tierOpenVerified(objects, Buffer.from(name, 'hex'), B, size);
  const pristine = await readFile(file);
  for (const mapped of [true, false]) {
    a.tierSetMapped(mapped);
    const how = mapped ? 'mapped' : 'read with pread';
    const fd = check();
    t.ok(fd >= 0, `${how}: whole and right: checked (${fd})`);
    if (fd >= 0) closeSync(fd);
    for (const at of [3, 40 * MiB + 11, size - 2]) {
      const data = Buffer.from(pristine);
      data[at]! ^= 0x10;
      await writeFile(file, data);
      t.equal(check(), EBADMSG, `${how}: one flipped bit at ${at} (${at < 32 * MiB ? 'first' : at < 64 * MiB ? 'second' : 'last'} 32 MiB): refused`);
    }
    await writeFile(file, pristine);
    await truncate(file, 80 * MiB);
    t.equal(check(), EBADMSG, `${how}: a data file cut short in the last part: refused`);
    await writeFile(file, pristine);
    const again = check();
    t.ok(again >= 0, `${how}: restored: checked again`);
    if (again >= 0) closeSync(again);
  }
  // Cut short while mapped: the CRC's read past the new end raises SIGBUS, which must fail the check, not the process.
  a.tierSetMapped(true);
  a.tierShrinkAfterMap(file, 8 * MiB);
  t.equal(check(), EBADMSG, 'cut to 8 MiB after its parts were mapped: refused (the SIGBUS caught)');
  t.equal((await stat(file)).size, 8 * MiB, 'the hook did cut it');
  await writeFile(file, pristine);
  const last = check();
  t.ok(last >= 0, 'restored: checked again, the process alive');
  if (last >= 0) closeSync(last);
});

/** One object through tierWriteSmall, a batch of one: [status, old entry length]. */
async function writeOne(a: TierAddon, objects: string, name: Buffer, bytes: Buffer, crc: number): Promise<number[]> {
  return [...await a.tierWriteSmall(objects, B, name, [bytes], Uint32Array.of(crc))];
}

t.test('tierWriteSmall: bytes, then header and entry 0; what is there already decides the rest', { skip }, async (t) => {
  const a = addon as TierAddon;
  const { c, objects } = await tierIn(t);
  const body = patternBytes(40_000, 4040);
  const crc = crc32c(body);
  const nameHex = objectName({ ns: NS, key: 'w', etag: '"w"' });
  const name = Buffer.from(nameHex, 'hex');
  const file = path.join(objects, nameHex.slice(0, 2), nameHex);
  const verified = () => a.tierReadSmall(objects, name, B, body.length);

  t.same(await writeOne(a, objects, name, body, crc), [1, 0], 'a new object: written, its sidecar made here');
  const got = verified();
  t.ok(Buffer.isBuffer(got) && got.equals(body), 'the reader in C reads it back, checked');
  const out = Buffer.alloc(body.length);
  t.same(await c.readRange({ ns: NS, key: 'w', etag: '"w"' }, 0, body.length, out), [true], 'and DiskCache does');
  t.ok(out.equals(body), 'byte for byte');
  t.equal((await stat(`${file}.map`)).size, 72, 'the sidecar: a 64-byte header and one entry');

  t.same(await writeOne(a, objects, name, body, crc), [0, 0], 'written again: present already, nothing written');

  // A sidecar another writer made and has not written yet (or was killed before): completed.
  await writeFile(`${file}.map`, Buffer.alloc(0));
  await unlink(file);
  t.same(await writeOne(a, objects, name, body, crc), [2, 0], 'an empty sidecar: written into it');
  t.ok(Buffer.isBuffer(verified()), 'and read back');

  // A valid header whose entry holds less (a GET that ended inside the block): rewritten whole.
  const prefix = body.subarray(0, 1000);
  const pname = Buffer.from(objectName({ ns: NS, key: 'p', etag: '"p"' }), 'hex');
  t.same(await writeOne(a, objects, pname, prefix, crc32c(prefix)), [1, 0], 'a prefix first');
  const whole = patternBytes(40_000, 4040);
  t.same(await writeOne(a, objects, pname, whole, crc), [2, 1000], 'then the whole object: written, the old entry held 1000 bytes');
  t.ok(Buffer.isBuffer(a.tierReadSmall(objects, pname, B, whole.length)), 'and read back whole');

  // A damaged sidecar: refused, nothing written over it.
  const dname = Buffer.from(objectName({ ns: NS, key: 'd', etag: '"d"' }), 'hex');
  const dfile = path.join(objects, dname.toString('hex').slice(0, 2), dname.toString('hex'));
  await writeFile(`${dfile}.map`, Buffer.from('not a sidecar'));
  t.same(await writeOne(a, objects, dname, body, crc), [EBADMSG, 0], 'a damaged sidecar: EBADMSG');
  t.equal((await readFile(`${dfile}.map`)).toString(), 'not a sidecar', 'left as it was');
  t.equal(existsSync(dfile), false, 'no data file written');
  // DiskCache, writing through it, discards the damaged object (as its own header check does) and counts it.
  const f0 = c.stats.checksumFailures;
  c.writeRun({ ns: NS, key: 'd', etag: '"d"', index: 0 }, body);
  await c.flush();
  t.equal(c.stats.checksumFailures - f0, 1, 'DiskCache counts it as damaged');
  t.equal(existsSync(`${dfile}.map`), false, 'and removes it: the next write starts over');
  c.writeRun({ ns: NS, key: 'd', etag: '"d"', index: 0 }, body);
  await c.flush();
  t.ok(Buffer.isBuffer(a.tierReadSmall(objects, dname, B, body.length)), 'which then writes it right');

  t.same(await writeOne(a, path.join(objects, 'nowhere'), name, body, crc), [ENOENT, 0], 'a missing folder: ENOENT');
  t.throws(() => a.tierWriteSmall(objects, B, name, [Buffer.alloc(B + 1)], Uint32Array.of(0)), { name: 'TypeError' }, 'more than a block: refused');
  t.throws(() => a.tierWriteSmall(objects, B, Buffer.alloc(31), [body], Uint32Array.of(crc)), { name: 'TypeError' }, 'a name that is not 32 bytes: refused');
  t.throws(() => a.tierWriteSmall(objects, B, Buffer.concat([name, name]), [body], Uint32Array.of(crc)), { name: 'TypeError' }, 'names for two objects, bytes for one: refused');
  t.throws(() => a.tierWriteSmall(objects, B, name, [body], Uint32Array.of(crc, crc)), { name: 'TypeError' }, 'a CRC too many: refused');
  t.throws(() => a.tierWriteSmall(objects, B, Buffer.alloc(0), [], new Uint32Array(0)), { name: 'TypeError' }, 'an empty batch: refused');
  t.throws(() => a.tierWriteSmall(objects, B, Buffer.alloc(65 * 32), Array.from({ length: 65 }, () => body), new Uint32Array(65)), { name: 'TypeError' }, 'more than 64 objects: refused');
});

t.test('tierWriteSmall: a batch is written in order, each object on its own', { skip }, async (t) => {
  const a = addon as TierAddon;
  const { objects } = await tierIn(t);
  const keys = ['b0', 'b1', 'b2', 'b3', 'b4'];
  const names = keys.map((k) => Buffer.from(objectName({ ns: NS, key: k, etag: '"b"' }), 'hex'));
  const bodies = keys.map((_, i) => patternBytes(1000 + i * 9000, 7 + i));
  const crcs = Uint32Array.from(bodies, (b) => crc32c(b));
  // b1 is present already, b2 has a damaged sidecar, the same object as b3 comes again last.
  t.same(await writeOne(a, objects, names[1]!, bodies[1]!, crcs[1]!), [1, 0], 'b1 written first, alone');
  const b2 = names[2]!.toString('hex');
  await writeFile(path.join(objects, b2.slice(0, 2), `${b2}.map`), Buffer.from('damaged'));
  const all = [...names, names[3]!];
  const res = await a.tierWriteSmall(objects, B, Buffer.concat(all), [...bodies, bodies[3]!], Uint32Array.from([...crcs, crcs[3]!]));
  t.ok(res instanceof Int32Array, 'results as an Int32Array');
  t.same([...res], [1, 0, 0, 0, EBADMSG, 0, 1, 0, 1, 0, 0, 0], 'new, present, damaged (refused), new, new, then present: the batch went on past the damaged one');
  for (const i of [0, 1, 3, 4]) {
    const got = a.tierReadSmall(objects, names[i]!, B, bodies[i]!.length);
    t.ok(Buffer.isBuffer(got) && got.equals(bodies[i]!), `${keys[i]} reads back, checked, byte for byte`);
  }
  t.equal(a.tierReadSmall(objects, names[2]!, B, bodies[2]!.length), EBADMSG, 'the damaged one is not served');
});

t.test('DiskCache sends small objects to the addon in batches, and a lone one without a flush', { skip }, async (t) => {
  const a = addon as TierAddon;
  const { c, objects } = await tierIn(t);
  const body = (i: number) => patternBytes(20_000 + i, 100 + i);
  // 40 small objects queued in one go: two batches (SMALL_BATCH is 32), not 40 trips.
  for (let i = 0; i < 40; i++) c.writeRun({ ns: NS, key: `s${i}`, etag: '"s"', index: 0 }, body(i));
  await c.flush();
  t.equal(c.stats.written, 40, 'all 40 written');
  t.equal(c.stats.smallBatches, 2, 'in two batches');
  for (let i = 0; i < 40; i++) {
    const got = a.tierReadSmall(objects, Buffer.from(objectName({ ns: NS, key: `s${i}`, etag: '"s"' }), 'hex'), B, body(i).length);
    if (!(Buffer.isBuffer(got) && got.equals(body(i)))) t.fail(`s${i} does not read back`);
  }
  // One object and no flush: its batch goes when its wait is over (polled for at most 5 s).
  const lone = Buffer.from(objectName({ ns: NS, key: 'lone', etag: '"s"' }), 'hex');
  c.writeRun({ ns: NS, key: 'lone', etag: '"s"', index: 0 }, body(99));
  // (a batch sent is counted after its pacing's await: a turn of the event loop lets it show; an
  // immediate runs before the next timers phase, so the 20 ms timer cannot have fired by then)
  await new Promise((r) => setImmediate(r));
  t.equal(c.stats.smallBatches, 2, 'not sent at once: it waits for others');
  for (let i = 0; i < 100 && !Buffer.isBuffer(a.tierReadSmall(objects, lone, B, body(99).length)); i++) await new Promise((r) => setTimeout(r, 50));
  t.ok(Buffer.isBuffer(a.tierReadSmall(objects, lone, B, body(99).length)), 'written without a flush');
  t.equal(c.stats.smallBatches, 3, 'as a batch of its own');
  // A job of another kind behind small ones sends them at once (two blocks: not small).
  c.writeRun({ ns: NS, key: 'q', etag: '"s"', index: 0 }, body(5));
  c.writeRun({ ns: NS, key: 'big', etag: '"s"', index: 0 }, patternBytes(B + 10, 3));
  await new Promise((r) => setImmediate(r));
  t.equal(c.stats.smallBatches, 4, 'a small object with a large one queued behind it: sent without waiting');
  await c.flush();
  t.equal(c.stats.written, 44, 'the large one written too (2 blocks)');
});
