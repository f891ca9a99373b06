/**
 * TieredClient: an ObjectClient that reads through the disk tier (./disk-cache.ts).
 *
 * The seam by which every mode uses the tier without knowing of it: FastFile's block
 * fetcher (under the memory block cache), File mode's downloads and Pipe's read-ahead
 * all read through an ObjectClient, and with --cache-dir that client is this one.
 *
 * getRange(start, end): the tier's blocks that cover [start, end) are read from disk
 * (one pread per run of present blocks, each block verified), straight into the
 * caller's buffer; the missing ones are
 * grouped into runs of contiguous blocks and each run is one ranged GET of the inner
 * client (pinned to the ETag as always), read into the caller's buffer too when the run
 * starts on a block boundary. A run's start is moved back to its block's start (at most
 * one block of extra bytes) so every fetched block is stored from its first byte; its
 * end is never moved (the object's size is not known here), so a GET that ends inside
 * a block stores a prefix of it (see the tier's layout). Each fetched run is queued for
 * writing in the background as one run (DiskCache.writeRun), from the GET's own buffer
 * where it can be kept (fetchRun), not a copy. With nothing on disk, that is the same one GET as without
 * the tier, plus one failed open(2) of the object's cache file. Runs go out together and
 * getRange settles only once all have stopped: a failed run (a 412 after an overwrite) aborts
 * the others and waits for them (../s3/join-writers.ts), so no GET still writes into a buffer
 * the caller has taken back (issue 43: the block cache recycles it for another object).
 * openWhole(): FastFile's direct hop for a file whole on disk (src/fs/core.ts).
 * getStream(): windows of STREAM_WINDOW bytes, each a getRange(). Parts of File mode
 * and Pipe are --part-size long, so each is one window.
 * The tier never fails a read: a block it cannot read is a miss, and a write that fails
 * is dropped (./disk-cache.ts counts both).
 * close() closes the inner client and lets go of the shared tier (the last user closes it).
 */
import { endpointFromEnv, regionFromEnv } from '../s3/addressing.js';
import type { ObjectClient, RangeOptions, StreamOptions } from '../s3/object-client.js';
import { joinWriters } from '../s3/join-writers.js';
import { BlockLayer } from './block-layer.js';
import { DiskCache } from './disk-cache.js';
import { type DiskBlockId, objectName, type WholeFile } from './tier-layout.js';
import { tierAccess } from './tier-trust.js';

/** getStream() window: 8 MiB, the default --part-size (one window per Pipe / File mode part). */
const STREAM_WINDOW = 8 * 1024 * 1024;

export class TieredClient extends BlockLayer {
  constructor(
    inner: ObjectClient,
    readonly tier: DiskCache,
    /** Endpoint and bucket: where the objects live (part of every block's key). */
    private readonly ns: string,
    private readonly onClose: () => Promise<void> = async () => undefined,
  ) {
    super(inner);
  }

  private blockId(key: string, etag: string, index: number): DiskBlockId {
    const versionId = this.versions.get(key);
    return versionId !== undefined ? { ns: this.ns, key, etag, versionId, index } : { ns: this.ns, key, etag, index };
  }

  /** Keeps an object's blocks from eviction while it is open (see DiskCache.pin). */
  pin(key: string, etag: string, size: number): () => void {
    return this.tier.pin(this.ns, key, etag, size, this.versions.get(key));
  }

  /**
   * What the FUSE thread needs to open one-block files from the tier itself (SluiceFsOptions.tierFiles):
   * the tier's objects folder and block size, an object version's cache file name (as openWhole() would
   * find it), and a count of the blocks it read.
   */
  tierFiles(): { objectsDir: string; blockSize: number; nameOf(key: string, etag: string): string; countHits(blocks: number, bytes: number): void } {
    const tier = this.tier;
    return {
      objectsDir: tier.objectsFolder,
      blockSize: tier.blockSize,
      nameOf: (key, etag) => objectName(this.blockId(key, etag, 0), tier.blockSize),
      countHits: (blocks, bytes) => tier.countHitsElsewhere(blocks, bytes),
    };
  }

  /** The whole-file fast path (DiskCache.openWhole): a reader of the object's cache file when all of it is on disk. */
  openWhole(key: string, etag: string, size: number): WholeFile | undefined {
    return this.tier.openWhole(this.blockId(key, etag, 0), size);
  }

  async getRange(key: string, start: number, end: number, etag: string, opts?: RangeOptions): Promise<Buffer> {
    const n = end - start;
    if (!(n > 0)) return this.inner.getRange(key, start, end, etag, opts);
    const B = this.tier.blockSize;
    const out = opts?.into && opts.into.length === n ? opts.into : Buffer.allocUnsafe(n);
    const first = Math.floor(start / B);
    const last = Math.floor((end - 1) / B);
    const found = await this.tier.readRange(this.blockId(key, etag, first), start, end, out);
    if (opts?.onLocal && found.some(Boolean)) opts.onLocal();
    const runs: ((signal: AbortSignal | undefined) => Promise<void>)[] = [];
    for (let i = first; i <= last; i++) {
      if (found[i - first]) continue;
      let j = i;
      while (j + 1 <= last && !found[j + 1 - first]) j++;
      const [a, b] = [i, j];
      runs.push((signal) => this.fetchRun(key, etag, start, end, out, a, b, signal, opts));
      i = j;
    }
    // Every run writes into `out`, which may be the caller's: settle only once all have stopped
    // (a failed run aborts the others and waits for them; issue 43).
    if (runs.length > 0) await joinWriters(runs, opts?.signal);
    return out;
  }

