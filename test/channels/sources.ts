import t from 'tap';
import { listChannel, relativePath } from '../../src/channels/sources.js';
import type { ChannelConfig } from '../../src/channels/input-config.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import type { ObjectClient } from '../../src/s3/object-client.js';
import { createObjectClient } from '../../src/s3/s3-client.js';
import { MemoryClient } from '../helpers/pipe.js';

const base: Omit<ChannelConfig, 's3Uri' | 's3DataType'> = { name: 'c', distribution: 'FullyReplicated', inputMode: 'Pipe', recordWrapper: 'None', compression: 'None' };

t.test('relativePath: below the prefix, or below the prefix\'s folder', async (t) => {
  t.equal(relativePath('data/train/a/b.bin', 'data/train/'), 'a/b.bin');
  t.equal(relativePath('data/train/a/b.bin', 'data/train'), 'a/b.bin');
  t.equal(relativePath('data/train2/x', 'data/train'), 'train2/x');
  t.equal(relativePath('data/one.csv', 'data/one.csv'), 'one.csv');
  t.equal(relativePath('x/y', ''), 'x/y');
});

t.test('S3Prefix, ManifestFile and AugmentedManifestFile against the local server', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket('bkt');
  await s3.createBucket('other');
  const clients = new Map<string, ObjectClient>();
  const clientFor = (bucket: string) => {
    let c = clients.get(bucket);
    if (!c) {
      c = createObjectClient({ bucket, endpoint: s3.endpoint, region: 'us-east-1', pathStyle: true, credentials: s3.credentials, maxAttempts: 2 });
      clients.set(bucket, c);
    }
    return c;
  };
  t.teardown(() => Promise.all([...clients.values()].map((c) => c.close())));
  for (const k of ['b', 'a', 'c', 'sub/d']) await s3.putObject('bkt', `data/${k}`, Buffer.from(`body-${k}`));
  await s3.putObject('other', 'img/x.jpg', Buffer.from('xx-jpeg'));

  const prefix = await listChannel({ ...base, s3Uri: 's3://bkt/data/', s3DataType: 'S3Prefix' }, clientFor);
  t.same(prefix.objects.map((o) => [o.key, o.rel, o.size]), [['data/a', 'a', 6], ['data/b', 'b', 6], ['data/c', 'c', 6], ['data/sub/d', 'sub/d', 10]]);
  t.same(prefix.units.map((u) => u.key), ['data/a', 'data/b', 'data/c', 'data/sub/d']);

  // ManifestFile: manifest order is kept (units sort by position), sizes come from S3.
  await s3.putObject('bkt', 'm/train.manifest', Buffer.from('[{"prefix": "s3://bkt/data/"},\n"c",\n"sub/d",\n"a"\n]\n'));
  const manifest = await listChannel({ ...base, s3Uri: 's3://bkt/m/train.manifest', s3DataType: 'ManifestFile' }, clientFor);
  t.same(manifest.objects.map((o) => [o.key, o.rel, o.size]), [['data/c', 'c', 6], ['data/sub/d', 'sub/d', 10], ['data/a', 'a', 6]]);
  t.same(manifest.units.map((u) => u.key).slice().sort(), manifest.units.map((u) => u.key), 'unit keys sort in manifest order');

  await s3.putObject('bkt', 'm/missing.manifest', Buffer.from('[{"prefix": "s3://bkt/data/"},\n"a",\n"nope"]'));
  await t.rejects(listChannel({ ...base, s3Uri: 's3://bkt/m/missing.manifest', s3DataType: 'ManifestFile' }, clientFor),
    { code: 'SLUICE_MANIFEST', message: 'manifest line 3: s3://bkt/data/nope does not exist' });
  await s3.putObject('bkt', 'm/bad.manifest', Buffer.from('[{"prefix": "s3://bkt/data/"},\n"a",\n7]'));
  await t.rejects(listChannel({ ...base, s3Uri: 's3://bkt/m/bad.manifest', s3DataType: 'ManifestFile' }, clientFor), { code: 'SLUICE_MANIFEST', message: /^manifest line 3: / });

  // AugmentedManifestFile: per line, the attributes in AttributeNames order; -ref across buckets.
  await s3.putObject('bkt', 'm/aug.jsonl', Buffer.from('{"source-ref": "s3://bkt/data/a", "class": 1}\n{"class": "cat", "source-ref": "s3://other/img/x.jpg"}\n'));
  const aug = await listChannel({ ...base, s3Uri: 's3://bkt/m/aug.jsonl', s3DataType: 'AugmentedManifestFile', attributeNames: ['source-ref', 'class'] }, clientFor);
  t.same(aug.objects, []);
  t.equal(aug.units.length, 2);
  const describe = aug.units.map((u) => u.items.map((i) => (i.kind === 'inline' ? i.data.toString() : `${i.client?.bucket}:${i.info.key}:${i.info.size}`)));
  t.same(describe, [['bkt:data/a:6', '1'], ['other:img/x.jpg:7', '"cat"']]);
  t.same(aug.units.map((u) => u.size), [7, 12]);
  await s3.putObject('bkt', 'm/aug-missing.jsonl', Buffer.from('{"source-ref": "s3://bkt/data/a", "class": 1}\n\n{"source-ref": "s3://bkt/data/zz", "class": 1}\n'));
  await t.rejects(listChannel({ ...base, s3Uri: 's3://bkt/m/aug-missing.jsonl', s3DataType: 'AugmentedManifestFile', attributeNames: ['source-ref', 'class'] }, clientFor),
    { code: 'SLUICE_MANIFEST', message: 'manifest line 3: s3://bkt/data/zz does not exist' });
});

