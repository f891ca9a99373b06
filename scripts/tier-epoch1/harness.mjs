// Issue 14 (epoch 1 with the disk tier): s3rver seeded with COUNT large objects behind the bench's latency
// proxy (+25 ms, 80 MB/s per connection); prints the endpoint and objects as one JSON line, runs until SIGTERM.
// Usage: node scripts/tier-epoch1/harness.mjs $PWD/dist [COUNT=4] [SIZE=134217728] [large|small] > /tmp/harness.out &
// (small: COUNT files of SIZE bytes in 4 folders, as bench/scenarios/tier.yaml's tier-small; same bucket and prefix.)
const dist = process.argv[2];
const count = Number(process.argv[3] ?? 4);
const size = Number(process.argv[4] ?? 128 * 1024 * 1024);
const kind = process.argv[5] ?? 'large';
const { startLocalS3 } = await import(`${dist}/local/s3-server.js`);
const { seedBenchDataset } = await import(`${dist}/bench/datasets.js`);
const { startLatencyProxy } = await import(`${dist}/bench/latency-proxy.js`);
const s3 = await startLocalS3();
await s3.createBucket('bench');
const objs = await seedBenchDataset(s3, 'bench', 'large/', kind === 'small' ? { smallFiles: { count, size, folders: 4 } } : { largeFiles: { count, size } });
const proxy = await startLatencyProxy({ name: 's3-like', ttfbMs: 25, bytesPerSec: 80e6, targetPort: s3.port });
console.log(JSON.stringify({ endpoint: proxy.endpoint, s3: s3.endpoint, objs: objs.map((o) => ({ key: o.key, size: o.size, sha256: o.sha256 })) }));
const stop = async () => { await proxy.close(); await s3.stop(); process.exit(0); };
process.on('SIGTERM', stop); process.on('SIGINT', stop);
setInterval(() => {}, 1 << 30);
