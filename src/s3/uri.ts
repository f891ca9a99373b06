/**
 * `s3://bucket/prefix` URIs.
 *
 * The prefix is everything after the first '/' following the bucket, kept byte for byte
 * (no percent-decoding: '%' and '+' are legal key characters). It is a plain key prefix,
 * as in SageMaker's S3Prefix: `s3://b/train` matches `train/x` and `train2/y`; add a
 * trailing '/' to mean one folder. The bucket name is checked against S3's rules, loosely
 * enough to accept legacy us-east-1 names (upper case, '_', up to 255 characters).
 */
import { BadUriError } from '../errors.js';

/** Legacy us-east-1 bucket names allowed [A-Za-z0-9._-] and up to 255 characters; new names are a subset. */
const BUCKET_RE = /^[A-Za-z0-9._-]{3,255}$/;

export function parseS3Uri(uri: string): { bucket: string; prefix: string } {
  if (typeof uri !== 'string' || uri.length === 0) throw new BadUriError(String(uri), 'it is empty');
  const m = /^s3:\/\/([^/]*)(?:\/(.*))?$/is.exec(uri);
  if (!m) throw new BadUriError(uri, 'it must start with s3://');
  const bucket = m[1]!;
  const prefix = m[2] ?? '';
  if (bucket.length === 0) throw new BadUriError(uri, 'the bucket name is missing');
  if (!BUCKET_RE.test(bucket)) {
    throw new BadUriError(uri, `${JSON.stringify(bucket)} is not a valid bucket name (3-63 characters: a-z, 0-9, '.', '-')`);
  }
  if (bucket.startsWith('.') || bucket.endsWith('.') || bucket.includes('..')) {
    throw new BadUriError(uri, `${JSON.stringify(bucket)} is not a valid bucket name (dots must separate labels)`);
  }
  return { bucket, prefix };
}
