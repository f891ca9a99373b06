/**
 * HTTPS end to end: the local S3 server behind a TLS-terminating proxy (the bench's
 * latency proxy with no delay) whose certificate is signed by a CA made for this test.
 *  - With the CA (S3ClientOptions.ca, --ca-bundle, AWS_CA_BUNDLE): listing, HEAD and
 *    ranged GETs work, and the bytes read through a real mount are the source's.
 *  - Without it: one typed error (SLUICE_TLS_CERTIFICATE), not retried, whose one line
 *    names the fix; the CLI exits non-zero with that one line and mounts nothing.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { skip } from '../helpers/tap.js';
import { startLatencyProxy } from '../../src/bench/latency-proxy.js';
import { createRunCa, hasOpenssl } from '../../src/bench/tls-ca.js';
import { TlsCertificateError } from '../../src/errors.js';
import { mountAt } from '../../src/fuse/mountpoint.js';
import { seedDataset } from '../../src/local/dataset.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { createObjectClient, readCaBundle } from '../../src/s3/s3-client.js';
import { runCli, startCli, waitExit } from '../helpers/cli.js';
import { tempMountpoint } from '../helpers/fuse.js';

const BUCKET = 'tls';
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

t.test('S3 over HTTPS with a CA made for the test', async (t) => {
  if (!(await hasOpenssl())) { skip(t, 'the openssl command is not installed'); return; }
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-test-tls-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const ca = await createRunCa(dir);
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket(BUCKET);
  const objects = await seedDataset(s3, BUCKET, 'p/', { smallFiles: { count: 6, size: 10_000, folders: 1 }, largeFiles: { count: 1, size: 3 * 1024 * 1024 } });
  const proxy = await startLatencyProxy({ name: 'tls', ttfbMs: 0, bytesPerSec: 0, targetPort: s3.port, tls: { key: ca.key, cert: ca.cert } });
  t.teardown(() => proxy.close());
  t.match(proxy.endpoint, /^https:\/\/127\.0\.0\.1:\d+$/);
  const base = { bucket: BUCKET, endpoint: proxy.endpoint, region: 'us-east-1', pathStyle: true, credentials: s3.credentials, maxAttempts: 3 };
  const large = objects.find((o) => o.size > 1024 * 1024)!;

  t.test('with the CA: listing, HEAD, ranged GETs and streams', async (t) => {
    const c = createObjectClient({ ...base, ca: readCaBundle(ca.caFile) });
    t.teardown(() => c.close());
    const keys: string[] = [];
    for await (const o of c.list('p/')) keys.push(o.key);
    t.same(keys.sort(), objects.map((o) => o.key).sort(), 'listed over https');
    const info = await c.head(large.key);
    t.equal(info.size, large.size);
    const whole = await c.getRange(large.key, 0, large.size, info.etag);
    t.equal(sha(whole), large.sha256, 'ranged GET bytes');
    const parts: Buffer[] = [];
    for await (const b of c.getStream(large.key, info.etag, { size: large.size })) parts.push(b);
    t.equal(sha(Buffer.concat(parts)), large.sha256, 'streamed bytes');
  });

  t.test('without the CA: a typed error naming the fix, for the SDK and the data path', async (t) => {
    const c = createObjectClient(base);
    t.teardown(() => c.close());
    const head = await c.head(large.key).then(() => undefined, (e: unknown) => e);
    t.ok(head instanceof TlsCertificateError, `HEAD: ${String(head)}`);
    t.equal((head as TlsCertificateError).code, 'SLUICE_TLS_CERTIFICATE');
    t.match((head as TlsCertificateError).oneLine(), /--ca-bundle FILE \(or AWS_CA_BUNDLE=FILE\)/);
    const get = await c.getRange(large.key, 0, 1024, '"x"').then(() => undefined, (e: unknown) => e);
    t.ok(get instanceof TlsCertificateError, `GET: ${String(get)}`);
    const other = createObjectClient({ ...base, ca: readCaBundle(ca.caFile).replace(/[\s\S]*/, await otherCa(dir)) });
    t.teardown(() => other.close());
    const wrong = await other.head(large.key).then(() => undefined, (e: unknown) => e);
    t.ok(wrong instanceof TlsCertificateError, `with another CA: ${String(wrong)}`);
  });

  t.test('sluice mount: AWS_CA_BUNDLE and --ca-bundle work; no CA or a bad file is one line', async (t) => {
    const env: NodeJS.ProcessEnv = {
      ...process.env, AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey,
      AWS_REGION: 'us-east-1', SLUICE_LOG_LEVEL: 'warn',
    };
    delete env.AWS_PROFILE;
    delete env.AWS_SESSION_TOKEN;
    delete env.AWS_CA_BUNDLE;
    const common = ['--endpoint', proxy.endpoint, '--path-style', '--metrics-port', '0', '--cache-size', '16MiB', '--part-size', '1MiB', '--max-prefetch', '2MiB', '--max-attempts', '2'];
    const uri = `s3://${BUCKET}/p/`;
    for (const [how, extra, e] of [['AWS_CA_BUNDLE', [], { ...env, AWS_CA_BUNDLE: ca.caFile }], ['--ca-bundle', ['--ca-bundle', ca.caFile], env]] as const) {
      const mnt = await tempMountpoint(t, 'tls');
      const r = await startCli(['mount', uri, mnt, ...common, ...extra], e);
      try {
        for (const o of objects) t.equal(sha(await readFile(path.join(mnt, o.key.slice(2)))), o.sha256, `${how}: ${o.key} exact`);
      } finally {
        r.child.kill('SIGTERM');
        t.equal((await waitExit(r)).code, 0, `${how}: clean exit`);
      }
    }
    const empty = await tempMountpoint(t, 'tls-bad');
    const notPem = path.join(dir, 'not-a-ca.txt');
    await writeFile(notPem, 'hello\n');
    const cases: Array<[string, string[], NodeJS.ProcessEnv, RegExp]> = [
      ['no CA', [], env, /TLS certificate of S3 endpoint https:\/\/127\.0\.0\.1:\d+ was refused \(\w+\)\. Pass the CA certificate that signed it with --ca-bundle FILE/],
      ['missing file', ['--ca-bundle', path.join(dir, 'nope.pem')], env, /cannot read --ca-bundle .*nope\.pem \(ENOENT\)/],
      ['not PEM', [], { ...env, AWS_CA_BUNDLE: notPem }, /--ca-bundle .*not-a-ca\.txt holds no PEM certificate/],
    ];
    for (const [name, extra, e, want] of cases) {
      const r = await runCli(['mount', uri, empty, ...common, ...extra], e);
      const lines = r.stderr.trim().split('\n').filter((l) => !l.startsWith('{'));
      t.not(r.code, 0, `${name}: nonzero exit`);
      t.equal(lines.length, 1, `${name}: one line (${r.stderr.trim()})`);
      t.match(lines[0] ?? '', want, `${name}: names the problem and the fix`);
    }
    t.same(await mountAt(empty), undefined, 'nothing left mounted');
  });
});

/** A second, unrelated CA: trusting it instead of the right one must fail too. */
async function otherCa(dir: string): Promise<string> {
  const sub = await mkdtemp(path.join(dir, 'other-'));
  const other = await createRunCa(sub);
  return readFile(other.caFile, 'utf8');
}
