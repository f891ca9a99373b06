/**
 * Reads answered in JavaScript and replied from the block cache's buffer itself (native/src/
 * fuse_lend.c "Views", src/fuse/native.ts ReadViews), through real kernel mounts over the
 * local S3 server: every byte compared with its source by sha256 (cat, several readers at
 * once, dd with 1 MiB and odd-sized reads, O_DIRECT reads at offsets), the views counted, and
 * every view's pins released once its reads are over; an object overwritten while it is read
 * (old bytes or an errno, never a mix); and SLUICE_NO_VIEW=1 (no view, same bytes).
 */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import t from 'tap';
import '../helpers/exit-watch.js';
import type { FastFileMount } from '../../src/fuse/fastfile.js';
import { viewsHeld } from '../../src/fuse/native.js';
import { generateBytes, sourceBytes } from '../../src/local/dataset.js';
import { setLogLevel } from '../../src/log.js';
import { metricSum } from '../helpers/metrics.js';
import { until } from '../helpers/poll.js';
import { largeFiles } from '../helpers/large-files.js';

setLogLevel('error');

const MiB = 1024 * 1024;
const BUCKET = 'views';
const PREFIX = 'big/';
const SIZE = 24 * MiB + 54_321;
/** A file per test that reads one: each count is taken on a file no earlier test read. */
const FILES = 8;

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const viewReplies = () => metricSum('sluice_fuse_view_replies_total');

const files = largeFiles(t, { bucket: BUCKET, prefix: PREFIX, count: FILES, size: SIZE });
const { freshFile, mount, run } = files;

/** Waits until every view's reply was reported sent and its pins released (the mount's catch-up drains them). */
async function allReleased(m: FastFileMount): Promise<boolean> {
  return until(() => {
    m.takeCounts();
    return viewsHeld() === 0 && m.core.lent === 0;
  });
}

t.test('readers at once: exact bytes, reads replied from the cache\'s buffers, every view released', async (t) => {
  const { m, file } = await mount(t, 'views-many');
  const a = freshFile();
  const b = freshFile();
  const v0 = await viewReplies();
  const outs = await Promise.all([
    run('cat', [file(a)]),
    run('dd', [`if=${file(a)}`, 'bs=1M', 'status=none']),
    run('dd', [`if=${file(b)}`, 'bs=1M', 'status=none']),
    run('dd', [`if=${file(b)}`, 'bs=777777', 'status=none']),
  ]);
  t.same(outs.map(sha), [a, a, b, b].map((o) => o.sha256), '4 readers of 2 files at once: every sha256 matches');
  const views = (await viewReplies()) - v0;
  t.ok(views > 0, `reads replied from the cache's buffers: ${views}`);
  t.ok(await allReleased(m), 'every view released once its reply was sent');

  // O_DIRECT reads of 1 MiB at offsets (no page cache: each asks the mount), behind and ahead of each other.
  const src = sourceBytes(a);
  const fh = await open(file(a), constants.O_RDONLY | constants.O_DIRECT);
  t.teardown(() => fh.close().catch(() => undefined));
  let bad = 0;
  const offsets = [0, 5 * MiB, 3 * MiB, 12 * MiB + 4096, SIZE - MiB + 4096 - (SIZE % 4096), 7 * MiB];
  for (const at of offsets) {
    const buf = Buffer.alloc(MiB);
    const { bytesRead } = await fh.read(buf, 0, MiB, at);
    if (!buf.subarray(0, bytesRead).equals(src.subarray(at, at + MiB))) bad++;
  }
  t.equal(bad, 0, `${offsets.length} O_DIRECT reads at offsets, none wrong`);
  await fh.close();
  t.ok(await allReleased(m), 'every view released after the O_DIRECT reads');
});

t.test('an object overwritten while it is read: old bytes or an errno, never a mix', async (t) => {
  const { m, file } = await mount(t, 'views-overwrite');
  const o = freshFile();
  const old = sourceBytes(o);
  const fh = await open(file(o), constants.O_RDONLY | constants.O_DIRECT);
  t.teardown(() => fh.close().catch(() => undefined));
  const step = MiB;
  let off = 0;
  let bad = 0;
  const v0 = await viewReplies();
  for (; off < 4 * MiB; off += step) {
    const buf = Buffer.alloc(step);
    const { bytesRead } = await fh.read(buf, 0, step, off);
    if (!buf.subarray(0, bytesRead).equals(old.subarray(off, off + bytesRead))) bad++;
  }
  t.ok((await viewReplies()) - v0 > 0, 'reads before the overwrite were replied from views');
  await files.s3.putObject(BUCKET, o.key, generateBytes(o.key, o.size, 77));
  let failed: NodeJS.ErrnoException | undefined;
  for (; off < o.size && !failed; off += step) {
    const buf = Buffer.alloc(step);
    try {
      const { bytesRead } = await fh.read(buf, 0, step, off);
      if (bytesRead === 0) break;
      if (!buf.subarray(0, bytesRead).equals(old.subarray(off, off + bytesRead))) bad++;
    } catch (e) {
      failed = e as NodeJS.ErrnoException;
    }
  }
  t.equal(bad, 0, 'every byte read is the original');
  // 16 MiB ahead at most are resident: the rest is fetched, with the old ETag pinned.
  t.ok(failed, 'the read that needs the new version fails');
  if (failed) t.ok(failed.errno === -116 || failed.errno === -5, `with ESTALE or EIO (got ${failed.code} ${failed.errno})`);
  await fh.close();
  t.ok(await allReleased(m), 'every view released');
});

t.test('SLUICE_NO_VIEW=1: no view, same bytes', async (t) => {
  process.env.SLUICE_NO_VIEW = '1';
  t.teardown(() => { delete process.env.SLUICE_NO_VIEW; });
  const { file } = await mount(t, 'views-off');
  const o = freshFile();
  const v0 = await viewReplies();
  t.equal(sha(await run('dd', [`if=${file(o)}`, 'bs=1M', 'status=none'])), o.sha256, 'dd: sha256 of the source');
  t.equal((await viewReplies()) - v0, 0, 'no read replied from a view');
});
