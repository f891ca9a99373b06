/**
 * One debug line per S3 request attempt (issue 45): what mount-s3's `--debug` and s3fs's `-d`
 * users read first. Callers build the line only behind `logOn.debug` (src/log.ts), so at info
 * a request costs one property read here, no object and no string.
 *
 * Fields: op (get, list, head, versioning), bucket, key (the prefix of a listing), range
 * (bytes=first-last of a GET), status (HTTP status, or 'error' when no reply came), requestId
 * (x-amz-request-id), ms (the attempt's time, from sending to its end), attempt (1 for the
 * first try), bytes (body bytes received), and error (the failure's message) when it failed.
 */
import { log } from '../log.js';

export interface S3RequestLine {
  op: string;
  bucket: string;
  key?: string | undefined;
  range?: string | undefined;
  status: string;
  requestId?: string | undefined;
  ms: number;
  attempt: number;
  bytes?: number | undefined;
  error?: unknown;
}

/** An S3 error code when the failure has one (the SDK names its exceptions so), else the message. */
function errorText(err: unknown): string {
  const e = err as { Code?: unknown; name?: unknown; message?: unknown } | undefined;
  if (typeof e?.Code === 'string') return e.Code;
  if (typeof e?.name === 'string' && !['Error', 'UnknownError', 'Unknown', 'TypeError'].includes(e.name) && e.name !== 'TransientError') return e.name;
  return typeof e?.message === 'string' && e.message !== 'UnknownError' ? e.message : String(err);
}

/** Writes one request's line; call only when logOn.debug is true. */
export function logS3Request(r: S3RequestLine): void {
  const line: Record<string, unknown> = {
    component: 's3', op: r.op, bucket: r.bucket, key: r.key, status: r.status, ms: Math.round(r.ms * 10) / 10, attempt: r.attempt,
  };
  if (r.range !== undefined) line.range = r.range;
  if (r.requestId !== undefined) line.requestId = r.requestId;
  if (r.bytes !== undefined) line.bytes = r.bytes;
  if (r.error !== undefined) line.error = errorText(r.error);
  log.debug(line, 's3 request');
}
