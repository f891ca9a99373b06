/**
 * Issue 6, item 7: security.
 *  - Credentials never appear in logs, error messages or metrics: requests signed with a
 *    recognisable fake key id, secret and session token fail against the local server
 *    (in-process: the error, its cause chain, a log line of it and /metrics text; and
 *    the CLI at --log-level trace: everything it prints).
 *  - The metrics endpoint binds 127.0.0.1 unless told otherwise (checked in /proc/net/tcp).
 *  - The mount is read-only, and allow_other is set only with --allow-other (/proc/mounts).
 * Needs a build (dist/).
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import t from 'tap';
import { OPTIONS } from '../../src/config/options.js';
import { SluiceError } from '../../src/errors.js';
import { mountAt } from '../../src/fuse/mountpoint.js';
import { seedDataset } from '../../src/local/dataset.js';
import { startLocalS3, type LocalS3 } from '../../src/local/s3-server.js';
import { createLogger } from '../../src/log.js';
import { registry } from '../../src/metrics/metrics.js';
import { createObjectClient } from '../../src/s3/s3-client.js';
import { runCli, startCli, waitExit, type RunningCli } from '../helpers/cli.js';
import { tempMountpoint } from '../helpers/fuse.js';

const FAKE = {
  accessKeyId: 'AKIASLUICEFAKE7KEY9Z',
  secretAccessKey: 'Sl1ceFakeSecret/Key0123456789abcdefGHIJK',
  sessionToken: 'IQoJb3JpZ2luX2VjEFAKESLUICESESSIONTOKENxYzAbCdEfGh1234567890SluiceSessionTokenTail',
};
const NEEDLES = [FAKE.accessKeyId, FAKE.secretAccessKey, FAKE.sessionToken, 'SLUICEFAKE7KEY9Z', 'Sl1ceFakeSecret', 'FAKESLUICESESSIONTOKEN'];

function leaks(text: string): string[] {
  return NEEDLES.filter((n) => text.includes(n));
}

/** Every message, hint and stack down an error's cause chain, as text. */
function errorText(err: unknown): string {
  const out: string[] = [];
  for (let e = err as { message?: unknown; stack?: unknown; hint?: unknown; cause?: unknown } | undefined, i = 0; e && i < 8; e = e.cause as typeof e, i++) {
    out.push(String(e.message), String(e.stack), String(e.hint ?? ''));
    try { out.push(JSON.stringify(e)); } catch { /* circular */ }
  }
  return out.join('\n');
}

let s3: LocalS3;
t.before(async () => {
  s3 = await startLocalS3();
  await s3.createBucket('sec');
  await seedDataset(s3, 'sec', 'p/', { smallFiles: { count: 3, size: 1000, folders: 1 }, seed: 2 });
});
t.teardown(() => s3?.stop());

t.test('a request with fake credentials fails without leaking them into errors, logs or metrics', async (t) => {
  t.equal(FAKE.secretAccessKey.length, 40, 'the fake secret has the shape of a real one');
  const client = createObjectClient({ bucket: 'sec', endpoint: s3.endpoint, region: 'us-east-1', pathStyle: true, credentials: FAKE, maxAttempts: 2 });
  t.teardown(() => client.close());
  const errors: unknown[] = [];
  errors.push(await client.getRange('p/small/d00/s00/file-00000.bin', 0, 10, '"x"').catch((e: unknown) => e));
  errors.push(await client.head('p/small/d00/s00/file-00000.bin').catch((e: unknown) => e));
  const listing = (async () => { for await (const _ of client.list('p/')) { /* fails first */ } })();
  errors.push(await listing.catch((e: unknown) => e));
  let lines = '';
  const sink = new Writable({ write(chunk, _enc, cb) { lines += chunk.toString(); cb(); } });
  const logger = createLogger(sink, 'trace');
  for (const err of errors) {
    t.type(err, SluiceError, `typed: ${(err as Error).message}`);
    t.same(leaks(errorText(err)), [], `no credential in the error or its causes: ${(err as SluiceError).code}`);
    logger.error({ err, credentials: FAKE, env: { AWS_SECRET_ACCESS_KEY: FAKE.secretAccessKey } }, `request failed: ${(err as Error).message}`);
  }
  logger.info(`free text with ${FAKE.accessKeyId} and ${FAKE.secretAccessKey}`);
  t.ok(lines.length > 0, 'the logger wrote');
  t.same(leaks(lines), [], 'no credential in the log lines (errors, objects, free text)');
  t.same(leaks(await registry.metrics()), [], 'no credential in /metrics text');
});

