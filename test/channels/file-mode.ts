import t from 'tap';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, readdir, rm, stat, symlink, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { downloadChannel, safeTarget, sidecarPath, sweepChannel } from '../../src/channels/file-mode.js';
import { listChannel } from '../../src/channels/sources.js';
import type { ChannelConfig } from '../../src/channels/input-config.js';
import { UnsafeKeyError } from '../../src/errors.js';
import { seedDataset } from '../../src/local/dataset.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import type { ObjectClient } from '../../src/s3/object-client.js';
import { createObjectClient } from '../../src/s3/s3-client.js';
import { bytesFor, MemoryClient } from '../helpers/pipe.js';

const KiB = 1024;
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

const channel = (s3Uri: string): ChannelConfig => ({
  name: 'train', s3Uri, s3DataType: 'S3Prefix', distribution: 'FullyReplicated', inputMode: 'File', recordWrapper: 'None', compression: 'None',
});

t.test('File mode against the local server: bytes match, a second run skips, changes are fetched again', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket('bkt');
  const seeded = await seedDataset(s3, 'bkt', 'ds/', {
    smallFiles: { count: 24, size: 5000, folders: 4 }, largeFiles: { count: 2, size: 700 * KiB }, specialNames: true, seed: 3,
  });
  await s3.putObject('bkt', 'ds/empty.bin', Buffer.alloc(0));
  await s3.putObject('bkt', 'ds/folder-marker/', Buffer.alloc(0));
  const client = createObjectClient({ bucket: 'bkt', endpoint: s3.endpoint, region: 'us-east-1', pathStyle: true, credentials: s3.credentials, maxAttempts: 3 });
  t.teardown(() => client.close());
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'sluice-file-mode-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const dir = path.join(dataDir, 'train');

  const download = async () => {
    const { objects } = await listChannel(channel('s3://bkt/ds/'), () => client);
    // 256 KiB parts: the large objects go in several ranged parts, in parallel.
    return downloadChannel({ channel: 'train', dataDir, stateDir: path.join(dataDir, '.state'), objects, partSize: 256 * KiB, maxInflight: 1024 * KiB, maxConnections: 6, progress: 'none' });
  };

  const first = await download();
  t.equal(first.downloaded, seeded.length + 1, 'every object (and the empty one) downloaded');
  t.equal(first.skipped, 0);
  for (const o of seeded) {
    const local = await readFile(path.join(dir, o.key.slice('ds/'.length)));
    t.equal(sha256(local), o.sha256, o.key) || t.fail(`bytes differ for ${o.key}`);
  }
  t.equal((await stat(path.join(dir, 'empty.bin'))).size, 0);
  t.ok((await stat(path.join(dir, 'folder-marker'))).isDirectory(), 'a folder marker becomes a folder');
  const all = await readdir(dir, { recursive: true });
  t.notOk(all.some((f) => String(f).endsWith('.sluice-part')), 'no temp files left');
  const sidecar = JSON.parse(await readFile(sidecarPath(path.join(dataDir, '.state'), 'train'), 'utf8'));
  t.equal(Object.keys(sidecar.files).length, seeded.length + 1, 'the ETag record lists every file');

  const second = await download();
  t.same(second, { downloaded: 0, downloadedBytes: 0, skipped: seeded.length + 1, skippedBytes: first.downloadedBytes, removed: 0 }, 'second run skips everything');

  // Change one object (new ETag, same size), and damage one local file (other size).
  const changed = seeded.find((o) => o.key.includes('small/'))!;
  const newBody = Buffer.alloc(changed.size, 7);
  await s3.putObject('bkt', changed.key, newBody);
  const damaged = seeded.find((o) => o.key.includes('large/'))!;
  await writeFile(path.join(dir, damaged.key.slice('ds/'.length)), 'short');
  const third = await download();
  t.equal(third.downloaded, 2, 'the changed object and the damaged file are fetched again');
  t.ok((await readFile(path.join(dir, changed.key.slice('ds/'.length)))).equals(newBody));
  t.equal(sha256(await readFile(path.join(dir, damaged.key.slice('ds/'.length)))), damaged.sha256);

  // A local edit that keeps the size is noticed by the mtime.
  const edited = seeded.find((o) => o.key.includes('special/'))!;
  const editedPath = path.join(dir, edited.key.slice('ds/'.length));
  await writeFile(editedPath, Buffer.alloc(edited.size, 1));
  await utimes(editedPath, new Date(), new Date(Date.now() + 5000));
  const fourth = await download();
  t.equal(fourth.downloaded, 1, 'the edited file is fetched again');
  t.equal(sha256(await readFile(editedPath)), edited.sha256);
});

