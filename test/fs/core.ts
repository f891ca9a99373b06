import t from 'tap';
import { now } from '../helpers/now.js';
import { Errno, errnoFor, InvalidArgumentError, ObjectChangedError, SluiceError } from '../../src/errors.js';
import { SluiceFs, type SluiceFsOptions } from '../../src/fs/core.js';
import { openHandles, readWait, servedBytes } from '../../src/metrics/metrics.js';
import { FakeObjectClient, patternBytes } from '../helpers/fake-client.js';
import { readAll } from '../helpers/fs-core.js';

const KiB = 1024;
const MiB = 1024 * KiB;

function opts(client: FakeObjectClient, o: Partial<SluiceFsOptions> = {}): SluiceFsOptions {
  return {
    client, prefix: 'ds', channel: 'train', cacheSize: 64 * MiB, partSize: 1 * MiB, maxPrefetch: 8 * MiB,
    maxInflight: 32 * MiB, crossFilePrefetch: 4, crossFileMaxSize: 1 * MiB, ...o,
  };
}

function seed(client: FakeObjectClient) {
  client.put('ds/a.bin', patternBytes(3 * MiB + 17, 1));
  client.put('ds/sub/x.txt', Buffer.from('hello\n'));
  client.put('ds/sub/y.txt', Buffer.alloc(0));
  client.put('ds/sub/deeper/z', patternBytes(1000, 2));
  client.put('ds/empty/', Buffer.alloc(0));
  client.put('ds/bad//name', Buffer.from('x'));
  client.put('ds/clash', Buffer.from('file'));
  client.put('ds/clash/inner', Buffer.from('inner'));
  client.put('other/x', Buffer.from('not shown'));
}

/** The errno a FUSE adapter would answer for what `fn` throws or rejects with. */
async function errnoOf(fn: () => unknown): Promise<number | undefined> {
  try {
    await fn();
    return undefined;
  } catch (err) {
    if (!(err instanceof SluiceError)) throw err;
    return errnoFor(err);
  }
}

t.test('lists the prefix up front into a folder view', async (t) => {
  const client = new FakeObjectClient();
  seed(client);
  const fs = await SluiceFs.create(opts(client));
  t.teardown(() => fs.close());
  t.equal(client.lists, 1);
  t.same(fs.readdir('/'), ['a.bin', 'bad', 'clash', 'empty', 'sub'].filter((n) => n !== 'bad'));
  t.same(fs.readdir('/sub'), ['deeper', 'x.txt', 'y.txt']);
  t.same(fs.readdir('/empty'), []);
  t.same(fs.readdir('/clash'), ['inner'], 'a key that is also a folder prefix: the folder wins');
  t.same(fs.skippedKeys.map((s) => s.key).sort(), ['ds/bad//name', 'ds/clash']);
  t.equal(fs.entryCount, 9, 'a.bin, clash/, clash/inner, empty/, sub/, x.txt, y.txt, deeper/, z');
});

t.test('getattr: files 0o444 regular, folders 0o555, sizes from the listing', async (t) => {
  const client = new FakeObjectClient();
  seed(client);
  const fs = await SluiceFs.create(opts(client));
  t.teardown(() => fs.close());
  const f = now(fs.getattr('/a.bin'));
  t.equal(f.mode, 0o100444);
  t.equal(f.size, 3 * MiB + 17);
  t.equal(f.nlink, 1);
  t.ok(f.mtime instanceof Date);
  const d = now(fs.getattr('/sub'));
  t.equal(d.mode, 0o40555);
  t.equal(d.nlink, 3, 'two plus one subfolder');
  t.equal(now(fs.getattr('/')).mode, 0o40555);
  t.equal(now(fs.getattr('/sub/y.txt')).size, 0);
  t.equal(now(fs.getattr('/sub/x.txt')).uid, process.getuid!());
});

