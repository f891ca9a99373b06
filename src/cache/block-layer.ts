/**
 * What a caching layer in front of the source shares (the disk tier, ./tiered-client.ts, and
 * the cache bucket, ./cache-bucket.ts): it serves bytes from its own store and passes the
 * rest to the client below it. Listing, HEAD and the bucket are the inner client's. Version
 * pins go to the inner client first (it refuses a key pinned to two versions before either
 * layer takes a pin) and are kept here too, since they are part of a block's identity.
 */
import type { FirstObjects, ListOptions, ObjectClient, ObjectInfo, RangeOptions, RequestOptions, StreamOptions } from '../s3/object-client.js';
import { mergeVersionPins } from '../s3/version-pins.js';

export abstract class BlockLayer implements ObjectClient {
  /** Version ids snapshots pinned (pinVersions, merged): part of those objects' blocks' identity. */
  protected readonly versions = new Map<string, string>();

  /** The inner client's, when it has one (an optional method stays optional through a layer). */
  readonly firstObjectsUnder?: (prefix: string, opts?: RequestOptions) => Promise<FirstObjects>;

  constructor(protected readonly inner: ObjectClient) {
    if (inner.firstObjectsUnder) this.firstObjectsUnder = (prefix, opts) => inner.firstObjectsUnder!(prefix, opts);
  }

  get bucket(): string {
    return this.inner.bucket;
  }

  pinVersions(versions: ReadonlyMap<string, string>): void {
    this.inner.pinVersions?.(versions); // first: it refuses a conflict before either takes a pin
    mergeVersionPins(this.versions, versions, this.bucket);
  }

  list(prefix: string, opts?: ListOptions): AsyncIterable<ObjectInfo> {
    return this.inner.list(prefix, opts);
  }

  head(key: string, opts?: RequestOptions): Promise<ObjectInfo> {
    return this.inner.head(key, opts);
  }

  firstKeyUnder(prefix: string, opts?: RequestOptions): Promise<string | undefined> {
    return this.inner.firstKeyUnder(prefix, opts);
  }

  abstract getRange(key: string, start: number, endExclusive: number, etag: string, opts?: RangeOptions): Promise<Buffer>;
  abstract getStream(key: string, etag: string, opts?: StreamOptions): AsyncIterable<Buffer>;
  abstract close(): Promise<void>;
}