/** A client that must never be called: unsafe keys are rejected before any GET. */
const untouchable: ObjectClient = {
  bucket: 'bkt',
  list: () => { throw new Error('list called'); },
  head: () => Promise.reject(new Error('head called')),
  firstKeyUnder: () => Promise.reject(new Error('firstKeyUnder called')),
  getRange: () => Promise.reject(new Error('getRange called')),
  getStream: () => { throw new Error('getStream called'); },
  close: () => Promise.resolve(),
};

t.test('unsafe keys are rejected before anything is written', async (t) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'sluice-file-unsafe-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const cases: [string, RegExp][] = [
    ['../escape.txt', /"\.\." path segment/],
    ['a/../../escape.txt', /"\.\." path segment/],
    ['/etc/passwd', /absolute/],
    ['a/\0b', /NUL/],
    ['a/./b', /"\." path segment/],
  ];
  for (const [rel, re] of cases) {
    const objects = [
      { key: 'p/ok.bin', rel: 'ok.bin', size: 3, etag: '"x"', client: untouchable },
      { key: `p/${rel}`, rel, size: 3, etag: '"y"', client: untouchable },
    ];
    await t.rejects(downloadChannel({ channel: 'c', dataDir, stateDir: path.join(dataDir, '.state'), objects, partSize: 1024, maxInflight: 4096, maxConnections: 2, progress: 'none' }),
      { code: 'SLUICE_UNSAFE_KEY', message: re }, rel);
  }
  t.same(await readdir(dataDir), [], 'nothing was written');
  t.same(safeTarget('/data/c', 'p/', ''), undefined);
  t.same(safeTarget('/data/c', 'p/a//b', 'a//b'), { file: '/data/c/a/b' });
  t.same(safeTarget('/data/c', 'p/d/', 'd/'), { folder: '/data/c/d' });
  t.throws(() => safeTarget('/data/c', 'p/x.sluice-part', 'x.sluice-part'), UnsafeKeyError);
});

t.test('two keys for one file are rejected', async (t) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'sluice-file-dup-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const objects = [
    { key: 'p/a//b', rel: 'a//b', size: 1, etag: '"x"', client: untouchable },
    { key: 'p/a/b', rel: 'a/b', size: 1, etag: '"y"', client: untouchable },
  ];
  await t.rejects(downloadChannel({ channel: 'c', dataDir, stateDir: path.join(dataDir, '.state'), objects, partSize: 1024, maxInflight: 4096, maxConnections: 2, progress: 'none' }), /would write the same file/);
});