t.test('errors carry the right errno: ENOENT, ENOTDIR, EISDIR, EROFS, EBADF', async (t) => {
  const client = new FakeObjectClient();
  seed(client);
  const fs = await SluiceFs.create(opts(client));
  t.teardown(() => fs.close());
  t.equal(await errnoOf(() => fs.getattr('/nope')), Errno.ENOENT);
  t.equal(await errnoOf(() => fs.getattr('/sub/nope/deeper')), Errno.ENOENT);
  t.equal(await errnoOf(() => fs.getattr('/a.bin/x')), Errno.ENOENT);
  t.equal(await errnoOf(() => fs.readdir('/nope')), Errno.ENOENT);
  t.equal(await errnoOf(() => fs.open('/nope', 0)), Errno.ENOENT);
  t.equal(await errnoOf(() => fs.getattr('/bad')), Errno.ENOENT, 'a skipped key is not there');
  t.equal(await errnoOf(() => fs.readdir('/a.bin')), Errno.ENOTDIR);
  t.equal(await errnoOf(() => fs.open('/sub', 0)), Errno.EISDIR);
  for (const flags of [1, 2, 0o1000, 0o1 | 0o2000]) {
    t.equal(await errnoOf(() => fs.open('/a.bin', flags)), Errno.EROFS, `open with flags ${flags.toString(8)}`);
  }
  for (const flags of [0o100, 0o2000, 0o4000 /* O_NONBLOCK */, 0o400000 /* O_NOATIME */]) {
    await fs.release(await fs.open('/a.bin', flags)); // read-only opens with harmless flags work
  }
  for (const op of ['write', 'create', 'unlink', 'rename', 'mkdir', 'rmdir', 'truncate', 'chmod', 'setxattr']) {
    t.equal(await errnoOf(() => fs.refuse(op)), Errno.EROFS, op);
  }
  t.equal(await errnoOf(() => fs.read(999, Buffer.alloc(1), 1, 0)), Errno.EBADF);
  t.equal(await errnoOf(() => fs.release(999)), Errno.EBADF);
  const fh = await fs.open('/a.bin', 0);
  t.equal(await errnoOf(() => fs.read(fh, Buffer.alloc(1), 1, -1)), Errno.EINVAL);
  await fs.release(fh);
  t.equal(await errnoOf(() => fs.read(fh, Buffer.alloc(1), 1, 0)), Errno.EBADF, 'a released handle is gone');
});

t.test('reads return the source bytes; short at EOF; metrics count them', async (t) => {
  const client = new FakeObjectClient();
  seed(client);
  const fs = await SluiceFs.create(opts(client));
  t.teardown(() => fs.close());
  const served = async () => (await servedBytes.get()).values.find((v) => v.labels.channel === 'train' && v.labels.mode === 'FastFile')?.value ?? 0;
  const before = await served();
  t.ok((await readAll(fs, '/a.bin')).equals(client.body('ds/a.bin')));
  t.same(await readAll(fs, '/sub/x.txt'), Buffer.from('hello\n'));
  t.equal((await readAll(fs, '/sub/y.txt')).length, 0);
  t.equal(await served() - before, 3 * MiB + 17 + 6);
  const fh = await fs.open('/sub/x.txt', 0);
  const dst = Buffer.alloc(100);
  t.equal(await fs.read(fh, dst, 100, 3), 3);
  t.equal(dst.subarray(0, 3).toString(), 'lo\n');
  t.equal(await fs.read(fh, dst, 100, 6), 0);
  t.equal(await fs.read(fh, dst, 100, 1000), 0);
  t.equal(await fs.read(fh, dst, 0, 0), 0);
  await fs.release(fh);
  const waits = (await readWait.get()).values.filter((v) => v.labels.channel === 'train' && v.metricName === 'sluice_read_wait_seconds_count');
  t.ok((waits[0]?.value ?? 0) > 0, 'read wait histogram observed');
});

t.test('open handles are counted', async (t) => {
  const client = new FakeObjectClient();
  seed(client);
  const fs = await SluiceFs.create(opts(client, { channel: 'handles' }));
  t.teardown(() => fs.close());
  const gauge = async () => (await openHandles.get()).values.find((v) => v.labels.channel === 'handles')?.value;
  const a = await fs.open('/a.bin', 0);
  const b = await fs.open('/a.bin', 0);
  t.not(a, b);
  t.equal(await gauge(), 2);
  await fs.release(a);
  t.equal(await gauge(), 1);
  await fs.release(b);
  t.equal(await gauge(), 0);
});

