import { readFile } from 'node:fs/promises';
import { mkdtemp, rmdir } from 'node:fs/promises';
import os from 'node:os'; import path from 'node:path';
import { startLocalS3 } from './dist/local/s3-server.js';
import { seedDataset } from './dist/local/dataset.js';
import { mountFastFile } from './dist/fuse/fastfile.js';
import { startMetricsServer } from './dist/metrics/server.js';
import { scrape, render } from './dist/commands/status.js';
import { startSummary } from './dist/metrics/summary.js';
import { setLogLevel } from './dist/log.js';
setLogLevel('warn');
const s3 = await startLocalS3();
const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-adhoc-'));
let m;
try {
  process.env.AWS_ACCESS_KEY_ID = s3.credentials.accessKeyId; process.env.AWS_SECRET_ACCESS_KEY = s3.credentials.secretAccessKey;
  await s3.createBucket('b');
  const objs = await seedDataset(s3, 'b', 'd/', { smallFiles: { count: 30, size: 100000, folders: 2 }, largeFiles: { count: 1, size: 5e6 } });
  const srv = await startMetricsServer({ host: '127.0.0.1', port: 0 });
  const sum = startSummary({ sink: (l) => console.log('SUMMARY', l) });
  m = await mountFastFile({ uri: 's3://b/d/', mountpoint: dir, channel: 'train', options: { endpoint: s3.endpoint, region: 'us-east-1', pathStyle: true, maxConnections: 16, maxAttempts: 3, requestTimeout: 10000, cacheSize: 64<<20, partSize: 1<<20, maxPrefetch: 4<<20, maxInflight: 16<<20, crossFilePrefetch: 8, crossFileMaxSize: 1<<20, allowOther: false, readAheadKb: 1024, attrTimeout: 60 } });
  const a = await scrape(srv.url + '/metrics');
  const t0 = performance.now();
  for (const o of objs) await readFile(path.join(dir, o.key.slice(2)));
  const b = await scrape(srv.url + '/metrics');
  console.log(render(srv.url + '/metrics', b, a, (performance.now() - t0) / 1000));
  await sum.stop();
  await srv.close();
} finally {
  await m?.unmount(); await rmdir(dir).catch(() => {}); await s3.stop();
}
