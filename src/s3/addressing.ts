/**
 * Where a bucket's objects live on the wire: endpoint, region, path-style or
 * virtual-hosted addressing, and the URI encoding of keys.
 *
 *  - Endpoint: the option, else AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else AWS S3
 *    for the region (https://s3.<region>.amazonaws.com, .com.cn in China); for an S3 Express
 *    directory bucket its zonal endpoint (https://s3express-<az>.<region>.amazonaws.com, ./express.ts).
 *  - Region: the option, else AWS_REGION, else AWS_DEFAULT_REGION; the client then tries
 *    the shared profile, and falls back to us-east-1.
 *  - Addressing, one decision (pathStyleFor) for the SDK client (listing, HEAD) and the data
 *    path (GETs) alike, as the AWS CLI's "auto" addressing style makes it:
 *      path-style (endpoint/bucket/key) when --path-style is given, when the bucket name
 *      cannot be a DNS label (upper case, '_' or '.', which breaks TLS wildcards), or when
 *      the endpoint is a custom one not under amazonaws.com: an IP address or localhost
 *      (no DNS to put the bucket in), a single-label host such as a compose service
 *      `minio` (bucket.minio resolves nowhere), or any S3-compatible store (MinIO, Ceph,
 *      LocalStack all serve path-style; few serve bucket.host without DNS set up for it);
 *      virtual-hosted (bucket.host/key) otherwise: AWS S3 itself, and a custom endpoint
 *      with --virtual-hosted (stores that refuse path-style).
 *  - Keys are encoded per segment with RFC 3986 (encodeURIComponent plus !'()*), keeping
 *    '/': S3 signs the path exactly as sent and decodes '+' as '+' only if it is %2B.
 */
import { isIP } from 'node:net';
import { InvalidArgumentError } from '../errors.js';
import { directoryBucketZone, expressEndpoint } from './express.js';

/** The region AWS SDKs use when nothing else is configured. */
export const DEFAULT_REGION = 'us-east-1';

export interface Addressing {
  /** scheme://host[:port] that the connection pool dials. */
  origin: string;
  /** The endpoint as the user would write it (for messages). */
  endpoint: string;
  /** Buckets are addressed as bucket.host: a host name that DNS must know. */
  virtualHosted: boolean;
  /** The request path of a key (already URI-encoded), e.g. /bucket/a%20b. */
  pathFor(key: string): string;
}

export function regionFromEnv(env: NodeJS.ProcessEnv = process.env): string | undefined {
  return env.AWS_REGION || env.AWS_DEFAULT_REGION || undefined;
}

export function endpointFromEnv(env: NodeJS.ProcessEnv = process.env): string | undefined {
  return env.AWS_ENDPOINT_URL_S3 || env.AWS_ENDPOINT_URL || undefined;
}

/** AWS's endpoint for `bucket` in `region`: the zonal one of a directory bucket (./express.ts), else S3's regional one. */
export function defaultEndpoint(region: string, bucket?: string): string {
  const zone = bucket !== undefined ? directoryBucketZone(bucket) : undefined;
  if (zone !== undefined) return expressEndpoint(zone, region);
  return `https://s3.${region}.amazonaws.com${region.startsWith('cn-') ? '.cn' : ''}`;
}

/** RFC 3986 encoding of each '/'-separated segment of a key. */
export function encodeKey(key: string): string {
  return key.split('/').map((seg) => encodeURIComponent(seg).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)).join('/');
}

function dnsCompatible(bucket: string): boolean {
  return /^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/.test(bucket);
}

/** Parses and checks an endpoint URL; throws InvalidArgumentError naming the fix. */
export function parseEndpoint(endpoint: string): URL {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    throw new InvalidArgumentError(`bad --endpoint ${JSON.stringify(endpoint)}: not a URL`, { hint: 'Use the form http://host:port or https://host' });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new InvalidArgumentError(`bad --endpoint ${JSON.stringify(endpoint)}: only http:// and https:// are supported`, { hint: 'Use the form http://host:port or https://host' });
  }
  return url;
}

/** How the user asked buckets to be addressed: --path-style, --virtual-hosted, or neither. */
export type AddressingStyle = 'auto' | 'path' | 'virtual';

/** An AWS S3 host (s3.<region>.amazonaws.com, VPC endpoints, .com.cn): serves bucket.host. */
function isAwsHost(hostname: string): boolean {
  return /\.amazonaws\.com(\.cn)?$/i.test(hostname);
}

/**
 * The one addressing decision (see the header): true for endpoint/bucket/key. The SDK client
 * gets it as forcePathStyle and the data path builds its URLs from it, so the two never differ.
 * `style` true/false is --path-style given or not.
 */
export function pathStyleFor(bucket: string, endpoint: string | undefined, style: AddressingStyle | boolean): boolean {
  const s: AddressingStyle = style === true ? 'path' : style === false ? 'auto' : style;
  if (s === 'path' || !dnsCompatible(bucket)) return true;
  if (endpoint === undefined) return false;
  const hostname = parseEndpoint(endpoint).hostname.replace(/^\[|\]$/g, '');
  // An IP or localhost has no DNS to put the bucket in, whatever the user asked.
  if (isIP(hostname) !== 0 || hostname === 'localhost') return true;
  if (s === 'virtual') return false;
  return !isAwsHost(hostname);
}

export function addressingFor(bucket: string, endpoint: string | undefined, region: string, style: AddressingStyle | boolean): Addressing {
  const shown = endpoint ?? defaultEndpoint(region, bucket);
  const url = parseEndpoint(shown);
  const basePath = url.pathname.replace(/\/+$/, '');
  const virtual = !pathStyleFor(bucket, endpoint, style);
  const host = virtual ? `${bucket}.${url.host}` : url.host;
  return {
    origin: `${url.protocol}//${host}`,
    endpoint: shown,
    virtualHosted: virtual,
    pathFor: virtual
      ? (key) => `${basePath}/${encodeKey(key)}`
      : (key) => `${basePath}/${encodeURIComponent(bucket)}/${encodeKey(key)}`,
  };
}
