/**
 * SluiceFs before its listing completes (src/fs/core.ts, "start()"): lookups are answered
 * from S3 directly (HEAD + a one-key listing), readdir and statfs wait for the listing,
 * and a failed listing fails every later call with its error.
 */
import t from 'tap';
import { createHash } from 'node:crypto';
import { AccessDeniedError, Errno, errnoFor, NoSuchBucketError, SluiceError } from '../../src/errors.js';
import { SluiceFs, type SluiceFsOptions } from '../../src/fs/core.js';
import { earlyLookups, registry } from '../../src/metrics/metrics.js';
import { FakeObjectClient, patternBytes } from '../helpers/fake-client.js';
import { readAll } from '../helpers/fs-core.js';

const MiB = 1024 * 1024;

function opts(client: FakeObjectClient, o: Partial<SluiceFsOptions> = {}): SluiceFsOptions {
  return {
    client, prefix: 'ds', channel: 'early', cacheSize: 64 * MiB, partSize: 1 * MiB, maxPrefetch: 8 * MiB,
    maxInflight: 32 * MiB, crossFilePrefetch: 4, crossFileMaxSize: 1 * MiB, ...o,
  };
}

/** A client whose listing is held until `release()`. */
function heldClient() {
  const client = new FakeObjectClient();
  let release!: () => void;
  client.listGate = new Promise<void>((r) => { release = r; });
  client.put('ds/a.bin', patternBytes(3 * MiB + 17, 1));
  client.put('ds/sub/x.txt', Buffer.from('hello\n'));
  client.put('ds/sub/deeper/z', patternBytes(1000, 2));
  client.put('ds/clash', Buffer.from('file'));
  client.put('ds/clash/inner', Buffer.from('inner'));
  client.put('ds/marker/', Buffer.alloc(0));
  client.put('ds/bad//name', Buffer.from('x'));
  return { client, release };
}

