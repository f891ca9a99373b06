/**
 * FastFile end to end: the real S3 client against the local S3 server, the real core,
 * a real kernel mount. Every byte read through the mount is compared with its source.
 */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { mountFastFile } from '../../src/fuse/fastfile.js';
import { mountAt } from '../../src/fuse/mountpoint.js';
import { generateBytes, seedDataset, sourceBytes, type SeededObject } from '../../src/local/dataset.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { registry } from '../../src/metrics/metrics.js';
import { childRead } from '../helpers/child-read.js';
import { tempMountpoint } from '../helpers/fuse.js';
import { testMountOptions, useLocalCredentials } from '../helpers/mount-options.js';

const MiB = 1024 * 1024;
const BUCKET = 'fastfile';
const PREFIX = 'data/';
/** Child readers: more than the 2 cores, as several DataLoader workers would be. */
const READERS = 8;
const RANDOM_PREADS = 150;

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** Deterministic PRNG (mulberry32) so a failure replays. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

t.test('FastFile mount over the local S3 server', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  useLocalCredentials(s3.credentials);
  await s3.createBucket(BUCKET);
  const objects = await seedDataset(s3, BUCKET, PREFIX, {
    smallFiles: { count: 120, size: 20_000, folders: 6 },
    largeFiles: { count: 2, size: 12 * MiB },
    specialNames: true,
  });
  // Written outside the prefix: must not show.
  await s3.putObject(BUCKET, 'database/outside.bin', Buffer.from('not shown'));
  // The victim of the overwrite test, big enough that read-ahead cannot hold all of it.
  const victimKey = `${PREFIX}victim/victim.bin`;
  const victimOld = generateBytes(victimKey, 24 * MiB, 7);
  await s3.putObject(BUCKET, victimKey, victimOld);

  const dir = await tempMountpoint(t, 'fastfile');
  // "s3://fastfile/data" without the slash: the prefix is a folder all the same.
  const m = await mountFastFile({ uri: `s3://${BUCKET}/data`, mountpoint: dir, options: testMountOptions(s3.endpoint) });
  t.teardown(() => m.unmount());
  const local = (o: { key: string }) => path.join(dir, o.key.slice(PREFIX.length));

  t.test('every file reads back with the sha256 of its source', async (t) => {
    const wrong: string[] = [];
    for (const o of objects) if (sha(await readFile(local(o))) !== o.sha256) wrong.push(o.key);
    t.same(wrong, [], `all ${objects.length} files match (special names included)`);
  });

  t.test('listings and stat sizes equal the bucket', async (t) => {
    t.same((await readdir(dir)).sort(), ['large', 'small', 'special', 'victim']);
    // Every folder's listing equals the keys under it, one level deep.
    const expected = new Map<string, Set<string>>();
    for (const o of [...objects, { key: victimKey, size: victimOld.length }]) {
      const rel = o.key.slice(PREFIX.length).split('/');
      for (let i = 0; i < rel.length; i++) {
        const d = rel.slice(0, i).join('/');
        if (!expected.has(d)) expected.set(d, new Set());
        expected.get(d)!.add(rel[i]!);
      }
    }
    for (const [d, names] of expected) t.same((await readdir(path.join(dir, d))).sort(), [...names].sort(), `listing of /${d}`);
    const wrongSize: string[] = [];
    for (const o of objects) {
      const st = await stat(local(o));
      if (st.size !== o.size || !st.isFile()) wrongSize.push(o.key);
    }
    t.same(wrongSize, [], 'every stat size equals the object size');
    t.equal(m.core.fileCount, objects.length + 1);
  });

  t.test('random preads across the large files equal the source bytes', async (t) => {
    const rand = rng(42);
    const large = objects.filter((o) => o.key.includes('/large/'));
    const sources = new Map(large.map((o) => [o.key, sourceBytes(o)]));
    const handles = await Promise.all(large.map((o) => open(local(o))));
    t.teardown(() => Promise.all(handles.map((h) => h.close())));
    let bad = 0;
    for (let i = 0; i < RANDOM_PREADS; i++) {
      const k = Math.floor(rand() * large.length);
      const o = large[k]!;
      const len = 1 + Math.floor(rand() * (rand() < 0.5 ? 4096 : 2 * MiB));
      const off = Math.floor(rand() * (o.size + 1000)); // sometimes past the end
      const buf = Buffer.alloc(len);
      const { bytesRead } = await handles[k]!.read(buf, 0, len, off);
      const want = sources.get(o.key)!.subarray(Math.min(off, o.size), Math.min(off + len, o.size));
      if (bytesRead !== want.length || !buf.subarray(0, bytesRead).equals(want)) bad++;
    }
    t.equal(bad, 0, `${RANDOM_PREADS} random preads, none wrong`);
  });

  t.test('writes fail with EROFS, missing paths with ENOENT', async (t) => {
    const f = local(objects[0]!);
    await t.rejects(writeFile(path.join(dir, 'new.txt'), 'x'), { code: 'EROFS' }, 'create');
    await t.rejects(open(f, constants.O_WRONLY), { code: 'EROFS' }, 'open for writing');
    await t.rejects(open(f, constants.O_RDONLY | constants.O_TRUNC), { code: 'EROFS' }, 'open with O_TRUNC');
    await t.rejects(unlink(f), { code: 'EROFS' }, 'unlink');
    await t.rejects(rename(f, f + '.x'), { code: 'EROFS' }, 'rename');
    await t.rejects(mkdir(path.join(dir, 'newdir')), { code: 'EROFS' }, 'mkdir');
    await t.rejects(readFile(path.join(dir, 'missing.bin')), { code: 'ENOENT' });
    await t.rejects(stat(path.join(dir, 'small', 'nope', 'x')), { code: 'ENOENT' });
    await t.rejects(stat(path.join(dir, '..', path.basename(dir), 'outside.bin')), { code: 'ENOENT' }, 'keys outside the prefix folder are not shown');
  });

  t.test(`${READERS} concurrent readers in child processes get correct bytes`, async (t) => {
    const want = new Map(objects.map((o) => [local(o), o.sha256]));
    const all = [...want.keys()];
    const results = await Promise.all(Array.from({ length: READERS }, (_, r) => {
      const rand = rng(100 + r);
      const order = [...all].sort(() => rand() - 0.5); // each reader its own order
      return childRead(order);
    }));
    let checked = 0;
    let wrong = 0;
    for (const res of results) {
      for (const [f, h] of Object.entries(res)) { checked++; if (want.get(f) !== h) wrong++; }
    }
    t.equal(checked, READERS * all.length, 'every reader read every file');
    t.equal(wrong, 0, 'no reader saw a wrong byte');
  });

  t.test('an object overwritten mid-read fails the read, never mixes bytes', async (t) => {
    const fh = await open(path.join(dir, 'victim', 'victim.bin'));
    t.teardown(() => fh.close());
    const head = Buffer.alloc(64 * 1024);
    await fh.read(head, 0, head.length, 0);
    t.ok(head.equals(victimOld.subarray(0, head.length)), 'the first bytes are the original');
    await s3.putObject(BUCKET, victimKey, generateBytes(victimKey, 24 * MiB, 8));
    const far = Buffer.alloc(64 * 1024);
    const at = 20 * MiB;
    const r = await fh.read(far, 0, far.length, at).then((x) => x, (e: NodeJS.ErrnoException) => e);
    if (r instanceof Error) {
      t.ok(r.errno === -116 || r.errno === -5, `read fails with ESTALE or EIO (got ${r.code} ${r.errno})`);
    } else {
      t.fail(`the read at ${at} after the overwrite succeeded`);
      t.ok(far.equals(victimOld.subarray(at, at + far.length)), 'and at least its bytes are the original ones');
    }
    const text = await registry.metrics();
    t.match(text, /sluice_fuse_operations_total\{op="read",result="(ESTALE|EIO)"\} [1-9]/, 'the failure is counted');
  });

  t.test('unmount', async (t) => {
    await m.unmount();
    t.equal(await mountAt(dir), undefined);
  });
});
