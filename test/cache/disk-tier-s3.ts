/**
 * The disk tier end to end: the real S3 client against the local S3 server, real kernel
 * mounts (in this process and as a `sluice mount` child killed with -9), File mode.
 * Every byte read is compared with its source by sha256; S3 GETs are counted from
 * sluice_s3_requests_total.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { childRead } from '../helpers/child-read.js';
import type { Test } from '../helpers/tap.js';

import { DiskCache } from '../../src/cache/disk-cache.js';
import { TIER_FOLDER } from '../../src/cache/tier-layout.js';
import { withDiskTier } from '../../src/cache/tiered-client.js';
import { downloadChannel } from '../../src/channels/file-mode.js';
import { listChannel } from '../../src/channels/sources.js';
import type { ChannelConfig } from '../../src/channels/input-config.js';
import { mountFastFile } from '../../src/fuse/fastfile.js';
import { seedDataset, sourceBytes, type SeededObject } from '../../src/local/dataset.js';
import { startLocalS3, type LocalS3 } from '../../src/local/s3-server.js';
import { setLogLevel } from '../../src/log.js';
import { metricSum } from '../helpers/metrics.js';
import { createObjectClient } from '../../src/s3/s3-client.js';
import { startPipeChannel } from '../../src/pipe/pipe-channel.js';
import type { ObjectInfo } from '../../src/s3/object-client.js';
import { startCli, waitExit, type RunningCli } from '../helpers/cli.js';
import { readFifo, waitFor } from '../helpers/pipe.js';
import { cleanupMount, tempMountpoint } from '../helpers/fuse.js';
import { testMountOptions, useLocalCredentials } from '../helpers/mount-options.js';

setLogLevel('error');

const MiB = 1024 * 1024;
const BUCKET = 'tier';
const PREFIX = 'ds/';
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

const metric = metricSum;
const gets = () => metric('sluice_s3_requests_total', { operation: 'get' });

/** Every object's cache file (data, not its .map sidecar) under a tier folder. */
async function blockFiles(cacheDir: string): Promise<string[]> {
  const out: string[] = [];
  const objs = path.join(cacheDir, TIER_FOLDER, 'objects');
  for (const sub of await readdir(objs).catch(() => [] as string[])) {
    for (const f of await readdir(path.join(objs, sub)).catch(() => [] as string[])) if (!f.endsWith('.map')) out.push(path.join(objs, sub, f));
  }
  return out;
}

let s3: LocalS3;
let objects: SeededObject[];
let total = 0;
const sourceOf = (key: string): Buffer => sourceBytes(objects.find((o) => o.key === key)!);

t.before(async () => {
  s3 = await startLocalS3();
  useLocalCredentials(s3.credentials);
  await s3.createBucket(BUCKET);
  objects = await seedDataset(s3, BUCKET, PREFIX, { smallFiles: { count: 40, size: 30_000, folders: 4 }, largeFiles: { count: 2, size: 6 * MiB + 4321 }, seed: 14 });
  total = objects.reduce((a, o) => a + o.size, 0);
});
t.teardown(() => s3?.stop());

async function tempDir(t: Test, name: string): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), `sluice-${name}-`));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Mounts with the tier in `cacheDir`, reads every file through the kernel, checks sha256, unmounts. Returns GETs made. */
async function epoch(t: Test, cacheDir: string, over: Record<string, unknown> = {}, during?: (mnt: string) => Promise<void>): Promise<number> {
  const mnt = await tempMountpoint(t, 'tier');
  // An 8 MiB memory cache: the dataset (13 MiB) does not fit, so a second epoch would go to S3 without the tier.
  const m = await mountFastFile({ uri: `s3://${BUCKET}/${PREFIX}`, mountpoint: mnt, options: testMountOptions(s3.endpoint, { cacheDir, cacheDirWriteRate: 1024 * MiB, ...over }) });
  const before = await gets();
  try {
    await m.listed;
    if (during) await during(mnt);
    const files = objects.map((o) => path.join(mnt, o.key.slice(PREFIX.length)));
    const got = await childRead(files);
    let bad = 0;
    for (const [i, o] of objects.entries()) if (got[files[i]!] !== o.sha256) bad++;
    t.equal(bad, 0, `every file's sha256 matches (${objects.length} files)`);
  } finally {
    await m.unmount(); // closes the client, which flushes the tier's writes
  }
  return (await gets()) - before;
}

