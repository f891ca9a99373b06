/**
 * SluiceFs over the real S3 client against a real S3-compatible server (s3rver in a
 * child process): the core's reads equal the source bytes, listings equal the bucket,
 * and an overwritten object fails instead of mixing versions. (The FUSE mount's own
 * tests live in test/fuse/.)
 */
import t from 'tap';
import { now } from '../helpers/now.js';
import { createHash } from 'node:crypto';
import { ObjectChangedError } from '../../src/errors.js';
import { SluiceFs, type SluiceFsOptions } from '../../src/fs/core.js';
import { seedDataset, sourceBytes, type SeededObject } from '../../src/local/dataset.js';
import { startLocalS3, type LocalS3 } from '../../src/local/s3-server.js';
import type { ObjectClient } from '../../src/s3/object-client.js';
import { createObjectClient } from '../../src/s3/s3-client.js';

const BUCKET = 'core-s3';
const KiB = 1024;
const MiB = 1024 * KiB;

let s3: LocalS3;
let objects: SeededObject[];
let client: ObjectClient;

t.before(async () => {
  s3 = await startLocalS3();
  await s3.createBucket(BUCKET);
  objects = await seedDataset(s3, BUCKET, 'ds/', {
    smallFiles: { count: 120, size: 40_000, folders: 4 },
    largeFiles: { count: 2, size: 5 * MiB + 123 },
    specialNames: true,
  });
  client = createObjectClient({ bucket: BUCKET, endpoint: s3.endpoint, region: 'us-east-1', pathStyle: true, credentials: s3.credentials, maxAttempts: 3, requestTimeoutMs: 10_000 });
});
t.teardown(async () => {
  await client?.close();
  await s3?.stop();
});

function options(o: Partial<SluiceFsOptions> = {}): SluiceFsOptions {
  return {
    client, prefix: 'ds', channel: 'core-s3', cacheSize: 64 * MiB, partSize: 1 * MiB, maxPrefetch: 4 * MiB,
    maxInflight: 16 * MiB, crossFilePrefetch: 8, crossFileMaxSize: 1 * MiB, ...o,
  };
}

const pathOf = (key: string) => `/${key.slice('ds/'.length)}`;

async function readFile(fs: SluiceFs, path: string, chunk = 128 * KiB): Promise<Buffer> {
  const fh = await fs.open(path, 0);
  try {
    const parts: Buffer[] = [];
    for (let pos = 0; ; ) {
      const dst = Buffer.alloc(chunk);
      const n = await fs.read(fh, dst, chunk, pos);
      if (n === 0) return Buffer.concat(parts);
      parts.push(dst.subarray(0, n));
      pos += n;
    }
  } finally {
    await fs.release(fh);
  }
}

/** Every file path under `dir`, depth first, in listing order. */
function walk(fs: SluiceFs, dir = '/'): string[] {
  const out: string[] = [];
  for (const name of now(fs.readdir(dir), `readdir ${dir}`)) {
    const p = dir === '/' ? `/${name}` : `${dir}/${name}`;
    if ((now(fs.getattr(p), `getattr ${p}`).mode & 0o170000) === 0o040000) out.push(...walk(fs, p));
    else out.push(p);
  }
  return out;
}

t.test('the listing and sizes equal the bucket; every file read in listing order has the source sha256', async (t) => {
  const fs = await SluiceFs.create(options());
  t.teardown(() => fs.close());
  const files = walk(fs);
  t.same([...files].sort(), objects.map((o) => pathOf(o.key)).sort(), 'same files as the bucket');
  const byPath = new Map(objects.map((o) => [pathOf(o.key), o]));
  for (const p of files) {
    const o = byPath.get(p)!;
    t.equal(now(fs.getattr(p), `getattr ${p}`).size, o.size);
    const sha = createHash('sha256').update(await readFile(fs, p)).digest('hex');
    t.equal(sha, o.sha256, p) || t.bailout();
  }
  await new Promise((r) => setTimeout(r, 50));
  t.ok(fs.cache.stats.prefetchUsed.cross_file > 0, `cross-file prefetch served ${fs.cache.stats.prefetchUsed.cross_file} bytes`);
  t.ok(fs.cache.stats.prefetchUsed.sequential > 0, 'sequential read-ahead served the large files');
});

t.test('random preads across the large files equal the source bytes', async (t) => {
  const fs = await SluiceFs.create(options({ crossFilePrefetch: 0 }));
  t.teardown(() => fs.close());
  const large = objects.filter((o) => o.key.includes('/large/'));
  const src = large.map((o) => sourceBytes(o));
  const fhs = await Promise.all(large.map((o) => fs.open(pathOf(o.key), 0)));
  let x = 7;
  for (let i = 0; i < 80; i++) {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    const f = i % large.length;
    const len = 1 + (x % (200 * KiB));
    const pos = Math.floor(x / 3) % large[f]!.size;
    const dst = Buffer.alloc(len);
    const n = await fs.read(fhs[f]!, dst, len, pos);
    t.ok(dst.subarray(0, n).equals(src[f]!.subarray(pos, pos + len)), `pread ${len} at ${pos}`) || t.bailout();
  }
  for (const fh of fhs) await fs.release(fh);
});

t.test('8 concurrent readers over the same files get correct bytes', async (t) => {
  const fs = await SluiceFs.create(options());
  t.teardown(() => fs.close());
  const some = objects.filter((o) => o.key.includes('/d00/') || o.key.includes('/large/')).slice(0, 20);
  await Promise.all(Array.from({ length: 8 }, async (_, r) => {
    const order = r % 2 === 0 ? some : [...some].reverse();
    for (const o of order) {
      const got = await readFile(fs, pathOf(o.key), r % 3 === 0 ? 4096 * 3 : 128 * KiB);
      if (createHash('sha256').update(got).digest('hex') !== o.sha256) throw new Error(`reader ${r}: wrong bytes in ${o.key}`);
    }
  }));
  t.pass('all readers verified');
});

t.test('an object overwritten mid-read fails with ObjectChangedError, never mixed bytes', async (t) => {
  const key = 'ds/change/obj.bin';
  const before = Buffer.alloc(3 * MiB, 1);
  await s3.putObject(BUCKET, key, before);
  const fs = await SluiceFs.create(options({ maxPrefetch: 1 * MiB, crossFilePrefetch: 0 }));
  t.teardown(async () => {
    await fs.close();
    await s3.deleteObject(BUCKET, key);
  });
  const fh = await fs.open('/change/obj.bin', 0);
  const first = Buffer.alloc(64 * KiB);
  await fs.read(fh, first, first.length, 0);
  t.ok(first.equals(before.subarray(0, 64 * KiB)));
  await new Promise((r) => setTimeout(r, 50)); // let the first read-ahead land
  await s3.putObject(BUCKET, key, Buffer.alloc(3 * MiB, 2));
  let failure: unknown;
  for (let pos = 64 * KiB; pos < 3 * MiB; pos += 64 * KiB) {
    const dst = Buffer.alloc(64 * KiB);
    try {
      const n = await fs.read(fh, dst, dst.length, pos);
      t.ok(dst.subarray(0, n).equals(before.subarray(pos, pos + n)), `old bytes at ${pos}`);
    } catch (err) {
      failure = err;
      break;
    }
  }
  t.ok(failure instanceof ObjectChangedError, `failed with ${(failure as Error)?.name}`);
  await fs.release(fh);
});
