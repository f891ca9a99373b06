/**
 * --order-file through a real kernel mount (issue 48): s3rver behind a proxy that adds 25 ms
 * to every request. Files are read one by one in a shuffled order that the test writes to the
 * order file first (temporary file renamed over it, as the documented Sampler does). Before
 * each open the test asks the block cache whether the file's first block is already there or
 * in flight: with the order file, every file after the first few was fetched ahead; with none
 * (the control: the same shuffled reads on a mount without the order file), almost none is.
 * Every file's bytes are compared with the source by sha256. Rewriting the file switches the
 * order; bad lines are skipped and counted; a bad path is one error at start.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { InvalidArgumentError } from '../../src/errors.js';
import { shuffled } from '../../src/channels/shuffle.js';
import { mountFastFile, type FastFileMount } from '../../src/fuse/fastfile.js';
import { uploadLayout, type SeededObject } from '../../src/local/dataset.js';
import { tempMountpoint } from '../helpers/fuse.js';
import { metricSum } from '../helpers/metrics.js';
import { localS3BehindProxy, testMountOptions } from '../helpers/mount-options.js';
import { until } from '../helpers/poll.js';
import '../helpers/exit-watch.js';

const BUCKET = 'orderfile';
const PREFIX = 'ds/';
/** 48 files of 20 KB in two folders: small files, one GET each. */
const FILES = 48;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

