import { startLocalS3 } from './src/local/s3-server.js';
import { seedDataset, sourceBytes } from './src/local/dataset.js';
import { createObjectClient } from './src/s3/s3-client.js';
import { registry } from './src/metrics/metrics.js';
const s3 = await startLocalS3();
try {
  await s3.createBucket('bkt');
  const objs = await seedDataset(s3, 'bkt', 'ds/', { smallFiles: { count: 40, size: 10, folders: 9 }, largeFiles: { count: 1, size: 100000 }, specialNames: true });
  const c = createObjectClient({ bucket: 'bkt', endpoint: s3.endpoint, pathStyle: true, credentials: s3.credentials, region: 'us-east-1' });
  const keys: string[] = [];
  for await (const o of c.list('ds/')) keys.push(o.key);
  console.log('listed', keys.length, new Set(keys).size, objs.length);
  for (const o of objs.slice(-7)) {
    const h = await c.head(o.key);
    const b = await c.getRange(o.key, 0, o.size, o.etag);
    const b2 = await c.getRange(o.key, 0, 1, o.etag);
    const b3 = await c.getRange(o.key, o.size - 1, o.size, o.etag);
    const b4 = await c.getRange(o.key, 5, 17, o.etag);
    console.log(o.key, h.size, h.etag === o.etag, b.equals(sourceBytes(o)), b2.equals(sourceBytes(o, 0, 1)), b3.equals(sourceBytes(o, o.size - 1)), b4.equals(sourceBytes(o, 5, 17)));
  }
  for (const f of [() => c.head('nope'), () => c.getRange('nope', 0, 3, '"x"'), () => c.getRange(objs[0]!.key, 0, 3, '"x"')]) {
    try { await f(); } catch (e: any) { console.log(e.code, e.oneLine()); }
  }
  const bad = createObjectClient({ bucket: 'bkt', endpoint: s3.endpoint, pathStyle: true, credentials: { accessKeyId: 'X', secretAccessKey: 'Y' }, region: 'us-east-1' });
  for (const f of [() => bad.head(objs[0]!.key), () => bad.getRange(objs[0]!.key, 0, 3, objs[0]!.etag), async () => { for await (const _ of bad.list('')) {} }]) {
    try { await f(); } catch (e: any) { console.log(e.code, e.oneLine()); }
  }
  const nb = createObjectClient({ bucket: 'nobkt', endpoint: s3.endpoint, pathStyle: true, credentials: s3.credentials, region: 'us-east-1' });
  for (const f of [() => nb.head('x'), () => nb.getRange('x', 0, 3, '"e"'), async () => { for await (const _ of nb.list('')) {} }]) {
    try { await f(); } catch (e: any) { console.log(e.code, e.oneLine()); }
  }
  const un = createObjectClient({ bucket: 'bkt', endpoint: 'http://127.0.0.1:1', pathStyle: true, credentials: s3.credentials, region: 'us-east-1', maxAttempts: 2 });
  for (const f of [() => un.head('x'), () => un.getRange('x', 0, 3, '"e"'), async () => { for await (const _ of un.list('')) {} }]) {
    try { await f(); } catch (e: any) { console.log(e.code, e.oneLine()); }
  }
  await c.close(); await bad.close(); await nb.close(); await un.close();
  console.log((await registry.metrics()).split('\n').filter((l: string) => l.startsWith('sluice_s3_requests') || l.startsWith('sluice_s3_retries')).join('\n'));
} finally { await s3.stop(); }