t.test('connections and bytes in flight stay within their bounds; large objects go in parts', async (t) => {
  const client = new MemoryClient('bkt');
  client.delayMs = () => 5;
  const objects = [];
  for (let i = 0; i < 6; i++) {
    const key = `p/o${i}`;
    const info = client.put(key, bytesFor(key, i === 0 ? 10_000 : 2500));
    objects.push({ ...info, rel: `o${i}`, client });
  }
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'sluice-file-bounds-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  let bytes = 0;
  let maxBytes = 0;
  const getRange = client.getRange.bind(client);
  client.getRange = async (key, start, end, etag, opts) => {
    bytes += end - start;
    maxBytes = Math.max(maxBytes, bytes);
    try { return await getRange(key, start, end, etag, opts); } finally { bytes -= end - start; }
  };
  // Parts are streamed: a part's bytes are in flight from the call until its last chunk is taken.
  const getStream = client.getStream.bind(client);
  client.getStream = async function* (key, etag, opts = {}) {
    const n = (opts.end ?? opts.size!) - (opts.start ?? 0);
    bytes += n;
    maxBytes = Math.max(maxBytes, bytes);
    try { yield* getStream(key, etag, opts); } finally { bytes -= n; }
  };
  // 'bar' draws with cli-progress on a terminal (and stays silent when stderr is not one).
  const r = await downloadChannel({ channel: 'c', dataDir, stateDir: path.join(dataDir, '.state'), objects, partSize: 1000, maxInflight: 3000, maxConnections: 3, progress: 'bar' });
  t.equal(r.downloaded, 6);
  t.ok(maxBytes <= 3000, `at most 3000 bytes requested at once, saw ${maxBytes}`);
  t.ok(client.maxInflight <= 3, `at most 3 GETs at once, saw ${client.maxInflight}`);
  t.equal(client.requested.filter((q) => q.key === 'p/o0').length, 10, 'the 10,000-byte object went in 10 parts');
  for (const o of objects) t.ok((await readFile(path.join(dataDir, 'c', o.rel))).equals(bytesFor(o.key, o.size)), o.key);
});

t.test('an abort stops the download, removes partial files and keeps the record of finished ones', async (t) => {
  const client = new MemoryClient('bkt');
  client.delayMs = (key) => (key === 'p/slow' ? 60_000 : 0);
  const fast = client.put('p/fast', bytesFor('fast', 100));
  const slow = client.put('p/slow', bytesFor('slow', 5000));
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'sluice-file-abort-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const ac = new AbortController();
  const p = downloadChannel({ channel: 'c', dataDir, stateDir: path.join(dataDir, '.state'), objects: [{ ...fast, rel: 'fast', client }, { ...slow, rel: 'slow', client }], partSize: 1000, maxInflight: 10_000, maxConnections: 4, progress: 'none', signal: ac.signal });
  for (let i = 0; i < 200 && client.gets < 6; i++) await new Promise((r) => setTimeout(r, 10));
  ac.abort();
  await t.rejects(p, { code: 'SLUICE_ABORTED' });
  const left = await readdir(path.join(dataDir, 'c'));
  t.same(left, ['fast'], 'the finished file stays, no partial file');
  const sidecar = JSON.parse(await readFile(sidecarPath(path.join(dataDir, '.state'), 'c'), 'utf8'));
  t.same(Object.keys(sidecar.files), ['fast']);
});

t.test('a failed GET fails the channel with its error and leaves no partial file', async (t) => {
  const client = new MemoryClient('bkt');
  const a = client.put('p/a', bytesFor('a', 3000));
  client.fail = (key) => (key === 'p/a' ? new Error('boom') : undefined);
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'sluice-file-fail-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  await t.rejects(downloadChannel({ channel: 'c', dataDir, stateDir: path.join(dataDir, '.state'), objects: [{ ...a, rel: 'a', client }], partSize: 1000, maxInflight: 10_000, maxConnections: 4, progress: 'none' }), /boom/);
  t.same(await readdir(path.join(dataDir, 'c')), []);
});

