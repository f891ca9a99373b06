/**
 * Fetch only what can be kept: one pass over a folder of 4 MiB and 40 KB files (in
 * listing order, as a data loader walks it) through a real mount whose cache is much
 * smaller than cross-file prefetch and read-ahead would like, must fetch at most 1.1x
 * the bytes it reads. Before the bound (src/cache/block-cache.ts, AHEAD_SHARE), a
 * 16 MiB cache evicted its own unread prefetched blocks and such a pass fetched ~2x.
 * Bytes are counted by a request-counting proxy (bytes, not time); every file's bytes
 * are compared with the source by sha256.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { mountFastFile } from '../../src/fuse/fastfile.js';
import { uploadLayout } from '../../src/local/dataset.js';
import { tempMountpoint } from '../helpers/fuse.js';
import { localS3BehindProxy, testMountOptions } from '../helpers/mount-options.js';

const MiB = 1024 * 1024;
const BUCKET = 'fetchbound';
const PREFIX = 'walk/';
/** 12 files of 4 MiB among 36 of 40 KB (~52 MB), one large file in 4: the 168 MB folder, scaled down. */
const FILES = 48;
const LARGE_EVERY = 4;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

t.test('one pass over a folder fetches at most 1.1x what it reads, whatever the cache size', async (t) => {
  const { s3, proxy } = await localS3BehindProxy(t, BUCKET);
  const layout = Array.from({ length: FILES }, (_, i) => ({ key: `${PREFIX}f${String(i).padStart(4, '0')}.bin`, size: i % LARGE_EVERY === 1 ? 4 * MiB : 40_000 }));
  const objects = await uploadLayout(s3, BUCKET, layout, 11);
  const total = objects.reduce((n, o) => n + o.size, 0);

  // [cache, part]: the 16 MiB cache with 8 MiB parts (2 parts), and smaller and larger caches of 2 MiB parts.
  for (const [cacheSize, partSize] of [[16 * MiB, 8 * MiB], [8 * MiB, 2 * MiB], [32 * MiB, 2 * MiB]] as const) {
    const label = `cache ${cacheSize / MiB} MiB, part ${partSize / MiB} MiB`;
    const dir = await tempMountpoint(t, 'bound');
    const m = await mountFastFile({
      uri: `s3://${BUCKET}/${PREFIX}`, mountpoint: dir,
      // The defaults for everything that fetches ahead: 32 files of up to 4 MiB, a 64 MiB window.
      options: testMountOptions(proxy.endpoint, { cacheSize, partSize, maxPrefetch: 64 * MiB, maxInflight: 512 * MiB, crossFilePrefetch: 32, crossFileMaxSize: 4 * MiB }),
    });
    try {
      const before = proxy.gets.length;
      let bad = 0;
      for (const o of objects) if (sha(await readFile(path.join(dir, o.key.slice(PREFIX.length)))) !== o.sha256) bad++;
      t.equal(bad, 0, `${label}: every file exact`);
      const fetched = proxy.gets.slice(before).reduce((n, g) => n + g.end - g.start, 0);
      const c = m.core.cache.stats;
      t.comment(`${label}: read ${total} bytes, fetched ${fetched} (${(fetched / total).toFixed(3)}x) in ${proxy.gets.length - before} GETs; evicted unread ${c.evictedUnread}`);
      t.ok(fetched <= total * 1.1, `${label}: fetched ${fetched} bytes for ${total} read (<= 1.1x)`);
      t.ok(c.prefetchUsed.cross_file > 0, `${label}: cross-file prefetch did work`);
    } finally {
      await m.unmount();
    }
  }
});