  /**
   * GETs blocks i..j (inclusive) of the range into `out`, and queues them for the tier as
   * one run (DiskCache.writeRun), without a copy where the buffer can be kept: a reply in a
   * buffer of our own, `out` when we made it, or the caller's `into` while `opts.hold`
   * holds it. Only a caller's `into` that cannot be held is copied. `abort`: the run's signal
   * (the caller's, or joinWriters' when a sibling run failed).
   */
  private async fetchRun(key: string, etag: string, start: number, end: number, out: Buffer, i: number, j: number, abort: AbortSignal | undefined, opts?: RangeOptions): Promise<void> {
    const B = this.tier.blockSize;
    const from = i * B; // back to the block's start, so the block is stored from byte 0
    const to = Math.min(end, (j + 1) * B);
    const signal = abort ? { signal: abort } : {};
    let buf: Buffer;
    let keep: { owned?: boolean; hold?: () => () => void } = { owned: true };
    if (from >= start) {
      const into = out.subarray(from - start, to - start);
      buf = await this.inner.getRange(key, from, to, etag, { ...signal, into });
      if (buf !== into) buf.copy(into);
      else if (out === opts?.into) keep = opts.hold ? { hold: opts.hold } : {};
      // else `out` is ours, handed to the caller to read: the writer reads it too.
    } else {
      buf = await this.inner.getRange(key, from, to, etag, signal);
      buf.copy(out, 0, start - from, to - from);
    }
    this.tier.writeRun(this.blockId(key, etag, i), buf, keep);
  }

  async *getStream(key: string, etag: string, opts: StreamOptions = {}): AsyncIterable<Buffer> {
    const start = opts.start ?? 0;
    const end = opts.end ?? opts.size ?? (await this.inner.head(key, opts.signal ? { signal: opts.signal } : {})).size;
    for (let at = start; at < end; at += STREAM_WINDOW) {
      opts.signal?.throwIfAborted();
      yield await this.getRange(key, at, Math.min(end, at + STREAM_WINDOW), etag, opts.signal ? { signal: opts.signal } : {});
    }
  }

  async close(): Promise<void> {
    try {
      await this.inner.close();
    } finally {
      await this.onClose();
    }
  }
}

/** One DiskCache per folder per process, shared by every client (channels, mounts) that uses it. */
const shared = new Map<string, { cache: Promise<DiskCache>; users: number }>();

export interface DiskTierOptions {
  cacheDir?: string | undefined;
  cacheDirSize?: number | undefined;
  cacheDirWriteRate: number;
  cacheDirDirectWrite?: boolean | undefined;
  /** --cache-dir-group, --cache-dir-mode: sharing the tier with a group (./tier-trust.ts). */
  cacheDirGroup?: string | undefined;
  cacheDirMode?: number | undefined;
  endpoint?: string | undefined;
  region?: string | undefined;
}

/**
 * The shared DiskCache of `o.cacheDir`, opened once per folder per process (InvalidArgumentError
 * when the folder is unusable), or undefined without --cache-dir. `release()` lets go of it; the
 * last user's release closes it.
 */
export async function acquireDiskTier(o: DiskTierOptions): Promise<{ cache: DiskCache; release: () => Promise<void> } | undefined> {
  if (!o.cacheDir) return undefined;
  const dir = o.cacheDir;
  const access = tierAccess({ group: o.cacheDirGroup, mode: o.cacheDirMode });
  let entry = shared.get(dir);
  if (!entry) {
    entry = {
      cache: DiskCache.open({ dir, ...(o.cacheDirSize !== undefined ? { maxBytes: o.cacheDirSize } : {}), writeBytesPerSec: o.cacheDirWriteRate, ...(o.cacheDirDirectWrite ? { directWrite: true } : {}), access }),
      users: 0,
    };
    shared.set(dir, entry);
    entry.cache.catch(() => shared.delete(dir));
  }
  const e = entry;
  e.users++;
  let cache: DiskCache;
  try {
    cache = await e.cache;
  } catch (err) {
    e.users--;
    throw err;
  }
  let released = false;
  return {
    cache,
    async release() {
      if (released) return;
      released = true;
      if (--e.users === 0) {
        shared.delete(dir);
        await cache.close();
      }
    },
  };
}

/**
 * Where a client's objects live, for block keys: the endpoint however it was given
 * (--endpoint, else AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, else AWS S3), the region
 * (--region / AWS_REGION, else AWS_DEFAULT_REGION) and the bucket. Two endpoints (or two
 * regions) never share cached bytes for one bucket, key and ETag: an ETag is an endpoint's
 * word about its own bytes, not a content hash another server must agree with. The endpoint
 * is compared as a URL origin and path (case of scheme and host, a trailing slash ignored).
 */
export function tierNamespace(o: DiskTierOptions, bucket: string, env: NodeJS.ProcessEnv = process.env): string {
  const endpoint = o.endpoint ?? endpointFromEnv(env);
  const region = o.region ?? regionFromEnv(env) ?? '';
  return `${endpoint !== undefined ? canonicalEndpoint(endpoint) : 'aws'}\0${region}\0${bucket}`;
}

function canonicalEndpoint(endpoint: string): string {
  try {
    const u = new URL(endpoint);
    return `${u.origin}${u.pathname.replace(/\/+$/, '')}`;
  } catch {
    return endpoint; // refused later, with one line, by the client (parseEndpoint)
  }
}

/**
 * `client` reading through the disk tier of `o.cacheDir`, or `client` itself without
 * --cache-dir. Closing the returned client releases the tier (acquireDiskTier).
 */
export async function withDiskTier(client: ObjectClient, o: DiskTierOptions): Promise<ObjectClient> {
  const tier = await acquireDiskTier(o);
  if (!tier) return client;
  return new TieredClient(client, tier.cache, tierNamespace(o, client.bucket), tier.release);
}