async function errnoOf(p: unknown): Promise<number | undefined> {
  try {
    await p;
    return undefined;
  } catch (err) {
    if (!(err instanceof SluiceError)) throw err;
    return errnoFor(err);
  }
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');


async function counter(result: string): Promise<number> {
  const m = (await registry.getSingleMetric('sluice_early_lookups_total')!.get()).values;
  return m.find((v) => v.labels.channel === 'early' && v.labels.result === result)?.value ?? 0;
}

t.test('lookups are answered from S3 while the listing is held', async (t) => {
  const { client, release } = heldClient();
  const fs = SluiceFs.start(opts(client));
  t.teardown(async () => { release(); await fs.close(); });
  t.equal(fs.isListed, false);

  const root = await fs.getattr('/');
  t.equal(root.mode, 0o40555, 'the root is a folder at once');
  const a = await fs.getattr('/a.bin');
  t.equal(a.mode, 0o100444);
  t.equal(a.size, 3 * MiB + 17, 'size from the HEAD');
  const sub = await fs.getattr('/sub');
  t.equal(sub.mode, 0o40555, 'a prefix with keys under it is a folder');
  t.equal(sub.nlink, 1, 'subfolder count unknown yet: nlink 1');
  t.equal((await fs.getattr('/sub/deeper/z')).size, 1000, 'nested lookups walk the parents');
  t.equal((await fs.getattr('/clash')).mode, 0o40555, 'a key that is also a folder prefix: the folder wins, as in the tree');
  t.equal((await fs.getattr('/marker')).mode, 0o40555, 'a folder marker makes a folder');
  t.equal(await errnoOf(fs.getattr('/nope')), Errno.ENOENT);
  t.equal(await errnoOf(fs.getattr('/a.bin/x')), Errno.ENOENT, 'nothing lives under a file');
  const bad = fs.getattr('/bad');
  let badSettled = false;
  void Promise.resolve(bad).then(() => { badSettled = true; }, () => { badSettled = true; });
  t.equal(await errnoOf(fs.open('/sub', 0)), Errno.EISDIR);
  t.equal(await errnoOf(fs.open('/a.bin', 1)), Errno.EROFS);

  const bytes = await readAll(fs, '/a.bin');
  t.equal(sha(bytes), sha(patternBytes(3 * MiB + 17, 1)), 'an early file reads exactly');
  t.equal(fs.isListed, false, 'all of that before the listing completed');
  t.ok(await counter('file') >= 2 && await counter('folder') >= 3 && await counter('missing') >= 1, 'early lookups are counted by result');
  await new Promise((r) => setTimeout(r, 20));
  t.equal(badSettled, false, 'a folder whose first key cannot be shown waits for the listing');
  release();
  await fs.listed;
  t.equal(fs.isListed, true);
  t.equal(await errnoOf(bad), Errno.ENOENT, '...which does not show it (its only key is unsafe)');
});

t.test('readdir and statfs wait for the listing; then everything is answered from the view', async (t) => {
  const { client, release } = heldClient();
  const fs = SluiceFs.start(opts(client));
  t.teardown(async () => { release(); await fs.close(); });
  let names: string[] | undefined;
  const pending = Promise.resolve(fs.readdir('/')).then((n) => { names = n; });
  const statfs = Promise.resolve(fs.statfs());
  await new Promise((r) => setTimeout(r, 50));
  t.equal(names, undefined, 'readdir is not answered with a partial folder');
  release();
  await pending;
  t.same(names, ['a.bin', 'clash', 'marker', 'sub'], 'the whole folder once listed (unsafe and shadowed keys skipped)');
  t.equal((await statfs).files, fs.entryCount + 1);
  const heads = client.heads;
  const attr = fs.getattr('/sub');
  t.notOk(attr instanceof Promise, 'getattr is synchronous once listed');
  t.equal((attr as { nlink: number }).nlink, 3, 'nlink counts subfolders once listed');
  t.equal(client.heads, heads, 'no HEAD once listed');
});

t.test('one HEAD per path, however many lookups wait for it', async (t) => {
  const { client, release } = heldClient();
  const fs = SluiceFs.start(opts(client));
  t.teardown(async () => { release(); await fs.close(); });
  client.latencyMs = 20;
  await Promise.all(Array.from({ length: 10 }, () => fs.getattr('/a.bin')));
  t.equal(client.heads, 1);
  await fs.getattr('/a.bin');
  t.equal(client.heads, 1, 'the answer is kept');
});

t.test('the first file of a folder is answered from its folder\'s probe, unless it may be a folder too', async (t) => {
  const { client, release } = heldClient();
  client.put('ds/f/a', Buffer.from('a file\n')); // the first key under f/, and no key under f/a/
  client.put('ds/f/b', Buffer.from('b'));
  client.put('ds/g/a', Buffer.from('g'));        // g/a is also a folder: g/a/b is the next key
  client.put('ds/g/a/b', Buffer.from('gb'));
  client.put('ds/h/a', Buffer.from('h'));        // h/a.x sorts between h/a and h/a/b: undecided
  client.put('ds/h/a.x', Buffer.from('hx'));
  client.put('ds/h/a/b', Buffer.from('hb'));
  client.put('ds/i/only', Buffer.from('i'));     // the only key under i/
  const fs = SluiceFs.start(opts(client));
  t.teardown(async () => { release(); await fs.close(); });
  for (const dir of ['/f', '/g', '/h', '/i']) t.equal((await fs.getattr(dir)).mode, 0o40555, `${dir} is a folder`);
  const heads = client.heads;
  const probes = client.probes;
  const fa = await fs.getattr('/f/a');
  t.equal(fa.size, 7, 'f/a: size from the folder\'s listing');
  t.equal((await fs.getattr('/i/only')).size, 1);
  t.equal(client.heads, heads, '...without a HEAD');
  t.equal(client.probes, probes, '...or a listing');
  t.equal((await fs.getattr('/g/a')).mode, 0o40555, 'g/a is a folder (the folder wins)');
  t.equal((await fs.getattr('/h/a')).mode, 0o40555, 'h/a is a folder (its own probe asked)');
  t.equal((await fs.getattr('/f/b')).size, 1, 'a second file is looked up as before');
  t.ok(client.heads >= heads + 3, 'g/a, h/a and f/b were asked of S3');
  const fh = await fs.open('/f/a', 0);
  const dst = Buffer.alloc(16);
  const n = await fs.read(fh, dst, 16, 0);
  t.equal(dst.subarray(0, n).toString(), 'a file\n', 'and reads exactly');
  await fs.release(fh);
});

t.test('an early file is pinned to the version its HEAD saw', async (t) => {
  const { client, release } = heldClient();
  const fs = SluiceFs.start(opts(client));
  t.teardown(async () => { release(); await fs.close(); });
  const fh = await fs.open('/sub/x.txt', 0);
  client.put('ds/sub/x.txt', Buffer.from('changed\n'));
  const dst = Buffer.alloc(16);
  t.equal(await errnoOf(fs.read(fh, dst, 16, 0)), Errno.ESTALE, 'an overwrite fails the read, never mixes versions');
  await fs.release(fh);
});

t.test('a failed listing fails the first answer, the listing and every later lookup with its error', async (t) => {
  const client = new FakeObjectClient();
  client.put('ds/a.bin', Buffer.from('x'));
  client.listError = new NoSuchBucketError('fake-bucket');
  const fs = SluiceFs.start(opts(client));
  t.teardown(() => fs.close());
  await t.rejects(fs.firstAnswer, NoSuchBucketError);
  await t.rejects(fs.listed, NoSuchBucketError);
  await t.rejects(Promise.resolve(fs.getattr('/a.bin')), NoSuchBucketError);
  await t.rejects(Promise.resolve(fs.readdir('/')), NoSuchBucketError);
  await t.rejects(SluiceFs.create(opts(client)), NoSuchBucketError, 'create() rejects with it too');
});

t.test('an S3 error in an early lookup is that lookup\'s error, counted', async (t) => {
  const { client, release } = heldClient();
  const fs = SluiceFs.start(opts(client));
  t.teardown(async () => { release(); await fs.close(); });
  const before = await counter('error');
  client.head = () => Promise.reject(new AccessDeniedError('fake-bucket', 'ds/a.bin'));
  t.equal(await errnoOf(fs.getattr('/a.bin')), Errno.EACCES);
  t.equal(await counter('error'), before + 1);
  t.ok(earlyLookups, 'metric exists');
});

t.test('the first answer comes with the first listed object, before the listing completes', async (t) => {
  const client = new FakeObjectClient();
  for (let i = 0; i < 3; i++) client.put(`ds/f${i}`, Buffer.from(String(i)));
  const fs = SluiceFs.start(opts(client));
  t.teardown(() => fs.close());
  await fs.firstAnswer;
  await fs.listed;
  t.equal(fs.fileCount, 3);
});

t.test('the listing yields to lookups in flight, but only for a bounded time', async (t) => {
  const { client, release } = heldClient();
  const fs = SluiceFs.start(opts(client));
  t.teardown(async () => { release(); await fs.close(); });
  const head = client.head.bind(client);
  let headDone = 0;
  client.head = async (key, o) => {
    await new Promise((r) => setTimeout(r, 80));
    const info = await head(key, o);
    headDone = performance.now();
    return info;
  };
  const lookup = fs.getattr('/a.bin');
  release();
  await fs.listed;
  const listedAt = performance.now();
  await lookup;
  t.ok(headDone > 0 && listedAt >= headDone, 'the listing request waited for the lookup in flight');

  // A lookup that never ends does not stop the listing.
  const { client: c2, release: r2 } = heldClient();
  const fs2 = SluiceFs.start(opts(c2));
  t.teardown(async () => { r2(); await fs2.close(); });
  c2.head = () => new Promise(() => undefined);
  void fs2.getattr('/a.bin');
  const t0 = performance.now();
  r2();
  await fs2.listed;
  t.ok(performance.now() - t0 < 2000, 'a stuck lookup holds a page back for a bounded time only');
});

t.test('holdListingUntil: pages wait for the owner (the mount), for a bounded time', async (t) => {
  const { client, release } = heldClient();
  const fs = SluiceFs.start(opts(client));
  t.teardown(async () => { release(); await fs.close(); });
  let mounted = 0;
  fs.holdListingUntil(new Promise<void>((r) => setTimeout(() => { mounted = performance.now(); r(); }, 60)));
  release();
  await fs.listed;
  t.ok(mounted > 0 && performance.now() >= mounted, 'the listing page waited for the mount');

  const { client: c2, release: r2 } = heldClient();
  const fs2 = SluiceFs.start(opts(c2));
  t.teardown(async () => { r2(); await fs2.close(); });
  fs2.holdListingUntil(new Promise(() => undefined));
  const t0 = performance.now();
  r2();
  await fs2.listed;
  t.ok(performance.now() - t0 < 2000, 'a mount that never comes holds the listing for a bounded time only');
});