t.test('parts larger than a write batch are written in several batches at the right offsets', async (t) => {
  const client = new MemoryClient('bkt');
  // 2.5 MiB + 1 in 1 MiB parts: each part is several 256 KiB batches of the client's 1,000-byte chunks.
  const big = client.put('p/big', bytesFor('big', 2.5 * 1024 * KiB + 1));
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'sluice-file-batches-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const r = await downloadChannel({ channel: 'c', dataDir, stateDir: path.join(dataDir, '.state'), objects: [{ ...big, rel: 'big', client }], partSize: 1024 * KiB, maxInflight: 4096 * KiB, maxConnections: 3, progress: 'none' });
  t.equal(r.downloadedBytes, big.size);
  t.ok((await readFile(path.join(dataDir, 'c', 'big'))).equals(bytesFor('big', big.size)), 'exact bytes');
  t.equal(client.requested.filter((q) => q.key === 'p/big').length, 3, 'three parts');
});

t.test('streamed parts against the local server: exact bytes, no temp file left', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket('bkt');
  const body = bytesFor('streamed', 1536 * KiB + 7);
  const etag = await s3.putObject('bkt', 'ds/streamed.bin', body);
  const client = createObjectClient({ bucket: 'bkt', endpoint: s3.endpoint, region: 'us-east-1', pathStyle: true, credentials: s3.credentials, maxAttempts: 3 });
  t.teardown(() => client.close());
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'sluice-file-streamed-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  // 1 MiB parts: a 1 MiB part and a 512 KiB + 7 tail, both larger than a write batch.
  const r = await downloadChannel({ channel: 'c', dataDir, stateDir: path.join(dataDir, '.state'), objects: [{ key: 'ds/streamed.bin', size: body.length, etag, rel: 'streamed.bin', client }], partSize: 1024 * KiB, maxInflight: 4096 * KiB, maxConnections: 4, progress: 'none' });
  t.equal(r.downloadedBytes, body.length);
  t.equal(sha256(await readFile(path.join(dataDir, 'c', 'streamed.bin'))), sha256(body), 'exact bytes');
  t.same(await readdir(path.join(dataDir, 'c')), ['streamed.bin'], 'no temp file left');
});

t.test("the channel folder ends holding exactly this run's objects: strays, partial files and deleted objects go", async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket('bkt');
  const bodies = new Map<string, Buffer>([['ds/a', Buffer.from('aaaa')], ['ds/sub/b', Buffer.from('bbbbbb')], ['ds/sub/deep/c', Buffer.alloc(300 * KiB, 3)], ['ds/gone', Buffer.from('soon deleted')]]);
  for (const [k, b] of bodies) await s3.putObject('bkt', k, b);
  await s3.putObject('bkt', 'ds/marker/', Buffer.alloc(0));
  const client = createObjectClient({ bucket: 'bkt', endpoint: s3.endpoint, region: 'us-east-1', pathStyle: true, credentials: s3.credentials, maxAttempts: 3 });
  t.teardown(() => client.close());
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'sluice-file-exact-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const dir = path.join(dataDir, 'train');
  const stateDir = path.join(dataDir, '..', `${path.basename(dataDir)}-state`);
  t.teardown(() => rm(stateDir, { recursive: true, force: true }));
  const download = async () => {
    const { objects } = await listChannel(channel('s3://bkt/ds/'), () => client);
    return downloadChannel({ channel: 'train', dataDir, stateDir, objects, partSize: 128 * KiB, maxInflight: 512 * KiB, maxConnections: 4, progress: 'none' });
  };
  const listing = async () => (await readdir(dir, { recursive: true, withFileTypes: true }))
    .map((d) => path.relative(dir, path.join(d.parentPath, d.name)) + (d.isDirectory() ? '/' : '')).sort();

  // What earlier runs (another host's shard, a killed run, a hand edit, an old version's record) left.
  await mkdir(path.join(dir, 'sub', 'deep'), { recursive: true });
  await mkdir(path.join(dir, 'other-host', 'x'), { recursive: true });
  await writeFile(path.join(dir, 'other-host', 'x', 'shard-3'), 'not mine');
  await writeFile(path.join(dir, 'sub', 'deep', 'c.sluice-part'), 'half');
  await writeFile(path.join(dir, 'a.sluice-part'), 'half');
  await mkdir(path.join(dir, 'sub', 'b'), { recursive: true }); // a folder where a file goes
  await writeFile(path.join(dir, 'sub', 'b', 'old'), 'old');
  await symlink('/etc/passwd', path.join(dir, 'link'));
  await writeFile(path.join(dataDir, '.train.sluice-etags.json'), '{}');

  const first = await download();
  t.ok(first.removed >= 5, `stray entries removed (${first.removed})`);
  const expected = ['a', 'gone', 'marker/', 'sub/', 'sub/b', 'sub/deep/', 'sub/deep/c'];
  t.same(await listing(), expected, 'exactly the objects, no partial file, no stray');
  for (const [k, b] of bodies) t.ok((await readFile(path.join(dir, k.slice(3)))).equals(b), k);
  t.same(await readdir(dataDir), ['train'], 'input/data holds only the channel: the ETag record lives elsewhere');
  t.ok((await stat(sidecarPath(stateDir, 'train'))).isFile(), 'the ETag record is in the state folder');

  // An object deleted from S3 disappears from the channel; the others are kept (skipped).
  await s3.deleteObject('bkt', 'ds/gone');
  const second = await download();
  t.same(await listing(), expected.filter((e) => e !== 'gone'));
  t.equal(second.removed, 1);
  t.equal(second.downloaded, 0);
  t.equal(second.skipped, 3);
});

