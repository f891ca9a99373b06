import { startLocalS3 } from '/work/main/src/local/s3-server.js';
import { createObjectClient } from '/work/main/src/s3/s3-client.js';
import { getEventListeners } from 'node:events';
const s3 = await startLocalS3();
await s3.createBucket('b');
for (let i = 0; i < 30; i++) await s3.putObject('b', `k${i}`, Buffer.alloc(100, i));
const c = createObjectClient({ bucket: 'b', endpoint: s3.endpoint, region: 'us-east-1', pathStyle: true, credentials: s3.credentials });
const ac = new AbortController();
for (let i = 0; i < 30; i++) {
  const info = await c.head(`k${i}`);
  for await (const _ of c.getStream(info.key, info.etag, { size: info.size, signal: ac.signal })) {}
  await c.getRange(info.key, 0, 50, info.etag, { signal: ac.signal });
}
console.log('listeners after 60 sequential requests:', getEventListeners(ac.signal, 'abort').length);
await c.close(); await s3.stop();
