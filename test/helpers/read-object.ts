/**
 * Reads one object through an ObjectClient both ways the data path has, and checks each
 * against its sha256: two ranged GETs (the wire client; the second into a caller's buffer)
 * and one stream (undici). Shared by the tests of request routes (proxies, S3 Express).
 */
import { createHash } from 'node:crypto';
import type { ObjectClient } from '../../src/s3/object-client.js';
import type { Test } from './tap.js';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

export async function checkRangedAndStream(t: Test, c: ObjectClient, o: { key: string; size: number; sha256: string }, etag: string): Promise<void> {
  const half = Math.floor(o.size / 2);
  const a = await c.getRange(o.key, 0, half, etag);
  const b = await c.getRange(o.key, half, o.size, etag, { into: Buffer.alloc(o.size - half) });
  t.equal(sha(Buffer.concat([a, b])), o.sha256, 'ranged GETs (wire client): exact bytes');
  const parts: Buffer[] = [];
  for await (const p of c.getStream(o.key, etag, { size: o.size })) parts.push(p);
  t.equal(sha(Buffer.concat(parts)), o.sha256, 'stream (undici): exact bytes');
}