t.test('an object changed after listing fails the read with ObjectChangedError (ESTALE), never mixed bytes', async (t) => {
  const client = new FakeObjectClient();
  seed(client);
  const fs = await SluiceFs.create(opts(client, { maxPrefetch: 1 * MiB, crossFilePrefetch: 0 }));
  t.teardown(() => fs.close());
  const old = Buffer.from(client.body('ds/a.bin'));
  const fh = await fs.open('/a.bin', 0);
  const first = Buffer.alloc(64 * KiB);
  t.equal(await fs.read(fh, first, first.length, 0), first.length);
  t.ok(first.equals(old.subarray(0, 64 * KiB)));
  await new Promise((r) => setImmediate(r));
  client.put('ds/a.bin', patternBytes(3 * MiB + 17, 99)); // overwritten mid-read
  let failed: unknown;
  for (let pos = 64 * KiB; pos < 3 * MiB + 17; pos += 64 * KiB) {
    const dst = Buffer.alloc(64 * KiB);
    try {
      const n = await fs.read(fh, dst, dst.length, pos);
      t.ok(dst.subarray(0, n).equals(old.subarray(pos, pos + n)), `bytes at ${pos} are the old version's`);
    } catch (err) {
      failed = err;
      break;
    }
  }
  t.ok(failed instanceof ObjectChangedError, 'the read past what was fetched fails');
  t.equal(errnoFor(failed), Errno.ESTALE);
  await fs.release(fh);
  // a new open still pins the listing's ETag: the view is fixed while mounted
  const fh2 = await fs.open('/a.bin', 0);
  await t.rejects(async () => fs.read(fh2, Buffer.alloc(4096), 4096, 2 * MiB + 5), ObjectChangedError);
  await fs.release(fh2);
});

t.test('a deleted object fails with ESTALE; a failed GET is retried by the next read', async (t) => {
  const client = new FakeObjectClient();
  seed(client);
  const fs = await SluiceFs.create(opts(client));
  t.teardown(() => fs.close());
  const fh = await fs.open('/sub/x.txt', 0);
  client.failNext = 1;
  t.equal(await errnoOf(() => fs.read(fh, Buffer.alloc(6), 6, 0)), Errno.EIO);
  const dst = Buffer.alloc(6);
  t.equal(await fs.read(fh, dst, 6, 0), 6, 'the failure was not cached');
  t.equal(dst.toString(), 'hello\n');
  client.delete('ds/sub/deeper/z');
  const fz = await fs.open('/sub/deeper/z', 0);
  t.equal(await errnoOf(() => fs.read(fz, Buffer.alloc(10), 10, 0)), Errno.ESTALE);
});

t.test('statfs', async (t) => {
  const client = new FakeObjectClient();
  seed(client);
  const fs = await SluiceFs.create(opts(client));
  t.teardown(() => fs.close());
  const s = now(fs.statfs());
  t.equal(s.bsize, 4096);
  t.equal(s.blocks, Math.ceil(fs.totalBytes / 4096));
  t.equal(s.bfree, 0);
  t.equal(s.namemax, 255);
  t.equal(s.files, fs.entryCount + 1);
});

t.test('prefix forms: "ds", "ds/" and the whole bucket', async (t) => {
  const client = new FakeObjectClient();
  seed(client);
  client.put('dsx/not-here', Buffer.from('x'));
  for (const prefix of ['ds', 'ds/', '/ds']) {
    const fs = await SluiceFs.create(opts(client, { prefix }));
    t.same(fs.readdir('/'), ['a.bin', 'clash', 'empty', 'sub'], prefix);
    await fs.close();
  }
  const all = await SluiceFs.create(opts(client, { prefix: '' }));
  t.same(all.readdir('/'), ['ds', 'dsx', 'other']);
  await all.close();
});

t.test('bad options are refused at startup with a one-line InvalidArgumentError', async (t) => {
  const client = new FakeObjectClient();
  for (const bad of [{ cacheSize: 0 }, { partSize: -1 }, { maxInflight: 1.5 }, { crossFilePrefetch: -1 }, { maxInflight: 512 * KiB, partSize: 1 * MiB }, { cacheSize: 1 * MiB, partSize: 8 * MiB }]) {
    await t.rejects(SluiceFs.create(opts(client, bad)), InvalidArgumentError, JSON.stringify(bad));
  }
  t.equal(client.lists, 0, 'checked before listing');
});

