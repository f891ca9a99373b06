/**
 * Large files of the disk tier checked ahead (native/src/fuse_open.c, "Checked ahead"): when
 * a passthrough OPEN checks a large file afresh, the next listed file is checked on a thread
 * of its own, and its OPEN uses that check. Real kernel mounts over a tier filled once, every
 * byte read compared with its source by sha256: a reader that goes through a folder in order
 * uses the checks made ahead (and gets the same bytes as with SLUICE_NO_CHECK_AHEAD=1); a
 * cache file written in place after its check ahead is checked again at its OPEN, found
 * damaged, and read from S3, never served.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, open, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import '../helpers/exit-watch.js';
import { skip, type Test } from '../helpers/tap.js';
import type { FastFileMount } from '../../src/fuse/fastfile.js';
import { uploadLayout, type SeededObject } from '../../src/local/dataset.js';
import { startLocalS3, type LocalS3 } from '../../src/local/s3-server.js';
import { setLogLevel } from '../../src/log.js';
import { metricSum as metric } from '../helpers/metrics.js';
import { useLocalCredentials } from '../helpers/mount-options.js';
import { drained, fillTier, tierMount } from '../helpers/tier-mount.js';

setLogLevel('error');

const MiB = 1024 * 1024;
const BUCKET = 'ahead';
const PREFIX = 'ds/';
/** Files of 9 MiB and a bit: above memread.h's AHEAD_MIN (8 MiB), so each is checked ahead of its OPEN. */
const SIZE = 9 * MiB + 4321;
const FILES = 4;

const ahead = () => metric('sluice_fuse_passthrough_checked_ahead_total');
const started = () => metric('sluice_fuse_passthrough_checks_ahead_total');
const ptOpens = () => metric('sluice_fuse_passthrough_opens_total');
const gets = () => metric('sluice_s3_requests_total', { operation: 'get' });
const failures = () => metric('sluice_disk_cache_checksum_failures_total');

/** Reads each file whole, one after another, in a child process: their sha256s. */
function readInOrder(files: string[]): Promise<string[]> {
  const script = `const fs = require('node:fs'); const { createHash } = require('node:crypto');
    process.stdout.write(JSON.stringify(JSON.parse(process.argv[1]).map((f) => createHash('sha256').update(fs.readFileSync(f)).digest('hex'))));`;
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['-e', script, JSON.stringify(files)], { timeout: 120_000 }, (err, stdout, stderr) => (err ? reject(new Error(stderr || err.message)) : resolve(JSON.parse(stdout) as string[])));
  });
}

let s3: LocalS3;
let objects: SeededObject[];
let cacheDir: string;
let kernelPassthrough = false;
const fileOf = (mnt: string, o: SeededObject) => path.join(mnt, o.key.slice(PREFIX.length));

function mount(t: Test, name: string): Promise<FastFileMount> {
  return tierMount(t, { endpoint: s3.endpoint, uri: `s3://${BUCKET}/${PREFIX}`, cacheDir, name });
}

t.before(async () => {
  s3 = await startLocalS3();
  useLocalCredentials(s3.credentials);
  await s3.createBucket(BUCKET);
  objects = await uploadLayout(s3, BUCKET, Array.from({ length: FILES }, (_, i) => ({ key: `${PREFIX}big/f${i}.bin`, size: SIZE })), 77);
  cacheDir = await mkdtemp(path.join(os.tmpdir(), 'sluice-ahead-'));
  // Epoch 1 fills the tier (the unmount flushes its writes).
  kernelPassthrough = await fillTier(t, { endpoint: s3.endpoint, uri: `s3://${BUCKET}/${PREFIX}`, cacheDir, name: 'ahead-fill' }, (mnt) => readInOrder(objects.map((o) => fileOf(mnt, o))));
});
t.teardown(async () => {
  await s3?.stop();
  if (cacheDir) await rm(cacheDir, { recursive: true, force: true });
});

