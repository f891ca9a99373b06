/**
 * S3 Express One Zone directory buckets (`NAME--AZID--x-s3`, e.g. `data--usw2-az1--x-s3`):
 * what differs from a general-purpose bucket, and where sluice handles it.
 *
 *  - Endpoint: zonal, `https://BUCKET.s3express-AZID.REGION.amazonaws.com` (virtual-hosted),
 *    from the zone id in the name (./addressing.ts defaultEndpoint). A custom --endpoint is
 *    used as given, with the usual path-style rules.
 *  - Auth: every data-plane request is signed with session credentials from CreateSession
 *    (`GET /?session` on the bucket, signed with the caller's credentials, service
 *    `s3express`), and carries the session token as `x-amz-s3session-token`. The SDK client
 *    does this for listing and HEAD by itself (its built-in S3 Express support, which also
 *    works with a custom endpoint), with the sessions of ExpressSessions below; the data
 *    path signs with the same sessions (./signing.ts createSessionGetSigner).
 *  - Listings are not in key order, and StartAfter is not supported: the listing is one flat
 *    ListObjectsV2 (no parallel ranges, ./lister.ts, which cut the key space with StartAfter
 *    and stop a range at its first key past the end). Every consumer sorts what it lists
 *    (folder names in src/fs/tree.ts, shards in src/channels/shard.ts, snapshots).
 */

/** `NAME--AZID--x-s3`: the zone id of a directory bucket, or undefined for a general-purpose bucket. */
export function directoryBucketZone(bucket: string): string | undefined {
  const m = /^[a-z0-9][a-z0-9-]*?--([a-z0-9-]+?-az[0-9]+)--x-s3$/.exec(bucket);
  return m?.[1];
}

/** The zonal endpoint (without the bucket) of a directory bucket in `region`. */
export function expressEndpoint(zone: string, region: string): string {
  return `https://s3express-${zone}.${region}.amazonaws.com`;
}

/** Session credentials of a directory bucket (CreateSession's Credentials). */
export interface ExpressSession {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiration?: Date;
}

/**
 * 60 s: a session with less life than this is replaced in the background (the SDK's own
 * REFRESH_WINDOW_MS), so a request signed now still reaches S3 well before it expires.
 */
const REFRESH_WINDOW_MS = 60_000;

/**
 * One session per bucket, shared by the SDK's requests (given to the S3 client as its
 * `s3ExpressIdentityProvider`) and the data path's. As the SDK's own provider: a session
 * within REFRESH_WINDOW_MS of expiring is replaced in the background while it is still
 * used, an expired one is awaited. Unlike it, a failed background replacement is caught
 * (the SDK's leaves a rejected promise unhandled, which ends a Node process): the old
 * session serves until it expires, and the next use tries again.
 */
export class ExpressSessions {
  private readonly cache = new Map<string, { session: Promise<ExpressSession>; refreshing: boolean }>();
  private baseKey: string | undefined;

  constructor(private readonly create: (bucket: string) => Promise<ExpressSession>) {}

  async getS3ExpressIdentity(base: { accessKeyId: string }, p: { Bucket: string }): Promise<ExpressSession> {
    if (base.accessKeyId !== this.baseKey) {
      // Other base credentials (rotated): sessions made with the old ones are dropped.
      this.baseKey = base.accessKeyId;
      this.cache.clear();
    }
    const entry = this.cache.get(p.Bucket);
    if (entry !== undefined) {
      let s: ExpressSession | undefined;
      try { s = await entry.session; } catch { s = undefined; }
      const left = (s?.expiration?.getTime() ?? 0) - Date.now();
      if (s !== undefined && left > 0) {
        if (left < REFRESH_WINDOW_MS && !entry.refreshing) {
          entry.refreshing = true;
          const next = this.create(p.Bucket);
          next.then((n) => { if (this.cache.get(p.Bucket) === entry) this.cache.set(p.Bucket, { session: Promise.resolve(n), refreshing: false }); },
            () => { entry.refreshing = false; });
        }
        return s;
      }
    }
    const fresh = { session: this.create(p.Bucket), refreshing: false };
    this.cache.set(p.Bucket, fresh);
    fresh.session.catch(() => { if (this.cache.get(p.Bucket) === fresh) this.cache.delete(p.Bucket); });
    return fresh.session;
  }
}
