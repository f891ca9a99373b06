import t from 'tap';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { downloadChannel, safeTarget, sidecarPath } from '../../src/channels/file-mode.js';
import { listChannel } from '../../src/channels/sources.js';
import type { ChannelConfig } from '../../src/channels/input-config.js';
import { UnsafeKeyError } from '../../src/errors.js';
import { seedDataset } from '../../src/local/dataset.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import type { ObjectClient } from '../../src/s3/object-client.js';
import { createObjectClient } from '../../src/s3/s3-client.js';

const KiB = 1024;
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

const channel = (s3Uri: string): ChannelConfig => ({
  name: 'train', s3Uri, s3DataType: 'S3Prefix', distribution: 'FullyReplicated', inputMode: 'File', recordWrapper: 'None', compression: 'None',
});

t.test('File mode against the local server: bytes match, a second run skips, changes are fetched again', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket('bkt');
  const seeded = await seedDataset(s3, 'bkt', 'ds/', {
    smallFiles: { count: 24, size: 5000, folders: 4 }, largeFiles: { count: 2, size: 700 * KiB }, specialNames: true, seed: 3,
  });
  await s3.putObject('bkt', 'ds/empty.bin', Buffer.alloc(0));
  await s3.putObject('bkt', 'ds/folder-marker/', Buffer.alloc(0));
  const client = createObjectClient({ bucket: 'bkt', endpoint: s3.endpoint, region: 'us-east-1', pathStyle: true, credentials: s3.credentials, maxAttempts: 3 });
  t.teardown(() => client.close());
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'sluice-file-mode-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const dir = path.join(dataDir, 'train');

  const download = async () => {
    const { objects } = await listChannel(channel('s3://bkt/ds/'), () => client);
    // 256 KiB parts: the large objects go in several ranged parts, in parallel.
    return downloadChannel({ channel: 'train', dataDir, objects, partSize: 256 * KiB, maxInflight: 1024 * KiB, maxConnections: 6, progress: 'none' });
  };

  const first = await download();
  t.equal(first.downloaded, seeded.length + 1, 'every object (and the empty one) downloaded');
  t.equal(first.skipped, 0);
  for (const o of seeded) {
    const local = await readFile(path.join(dir, o.key.slice('ds/'.length)));
    t.equal(sha256(local), o.sha256, o.key) || t.fail(`bytes differ for ${o.key}`);
  }
  t.equal((await stat(path.join(dir, 'empty.bin'))).size, 0);
  t.ok((await stat(path.join(dir, 'folder-marker'))).isDirectory(), 'a folder marker becomes a folder');
  const all = await readdir(dir, { recursive: true });
  t.notOk(all.some((f) => String(f).endsWith('.sluice-part')), 'no temp files left');
  const sidecar = JSON.parse(await readFile(sidecarPath(dataDir, 'train'), 'utf8'));
  t.equal(Object.keys(sidecar.files).length, seeded.length + 1, 'the ETag record lists every file');

  const second = await download();
  t.same(second, { downloaded: 0, downloadedBytes: 0, skipped: seeded.length + 1, skippedBytes: first.downloadedBytes }, 'second run skips everything');

  // Change one object (new ETag, same size), and damage one local file (other size).
  const changed = seeded.find((o) => o.key.includes('small/'))!;
  const newBody = Buffer.alloc(changed.size, 7);
  await s3.putObject('bkt', changed.key, newBody);
  const damaged = seeded.find((o) => o.key.includes('large/'))!;
  await writeFile(path.join(dir, damaged.key.slice('ds/'.length)), 'short');
  const third = await download();
  t.equal(third.downloaded, 2, 'the changed object and the damaged file are fetched again');
  t.ok((await readFile(path.join(dir, changed.key.slice('ds/'.length)))).equals(newBody));
  t.equal(sha256(await readFile(path.join(dir, damaged.key.slice('ds/'.length)))), damaged.sha256);
});

/** A client that must never be called: unsafe keys are rejected before any GET. */
const untouchable: ObjectClient = {
  bucket: 'bkt',
  list: () => { throw new Error('list called'); },
  head: () => Promise.reject(new Error('head called')),
  getRange: () => Promise.reject(new Error('getRange called')),
  getStream: () => { throw new Error('getStream called'); },
  close: () => Promise.resolve(),
};

t.test('unsafe keys are rejected before anything is written', async (t) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'sluice-file-unsafe-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const cases: [string, RegExp][] = [
    ['../escape.txt', /"\.\." path segment/],
    ['a/../../escape.txt', /"\.\." path segment/],
    ['/etc/passwd', /absolute/],
    ['a/\0b', /NUL/],
    ['a/./b', /"\." path segment/],
  ];
  for (const [rel, re] of cases) {
    const objects = [
      { key: 'p/ok.bin', rel: 'ok.bin', size: 3, etag: '"x"', client: untouchable },
      { key: `p/${rel}`, rel, size: 3, etag: '"y"', client: untouchable },
    ];
    await t.rejects(downloadChannel({ channel: 'c', dataDir, objects, partSize: 1024, maxInflight: 4096, maxConnections: 2, progress: 'none' }),
      { code: 'SLUICE_UNSAFE_KEY', message: re }, rel);
  }
  t.same(await readdir(dataDir), [], 'nothing was written');
  t.same(safeTarget('/data/c', 'p/', ''), undefined);
  t.same(safeTarget('/data/c', 'p/a//b', 'a//b'), { file: '/data/c/a/b' });
  t.same(safeTarget('/data/c', 'p/d/', 'd/'), { folder: '/data/c/d' });
  t.throws(() => safeTarget('/data/c', 'p/x.sluice-part', 'x.sluice-part'), UnsafeKeyError);
});

t.test('two keys for one file are rejected', async (t) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'sluice-file-dup-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const objects = [
    { key: 'p/a//b', rel: 'a//b', size: 1, etag: '"x"', client: untouchable },
    { key: 'p/a/b', rel: 'a/b', size: 1, etag: '"y"', client: untouchable },
  ];
  await t.rejects(downloadChannel({ channel: 'c', dataDir, objects, partSize: 1024, maxInflight: 4096, maxConnections: 2, progress: 'none' }), /would write the same file/);
});
