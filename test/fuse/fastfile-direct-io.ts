/**
 * FastFile with --direct-io end to end: the real S3 client against the local S3 server, a
 * real kernel mount whose files have no page cache (native/src/fuse_init.c "Direct I/O").
 * Every byte is compared with its source; a second read reaches sluice again (the kernel
 * kept nothing), and so an object overwritten in S3 after a first full read fails the
 * second read instead of returning old pages or new bytes. With a disk tier, opens passed
 * through (the kernel reads the cache file) and direct-I/O opens of the same files mix in one
 * mount without a failed open (the kernel refuses a non-passthrough open of an inode that has
 * a passthrough one; native/src/fuse_open.c keeps them apart).
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, open, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { mountFastFile } from '../../src/fuse/fastfile.js';
import { mountAt } from '../../src/fuse/mountpoint.js';
import { generateBytes, seedDataset } from '../../src/local/dataset.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { registry } from '../../src/metrics/metrics.js';
import { tempMountpoint } from '../helpers/fuse.js';
import { testMountOptions, useLocalCredentials } from '../helpers/mount-options.js';
import { tierMount } from '../helpers/tier-mount.js';
import { negotiatedFusePassthrough } from '../../src/fuse/native.js';

const MiB = 1024 * 1024;
const BUCKET = 'direct-io';
const PREFIX = 'data/';
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** A counter's value in the registry (0 when absent); `labels` as written in the exposition, e.g. '{op="read",result="ok"}'. */
async function metric(name: string, labels = ''): Promise<number> {
  const text = await registry.metrics();
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}
/** Reads answered by the JavaScript read path so far. */
const readOps = () => metric('sluice_fuse_operations_total', '{op="read",result="ok"}');

/** sha256 of each file, read by `sh` + `sha256sum` in a child process (its own opens). */
function childSums(files: string[]): Promise<Map<string, string>> {
  return new Promise((resolve, reject) => {
    execFile('sh', ['-c', 'for f in "$@"; do sha256sum "$f" || exit 1; done', 'sums', ...files], { timeout: 120_000 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`sha256sum failed: ${stderr || err.message}`));
      resolve(new Map(stdout.trim().split('\n').map((l) => { const [h, f] = l.split(/\s+/); return [f!, h!]; })));
    });
  });
}

t.test('FastFile --direct-io over the local S3 server', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  useLocalCredentials(s3.credentials);
  await s3.createBucket(BUCKET);
  const objects = await seedDataset(s3, BUCKET, PREFIX, {
    smallFiles: { count: 20, size: 30_000, folders: 2 },
    largeFiles: { count: 2, size: 9 * MiB },
  });
  const victimKey = `${PREFIX}victim.bin`;
  const victimOld = generateBytes(victimKey, 6 * MiB, 3);
  await s3.putObject(BUCKET, victimKey, victimOld);

  const dir = await tempMountpoint(t, 'direct-io');
  const m = await mountFastFile({ uri: `s3://${BUCKET}/${PREFIX}`, mountpoint: dir, options: testMountOptions(s3.endpoint, { directIo: true }) });
  t.teardown(() => m.unmount());
  const local = (key: string) => path.join(dir, key.slice(PREFIX.length));

  t.test('every file reads back with the sha256 of its source, twice', async (t) => {
    for (const pass of [1, 2]) {
      const wrong: string[] = [];
      for (const o of objects) if (sha(await readFile(local(o.key))) !== o.sha256) wrong.push(o.key);
      t.same(wrong, [], `pass ${pass}: all ${objects.length} files match`);
    }
  });

  t.test('a second read of a large file reaches sluice again', async (t) => {
    const large = objects.find((o) => o.size === 9 * MiB)!;
    t.equal(sha(await readFile(local(large.key))), large.sha256);
    const before = await readOps();
    t.equal(sha(await readFile(local(large.key))), large.sha256);
    const reads = (await readOps()) - before;
    t.ok(reads >= 9, `the second read was answered by sluice (${reads} reads of up to 1 MiB), not by the page cache`);
  });

  t.test('an object overwritten after a full read: the next read goes to S3 and fails (no page cache keeps old bytes)', async (t) => {
    t.equal(sha(await readFile(local(victimKey))), sha(victimOld), 'first read: the original');
    await s3.putObject(BUCKET, victimKey, generateBytes(victimKey, 6 * MiB, 4));
    const fh = await open(local(victimKey));
    t.teardown(() => fh.close());
    const buf = Buffer.alloc(1 * MiB);
    const at = 5 * MiB;
    const r = await fh.read(buf, 0, buf.length, at).then((x) => x, (e: NodeJS.ErrnoException) => e);
    // The first read's blocks were dropped behind it (a sequential reader retires them), and the
    // kernel kept no pages: this read must go to S3, where the ETag no longer matches.
    if (r instanceof Error) t.ok(r.errno === -116 || r.errno === -5, `the read fails with ESTALE or EIO (got ${r.code})`);
    else t.fail(`the read at ${at} after the overwrite returned ${r.bytesRead} bytes (${buf.subarray(0, r.bytesRead).equals(victimOld.subarray(at, at + r.bytesRead)) ? 'old' : 'NOT the old'} ones)`);
  });

  t.test('unmount', async (t) => {
    await m.unmount();
    t.equal(await mountAt(dir), undefined);
  });

  t.test('with a disk tier: passthrough and direct-I/O opens of the same files mix, every byte right', async (t) => {
    const cacheDir = await mkdtemp(path.join(os.tmpdir(), 'sluice-dio-tier-'));
    t.teardown(() => rm(cacheDir, { recursive: true, force: true }));
    const small = objects.filter((o) => o.size < MiB);
    const tm = await tierMount(t, { endpoint: s3.endpoint, uri: `s3://${BUCKET}/${PREFIX}`, cacheDir, name: 'dio-tier', directIo: true });
    const files = small.map((o) => path.join(tm.mountpoint, o.key.slice(PREFIX.length)));
    const opens0 = await metric('sluice_fuse_operations_total', '{op="open",result="ok"}');
    const pt0 = await metric('sluice_fuse_passthrough_opens_total');
    const wrong: string[] = [];
    for (let pass = 1; pass <= 3; pass++) {
      // Three readers at once: while some opens are passed through, others of the same files are not yet.
      const sums = await Promise.all([childSums(files), childSums(files), childSums(files)]);
      for (const got of sums) for (const [i, o] of small.entries()) if (got.get(files[i]!) !== o.sha256) wrong.push(`pass ${pass}: ${o.key}`);
      await new Promise((r) => setTimeout(r, 500)); // the tier writes in the background
    }
    tm.takeCounts();
    t.same(wrong, [], `${small.length} files x 3 readers x 3 passes match`);
    const opens = (await metric('sluice_fuse_operations_total', '{op="open",result="ok"}')) - opens0;
    const passedThrough = (await metric('sluice_fuse_passthrough_opens_total')) - pt0;
    t.equal(await metric('sluice_fuse_operations_total', '{op="open",result="EIO"}') + await metric('sluice_fuse_operations_total', '{op="open",result="EINVAL"}'), 0, 'no open failed');
    if (negotiatedFusePassthrough()) {
      t.ok(passedThrough > 0, `opens passed through (${passedThrough})`);
      t.ok(opens - passedThrough > 0, `and opens answered with direct I/O in the same mount (${opens - passedThrough})`);
    }
  });
});
