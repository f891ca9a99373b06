/**
 * A plain `cat` of a large file through a real mount must be served by part-sized GETs,
 * whatever the kernel readahead: libfuse's worker threads hand the daemon the kernel's
 * readahead requests out of order (a handle's first read is often at 512 KiB), and the
 * read cursor must still see one sequential reader (src/prefetch/read-cursor.ts, step 1).
 * GETs are counted by a request-counting proxy between the client and the S3 server;
 * the bytes are compared with the source by sha256.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import path from 'node:path';
import t from 'tap';
import { skip } from '../helpers/tap.js';
import { mountFastFile } from '../../src/fuse/fastfile.js';
import { getReadaheadKb } from '../../src/fuse/readahead.js';
import { seedDataset } from '../../src/local/dataset.js';
import { tempMountpoint } from '../helpers/fuse.js';
import { localS3BehindProxy, testMountOptions } from '../helpers/mount-options.js';

const MiB = 1024 * 1024;
const BUCKET = 'seqgets';
const PREFIX = 'data/';
const PART = 4 * MiB;
/** 12 parts: enough for the window to reach max-prefetch; small enough (<= cache / 4) that a random read of it would start a random fill. */
const SIZE = 48 * MiB;

/** sha256 of what `cat file` writes to its stdout. */
function catSha(file: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const h = createHash('sha256');
    const child = spawn('cat', [file], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 });
    let err = '';
    child.stdout.on('data', (c: Buffer) => h.update(c));
    child.stderr.on('data', (c: Buffer) => { err += String(c); });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(h.digest('hex')) : reject(new Error(`cat exited ${code}: ${err}`))));
  });
}

t.test('cat of a large file uses part-sized GETs at read_ahead_kb 128, 1024 and 4096', async (t) => {
  const { s3, proxy } = await localS3BehindProxy(t, BUCKET);
  const [obj] = await seedDataset(s3, BUCKET, PREFIX, { largeFiles: { count: 1, size: SIZE } });
  const objectPath = `/${BUCKET}/${obj!.key}`;

  for (const kb of [128, 1024, 4096]) {
    const dir = await tempMountpoint(t, `seq${kb}`);
    const m = await mountFastFile({
      uri: `s3://${BUCKET}/${PREFIX}`, mountpoint: dir,
      // Cross-file prefetch off: only the reader's own GETs are counted.
      options: testMountOptions(proxy.endpoint, { cacheSize: 256 * MiB, partSize: PART, maxPrefetch: 16 * MiB, maxInflight: 64 * MiB, crossFilePrefetch: 0, readAheadKb: kb }),
    });
    try {
      const actual = await getReadaheadKb(dir);
      if (actual !== kb) {
        skip(t, `read_ahead_kb ${kb}: sysfs kept it at ${actual} (needs root and a writable /sys)`);
        continue;
      }
      const before = proxy.gets.length;
      t.equal(await catSha(path.join(dir, obj!.key.slice(PREFIX.length))), obj!.sha256, `read_ahead_kb ${kb}: exact bytes`);
      const gets = proxy.gets.slice(before).filter((g) => g.path === objectPath);
      const bytes = gets.reduce((n, g) => n + g.end - g.start, 0);
      const whole = gets.filter((g) => g.end - g.start === PART);
      const wholeBytes = whole.length * PART;
      t.comment(`read_ahead_kb ${kb}: ${gets.length} GETs, ${whole.length} of ${PART / MiB} MiB, ${bytes} bytes fetched`);
      t.ok(bytes <= SIZE * 1.05, `read_ahead_kb ${kb}: fetched ${bytes} bytes for a ${SIZE}-byte file (at most 5% twice)`);
      t.ok(wholeBytes >= SIZE * 0.85, `read_ahead_kb ${kb}: ${wholeBytes} of ${SIZE} bytes came in whole ${PART / MiB} MiB GETs`);
      t.ok(gets.length <= SIZE / PART + 16, `read_ahead_kb ${kb}: ${gets.length} GETs for ${SIZE / PART} parts`);
      for (let i = 0; i < 50 && m.core.readStats.sequentialReads === 0; i++) await new Promise((r) => setTimeout(r, 20)); // release is async to close()
      t.comment(`read_ahead_kb ${kb}: reads ${JSON.stringify(m.core.readStats)}`);
      t.equal(m.core.readStats.randomReads, 0, `read_ahead_kb ${kb}: no read was taken for random`);
      const c = m.core.cache.stats;
      t.equal(c.prefetchUsed.random_fill + c.prefetchWasted.random_fill, 0, `read_ahead_kb ${kb}: no random fill (no read was taken for random)`);
      // The fill's own count: its blocks may still be resident and unread when the above is taken.
      t.equal(m.core.randomFill.stats.started, 0, `read_ahead_kb ${kb}: no fill started (no late readahead request was taken for a second pass)`);
    } finally {
      await m.unmount();
    }
  }
});
