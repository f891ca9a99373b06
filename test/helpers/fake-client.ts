/**
 * An in-process ObjectClient for unit tests of the cache, prefetcher and fs core
 * ONLY (integration tests use the real client against s3rver).
 *
 * Objects live in memory. It honours the ObjectClient contract (exact ranges,
 * ETag pinning -> ObjectChangedError, missing key -> NoSuchKeyError), and lets a
 * test:
 *  - add latency (`latencyMs`), or hold every GET until `release()` (`hold()`),
 *    to make concurrency deterministic without timing;
 *  - change an object (new bytes, new ETag) with `put()` again, or `delete()` it;
 *  - count GETs and bytes (`gets`, `getBytes`, `requests`) and the peak of
 *    concurrent GET bytes (`peakInflightBytes`);
 *  - fail the next N GETs (`failNext`).
 */
import { createHash } from 'node:crypto';
import { NoSuchKeyError, ObjectChangedError, S3Error } from '../../src/errors.js';
import type { FirstObjects, ListOptions, ObjectClient, ObjectInfo, RangeOptions, RequestOptions, StreamOptions } from '../../src/s3/object-client.js';
import { compareKeys } from '../../src/s3/lister.js';

interface Stored {
  body: Buffer;
  etag: string;
  lastModified: Date;
}

export interface RangeRequest {
  key: string;
  start: number;
  end: number;
}

export class FakeObjectClient implements ObjectClient {
  readonly bucket: string;
  latencyMs = 0;
  gets = 0;
  getBytes = 0;
  lists = 0;
  /** firstKeyUnder() calls. */
  probes = 0;
  heads = 0;
  readonly requests: RangeRequest[] = [];
  inflightBytes = 0;
  peakInflightBytes = 0;
  /** The next N getRange calls reject with a 500 S3Error. */
  failNext = 0;
  /**
   * Read into the caller's `into` buffer when given (as the real client does), scribbling
   * over it before an injected failure, so tests see a recycled buffer's worst case.
   */
  honourInto = false;
  private readonly objects = new Map<string, Stored>();
  private version = 0;
  private gate: Promise<void> | undefined;
  private openGate: (() => void) | undefined;

  constructor(bucket = 'fake-bucket') {
    this.bucket = bucket;
  }

  /** Creates or replaces an object; returns its (new) ETag. The bytes are copied. */
  put(key: string, body: Buffer): string {
    this.version++;
    const etag = `"${createHash('md5').update(body).update(String(this.version)).digest('hex')}"`;
    this.objects.set(key, { body: Buffer.from(body), etag, lastModified: new Date(1_700_000_000_000 + this.version * 1000) });
    return etag;
  }

  delete(key: string): void {
    this.objects.delete(key);
  }

  body(key: string): Buffer {
    const o = this.objects.get(key);
    if (!o) throw new Error(`fake: no object ${key}`);
    return o.body;
  }

  /** From now on, GETs wait until release(). */
  hold(): void {
    if (this.gate) return;
    this.gate = new Promise((r) => { this.openGate = r; });
  }

  /** Lets every held GET (and later ones) proceed. */
  release(): void {
    this.openGate?.();
    this.gate = undefined;
    this.openGate = undefined;
  }

  resetCounts(): void {
    this.gets = 0;
    this.getBytes = 0;
    this.requests.length = 0;
    this.peakInflightBytes = this.inflightBytes;
  }

  /** While set, list() waits for it before yielding anything (lookups during a listing). */
  listGate: Promise<void> | undefined;
  /** When set, list() throws it (after listGate). */
  listError: Error | undefined;

  async *list(prefix: string, opts?: ListOptions): AsyncIterable<ObjectInfo> {
    this.lists++;
    if (this.listGate) await this.listGate;
    if (opts?.beforeRequest) await opts.beforeRequest();
    if (this.listError) throw this.listError;
    opts?.onPage?.();
    for (const [key, o] of this.objects) {
      if (key.startsWith(prefix)) yield { key, size: o.body.length, etag: o.etag, lastModified: o.lastModified };
    }
  }

  async firstKeyUnder(prefix: string, _opts?: RequestOptions): Promise<string | undefined> {
    this.probes++;
    return [...this.objects.keys()].filter((k) => k.startsWith(prefix)).sort(compareKeys)[0];
  }

  /** As S3Client's (two keys, in S3's order); counted in `probes` as firstKeyUnder is. */
  async firstObjectsUnder(prefix: string, _opts?: RequestOptions): Promise<FirstObjects> {
    this.probes++;
    const keys = [...this.objects.keys()].filter((k) => k.startsWith(prefix)).sort(compareKeys);
    const objects = keys.slice(0, 2).map((key) => { const o = this.objects.get(key)!; return { key, size: o.body.length, etag: o.etag, lastModified: o.lastModified }; });
    return { objects, complete: keys.length <= 2 };
  }

  async head(key: string, _opts?: RequestOptions): Promise<ObjectInfo> {
    this.heads++;
    const o = this.objects.get(key);
    if (!o) throw new NoSuchKeyError(this.bucket, key);
    return { key, size: o.body.length, etag: o.etag, lastModified: o.lastModified };
  }

  async getRange(key: string, start: number, endExclusive: number, etag: string, opts?: RangeOptions): Promise<Buffer> {
    const into = this.honourInto ? opts?.into : undefined;
    this.gets++;
    this.requests.push({ key, start, end: endExclusive });
    const n = Math.max(0, endExclusive - start);
    this.inflightBytes += n;
    if (this.inflightBytes > this.peakInflightBytes) this.peakInflightBytes = this.inflightBytes;
    try {
      if (this.gate) await this.gate;
      if (this.latencyMs > 0) await new Promise((r) => setTimeout(r, this.latencyMs));
      else await Promise.resolve();
      if (this.failNext > 0) {
        this.failNext--;
        into?.fill(0xee);
        throw new S3Error(`fake: injected failure for ${key}`, 500, 'InternalError');
      }
      const o = this.objects.get(key);
      if (!o) throw new NoSuchKeyError(this.bucket, key);
      if (o.etag !== etag) throw new ObjectChangedError(this.bucket, key, etag, o.etag);
      if (start < 0 || endExclusive > o.body.length || start >= endExclusive) {
        throw new S3Error(`fake: bad range ${start}-${endExclusive} of ${key} (${o.body.length} bytes)`, 416, 'InvalidRange');
      }
      this.getBytes += n;
      if (into) {
        if (into.length !== n) throw new RangeError(`fake: into holds ${into.length} bytes for ${n}`);
        o.body.copy(into, 0, start, endExclusive);
        return into;
      }
      return Buffer.from(o.body.subarray(start, endExclusive));
    } finally {
      this.inflightBytes -= n;
    }
  }

  async *getStream(key: string, etag: string, opts: StreamOptions = {}): AsyncIterable<Buffer> {
    const o = this.objects.get(key);
    if (!o) throw new NoSuchKeyError(this.bucket, key);
    const start = opts.start ?? 0;
    const end = opts.end ?? o.body.length;
    if (end > start) yield await this.getRange(key, start, end, etag, opts);
  }

  async close(): Promise<void> {}
}

/** Deterministic pseudo-random bytes (xorshift32, 4 bytes a step), so failures reproduce. */
export { patternBytes } from './pattern-bytes.mjs';