// ---- issue 11: parts land as they arrive (mapped into the file, or written piece by piece from a slab) ----

t.test('parts are written piece by piece as they land: a connection broken mid-part leaves exact bytes', async (t) => {
  const { startFaultProxy } = await import('../helpers/fault-proxy.js');
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket('bkt');
  // 3 parts of 3 MiB and a tail: several 1 MiB pieces per part; a fault at half a part lands mid-piece.
  const body = bytesFor('faulty', 9 * 1024 * KiB + 12_345);
  const etag = await s3.putObject('bkt', 'ds/big.bin', body);
  const proxy = await startFaultProxy(s3.port);
  t.teardown(() => proxy.close());
  const client = createObjectClient({ bucket: 'bkt', endpoint: proxy.endpoint, region: 'us-east-1', pathStyle: true, credentials: s3.credentials, maxAttempts: 5 });
  t.teardown(() => client.close());
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'sluice-file-pieces-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  // Count the writes File mode makes: more than one per part means pieces went as they landed.
  const { open: openFile } = await import('node:fs/promises');
  const probe = await openFile(process.execPath, 'r');
  const proto = Object.getPrototypeOf(probe) as { writev: (...a: unknown[]) => Promise<{ bytesWritten: number }> };
  await probe.close();
  const writev = proto.writev;
  let writes = 0;
  proto.writev = function (this: unknown, ...a: unknown[]) { writes++; return writev.apply(this, a); };
  t.teardown(() => { proto.writev = writev; });
  proxy.set({ resetMidBody: 2, truncateBody: 1 });
  const r = await downloadChannel({ channel: 'c', dataDir, stateDir: path.join(dataDir, '.state'), objects: [{ key: 'ds/big.bin', size: body.length, etag, rel: 'big.bin', client }], partSize: 3 * 1024 * KiB, maxInflight: 6 * 1024 * KiB, maxConnections: 2, progress: 'none' });
  t.equal(r.downloadedBytes, body.length);
  t.equal(proxy.counts.resetMidBody, 2, 'two GETs were reset halfway');
  t.equal(proxy.counts.truncateBody, 1, 'one GET was cut short halfway');
  // Each broken GET is retried from the byte where it broke, so the retries ask for less than a part.
  t.ok(proxy.gets.some((g) => g.start % (3 * 1024 * KiB) !== 0), 'a retry went on from where its attempt broke');
  t.ok(writes > 4, `the 3 parts and the tail went to the file in pieces (${writes} writes)`);
  t.equal(sha256(await readFile(path.join(dataDir, 'c', 'big.bin'))), sha256(body), 'exact bytes');
  t.same(await readdir(path.join(dataDir, 'c')), ['big.bin'], 'no temp file left');
});

