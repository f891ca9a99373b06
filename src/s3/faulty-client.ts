/**
 * A fault-injecting ObjectClient wrapper for unit tests of the layers above src/s3/
 * (cache, prefetch, fs core, pipe): it wraps any ObjectClient, real or fake, and makes
 * chosen calls fail with a chosen typed error, without a network.
 *
 * Faults are queued per operation and consumed in order: `failNext('getRange', 2, () =>
 * new TimeoutError('x'))` makes the next two getRange calls reject. A getStream fault can
 * strike after `afterBytes` bytes, like a connection that breaks mid-body after retries
 * ran out. Every call is counted in `calls`. Nothing here is used in production code.
 */
import type { FirstObjects, ListOptions, ObjectClient, ObjectInfo, RequestOptions, StreamOptions } from './object-client.js';

export type FaultyOperation = 'list' | 'head' | 'getRange' | 'getStream';

interface Fault {
  remaining: number;
  error: () => Error;
  afterBytes: number;
}

export class FaultyClient implements ObjectClient {
  readonly calls: Record<FaultyOperation, number> = { list: 0, head: 0, getRange: 0, getStream: 0 };
  private readonly faults: Record<FaultyOperation, Fault[]> = { list: [], head: [], getRange: [], getStream: [] };

  constructor(readonly inner: ObjectClient) {
    if (inner.firstObjectsUnder) {
      this.firstObjectsUnder = async (prefix, opts) => {
        const f = this.take('list');
        if (f) throw f.error();
        return inner.firstObjectsUnder!(prefix, opts);
      };
    }
  }

  get bucket(): string {
    return this.inner.bucket;
  }

  /** The next `count` calls of `op` fail with `error()` (for getStream: after `afterBytes` bytes). */
  failNext(op: FaultyOperation, count: number, error: () => Error, afterBytes = 0): this {
    this.faults[op].push({ remaining: count, error, afterBytes });
    return this;
  }

  /** Removes every queued fault. */
  heal(): void {
    for (const op of Object.keys(this.faults) as FaultyOperation[]) this.faults[op] = [];
  }

  private take(op: FaultyOperation): Fault | undefined {
    this.calls[op]++;
    const f = this.faults[op][0];
    if (!f) return undefined;
    if (--f.remaining <= 0) this.faults[op].shift();
    return f;
  }

  async *list(prefix: string, opts?: ListOptions): AsyncIterable<ObjectInfo> {
    const f = this.take('list');
    if (f) throw f.error();
    yield* this.inner.list(prefix, opts);
  }

  async head(key: string, opts?: RequestOptions): Promise<ObjectInfo> {
    const f = this.take('head');
    if (f) throw f.error();
    return this.inner.head(key, opts);
  }

  async firstKeyUnder(prefix: string, opts?: RequestOptions): Promise<string | undefined> {
    const f = this.take('list');
    if (f) throw f.error();
    return this.inner.firstKeyUnder(prefix, opts);
  }

  /** The inner client's, when it has one; a 'list' fault fails it as it fails firstKeyUnder. */
  readonly firstObjectsUnder?: (prefix: string, opts?: RequestOptions) => Promise<FirstObjects>;

  async getRange(key: string, start: number, endExclusive: number, etag: string, opts?: RequestOptions): Promise<Buffer> {
    const f = this.take('getRange');
    if (f) throw f.error();
    return this.inner.getRange(key, start, endExclusive, etag, opts);
  }

  async *getStream(key: string, etag: string, opts?: StreamOptions): AsyncIterable<Buffer> {
    const f = this.take('getStream');
    let sent = 0;
    if (f && f.afterBytes <= 0) throw f.error();
    for await (const chunk of this.inner.getStream(key, etag, opts)) {
      if (f && sent + chunk.length >= f.afterBytes) {
        const n = f.afterBytes - sent;
        if (n > 0) yield chunk.subarray(0, n);
        throw f.error();
      }
      sent += chunk.length;
      yield chunk;
    }
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