t.test('a large ManifestFile is resolved by one listing, not a HEAD per entry', async (t) => {
  const client = new MemoryClient('bkt');
  const names = Array.from({ length: 300 }, (_, i) => `f${String(i).padStart(3, '0')}`);
  for (const n of names) client.put(`data/${n}`, Buffer.from(n));
  client.put('other/unlisted', Buffer.from('x'));
  const entries = names.slice().reverse();
  client.put('m.manifest', Buffer.from(JSON.stringify([{ prefix: 's3://bkt/data/' }, ...entries]).replace(/","/g, '",\n"')));
  let heads = 0;
  const head = client.head.bind(client);
  client.head = async (key: string) => { heads++; return head(key); };
  const got = await listChannel({ ...base, s3Uri: 's3://bkt/m.manifest', s3DataType: 'ManifestFile' }, () => client);
  t.same(got.objects.map((o) => o.rel), entries, 'manifest order');
  t.equal(heads, 1, 'only the manifest itself was HEADed');
  client.put('m2.manifest', Buffer.from(JSON.stringify([{ prefix: 's3://bkt/data/' }, ...entries, 'missing']).replace(/","/g, '",\n"')));
  await t.rejects(listChannel({ ...base, s3Uri: 's3://bkt/m2.manifest', s3DataType: 'ManifestFile' }, () => client),
    { code: 'SLUICE_MANIFEST', message: 'manifest line 301: s3://bkt/data/missing does not exist' });
});

t.test('augmented manifest refs: listed per bucket when many, the listing capped, the rest HEADed', async (t) => {
  const client = new MemoryClient('bkt');
  const small = new MemoryClient('small');
  // 1,300 unrelated objects under the refs' common prefix, listed before them.
  for (let i = 0; i < 1300; i++) client.put(`img/f-extra-${String(i).padStart(4, '0')}`, Buffer.from('e'));
  const lines: string[] = [];
  for (let i = 0; i < 300; i++) {
    client.put(`img/f${String(i).padStart(3, '0')}.jpg`, Buffer.from(`jpeg ${i}`));
    lines.push(JSON.stringify({ 'source-ref': `s3://bkt/img/f${String(i).padStart(3, '0')}.jpg`, class: i % 2 }));
  }
  small.put('x/one.jpg', Buffer.from('one'));
  lines.push(JSON.stringify({ 'source-ref': 's3://small/x/one.jpg', class: 9 }));
  client.put('aug.jsonl', Buffer.from(lines.join('\n')));
  const heads: Record<string, number> = { bkt: 0, small: 0 };
  for (const c of [client, small]) {
    const head = c.head.bind(c);
    c.head = async (key: string) => { heads[c.bucket]!++; return head(key); };
  }
  const clientFor = (b: string) => (b === 'bkt' ? client : small);
  const aug = { ...base, s3Uri: 's3://bkt/aug.jsonl', s3DataType: 'AugmentedManifestFile' as const, attributeNames: ['source-ref', 'class'] };
  const got = await listChannel(aug, clientFor);
  t.equal(got.units.length, 301);
  t.same(got.units[7]!.items.map((i) => (i.kind === 'inline' ? i.data.toString() : `${i.info.key}:${i.info.size}`)), ['img/f007.jpg:6', '1']);
  t.equal(heads.small, 1, 'a bucket with few refs: HEADs');
  t.equal(heads.bkt, 1 + 300, 'the listing stopped at 4x the refs (1,200 unrelated objects), so the refs were HEADed');

  // Without the unrelated objects, one listing finds every ref.
  for (let i = 0; i < 1300; i++) client.objects.delete(`img/f-extra-${String(i).padStart(4, '0')}`);
  heads.bkt = 0;
  await listChannel(aug, clientFor);
  t.equal(heads.bkt, 1, 'only the manifest itself was HEADed');
});

t.test('S3Prefix: folder markers are objects (File makes folders) but never units (Pipe, sharding)', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket('bkt');
  const client = createObjectClient({ bucket: 'bkt', endpoint: s3.endpoint, region: 'us-east-1', pathStyle: true, credentials: s3.credentials, maxAttempts: 2 });
  t.teardown(() => client.close());
  for (const k of ['p/', 'p/a', 'p/sub/', 'p/sub/b']) await s3.putObject('bkt', k, Buffer.from(k.endsWith('/') ? '' : `body-${k}`));
  const l = await listChannel({ ...base, s3Uri: 's3://bkt/p/', s3DataType: 'S3Prefix' }, () => client);
  t.same(l.objects.map((o) => o.key), ['p/', 'p/a', 'p/sub/', 'p/sub/b'], 'the listing has the markers');
  t.same(l.units.map((u) => u.key), ['p/a', 'p/sub/b'], 'units skip them');
});
