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
 *    works with a custom endpoint); the data path takes the same sessions from the SDK's
 *    identity provider (one per bucket, cached, refreshed a minute before they expire) and
 *    signs with them (./signing.ts createSessionGetSigner).
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
