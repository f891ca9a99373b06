/**
 * Issue 43, deliverable 5: credentials that outlive nothing. A job that runs longer than
 * its credentials' lifetime keeps reading, on the SDK path (listing, HEAD) and on the data
 * path (our HTTP client's ranged GETs, undici streams, Pipe and File mode downloads).
 *
 * Credentials come from a container-credentials endpoint on loopback
 * (AWS_CONTAINER_CREDENTIALS_FULL_URI, the standard chain as in ECS/EKS) and live
 * VALID_MS; an S3 front checks each request's key, token and signature and answers an
 * expired one 400 ExpiredToken, as S3 does. The SDK starts its own refresh SKEW_MS after
 * the front stopped honouring them (test/helpers/credentials-front.ts says why), so each
 * lifetime ends with refusals that the client must answer by renewing the credentials once
 * and retrying. Every phase runs across several lifetimes and compares every byte.
 */
import t from 'tap';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { downloadChannel } from '../../src/channels/file-mode.js';
import { seedDataset, sourceBytes, type SeededObject } from '../../src/local/dataset.js';
import { startLocalS3, type LocalS3 } from '../../src/local/s3-server.js';
import { setLogLevel } from '../../src/log.js';
import { startPipeChannel } from '../../src/pipe/pipe-channel.js';
import type { ObjectClient, ObjectInfo } from '../../src/s3/object-client.js';
import { CredentialRenewer } from '../../src/s3/credentials.js';
import { createObjectClient } from '../../src/s3/s3-client.js';
import { startCredentialsFront, type CredentialsFront } from '../helpers/credentials-front.js';
import { readFifo, tempDir, waitFor } from '../helpers/pipe.js';

setLogLevel('error');

/** Short enough that a phase of a few seconds spans several lifetimes. */
const VALID_MS = 1500;
/** The SDK's refresh starts this long after expiry: a window of refusals in each lifetime. */
const SKEW_MS = 1000;
/** Each phase runs until this many lifetimes ended in a refusal that was renewed. */
const EXPIRIES = 3;
/** Bound of each phase's loop in time (it normally takes EXPIRIES * VALID_MS and a bit). */
const PHASE_LIMIT_MS = 60_000;
const BUCKET = 'creds';
const LARGE = 1024 * 1024 + 7;

