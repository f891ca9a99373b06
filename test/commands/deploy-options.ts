/**
 * The deployment options through the built CLI against the local S3 server:
 * --no-sign-request with no credentials anywhere, --uid/--gid/--file-mode/--dir-mode as
 * the mount shows them, `sluice mount --daemon` (returns once ready; a failure is one line
 * and a nonzero status), and an https:// endpoint on an http port (one line naming it).
 */
import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { mountAt } from '../../src/fuse/mountpoint.js';
import { seedDataset } from '../../src/local/dataset.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { runCli, startCli, waitExit, type RunningCli } from '../helpers/cli.js';
import { tempMountpoint } from '../helpers/fuse.js';

const BUCKET = 'deployopts';
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

t.test('deployment options', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket(BUCKET);
  const objects = await seedDataset(s3, BUCKET, 'p/', { smallFiles: { count: 6, size: 3000, folders: 2 } });
  // No credentials anywhere: not in the environment, no profile files, no IMDS.
  const anonymous: NodeJS.ProcessEnv = { ...process.env, AWS_REGION: 'us-east-1', AWS_SHARED_CREDENTIALS_FILE: '/nonexistent', AWS_CONFIG_FILE: '/nonexistent', AWS_EC2_METADATA_DISABLED: 'true' };
  for (const k of ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_PROFILE', 'AWS_CONTAINER_CREDENTIALS_FULL_URI', 'AWS_CONTAINER_CREDENTIALS_RELATIVE_URI', 'AWS_WEB_IDENTITY_TOKEN_FILE']) delete anonymous[k];
  const signed: NodeJS.ProcessEnv = { ...anonymous, AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey };
  const common = ['--endpoint', s3.endpoint, '--path-style', '--metrics-port', '0', '--cache-size', '16MiB'];
  const uri = `s3://${BUCKET}/p/`;
  const started: RunningCli[] = [];
  t.teardown(() => { for (const r of started) r.child.kill('SIGKILL'); });
  const allMatch = async (dir: string) => {
    for (const o of objects) if (sha(await readFile(path.join(dir, o.key.slice(2)))) !== o.sha256) return false;
    return true;
  };

  t.test('--no-sign-request reads a public bucket with no credentials at all', async (t) => {
    const dir = await tempMountpoint(t, 'nosign');
    const without = await runCli(['mount', uri, dir, ...common, '--metrics-port', '-1'], anonymous);
    t.equal(without.code, 2, 'without it: no credentials is a user error');
    t.match(without.stderr, /^sluice: .*credentials/im);
    const r = await startCli(['mount', uri, dir, ...common, '--no-sign-request'], anonymous);
    started.push(r);
    t.ok(await allMatch(dir), 'every file matches its source, read unsigned');
    r.child.kill('SIGTERM');
    t.equal((await waitExit(r)).code, 0);
  });

  t.test('--uid, --gid, --file-mode, --dir-mode are what the mount shows', async (t) => {
    const dir = await tempMountpoint(t, 'owner');
    const r = await startCli(['mount', uri, dir, ...common, '--uid', '1234', '--gid', '4321', '--file-mode', '0440', '--dir-mode', '0550', '--allow-other'], signed);
    started.push(r);
    const file = path.join(dir, objects[0]!.key.slice(2));
    const fst = await stat(file);
    t.equal(fst.uid, 1234);
    t.equal(fst.gid, 4321);
    t.equal(fst.mode & 0o7777, 0o440);
    const dst = await stat(path.dirname(file));
    t.equal(dst.mode & 0o7777, 0o550);
    t.equal(dst.uid, 1234);
    t.ok(await allMatch(dir), 'root still reads every file');
    r.child.kill('SIGTERM');
    t.equal((await waitExit(r)).code, 0);
    const both = await runCli(['mount', uri, dir, ...common, '--allow-other', '--allow-root'], signed);
    t.equal(both.code, 2);
    t.match(both.stderr, /^sluice: --allow-other and --allow-root cannot be combined\. .+\n$/);
  });

  t.test('mount --daemon returns once the mount is ready; a failure is one line and a nonzero status', async (t) => {
    const dir = await tempMountpoint(t, 'daemon');
    const logFile = path.join(path.dirname(dir), `${path.basename(dir)}.log`);
    const r = await runCli(['mount', uri, dir, ...common, '--daemon', '--log-file', logFile], signed, 90_000);
    t.equal(r.code, 0, `exit status 0 once mounted (${r.stderr})`);
    t.equal(r.stdout, `ready ${dir}\n`);
    const pid = Number(/\(pid (\d+)\)/.exec(r.stderr)?.[1]);
    t.ok(pid > 0, 'names the background process');
    t.teardown(() => { try { process.kill(pid, 'SIGKILL'); } catch { /* already gone */ } });
    t.equal((await mountAt(dir))?.fstype, 'fuse.sluice', 'still mounted after the command returned');
    t.ok(await allMatch(dir), 'served by the background process');
    process.kill(pid, 'SIGTERM');
    for (let i = 0; i < 100 && (await mountAt(dir)); i++) await new Promise((res) => setTimeout(res, 100));
    t.equal(await mountAt(dir), undefined, 'SIGTERM to the background process unmounts');
    t.match(await readFile(logFile, 'utf8'), /"msg":"mounted"/, 'its logs went to --log-file');

    const bad = await runCli(['mount', `s3://no-such-bucket-here/p/`, dir, ...common, '--daemon', '--log-file', logFile], signed, 90_000);
    t.equal(bad.code, 2, 'a bucket that does not exist: the status of the failed mount');
    t.match(bad.stderr, /^sluice: .*no-such-bucket-here.*\n$/, 'its one error line');
    t.equal(bad.stdout, '');
  });

  t.test('an https:// endpoint on a plain-HTTP port: one line naming the mismatch', async (t) => {
    const dir = await tempMountpoint(t, 'tls');
    const r = await runCli(['mount', uri, dir, '--endpoint', s3.endpoint.replace('http:', 'https:'), '--path-style', '--metrics-port', '-1'], signed);
    t.equal(r.code, 2);
    t.match(r.stderr, /^sluice: the endpoint https:\/\/127\.0\.0\.1:\d+ speaks plain HTTP, not HTTPS .*Use http:\/\/ in --endpoint \(http:\/\/127\.0\.0\.1:\d+\)\n$/);
    t.notMatch(r.stderr, /SSL routines|\n.+\n/, 'no OpenSSL text, no stack');
  });
});
