/**
 * Issue 45 (4): one debug line per S3 request, one trace line per FUSE operation.
 *  - `sluice mount --log-level debug` behind our forward proxy (test/helpers/forward-proxy.ts,
 *    which records every request it forwards): exactly one `s3 request` line with op get per
 *    ranged GET the proxy saw, each with key, range, status, ms and attempt; the listing has
 *    its line too.
 *  - `--log-level trace`: `fuse op` lines with op, path and, for reads, offset and size.
 *  - At info: none of these lines.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { seedDataset } from '../../src/local/dataset.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { startCli, waitExit } from '../helpers/cli.js';
import { startForwardProxy } from '../helpers/forward-proxy.js';
import { tempMountpoint } from '../helpers/fuse.js';
import '../helpers/exit-watch.js';

const BUCKET = 'logged';
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

t.test('debug: a line per GET; trace: a line per FUSE operation; info: neither', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket(BUCKET);
  const objects = await seedDataset(s3, BUCKET, 'p/', { smallFiles: { count: 3, size: 30_000, folders: 1 }, largeFiles: { count: 1, size: 5 * 1024 * 1024 } });
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-test-log-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const env: NodeJS.ProcessEnv = {
    ...process.env, AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey, AWS_REGION: 'us-east-1',
  };
  for (const k of ['AWS_PROFILE', 'AWS_SESSION_TOKEN', 'SLUICE_LOG_LEVEL', 'NO_PROXY', 'no_proxy', 'http_proxy', 'ALL_PROXY', 'all_proxy']) delete env[k];
  const common = ['--endpoint', s3.endpoint, '--path-style', '--metrics-port', '0', '--cache-size', '32MiB', '--part-size', '1MiB', '--max-prefetch', '2MiB', '--max-attempts', '2', '--log-format', 'json'];

  for (const level of ['info', 'debug', 'trace'] as const) {
    const proxy = await startForwardProxy();
    const mnt = await tempMountpoint(t, `log-${level}`);
    const logFile = path.join(dir, `${level}.log`);
    const r = await startCli(['mount', `s3://${BUCKET}/p/`, mnt, ...common, '--log-level', level, '--log-file', logFile], { ...env, HTTP_PROXY: proxy.url });
    try {
      for (const o of objects) t.equal(sha(await readFile(path.join(mnt, o.key.slice(2)))), o.sha256, `${level}: ${o.key} exact`);
    } finally {
      r.child.kill('SIGTERM');
      t.equal((await waitExit(r)).code, 0, `${level}: clean exit`);
      await proxy.close();
    }
    const lines = (await readFile(logFile, 'utf8')).split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
    const gets = lines.filter((l) => l.msg === 's3 request' && l.op === 'get');
    const proxiedGets = proxy.requests.filter((x) => x.method === 'GET' && x.range !== undefined);
    const fuseOps = lines.filter((l) => l.msg === 'fuse op');
    t.ok(proxiedGets.length >= objects.length, `${level}: the proxy saw ${proxiedGets.length} GETs`);
    if (level === 'info') {
      t.same(gets, [], 'info: no request lines');
      t.same(fuseOps, [], 'info: no operation lines');
      continue;
    }
    t.equal(gets.length, proxiedGets.length, `${level}: one debug line per GET (${gets.length})`);
    const ranges = new Set(proxiedGets.map((x) => `${decodeURIComponent(new URL(x.url).pathname).replace(`/${BUCKET}/`, '')} ${x.range}`));
    t.same(new Set(gets.map((l) => `${String(l.key)} ${String(l.range)}`)), ranges, `${level}: each line names the key and range the proxy saw`);
    for (const l of gets) {
      t.equal(l.status, '206', `${level}: status of ${String(l.key)}`);
      t.ok(typeof l.ms === 'number' && l.attempt === 1 && typeof l.bytes === 'number' && l.bucket === BUCKET, `${level}: ms, attempt, bytes, bucket`);
    }
    t.ok(lines.some((l) => l.msg === 's3 request' && l.op === 'list' && l.key === 'p/'), `${level}: the listing has its line`);
    if (level === 'debug') {
      t.same(fuseOps, [], 'debug: no FUSE operation lines');
      continue;
    }
    const large = objects.find((o) => o.size > 1024 * 1024)!;
    const largePath = `/${large.key.slice(2)}`;
    t.ok(fuseOps.some((l) => l.op === 'open' && l.path === largePath && l.fh !== undefined), 'trace: the open of the large file');
    const reads = fuseOps.filter((l) => l.op === 'read' && l.path === largePath);
    const inC = lines.filter((l) => l.msg === 'fuse ops answered in C' && l.op === 'read');
    t.ok(reads.length + inC.length > 0, `trace: its reads (${reads.length} here, ${inC.length} lines of reads answered in C)`);
    for (const l of reads) t.ok(typeof l.offset === 'number' && typeof l.size === 'number' && typeof l.ms === 'number' && (typeof l.bytes === 'number' || typeof l.errno === 'string'), 'a read line has offset, size, ms, and bytes or errno');
    t.ok(fuseOps.some((l) => l.op === 'getattr' || l.op === 'readdir' || l.op === 'opendir'), 'trace: metadata operations');
  }
});
