/**
 * The synthetic S3 (src/bench/synthetic-s3.ts) through sluice's real S3 client: listings
 * are every formula key exactly once (folders, flat, with injected 503 SlowDown and a
 * server that refuses past N requests in progress), delimiter pages are S3's, HEAD and
 * ranged GETs return the formula's bytes. Also checks that the listing adapts: under
 * throttling the client's AIMD limit drops below --max-connections.
 */
import t from 'tap';
import type { Test } from '../helpers/tap.js';
import { startSyntheticS3, SyntheticKeys, listPage, type SyntheticS3Options } from '../../src/bench/synthetic-s3.js';
import { createObjectClient, S3ObjectClient } from '../../src/s3/s3-client.js';
import type { ObjectInfo } from '../../src/s3/object-client.js';

const BUCKET = 'synth';
const CRED = { accessKeyId: 'x', secretAccessKey: 'y' };

async function serve(t: Test, o: Omit<SyntheticS3Options, 'bucket'>, maxConnections = 16) {
  const s3 = await startSyntheticS3({ bucket: BUCKET, delayMs: 2, ...o });
  const client = createObjectClient({ bucket: BUCKET, endpoint: s3.endpoint, region: 'us-east-1', pathStyle: true, credentials: CRED, maxAttempts: 10, requestTimeoutMs: 10_000, maxConnections });
  t.teardown(async () => { await client.close(); await s3.close(); });
  return { s3, client };
}

async function keysOf(it: AsyncIterable<ObjectInfo>): Promise<string[]> {
  const out: string[] = [];
  for await (const o of it) out.push(o.key);
  return out.sort();
}

function expected(o: ConstructorParameters<typeof SyntheticKeys>[0]): string[] {
  const k = new SyntheticKeys(o);
  return Array.from({ length: o.total }, (_, i) => k.key(i));
}

t.test('the formula: key order is index order; pages roll folders up as S3 does', async (t) => {
  const k = new SyntheticKeys({ root: 'r/', total: 2500, perFolder: 1000 });
  t.equal(k.key(0), 'r/f0/o000');
  t.equal(k.key(2499), 'r/f2/o499');
  t.equal(k.indexOf('r/f1/o005'), 1005);
  t.equal(k.indexOf('r/f1/o0050'), undefined);
  const top = listPage(k, { prefix: 'r/', delimiter: '/', start: undefined, maxKeys: 2 });
  t.same(top.entries, [{ cp: 'r/f0/' }, { cp: 'r/f1/' }]);
  t.equal(top.truncated, true);
  const rest = listPage(k, { prefix: 'r/', delimiter: '/', start: undefined, resume: top.resumeAfter, maxKeys: 1000 });
  t.same(rest.entries, [{ cp: 'r/f2/' }], 'a continuation resumes after the folder');
  t.equal(rest.truncated, false);
  t.same(k.bytes(7, 3, 6), Buffer.concat([k.bytes(7, 0, 10)]).subarray(3, 6), 'bytes depend on key and offset only');
});

t.test('listings through the S3 client: folders and flat, each key exactly once', async (t) => {
  for (const layout of [{ root: 'data/', total: 12_000, perFolder: 300 }, { root: 'flat/', total: 30_000 }]) {
    const { s3, client } = await serve(t, layout);
    t.same(await keysOf(client.list(layout.root)), expected(layout), `${JSON.stringify(layout)}`);
    t.ok(s3.peakInflight() >= 4, `listed in parallel: ${s3.peakInflight()} requests at once`);
  }
});

t.test('under injected 503 SlowDown the listing is still exact, and the limit adapts', async (t) => {
  const layout = { root: 'flat/', total: 30_000 };
  const { s3, client } = await serve(t, { ...layout, slowDownRate: 0.1 });
  t.same(await keysOf(client.list('flat/')), expected(layout), 'every key once with 10% SlowDown');
  t.ok(s3.counts.slowdown! > 0, `${s3.counts.slowdown} requests refused`);
  t.ok((client as S3ObjectClient).limiter.limit < 16, `AIMD limit after throttling: ${(client as S3ObjectClient).limiter.limit} of 16`);

  const tight = await serve(t, { root: 'd/', total: 6_000, perFolder: 200, maxInflight: 3 });
  t.same(await keysOf(tight.client.list('d/')), expected({ root: 'd/', total: 6_000, perFolder: 200 }), 'every key once when S3 takes 3 requests at a time');
  t.ok(tight.s3.counts.slowdown! < tight.s3.counts.list!, `the client backed off: ${tight.s3.counts.slowdown} refused, ${tight.s3.counts.list} served`);
});

t.test('HEAD and ranged GET return the formula', async (t) => {
  const layout = { root: 'b/', total: 10, minSize: 5000, sizeSpread: 999 };
  const { client } = await serve(t, layout);
  const k = new SyntheticKeys(layout);
  const info = await client.head(k.key(3));
  t.equal(info.size, k.size(3));
  t.equal(info.etag, k.etag(3));
  const got = await client.getRange(k.key(3), 100, 4000, info.etag);
  t.ok(got.equals(k.bytes(3, 100, 4000)), 'ranged GET bytes');
});
