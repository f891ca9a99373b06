/**
 * CacheBucketClient: an ObjectClient that reads through a bucket all nodes share (--cache-bucket,
 * issue 48; Mountpoint's --cache-xz is the model), under the disk tier and over the source.
 *
 * Many nodes read one dataset every epoch; each node's disk tier warms on its own. With a cache
 * bucket, the first node to fetch a block from the source also PUTs it there, and the others GET
 * it from there (an S3 Express One Zone directory bucket on AWS: single-digit ms, cheap requests).
 *
 * getRange(start, end): the range is cut into CACHE_BLOCK blocks; every block is looked up in the
 * cache bucket at once (one whole-object GET each). A block found and verified is copied into the
 * caller's buffer; the missing ones are grouped into runs of contiguous blocks and each run is one
 * ranged GET of the source (pinned to the ETag as always), moved back to its first block's start so
 * each block is stored from its byte 0 (its end is never moved: the object's size is not known
 * here, so a run that ends inside a block stores a prefix of it, and a later reader that needs more
 * of that block finds it `short` and reads the source). Runs settle together (../s3/join-writers.ts).
 * Every block fetched from the source is offered to the writer: copied at once into a cache object
 * (header + bytes) and PUT in the background, at most PUT_CONCURRENCY at a time, while the bytes
 * queued or in flight stay within WRITE_BUDGET; past it the block is dropped (counted), never
 * waited for. A foreground read never waits on a PUT.
 *
 * Keys: PREFIX + `sluice-v1/<sha256 of the object version>/<block index>`, where the object version
 * is (endpoint, region, bucket: ./tiered-client.ts tierNamespace, the disk tier's own identity; key;
 * ETag; version id when a snapshot pinned one; block size). One folder per object version, so a
 * lifecycle rule on PREFIX expires them, and an overwrite (new ETag) never meets the old blocks.
 *
 * A cache object is (little-endian):
 *   0  8  magic "SLCBv1\0\0"
 *   8  4  identity length L         12 4  data length n
 *  16  4  CRC32C of the data        20 4  CRC32C of bytes [0, 20) and the identity
 *  24  L  identity (JSON: namespace, key, ETag, version id, block index, block size)
 *  24+L n the block's first n bytes
 * A reader checks all of it: the header's CRC32C and the layout (`corrupt`), that the identity is
 * the one it asked for (`foreign`: a hash collision, a bug, or another writer), the data's CRC32C
 * (`corrupt`), and that n covers what it needs (`short`). Anything else (404 `absent`, a failed
 * request `error`) is a miss too: the block is read from the source. Never a wrong byte, within the
 * trust model: whoever may write the cache bucket is trusted as the source is (SEMANTICS.md).
 * close() waits (bounded by CLOSE_FLUSH_MS) for the PUTs already queued, then closes both clients.
 */
import { createHash } from 'node:crypto';
import { crc32c } from './crc32c.js';
import { BadUriError, InvalidArgumentError } from '../errors.js';
import { log } from '../log.js';
import {
  cacheBucketHitBytes, cacheBucketHits, cacheBucketMisses, cacheBucketPendingBytes, cacheBucketWrites, cacheBucketWrittenBytes,
} from '../metrics/metrics.js';
import { joinWriters } from '../s3/join-writers.js';
import type { ObjectClient, RangeOptions, RequestOptions, StreamOptions } from '../s3/object-client.js';
import { clientOptionsFrom, S3ObjectClient, type ClientCliOptions } from '../s3/s3-client.js';
import { parseS3Uri } from '../s3/uri.js';
import { BlockLayer } from './block-layer.js';
import { tierNamespace, type DiskTierOptions } from './tiered-client.js';

const MiB = 1024 * 1024;
/**
 * 1 MiB blocks, as Mountpoint's shared cache: large enough that a request's fixed cost (a few ms,
 * a PUT's price) is small beside its bytes, small enough that a random read of a few KiB fetches
 * little, and a divisor of every --part-size (a multiple of 1 MiB), so FastFile's part-aligned
 * GETs store whole blocks.
 */