t.test('FastFile: epoch 2 and a restarted mount read from the tier with no S3 GET', async (t) => {
  const cacheDir = await tempDir(t, 'tier-cache');
  const hits0 = await metric('sluice_disk_cache_hits_total');
  const g1 = await epoch(t, cacheDir);
  t.ok(g1 > 0, `epoch 1 read from S3 (${g1} GETs)`);
  t.ok(await metric('sluice_disk_cache_written_bytes_total') >= total, 'epoch 1 wrote every byte to the tier');
  const g2 = await epoch(t, cacheDir);
  t.equal(g2, 0, 'the restarted mount made no GET');
  t.ok(await metric('sluice_disk_cache_hits_total') > hits0, 'disk hits counted');
});

t.test('a block corrupted on disk is detected and fetched again; the read is right', async (t) => {
  const cacheDir = await tempDir(t, 'tier-corrupt');
  await epoch(t, cacheDir);
  // Small files' cache files (one block each), so each damage is one bad block.
  const files: string[] = [];
  for (const f of await blockFiles(cacheDir)) if ((await readFile(f)).length < 256 * 1024) files.push(f);
  t.ok(files.length > 10);
  // Damage three objects: a bit flip in the data, a truncated cache file, a zeroed sidecar header; and lose a fourth one's sidecar.
  const flip = await readFile(files[0]!);
  flip[flip.length - 100]! ^= 0x04;
  await writeFile(files[0]!, flip);
  await writeFile(files[1]!, (await readFile(files[1]!)).subarray(0, 1000));
  const z = await readFile(`${files[2]!}.map`);
  z.fill(0, 0, 64);
  await writeFile(`${files[2]!}.map`, z);
  await rm(`${files[3]!}.map`);
  const f0 = await metric('sluice_disk_cache_checksum_failures_total');
  const g = await epoch(t, cacheDir);
  t.equal(await metric('sluice_disk_cache_checksum_failures_total') - f0, 3, 'three bad blocks detected (the lost sidecar is a plain miss)');
  t.ok(g >= 1 && g <= 4, `only the bad and the unverifiable blocks were fetched again (${g} GETs)`);
  t.equal(await epoch(t, cacheDir), 0, 'all of them written back: the next run makes no GET');
});

t.test('the size bound shrunk between runs holds from the start; reads stay right', async (t) => {
  const cacheDir = await tempDir(t, 'tier-shrink');
  await epoch(t, cacheDir);
  const small = 3 * MiB;
  const after = await epoch(t, cacheDir, { cacheDirSize: small }, async () => {
    const c = await DiskCache.open({ dir: cacheDir, maxBytes: small, writeBytesPerSec: MiB });
    t.ok((await c.scanBytes()).bytes <= small, 'within the new bound right after the mount opened it');
    await c.close();
  });
  t.ok(after > 0, 'what was evicted came from S3 again');
  const c = await DiskCache.open({ dir: cacheDir, maxBytes: small, writeBytesPerSec: MiB });
  t.teardown(() => c.close());
  t.ok((await c.scanBytes()).bytes <= small, 'still within the bound after the run');
});

t.test('another process filling the folder, and the folder removed under the mount: reads stay right', async (t) => {
  const cacheDir = await tempDir(t, 'tier-filled');
  const bound = 8 * MiB;
  await epoch(t, cacheDir, { cacheDirSize: bound }, async () => {
    // Another sluice process writes 12 MiB of its own blocks into the same folder meanwhile.
    const writer = path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'helpers', 'disk-cache-writer.mjs');
    await new Promise<void>((resolve, reject) => execFile(process.execPath, [writer, cacheDir, String(bound), 'z', '48'], { timeout: 60_000 }, (err) => (err ? reject(err) : resolve())));
  });
  const c = await DiskCache.open({ dir: cacheDir, maxBytes: bound, writeBytesPerSec: MiB });
  t.ok((await c.scanBytes()).bytes <= bound, 'both processes together within the bound');
  await c.close();
  // The objects folder disappears while mounted: every read falls back to S3.
  const g = await epoch(t, cacheDir, { cacheDirSize: bound }, async () => {
    await rm(path.join(cacheDir, TIER_FOLDER, 'objects'), { recursive: true, force: true });
  });
  t.ok(g > 0, 'read from S3 instead');
  // The mount made the folder again for its later writes: the next run finds blocks.
  t.ok((await blockFiles(cacheDir)).length > 0, 'cache files written again after the folder came back');
});

