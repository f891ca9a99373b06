import t from 'tap';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { s3rverPath, startLocalS3 } from '../../src/local/s3-server.js';
import { ConfigError } from '../../src/errors.js';
import { seedDataset, sourceBytes } from '../../src/local/dataset.js';

t.test('starts s3rver on loopback, stores objects, stops and cleans up', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  t.match(s3.endpoint, /^http:\/\/127\.0\.0\.1:\d+$/);
  t.ok(s3.port > 0);
  await s3.createBucket('bkt');
  const etag = await s3.putObject('bkt', 'a/hello.txt', Buffer.from('hello'));
  t.match(etag, /^"[0-9a-f]{32}"$/);

  const objs = await seedDataset(s3, 'bkt', 'ds/', {
    smallFiles: { count: 20, size: 100, folders: 4 }, largeFiles: { count: 1, size: 300_000 }, specialNames: true, seed: 7,
  });
  t.equal(objs.length, 20 + 1 + 6);
  const sdk = new S3Client({ endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: s3.credentials });
  t.teardown(() => sdk.destroy());
  const listed = await sdk.send(new ListObjectsV2Command({ Bucket: 'bkt', Prefix: 'ds/' }));
  t.same((listed.Contents ?? []).map((c) => c.Key).sort(), objs.map((o) => o.key).sort());
  for (const o of objs.filter((o) => o.key.includes('special/') || o.key.includes('large/'))) {
    const got = await sdk.send(new GetObjectCommand({ Bucket: 'bkt', Key: o.key }));
    const body = Buffer.from(await got.Body!.transformToByteArray());
    t.equal(createHash('sha256').update(body).digest('hex'), o.sha256, o.key);
    t.equal(got.ETag, o.etag);
    t.ok(body.equals(sourceBytes(o)));
  }
  await s3.deleteObject('bkt', 'a/hello.txt');

  const dir = s3.dir;
  await s3.stop();
  await s3.stop(); // idempotent
  t.notOk(existsSync(dir), 'temp dir removed');
});

t.test('a given directory is used and kept; objects survive a restart', async (t) => {
  const { mkdtemp, rm } = await import('node:fs/promises');
  const os = await import('node:os');
  const path = await import('node:path');
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-s3-test-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const a = await startLocalS3({ dir });
  t.teardown(() => a.stop());
  t.equal(a.dir, dir);
  await a.createBucket('keep');
  const etag = await a.putObject('keep', 'k', Buffer.from('kept'));
  await a.stop();
  t.ok(existsSync(dir), 'kept');
  const b = await startLocalS3({ dir });
  t.teardown(() => b.stop());
  t.not(b.port, 0);
  const sdk = new S3Client({ endpoint: b.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: b.credentials });
  t.teardown(() => sdk.destroy());
  const got = await sdk.send(new GetObjectCommand({ Bucket: 'keep', Key: 'k' }));
  t.equal(got.ETag, etag);
  t.equal(Buffer.from(await got.Body!.transformToByteArray()).toString(), 'kept');
});

t.test('without s3rver (a production install) the error is one line naming the fix', async (t) => {
  const missing = () => { throw Object.assign(new Error("Cannot find module 's3rver'"), { code: 'MODULE_NOT_FOUND' }); };
  const err = (() => { try { s3rverPath(missing); } catch (e) { return e; } return undefined; })();
  t.ok(err instanceof ConfigError, 'a user error, printed without a stack');
  t.match((err as ConfigError).oneLine(), /s3rver.*not installed.*npm ci/);
  t.notMatch((err as ConfigError).oneLine(), /\n/);
  t.match(s3rverPath(), /s3rver/, 'found in this development install');
});