export const CACHE_BLOCK = 1 * MiB;
/** 64 MiB queued or being PUT: 8 blocks in flight and the rest queued; bounded memory, a copy each. */
export const WRITE_BUDGET = 64 * MiB;
/** 8 PUTs at once: ~8 x 1 MiB per Express round trip is hundreds of MB/s, a small share of the connections. */
const PUT_CONCURRENCY = 8;
/** Attempts per cache request: a cache that fails is skipped (the source answers), so retrying long only delays the reader. */
const CACHE_MAX_ATTEMPTS = 2;
/** close() waits this long for queued PUTs (the next node's hits), then gives them up. */
const CLOSE_FLUSH_MS = 30_000;
const MAGIC = Buffer.from('SLCBv1\0\0', 'latin1');
const HEADER = 24;
/** getStream() window: 8 MiB, the default --part-size (as ./tiered-client.ts). */
const STREAM_WINDOW = 8 * MiB;

/** What the layer needs of the cache bucket (S3ObjectClient has it; tests may fake it). */
export interface CacheStore {
  readonly bucket: string;
  getObject(key: string, opts?: RequestOptions): Promise<Buffer | undefined>;
  putObject(key: string, body: Buffer, opts?: RequestOptions): Promise<void>;
  close(): Promise<void>;
}

export type MissReason = 'absent' | 'short' | 'corrupt' | 'foreign' | 'error';

/** The cache object of `data` (a block's first bytes) for `identity`. */
export function encodeCacheObject(identity: string, data: Buffer): Buffer {
  const id = Buffer.from(identity, 'utf8');
  const body = Buffer.allocUnsafe(HEADER + id.length + data.length);
  MAGIC.copy(body, 0);
  body.writeUInt32LE(id.length, 8);
  body.writeUInt32LE(data.length, 12);
  body.writeUInt32LE(crc32c(data), 16);
  id.copy(body, HEADER);
  body.writeUInt32LE(headerCrc(body, id.length), 20);
  data.copy(body, HEADER + id.length);
  return body;
}

function headerCrc(body: Buffer, idLen: number): number {
  return crc32c(body.subarray(HEADER, HEADER + idLen), crc32c(body.subarray(0, 20)));
}

/** The verified block bytes of a cache object, or why it cannot be used for `need` bytes of `identity`. */
export function decodeCacheObject(body: Buffer, identity: string, need: number): Buffer | MissReason {
  if (body.length < HEADER || !body.subarray(0, 8).equals(MAGIC)) return 'corrupt';
  const idLen = body.readUInt32LE(8);
  const n = body.readUInt32LE(12);
  if (HEADER + idLen + n !== body.length) return 'corrupt';
  if (body.readUInt32LE(20) !== headerCrc(body, idLen)) return 'corrupt';
  if (body.toString('utf8', HEADER, HEADER + idLen) !== identity) return 'foreign';
  const data = body.subarray(HEADER + idLen);
  if (crc32c(data) !== body.readUInt32LE(16)) return 'corrupt';
  return n >= need ? data : 'short';
}

export class CacheBucketClient extends BlockLayer {
  private readonly queue: { key: string; body: Buffer }[] = [];
  /** Cache keys queued or being PUT: a block read twice meanwhile is offered once. */
  private readonly pendingKeys = new Set<string>();
  private pendingBytes = 0;
  private active = 0;
  private closed = false;
  private readonly putAbort = new AbortController();
  private idle: (() => void)[] = [];

  constructor(
    inner: ObjectClient,
    private readonly store: CacheStore,
    /** PREFIX of --cache-bucket (ends with '/' or is empty). */
    private readonly prefix: string,
    /** Endpoint, region and bucket of the source (./tiered-client.ts tierNamespace). */
    private readonly ns: string,
  ) {
    super(inner);
  }

  /** The cache object key and the identity its header must carry, of block `index` of (key, etag). */
  blockKey(key: string, etag: string, index: number): { objectKey: string; identity: string } {
    const version = this.versions.get(key) ?? null;
    const object = JSON.stringify([this.ns, key, etag, version, CACHE_BLOCK]);
    const folder = createHash('sha256').update(object).digest('hex');
    return { objectKey: `${this.prefix}sluice-v1/${folder}/${index}`, identity: JSON.stringify([this.ns, key, etag, version, index, CACHE_BLOCK]) };
  }