t.test('kill -9 of a mount while it writes to the tier: the next process opens the folder and reads right', async (t) => {
  const cacheDir = await tempDir(t, 'tier-kill');
  const mnt = await tempMountpoint(t, 'tier-kill');
  const env: NodeJS.ProcessEnv = { ...process.env, AWS_REGION: 'us-east-1', SLUICE_LOG_LEVEL: 'error' };
  const running: RunningCli = await startCli(['mount', `s3://${BUCKET}/${PREFIX}`, mnt, '--endpoint', s3.endpoint, '--path-style', '--metrics-port', '0',
    '--cache-size', '8MiB', '--part-size', '1MiB', '--cache-dir', cacheDir, '--cache-dir-write-rate', '8MiB'], env);
  t.teardown(() => { running.child.kill('SIGKILL'); });
  // A slow write budget keeps writes queued; kill while the reader is mid-way.
  const reading = childRead(objects.map((o) => path.join(mnt, o.key.slice(PREFIX.length)))).catch(() => undefined);
  // Kill once some blocks are on disk (more are queued behind the 8 MiB/s write budget); bounded wait.
  for (let i = 0; i < 200 && (await blockFiles(cacheDir)).length < 5; i++) await new Promise((r) => setTimeout(r, 50));
  running.child.kill('SIGKILL');
  t.equal((await waitExit(running)).signal, 'SIGKILL');
  await cleanupMount(mnt);
  await reading;
  const written = (await blockFiles(cacheDir)).length;
  t.ok(written > 0, `the killed process had written ${written} blocks`);
  const f0 = await metric('sluice_disk_cache_checksum_failures_total');
  await epoch(t, cacheDir);
  t.equal(await metric('sluice_disk_cache_checksum_failures_total') - f0, 0, 'no torn block was left behind');
  t.same((await readdir(path.join(cacheDir, TIER_FOLDER, 'tmp'))).filter((n) => !n.startsWith('ledger-')), [], 'its partial files were cleaned up');
});

t.test('File mode copies from the tier: a second job on the node makes no GET', async (t) => {
  const cacheDir = await tempDir(t, 'tier-file');
  const channel: ChannelConfig = { name: 'train', s3Uri: `s3://${BUCKET}/${PREFIX}`, s3DataType: 'S3Prefix', distribution: 'FullyReplicated', inputMode: 'File', recordWrapper: 'None', compression: 'None' };
  const job = async () => {
    const inner = createObjectClient({ bucket: BUCKET, endpoint: s3.endpoint, region: 'us-east-1', pathStyle: true, credentials: s3.credentials, maxAttempts: 3 });
    const client = await withDiskTier(inner, { cacheDir, cacheDirWriteRate: 1024 * MiB, endpoint: s3.endpoint });
    const dataDir = await tempDir(t, 'tier-file-data');
    const before = await gets();
    try {
      const { objects: objs } = await listChannel(channel, () => client);
      await downloadChannel({ channel: 'train', dataDir, stateDir: path.join(dataDir, '.state'), objects: objs, partSize: 1 * MiB, maxInflight: 8 * MiB, maxConnections: 8, progress: 'none' });
    } finally {
      await client.close();
    }
    let bad = 0;
    for (const o of objects) if (sha(await readFile(path.join(dataDir, 'train', o.key.slice(PREFIX.length)))) !== o.sha256) bad++;
    t.equal(bad, 0, 'every file right');
    return (await gets()) - before;
  };
  t.ok(await job() > 0, 'the first job downloads');
  t.equal(await job(), 0, 'the second job copies from the tier');
});

t.test('Pipe streams from the tier: a second job makes no GET, bytes right', async (t) => {
  const cacheDir = await tempDir(t, 'tier-pipe');
  const job = async () => {
    const inner = createObjectClient({ bucket: BUCKET, endpoint: s3.endpoint, region: 'us-east-1', pathStyle: true, credentials: s3.credentials, maxAttempts: 3 });
    const client = await withDiskTier(inner, { cacheDir, cacheDirWriteRate: 1024 * MiB, endpoint: s3.endpoint });
    const before = await gets();
    try {
      const infos: ObjectInfo[] = [];
      for await (const o of client.list(PREFIX)) infos.push(o);
      infos.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
      const ch = await startPipeChannel({
        client, channel: 'train', dataDir: await tempDir(t, 'tier-pipe-data'), recordWrapper: 'None', compression: 'None', partSize: 1 * MiB, epochs: 1,
        itemsForEpoch: () => infos.map((info) => ({ kind: 'object' as const, info })),
      });
      try {
        await waitFor(() => existsSync(ch.fifoPath(0)), 60_000, 'FIFO of epoch 0');
        const got = await readFifo(ch.fifoPath(0));
        const want = createHash('sha256');
        for (const info of infos) want.update(sourceOf(info.key));
        t.equal(sha(got), want.digest('hex'), 'the pipe carries the objects in order');
        await ch.done;
      } finally {
        await ch.stop();
      }
    } finally {
      await client.close();
    }
    return (await gets()) - before;
  };
  t.ok(await job() > 0, 'the first job reads S3');
  t.equal(await job(), 0, 'the second job streams from the tier');
});
