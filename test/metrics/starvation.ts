/**
 * Issue 7's end-to-end checks of the starvation metrics, with the real local S3 server,
 * the fault proxy and a real kernel mount:
 *  - sluice_starved_seconds_total rises when the emulated S3 latency rises (at least
 *    latency x files, since each uncached file's first read must wait for its GET), and
 *    does not move at all when the same files are read again from the cache;
 *  - sluice_served_bytes_total grows by exactly the bytes read through the mount, and
 *    sluice_s3_received_bytes_total by at least the bytes fetched (nothing when cached).
 * Only lower bounds on time are asserted (an emulated delay is never shorter than set).
 */
import t from 'tap';
import { constants } from 'node:fs';
import { open, readFile } from 'node:fs/promises';
import path from 'node:path';
import { mountFastFile } from '../../src/fuse/fastfile.js';
import { seedDataset, sourceBytes } from '../../src/local/dataset.js';
import { parseExposition, sumOf } from '../../src/metrics/exposition.js';
import { channelRates, channelTotals, type ChannelTotals } from '../../src/metrics/figures.js';
import { registry } from '../../src/metrics/metrics.js';
import { tempMountpoint } from '../helpers/fuse.js';
import { localS3BehindProxy, testMountOptions } from '../helpers/mount-options.js';

const MiB = 1024 * 1024;
const CHANNEL = 'starve';
const FILES_PER_PHASE = 4;
/** Emulated S3 latency of the slow phase: far above local S3's own, so its effect is clear. */
const LATENCY_MS = 300;

interface Snapshot { totals: ChannelTotals; received: number; at: number }

/** The metrics now, with what libfuse's thread answered so far taken in (`take`: the mount's takeCounts; reads from lent blocks reach the metrics within a second). */
async function snapshot(take: () => void): Promise<Snapshot> {
  take();
  const e = parseExposition(await registry.metrics());
  const totals = channelTotals(e).find((c) => c.channel === CHANNEL && c.mode === 'FastFile')
    ?? { channel: CHANNEL, mode: 'FastFile', servedBytes: 0, files: 0, waitSeconds: 0, reads: 0, readsWithoutWait: 0, pipeFullSeconds: 0, pipeEmptySeconds: 0, epoch: 0, firstByteSeconds: undefined, firstBatchSeconds: undefined };
  return { totals, received: sumOf(e, 'sluice_s3_received_bytes_total'), at: performance.now() };
}

function delta(a: Snapshot, b: Snapshot) {
  return {
    wait: b.totals.waitSeconds - a.totals.waitSeconds,
    reads: b.totals.reads - a.totals.reads,
    readsWithoutWait: b.totals.readsWithoutWait - a.totals.readsWithoutWait,
    served: b.totals.servedBytes - a.totals.servedBytes,
    received: b.received - a.received,
    starvingPct: channelRates([a.totals], [b.totals], (b.at - a.at) / 1000)[0]!.starvingPct,
  };
}

/** Reads a file with O_DIRECT, in 128 KiB reads, bypassing the kernel's page cache. */
async function readDirect(file: string, size: number): Promise<Buffer> {
  const fh = await open(file, constants.O_RDONLY | constants.O_DIRECT);
  try {
    const out = Buffer.alloc(size);
    let at = 0;
    for (let i = 0; i <= size / 4096 + 1 && at < size; i++) { // bounded: one 4 KiB step at least per read
      const { bytesRead } = await fh.read(out, at, Math.min(128 * 1024, size - at), at);
      if (bytesRead === 0) break;
      at += bytesRead;
    }
    return out.subarray(0, at);
  } finally {
    await fh.close();
  }
}

t.test('starvation rises with S3 latency, vanishes when cached; counters match the bytes read', async (t) => {
  const { s3, proxy } = await localS3BehindProxy(t, 'starve');
  const objects = await seedDataset(s3, 'starve', 'ds/', { smallFiles: { count: 3 * FILES_PER_PHASE, size: 300_000, folders: 1 }, seed: 11 });
  objects.sort((a, b) => a.key.localeCompare(b.key));

  const dir = await tempMountpoint(t, 'starve');
  // No cross-file prefetch: each file's first read must wait for its own GET.
  const m = await mountFastFile({
    uri: 's3://starve/ds/', mountpoint: dir, channel: CHANNEL,
    options: testMountOptions(proxy.endpoint, { crossFilePrefetch: 0, cacheSize: 64 * MiB }),
  });
  t.teardown(() => m.unmount());
  const takeCounts = () => m.takeCounts();

  /**
   * Reads whole files. `direct` opens with O_DIRECT: the mount keeps pages in the kernel's
   * page cache (kernel_cache), and a second plain read would never reach sluice at all.
   */
  const readAll = async (objs: typeof objects, direct = false) => {
    let bytes = 0;
    for (const o of objs) {
      const file = path.join(dir, o.key.slice('ds/'.length));
      const got = direct ? await readDirect(file, o.size) : await readFile(file);
      t.ok(got.equals(sourceBytes(o)), `${o.key}: the right bytes`);
      bytes += got.length;
    }
    return bytes;
  };
  const fast = objects.slice(0, FILES_PER_PHASE);
  const slow = objects.slice(FILES_PER_PHASE, 2 * FILES_PER_PHASE);

  const s0 = await snapshot(takeCounts);
  const fastBytes = await readAll(fast);
  const s1 = await snapshot(takeCounts);
  proxy.set({ latencyMs: LATENCY_MS });
  const slowBytes = await readAll(slow);
  const s2 = await snapshot(takeCounts);
  const cachedBytes = await readAll(slow, true); // the same files again: from the block cache
  const s3snap = await snapshot(takeCounts);

  const dFast = delta(s0, s1);
  const dSlow = delta(s1, s2);
  const dCached = delta(s2, s3snap);
  t.comment(`starving: no latency ${dFast.starvingPct.toFixed(1)}%, ${LATENCY_MS} ms latency ${dSlow.starvingPct.toFixed(1)}%, cached ${dCached.starvingPct.toFixed(1)}%`);

  // Rises with latency: every slow file's first read waited for a GET delayed by LATENCY_MS.
  t.ok(dSlow.wait >= (FILES_PER_PHASE * LATENCY_MS * 0.95) / 1000, `waited ${dSlow.wait.toFixed(3)} s over ${FILES_PER_PHASE} files at ${LATENCY_MS} ms`);
  t.ok(dSlow.reads > dSlow.readsWithoutWait, 'some reads waited');
  // Falls when cached: no read waits, every read is a hit, nothing is fetched.
  t.ok(dCached.reads > 0, 'the cached reads reached sluice');
  t.equal(dCached.wait, 0, 'no waiting when cached');
  t.equal(dCached.readsWithoutWait, dCached.reads, 'every cached read answered without waiting');
  t.equal(dCached.received, 0, 'nothing fetched from S3 when cached');

  // Counters match the bytes actually read.
  t.equal(dFast.served, fastBytes, 'served bytes = bytes read (no latency)');
  t.equal(dSlow.served, slowBytes, 'served bytes = bytes read (latency)');
  t.equal(dCached.served, cachedBytes, 'served bytes = bytes read (cached)');
  t.ok(dFast.received >= fastBytes, 'received from S3 at least what was read');
  t.ok(dSlow.received >= slowBytes);
  t.ok(s3snap.totals.firstByteSeconds === undefined || s3snap.totals.firstByteSeconds > 0);
});
