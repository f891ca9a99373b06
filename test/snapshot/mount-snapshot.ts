/**
 * Snapshots, archived objects and partition filters end to end (issue 15): the real S3
 * client and a real kernel mount over the local S3 server, behind the fault proxy, which
 * counts LIST requests, can refuse them, and reports storage classes s3rver does not have.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, open, readdir, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { run as snapshotCommand } from '../../src/commands/snapshot.js';
import { mountFastFile } from '../../src/fuse/fastfile.js';
import { generateBytes } from '../../src/local/dataset.js';
import { registry } from '../../src/metrics/metrics.js';
import { startSummary } from '../../src/metrics/summary.js';
import { readSnapshot } from '../../src/snapshot/snapshot.js';
import { listChannel } from '../../src/channels/sources.js';
import { ArchivedObjectsError, ObjectChangedError } from '../../src/errors.js';
import { clientOptionsFrom, createObjectClient } from '../../src/s3/s3-client.js';
import { tempMountpoint } from '../helpers/fuse.js';
import { localS3BehindProxy, testMountOptions } from '../helpers/mount-options.js';

const BUCKET = 'snap';
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function metric(name: string, labels: string): Promise<number | undefined> {
  const text = await registry.metrics();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes(labels));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

t.test('snapshots, archived objects and partition filters over s3rver', async (t) => {
  const { s3, proxy } = await localS3BehindProxy(t, BUCKET);
  const bodies = new Map<string, Buffer>();
  const put = async (key: string, size: number, seed = 1) => {
    const b = generateBytes(key, size, seed);
    bodies.set(key, b);
    await s3.putObject(BUCKET, key, b);
  };
  for (const k of ['data/a.bin', 'data/b.bin', 'data/sub/c.bin', 'data/cold.bin', 'data/deep.bin']) await put(k, 300_000);
  await put('data/late/late.bin', 300_000);
  for (let d = 1; d <= 4; d++) for (const r of ['kr', 'us']) for (const p of [0, 1]) await put(`tbl/dt=2026-06-0${d}/region=${r}/part-${p}.bin`, 5_000);
  // s3rver reports a folder in a delimiter listing only when it holds an object directly
  // (S3 reports every folder): a marker per partition folder, as Hive writers often leave.
  for (let d = 1; d <= 4; d++) await put(`tbl/dt=2026-06-0${d}/_SUCCESS`, 0);
  const options = testMountOptions(proxy.endpoint);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'snapshot-'));
  const file = path.join(dir, 'data.snap.gz');

  // s3rver has no storage classes: the proxy reports them in listings and HEADs, and
  // refuses GETs of those keys with 403 InvalidObjectState, as S3 does.
  proxy.set({ storageClass: { 'data/cold.bin': 'GLACIER', 'data/deep.bin': 'INTELLIGENT_TIERING' }, archiveStatus: { 'data/deep.bin': 'DEEP_ARCHIVE_ACCESS' } });

  t.test('sluice snapshot writes every key, with classes and the Intelligent-Tiering tier from HEAD', async (t) => {
    const code = await snapshotCommand([`s3://${BUCKET}/data/`, file, '--endpoint', proxy.endpoint, '--path-style', '--region', 'us-east-1', '--log-level', 'silent']);
    t.equal(code, 0);
    const s = await readSnapshot(file);
    t.equal(s.header.uri, `s3://${BUCKET}/data/`);
    t.same(s.objects.map((o) => o.key), ['data/a.bin', 'data/b.bin', 'data/cold.bin', 'data/deep.bin', 'data/late/late.bin', 'data/sub/c.bin']);
    t.equal(s.objects[2]!.storageClass, 'GLACIER');
    t.equal(s.objects[3]!.archiveStatus, 'DEEP_ARCHIVE_ACCESS');
    t.equal(s.objects[0]!.storageClass, 'STANDARD');
  });

  t.test('a mount from the snapshot sends no LIST, reads the same bytes, and an overwrite is ESTALE', async (t) => {
    proxy.set({ denyListings: true });
    t.teardown(() => proxy.set({ denyListings: false }));
    const lists0 = proxy.counts.listRequests!;
    const mnt = await tempMountpoint(t, 'from-snapshot');
    const m = await mountFastFile({ uri: undefined, mountpoint: mnt, channel: 'snapmount', options, dataset: { snapshot: file, skipArchived: false } });
    t.teardown(() => m.unmount());
    t.ok(m.core.isListed, 'the view is complete when the mount answers');
    t.same((await readdir(mnt)).sort(), ['a.bin', 'b.bin', 'cold.bin', 'deep.bin', 'late', 'sub']);
    for (const k of ['data/a.bin', 'data/b.bin', 'data/sub/c.bin']) {
      t.equal(sha(await readFile(path.join(mnt, k.slice(5)))), sha(bodies.get(k)!), k);
    }
    t.equal(proxy.counts.listRequests! - lists0, 0, 'no LIST request at all');
    t.equal(await metric('sluice_snapshot_info', 'channel="snapmount"'), 1, 'the metrics name the snapshot');
    const lines = await startSummary({ sink: () => undefined }).stop();
    t.match(lines.find((l) => l.includes('snapmount')), /\(snapshot data\.snap\.gz [0-9a-f]{12}\)$/, 'so does the summary line');
    // Archived objects are shown, and their open fails with ENODATA (not EIO).
    await t.rejects(open(path.join(mnt, 'cold.bin')), { code: 'ENODATA' });
    await t.rejects(open(path.join(mnt, 'deep.bin')), { code: 'ENODATA' });
    t.equal(await metric('sluice_archived_objects', 'channel="snapmount"'), 2);

    // Overwritten after the snapshot (and never read, so nothing is cached): ESTALE, never the new bytes.
    await put('data/late/late.bin', 300_000, 2);
    let got: Buffer | undefined;
    const err = await readFile(path.join(mnt, 'late', 'late.bin')).then((b) => { got = b; return undefined; }, (e: NodeJS.ErrnoException) => e);
    t.equal(got, undefined, 'no bytes served');
    t.equal(err?.errno, -116, `ESTALE (libuv has no name for it), got ${err?.code}`);
    // A file read before the overwrite keeps serving the snapshot's bytes from the cache, never new ones.
    await put('data/a.bin', 300_000, 3);
    const again = await readFile(path.join(mnt, 'a.bin')).catch((e: NodeJS.ErrnoException) => e);
    if (Buffer.isBuffer(again)) t.equal(sha(again), sha(generateBytes('data/a.bin', 300_000, 1)), 'old bytes from the cache');
    else t.equal(again.errno, -116);
  });

  t.test('--skip-archived leaves them out, counted', async (t) => {
    const mnt = await tempMountpoint(t, 'skip');
    const m = await mountFastFile({ uri: `s3://${BUCKET}/data/`, mountpoint: mnt, channel: 'skipmount', options, dataset: { skipArchived: true } });
    t.teardown(() => m.unmount());
    await m.listed;
    t.same((await readdir(mnt)).sort(), ['a.bin', 'b.bin', 'late', 'sub']);
    t.equal(await metric('sluice_archived_skipped_objects_total', 'channel="skipmount"'), 2);
  });

  t.test('Pipe and File channels: archived objects refused up front; a snapshot channel reads pinned versions', async (t) => {
    const client = createObjectClient({ ...clientOptionsFrom(BUCKET, options) });
    t.teardown(() => client.close());
    const clientFor = () => client;
    const base = { s3DataType: 'S3Prefix', distribution: 'FullyReplicated', recordWrapper: 'None', compression: 'None' } as const;
    const err = await listChannel({ ...base, name: 'train', s3Uri: `s3://${BUCKET}/data/`, inputMode: 'Pipe' }, clientFor).catch((e: unknown) => e);
    t.ok(err instanceof ArchivedObjectsError, 'refused before anything is streamed');
    t.match((err as ArchivedObjectsError).oneLine(), /channel "train".*: 2 objects are archived \(GLACIER, INTELLIGENT_TIERING DEEP_ARCHIVE_ACCESS\).*"data\/cold\.bin", "data\/deep\.bin".*restore-object.*--skip-archived/);
    const skipped = await listChannel({ ...base, name: 'train2', s3Uri: `s3://${BUCKET}/data/`, inputMode: 'File' }, clientFor, undefined, true);
    t.equal(skipped.objects.length, 4, '--skip-archived leaves them out');

    // From the snapshot, with listings refused: the snapshot's objects, and a stream of an
    // object overwritten since fails with an error naming the key, never with the new bytes.
    proxy.set({ denyListings: true });
    t.teardown(() => proxy.set({ denyListings: false }));
    const fromSnap = await listChannel({ ...base, name: 'train3', s3Uri: `s3://${BUCKET}/data/`, inputMode: 'Pipe', snapshot: file }, clientFor, undefined, true);
    t.same(fromSnap.objects.map((o) => o.key), ['data/a.bin', 'data/b.bin', 'data/late/late.bin', 'data/sub/c.bin']);
    const late = fromSnap.objects.find((o) => o.key === 'data/late/late.bin')!;
    const chunks: Buffer[] = [];
    const streamErr = await (async () => { for await (const c of client.getStream(late.key, late.etag, { size: late.size })) chunks.push(c); })().catch((e: unknown) => e);
    t.ok(streamErr instanceof ObjectChangedError, 'the object changed since the snapshot');
    t.match((streamErr as Error).message, /s3:\/\/snap\/data\/late\/late\.bin/, 'the error names the key');
    t.equal(chunks.length, 0, 'no bytes of the new version');
  });

  t.test('a partition filter lists only the matching partitions (LIST requests counted)', async (t) => {
    const lists0 = proxy.counts.listRequests!;
    const mnt = await tempMountpoint(t, 'filtered');
    const out = path.join(dir, 'tbl.snap');
    const m = await mountFastFile({
      uri: `s3://${BUCKET}/tbl/`, mountpoint: mnt, channel: 'filtered', options,
      dataset: { filter: ['dt>=2026-06-03', 'region=kr'], skipArchived: false, snapshotOut: out },
    });
    t.teardown(() => m.unmount());
    await m.listed;
    // tbl/ with a delimiter (1), each kept dt= folder with a delimiter (2), each kept
    // region=kr folder flat (2). The unfiltered walk would also list the 2 other dt= folders
    // and the 4 region=us folders.
    t.equal(proxy.counts.listRequests! - lists0, 5, 'LIST requests of the kept partitions only');
    t.same((await readdir(mnt)).sort(), ['dt=2026-06-03', 'dt=2026-06-04']);
    t.same(await readdir(path.join(mnt, 'dt=2026-06-03')), ['region=kr']);
    const k = 'tbl/dt=2026-06-04/region=kr/part-1.bin';
    t.equal(sha(await readFile(path.join(mnt, k.slice(4)))), sha(bodies.get(k)!));
    const s = await readSnapshot(out);
    t.equal(s.objects.length, 4, '--snapshot-out wrote the filtered listing');
    t.same(s.header.listing.filters, ['dt>=2026-06-03', 'region=kr']);
  });
});
