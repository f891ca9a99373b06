/**
 * The disk tier's whole-file reader (DiskCache.openWhole, the ring of windows FastFile reads
 * a file whole on disk through): the kernel's reads out of order and several at once, a
 * read far behind the others, a block going bad on disk mid-file, and the buffer budget.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import type { Test } from '../helpers/tap.js';
import { DiskCache } from '../../src/cache/disk-cache.js';
import { DISK_BLOCK_SIZE, type WholeFile } from '../../src/cache/tier-layout.js';
import { RING_AHEAD, RING_BEHIND, RING_WINDOWS, WHOLE_BUFFER_BYTES, WINDOW } from '../../src/cache/tier-readers.js';
import { patternBytes } from '../helpers/fake-client.js';

const B = DISK_BLOCK_SIZE;
const MiB = 1024 * 1024;
const NS = 'http://fake\0bucket';
/** FUSE's read size (libfuse 2's max_read) and how many readahead reads the kernel has in flight at most (max_background). */
const READ = 128 * 1024;
const IN_FLIGHT = 12;

async function tierWith(t: Test, files: { key: string; size: number }[]): Promise<{ c: DiskCache; bodies: Map<string, Buffer> }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-whole-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const c = await DiskCache.open({ dir, maxBytes: 1024 * MiB, writeBytesPerSec: 4096 * MiB, freeBytes: async () => 1e15 });
  t.teardown(() => c.close());
  const bodies = new Map<string, Buffer>();
  for (const f of files) {
    const body = patternBytes(f.size, f.size + f.key.length * 7919);
    bodies.set(f.key, body);
    for (let k = 0; k * B < f.size; k++) {
      c.write({ ns: NS, key: f.key, etag: '"e"', index: k }, body.subarray(k * B, Math.min(f.size, (k + 1) * B)));
      if (k % 64 === 63) await c.flush(); // the write queue holds 64 MiB (a full queue drops blocks)
    }
    await c.flush();
  }
  t.equal(c.stats.skipped, 0, 'every block written');
  return { c, bodies };
}

const id = (key: string) => ({ ns: NS, key, etag: '"e"' });

/** A deterministic shuffle (xorshift), so a failure reproduces. */
function shuffle<T>(xs: T[], seed: number): T[] {
  let x = seed || 1;
  for (let i = xs.length - 1; i > 0; i--) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    const j = x % (i + 1);
    [xs[i], xs[j]] = [xs[j]!, xs[i]!];
  }
  return xs;
}

/**
 * Reads the whole file as the kernel's readahead does through libfuse's threads: 128 KiB
 * reads, up to IN_FLIGHT at once, each batch handed over in a shuffled order, and the next
 * batch issued before the last one is answered. Returns the bytes.
 */
async function readLikeKernel(w: WholeFile, size: number, seed: number): Promise<Buffer> {
  const out = Buffer.alloc(size);
  const offsets: number[] = [];
  for (let at = 0; at < size; at += READ) offsets.push(at);
  let pending: Promise<void>[] = [];
  for (let i = 0; i < offsets.length; i += IN_FLIGHT) {
    const batch = shuffle(offsets.slice(i, i + IN_FLIGHT), seed + i);
    const next = batch.map(async (at) => {
      const dst = Buffer.alloc(READ);
      const n = await w.read(dst, READ, at);
      if (n !== Math.min(READ, size - at)) throw new Error(`read at ${at}: ${n}`);
      dst.copy(out, at, 0, n);
    });
    await Promise.all(pending);
    pending = next;
  }
  await Promise.all(pending);
  return out;
}

t.test('out of order and several at once: every byte right, each read from disk once, none waits once the ring is ahead', async (t) => {
  const size = 24 * MiB + 12345;
  const { c, bodies } = await tierWith(t, [{ key: 'big', size }]);
  for (const seed of [1, 2, 3]) {
    const w = c.openWhole(id('big'), size)!;
    t.ok(w, 'whole on disk');
    t.ok((await readLikeKernel(w, size, seed)).equals(bodies.get('big')!), `seed ${seed}: right bytes`);
    t.equal(w.stats!.bytes, size, 'every byte served by the ring');
    t.equal(w.stats!.preadBytes, size, 'each byte read from disk (and checked) once: no window read twice');
    t.equal(w.stats!.strays, 0, 'no read fell behind the ring');
    t.equal(w.stats!.reads, Math.ceil(size / READ), 'every read answered once');
    w.close();
  }
  t.equal(c.stats.checksumFailures, 0);
  t.equal(c.wholeBufferInUse, 0, 'the buffers went back at close');
  t.equal(c.wholeStats.preadBytes, 3 * size, 'summed as the readers closed');
});

