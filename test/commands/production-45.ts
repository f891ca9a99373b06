/**
 * Issue 45: what a platform engineer meets on a real node, each as the CLI is run.
 *  - a `localhost` endpoint without --path-style (SDK listing and data-path GETs agree);
 *  - mount-s3 / s3fs option names (--endpoint-url, --force-path-style, --prefix, -o ...);
 *  - --requester-pays and --expected-bucket-owner headers on every request, SDK and data path;
 *  - `sluice snapshot --no-sign-request`;
 *  - two mounts with the default metrics port at once, and `sluice status` showing both;
 *    an explicitly given busy port still fails.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { mountAt } from '../../src/fuse/mountpoint.js';
import { seedDataset, type SeededObject } from '../../src/local/dataset.js';
import { startLocalS3, type LocalS3 } from '../../src/local/s3-server.js';
import { runCli, startCli, waitExit, type RunningCli } from '../helpers/cli.js';
import { tempMountpoint } from '../helpers/fuse.js';

const BUCKET = 'prod45';
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

interface Seen { method: string; url: string; headers: http.IncomingHttpHeaders }

/** A recording HTTP proxy in front of s3rver: forwards every request as it is (Host kept, so signatures verify). */
async function recordingProxy(t: { teardown(fn: () => unknown): void }, target: number): Promise<{ endpoint: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const agent = new http.Agent({ keepAlive: true });
  const server = http.createServer((req, res) => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    const up = http.request({ host: '127.0.0.1', port: target, method: req.method, path: req.url, headers: req.headers, agent }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); agent.destroy(); }));
  return { endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

t.test('issue 45: production habits', async (t) => {
  const s3: LocalS3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket(BUCKET);
  const objects: SeededObject[] = await seedDataset(s3, BUCKET, 'p/', { smallFiles: { count: 4, size: 3000, folders: 1 }, largeFiles: { count: 1, size: 2 * 1024 * 1024 } });
  const env: NodeJS.ProcessEnv = {
    ...process.env, AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey,
    AWS_REGION: 'us-east-1', SLUICE_LOG_LEVEL: 'info', NODE_NO_WARNINGS: '1',
  };
  for (const k of ['AWS_PROFILE', 'AWS_SESSION_TOKEN', 'SLUICE_METRICS_PORT', 'SLUICE_PATH_STYLE', 'AWS_ENDPOINT_URL', 'AWS_ENDPOINT_URL_S3']) delete env[k];
  const small = ['--cache-size', '16MiB', '--part-size', '1MiB', '--max-prefetch', '2MiB', '--max-attempts', '2'];
  const started: RunningCli[] = [];
  t.teardown(() => { for (const r of started) r.child.kill('SIGKILL'); });
  const mount = async (args: string[], e: NodeJS.ProcessEnv = env) => {
    const r = await startCli(['mount', ...args], e);
    started.push(r);
    return r;
  };
  const stop = async (r: RunningCli) => { r.child.kill('SIGTERM'); return waitExit(r); };
  const allMatch = async (dir: string) => {
    for (const o of objects) if (sha(await readFile(path.join(dir, o.key.slice(2)))) !== o.sha256) return false;
    return true;
  };
  const localhost = s3.endpoint.replace('127.0.0.1', 'localhost');

  t.test('a localhost endpoint without --path-style: listing and reads', async (t) => {
    const dir = await tempMountpoint(t, 'lh');
    const r = await mount([`s3://${BUCKET}/p/`, dir, '--endpoint', localhost, '--metrics-port=-1', ...small]);
    t.ok(await allMatch(dir), 'every file matches its source');
    t.equal((await stop(r)).code, 0);
    const snap = path.join(os.tmpdir(), `sluice-45-${process.pid}-lh.snap`);
    t.teardown(() => rm(snap, { force: true }));
    const s = await runCli(['snapshot', `s3://${BUCKET}/p/`, snap, '--endpoint', localhost], env, 60_000);
    t.equal(s.code, 0, s.stderr);
    t.match(s.stdout, `${objects.length} objects`);
  });

  t.test("mount-s3's and s3fs's option names", async (t) => {
    const dir = await tempMountpoint(t, 'm3');
    // mount-s3's form: BUCKET DIR --prefix P, with its flag names.
    const r = await mount([BUCKET, dir, '--prefix', 'p/', '--endpoint-url', s3.endpoint, '--force-path-style', '--foreground', '--read-only',
      '-o', 'allow_other,uid=1234,gid=1234,umask=022,ro', '--metrics-port=-1', ...small]);
    t.equal((await mountAt(dir))?.fstype, 'fuse.sluice', 'mounted');
    t.ok(await allMatch(dir), 'every file matches its source');
    const st = await import('node:fs/promises').then((fs) => fs.stat(path.join(dir, objects[0]!.key.slice(2))));
    t.equal(st.uid, 1234, '-o uid');
    t.equal(st.mode & 0o777, 0o444, '-o umask=022 leaves files 0444');
    t.equal((await stop(r)).code, 0);
    const bad = await runCli(['mount', BUCKET, dir, '-o', 'allow_other,big_writes', '--endpoint-url', s3.endpoint], env, 30_000);
    t.not(bad.code, 0);
    t.match(bad.stderr, /unknown -o option "big_writes".*allow_other/, 'an unknown -o option is answered with the known ones');
    t.equal(bad.stderr.trim().split('\n').length, 1, 'one line');
    const bind = await runCli(['mount', BUCKET, dir, '--bind', 'eth0', '--endpoint-url', s3.endpoint], env, 30_000);
    t.match(bind.stderr, /--bind .*no sluice counterpart/, '--bind is answered');
  });

  t.test('--requester-pays and --expected-bucket-owner on every request, SDK and data path', async (t) => {
    const proxy = await recordingProxy(t, s3.port);
    const dir = await tempMountpoint(t, 'rp');
    const r = await mount([`s3://${BUCKET}/p/`, dir, '--endpoint', proxy.endpoint, '--requester-pays', '--expected-bucket-owner', '123456789012', '--metrics-port=-1', ...small]);
    t.ok(await allMatch(dir), 'every file matches its source (signatures over the new headers verify)');
    t.equal((await stop(r)).code, 0);
    const snap = path.join(os.tmpdir(), `sluice-45-${process.pid}-rp.snap`);
    t.teardown(() => rm(snap, { force: true }));
    const s = await runCli(['snapshot', `s3://${BUCKET}/p/`, snap, '--endpoint', proxy.endpoint, '--requester-pays', '--expected-bucket-owner', '123456789012'], env, 60_000);
    t.equal(s.code, 0, s.stderr);
    const kinds = new Set(proxy.seen.map((q) => (q.url.includes('list-type=2') ? 'list' : q.headers.range ? 'ranged GET' : q.method)));
    t.ok(kinds.has('list') && kinds.has('ranged GET'), `listings and ranged GETs were seen (${[...kinds].join(', ')})`);
    const without = proxy.seen.filter((q) => q.headers['x-amz-request-payer'] !== 'requester' || q.headers['x-amz-expected-bucket-owner'] !== '123456789012');
    t.same(without.map((q) => `${q.method} ${q.url}`), [], `all ${proxy.seen.length} requests carry both headers`);
    t.ok(proxy.seen.every((q) => /x-amz-request-payer/.test(String(q.headers.authorization))), 'and sign them');
  });

  t.test('sluice snapshot --no-sign-request sends no signature', async (t) => {
    const proxy = await recordingProxy(t, s3.port);
    const snap = path.join(os.tmpdir(), `sluice-45-${process.pid}-anon.snap`);
    t.teardown(() => rm(snap, { force: true }));
    const s = await runCli(['snapshot', `s3://${BUCKET}/p/`, snap, '--endpoint', proxy.endpoint, '--no-sign-request'], env, 60_000);
    t.equal(s.code, 0, s.stderr);
    t.ok(proxy.seen.length > 0, 'requests were made');
    t.notOk(proxy.seen.some((q) => q.headers.authorization !== undefined), 'none signed');
  });

  t.test('two mounts with the default metrics port; status shows both; a given busy port fails', async (t) => {
    const a = await tempMountpoint(t, 'pa');
    const b = await tempMountpoint(t, 'pb');
    const common = ['--endpoint', s3.endpoint, ...small];
    const ra = await mount([`s3://${BUCKET}/p/`, a, ...common]);
    const rb = await mount([`s3://${BUCKET}/p/`, b, ...common]);
    const urlOf = (r: RunningCli) => /metrics at (http:\/\/127\.0\.0\.1:\d+)\/metrics/.exec(r.stderr())?.[1];
    const ua = urlOf(ra);
    const ub = urlOf(rb);
    t.ok(ua && ub && ua !== ub, `two endpoints: ${ua}, ${ub}`);
    t.match(rb.stderr(), /metrics port \d+ is taken/, 'the second says its port moved');
    t.ok(await allMatch(a) && await allMatch(b), 'both serve');
    const st = await runCli(['status', '--interval', '0'], env, 60_000);
    t.equal(st.code, 0, st.stderr);
    t.match(st.stdout, `sluice at ${ua}/metrics`, 'status shows the first');
    t.match(st.stdout, `sluice at ${ub}/metrics`, 'and the second');
    // An explicitly given port that is taken still fails, naming it.
    const taken = Number(new URL(ua!).port);
    const dir = await tempMountpoint(t, 'pc');
    const c = await runCli(['mount', `s3://${BUCKET}/p/`, dir, ...common, '--metrics-port', String(taken)], env, 60_000);
    t.not(c.code, 0);
    t.match(c.stderr, `metrics port ${taken} on 127.0.0.1 is already in use`);
    t.equal((await stop(ra)).code, 0);
    t.equal((await stop(rb)).code, 0);
  });
});
