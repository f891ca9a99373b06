/**
 * The disk tier on its own and through TieredClient (a fake ObjectClient stands in for S3
 * here; test/cache/disk-tier-e2e.ts runs it against the local S3 server and a real mount).
 */
import { spawn } from 'node:child_process';
import fsSync, { readFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { copyFile, mkdtemp, readdir, readFile, rm, truncate, unlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { crc32c } from '@node-rs/crc32';
import { DiskCache } from '../../src/cache/disk-cache.js';
import { DISK_BLOCK_SIZE, ENTRY_BYTES, HEADER_BYTES, objectName, TIER_FOLDER, type WriteEvent } from '../../src/cache/tier-layout.js';
import { WINDOW } from '../../src/cache/tier-readers.js';
import { WRITE_RUN_BYTES } from '../../src/cache/tier-writer.js';
import { NO_NATIVE_ENV, tierOpenPairOp } from '../../src/native/addon.js';
import { TieredClient } from '../../src/cache/tiered-client.js';
import { InvalidArgumentError } from '../../src/errors.js';
import { FakeObjectClient, patternBytes } from '../helpers/fake-client.js';
import { readAll } from '../helpers/fs-core.js';

const B = DISK_BLOCK_SIZE;
const MiB = 1024 * 1024;
const NS = 'http://fake\0bucket';
const BIG_FREE = async () => 1e15;

async function tempDir(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-tier-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

const openTier = (dir: string, maxBytes = 64 * MiB, freeBytes = BIG_FREE) => DiskCache.open({ dir, maxBytes, writeBytesPerSec: 1024 * MiB, freeBytes });

t.test('a block written is read back whole and verified; prefixes and offsets work', async (t) => {
  const dir = await tempDir(t);
  const c = await openTier(dir);
  t.teardown(() => c.close());
  const data = patternBytes(B, 1);
  const id = { ns: NS, key: 'a', etag: '"1"', index: 0 };
  t.equal(await c.readInto(id, Buffer.alloc(B)), false, 'absent: a miss');
  c.write(id, data);
  await c.flush();
  const got = Buffer.alloc(B);
  t.equal(await c.readInto(id, got), true);
  t.ok(got.equals(data));
  const mid = Buffer.alloc(1000);
  t.equal(await c.readInto(id, mid, 5000), true, 'a slice from inside the block');
  t.ok(mid.equals(data.subarray(5000, 6000)));
  t.equal(await c.readInto({ ...id, etag: '"2"' }, Buffer.alloc(10)), false, 'another ETag never finds it');
  // A prefix (a GET that ended inside the block) serves reads within it, not beyond.
  const pid = { ns: NS, key: 'p', etag: '"1"', index: 3 };
  c.write(pid, data.subarray(0, 1000));
  await c.flush();
  t.equal(await c.readInto(pid, Buffer.alloc(1000)), true);
  t.equal(await c.readInto(pid, Buffer.alloc(1001)), false, 'more than the stored prefix: a miss');
  t.equal(c.stats.checksumFailures, 0);
});

t.test('a corrupt, truncated, zeroed or foreign block, a torn entry and a lost or damaged sidecar: discarded, never served', async (t) => {
  const dir = await tempDir(t);
  const c = await openTier(dir);
  t.teardown(() => c.close());
  // Object k<i> holds 3 whole blocks; the damage hits block 1 (its bytes at B..2B of the cache file, its entry in the sidecar).
  const entryAt = HEADER_BYTES + ENTRY_BYTES;
  const cases: [string, (f: { data: string; map: string }) => Promise<void>][] = [
    ['a flipped data byte', async (f) => { const b = await readFile(f.data); b[B + 777]! ^= 0x01; await writeFile(f.data, b); }],
    ['a torn block (its second half never written)', async (f) => { const b = await readFile(f.data); b.fill(0, B + B / 2, 2 * B); await writeFile(f.data, b); }],
    ['zeroed block', async (f) => { const b = await readFile(f.data); b.fill(0, B, 2 * B); await writeFile(f.data, b); }],
    ['a flipped CRC in its entry', async (f) => { const b = await readFile(f.map); b[entryAt + 5]! ^= 0x10; await writeFile(f.map, b); }],
    // Two writers' entries torn together: this one's length with the CRC of a shorter prefix written before it.
    ['a torn entry', async (f) => { const b = await readFile(f.map); b.writeUInt32LE(crc32c((await readFile(f.data)).subarray(B, 2 * B - 4096)), entryAt + 4); await writeFile(f.map, b); }],
    ['truncated data file', async (f) => { await truncate(f.data, B + 1000); }],
  ];
  let failures = 0;
  for (const [i, [what, damage]] of cases.entries()) {
    const id = { ns: NS, key: `k${i}`, etag: '"e"' };
    const body = patternBytes(3 * B, i);
    for (let k = 0; k < 3; k++) c.write({ ...id, index: k }, body.subarray(k * B, (k + 1) * B));
    await c.flush();
    const files = c.filesOf(id);
    await damage(files);
    const out = Buffer.alloc(2 * B);
    t.same(await c.readRange(id, 0, 2 * B, out), [true, false], `${what}: block 0 served, block 1 a miss`);
    t.ok(out.subarray(0, B).equals(body.subarray(0, B)), `${what}: block 0 right`);
    t.equal(c.stats.checksumFailures, ++failures, `${what}: counted`);
    t.equal((await readFile(files.map)).readUInt32LE(entryAt), 0, `${what}: its entry zeroed, so no process serves it`);
    t.equal(c.openWhole(id, 3 * B), undefined, `${what}: not whole any more`);
    // Written again (the refetch), it is served again.
    c.write({ ...id, index: 1 }, body.subarray(B, 2 * B));
    await c.flush();
    const again = Buffer.alloc(B);
    t.equal(await c.readInto({ ...id, index: 1 }, again), true, `${what}: rewritten, a hit`);
    t.ok(again.equals(body.subarray(B, 2 * B)), `${what}: rewritten, right`);
  }
  // A whole file whose block goes bad after openWhole: the read returns -1 (the caller goes to S3), never the bytes.
  const wid = { ns: NS, key: 'w', etag: '"e"' };
  const wbody = patternBytes(2 * WINDOW + 100, 77);
  for (let k = 0; k * B < wbody.length; k++) c.write({ ...wid, index: k }, wbody.subarray(k * B, Math.min(wbody.length, (k + 1) * B)));
  await c.flush();
  const w = c.openWhole(wid, wbody.length)!;
  t.ok(w, 'whole on disk');
  const wf = c.filesOf(wid);
  const b = await readFile(wf.data);
  b[WINDOW + 5]! ^= 0x80;
  await writeFile(wf.data, b);
  const dst = Buffer.alloc(4096);
  t.equal(await w.read(dst, 4096, 0), 4096, 'the first window is fine');
  t.ok(dst.equals(wbody.subarray(0, 4096)));
  t.equal(await w.read(dst, 4096, WINDOW), -1, 'the bad window is refused');
  t.equal(c.stats.checksumFailures, ++failures);
  w.close();
  // A damaged sidecar header: the object is refused and starts over.
  const hid = { ns: NS, key: 'h', etag: '"e"' };
  c.write({ ...hid, index: 0 }, patternBytes(B, 5));
  await c.flush();
  const hf = c.filesOf(hid);
  const hb = await readFile(hf.map);
  hb[20]! ^= 0x01;
  await writeFile(hf.map, hb);
  // Our own process keeps the file open: a fresh process (a new DiskCache) opens it anew.
  const c2 = await openTier(dir);
  t.equal(await c2.readInto({ ...hid, index: 0 }, Buffer.alloc(B)), false, 'a damaged sidecar header: a miss');
  t.equal(c2.stats.checksumFailures, 1, 'counted');
  // A lost sidecar: the object is absent (nothing to verify against), and it is written anew.
  const lid = { ns: NS, key: 'l', etag: '"e"' };
  c2.write({ ...lid, index: 0 }, patternBytes(B, 6));
  await c2.flush();
  await c2.close();
  await unlink(c.filesOf(lid).map);
  const c3 = await openTier(dir);
  t.teardown(() => c3.close());
  t.equal(await c3.readInto({ ...lid, index: 0 }, Buffer.alloc(B)), false, 'sidecar lost: a miss');
  c3.write({ ...lid, index: 0 }, patternBytes(B, 6));
  await c3.flush();
  const lb = Buffer.alloc(B);
  t.equal(await c3.readInto({ ...lid, index: 0 }, lb), true, 'written anew');
  t.ok(lb.equals(patternBytes(B, 6)));
  // Another object's cache file and sidecar copied over this one's: the name in the sidecar header refuses them.
  const x = { ns: NS, key: 'x', etag: '"e"' };
  const y = { ns: NS, key: 'y', etag: '"e"' };
  c3.write({ ...x, index: 0 }, patternBytes(B, 10));
  await c3.flush();
  await copyFile(c3.filesOf(x).data, c3.filesOf(y).data);
  await copyFile(c3.filesOf(x).map, c3.filesOf(y).map);
  t.equal(await c3.readInto({ ...y, index: 0 }, Buffer.alloc(B)), false, 'a misplaced file is refused');
});

t.test('openWhole: a file whole on disk is read window by window, concurrent reads included; a partial one is not whole', async (t) => {
  const dir = await tempDir(t);
  const c = await openTier(dir);
  t.teardown(() => c.close());
  for (const size of [1, 40_000, B, B + 1, WINDOW, 3 * WINDOW + 12345]) {
    const id = { ns: NS, key: `s${size}`, etag: '"e"' };
    const body = patternBytes(size, size);
    const n = Math.ceil(size / B);
    for (let k = 0; k < n - 1; k++) c.write({ ...id, index: k }, body.subarray(k * B, (k + 1) * B));
    await c.flush();
    t.equal(c.openWhole(id, size), undefined, `${size}: last block missing, not whole`);
    c.write({ ...id, index: n - 1 }, body.subarray((n - 1) * B));
    await c.flush();
    const w = c.openWhole(id, size);
    t.ok(w, `${size}: whole`);
    // The kernel's reads: 128 KiB each, several in flight at once, then one past the end.
    const out = Buffer.alloc(size);
    const reads: Promise<number>[] = [];
    for (let at = 0; at < size; at += 128 * 1024) {
      const len = 128 * 1024;
      const dst = Buffer.alloc(len);
      reads.push(Promise.resolve(w!.read(dst, len, at)).then((r) => { dst.copy(out, at, 0, r); return r; }));
    }
    const got = await Promise.all(reads);
    t.equal(got.reduce((a, b) => a + b, 0), size, `${size}: every byte`);
    t.ok(out.equals(body), `${size}: right bytes`);
    t.equal(await w!.read(Buffer.alloc(10), 10, size), 0, `${size}: end of file`);
    w!.close();
  }
  t.equal(c.stats.checksumFailures, 0);
});

t.test('TieredClient: second read from disk, no GET; mixed runs; unaligned ranges; into honoured', async (t) => {
  const dir = await tempDir(t);
  const c = await openTier(dir);
  t.teardown(() => c.close());
  const fake = new FakeObjectClient();
  const body = patternBytes(3 * MiB + 12345, 7);
  const etag = fake.put('obj', body);
  const tc = new TieredClient(fake, c, NS);
  // Unaligned range: the GET starts at its block's start, so the block is stored whole.
  const r1 = await tc.getRange('obj', 1000, 600_000, etag);
  t.ok(r1.equals(body.subarray(1000, 600_000)));
  t.same(fake.requests.map((r) => [r.start, r.end]), [[0, 600_000]], 'one GET, from the block start');
  await c.flush();
  fake.resetCounts();
  const r2 = await tc.getRange('obj', 1000, 500_000, etag);
  t.ok(r2.equals(body.subarray(1000, 500_000)));
  t.equal(fake.gets, 0, 'served from disk');
  // Blocks 0 and 1 whole are on disk, block 2 holds a prefix (the first GET ended inside it).
  fake.resetCounts();
  const all = await tc.getRange('obj', 0, body.length, etag);
  t.ok(all.equals(body), 'whole object right');
  t.same(fake.requests.map((r) => [r.start, r.end]), [[2 * B, body.length]], 'only the missing blocks (from block 2) were fetched');
  await c.flush();
  fake.resetCounts();
  const into = Buffer.alloc(body.length);
  const back = await tc.getRange('obj', 0, body.length, etag, { into });
  t.equal(back, into, 'the caller buffer is filled');
  t.ok(into.equals(body));
  t.equal(fake.gets, 0);
  // getStream in windows
  const chunks: Buffer[] = [];
  for await (const ch of tc.getStream('obj', etag, { size: body.length })) chunks.push(ch);
  t.ok(Buffer.concat(chunks).equals(body));
  t.equal(fake.gets, 0);
  // A changed object (new ETag) never reads the old blocks.
  const body2 = patternBytes(body.length, 8);
  const etag2 = fake.put('obj', body2);
  const fresh = await tc.getRange('obj', 0, body2.length, etag2);
  t.ok(fresh.equals(body2), 'new version: new bytes');
  t.ok(fake.gets > 0);
});

t.test('the size bound holds; LRU evicts the oldest; a shrunk bound is applied at open', async (t) => {
  const dir = await tempDir(t);
  const bound = 4 * MiB;
  const c = await openTier(dir, bound);
  const ids = Array.from({ length: 40 }, (_, i) => ({ ns: NS, key: `f${i}`, etag: '"e"', index: 0 }));
  for (const [i, id] of ids.entries()) {
    c.write(id, patternBytes(B, i));
    await c.flush(); // one at a time, so mtimes order them
    if (i === 2) {
      // Keep block 0 recent: a hit touches it.
      t.equal(await c.readInto(ids[0]!, Buffer.alloc(B)), true);
    }
  }
  const onDisk = await c.scanBytes();
  t.ok(onDisk.bytes <= bound, `files ${onDisk.bytes} within the bound ${bound}`);
  t.ok(c.stats.evictions > 0, 'evicted');
  t.ok(await c.usedBytes() <= bound, 'ledger within the bound');
  t.equal(await c.readInto(ids[39]!, Buffer.alloc(B)), true, 'the newest stays');
  t.equal(await c.readInto(ids[1]!, Buffer.alloc(B)), false, 'an old one went');
  await c.close();
  // Reopen with a smaller bound: evicted down at open.
  const small = 1 * MiB;
  const c2 = await openTier(dir, small);
  t.teardown(() => c2.close());
  t.ok((await c2.scanBytes()).bytes <= small, 'shrunk bound applied at open');
  t.equal(await c2.readInto(ids[39]!, Buffer.alloc(B)), true, 'the most recent survive');
});

t.test('a recount removes the tmp files of processes that no longer run: the ledger being replaced and the writability probe', async (t) => {
  const dir = await tempDir(t);
  (await openTier(dir)).close();
  // A pid that ran and exited: a process killed while it opened the tier (probe) or rewrote the ledger.
  const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
  const dead = await new Promise<number>((resolve) => child.on('exit', () => resolve(child.pid!)));
  const tmp = path.join(dir, TIER_FOLDER, 'tmp');
  for (const name of [`ledger-${dead}`, `probe-${dead}`, 'not-ours']) await writeFile(path.join(tmp, name), 'x');
  await rm(path.join(dir, TIER_FOLDER, 'ledger.json')); // a missing ledger: the next open recounts the folder
  const c = await openTier(dir);
  t.teardown(() => c.close());
  t.same((await readdir(tmp)).filter((n) => !n.startsWith(`ledger-${process.pid}`)).sort(), ['not-ours'], 'the dead pid\'s files are gone; a file named for no pid is left');
});

t.test('two processes share one folder: together within the bound, ledger recovered', async (t) => {
  const dir = await tempDir(t);
  const bound = 6 * MiB;
  const here = path.dirname(fileURLToPath(import.meta.url));
  const writer = path.join(here, '..', 'helpers', 'disk-cache-writer.mjs');
  const runWriter = (tag: string, blocks: number, killAfterMs?: number) => new Promise<number | null>((resolve, reject) => {
    const child = spawn(process.execPath, [writer, dir, String(bound), tag, String(blocks)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let timer: NodeJS.Timeout | undefined;
    if (killAfterMs !== undefined) timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    const guard = setTimeout(() => { child.kill('SIGKILL'); reject(new Error('writer timed out')); }, 60_000);
    child.on('exit', (code) => { clearTimeout(timer); clearTimeout(guard); resolve(code); });
  });
  const codes = await Promise.all([runWriter('a', 30), runWriter('b', 30)]);
  t.same(codes, [0, 0], 'both writers finished');
  const c = await openTier(dir, bound);
  t.teardown(() => c.close());
  const s = await c.scanBytes();
  t.ok(s.bytes <= bound, `two writers together within the bound: ${s.bytes} <= ${bound}`);
  // Every block left is whole and verified (the writer wrote patternBytes(B, tag, i)).
  let good = 0;
  for (const tag of ['a', 'b']) {
    for (let i = 0; i < 30; i++) {
      const buf = Buffer.alloc(B);
      if (await c.readInto({ ns: NS, key: `${tag}${i}`, etag: '"e"', index: 0 }, buf)) {
        t.ok(buf.equals(patternBytes(B, tag.charCodeAt(0) * 1000 + i)), `${tag}${i} right`);
        good++;
      }
    }
  }
  t.ok(good > 0);
  t.equal(c.stats.checksumFailures, 0);
  // kill -9 in the middle of writing: the next open recovers (tmp files gone, ledger recounted), nothing wrong is served.
  t.equal(await runWriter('k', 400, 300), null, 'the writer was killed (kill -9) while writing');
  const c3 = await openTier(dir, bound);
  t.teardown(() => c3.close());
  t.same((await readdir(path.join(dir, TIER_FOLDER, 'tmp'))).filter((n) => !n.startsWith(`ledger-${process.pid}`)), [], 'dead writer\'s tmp files removed');
  t.ok((await c3.scanBytes()).bytes <= bound);
  for (let i = 0; i < 400; i++) {
    const buf = Buffer.alloc(B);
    if (await c3.readInto({ ns: NS, key: `k${i}`, etag: '"e"', index: 0 }, buf)) t.ok(buf.equals(patternBytes(B, 'k'.charCodeAt(0) * 1000 + i)), `k${i} right`);
  }
  t.equal(c3.stats.checksumFailures, 0, 'no torn block left behind');
});

t.test('the writer: a run of blocks is one write of its bytes, then one of its entries, only once the bytes are in the file', async (t) => {
  const dir = await tempDir(t);
  const events: WriteEvent[] = [];
  const problems: string[] = [];
  const body = patternBytes(40 * B + 1000, 21);
  const entryLens = (map: string, first: number, n: number) => {
    const m = readFileSync(map);
    return Array.from({ length: n }, (_, k) => (m.length >= HEADER_BYTES + (first + k + 1) * ENTRY_BYTES ? m.readUInt32LE(HEADER_BYTES + (first + k) * ENTRY_BYTES) : 0));
  };
  const dataBytes = new Map<number, number>();
  const onWrite = (e: WriteEvent) => {
    events.push(e);
    if (e.what === 'data') {
      dataBytes.set(e.first, e.bytes);
      // Not yet marked present: its entries are still absent (or the shorter prefix of an earlier write).
      if (entryLens(`${e.file}.map`, e.first, e.blocks).some((l) => l === B)) problems.push(`blocks ${e.first}+${e.blocks} marked present before their bytes were written`);
    } else {
      // About to mark them present: every byte must be in the data file already.
      const data = readFileSync(e.file.slice(0, -'.map'.length));
      const at = e.first * B;
      const n = dataBytes.get(e.first) ?? -1;
      if (n < 0) problems.push(`entries of blocks ${e.first}+${e.blocks} with no write of their bytes`);
      if (!data.subarray(at, at + n).equals(body.subarray(at, at + n))) problems.push(`entries of blocks ${e.first}+${e.blocks} written before their bytes`);
    }
  };
  const c = await DiskCache.open({ dir, maxBytes: 1024 * MiB, writeBytesPerSec: 1024 * MiB, freeBytes: BIG_FREE, onWrite });
  t.teardown(() => c.close());
  const id = { ns: NS, key: 'run', etag: '"r"', index: 0 };
  const perJob = WRITE_RUN_BYTES / B;
  // 10 whole blocks and a prefix of the 11th: one job, one pwrite of the bytes, one of the entries.
  c.writeRun(id, body.subarray(0, 10 * B + 1000));
  await c.flush();
  t.same(events.map((e) => [e.what, e.first, e.blocks]), [['data', 0, 11], ['entries', 0, 11]], 'one write of 11 blocks, then one of their 11 entries');
  t.equal(c.stats.dataWrites, 1);
  t.equal(c.stats.entryWrites, 1);
  t.equal(c.stats.written, 11);
  const got = Buffer.alloc(10 * B + 1000);
  t.same(await c.readRange(id, 0, got.length, got), new Array(11).fill(true), 'all 11 read back, verified');
  t.ok(got.equals(body.subarray(0, got.length)));
  // The whole 40-block object, blocks 0-9 already there and block 10 only a prefix: blocks 10.. are written, in jobs of WRITE_RUN_BYTES.
  events.length = 0;
  c.writeRun(id, body);
  await c.flush();
  const data = events.filter((e) => e.what === 'data');
  t.same(data.map((e) => e.first), [10, perJob, 2 * perJob].filter((f, i) => i === 0 || f > 10), 'blocks on disk already are not written again; the rest in jobs');
  t.equal(data.reduce((n, e) => n + e.blocks, 0), 41 - 10, 'each missing block written once');
  // Jobs run WRITE_CONCURRENCY at once, so their events interleave; each job's entries come after its bytes.
  for (const d of data) {
    const di = events.indexOf(d);
    const ei = events.findIndex((e) => e.what === 'entries' && e.first === d.first && e.blocks === d.blocks);
    t.ok(ei > di, `blocks ${d.first}+${d.blocks}: bytes, then entries`);
  }
  t.equal(events.length, 2 * data.length, 'one entries write per write of bytes');
  const all = Buffer.alloc(body.length);
  t.ok((await c.readRange(id, 0, body.length, all)).every(Boolean));
  t.ok(all.equals(body), 'whole object right');
  // A gap in the middle: one write for just the missing blocks.
  const gid = { ns: NS, key: 'gap', etag: '"g"', index: 0 };
  c.writeRun(gid, body.subarray(0, 3 * B));
  c.writeRun({ ...gid, index: 5 }, body.subarray(5 * B, 8 * B));
  await c.flush();
  events.length = 0;
  c.writeRun(gid, body.subarray(0, 8 * B));
  await c.flush();
  t.same(events.map((e) => [e.what, e.first, e.blocks]), [['data', 3, 2], ['entries', 3, 2]], 'only blocks 3-4, in one write');
  t.same(problems, [], 'entries only ever after their bytes');
  t.equal(c.stats.checksumFailures, 0);
});

t.test('the writer: a held buffer is written from as it is and given back after its job; bytes changed after queueing are never served', async (t) => {
  const dir = await tempDir(t);
  const c = await DiskCache.open({ dir, maxBytes: 1024 * MiB, writeBytesPerSec: 1024 * MiB, freeBytes: BIG_FREE });
  t.teardown(() => c.close());
  const body = patternBytes(2 * WRITE_RUN_BYTES, 22);
  let held = 0;
  let holds = 0;
  const hold = () => {
    held++;
    holds++;
    let done = false;
    return () => {
      if (done) throw new Error('released twice');
      done = true;
      held--;
    };
  };
  const id = { ns: NS, key: 'held', etag: '"h"', index: 0 };
  c.writeRun(id, body, { hold });
  t.equal(holds, 2, 'one hold per job');
  t.equal(held, 2, 'held while queued');
  await c.flush();
  t.equal(held, 0, 'each released once its job is done');
  const got = Buffer.alloc(body.length);
  t.ok((await c.readRange(id, 0, body.length, got)).every(Boolean));
  t.ok(got.equals(body));
  // A caller that breaks the contract (changes the bytes before the job wrote them): the CRC was taken
  // when queued, so the block fails its check at read and is a miss, never the changed bytes.
  // Two jobs of another object are queued first: they take both writer slots, so this job is
  // still queued when its bytes change (the one-hop small-object writer, native/src/tier_small.c,
  // could otherwise have written them before the change: then it wrote the bytes as queued).
  c.writeRun({ ns: NS, key: 'ahead', etag: '"a"', index: 0 }, body);
  const bad = patternBytes(B, 23);
  const bid = { ns: NS, key: 'changed', etag: '"c"', index: 0 };
  c.writeRun(bid, bad, { owned: true });
  bad.fill(0xee);
  await c.flush();
  const out = Buffer.alloc(B);
  t.equal(await c.readInto(bid, out), false, 'a miss');
  t.equal(c.stats.checksumFailures, 1, 'counted as a bad block');
  // Without hold or owned, the bytes are copied at queueing: a later change does not matter.
  const cid = { ns: NS, key: 'copied', etag: '"c"', index: 0 };
  const src = patternBytes(B, 24);
  const keep = Buffer.from(src);
  c.writeRun(cid, src);
  src.fill(0xdd);
  await c.flush();
  t.equal(await c.readInto(cid, out), true);
  t.ok(out.equals(keep), 'the bytes as queued');
});

t.test('the writer: jobs fit a small grant, and jobs waiting on one refill are all written', async (t) => {
  const dir = await tempDir(t);
  // 64 MiB: grants of 2 MiB, smaller than WRITE_RUN_BYTES.
  const c = await openTier(dir, 64 * MiB);
  t.teardown(() => c.close());
  const body = patternBytes(24 * B, 25);
  for (let f = 0; f < 6; f++) c.writeRun({ ns: NS, key: `g${f}`, etag: '"g"', index: 0 }, body);
  await c.flush();
  t.equal(c.stats.skipped, 0, 'nothing skipped');
  t.equal(c.stats.written, 6 * 24);
  for (let f = 0; f < 6; f++) {
    const got = Buffer.alloc(body.length);
    t.ok((await c.readRange({ ns: NS, key: `g${f}`, etag: '"g"' }, 0, body.length, got)).every(Boolean) && got.equals(body), `object ${f} whole`);
  }
});

t.test('--cache-dir-direct-write: whole pages written with O_DIRECT where the buffer is aligned, the rest the ordinary way; all read back right', async (t) => {
  const { prefaultedAlloc } = await import('../../src/native/addon.js');
  const { constants, openSync, closeSync } = await import('node:fs');
  const dir = await tempDir(t);
  let fsDirect = true;
  try {
    closeSync(openSync(path.join(dir, 'probe'), constants.O_WRONLY | constants.O_CREAT | constants.O_DIRECT));
  } catch {
    fsDirect = false; // e.g. tmpfs: the tier must fall back
  }
  const c = await DiskCache.open({ dir, maxBytes: 1024 * MiB, writeBytesPerSec: 1024 * MiB, freeBytes: BIG_FREE, directWrite: true });
  t.teardown(() => c.close());
  const alloc = prefaultedAlloc();
  const n = 5 * B + 3000;
  const src = patternBytes(n, 31);
  // An aligned buffer (a slab, as the block cache's) with a tail that is not a whole page.
  const slab = alloc ? alloc(6 * B) : Buffer.allocUnsafe(6 * B);
  src.copy(slab);
  const id = { ns: NS, key: 'direct', etag: '"d"', index: 0 };
  c.writeRun(id, slab.subarray(0, n), { owned: true });
  await c.flush();
  if (fsDirect && alloc) t.equal(c.stats.directBytes, 5 * B, 'the 5 whole blocks went through O_DIRECT');
  const got = Buffer.alloc(n);
  t.ok((await c.readRange(id, 0, n, got)).every(Boolean), 'all present, verified');
  t.ok(got.equals(src), 'bytes right, tail included');
  // A buffer that is not page-aligned: refused by O_DIRECT (or not), written all the same.
  const odd = Buffer.allocUnsafe(3 * B + 1).subarray(1);
  src.copy(odd, 0, 0, 3 * B);
  const oid = { ns: NS, key: 'odd', etag: '"d"', index: 0 };
  c.writeRun(oid, odd, { owned: true });
  await c.flush();
  const got2 = Buffer.alloc(3 * B);
  t.ok((await c.readRange(oid, 0, 3 * B, got2)).every(Boolean));
  t.ok(got2.equals(src.subarray(0, 3 * B)), 'unaligned buffer: bytes right');
  t.equal(c.stats.checksumFailures, 0);
});

t.test('no grant while the filesystem is nearly full: writes are skipped, reads go on', async (t) => {
  const dir = await tempDir(t);
  const c = await openTier(dir, 64 * MiB, async () => 10 * MiB);
  t.teardown(() => c.close());
  const id = { ns: NS, key: 'full', etag: '"e"', index: 0 };
  c.write(id, patternBytes(B, 1));
  await c.flush();
  t.equal(c.stats.written, 0, 'not written');
  t.ok(c.stats.skipped > 0, 'counted as skipped');
  t.equal(await c.readInto(id, Buffer.alloc(B)), false);
});

t.test('an unusable --cache-dir is a user error naming it', async (t) => {
  const dir = await tempDir(t);
  const file = path.join(dir, 'not-a-dir');
  await writeFile(file, 'x');
  await t.rejects(openTier(file), InvalidArgumentError);
  await t.rejects(DiskCache.open({ dir, maxBytes: 100, writeBytesPerSec: 1 }), InvalidArgumentError);
});

t.test('an object in use (pinned) is kept by eviction; unpinned it goes', async (t) => {
  const dir = await tempDir(t);
  const c = await openTier(dir, 4 * MiB);
  t.teardown(() => c.close());
  const keep = { ns: NS, key: 'open-file', etag: '"e"', index: 0 };
  c.write(keep, patternBytes(B, 99));
  await c.flush();
  const unpin = c.pin(NS, 'open-file', '"e"', B);
  for (let i = 0; i < 40; i++) {
    c.write({ ns: NS, key: `other${i}`, etag: '"e"', index: 0 }, patternBytes(B, i));
    await c.flush();
  }
  t.ok(c.stats.evictions > 0);
  t.equal(await c.readInto(keep, Buffer.alloc(B)), true, 'the pinned block stayed while older than all others');
  unpin();
  // Make it the oldest again, then push more: now it may go.
  const { utimes } = await import('node:fs/promises');
  await utimes(c.filesOf(keep).map, 1, 1);
  for (let i = 40; i < 80; i++) {
    c.write({ ns: NS, key: `other${i}`, etag: '"e"', index: 0 }, patternBytes(B, i));
    await c.flush();
  }
  t.equal(await c.readInto(keep, Buffer.alloc(B)), false, 'unpinned, the oldest block was evicted');
});

t.test('TieredClient passes a snapshot\'s version pins to S3 and keys those blocks by version', async (t) => {
  const dir = await tempDir(t);
  const c = await openTier(dir);
  t.teardown(() => c.close());
  const fake = new FakeObjectClient();
  const body = patternBytes(B, 5);
  const etag = fake.put('v', body);
  let pinned: ReadonlyMap<string, string> | undefined;
  (fake as unknown as { pinVersions(v: ReadonlyMap<string, string>): void }).pinVersions = (v) => { pinned = v; };
  const tc = new TieredClient(fake, c, NS);
  const versions = new Map([['v', 'ver-1']]);
  tc.pinVersions(versions);
  t.equal(pinned, versions, 'the inner client got the pins');
  t.ok((await tc.getRange('v', 0, B, etag)).equals(body));
  await c.flush();
  t.equal(await c.readInto({ ns: NS, key: 'v', etag, versionId: 'ver-1', index: 0 }, Buffer.alloc(B)), true, 'stored under its version');
  t.equal(await c.readInto({ ns: NS, key: 'v', etag, index: 0 }, Buffer.alloc(B)), false, 'not under the unversioned key');
});

/** Counts fs.readSync calls (the tier's synchronous preads) made by `fn`. */
function countReadSync<T>(fn: () => T): { value: T; preads: number } {
  const orig = fsSync.readSync;
  let preads = 0;
  fsSync.readSync = ((...a: Parameters<typeof orig>) => { preads++; return orig(...a); }) as typeof orig;
  syncBuiltinESMExports();
  try {
    return { value: fn(), preads };
  } finally {
    fsSync.readSync = orig;
    syncBuiltinESMExports();
  }
}

t.test('openWhole, files of one block: read whole and checked at open, two preads, one recycled buffer; a bad block is refused at open', async (t) => {
  const dir = await tempDir(t);
  const c = await openTier(dir);
  t.teardown(() => c.close());
  const sizes = [1, 4096, 40_000, B];
  for (const size of sizes) {
    const id = { ns: NS, key: `small${size}`, etag: '"e"' };
    c.write({ ...id, index: 0 }, patternBytes(size, size));
  }
  await c.flush();
  for (const size of sizes) {
    const id = { ns: NS, key: `small${size}`, etag: '"e"' };
    const body = patternBytes(size, size);
    // The first open checks the sidecar's header (the one-hop writer, native/src/tier_small.c,
    // does not leave the file open here; the JavaScript writer does, and then needs no header
    // read); from then on the file stays open: the entry and the bytes, nothing else.
    const first = countReadSync(() => c.openWhole(id, size));
    t.ok(first.value, `${size}: whole`);
    t.ok(first.preads <= 3, `${size}: at most three preads at the first open (header, entry, bytes): ${first.preads}`);
    first.value!.close();
    const { value: w, preads } = countReadSync(() => c.openWhole(id, size));
    t.ok(w, `${size}: whole`);
    t.equal(preads, 2, `${size}: two preads at open (its entry, its bytes)`);
    const out = Buffer.alloc(size + 10);
    const { value: n, preads: later } = countReadSync(() => w!.read(out, size + 10, 0));
    t.equal(n, size, `${size}: every byte, in one read`);
    t.equal(later, 0, `${size}: reads are copies, no pread`);
    t.ok(out.subarray(0, size).equals(body), `${size}: right bytes`);
    t.equal(w!.read(out, 10, size), 0, `${size}: end of file`);
    if (size > 1) {
      t.equal(w!.read(out, 1000, 1), Math.min(1000, size - 1), `${size}: a read at an offset`);
      t.ok(out.subarray(0, Math.min(1000, size - 1)).equals(body.subarray(1, 1001)), `${size}: its bytes`);
    }
    w!.close();
    w!.close(); // idempotent: the buffer goes back once
  }
  // The same file opened and closed many times: one buffer, recycled; none held after close.
  const id = { ns: NS, key: 'small40000', etag: '"e"' };
  const before = c.smallBufferBytes.allocated;
  for (let i = 0; i < 200; i++) {
    const w = c.openWhole(id, 40_000)!;
    t.equal(w.read(Buffer.alloc(100), 100, 39_950), 50);
    w.close();
  }
  t.equal(c.smallBufferBytes.allocated, before, 'no buffer allocated per open');
  t.equal(c.smallBufferBytes.inUse, 0, 'none in use once closed');
  // Open at once past the buffer bound (16 MiB: 256 files of 64 KiB): the rest go the usual way.
  const open = [];
  for (let i = 0; i < 300; i++) open.push(c.openWhole(id, 40_000));
  t.equal(open.filter(Boolean).length, 256, 'at most the bound in buffers at once');
  for (const w of open) w?.close();
  t.equal(c.smallBufferBytes.inUse, 0);
  t.ok(c.smallBufferBytes.allocated <= 16 * MiB, 'allocated within the bound');
  // A fresh process opens the cache file first: its header is read too (with the addon, by
  // its opener, with the two opens: not through readSync).
  const c2 = await openTier(dir);
  t.teardown(() => c2.close());
  const { value: w2, preads } = countReadSync(() => c2.openWhole(id, 40_000));
  t.ok(w2, 'whole, in a new process');
  if (tierOpenPairOp()) t.equal(preads, 2, 'entry, bytes (the header read by the addon with the opens)');
  else t.equal(preads, 3, 'header, entry, bytes');
  w2!.close();
  // A short stored block (a prefix) is not the whole file.
  const pid = { ns: NS, key: 'prefix', etag: '"e"' };
  c.write({ ...pid, index: 0 }, patternBytes(30_000, 9).subarray(0, 20_000));
  await c.flush();
  t.equal(c.openWhole(pid, 30_000), undefined, 'a stored prefix is a miss');
  // A bad block: refused at open, counted, its entry zeroed; never a byte of it served.
  const damage: [string, (f: { data: string; map: string }) => Promise<void>][] = [
    ['a flipped data byte', async (f) => { const b = await readFile(f.data); b[39_000]! ^= 0x20; await writeFile(f.data, b); }],
    ['a truncated data file', async (f) => { await truncate(f.data, 1000); }],
    ['a flipped CRC', async (f) => { const b = await readFile(f.map); b[HEADER_BYTES + 6]! ^= 0x01; await writeFile(f.map, b); }],
  ];
  for (const [i, [what, hurt]] of damage.entries()) {
    const bid = { ns: NS, key: `bad${i}`, etag: '"e"' };
    c.write({ ...bid, index: 0 }, patternBytes(40_000, 50 + i));
    await c.flush();
    const f = c.filesOf(bid);
    await hurt(f);
    const fails = c.stats.checksumFailures;
    t.equal(c.openWhole(bid, 40_000), undefined, `${what}: refused at open (the caller reads from S3)`);
    t.equal(c.stats.checksumFailures, fails + 1, `${what}: counted`);
    t.equal((await readFile(f.map)).readUInt32LE(HEADER_BYTES), 0, `${what}: its entry zeroed`);
    t.equal(c.smallBufferBytes.inUse, 0, `${what}: its buffer given back`);
  }
});

t.test('FastFile core: a file whole on disk is read through openWhole, with no GET; a bad block mid-file falls back to S3', async (t) => {
  const { SluiceFs } = await import('../../src/fs/core.js');
  const dir = await tempDir(t);
  const c = await openTier(dir);
  t.teardown(() => c.close());
  const fake = new FakeObjectClient();
  const body = patternBytes(3 * MiB + 17, 3);
  const etag = fake.put('ds/a.bin', body);
  const tc = new TieredClient(fake, c, NS);
  let directReads = 0;
  const mount = () => SluiceFs.create({
    client: tc, prefix: 'ds', channel: 'tier-test', cacheSize: 8 * MiB, partSize: 1 * MiB, maxPrefetch: 4 * MiB, maxInflight: 16 * MiB,
    crossFilePrefetch: 4, crossFileMaxSize: 1 * MiB,
    pinObject: (k, e, s) => tc.pin(k, e, s),
    openDirect: (k, e, s) => {
      const w = tc.openWhole(k, e, s);
      return w && { read: (d: Buffer, l: number, p: number) => { directReads++; return w.read(d, l, p); }, close: () => w.close() };
    },
  });
  const fs1 = await mount();
  t.ok((await readAll(fs1, '/a.bin')).equals(body), 'epoch 1 right');
  await fs1.close();
  t.equal(directReads, 0, 'not on disk yet: the usual path');
  await c.flush();
  fake.resetCounts();
  const fs2 = await mount();
  t.ok((await readAll(fs2, '/a.bin')).equals(body), 'from the cache file: right');
  await fs2.close();
  t.ok(directReads > 0, 'read through the whole-file path');
  t.equal(fake.gets, 0, 'no GET');
  // Block 5 goes bad on disk: the read that meets it falls back to the usual path, which fetches it again.
  const f = c.filesOf({ ns: NS, key: 'ds/a.bin', etag });
  const b = await readFile(f.data);
  b[5 * B + 10]! ^= 0x01;
  await writeFile(f.data, b);
  const fails = c.stats.checksumFailures;
  const fs3 = await mount();
  t.ok((await readAll(fs3, '/a.bin')).equals(body), 'a bad block mid-file: still right');
  await fs3.close();
  t.equal(c.stats.checksumFailures, fails + 1, 'the bad block was counted once');
  t.ok(fake.gets >= 1, `and fetched from S3 (${fake.gets} GETs)`);
});

for (const opener of ['addon', 'node'] as const) {
  t.test(`looking a cache file up (${opener === 'addon' ? "the addon's opener" : `Node's openSync, ${NO_NATIVE_ENV}=1`}): hit, miss, damaged, being written`, { skip: opener === 'addon' && !tierOpenPairOp() ? 'native addon not built' : false }, async (t) => {
    const dir = await tempDir(t);
    const ids = ['hit', 'damaged', 'empty'].map((key) => ({ ns: NS, key, etag: '"e"', index: 0 }));
    const bytes = patternBytes(30_000, 5);
    const w = await openTier(dir);
    for (const id of ids) w.write(id, bytes);
    await w.close();
    // A new tier on the folder: no cache file is kept open from the writes.
    if (opener === 'node') process.env[NO_NATIVE_ENV] = '1'; // read once, when the tier opens
    let c: DiskCache;
    try {
      c = await openTier(dir);
    } finally {
      delete process.env[NO_NATIVE_ENV];
    }
    t.teardown(() => c.close());
    const file = (key: string) => { const n = objectName({ ns: NS, key, etag: '"e"' }); return path.join(c.objectsFolder, n.slice(0, 2), n); };
    await writeFile(`${file('damaged')}.map`, Buffer.from('not a sidecar header'));
    await writeFile(`${file('empty')}.map`, Buffer.alloc(0)); // another writer has made it and not written yet
    const out = Buffer.alloc(bytes.length);
    const f0 = c.stats.checksumFailures;
    t.same(await c.readRange(ids[0]!, 0, bytes.length, out), [true], 'hit');
    t.ok(out.equals(bytes), 'byte for byte');
    t.same(await c.readRange({ ns: NS, key: 'absent', etag: '"e"' }, 0, 10, Buffer.alloc(10)), [false], 'an absent object: a miss');
    t.same(await c.readRange(ids[1]!, 0, bytes.length, out), [false], 'a damaged sidecar: a miss');
    t.equal(c.stats.checksumFailures - f0, 1, 'counted');
    t.equal(fsSync.existsSync(file('damaged')) || fsSync.existsSync(`${file('damaged')}.map`), false, 'and the object discarded');
    t.same(await c.readRange(ids[2]!, 0, bytes.length, out), [false], 'an empty sidecar: a miss');
    t.ok(fsSync.existsSync(`${file('empty')}.map`), 'left for its writer');
    t.equal(c.stats.checksumFailures - f0, 1, 'not counted as damaged');
    // No descriptor is left open by the misses: the process's count is back where it was after a hit was kept.
    const fds = fsSync.readdirSync('/proc/self/fd').length;
    for (let i = 0; i < 50; i++) await c.readRange({ ns: NS, key: `none${i}`, etag: '"e"' }, 0, 10, Buffer.alloc(10));
    for (let i = 0; i < 50; i++) await c.readRange(ids[1]!, 0, 10, Buffer.alloc(10));
    t.equal(fsSync.readdirSync('/proc/self/fd').length, fds, 'no descriptor left open by 100 misses');
  });
}

t.test('issue 43 defect 10: the ledger drops a grant of pid 0, of a reused pid, and of a pid without a start time; keeps a live writer\'s', async (t) => {
  const dir = await tempDir(t);
  await (await openTier(dir)).close();
  // A live process that is not a writer: its pid stands for a writer's pid, reused after that writer died.
  const other = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
  t.teardown(() => { other.kill('SIGKILL'); });
  await new Promise((resolve) => other.once('spawn', resolve));
  const pid = other.pid!;
  const start = /\) \S+(?: \S+){18} (\d+)/.exec(readFileSync(`/proc/${pid}/stat`, 'latin1'))![1]!;
  const ledgerFile = path.join(dir, TIER_FOLDER, 'ledger.json');
  const G = 4 * MiB;
  const withGrants = async (grants: Record<string, number>) => {
    await writeFile(ledgerFile, JSON.stringify({ version: 2, files: 0, grants, scannedAt: Date.now() }));
    const c = await openTier(dir);
    try { return await c.usedBytes(); } finally { await c.close(); }
  };
  t.equal(await withGrants({ 0: G }), 0, 'pid 0 (kill(0, 0) succeeds for the process group): dropped');
  t.equal(await withGrants({ [String(pid)]: G }), 0, 'a bare pid that now names another process: dropped');
  t.equal(await withGrants({ [`${pid}:${Number(start) + 1}`]: G }), 0, 'a pid now run by a process started at another time: dropped');
  t.equal(await withGrants({ [`${pid}:${start}`]: G }), G, 'the process that holds it, still running: kept');
});
