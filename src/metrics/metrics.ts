/**
 * Every metric sluice exports, declared in this one file on one prom-client
 * registry. docs/METRICS.md documents each of them, and a test checks that the
 * two agree both ways.
 *
 * Rules:
 *  - Names start with `sluice_`; units are in the name (`_bytes`, `_seconds`).
 *  - Label values are bounded sets (operation, status class, reason, channel
 *    name, mode). Never an object key, a path or a credential.
 *  - Histograms use buckets chosen for S3 latencies: 1 ms .. 30 s.
 */
import client from 'prom-client';

export const registry = new client.Registry();
client.collectDefaultMetrics({ register: registry, prefix: 'sluice_process_' });

/** 1 ms .. ~33 s, doubling: covers a cached hit (sub-ms) to a retried, throttled GET. */
const LATENCY_BUCKETS = client.exponentialBuckets(0.001, 2, 16);
/** Read sizes served to the kernel or a pipe: 4 KiB .. 16 MiB. */
const SIZE_BUCKETS = client.exponentialBuckets(4096, 4, 8);

// ---- S3 client -------------------------------------------------------------------

export const s3Requests = new client.Counter({
  name: 'sluice_s3_requests_total',
  help: 'S3 requests completed, by operation (list, head, get) and HTTP status (or "error" when no reply came).',
  labelNames: ['operation', 'status'] as const,
  registers: [registry],
});
export const s3BytesReceived = new client.Counter({
  name: 'sluice_s3_received_bytes_total',
  help: 'Body bytes received from S3 by ranged and streaming GETs (including bytes of attempts later discarded).',
  registers: [registry],
});
export const s3Retries = new client.Counter({
  name: 'sluice_s3_retries_total',
  help: 'S3 request attempts that were retried, by reason (throttled, server_error, reset, timeout, short_body, unreachable).',
  labelNames: ['operation', 'reason'] as const,
  registers: [registry],
});
export const s3FirstByteSeconds = new client.Histogram({
  name: 'sluice_s3_first_byte_seconds',
  help: 'Time from sending an S3 request to receiving the response headers, per attempt.',
  labelNames: ['operation'] as const,
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});
export const s3RequestSeconds = new client.Histogram({
  name: 'sluice_s3_request_seconds',
  help: 'Total time of an S3 request, including every retry and the whole body.',
  labelNames: ['operation'] as const,
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});
export const s3InflightRequests = new client.Gauge({
  name: 'sluice_s3_inflight_requests',
  help: 'S3 requests currently in flight.',
  labelNames: ['operation'] as const,
  registers: [registry],
});