for (const on of [true, false]) {
  t.test(`a folder read in order ${on ? 'uses the checks made ahead' : 'with SLUICE_NO_CHECK_AHEAD=1 checks each file at its open'}: the same bytes, no GET`, async (t) => {
    if (!kernelPassthrough) return skip(t, 'this kernel does not offer FUSE passthrough');
    if (!on) {
      process.env.SLUICE_NO_CHECK_AHEAD = '1';
      t.teardown(() => { delete process.env.SLUICE_NO_CHECK_AHEAD; });
    }
    const m = await mount(t, on ? 'ahead-on' : 'ahead-off');
    const [a0, p0, g0] = [await ahead(), await ptOpens(), await gets()];
    const got = await readInOrder(objects.map((o) => fileOf(m.mountpoint, o)));
    t.same(got, objects.map((o) => o.sha256), `every file's sha256 matches (${FILES} files)`);
    t.ok(await drained(m), 'every handle released');
    t.equal((await ptOpens()) - p0, FILES, 'every file passed through');
    // The first file is checked at its OPEN; each later one was checked while the one before it was read.
    t.equal((await ahead()) - a0, on ? FILES - 1 : 0, on ? 'every file after the first used its check made ahead' : 'no check ahead');
    t.equal((await gets()) - g0, 0, 'no GET: every byte from the tier');
  });
}

t.test('a reader out of listing order leaves at most one check ahead unused, then gets none until it reads in order', async (t) => {
  if (!kernelPassthrough) return skip(t, 'this kernel does not offer FUSE passthrough');
  const m = await mount(t, 'ahead-shuffled');
  const [a0, s0] = [await ahead(), await started()];
  // f1 starts a check of f2; f3 and f0 leave it pending (out of order: no new checks); f2 uses it
  // (whatever came between) and, read in order again, starts the check of f3.
  const order = [1, 3, 0, 2];
  const got = await readInOrder(order.map((i) => fileOf(m.mountpoint, objects[i]!)));
  t.same(got, order.map((i) => objects[i]!.sha256), 'every file\'s sha256 matches');
  t.ok(await drained(m), 'every handle released');
  const [used, begun] = [(await ahead()) - a0, (await started()) - s0];
  t.ok(begun - used <= 1, `checks ahead started ${begun}, used ${used}: at most one read for nothing`);
  t.equal(used, 1, 'the one made after f1 was used by f2');
  // Then in order: f0, f1, f2, f3 use the checks made ahead again (f0's own open checks it).
  const [a1, s1] = [await ahead(), await started()];
  t.same(await readInOrder(objects.map((o) => fileOf(m.mountpoint, o))), objects.map((o) => o.sha256), 'in order again: the same bytes');
  t.ok(await drained(m), 'every handle released');
  t.ok((await ahead()) - a1 >= FILES - 2, `in order again, checks ahead used (${(await ahead()) - a1}; started ${(await started()) - s1})`);
});

t.test('a cache file written in place after its check ahead is checked again at its open, and never served', async (t) => {
  if (!kernelPassthrough) return skip(t, 'this kernel does not offer FUSE passthrough');
  const m = await mount(t, 'ahead-damaged');
  const tier = m.core.tierOpens!;
  const name = tier.nameOf('/' + objects[1]!.key.slice(PREFIX.length), SIZE)!;
  t.match(name, /^[0-9a-f]{64}$/, 'the second file has a cache file');
  const [a0, f0, g0] = [await ahead(), await failures(), await gets()];
  // Reading the first file starts the check of the second, which then waits in m->ahead.
  t.same(await readInOrder([fileOf(m.mountpoint, objects[0]!)]), [objects[0]!.sha256], 'the first file');
  // The check of 9 MiB takes milliseconds; this is not a timed assertion, only the damage
  // coming after it (were the check later, it would find the damage itself: the same outcome).
  await new Promise((r) => setTimeout(r, 1500));
  const fh = await open(path.join(tier.objectsDir, name.slice(0, 2), name), 'r+');
  try {
    const one = Buffer.alloc(1);
    await fh.read(one, 0, 1, 5 * MiB);
    one[0]! ^= 0x20;
    await fh.write(one, 0, 1, 5 * MiB); // same size, new bytes: its mtime and ctime change
  } finally {
    await fh.close();
  }
  t.same(await readInOrder([fileOf(m.mountpoint, objects[1]!)]), [objects[1]!.sha256], 'the second file: its own bytes, not the damaged ones');
  t.ok(await drained(m), 'every handle released');
  t.equal((await ahead()) - a0, 0, 'the check made ahead was not used: the file changed since');
  t.ok((await failures()) - f0 >= 1, 'the damage was found (CRC)');
  t.ok((await gets()) - g0 >= 1, 'and the file read from S3');
});