t.test('reads honour an AbortSignal; close() is idempotent and drops the cache', async (t) => {
  const client = new FakeObjectClient();
  seed(client);
  const fs = await SluiceFs.create(opts(client));
  const fh = await fs.open('/a.bin', 0);
  client.hold();
  const ac = new AbortController();
  const p = fs.read(fh, Buffer.alloc(4096), 4096, 0, { signal: ac.signal });
  ac.abort();
  await t.rejects(Promise.resolve(p), { code: 'SLUICE_ABORTED' });
  client.release();
  await fs.close();
  await fs.close();
  t.equal(fs.cache.size, 0);
  t.equal(fs.openHandleCount, 0);
  await t.rejects(async () => fs.open('/a.bin', 0), { code: 'SLUICE_ABORTED' });
});

t.test('large files of a folder read one after another: the next file starts at the read-ahead window the last one reached', async (t) => {
  const client = new FakeObjectClient();
  for (const n of ['a', 'b', 'c']) client.put(`ds/big/${n}.bin`, patternBytes(12 * MiB, n.charCodeAt(0)));
  client.put('ds/other/d.bin', patternBytes(12 * MiB, 9));
  const fs = await SluiceFs.create(opts(client, { crossFilePrefetch: 0 }));
  t.teardown(() => fs.close());
  /** Bytes asked for by the GETs made during the first read of `path`, and that read's handle. */
  const firstRead = async (path: string): Promise<{ fh: number; asked: number }> => {
    const fh = await fs.open(path, 0);
    const before = client.requests.length;
    const n = await fs.read(fh, Buffer.alloc(128 * KiB), 128 * KiB, 0);
    t.equal(n, 128 * KiB);
    return { fh, asked: client.requests.slice(before).reduce((s, r) => s + r.end - r.start, 0) };
  };
  const readRest = async (fh: number, from: number, to: number): Promise<void> => {
    for (let pos = from; pos < to; pos += 128 * KiB) await fs.read(fh, Buffer.alloc(128 * KiB), 128 * KiB, pos);
    await fs.release(fh);
  };
  const a = await firstRead('/big/a.bin');
  t.ok(a.asked <= 2 * MiB, `the folder's first file ramps up from the first window (${a.asked} bytes asked)`);
  await readRest(a.fh, 128 * KiB, 12 * MiB);
  const b = await firstRead('/big/b.bin');
  t.equal(b.asked, 8 * MiB + 1 * MiB, 'the next file starts at the window a.bin reached (8 MiB ahead of its first read, in whole parts)');
  const d = await firstRead('/other/d.bin');
  t.ok(d.asked <= 2 * MiB, 'another folder carries nothing');
  await fs.release(d.fh);
  await readRest(b.fh, 128 * KiB, 4 * MiB); // b.bin closed before its end
  const c = await firstRead('/big/c.bin');
  t.ok(c.asked <= 2 * MiB, `after a file closed before its end, the next ramps up again (${c.asked} bytes asked)`);
  await fs.release(c.fh);
  t.same(await readAll(fs, '/big/c.bin'), client.body('ds/big/c.bin'), 'bytes');
});

t.test('holdBack: onListing sees only the held objects, the rest go into the view as listed, and the view is the same', async (t) => {
  const held: string[][] = [];
  const views: string[][] = [];
  for (const holdBack of [undefined, (o: { key: string }) => o.key.endsWith('.txt')]) {
    const client = new FakeObjectClient();
    seed(client);
    const fs = await SluiceFs.create(opts(client, {
      onListing: async (objects) => { held.push(objects.map((o) => o.key).sort()); return objects.filter((o) => o.key !== 'ds/sub/y.txt'); },
      ...(holdBack ? { holdBack } : {}),
    }));
    const names: string[] = [];
    for (const dir of ['/', '/sub', '/sub/deeper', '/clash', '/empty']) names.push(...(await fs.readdir(dir)).map((n) => `${dir}:${n}`));
    views.push(names.sort());
    t.same(fs.skippedKeys.map((s) => s.key).sort(), ['ds/bad//name', 'ds/clash'], 'the same keys skipped');
    await fs.close();
  }
  t.same(held[0], ['ds/a.bin', 'ds/bad//name', 'ds/clash', 'ds/clash/inner', 'ds/empty/', 'ds/sub/deeper/z', 'ds/sub/x.txt', 'ds/sub/y.txt'], 'without holdBack: every object');
  t.same(held[1], ['ds/sub/x.txt', 'ds/sub/y.txt'], 'with holdBack: only the held ones');
  t.same(views[1], views[0], 'the same view, what onListing dropped left out in both');
  t.notOk(views[0]!.includes('/sub:y.txt'));
});
