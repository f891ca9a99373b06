/**
 * The bench's `direct` phase of kind tier (./tier.ts), in its own process: reads every
 * object of the dataset straight from a disk tier folder, with no FUSE and no S3 (a miss
 * is an error), `concurrency` objects at a time, through the same path FastFile's reads
 * take for a file whole on disk (DiskCache.openWhole), in 128 KiB reads: the size of the
 * kernel's FUSE reads. Beside the `restarted` phase (the same reads, through the mount)
 * it shows what the FUSE hop costs: same tier, same page-cache-hot files, same code.
 * Prints one JSON line: {startMs, endMs, bytes, items, sha256[] (per object, in order),
 * cpuSeconds (this process over the reads, sha256 of the bytes included)}.
 */
import { createHash } from 'node:crypto';
import { DiskCache } from '../cache/disk-cache.js';
import { epochMs } from './read-plan.js';

export interface DirectArgs {
  cacheDir: string;
  cacheDirSize: number;
  ns: string;
  bucket: string;
  objects: { key: string; etag: string; size: number }[];
  concurrency: number;
}

/** Read size: FUSE's max_read, what the kernel asks sluice for. */
const READ = 128 * 1024;

const a = JSON.parse(process.argv[2] ?? '{}') as DirectArgs;
const cache = await DiskCache.open({ dir: a.cacheDir, maxBytes: a.cacheDirSize, writeBytesPerSec: 1 });
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
    if (o.size === 0) {
      sha256[i] = h.digest('hex');
      continue;
    }
    const f = cache.openWhole({ ns: a.ns, key: o.key, etag: o.etag }, o.size);
    if (!f) throw new Error(`direct read: ${o.key} is not whole in the disk tier`);
    const buf = Buffer.allocUnsafe(READ);
    try {
      for (let at = 0; at < o.size;) {
        const r = f.read(buf, READ, at);
        const n = typeof r === 'number' ? r : await r;
        if (n <= 0) throw new Error(`direct read of ${o.key} at ${at} failed (${n})`);
        h.update(buf.subarray(0, n));
        at += n;
        bytes += n;
      }
    } finally {
      f.close();
    }
    sha256[i] = h.digest('hex');
  }
}));
const endMs = epochMs();
const cpu = process.cpuUsage(cpu0);
await cache.close();
process.stdout.write(JSON.stringify({ startMs, endMs, bytes, items: a.objects.length, sha256, cpuSeconds: (cpu.user + cpu.system) / 1e6 }) + '\n');