  /** Block `index`'s verified bytes (at least `need` of them), or undefined (a miss, counted by reason). */
  private async lookup(key: string, etag: string, index: number, need: number, signal?: AbortSignal): Promise<Buffer | undefined> {
    const { objectKey, identity } = this.blockKey(key, etag, index);
    let got: Buffer | MissReason;
    try {
      const body = await this.store.getObject(objectKey, signal ? { signal } : {});
      got = body === undefined ? 'absent' : decodeCacheObject(body, identity, need);
    } catch (err) {
      if (signal?.aborted) return undefined;
      log.debug({ err, bucket: this.store.bucket, key: objectKey }, 'cache bucket GET failed: reading the source');
      got = 'error';
    }
    if (typeof got === 'string') {
      cacheBucketMisses.inc({ reason: got });
      if (got === 'corrupt' || got === 'foreign') log.warn({ bucket: this.store.bucket, key: objectKey, reason: got, source: key }, `cache object is ${got}: reading the source instead`);
      return undefined;
    }
    cacheBucketHits.inc();
    return got;
  }

  async getRange(key: string, start: number, end: number, etag: string, opts?: RangeOptions): Promise<Buffer> {
    const n = end - start;
    if (!(n > 0)) return this.inner.getRange(key, start, end, etag, opts);
    const B = CACHE_BLOCK;
    const out = opts?.into && opts.into.length === n ? opts.into : Buffer.allocUnsafe(n);
    const first = Math.floor(start / B);
    const last = Math.floor((end - 1) / B);
    const signal = opts?.signal;
    const found = await Promise.all(Array.from({ length: last - first + 1 }, (_, k) => {
      const i = first + k;
      return this.lookup(key, etag, i, Math.min(end, (i + 1) * B) - i * B, signal);
    }));
    signal?.throwIfAborted();
    for (let i = first; i <= last; i++) {
      const data = found[i - first];
      if (!data) continue;
      const a = Math.max(start, i * B);
      const b = Math.min(end, (i + 1) * B);
      data.copy(out, a - start, a - i * B, b - i * B);
      cacheBucketHitBytes.inc(b - a);
    }
    const runs: ((signal: AbortSignal | undefined) => Promise<void>)[] = [];
    for (let i = first; i <= last; i++) {
      if (found[i - first]) continue;
      let j = i;
      while (j + 1 <= last && !found[j + 1 - first]) j++;
      const [a, b] = [i, j];
      runs.push((s) => this.fetchRun(key, etag, start, end, out, a, b, s));
      i = j;
    }
    if (runs.length > 0) await joinWriters(runs, signal);
    return out;
  }

  /** GETs blocks i..j (inclusive) of the range from the source into `out`, and offers each to the cache bucket. */
  private async fetchRun(key: string, etag: string, start: number, end: number, out: Buffer, i: number, j: number, abort: AbortSignal | undefined): Promise<void> {
    const B = CACHE_BLOCK;
    const from = i * B; // back to the block's start, so every block is stored from its byte 0
    const to = Math.min(end, (j + 1) * B);
    const signal = abort ? { signal: abort } : {};
    let buf: Buffer;
    if (from >= start) {
      const into = out.subarray(from - start, to - start);
      buf = await this.inner.getRange(key, from, to, etag, { ...signal, into });
      if (buf !== into) buf.copy(into);
    } else {
      buf = await this.inner.getRange(key, from, to, etag, signal);
      buf.copy(out, 0, start - from, to - from);
    }
    for (let k = i; k <= j; k++) this.offer(key, etag, k, buf.subarray(k * B - from, Math.min(to, (k + 1) * B) - from));
  }