t.test('the in-flight budget bounds GETs and parts still being written together; a GET does not wait for a write', async (t) => {
  // A client that ignores `into`: every part is a buffer of its own, written after its GET.
  // Writes are made slow (FileHandle.writev delayed), so parts pile up between GET and file.
  const { open: openFile } = await import('node:fs/promises');
  const probe = await openFile(process.execPath, 'r');
  const proto = Object.getPrototypeOf(probe) as { writev: (...a: unknown[]) => Promise<{ bytesWritten: number }> };
  await probe.close();
  const writev = proto.writev;
  let held = 0;
  let maxHeld = 0;
  let writing = 0;
  let maxGetsWhileWriting = 0;
  const client = new MemoryClient('bkt');
  proto.writev = async function (this: unknown, ...a: unknown[]) {
    writing++;
    await new Promise((r) => setTimeout(r, 25));
    try {
      const res = await writev.apply(this, a);
      held -= res.bytesWritten;
      return res;
    } finally {
      writing--;
    }
  };
  t.teardown(() => { proto.writev = writev; });
  client.delayMs = () => 2;
  const objects = [];
  for (let i = 0; i < 4; i++) {
    const key = `p/o${i}`;
    objects.push({ ...client.put(key, bytesFor(key, 8000)), rel: `o${i}`, client });
  }
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'sluice-file-held-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const getRange = client.getRange.bind(client);
  client.getRange = async (key, start, end, etag, opts) => {
    held += end - start;
    maxHeld = Math.max(maxHeld, held);
    if (writing > 0) maxGetsWhileWriting = Math.max(maxGetsWhileWriting, client.inflight + 1);
    return getRange(key, start, end, etag, opts);
  };
  const r = await downloadChannel({ channel: 'c', dataDir, stateDir: path.join(dataDir, '.state'), objects, partSize: 1000, maxInflight: 4000, maxConnections: 2, progress: 'none' });
  t.equal(r.downloaded, 4);
  t.ok(client.maxInflight <= 2, `at most 2 GETs at once (saw ${client.maxInflight})`);
  t.ok(maxHeld <= 4000, `at most 4000 bytes fetched and not yet written, saw ${maxHeld}`);
  t.ok(maxHeld > 2000, `parts waiting for their write do not hold a connection: ${maxHeld} bytes held with 2 connections`);
  t.ok(maxGetsWhileWriting >= 1, 'GETs ran while writes were pending');
  for (const o of objects) t.ok((await readFile(path.join(dataDir, 'c', o.rel))).equals(bytesFor(o.key, o.size)), o.key);
});

// ---- issue 43 ----

/** Every entry below `dir`, as relative paths ("x/" for a folder), sorted. */
async function tree(dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true, withFileTypes: true }))
    .map((d) => path.relative(dir, path.join(d.parentPath, d.name)) + (d.isDirectory() ? '/' : '')).sort();
}

t.test('issue 43 defect 2: a channel named "." or ".." removes nothing: not the other channels, not input/config', async (t) => {
  const root = await mkdtemp(path.join(os.tmpdir(), 'sluice-file-dots-'));
  t.teardown(() => rm(root, { recursive: true, force: true }));
  const dataDir = path.join(root, 'input', 'data');
  // What a job's root holds when a File channel starts: another channel's files, the config, the state.
  await mkdir(path.join(dataDir, 'val', 'sub'), { recursive: true });
  await writeFile(path.join(dataDir, 'val', 'sub', 'v.bin'), 'validation');
  await mkdir(path.join(root, 'input', 'config'), { recursive: true });
  await writeFile(path.join(root, 'input', 'config', 'inputdataconfig.json'), '{}');
  await writeFile(path.join(root, 'input', 'config', 'resourceconfig.json'), '{}');
  const before = await tree(root);
  const client = new MemoryClient('bkt');
  const objects = [{ ...client.put('p/one', bytesFor('p/one', 100)), rel: 'one', client }];
  for (const name of ['.', '..']) {
    await t.rejects(downloadChannel({ channel: name, dataDir, stateDir: path.join(root, '.sluice', 'file-mode'), objects, partSize: 1024, maxInflight: 4096, maxConnections: 2, progress: 'none' }),
      { code: 'SLUICE_CONFIG', message: new RegExp(`channel "${name.replace(/\./g, '\\.')}"`) }, `channel ${name} is refused`);
    t.same(await tree(root), before, `channel ${name}: nothing was removed or written`);
  }
  t.equal(client.gets, 0, 'no GET was made');
});

