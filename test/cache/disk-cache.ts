/**
 * The disk tier on its own and through TieredClient (a fake ObjectClient stands in for S3
 * here; test/cache/disk-tier-e2e.ts runs it against the local S3 server and a real mount).
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { blockName, DISK_BLOCK_SIZE, DiskCache, HEADER_BYTES, TIER_FOLDER } from '../../src/cache/disk-cache.js';
import { TieredClient } from '../../src/cache/tiered-client.js';
import { InvalidArgumentError } from '../../src/errors.js';
import { FakeObjectClient, patternBytes } from '../helpers/fake-client.js';

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

/** Every block file of a tier folder. */
async function blockFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  const blocks = path.join(dir, TIER_FOLDER, 'blocks');
  for (const sub of await readdir(blocks)) for (const f of await readdir(path.join(blocks, sub))) out.push(path.join(blocks, sub, f));
  return out;
}

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

t.test('a corrupt, truncated or foreign block is discarded, never served', async (t) => {
  const dir = await tempDir(t);
  const c = await openTier(dir);
  t.teardown(() => c.close());
  const cases: [string, (f: string) => Promise<void>][] = [
    ['a flipped data byte', async (f) => { const b = await readFile(f); b[HEADER_BYTES + 777]! ^= 0x01; await writeFile(f, b); }],
    ['a flipped header byte', async (f) => { const b = await readFile(f); b[5]! ^= 0x10; await writeFile(f, b); }],
    ['truncated data', async (f) => { const b = await readFile(f); await writeFile(f, b.subarray(0, b.length - 10)); }],
    ['truncated header', async (f) => { const b = await readFile(f); await writeFile(f, b.subarray(0, 20)); }],
    ['zeroed', async (f) => { const b = await readFile(f); await writeFile(f, Buffer.alloc(b.length)); }],
  ];
  let failures = 0;
  for (const [i, [what, damage]] of cases.entries()) {
    const id = { ns: NS, key: `k${i}`, etag: '"e"', index: 0 };
    c.write(id, patternBytes(B, i));
    await c.flush();
    const file = path.join(dir, TIER_FOLDER, 'blocks', blockName(id).slice(0, 2), blockName(id));
    await damage(file);
    t.equal(await c.readInto(id, Buffer.alloc(B)), false, `${what}: a miss`);
    t.equal(c.stats.checksumFailures, ++failures, `${what}: counted`);
    await new Promise((r) => setTimeout(r, 20));
    await t.rejects(stat(file), `${what}: deleted`);
  }
  // Another block's file renamed over this one's name: the key hash in its header refuses it.
  const a = { ns: NS, key: 'x', etag: '"e"', index: 0 };
  const b = { ns: NS, key: 'y', etag: '"e"', index: 0 };
  c.write(a, patternBytes(B, 10));
  await c.flush();
  const fa = path.join(dir, TIER_FOLDER, 'blocks', blockName(a).slice(0, 2), blockName(a));
  const fb = path.join(dir, TIER_FOLDER, 'blocks', blockName(b).slice(0, 2), blockName(b));
  await writeFile(fb, await readFile(fa));
  t.equal(await c.readInto(b, Buffer.alloc(B)), false, 'a misplaced file is refused');
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

t.test('blocks of an object in use (pinned) are kept by eviction; unpinned they go', async (t) => {
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
  const name = blockName(keep);
  await utimes(path.join(dir, TIER_FOLDER, 'blocks', name.slice(0, 2), name), 1, 1);
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
