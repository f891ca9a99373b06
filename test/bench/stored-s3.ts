/**
 * The bench's stored S3 server (src/bench/stored-s3.ts, scenario `server: stored`): objects
 * seeded into s3rver, then served from memory by the synthetic server's handling. Through
 * sluice's S3 client: the listing is every seeded key once, HEAD gives the seeded size and
 * ETag, whole and ranged GETs give the seeded bytes (sha256 against the source).
 */
import { createHash } from 'node:crypto';
import t from 'tap';
import { loadFromS3rverDir } from '../../src/bench/stored-s3.js';
import { startSyntheticS3 } from '../../src/bench/synthetic-s3.js';
import { benchLayout } from '../../src/bench/datasets.js';
import { sourceBytes, uploadLayout } from '../../src/local/dataset.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { createObjectClient } from '../../src/s3/s3-client.js';

const BUCKET = 'stored';

t.test('the seeded objects, served from memory: listing, HEAD, whole and ranged GETs', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket(BUCKET);
  const layout = benchLayout('ds/', { smallFiles: { count: 40, size: 3000, folders: 4 }, largeFiles: { count: 1, size: 200_000 } });
  const objs = await uploadLayout(s3, BUCKET, layout, 3);
  const server = await startSyntheticS3({ bucket: BUCKET, root: '', total: 0, objects: loadFromS3rverDir(s3.dir, BUCKET, objs) });
  const client = createObjectClient({ bucket: BUCKET, endpoint: server.endpoint, region: 'us-east-1', pathStyle: true, credentials: s3.credentials, maxAttempts: 3, requestTimeoutMs: 10_000, maxConnections: 8 });
  t.teardown(async () => { await client.close(); await server.close(); });

  const listed: string[] = [];
  for await (const o of client.list('ds/')) listed.push(o.key);
  t.same(listed.sort(), objs.map((o) => o.key).sort(), 'every seeded key once');
  for (const o of objs) {
    const info = await client.head(o.key);
    t.equal(info.size, o.size, `${o.key}: size`);
    t.equal(info.etag, o.etag, `${o.key}: the ETag s3rver gave`);
    const whole = await client.getRange(o.key, 0, o.size, o.etag);
    t.equal(createHash('sha256').update(whole).digest('hex'), o.sha256, `${o.key}: bytes`);
  }
  const large = objs.find((o) => o.size === 200_000)!;
  const part = await client.getRange(large.key, 12_345, 150_001, large.etag);
  t.ok(part.equals(sourceBytes(large).subarray(12_345, 150_001)), 'a ranged GET gives the source bytes');
  t.throws(() => loadFromS3rverDir(s3.dir, BUCKET, [{ ...objs[0]!, size: objs[0]!.size + 1 }]), /seeded/, 'a size that differs from the folder is refused');
});