  /** Queues block `index` (`data`, copied now) for a background PUT, or drops it when the write budget is full. */
  private offer(key: string, etag: string, index: number, data: Buffer): void {
    const { objectKey, identity } = this.blockKey(key, etag, index);
    if (this.pendingKeys.has(objectKey)) return;
    if (this.closed || this.pendingBytes + HEADER + data.length > WRITE_BUDGET) {
      cacheBucketWrites.inc({ result: 'dropped' });
      return;
    }
    const body = encodeCacheObject(identity, data);
    this.pendingKeys.add(objectKey);
    this.pendingBytes += body.length;
    cacheBucketPendingBytes.inc(body.length);
    this.queue.push({ key: objectKey, body });
    this.pump();
  }

  private pump(): void {
    while (this.active < PUT_CONCURRENCY && this.queue.length > 0) {
      const { key, body } = this.queue.shift()!;
      this.active++;
      this.store.putObject(key, body, { signal: this.putAbort.signal }).then(() => {
        cacheBucketWrites.inc({ result: 'written' });
        cacheBucketWrittenBytes.inc(body.length);
      }, (err: unknown) => {
        cacheBucketWrites.inc({ result: this.putAbort.signal.aborted ? 'dropped' : 'failed' });
        log.debug({ err, bucket: this.store.bucket, key }, 'cache bucket PUT failed');
      }).finally(() => {
        this.active--;
        this.pendingKeys.delete(key);
        this.pendingBytes -= body.length;
        cacheBucketPendingBytes.dec(body.length);
        this.pump();
        if (this.active === 0 && this.queue.length === 0) for (const done of this.idle.splice(0)) done();
      });
    }
  }

  /** Resolves once every PUT queued so far has ended (tests; close()). */
  flush(): Promise<void> {
    if (this.active === 0 && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
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
    if (this.closed) return;
    this.closed = true;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.flush(), new Promise<void>((resolve) => { timer = setTimeout(resolve, CLOSE_FLUSH_MS); timer.unref(); })]);
    clearTimeout(timer);
    this.putAbort.abort();
    for (const q of this.queue.splice(0)) {
      cacheBucketWrites.inc({ result: 'dropped' });
      this.pendingBytes -= q.body.length;
      cacheBucketPendingBytes.dec(q.body.length);
    }
    await Promise.allSettled([this.inner.close(), this.store.close()]);
  }
}

export type CacheBucketOptions = DiskTierOptions & ClientCliOptions & { cacheBucket?: string | undefined };

/**
 * `client` reading through the cache bucket of `o.cacheBucket` (s3://BUCKET[/PREFIX]), or `client`
 * itself without it. The cache bucket is reached with the source's endpoint, region, addressing and
 * credentials (a directory bucket with ReadWrite sessions); closing the returned client closes both.
 */
export function withCacheBucket(client: ObjectClient, o: CacheBucketOptions, sourcePrefix?: string): ObjectClient {
  if (o.cacheBucket === undefined || o.cacheBucket === '') return client;
  let where: { bucket: string; prefix: string };
  try {
    where = parseS3Uri(o.cacheBucket);
  } catch (err) {
    if (err instanceof BadUriError) throw new InvalidArgumentError(`--cache-bucket: ${err.message}`, { hint: 'Use --cache-bucket s3://BUCKET or s3://BUCKET/PREFIX/' });
    throw err;
  }
  const prefix = where.prefix === '' || where.prefix.endsWith('/') ? where.prefix : `${where.prefix}/`;
  if (where.bucket === client.bucket && (sourcePrefix === undefined || prefix.startsWith(sourcePrefix) || sourcePrefix.startsWith(prefix))) {
    throw new InvalidArgumentError(`--cache-bucket s3://${where.bucket}/${prefix} lies inside the dataset it caches`, { hint: 'Give the cache its own bucket, or a prefix outside the dataset\'s' });
  }
  // Not the source's requester-pays or expected owner: those are the source bucket's terms.
  const { requesterPays: _rp, expectedBucketOwner: _ebo, ...own } = o;
  const store = new S3ObjectClient({ ...clientOptionsFrom(where.bucket, own), maxAttempts: Math.min(o.maxAttempts, CACHE_MAX_ATTEMPTS), writes: true });
  return new CacheBucketClient(client, store, prefix, tierNamespace(o, client.bucket));
}
