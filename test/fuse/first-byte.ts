/**
 * fio's ttfb job through a real mount (issue 44, decision 0042): 1-byte O_DIRECT reads of a
 * cold large file at offsets 0..9 on one handle (what fio's read_latency/ttfb.fio does with
 * loops=10), through a delaying proxy that records every ranged GET. The first GET must be
 * one small block, the handle must not ramp its read-ahead for reads that consume nothing
 * (it used to fetch the whole window ramp, 64 MiB here, for 10 bytes), re-reads of byte 0
 * must be cache hits (no new GET), and every byte must be the source's.
 */
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { mountFastFile } from '../../src/fuse/fastfile.js';
import { seedDataset, sourceBytes } from '../../src/local/dataset.js';
import { FIRST_WINDOW } from '../../src/prefetch/read-cursor.js';
import { tempMountpoint } from '../helpers/fuse.js';
import { localS3BehindProxy, testMountOptions } from '../helpers/mount-options.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const BUCKET = 'firstbyte';
const PREFIX = 'data/';
/** 8 parts of 8 MiB: larger than the first window many times over, so a ramping window shows. */
const SIZE = 64 * MiB;
/** The cache's block (the default): the first read's own GET. */
const BLOCK = 256 * KiB;
/** S3-like time to first byte: the read-ahead GETs of one read are still in flight at the next. */
const LATENCY_MS = 25;

t.test('1-byte O_DIRECT reads of a cold large file: one small first GET, one first window, re-reads are hits', async (t) => {
  const { s3, proxy } = await localS3BehindProxy(t, BUCKET);
  const [obj] = await seedDataset(s3, BUCKET, PREFIX, { largeFiles: { count: 1, size: SIZE } });
  proxy.set({ latencyMs: LATENCY_MS });
  const objectPath = `/${BUCKET}/${obj!.key}`;
  const source = sourceBytes(obj!, 0, 16);
  const dir = await tempMountpoint(t, 'firstbyte');
  const m = await mountFastFile({
    uri: `s3://${BUCKET}/${PREFIX}`, mountpoint: dir,
    options: testMountOptions(proxy.endpoint, { cacheSize: 256 * MiB, partSize: 8 * MiB, maxPrefetch: 64 * MiB, maxInflight: 128 * MiB, crossFilePrefetch: 0 }),
  });
  try {
    const before = proxy.gets.length;
    // Asynchronous calls only: the mount is served by this very process's event loop.
    const fh = await open(path.join(dir, obj!.key.slice(PREFIX.length)), constants.O_RDONLY | constants.O_DIRECT);
    const b = Buffer.alloc(1);
    const got: number[] = [];
    try {
      // fio's ttfb job: 10 reads of 1 byte, each at the next offset.
      for (let off = 0; off < 10; off++) {
        t.equal((await fh.read(b, 0, 1, off)).bytesRead, 1, `read at ${off}: 1 byte`);
        got.push(b[0]!);
      }
      await new Promise((r) => setTimeout(r, 4 * LATENCY_MS)); // any GET those reads started has reached the proxy
      const afterFirst = proxy.gets.length;
      // Re-reads of byte 0: cache hits.
      for (let i = 0; i < 10; i++) {
        t.equal((await fh.read(b, 0, 1, 0)).bytesRead, 1);
        t.equal(b[0], source[0], `re-read ${i} of byte 0: the source's byte`);
      }
      await new Promise((r) => setTimeout(r, 4 * LATENCY_MS));
      t.equal(proxy.gets.length, afterFirst, 're-reads of byte 0 started no GET (cache hits)');
    } finally {
      await fh.close();
    }
    t.same(got, [...source.subarray(0, 10)], 'bytes 0..9 are the source\'s');
    const gets = proxy.gets.slice(before).filter((g) => g.path === objectPath);
    const bytes = gets.reduce((n, g) => n + g.end - g.start, 0);
    t.comment(`GETs: ${gets.map((g) => `${g.start}-${g.end}`).join(', ')} (${bytes} bytes)`);
    t.ok(gets.length > 0 && gets[0]!.start === 0 && gets[0]!.end - gets[0]!.start <= BLOCK, `first GET is the first block only (${gets[0] ? gets[0].end - gets[0].start : 0} bytes <= ${BLOCK})`);
    t.ok(bytes <= BLOCK + FIRST_WINDOW + BLOCK, `10 one-byte reads fetched ${bytes} bytes: the first block and one first window at most`);
  } finally {
    await m.unmount();
  }
});
