/**
 * `sluice mount` as a user runs it: the built CLI in a child process against the
 * local S3 server. Lifecycle (ready line, ready file, metrics, SIGTERM, kill -9
 * recovery) and bad input (one line, nonzero exit, no stack).
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { mountAt } from '../../src/fuse/mountpoint.js';
import { seedDataset } from '../../src/local/dataset.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { runCli, startCli, waitExit, type RunningCli } from '../helpers/cli.js';
import { tempMountpoint } from '../helpers/fuse.js';

const BUCKET = 'mountcmd';
/** Bad-input cases run this many CLI processes at once. */
const BAD_INPUT_PARALLEL = 3;
/** Bound on waiting for an exit that should be prompt: a hang is a failure, not a wait. */
const EXIT_BOUND_MS = 20_000;
const fusermount = (dir: string) => new Promise<boolean>((resolve) => execFile('fusermount', ['-u', dir], (err) => resolve(!err)));
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

t.test('sluice mount', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket(BUCKET);
  const objects = await seedDataset(s3, BUCKET, 'p/', { smallFiles: { count: 20, size: 5000, folders: 2 }, largeFiles: { count: 1, size: 3 * 1024 * 1024 } });
  const env: NodeJS.ProcessEnv = {
    ...process.env, AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey,
    AWS_REGION: 'us-east-1', SLUICE_LOG_LEVEL: 'info',
  };
  delete env.AWS_PROFILE;
  delete env.AWS_SESSION_TOKEN;
  const common = ['--endpoint', s3.endpoint, '--path-style', '--metrics-port', '0', '--cache-size', '16MiB', '--part-size', '1MiB', '--max-prefetch', '2MiB'];
  const uri = `s3://${BUCKET}/p/`;
  const started: RunningCli[] = [];
  t.teardown(() => { for (const r of started) r.child.kill('SIGKILL'); });
  const start = async (dir: string, extra: string[] = []) => {
    const r = await startCli(['mount', uri, dir, ...common, ...extra], env);
    started.push(r);
    return r;
  };
  const allMatch = async (dir: string) => {
    for (const o of objects) if (sha(await readFile(path.join(dir, o.key.slice(2)))) !== o.sha256) return false;
    return true;
  };

  t.test('ready line, ready file, metrics; SIGTERM unmounts cleanly', async (t) => {
    const dir = await tempMountpoint(t, 'cmd');
    const readyFile = path.join(path.dirname(dir), `${path.basename(dir)}.ready`);
    t.teardown(() => rm(readyFile, { force: true }));
    const r = await start(dir, ['--ready-file', readyFile]);
    t.equal(r.stdout(), `ready ${dir}\n`, 'exactly one line on stdout');
    t.equal(await readFile(readyFile, 'utf8'), `${dir}\n`, 'ready file written');
    t.equal((await mountAt(dir))?.fstype, 'fuse.sluice', 'mounted');
    t.ok(await allMatch(dir), 'every file matches its source');
    const url = /"url":"(http:\/\/127\.0\.0\.1:\d+\/metrics)"/.exec(r.stderr())?.[1];
    t.ok(url, 'logs where /metrics is');
    if (url) {
      const text = await (await fetch(url)).text();
      t.match(text, /sluice_fuse_operations_total\{op="read",result="ok"\} [1-9]/, '/metrics counts the reads');
      t.equal((await fetch(url.replace('/metrics', '/readyz'))).status, 200, '/readyz is ready');
    }
    r.child.kill('SIGTERM');
    const { code, signal } = await waitExit(r);
    t.equal(code, 0, `exit code 0 (signal ${signal})`);
    t.equal(await mountAt(dir), undefined, 'unmounted');
    t.notOk(existsSync(readyFile), 'ready file removed');
    t.equal(r.stdout(), `ready ${dir}\n`, 'still exactly one line on stdout');
  });

  t.test('a mount point left by kill -9 is recovered by the next sluice mount', async (t) => {
    const dir = await tempMountpoint(t, 'kill9');
    const first = await start(dir);
    first.child.kill('SIGKILL');
    await waitExit(first);
    await t.rejects(readdir(dir), { code: 'ENOTCONN' }, 'the stale mount says "Transport endpoint is not connected"');
    const second = await start(dir);
    t.ok(await allMatch(dir), 'the new mount serves correct bytes');
    second.child.kill('SIGTERM');
    t.equal((await waitExit(second)).code, 0);
    t.equal(await mountAt(dir), undefined, 'unmounted');
  });

  t.test('a mount removed from outside (fusermount -u), then one SIGTERM: sluice exits at once', async (t) => {
    const dir = await tempMountpoint(t, 'extumount');
    // No mount watch: only the signal can end it (the path Kubernetes takes: preStop
    // unmounts, then SIGTERM).
    const r = await startCli(['mount', uri, dir, ...common], { ...env, SLUICE_MOUNT_WATCH_MS: '0' });
    t.ok(await allMatch(dir), 'serves correct bytes');
    t.ok(await fusermount(dir), 'fusermount -u succeeds');
    t.equal(await mountAt(dir), undefined, 'the mount is gone');
    r.child.kill('SIGTERM');
    // A hang is caught by the bound (before the fix, it waited for a second signal).
    const { code, signal } = await waitExit(r, EXIT_BOUND_MS);
    t.equal(signal, null, 'not killed');
    t.equal(code, 0, `exit code 0 (${r.stderr().slice(-500)})`);
  });

  t.test('a mount removed from outside: sluice notices and exits on its own', async (t) => {
    const dir = await tempMountpoint(t, 'selfexit');
    const r = await startCli(['mount', uri, dir, ...common], env);
    t.ok(await allMatch(dir), 'serves correct bytes');
    t.ok(await fusermount(dir), 'fusermount -u succeeds');
    const { code, signal } = await waitExit(r, EXIT_BOUND_MS);
    t.equal(signal, null, 'not killed: it exited without a signal');
    t.equal(code, 0, 'exit code 0');
    t.match(r.stderr(), /the mount was removed from outside/, 'says why it stopped');
  });

  t.test('bad input: one line, nonzero exit', async (t) => {
    const base = await mkdtemp(path.join(os.tmpdir(), 'sluice-test-badinput-'));
    t.teardown(() => rm(base, { recursive: true, force: true }));
    const empty = path.join(base, 'empty');
    await mkdir(empty);
    const full = path.join(base, 'full');
    await mkdir(full);
    await writeFile(path.join(full, 'x'), 'x');
    const nothing = path.join(base, 'nothing');
    const bareEnv: NodeJS.ProcessEnv = {
      PATH: process.env.PATH, AWS_EC2_METADATA_DISABLED: 'true',
      AWS_CONFIG_FILE: path.join(base, 'no-config'), AWS_SHARED_CREDENTIALS_FILE: path.join(base, 'no-credentials'),
    };
    const cases: [string, string[], NodeJS.ProcessEnv, RegExp][] = [
      ['missing mount point', [uri, path.join(base, 'missing'), ...common], env, /does not exist.*mkdir -p/],
      ['mount point is a file', [uri, path.join(full, 'x'), ...common], env, /not a directory/],
      ['non-empty mount point', [uri, full, ...common], env, /not empty/],
      ['bad URI', ['http://bucket/p/', empty, ...common], env, /bad S3 URI.*s3:\/\//],
      ['missing bucket', [`s3://no-such-bucket-here/p/`, empty, ...common], env, /no-such-bucket-here.*does not exist/],
      ['missing credentials', [uri, empty, ...common], bareEnv, /credentials/i],
      ['missing /dev/fuse', [uri, empty, ...common], { ...env, SLUICE_DEV_FUSE: nothing }, /--device \/dev\/fuse/],
      ['missing libfuse', [uri, empty, ...common], { ...env, SLUICE_LIBFUSE_PATHS: path.join(nothing, 'libfuse.so.2') }, /apt-get install -y libfuse2/],
      ['one argument only', [uri], env, /takes an S3 URI and a mount point/],
      ['bad option value', [uri, empty, '--part-size', 'lots'], env, /not a size/],
      ['unknown option', [uri, empty, '--frobnicate'], env, /unknown option/],
    ];
    // A few at a time: each is a fresh node process, and the machine is small.
    const results: Awaited<ReturnType<typeof runCli>>[] = [];
    for (let i = 0; i < cases.length; i += BAD_INPUT_PARALLEL) {
      results.push(...await Promise.all(cases.slice(i, i + BAD_INPUT_PARALLEL).map(([, args, e]) => runCli(['mount', ...args], e))));
    }
    cases.forEach(([name, , , want], i) => {
      const r = results[i]!;
      // JSON log lines (the metrics address, at info level) are not the error line.
      const lines = r.stderr.trim().split('\n').filter((l) => !l.startsWith('{'));
      t.not(r.code, 0, `${name}: nonzero exit`);
      t.equal(lines.length, 1, `${name}: one line (${r.stderr.trim()})`);
      t.match(lines[0] ?? '', /^sluice: /, `${name}: prefixed`);
      t.match(lines[0] ?? '', want, `${name}: names the problem`);
      t.equal(r.stdout, '', `${name}: nothing on stdout`);
    });
    t.same(await mountAt(empty), undefined, 'nothing left mounted');
  });

  t.test('--help', async (t) => {
    const r = await runCli(['mount', '--help'], env);
    t.equal(r.code, 0);
    t.match(r.stdout, /Usage: sluice mount s3:\/\/bucket\/prefix\/ \/mnt\/point/);
    t.match(r.stdout, /--read-ahead-kb/);
    t.match(r.stdout, /--ready-file/);
  });
});
