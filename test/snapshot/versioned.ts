/**
 * Snapshots of a versioned bucket (issue 15): `sluice snapshot` and --snapshot-out record
 * the version id of each key's current version, and a mount from the snapshot GETs those
 * versions (?versionId=), so it reads the snapshot's bytes after the keys were overwritten.
 * s3rver has no versioning: test/helpers/versioned-proxy.ts answers GetBucketVersioning and
 * ListObjectVersions in S3's XML, keeps noncurrent versions, and forwards the rest.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { listChannel } from '../../src/channels/sources.js';
import { run as snapshotCommand } from '../../src/commands/snapshot.js';
import { mountFastFile } from '../../src/fuse/fastfile.js';
import { generateBytes } from '../../src/local/dataset.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { clientOptionsFrom, createObjectClient } from '../../src/s3/s3-client.js';
import { readSnapshot } from '../../src/snapshot/snapshot.js';
import { tempMountpoint } from '../helpers/fuse.js';
import { testMountOptions, useLocalCredentials } from '../helpers/mount-options.js';
import { startVersionedProxy } from '../helpers/versioned-proxy.js';
import '../helpers/exit-watch.js';

const BUCKET = 'vers';
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

t.test('snapshots of a versioned bucket record version ids and read those versions', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  useLocalCredentials(s3.credentials);
  await s3.createBucket(BUCKET);
  // Pages of 3 entries: a key's versions are split across pages, and a page can hold only
  // noncurrent versions and delete markers.
  const proxy = await startVersionedProxy(s3, BUCKET, { pageSize: 3 });
  t.teardown(() => proxy.close());
  const body = (key: string, seed: number) => generateBytes(key, 300_000, seed);
  const ids: Record<string, string> = {};
  /** Version ids after the overwrites. */
  const now: Record<string, string> = {};
  ids['data/a.bin'] = await proxy.put('data/a.bin', body('data/a.bin', 1), { nullVersion: true }); // written before versioning
  await proxy.put('data/b.bin', body('data/b.bin', 1));
  ids['data/b.bin'] = await proxy.put('data/b.bin', body('data/b.bin', 2));
  await proxy.put('data/c.bin', body('data/c.bin', 1));
  await proxy.remove('data/c.bin'); // deleted: a delete marker is its current version
  ids['data/d.bin'] = await proxy.put('data/d.bin', body('data/d.bin', 1));
  for (let s = 1; s <= 3; s++) ids['data/sub/e.bin'] = await proxy.put('data/sub/e.bin', body('data/sub/e.bin', s));
  for (const k of ['data/zz/1.bin', 'data/zz/2.bin']) { await proxy.put(k, body(k, 1)); await proxy.remove(k); }
  const snapped: Record<string, Buffer> = {
    'data/a.bin': body('data/a.bin', 1), 'data/b.bin': body('data/b.bin', 2), 'data/d.bin': body('data/d.bin', 1), 'data/sub/e.bin': body('data/sub/e.bin', 3),
  };
  const dir = await mkdtemp(path.join(os.tmpdir(), 'versioned-'));
  const file = path.join(dir, 'v.snap.gz');
  const cli = (uri: string, out: string) => snapshotCommand([uri, out, '--endpoint', proxy.endpoint, '--path-style', '--region', 'us-east-1', '--log-level', 'silent']);

  t.test('sluice snapshot lists versions and records each current version id', async (t) => {
    const r0 = proxy.requests.length;
    t.equal(await cli(`s3://${BUCKET}/data/`, file), 0);
    const s = await readSnapshot(file);
    t.same(s.objects.map((o) => o.key), ['data/a.bin', 'data/b.bin', 'data/d.bin', 'data/sub/e.bin'], 'current versions only: no deleted key, no noncurrent version');
    t.same(s.objects.map((o) => o.versionId), ['null', ids['data/b.bin'], ids['data/d.bin'], ids['data/sub/e.bin']], 'the "null" version id of an object written before versioning is kept');
    for (const o of s.objects) {
      t.equal(o.etag, `"${createHash('md5').update(snapped[o.key]!).digest('hex')}"`, `${o.key}: the ETag of that version`);
      t.equal(o.size, 300_000);
    }
    const sent = proxy.requests.slice(r0);
    t.ok(sent.some((r) => /^GET \/vers\/\?versioning=/.test(r)), 'asked GetBucketVersioning');
    t.ok(sent.filter((r) => /^GET \/vers\/\?.*versions=/.test(r)).length > 3, 'listed versions, several pages');
    t.notOk(sent.some((r) => r.includes('list-type=2')), 'no ListObjectsV2');
    t.ok(sent.some((r) => r.includes('version-id-marker=')), 'followed NextKeyMarker and NextVersionIdMarker');
  });

  t.test('a mount from the snapshot GETs those versions: the snapshot\'s bytes after an overwrite and a delete', async (t) => {
    now['data/a.bin'] = await proxy.put('data/a.bin', body('data/a.bin', 9)); // the null version becomes noncurrent
    await proxy.remove('data/b.bin'); // deleted: a delete marker on top of the snapshot's version
    const r0 = proxy.requests.length;
    const mnt = await tempMountpoint(t, 'versioned');
    const m = await mountFastFile({ uri: undefined, mountpoint: mnt, channel: 'vmount', options: testMountOptions(proxy.endpoint), dataset: { snapshot: file, skipArchived: false } });
    t.teardown(() => m.unmount());
    for (const [k, b] of Object.entries(snapped)) t.equal(sha(await readFile(path.join(mnt, k.slice(5)))), sha(b), `${k}: the snapshot's version`);
    const gets = proxy.requests.slice(r0).filter((r) => r.startsWith('GET /vers/'));
    t.ok(gets.length >= 4, 'the reads went to S3');
    for (const g of gets) t.match(g, /\?versionId=[^&]+$/, `pinned: ${g}`);
    t.ok(gets.includes('GET /vers/data/a.bin?versionId=null'), 'GET ?versionId=null');
    t.ok(gets.includes(`GET /vers/data/b.bin?versionId=${encodeURIComponent(ids['data/b.bin']!)}`), 'GET ?versionId= of the old version');
    t.notOk(proxy.requests.slice(r0).some((r) => r.includes('versions') || r.includes('list-type')), 'no listing');

    // The snapshot's version of a key deleted for good since: ESTALE, as a deleted key.
    now['data/sub/e.bin'] = await proxy.put('data/sub/e.bin', body('data/sub/e.bin', 9));
    proxy.purge('data/sub/e.bin', ids['data/sub/e.bin']!);
    const m2 = await mountFastFile({ uri: undefined, mountpoint: await tempMountpoint(t, 'versioned-gone'), channel: 'vgone', options: testMountOptions(proxy.endpoint), dataset: { snapshot: file, skipArchived: false } });
    t.teardown(() => m2.unmount());
    let got: Buffer | undefined;
    const err = await readFile(path.join(m2.mountpoint, 'sub', 'e.bin')).then((b) => { got = b; return undefined; }, (e: NodeJS.ErrnoException) => e);
    t.equal(got, undefined, 'no bytes of another version');
    t.equal(err?.errno, -116, `ESTALE, got ${err?.code}`);
    t.ok(proxy.requests.includes(`GET /vers/data/sub/e.bin?versionId=${encodeURIComponent(ids['data/sub/e.bin']!)}`), 'it asked for the purged version');
  });

  t.test('--snapshot-out of a run that listed records version ids (FastFile and Pipe)', async (t) => {
    const out = path.join(dir, 'out.snap');
    const mnt = await tempMountpoint(t, 'versioned-out');
    const m = await mountFastFile({ uri: `s3://${BUCKET}/data/`, mountpoint: mnt, channel: 'vout', options: testMountOptions(proxy.endpoint), dataset: { snapshotOut: out, skipArchived: false } });
    t.teardown(() => m.unmount());
    await m.listed;
    const s = await readSnapshot(out);
    t.same(s.objects.map((o) => [o.key, o.versionId]), [
      ['data/a.bin', now['data/a.bin']], ['data/d.bin', ids['data/d.bin']], ['data/sub/e.bin', now['data/sub/e.bin']],
    ], 'the current version of each key (b.bin is deleted)');
    t.equal(sha(await readFile(path.join(mnt, 'a.bin'))), sha(body('data/a.bin', 9)), 'the run itself reads the current bytes');

    const client = createObjectClient(clientOptionsFrom(BUCKET, testMountOptions(proxy.endpoint)));
    t.teardown(() => client.close());
    const pipeOut = path.join(dir, 'pipe.snap');
    const base = { s3DataType: 'S3Prefix', distribution: 'FullyReplicated', recordWrapper: 'None', compression: 'None' } as const;
    await listChannel({ ...base, name: 'vpipe', s3Uri: `s3://${BUCKET}/data/`, inputMode: 'Pipe', snapshotOut: pipeOut }, () => client);
    t.same((await readSnapshot(pipeOut)).objects.map((o) => o.versionId), s.objects.map((o) => o.versionId), 'a Pipe channel records the same');
  });

  t.test('unversioned, or versioning not visible: no version ids, ListObjectsV2', async (t) => {
    const cases = [
      ['never enabled (no <Status>)', () => { proxy.status = 'never'; }],
      ['GetBucketVersioning refused (403)', () => { proxy.status = 'denied'; }],
      ['ListObjectVersions refused (403)', () => { proxy.status = 'Enabled'; proxy.denyVersionListing = true; }],
    ] as const;
    t.teardown(() => { proxy.status = 'Enabled'; proxy.denyVersionListing = false; });
    for (const [name, set] of cases) {
      set();
      const out = path.join(dir, 'plain.snap');
      const r0 = proxy.requests.length;
      t.equal(await cli(`s3://${BUCKET}/data/`, out), 0, name);
      const s = await readSnapshot(out);
      t.same(s.objects.map((o) => o.key), ['data/a.bin', 'data/d.bin', 'data/sub/e.bin'], `${name}: the same keys (b.bin deleted since)`);
      t.same(s.objects.filter((o) => o.versionId !== undefined), [], `${name}: no version ids`);
      t.ok(proxy.requests.slice(r0).some((r) => r.includes('list-type=2')), `${name}: listed with ListObjectsV2`);
    }
    // s3rver itself ignores ?versioning and answers with a listing: no <Status>.
    const out = path.join(dir, 's3rver.snap');
    t.equal(await snapshotCommand([`s3://${BUCKET}/data/`, out, '--endpoint', s3.endpoint, '--path-style', '--region', 'us-east-1', '--log-level', 'silent']), 0);
    t.same((await readSnapshot(out)).objects.filter((o) => o.versionId !== undefined), [], 's3rver: no version ids');
  });
});
