// A second process writing to a disk tier folder (test/cache/disk-cache.ts): argv = dir, bound, tag, blocks.
// Writes block 0 of keys `${tag}0..` with patternBytes(B, tag.charCodeAt(0) * 1000 + i) (test/helpers/pattern-bytes.mjs, as the tests).
import { DiskCache } from '../../dist/cache/disk-cache.js';
import { DISK_BLOCK_SIZE } from '../../dist/cache/tier-layout.js';
import { patternBytes } from './pattern-bytes.mjs';

const [dir, bound, tag, blocks] = process.argv.slice(2);
const c = await DiskCache.open({ dir, maxBytes: Number(bound), writeBytesPerSec: 1024 ** 3, freeBytes: async () => 1e15 });
for (let i = 0; i < Number(blocks); i++) {
  c.write({ ns: 'http://fake\0bucket', key: `${tag}${i}`, etag: '"e"', index: 0 }, patternBytes(DISK_BLOCK_SIZE, tag.charCodeAt(0) * 1000 + i), true);
  if (i % 4 === 3) await c.flush();
}
await c.close();
