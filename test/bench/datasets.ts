import t from 'tap';
import { createHash } from 'node:crypto';
import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { benchLayout, writeS3rverObjects } from '../../src/bench/datasets.js';
import { generateBytes } from '../../src/local/dataset.js';
import { startLocalS3 } from '../../src/local/s3-server.js';

t.test('keys are at most one folder below the prefix (s3rver delimiter listings)', async (t) => {
  const l = benchLayout('p/', { smallFiles: { count: 10, size: 5, folders: 3 }, largeFiles: { count: 2, size: 9 } });
  t.equal(l.length, 12);
  for (const o of l) t.ok(o.key.slice(2).split('/').length <= 2, o.key);
  t.same(l.filter((o) => o.key.startsWith('p/large/')).map((o) => o.size), [9, 9]);
  t.equal(new Set(l.map((o) => o.key)).size, 12, 'unique keys');
  const flat = benchLayout('q/', { smallFiles: { count: 3, size: 1 } });
  t.same(flat.map((o) => o.key), ['q/file-00000.bin', 'q/file-00001.bin', 'q/file-00002.bin']);
});

t.test("objects written into s3rver's folder are listed and served as if PUT", async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket('bkt');
  const layout = benchLayout('d/', { smallFiles: { count: 1500, size: 37, folders: 3 } });
  const objs = await writeS3rverObjects(s3, 'bkt', layout, 5);
  // one PUT beside them: the ETag of the same bytes must be the same
  const put = await s3.putObject('bkt', 'x/same.bin', generateBytes(layout[7]!.key, 37, 5));
  t.equal(put, objs[7]!.etag, 'ETag as a PUT of the same bytes');
  const sdk = new S3Client({ endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: s3.credentials });
  t.teardown(() => sdk.destroy());
  const keys: string[] = [];
  let token: string | undefined;
  do { // paged, as every client lists (1,000 per page)
    const page = await sdk.send(new ListObjectsV2Command({ Bucket: 'bkt', Prefix: 'd/', ContinuationToken: token }));
    for (const c of page.Contents ?? []) { keys.push(c.Key!); t.equal(c.Size, 37); }
    token = page.NextContinuationToken;
  } while (token);
  t.same(keys, layout.map((o) => o.key).sort(), 'every key listed once, in order');
  for (const o of [objs[0]!, objs[777]!, objs[1499]!]) {
    const got = await sdk.send(new GetObjectCommand({ Bucket: 'bkt', Key: o.key }));
    const body = Buffer.from(await got.Body!.transformToByteArray());
    t.equal(createHash('sha256').update(body).digest('hex'), o.sha256, o.key);
    t.equal(got.ETag, o.etag);
  }
});