t.test('a read far behind the stream, a jump back and a random read are served right', async (t) => {
  const size = 20 * MiB;
  const { c, bodies } = await tierWith(t, [{ key: 'f', size }]);
  const body = bodies.get('f')!;
  const w = c.openWhole(id('f'), size)!;
  const dst = Buffer.alloc(READ);
  for (let at = 0; at < 12 * MiB; at += READ) t.equal(await w.read(dst, READ, at), READ);
  // The stream is at window 11; window 11 - RING_BEHIND - 2 has given its slot to a window read ahead.
  const behind = (11 - RING_BEHIND - 2) * WINDOW + 4096;
  t.equal(await w.read(dst, READ, behind), READ, 'a read behind the ring');
  t.ok(dst.equals(body.subarray(behind, behind + READ)), 'right bytes');
  t.equal(w.stats!.strays, 1, 'served alone (one pread of its blocks), the ring left as it was');
  // A read across a window's end, unaligned.
  const across = 12 * WINDOW - 1000;
  t.equal(await w.read(dst, READ, across), READ);
  t.ok(dst.equals(body.subarray(across, across + READ)), 'across two windows: right bytes');
  // Back to the start: a new stream.
  for (const at of [0, 5 * MiB + 3, 19 * MiB + 777]) {
    const n = Math.min(READ, size - at);
    t.equal(await w.read(dst, READ, at), n);
    t.ok(dst.subarray(0, n).equals(body.subarray(at, at + n)), `jump to ${at}: right bytes`);
  }
  t.equal(await w.read(dst, READ, size), 0, 'end of file');
  w.close();
});

t.test('a block that goes bad on disk mid-file is caught when its window is read, never served', async (t) => {
  const size = 16 * MiB;
  const { c, bodies } = await tierWith(t, [{ key: 'f', size }]);
  const body = bodies.get('f')!;
  const w = c.openWhole(id('f'), size)!;
  const dst = Buffer.alloc(READ);
  t.equal(await w.read(dst, READ, 0), READ, 'the first read starts the read-ahead');
  // Wait until the windows read ahead are in (each was checked when read).
  for (let i = 0; i < 200 && w.stats!.preadBytes < (1 + RING_AHEAD) * WINDOW; i++) await new Promise((r) => setTimeout(r, 5));
  await new Promise((r) => setTimeout(r, 50));
  const f = c.filesOf(id('f'));
  const data = await readFile(f.data);
  // Window 2 is in memory already, verified: damage to it on disk now is not what it serves.
  data[2 * WINDOW + 100]! ^= 0x10;
  // Window 10 is not read yet: its block is read after the damage, and refused.
  const bad = 10 * WINDOW + 3 * B + 5;
  data[bad]! ^= 0x01;
  await writeFile(f.data, data);
  let at = READ;
  let got = 0;
  for (; at < size; at += READ) {
    got = await w.read(dst, READ, at);
    if (got < 0) break;
    t.equal(got, READ);
    if (!dst.equals(body.subarray(at, at + READ))) {
      t.fail(`wrong bytes at ${at}`);
      break;
    }
  }
  t.equal(got, -1, 'the read that meets the bad window gets -1 (the caller goes to S3)');
  t.equal(at, 10 * WINDOW, 'at the bad window, not before');
  t.equal(c.stats.checksumFailures, 1, 'counted once');
  t.equal(await w.read(dst, READ, 0), -1, 'the reader stays failed');
  w.close();
  t.equal(c.openWhole(id('f'), size), undefined, 'its entry is gone: no longer whole');
  // Windows still being read ahead when it failed give their buffers back as they land.
  for (let i = 0; i < 400 && c.wholeBufferInUse > 0; i++) await new Promise((r) => setTimeout(r, 5));
  t.equal(c.wholeBufferInUse, 0, 'its buffers went back');
});

t.test('the buffer budget: full rings, then smaller ones, then the usual path; buffers back at close', async (t) => {
  const big = (RING_WINDOWS + 1) * WINDOW;
  const full = WHOLE_BUFFER_BYTES / (RING_WINDOWS * WINDOW);
  const files = Array.from({ length: full + 2 }, (_, i) => ({ key: `b${i}`, size: big + i }));
  const { c, bodies } = await tierWith(t, [...files, { key: 'one', size: WINDOW - 5 }]);
  const open: WholeFile[] = [];
  for (let i = 0; i < full - 1; i++) open.push(c.openWhole(id(`b${i}`), big + i)!);
  t.ok(open.every(Boolean), `${full - 1} files with full rings`);
  t.equal(c.wholeBufferInUse, (full - 1) * RING_WINDOWS * WINDOW);
  const one = c.openWhole(id('one'), WINDOW - 5)!;
  t.ok(one, 'a file of one window takes its own size');
  const small = c.openWhole(id(`b${full - 1}`), big + full - 1)!;
  t.ok(small, 'the next large file gets a smaller ring');
  t.equal(c.wholeBufferInUse, (full - 1) * RING_WINDOWS * WINDOW + 4 * B + (RING_BEHIND + 2) * WINDOW, `a ring of ${RING_BEHIND + 2} windows`);
  t.ok(c.wholeBufferInUse <= WHOLE_BUFFER_BYTES, 'within the budget');
  t.equal(c.openWhole(id(`b${full}`), big + full), undefined, 'past the budget: the usual path');
  t.ok((await readLikeKernel(small, big + full - 1, 9)).equals(bodies.get(`b${full - 1}`)!), 'the smaller ring reads right, out of order too');
  t.equal(small.stats!.strays, 0);
  t.ok((await readLikeKernel(one, WINDOW - 5, 4)).equals(bodies.get('one')!), 'the one-window file reads right');
  small.close();
  one.close();
  open.pop()!.close();
  const again = c.openWhole(id(`b${full}`), big + full)!;
  t.ok(again, 'a closed ring makes room');
  t.ok((await readLikeKernel(again, big + full, 5)).equals(bodies.get(`b${full}`)!), 'a reused buffer reads right');
  again.close();
  for (const w of open) w.close();
  t.equal(c.wholeBufferInUse, 0, 'every buffer back');
});
