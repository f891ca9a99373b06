/**
 * Issue 43 defect 5: two channels on one bucket, each read from its own snapshot, share one
 * S3 client (sluice run shares it per bucket). Channel B's pins must not replace channel
 * A's: every GET of either goes out with its own snapshot's versionId, checked on the wire
 * (test/helpers/versioned-proxy.ts records every request), and returns that version's bytes.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { generateBytes } from '../../src/local/dataset.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { setLogLevel } from '../../src/log.js';
import type { ObjectInfo } from '../../src/s3/object-client.js';
import { clientOptionsFrom, createObjectClient } from '../../src/s3/s3-client.js';
import { openDataset, snapshotObjectsFor } from '../../src/snapshot/dataset.js';
import { writeSnapshot } from '../../src/snapshot/snapshot.js';
import { testMountOptions, useLocalCredentials } from '../helpers/mount-options.js';
import { startVersionedProxy } from '../helpers/versioned-proxy.js';

setLogLevel('error');
const BUCKET = 'vpins';
const md5 = (b: Buffer) => `"${createHash('md5').update(b).digest('hex')}"`;

t.test('two channels pinned to different snapshots on one bucket: each GET carries its own versionId', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  useLocalCredentials(s3.credentials);
  await s3.createBucket(BUCKET);
  const proxy = await startVersionedProxy(s3, BUCKET);
  t.teardown(() => proxy.close());
  const dir = await mkdtemp(path.join(os.tmpdir(), 'versioned-channels-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));

  // Each channel's prefix: two keys, snapshotted, then overwritten (so only the pinned version has the snapshot's bytes).
  const snapped = new Map<string, { body: Buffer; versionId: string }>();
  const snapshots: Record<string, string> = {};
  for (const ch of ['train', 'val']) {
    const objects: ObjectInfo[] = [];
    for (const name of ['x.bin', 'y.bin']) {
      const key = `${ch}/${name}`;
      const body = generateBytes(key, 70_000, 1);
      const versionId = await proxy.put(key, body);
      snapped.set(key, { body, versionId });
      objects.push({ key, size: body.length, etag: md5(body), lastModified: new Date(), storageClass: 'STANDARD', versionId });
    }
    snapshots[ch] = path.join(dir, `${ch}.snap`);
    await writeSnapshot(snapshots[ch]!, { uri: `s3://${BUCKET}/${ch}/`, bucket: BUCKET, prefix: `${ch}/`, listing: { filters: [], skipArchived: false } }, objects);
  }
  for (const key of snapped.keys()) await proxy.put(key, generateBytes(key, 50_000, 2));

  // As sluice run does: one client for the bucket; each channel opens its snapshot and pins it, A first.
  const client = createObjectClient(clientOptionsFrom(BUCKET, testMountOptions(proxy.endpoint)));
  t.teardown(() => client.close());
  const chosen: ObjectInfo[] = [];
  for (const ch of ['train', 'val']) {
    const ds = await openDataset(undefined, { snapshot: snapshots[ch], skipArchived: false }, ch);
    chosen.push(...snapshotObjectsFor(ds, client));
  }
  const r0 = proxy.requests.length;
  for (const o of chosen) {
    const got = await client.getRange(o.key, 0, o.size, o.etag);
    t.ok(got.equals(snapped.get(o.key)!.body), `${o.key}: the snapshot's bytes`);
  }
  const gets = proxy.requests.slice(r0).filter((r) => r.startsWith(`GET /${BUCKET}/`));
  for (const [key, { versionId }] of snapped) {
    const mine = gets.filter((g) => g.startsWith(`GET /${BUCKET}/${key}`));
    t.ok(mine.length > 0, `${key}: fetched`);
    for (const g of mine) t.equal(g, `GET /${BUCKET}/${key}?versionId=${encodeURIComponent(versionId)}`, `${key}: its own snapshot's versionId on the wire`);
  }
  const head = await client.head('train/x.bin');
  t.equal(head.versionId, snapped.get('train/x.bin')!.versionId, 'a HEAD of channel A\'s key is pinned too');
});

t.test('one key pinned to two versions on one client is refused with one line, and the first pins stay', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  useLocalCredentials(s3.credentials);
  await s3.createBucket(BUCKET);
  const client = createObjectClient(clientOptionsFrom(BUCKET, testMountOptions(s3.endpoint)));
  t.teardown(() => client.close());
  client.pinVersions!(new Map([['k/a', 'v1'], ['k/b', 'v1']]));
  t.throws(() => client.pinVersions!(new Map([['k/c', 'v2'], ['k/a', 'v2']])), { code: 'SLUICE_SNAPSHOT', message: /s3:\/\/vpins\/k\/a is pinned to version "v1" by one snapshot and "v2" by another/ });
  client.pinVersions!(new Map([['k/a', 'v1'], ['k/d', 'v3']]));
  t.pass('the same pin again, and new keys, are taken');
});
