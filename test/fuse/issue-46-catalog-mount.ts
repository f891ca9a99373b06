/**
 * Issue 46 (record 0036): a mount from a snapshot of 100 k objects in folders of 1,000, held in
 * the compact catalog (src/fs/catalog.ts), through a real kernel mount over s3rver. The root
 * shows every folder, sizes and times come back as listed (sizes past 4 GiB too), `find` names
 * every file once, and files stored in s3rver (placed among the generated ones, with their real
 * ETags) read back byte for byte.
 */
import { createHash } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { mountFastFile } from '../../src/fuse/fastfile.js';
import { generateBytes } from '../../src/local/dataset.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { setLogLevel } from '../../src/log.js';
import { compareKeys } from '../../src/s3/lister.js';
import type { ObjectInfo } from '../../src/s3/object-client.js';
import { clientOptionsFrom, createObjectClient } from '../../src/s3/s3-client.js';
import { writeSnapshotStream } from '../../src/snapshot/snapshot.js';
import { tempMountpoint } from '../helpers/fuse.js';
import { metricSum } from '../helpers/metrics.js';
import { testMountOptions, useLocalCredentials } from '../helpers/mount-options.js';
import '../helpers/exit-watch.js';

setLogLevel('error');

const BUCKET = 'catalog';
/** Generated objects: enough that a JS object per file would show, small enough for a fast test. */
const OBJECTS = 100_000;
/** Files per folder, as in the 10 M target (10,000 folders of 1,000). */
const PER_FOLDER = 1000;
/** Upper bound for each shell command: a listing that hangs fails here. */
const COMMAND_TIMEOUT_MS = 120_000;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const T0 = Date.UTC(2026, 0, 1);
const memGetattrs = () => metricSum('sluice_fuse_memory_getattrs_total');

const keyOf = (i: number) => `ds/d${String(Math.floor(i / PER_FOLDER)).padStart(4, '0')}/f${String(i).padStart(7, '0')}.jpg`;
function generated(i: number): ObjectInfo {
  return {
    key: keyOf(i), size: i % 997 === 5 ? 2 ** 32 + i : i % 100_003,
    etag: i % 7 === 0 ? `"${(i >>> 0).toString(16).padStart(32, 'a')}-${(i % 9) + 1}"` : `"${(i >>> 0).toString(16).padStart(32, '0')}"`,
    lastModified: new Date(T0 + (i % 5000) * 1000), storageClass: 'STANDARD',
  };
}

function sh(cmd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('sh', ['-c', cmd], { timeout: COMMAND_TIMEOUT_MS, maxBuffer: 64 * 1024 * 1024 }, (err, out) => (err ? reject(err) : resolve(out)));
  });
}

