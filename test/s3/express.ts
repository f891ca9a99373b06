/**
 * Issue 45 (9): S3 Express One Zone directory buckets (src/s3/express.ts).
 *  - Names and zonal endpoints: `NAME--AZID--x-s3` -> https://BUCKET.s3express-AZID.REGION.amazonaws.com.
 *  - Against a front of our own (test/helpers/express-front.ts) that implements CreateSession
 *    and refuses any request without a live session token and a signature made with that
 *    session's secret, and lists keys out of order: listing (each key once), HEAD, ranged
 *    GETs on the data path and streams give the source's bytes; a session about to expire is
 *    replaced before it does; `sluice mount` reads every file right and lists folders sorted.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { seedDataset } from '../../src/local/dataset.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { addressingFor, defaultEndpoint } from '../../src/s3/addressing.js';
import { directoryBucketZone, ExpressSessions, type ExpressSession } from '../../src/s3/express.js';
import { createObjectClient } from '../../src/s3/s3-client.js';
import { startCli, waitExit } from '../helpers/cli.js';
import { startExpressFront } from '../helpers/express-front.js';
import { tempMountpoint } from '../helpers/fuse.js';
import { checkRangedAndStream } from '../helpers/read-object.js';
import { until } from '../helpers/poll.js';
import '../helpers/exit-watch.js';

const DIR_BUCKET = 'train--use1-az4--x-s3';
const BACKING = 'express';
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

t.test('directory bucket names and their zonal endpoints', async (t) => {
  t.equal(directoryBucketZone('data--usw2-az1--x-s3'), 'usw2-az1');
  t.equal(directoryBucketZone('my-data--usw2-lax1-az1--x-s3'), 'usw2-lax1-az1', 'a Local Zone id');
  t.equal(directoryBucketZone('data'), undefined);
  t.equal(directoryBucketZone('data--x-s3'), undefined);
  t.equal(defaultEndpoint('us-west-2', 'data--usw2-az1--x-s3'), 'https://s3express-usw2-az1.us-west-2.amazonaws.com');
  const a = addressingFor('data--usw2-az1--x-s3', undefined, 'us-west-2', false);
  t.equal(a.origin, 'https://data--usw2-az1--x-s3.s3express-usw2-az1.us-west-2.amazonaws.com', 'virtual-hosted on the zonal endpoint');
  t.equal(a.pathFor('a b/c'), '/a%20b/c');
  t.equal(addressingFor('data', undefined, 'us-west-2', false).origin, 'https://data.s3.us-west-2.amazonaws.com', 'general-purpose buckets unchanged');
});

t.test('sessions: replaced before expiry; a failed replacement keeps the old one and is not left unhandled', async (t) => {
  const made: string[] = [];
  let fail = false;
  const sessions = new ExpressSessions(async (bucket) => {
    made.push(bucket);
    if (fail) throw new Error('CreateSession failed');
    return { accessKeyId: `K${made.length}`, secretAccessKey: 's', sessionToken: `T${made.length}`, expiration: new Date(Date.now() + 30_000) };
  });
  const unhandled: unknown[] = [];
  const onUnhandled = (e: unknown) => unhandled.push(e);
  process.on('unhandledRejection', onUnhandled);
  t.teardown(() => { process.off('unhandledRejection', onUnhandled); });
  const base = { accessKeyId: 'BASE' };
  const b = { Bucket: 'd--use1-az4--x-s3' };
  const first: ExpressSession = await sessions.getS3ExpressIdentity(base, b);
  t.equal(first.accessKeyId, 'K1');
  fail = true;
  // 30 s left, under the 60 s window: the next use starts a replacement, which fails.
  t.equal((await sessions.getS3ExpressIdentity(base, b)).accessKeyId, 'K1', 'the old session serves meanwhile');
  await new Promise((r) => setTimeout(r, 50));
  t.same(unhandled, [], 'the failed replacement is not an unhandled rejection');
  fail = false;
  t.equal((await sessions.getS3ExpressIdentity(base, b)).accessKeyId, 'K1', 'still the old one while its replacement is made');
  await new Promise((r) => setTimeout(r, 50));
  t.equal((await sessions.getS3ExpressIdentity(base, b)).accessKeyId, 'K3', 'then the replacement');
  const before = made.length;
  const rotated = await sessions.getS3ExpressIdentity({ accessKeyId: 'ROTATED' }, b);
  t.ok(made.length > before && rotated.accessKeyId === `K${made.length}`, 'new base credentials: a new session, made for them');
});

t.test('against a front that enforces CreateSession tokens', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket(BACKING);
  const objects = await seedDataset(s3, BACKING, 'p/', { smallFiles: { count: 12, size: 7_000, folders: 2 }, largeFiles: { count: 1, size: 3 * 1024 * 1024 } });
  const large = objects.find((o) => o.size > 1024 * 1024)!;
  // 62 s: the SDK replaces a session that has less than 60 s left, so within seconds this one is due.
  const front = await startExpressFront({ s3Port: s3.port, dirBucket: DIR_BUCKET, backing: BACKING, base: s3.credentials, ttlMs: 62_000 });
  t.teardown(() => front.close());

  t.test('the front refuses requests without a session', async (t) => {
    const r = await fetch(`${front.endpoint}/${DIR_BUCKET}/${large.key}`);
    t.equal(r.status, 403);
    const plain = createObjectClient({ bucket: BACKING, endpoint: front.endpoint, region: 'us-east-1', pathStyle: true, credentials: s3.credentials, maxAttempts: 1 });
    t.teardown(() => plain.close());
    await t.rejects(plain.getRange(large.key, 0, 10, '"x"'), 'a general-purpose client is refused');
    front.refused.length = 0;
  });

  t.test('listing, HEAD, ranged GETs and streams with session auth', async (t) => {
    const c = createObjectClient({ bucket: DIR_BUCKET, endpoint: front.endpoint, region: 'us-east-1', credentials: s3.credentials, maxAttempts: 2 });
    t.teardown(() => c.close());
    const keys: string[] = [];
    for await (const o of c.list('p/')) keys.push(o.key);
    t.equal(keys.length, objects.length, 'each key once');
    t.same([...keys].sort(), objects.map((o) => o.key).sort(), 'every key');
    t.ok(front.listings > 0, 'listed through the front (out of key order)');
    const info = await c.head(large.key);
    t.equal(info.size, large.size);
    const readAll = () => checkRangedAndStream(t, c, large, info.etag);
    await readAll();
    t.ok(front.gets >= 3, `GETs accepted with a session token (${front.gets})`);
    t.equal(front.sessions, 1, 'one CreateSession, shared by the SDK and the data path');
    // The session is within a minute of expiring: the next uses start its replacement.
    await new Promise((r) => setTimeout(r, 2_500));
    await readAll();
    t.ok(await until(async () => { await c.getRange(large.key, 0, 100, info.etag); return front.sessions >= 2; }, 20_000), `a new session before the first expired (${front.sessions})`);
    await readAll();
    t.same(front.refused, [], 'no request refused');
  });

  t.test('sluice mount of a directory bucket', async (t) => {
    const env: NodeJS.ProcessEnv = {
      ...process.env, AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey, AWS_REGION: 'us-east-1', SLUICE_LOG_LEVEL: 'warn',
    };
    for (const k of ['AWS_PROFILE', 'AWS_SESSION_TOKEN', 'HTTP_PROXY', 'http_proxy', 'HTTPS_PROXY', 'https_proxy', 'ALL_PROXY', 'all_proxy']) delete env[k];
    const mnt = await tempMountpoint(t, 'express');
    const r = await startCli(['mount', `s3://${DIR_BUCKET}/p/`, mnt, '--endpoint', front.endpoint, '--metrics-port', '0', '--cache-size', '16MiB', '--part-size', '1MiB', '--max-prefetch', '2MiB', '--max-attempts', '2'], env);
    try {
      for (const o of objects) t.equal(sha(await readFile(path.join(mnt, o.key.slice(2)))), o.sha256, `${o.key} exact`);
      const folder = path.dirname(objects[0]!.key.slice(2));
      const names = await readdir(path.join(mnt, folder));
      t.same(names, [...names].sort(), 'a folder lists sorted although the bucket lists out of order');
      t.equal(names.length, objects.filter((o) => path.dirname(o.key.slice(2)) === folder).length, 'every file of the folder');
    } finally {
      r.child.kill('SIGTERM');
      t.equal((await waitExit(r)).code, 0, 'clean exit');
    }
    t.same(front.refused, [], 'no request refused');
  });
});