// The standard chain, with nothing but the container endpoint to find.
for (const v of ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_PROFILE', 'AWS_WEB_IDENTITY_TOKEN_FILE', 'AWS_ROLE_ARN', 'AWS_CONTAINER_CREDENTIALS_RELATIVE_URI', 'AWS_CONTAINER_AUTHORIZATION_TOKEN']) delete process.env[v];
process.env.AWS_SHARED_CREDENTIALS_FILE = '/nonexistent/sluice-test-credentials';
process.env.AWS_CONFIG_FILE = '/nonexistent/sluice-test-config';
process.env.AWS_EC2_METADATA_DISABLED = 'true';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

let s3: LocalS3;
let front: CredentialsFront;
let seeded: SeededObject[];
let client: ObjectClient;

t.before(async () => {
  s3 = await startLocalS3();
  await s3.createBucket(BUCKET);
  seeded = await seedDataset(s3, BUCKET, 'data/', { smallFiles: { count: 24, size: 20_000, folders: 3 }, largeFiles: { count: 2, size: LARGE }, seed: 43 });
  front = await startCredentialsFront({ targetPort: s3.port, validMs: VALID_MS, skewMs: SKEW_MS });
  process.env.AWS_CONTAINER_CREDENTIALS_FULL_URI = front.credentialsUri;
  client = createObjectClient({ bucket: BUCKET, endpoint: front.endpoint, region: 'us-east-1', pathStyle: true, maxAttempts: 3, requestTimeoutMs: 10_000 });
});
t.teardown(async () => {
  await client?.close();
  await front?.close();
  await s3?.stop();
});

const byKey = (key: string) => seeded.find((o) => o.key === key)!;

/**
 * Runs `step` until `kind`'s refusals grew by EXPIRIES (each one renewed, since every step
 * must succeed), bounded in time; returns how many steps ran.
 */
async function acrossExpiries(kind: 'data' | 'sdk', step: (i: number) => Promise<void>): Promise<number> {
  const refused0 = front.refused[kind];
  const t0 = Date.now();
  let i = 0;
  while (front.refused[kind] - refused0 < EXPIRIES && Date.now() - t0 < PHASE_LIMIT_MS) await step(i++);
  return i;
}

t.test('the SDK path (listing, HEAD) keeps working across expiries', async (t) => {
  const issued0 = front.issued();
  const steps = await acrossExpiries('sdk', async (i) => {
    const keys: string[] = [];
    for await (const o of client.list('data/')) keys.push(o.key);
    if (keys.length !== seeded.length) throw new Error(`listing ${i} has ${keys.length} keys of ${seeded.length}`);
    const o = seeded[i % seeded.length]!;
    const info = await client.head(o.key);
    if (info.size !== o.size) throw new Error(`HEAD ${o.key}: size ${info.size}, not ${o.size}`);
  });
  t.ok(front.refused.sdk >= EXPIRIES, `${front.refused.sdk} expired SDK requests refused, each renewed (${steps} listings + HEADs)`);
  t.ok(front.issued() - issued0 >= EXPIRIES, `${front.issued() - issued0} credentials issued`);
  t.same(front.rejected, [], 'no request with a wrong key, token or signature');
});

t.test('the data path (ranged GETs into buffers) keeps reading across expiries, byte for byte', async (t) => {
  const issued0 = front.issued();
  const large = seeded.filter((o) => o.size === LARGE);
  const list: ObjectInfo[] = [];
  for await (const o of client.list('data/')) list.push(o);
  let wrong = 0;
  const steps = await acrossExpiries('data', async (i) => {
    const o = large[i % large.length]!;
    const info = list.find((x) => x.key === o.key)!;
    const start = (i * 65_537) % (LARGE - 200_000);
    const got = await client.getRange(o.key, start, start + 200_000, info.etag);
    if (!got.equals(sourceBytes(o).subarray(start, start + 200_000))) wrong++;
  });
  t.equal(wrong, 0, `${steps} ranged GETs, every byte right`);
  t.ok(front.refused.data >= EXPIRIES, `${front.refused.data} expired GETs refused, each renewed`);
  t.ok(front.issued() - issued0 >= EXPIRIES, `${front.issued() - issued0} credentials issued`);
  t.same(front.rejected, []);
});

t.test('streams (undici) keep reading across expiries', async (t) => {
  const list: ObjectInfo[] = [];
  for await (const o of client.list('data/')) list.push(o);
  let wrong = 0;
  const steps = await acrossExpiries('data', async (i) => {
    const info = list[i % list.length]!;
    const parts: Buffer[] = [];
    for await (const c of client.getStream(info.key, info.etag, { size: info.size })) parts.push(c);
    if (!Buffer.concat(parts).equals(sourceBytes(byKey(info.key)))) wrong++;
  });
  t.equal(wrong, 0, `${steps} streams, every byte right`);
  t.same(front.rejected, []);
});

t.test('Pipe mode: an epoch that lasts several lifetimes is whole', async (t) => {
  const list: ObjectInfo[] = [];
  for await (const o of client.list('data/')) list.push(o);
  list.sort((a, b) => (a.key < b.key ? -1 : 1));
  // 64 KiB parts, 2 in flight, each GET held: the epoch lasts several lifetimes.
  front.latencyMs = 150;
  t.teardown(() => { front.latencyMs = 0; });
  const refused0 = front.refused.data;
  const issued0 = front.issued();
  const ch = await startPipeChannel({
    client, channel: 'train', dataDir: await tempDir(t), recordWrapper: 'None', compression: 'None', epochs: 1,
    partSize: 64 * 1024, maxInflight: 128 * 1024, maxRequests: 2,
    itemsForEpoch: () => list.map((info) => ({ kind: 'object' as const, info })),
  });
  t.teardown(() => ch.stop());
  await waitFor(() => existsSync(ch.fifoPath(0)), 30_000, 'the FIFO');
  const got = await readFifo(ch.fifoPath(0), { timeoutMs: PHASE_LIMIT_MS });
  await ch.done;
  t.equal(sha(got), sha(Buffer.concat(list.map((o) => sourceBytes(byKey(o.key))))), 'the epoch is the objects, byte for byte');
  t.ok(front.refused.data - refused0 >= 2, `${front.refused.data - refused0} expired GETs refused and renewed during the epoch`);
  t.ok(front.issued() - issued0 >= 2, `${front.issued() - issued0} credentials issued`);
  t.same(front.rejected, []);
});

t.test('File mode: a download that lasts several lifetimes is whole', async (t) => {
  const list: ObjectInfo[] = [];
  for await (const o of client.list('data/')) list.push(o);
  front.latencyMs = 150;
  t.teardown(() => { front.latencyMs = 0; });
  const refused0 = front.refused.data;
  const issued0 = front.issued();
  const dataDir = await tempDir(t, 'sluice-creds-file-');
  const r = await downloadChannel({
    channel: 'train', dataDir, stateDir: path.join(dataDir, '.state'), progress: 'none',
    objects: list.map((o) => ({ key: o.key, size: o.size, etag: o.etag, rel: o.key.slice('data/'.length), client })),
    partSize: 64 * 1024, maxInflight: 128 * 1024, maxConnections: 2,
  });
  t.equal(r.downloaded, seeded.length);
  for (const o of seeded) t.equal(sha(await readFile(path.join(dataDir, 'train', o.key.slice('data/'.length)))), o.sha256, o.key);
  t.ok(front.refused.data - refused0 >= 2, `${front.refused.data - refused0} expired GETs refused and renewed during the download`);
  t.ok(front.issued() - issued0 >= 2, `${front.issued() - issued0} credentials issued`);
  t.same(front.rejected, []);
});

t.test('credentials refused again right after a renewal fail the request, after one renewal', async (t) => {
  front.expireAll = true;
  t.teardown(() => { front.expireAll = false; });
  const info = await (async () => { front.expireAll = false; const i = await client.head(seeded[0]!.key); front.expireAll = true; return i; })();
  for (const [what, op] of [
    ['HEAD', async () => { await client.head(seeded[0]!.key); }],
    ['ranged GET', async () => { await client.getRange(seeded[0]!.key, 0, 100, info.etag); }],
    ['stream', async () => { for await (const c of client.getStream(seeded[0]!.key, info.etag, { size: info.size })) void c; }],
  ] as const) {
    const issued0 = front.issued();
    // A HEAD reply has no body to say ExpiredToken: a bare 400, as S3 sends.
    const wanted: { code: string; message?: RegExp } = what === 'HEAD' ? { code: 'SLUICE_S3_ERROR' } : { code: 'SLUICE_INVALID_CREDENTIALS', message: /ExpiredToken/ };
    await t.rejects(op(), wanted, `${what}: fails`);
    t.equal(front.issued() - issued0, 1, `${what}: renewed once, not in a loop`);
  }
});

t.test('CredentialRenewer: a burst of refusals costs one fetch; a request signed after a renewal renews nothing', async (t) => {
  let fetches = 0;
  let release!: () => void;
  const provider = (o?: { forceRefresh?: boolean }) => {
    if (o?.forceRefresh) fetches++;
    return new Promise<void>((r) => { release = r; });
  };
  const r = new CredentialRenewer(provider);
  const g = r.generation;
  const burst = Array.from({ length: 8 }, () => r.renew(g));
  release();
  await Promise.all(burst);
  t.equal(fetches, 1, 'eight refusals, one fetch');
  t.equal(r.generation, g + 1);
  await r.renew(g);
  t.equal(fetches, 1, 'a refusal of a request signed before the renewal fetches nothing more');
  const failing = new CredentialRenewer(() => Promise.reject(new Error('endpoint down')));
  await t.rejects(failing.renew(0), { code: 'SLUICE_INVALID_CREDENTIALS', message: /fetching new ones failed \(endpoint down\)/ });
});