t.test('a 100 k object snapshot mounts from the catalog: folders, sizes, find, and real bytes', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  useLocalCredentials(s3.credentials);
  await s3.createBucket(BUCKET);
  // Real objects between generated ones: a new name in a generated folder, a folder of their own, sizes from 0 to several blocks.
  const real = new Map<string, Buffer>();
  const realKeys = ['ds/d0000/f0000000x.jpg', 'ds/d0100/a.bin', 'ds/d0099/zz.bin', 'ds/real/one.bin', 'ds/real/two.bin', 'ds/real/empty.bin'];
  for (const [k, key] of realKeys.entries()) {
    const b = generateBytes(key, key.endsWith('empty.bin') ? 0 : 1000 + k * 700_000, 7);
    real.set(key, b);
    await s3.putObject(BUCKET, key, b);
  }
  const opts = testMountOptions(s3.endpoint);
  const client = createObjectClient(clientOptionsFrom(BUCKET, opts));
  const listed: ObjectInfo[] = [];
  for await (const o of client.list('ds/')) listed.push(o);
  await client.close();
  t.equal(listed.length, realKeys.length);

  const tmp = await mkdtemp(path.join(os.tmpdir(), 'sluice-catalog-'));
  t.teardown(() => rm(tmp, { recursive: true, force: true }));
  const file = path.join(tmp, 'big.snap');
  // All objects in S3 order, generated on the fly (never an array of 100 k).
  function* all(): Generator<ObjectInfo> {
    const extra = [...listed].sort((a, b) => compareKeys(a.key, b.key));
    let j = 0;
    for (let i = 0; i < OBJECTS; i++) {
      const g = generated(i);
      while (j < extra.length && compareKeys(extra[j]!.key, g.key) < 0) yield extra[j++]!;
      yield g;
    }
    while (j < extra.length) yield extra[j++]!;
  }
  await writeSnapshotStream(file, { uri: `s3://${BUCKET}/ds/`, bucket: BUCKET, prefix: 'ds/', listing: { filters: [], skipArchived: false } }, all());

  const dir = await tempMountpoint(t, 'catalog');
  const m = await mountFastFile({ uri: undefined, mountpoint: dir, options: opts, dataset: { snapshot: file, skipArchived: false } });
  t.teardown(() => m.unmount());
  await m.listed;
  t.equal(m.core.fileCount, OBJECTS + realKeys.length);

  const root = await readdir(dir);
  // d0000..d0099, and d0100 and real of the stored files.
  t.equal(root.length, OBJECTS / PER_FOLDER + 2, 'the root shows every folder');
  t.same(root, [...root].sort(compareKeys), 'in code point order');

  // Random generated files: size and mtime as listed.
  let wrong = 0;
  for (let k = 0; k < 200; k++) {
    const i = (k * 7919 + 13) % OBJECTS;
    const st = await stat(path.join(dir, keyOf(i).slice(3)));
    const g = generated(i);
    if (st.size !== g.size || st.mtimeMs !== g.lastModified.getTime()) wrong++;
  }
  t.equal(wrong, 0, '200 random files: size and mtime as listed');

  // Stored files: every byte.
  for (const [key, body] of real) {
    const got = await readFile(path.join(dir, key.slice(3)));
    t.equal(sha(got), sha(body), `${key}: same bytes`);
  }

  // The listing is handed to C as the catalog's columns (native/src/fuse_attrs.c "Catalog"): every
  // path's stat from C must be what the listing says. find's lookups of paths not yet seen by the
  // kernel are C's getattrs (the ones stat'ed above are in the kernel's cache).
  t.equal(await m.attrTable, true, 'the listing is answered in C');
  const before = await memGetattrs();
  const lines = (await sh(`find '${dir}' -printf '%y %P %s %T@\\n'`)).split('\n').filter((l) => l !== '');
  m.takeCounts();
  const inC = (await memGetattrs()) - before;
  t.ok(inC >= OBJECTS - 1000, `find's lookups answered in C (${inC})`);
  const expect = new Map<string, string>();
  for (let i = 0; i < OBJECTS; i++) {
    const g = generated(i);
    expect.set(g.key.slice(3), `f ${g.size} ${g.lastModified.getTime() / 1000}`);
  }
  for (const o of listed) expect.set(o.key.slice(3), `f ${o.size} ${o.lastModified.getTime() / 1000}`);
  let bad = 0;
  let files = 0;
  let dirs = 0;
  for (const line of lines) {
    const [type, rel, size, mtime] = line.split(' ');
    if (type === 'd') {
      dirs++;
      if (size !== '4096') bad++;
      continue;
    }
    files++;
    if (expect.get(rel!) !== `${type} ${size} ${Number(mtime)}`) {
      if (bad++ < 5) t.comment(`${line} != ${expect.get(rel!)}`);
    }
  }
  t.equal(bad, 0, 'find -printf: every file\'s type, size and mtime as listed, every folder 4096');
  t.equal(files, OBJECTS + realKeys.length, 'find names every file');
  t.equal(dirs, 1 + OBJECTS / PER_FOLDER + 2, 'and every folder (the root, d0000..d0100, real)');
  const ls = (await sh(`ls -f '${dir}/d0000'`)).split('\n').filter((l) => l !== '');
  t.equal(ls.length, PER_FOLDER + 1 + 2, 'ls -f: the folder\'s files, the stored one and . ..');
});
