/**
 * A FastFile mount answers before its listing completes (src/fuse/fastfile.ts and the
 * early lookups of src/fs/core.ts), end to end: the real S3 client against the local S3
 * server through a proxy that holds the listing's flat pages (its first, folder-level page
 * goes through: the mount waits for it), a real kernel mount. A known file is
 * read through the kernel, byte for byte, while the listing is still held; `ls` waits
 * for the listing and then shows every name.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { NoSuchBucketError } from '../../src/errors.js';
import { mountFastFile, type FastFileMount } from '../../src/fuse/fastfile.js';
import { mountAt } from '../../src/fuse/mountpoint.js';
import { seedDataset } from '../../src/local/dataset.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { tempMountpoint } from '../helpers/fuse.js';
import { localS3BehindProxy, testMountOptions, useLocalCredentials } from '../helpers/mount-options.js';

const BUCKET = 'early';
const PREFIX = 'data/';
/** Polls for the kernel mount: bounded, as every wait here. */
const POLL_MS = 20;
const WAIT_MS = 30_000;

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('a known file reads exactly while the listing is held; ls waits for the listing', async (t) => {
  const { s3, proxy } = await localS3BehindProxy(t, BUCKET);
  const objects = await seedDataset(s3, BUCKET, PREFIX, { smallFiles: { count: 40, size: 30_000, folders: 4 }, largeFiles: { count: 1, size: 3 * 1024 * 1024 } });
  proxy.set({ holdListings: true });

  const dir = await tempMountpoint(t, 'early');
  const mounting = mountFastFile({ uri: `s3://${BUCKET}/${PREFIX}`, mountpoint: dir, options: testMountOptions(proxy.endpoint) });
  let mount: FastFileMount | undefined;
  let mountError: unknown;
  mounting.then((m) => { mount = m; }, (err: unknown) => { mountError = err; });
  t.teardown(async () => {
    proxy.set({ holdListings: false });
    await Promise.race([mounting.catch(() => undefined), sleep(WAIT_MS)]);
    await mount?.unmount();
  });

  for (const t0 = Date.now(); !(await mountAt(dir)); ) {
    if (Date.now() - t0 > WAIT_MS) throw new Error('the mount did not come up');
    await sleep(POLL_MS);
  }
  // The folder-level pages went through (the mount waited for the first); the flat pages wait.
  for (const t0 = Date.now(); proxy.counts.heldListings! < 1 && Date.now() - t0 < WAIT_MS; ) await sleep(POLL_MS);
  t.ok(proxy.counts.heldListings! >= 1, 'the listing is being held');

  for (const o of [objects[0]!, objects[17]!, objects.find((x) => x.key.includes('/large/'))!]) {
    const file = path.join(dir, o.key.slice(PREFIX.length));
    t.equal((await stat(file)).size, o.size, `stat ${o.key} before the listing completed`);
    t.equal(sha(await readFile(file)), o.sha256, `${o.key}: exact bytes before the listing completed`);
  }
  t.equal(mountError, undefined);
  const early = await Promise.race([mounting, sleep(WAIT_MS).then(() => undefined)]);
  t.equal(early?.core.isListed, false, 'mountFastFile resolved before the listing completed');

  let names: string[] | undefined;
  const ls = readdir(dir).then((n) => { names = n; });
  await sleep(200);
  t.equal(names, undefined, 'ls waits for the listing (no partial folder)');

  proxy.set({ holdListings: false });
  await ls;
  t.same(names!.sort(), ['large', 'small']);
  const m = await mounting;
  await m.listed;
  t.equal(m.core.fileCount, objects.length, 'every object is in the view once listed');
});

t.test('a bucket that does not exist: the mount comes down and the error is the bucket\'s', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  useLocalCredentials(s3.credentials);
  const dir = await tempMountpoint(t, 'early-nobucket');
  await t.rejects(mountFastFile({ uri: 's3://no-such-bucket-here/x/', mountpoint: dir, options: testMountOptions(s3.endpoint) }), NoSuchBucketError);
  t.notOk(await mountAt(dir), 'nothing is left mounted');
});