t.test('prefetch follows the order file', async (t) => {
  const { s3, proxy } = await localS3BehindProxy(t, BUCKET);
  const layout = Array.from({ length: FILES }, (_, i) => ({ key: `${PREFIX}${i % 2 === 0 ? 'a' : 'b'}/f${String(i).padStart(3, '0')}.bin`, size: 20_000 }));
  const objects = await uploadLayout(s3, BUCKET, layout, 5);
  proxy.set({ latencyMs: 25 });
  const work = await mkdtemp(path.join(os.tmpdir(), 'sluice-test-order-'));
  t.teardown(() => rm(work, { recursive: true, force: true }));
  const orderPath = path.join(work, 'order.txt');
  const rel = (o: SeededObject) => o.key.slice(PREFIX.length);

  const writeOrder = async (lines: string[]) => {
    await writeFile(`${orderPath}.tmp`, lines.join('\n') + '\n');
    await rename(`${orderPath}.tmp`, orderPath);
  };
  /** Reads `objs` one by one in order; returns how many were in the cache (or in flight) before their open, and the bad ones. */
  const readInOrder = async (m: FastFileMount, dir: string, objs: SeededObject[], missed: SeededObject[] = []) => {
    let ahead = 0;
    let bad = 0;
    for (const o of objs) {
      if (m.core.cache.has({ key: o.key, etag: o.etag, index: 0 })) ahead++;
      else missed.push(o);
      if (sha(await readFile(path.join(dir, rel(o)))) !== o.sha256) bad++;
    }
    return { ahead, bad };
  };

  t.test('shuffled reads: fetched ahead with the order file, not without', async (t) => {
    const order = shuffled(objects, 7, 0);
    await writeOrder(order.map(rel));
    const dir = await tempMountpoint(t, 'order');
    const m = await mountFastFile({ uri: `s3://${BUCKET}/${PREFIX}`, mountpoint: dir, options: testMountOptions(proxy.endpoint, { orderFile: orderPath, crossFilePrefetch: 8 }) });
    t.teardown(() => m.unmount());
    await m.listed;
    t.ok(await until(() => m.core.order?.loads === 1, 10_000), 'the order was read');
    const gets0 = proxy.gets.length;
    const first = await readInOrder(m, dir, order.slice(0, 24));
    t.equal(first.bad, 0, 'every file exact');
    t.comment(`with the order file: ${first.ahead} of 24 files fetched ahead, ${proxy.gets.length - gets0} GETs`);
    t.ok(first.ahead >= 22, 'every file but the first is fetched ahead of its open');
    const gets = proxy.gets.length - gets0;
    t.ok(gets >= 24 && gets <= 24 + 8, `one GET per file read, plus at most the 8 files ahead of the last (${gets})`);
    t.equal(m.core.order!.current!.position, 23, 'the readers\' progress is the last place opened');

    // Rewriting the file starts a new order: the rest of the files, in another shuffle.
    const rest = shuffled(order.slice(24), 8, 0);
    await writeOrder(rest.map(rel));
    t.ok(await until(() => m.core.order?.loads === 2, 10_000), 'the new order was read');
    const second = await readInOrder(m, dir, rest);
    t.equal(second.bad, 0, 'every file exact');
    t.comment(`after the rewrite: ${second.ahead} of ${rest.length} files fetched ahead`);
    t.ok(second.ahead >= rest.length - 2, 'the new order is followed');
    t.ok(m.core.cache.stats.prefetchUsed.cross_file > 0, 'fetched ahead bytes were read');
  });

  t.test('8 readers on batches k, k + 8, ...: most opens are fetched ahead', async (t) => {
    // As the bench's order-file scenario (readers taking batches of 16, --cross-file-prefetch 32)
    // at an eighth of the scale: batches of 2, 4 files ahead, 3 batches a reader. A reader's walk ends at its
    // batch's end; its next batch is 7 batches on, where a new walk starts (trusted: it fetches
    // from its first open) and the walks of the readers just before it have fetched ahead.
    const READERS = 8;
    const BATCH = 2;
    const order = shuffled(objects, 13, 0);
    await writeOrder(order.map(rel));
    const dir = await tempMountpoint(t, 'order8');
    const m = await mountFastFile({ uri: `s3://${BUCKET}/${PREFIX}`, mountpoint: dir, options: testMountOptions(proxy.endpoint, { orderFile: orderPath, crossFilePrefetch: 2 * BATCH }) });
    t.teardown(() => m.unmount());
    await m.listed;
    t.ok(await until(() => m.core.order?.loads === 1, 10_000), 'the order was read');
    const batches = Array.from({ length: Math.ceil(order.length / BATCH) }, (_, b) => order.slice(b * BATCH, (b + 1) * BATCH));
    const shards = Array.from({ length: READERS }, (_, r) => batches.filter((_, b) => b % READERS === r).flat());
    const missed: SeededObject[] = [];
    const runs = await Promise.all(shards.map((s) => readInOrder(m, dir, s, missed)));
    t.equal(runs.reduce((n, x) => n + x.bad, 0), 0, 'every file exact');
    const ahead = runs.map((x) => x.ahead);
    t.comment(`8 readers with the order file: ${ahead.join(', ')} of ${shards.map((s) => s.length).join(', ')} files fetched ahead; missed places ${missed.map((o) => order.indexOf(o)).join(' ')}`);
    // Each reader's first open starts the epoch with nothing ahead. After it, a reader's next
    // batch is fetched by the walks of the readers just before it in the order, which reach
    // it only while the readers keep roughly in step: here (a file in the cache reads in ~1 ms,
    // a miss takes 25 ms) some drift apart and begin a batch past every walk's reach: 2 to 4
    // of the 16 later batch starts missed in runs here. In the bench's order-file scenario (8 reader processes,
    // batches of 16, 32 ahead) 28 of 2,000 opens missed (decision 0043). So: at least 60% of
    // the opens after the first are fetched ahead (without the order file: 14 of 40).
    const after = ahead.reduce((n, a) => n + a, 0);
    const opens = order.length - READERS;
    t.ok(after >= 0.6 * opens, `${after} of the ${opens} opens after each reader's first fetched ahead`);
  });

  t.test('control: the same shuffled reads without the order file get nothing ahead', async (t) => {
    const order = shuffled(objects, 9, 0);
    const dir = await tempMountpoint(t, 'noorder');
    const m = await mountFastFile({ uri: `s3://${BUCKET}/${PREFIX}`, mountpoint: dir, options: testMountOptions(proxy.endpoint, { crossFilePrefetch: 8 }) });
    t.teardown(() => m.unmount());
    await m.listed;
    const r = await readInOrder(m, dir, order.slice(0, 24));
    t.equal(r.bad, 0, 'every file exact');
    t.comment(`without the order file: ${r.ahead} of 24 files fetched ahead`);
    // Only by chance: two opens a few places apart in a folder's listing make a walk (24 files a folder here).
    t.ok(r.ahead <= 12, 'listing-order prefetch does not follow a shuffle');
  });

  t.test('bad lines are skipped and counted; the good ones are followed', async (t) => {
    const order = shuffled(objects, 11, 0).slice(0, 12);
    const lines = [rel(order[0]!), '', '../escape.bin', '/elsewhere/x.bin', 'no/such/file.bin', ...order.slice(1).map((o, i) => (i % 2 === 0 ? `./${rel(o)}` : rel(o)))];
    const dir = await tempMountpoint(t, 'badlines');
    // Lines may also be absolute paths under the mount point.
    lines.push(path.join(dir, rel(objects[0]!)));
    await writeOrder(lines);
    const before = { malformed: await metricSum('sluice_order_file_lines_total', { outcome: 'malformed' }), unknown: await metricSum('sluice_order_file_lines_total', { outcome: 'unknown' }), mapped: await metricSum('sluice_order_file_lines_total', { outcome: 'mapped' }) };
    const m = await mountFastFile({ uri: `s3://${BUCKET}/${PREFIX}`, mountpoint: dir, options: testMountOptions(proxy.endpoint, { orderFile: orderPath, crossFilePrefetch: 8 }) });
    t.teardown(() => m.unmount());
    await m.listed;
    t.ok(await until(() => m.core.order?.loads === 1, 10_000), 'the order was read');
    t.equal(await metricSum('sluice_order_file_lines_total', { outcome: 'malformed' }) - before.malformed, 3, 'empty, .. and outside the mount: malformed');
    t.equal(await metricSum('sluice_order_file_lines_total', { outcome: 'unknown' }) - before.unknown, 1, 'a path the mount does not show: unknown');
    t.equal(await metricSum('sluice_order_file_lines_total', { outcome: 'mapped' }) - before.mapped, 13, 'the others are mapped (./ and absolute under the mount too)');
    const r = await readInOrder(m, dir, order);
    t.equal(r.bad, 0, 'every file exact');
    t.ok(r.ahead >= order.length - 2, `the good lines are followed (${r.ahead} of ${order.length} ahead)`);
  });

  t.test('an order file in a missing folder is one error at start', async (t) => {
    const dir = await tempMountpoint(t, 'badpath');
    const err = await mountFastFile({ uri: `s3://${BUCKET}/${PREFIX}`, mountpoint: dir, options: testMountOptions(proxy.endpoint, { orderFile: path.join(work, 'missing', 'order.txt') }) }).then(() => undefined, (e: unknown) => e);
    t.type(err, InvalidArgumentError);
    t.match((err as Error).message, /folder of --order-file .* does not exist/);
  });
});
