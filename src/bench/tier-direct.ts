/**
 * The bench's `direct` phase of kind tier (./tier.ts), in its own process: reads every
 * object of the dataset straight from a disk tier folder through TieredClient, with no
 * FUSE and no S3 (a miss is an error), `concurrency` objects at a time, in 8 MiB ranges
 * (the reader's read size does not matter without the kernel in between). Beside the
 * FUSE phases it shows what the FUSE hop costs: same tier, same page-cache-hot files.
 * Prints one JSON line: {startMs, endMs, bytes, items, sha256[] (per object, in order),
 * cpuSeconds (this process over the reads, sha256 of the bytes included)}.
 */
import { createHash } from 'node:crypto';
import { DiskCache } from '../cache/disk-cache.js';
import { TieredClient } from '../cache/tiered-client.js';
import type { ObjectClient } from '../s3/object-client.js';
import { epochMs } from './read-plan.js';

export interface DirectArgs {
  cacheDir: string;
  cacheDirSize: number;
  ns: string;
  bucket: string;
  objects: { key: string; etag: string; size: number }[];
  concurrency: number;
}

/** Range per getRange: the default --part-size, as File mode and Pipe read. */
const RANGE = 8 * 1024 * 1024;

const a = JSON.parse(process.argv[2] ?? '{}') as DirectArgs;
const nothing = (): never => { throw new Error('direct read missed the disk tier'); };
const inner: ObjectClient = {
  bucket: a.bucket, list: nothing, head: nothing, firstKeyUnder: nothing, getRange: nothing, getStream: nothing, close: async () => undefined,
};
const cache = await DiskCache.open({ dir: a.cacheDir, maxBytes: a.cacheDirSize, writeBytesPerSec: 1 });
const client = new TieredClient(inner, cache, a.ns);
const sha256: string[] = new Array<string>(a.objects.length);
let bytes = 0;
let next = 0;
const cpu0 = process.cpuUsage();
const startMs = epochMs();
await Promise.all(Array.from({ length: a.concurrency }, async () => {
  while (next < a.objects.length) {
    const i = next++;
    const o = a.objects[i]!;
    const h = createHash('sha256');
    for (let at = 0; at < o.size; at += RANGE) {
      const b = await client.getRange(o.key, at, Math.min(o.size, at + RANGE), o.etag);
      h.update(b);
      bytes += b.length;
    }
    sha256[i] = h.digest('hex');
  }
}));
const endMs = epochMs();
const cpu = process.cpuUsage(cpu0);
await cache.close();
process.stdout.write(JSON.stringify({ startMs, endMs, bytes, items: a.objects.length, sha256, cpuSeconds: (cpu.user + cpu.system) / 1e6 }) + '\n');