t.test('issue 43 defect 2: the sweep never removes anything outside its own channel folder', async (t) => {
  const root = await mkdtemp(path.join(os.tmpdir(), 'sluice-file-sweep-'));
  t.teardown(() => rm(root, { recursive: true, force: true }));
  const dataDir = path.join(root, 'data');
  await mkdir(path.join(dataDir, 'train'), { recursive: true });
  await writeFile(path.join(dataDir, 'train', 'stray'), 'x');
  await mkdir(path.join(dataDir, 'val'), { recursive: true });
  await writeFile(path.join(dataDir, 'val', 'v'), 'v');
  await writeFile(path.join(root, 'config.json'), '{}');
  const before = await tree(root);
  // A folder that is the data folder itself, its parent, or beside it: refused before anything goes.
  for (const dir of [dataDir, path.join(dataDir, '.'), path.join(dataDir, '..'), root, path.join(root, 'elsewhere'), path.join(dataDir, 'train', '..', '..')]) {
    await t.rejects(sweepChannel(dir, new Set(), new Set(), dataDir), { code: 'SLUICE_CONFIG', message: /will not sweep/ }, `sweep of ${dir} refused`);
    t.same(await tree(root), before, `sweep of ${dir}: nothing removed`);
  }
  // Its own folder is swept, and only it.
  t.equal(await sweepChannel(path.join(dataDir, 'train'), new Set(), new Set(), dataDir), 1);
  t.same(await tree(root), before.filter((p) => p !== 'data/train/stray'), 'only the channel\'s stray went');
});

t.test('issue 43 defect 10: a file where another key needs a folder fails before any GET, naming both keys, leaving no partial file', async (t) => {
  const cases: [string, string[], string, string][] = [
    ['a and a/b', ['a', 'a/b'], 'p/a', 'p/a/b'],
    ['a/b/c and a', ['a/b/c', 'a'], 'p/a', 'p/a/b/c'],
    ['x/y and the marker x/y/', ['x/y', 'x/y/'], 'p/x/y', 'p/x/y/'],
  ];
  for (const [what, rels, fileKey, folderKey] of cases) {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'sluice-file-clash-'));
    t.teardown(() => rm(dataDir, { recursive: true, force: true }));
    const objects = rels.map((rel) => ({ key: `p/${rel}`, rel, size: rel.endsWith('/') ? 0 : 3, etag: '"x"', client: untouchable }));
    const err = await downloadChannel({ channel: 'c', dataDir, stateDir: path.join(dataDir, '.state'), objects, partSize: 1024, maxInflight: 4096, maxConnections: 2, progress: 'none' })
      .then(() => undefined, (e: unknown) => e as UnsafeKeyError);
    t.equal(err?.code, 'SLUICE_UNSAFE_KEY', `${what}: an UnsafeKeyError (got ${String(err)})`);
    t.ok(err?.message.includes(JSON.stringify(fileKey)) && err.message.includes(JSON.stringify(folderKey)), `${what}: names both keys: ${err?.message}`);
    t.same(await readdir(dataDir), [], `${what}: nothing was written, no partial file`);
  }
});