t.test('the CLI at trace level with fake credentials: one error line, no credential anywhere', async (t) => {
  const dir = await tempMountpoint(t, 'sec');
  const env: NodeJS.ProcessEnv = {
    ...process.env, NODE_NO_WARNINGS: '1', AWS_ACCESS_KEY_ID: FAKE.accessKeyId, AWS_SECRET_ACCESS_KEY: FAKE.secretAccessKey,
    AWS_SESSION_TOKEN: FAKE.sessionToken, AWS_REGION: 'us-east-1',
  };
  delete env.AWS_PROFILE;
  const mount = await runCli(['mount', 's3://sec/p/', dir, '--endpoint', s3.endpoint, '--path-style', '--metrics-port', '0', '--log-level', 'trace', '--max-attempts', '2'], env);
  t.not(mount.code, 0, 'the mount fails');
  t.match(mount.stderr, /credentials/i, 'and says the credentials were refused');
  t.same(leaks(mount.stdout + mount.stderr), [], 'sluice mount printed no credential');
  const root = await mkdtemp(path.join(os.tmpdir(), 'sluice-test-sec-root-'));
  t.teardown(() => rm(root, { recursive: true, force: true }));
  const run = await runCli(['run', '--channel', 'train=s3://sec/p/', '--root', root, '--endpoint', s3.endpoint, '--path-style', '--metrics-port=-1',
    '--log-level', 'trace', '--max-attempts', '2', '--', process.execPath, '-e', '0'], env);
  t.not(run.code, 0, 'sluice run fails');
  t.same(leaks(run.stdout + run.stderr), [], 'sluice run printed no credential');
});

/** Local addresses in LISTEN state of /proc/<pid>/net/tcp and tcp6, as hex "ADDR:PORT". */
async function listening(pid: number): Promise<string[]> {
  const out: string[] = [];
  for (const f of ['tcp', 'tcp6']) {
    const text = await readFile(`/proc/${pid}/net/${f}`, 'utf8').catch(() => '');
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols[3] === '0A') out.push(cols[1]!);
    }
  }
  return out;
}

t.test('metrics bind 127.0.0.1 by default; the mount is ro, allow_other only when asked', async (t) => {
  t.equal(OPTIONS.metricsHost.default, '127.0.0.1', 'the default in the options table');
  const env: NodeJS.ProcessEnv = { ...process.env, NODE_NO_WARNINGS: '1', AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_REGION: 'us-east-1', SLUICE_LOG_LEVEL: 'info' };
  delete env.SLUICE_METRICS_HOST;
  const started: RunningCli[] = [];
  t.teardown(() => { for (const r of started) r.child.kill('SIGKILL'); });
  const common = ['--endpoint', s3.endpoint, '--path-style', '--metrics-port', '0', '--cache-size', '8MiB', '--part-size', '1MiB'];
  const plainDir = await tempMountpoint(t, 'sec-plain');
  const otherDir = await tempMountpoint(t, 'sec-other');
  const plain = await startCli(['mount', 's3://sec/p/', plainDir, ...common], env);
  started.push(plain);
  const other = await startCli(['mount', 's3://sec/p/', otherDir, ...common, '--allow-other'], env);
  started.push(other);

  const port = Number(/"url":"http:\/\/127\.0\.0\.1:(\d+)\/metrics"/.exec(plain.stderr())?.[1]);
  t.ok(port > 0, 'the metrics URL logged is on 127.0.0.1');
  const portHex = port.toString(16).toUpperCase().padStart(4, '0');
  const socks = (await listening(plain.child.pid!)).filter((a) => a.endsWith(`:${portHex}`));
  t.same(socks, ['0100007F:' + portHex], 'the only listener on that port is 127.0.0.1');

  const mounts = await readFile('/proc/mounts', 'utf8');
  const optsOf = (dir: string) => mounts.split('\n').find((l) => l.split(' ')[1] === dir)?.split(' ')[3]?.split(',') ?? [];
  t.ok(optsOf(plainDir).includes('ro'), `read-only: ${optsOf(plainDir).join(',')}`);
  t.notOk(optsOf(plainDir).includes('allow_other'), 'no allow_other unless asked');
  t.ok(optsOf(otherDir).includes('ro'), 'read-only with --allow-other too');
  t.ok(optsOf(otherDir).includes('allow_other'), 'allow_other with --allow-other');
  for (const r of started) r.child.kill('SIGTERM');
  for (const r of started) t.equal((await waitExit(r)).code, 0);
  t.equal(await mountAt(plainDir), undefined);
  t.equal(await mountAt(otherDir), undefined);
});
