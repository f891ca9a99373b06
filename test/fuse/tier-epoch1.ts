/**
 * Epoch 1 over an empty disk tier, through a real kernel mount: files that cross-file
 * prefetch fetched into memory are opened by JavaScript and read from memory, even once the
 * tier has written them, so the prefetch walk goes on (native/src/fuse_open.c "Fetched
 * into memory", src/fs/core.ts openNode); the next epoch opens them from the tier in C again.
 * Before this, libfuse's thread opened such files from the tier itself: JavaScript never saw
 * those opens, its walk stopped, and the reader waited for S3 past the walk's end
 * (BENCHMARKS.md t14-hot). Every file read is compared with its source by sha256.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import '../helpers/exit-watch.js';
import { TIER_FOLDER } from '../../src/cache/tier-layout.js';
import { uploadLayout, type SeededObject } from '../../src/local/dataset.js';
import { startLocalS3, type LocalS3 } from '../../src/local/s3-server.js';
import { setLogLevel } from '../../src/log.js';
import { metricSum } from '../helpers/metrics.js';
import { useLocalCredentials } from '../helpers/mount-options.js';
import { drained, tierMount } from '../helpers/tier-mount.js';
import { until } from '../helpers/poll.js';

setLogLevel('error');

const MiB = 1024 * 1024;
const BUCKET = 'tierepoch1';
const PREFIX = 'ds/';
/** Files of one tier block each, in one folder: more than the walk's depth (the tests' --cross-file-prefetch, 8) ahead of the first three. */
const FILES = 24;
const SIZE = 40_000;
/** The tests' --cross-file-prefetch (test/helpers/mount-options.ts). */
const DEPTH = 8;

const gets = () => metricSum('sluice_s3_requests_total', { operation: 'get' });
const cOpens = async () => (await metricSum('sluice_fuse_passthrough_opens_total')) + (await metricSum('sluice_fuse_memory_opens_total'));
const diskHits = () => metricSum('sluice_disk_cache_hits_total');

/** sha256 of each file, read whole in order by a child process (the mount is served by this one). */
function childRead(files: string[]): Promise<string[]> {
  const reader = `const fs = require('node:fs'); const { createHash } = require('node:crypto');
    process.stdout.write(JSON.stringify(JSON.parse(process.argv[1]).map((f) => createHash('sha256').update(fs.readFileSync(f)).digest('hex'))));`;
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['-e', reader, JSON.stringify(files)], { maxBuffer: 16 * MiB, timeout: 60_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`reader failed: ${stderr || err.message}`));
      else resolve(JSON.parse(stdout) as string[]);
    });
  });
}

/** Cache files (sidecars) in the tier's objects folder. */
async function tierObjects(dir: string): Promise<number> {
  const objects = path.join(dir, TIER_FOLDER, 'objects');
  let n = 0;
  for (const sub of await readdir(objects).catch(() => [] as string[])) {
    n += (await readdir(path.join(objects, sub)).catch(() => [] as string[])).filter((f) => f.endsWith('.map')).length;
  }
  return n;
}

let s3: LocalS3;
let objects: SeededObject[];
t.before(async () => {
  s3 = await startLocalS3();
  useLocalCredentials(s3.credentials);
  await s3.createBucket(BUCKET);
  objects = await uploadLayout(s3, BUCKET, Array.from({ length: FILES }, (_, i) => ({ key: `${PREFIX}f${String(i).padStart(3, '0')}.bin`, size: SIZE })), 1402);
});
t.teardown(async () => {
  await s3?.stop();
});

t.test('epoch 1: files fetched ahead are read from memory through JavaScript, and the walk goes on; epoch 2 opens them in C', async (t) => {
  const cacheDir = await mkdtemp(path.join(os.tmpdir(), 'sluice-tier-epoch1-'));
  t.teardown(() => rm(cacheDir, { recursive: true, force: true }));
  const m = await tierMount(t, { endpoint: s3.endpoint, uri: `s3://${BUCKET}/${PREFIX}`, cacheDir, name: 'tier-epoch1' });
  const file = (i: number) => path.join(m.mountpoint, objects[i]!.key.slice(PREFIX.length));
  const check = (got: string[], from: number, what: string) =>
    t.same(got, objects.slice(from, from + got.length).map((o) => o.sha256), `${what}: every file's sha256 matches`);

  // Three opens in listing order confirm the walk: it fetches the next DEPTH files into memory.
  check(await childRead([0, 1, 2].map(file)), 0, 'first three files');
  // C's counts reach the metrics when taken (drained(); the mount does it once a second).
  t.ok(await drained(m), 'every handle released');
  const ahead = 3 + DEPTH;
  t.ok(await until(async () => (await tierObjects(cacheDir)) >= ahead, 10_000), `the ${DEPTH} files fetched ahead reach the tier before they are opened (${await tierObjects(cacheDir)} cache files)`);
  const [g0, c0, h0] = [await gets(), await cOpens(), await diskHits()];

  check(await childRead(Array.from({ length: DEPTH }, (_, i) => file(3 + i))), 3, 'the files fetched ahead');
  t.ok(await drained(m), 'every handle released');
  t.equal((await cOpens()) - c0, 0, 'none of them opened in C from the tier (they are in memory)');
  t.equal((await diskHits()) - h0, 0, 'none of them read from the tier');
  // JavaScript saw those opens, so the walk fetched the next files ahead too.
  t.ok(await until(async () => (await gets()) - g0 >= DEPTH, 10_000), `the walk went on: the next ${DEPTH} files fetched ahead (${(await gets()) - g0} GETs)`);

  check(await childRead(Array.from({ length: FILES - ahead }, (_, i) => file(ahead + i))), ahead, 'the rest of the folder');
  t.ok(await drained(m), 'every handle released');

  // Epoch 2, same mount: every file is in the tier, and its mark was taken by its epoch-1 open.
  t.ok(await until(async () => (await tierObjects(cacheDir)) >= FILES, 10_000), 'every file in the tier');
  const [g1, c1] = [await gets(), await cOpens()];
  check(await childRead(Array.from({ length: DEPTH }, (_, i) => file(3 + i))), 3, 'epoch 2');
  t.ok(await drained(m), 'every handle released');
  t.equal((await cOpens()) - c1, DEPTH, 'epoch 2 opens them from the tier in C');
  t.equal((await gets()) - g1, 0, 'with no GET');
});
