/**
 * Issue 45's smaller items, each as the CLI is run: an empty prefix mounted, /dev/fuse not
 * open to a non-root user, --input-mode in lower case, a profile that does not exist,
 * --cache-dir under a missing parent, snapshot progress, `sluice run` without `--`, and a
 * channel that changed mode on the same --root.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { exhausted } from '../../src/s3/s3-errors.js';
import { seedDataset } from '../../src/local/dataset.js';
import { startLocalS3, type LocalS3 } from '../../src/local/s3-server.js';
import { CLI, runCli, startCli, waitExit, type RunningCli } from '../helpers/cli.js';
import { startFaultProxy } from '../helpers/fault-proxy.js';
import { tempMountpoint } from '../helpers/fuse.js';
import { runEnv, s3Flags, tmpRoot } from '../helpers/run.js';
import { skip } from '../helpers/tap.js';

const BUCKET = 'small45';
/** An unprivileged user for the /dev/fuse check (nobody on Debian and Ubuntu). */
const NOBODY = 65534;

let s3: LocalS3;
t.before(async () => {
  s3 = await startLocalS3();
  await s3.createBucket(BUCKET);
  await seedDataset(s3, BUCKET, 'd/', { smallFiles: { count: 3, size: 2000, folders: 1 } });
});
t.teardown(() => s3?.stop());

const env = (): NodeJS.ProcessEnv => {
  const e: NodeJS.ProcessEnv = { ...runEnv(), SLUICE_LOG_LEVEL: 'info', SLUICE_LOG_FORMAT: 'json' };
  for (const k of ['AWS_PROFILE', 'SLUICE_CACHE_DIR', 'SLUICE_INPUT_MODE', 'SLUICE_PROGRESS']) delete e[k];
  return e;
};
const oneLine = (s: string) => s.trim().split('\n').filter((l) => l.startsWith('sluice:'));

t.test('mounting a prefix with no object warns', async (t) => {
  const dir = await tempMountpoint(t, 'empty');
  const started: RunningCli[] = [];
  t.teardown(() => { for (const r of started) r.child.kill('SIGKILL'); });
  const r = await startCli(['mount', `s3://${BUCKET}/nothing-here/`, dir, ...s3Flags(s3)], env());
  started.push(r);
  const deadline = Date.now() + 20_000;
  while (!/holds no object/.test(r.stderr()) && Date.now() < deadline) await new Promise((res) => setTimeout(res, 100));
  t.match(r.stderr(), /s3:\/\/small45\/nothing-here\/ holds no object: .* is an empty folder/);
  r.child.kill('SIGTERM');
  t.equal((await waitExit(r)).code, 0);
});

t.test('a non-root user without access to /dev/fuse is told so in one line', async (t) => {
  if (process.getuid?.() !== 0) return skip(t, 'needs root to run a child as another user');
  const mode = (await import('node:fs')).statSync('/dev/fuse', { throwIfNoEntry: false })?.mode;
  if (mode === undefined || (mode & 0o006) === 0o006) return skip(t, '/dev/fuse is open to everyone here');
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-45-nobody-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const child = spawn('setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', process.execPath, CLI, 'mount', `s3://${BUCKET}/d/`, dir, ...s3Flags(s3)],
    // Without tap's hooks (NODE_OPTIONS, TAP*): they would write to the worktree as that user.
    { env: Object.fromEntries(Object.entries({ ...env(), HOME: dir, SLUICE_LOG_LEVEL: 'warn' }).filter(([k]) => !/^(NODE_OPTIONS|_?TAP)/i.test(k))), cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.on('data', (b: Buffer) => { err += b; });
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
  clearTimeout(timer);
  t.not(code, 0);
  t.match(err, /FUSE is not available to user 65534: \/dev\/fuse \(mode 0\d+\) is not readable and writable by it/);
  // (tap's own exit hook may add its complaint about writing .tap/ as that user: not sluice's output.)
  t.equal(oneLine(err).length, 1, 'one line');
  t.notMatch(err, /libfuse|fuse: |dist\/cli\.js/, "no raw libfuse line, no stack of sluice's");
});

t.test('--input-mode pipe is Pipe, as mode=pipe is', async (t) => {
  const root = await tmpRoot(t);
  const r = await runCli(['run', '--root', root, '--input-mode', 'pipe', '--channel', `train=s3://${BUCKET}/d/`, ...s3Flags(s3), '--', 'true'], env(), 120_000);
  t.equal(r.code, 0, r.stderr.slice(-800));
  const cfg = JSON.parse(await readFile(path.join(root, 'input/config/inputdataconfig.json'), 'utf8')) as Record<string, { TrainingInputMode: string }>;
  t.equal(cfg.train?.TrainingInputMode, 'Pipe');
});

t.test('AWS_PROFILE naming no profile says so, and where it looked', async (t) => {
  const home = await mkdtemp(path.join(os.tmpdir(), 'sluice-45-home-'));
  t.teardown(() => rm(home, { recursive: true, force: true }));
  await (await import('node:fs/promises')).mkdir(path.join(home, '.aws'));
  await writeFile(path.join(home, '.aws', 'config'), '[default]\nregion = us-east-1\n[profile team]\nregion = eu-west-1\n');
  const e: NodeJS.ProcessEnv = { ...env(), HOME: home, AWS_PROFILE: 'nosuch' };
  delete e.AWS_CONFIG_FILE;
  delete e.AWS_SHARED_CREDENTIALS_FILE;
  const r = await runCli(['snapshot', `s3://${BUCKET}/d/`, path.join(home, 'x.snap'), '--endpoint', s3.endpoint], e, 60_000);
  t.not(r.code, 0);
  t.match(r.stderr, `the AWS profile "nosuch" (from AWS_PROFILE) does not exist in ${home}/.aws/config or ${home}/.aws/credentials`);
  t.match(r.stderr, /Profiles there: default, team/);
  t.equal(oneLine(r.stderr).length, 1);
});

t.test('--cache-dir under a missing parent is refused, and nothing is created', async (t) => {
  const base = path.join(os.tmpdir(), `sluice-45-nx-${process.pid}`);
  t.teardown(() => rm(base, { recursive: true, force: true }));
  const dir = await tempMountpoint(t, 'nx');
  const r = await runCli(['mount', `s3://${BUCKET}/d/`, dir, ...s3Flags(s3), '--cache-dir', path.join(base, 'a', 'b')], env(), 60_000);
  t.not(r.code, 0);
  t.match(r.stderr, `--cache-dir ${base}/a/b: its parent folder ${base}/a does not exist`);
  t.notOk(existsSync(base), 'no folder was created');
});

t.test('sluice snapshot shows progress on a slow listing (a log line without a terminal)', async (t) => {
  const proxy = await startFaultProxy(s3.port);
  t.teardown(() => proxy.close());
  // Each request waits 3 s: the listing (versioning, then a page) outlasts one 5 s progress interval.
  proxy.set({ latencyMs: 3000 });
  const out = path.join(os.tmpdir(), `sluice-45-${process.pid}-progress.snap`);
  t.teardown(() => rm(out, { force: true }));
  const r = await runCli(['snapshot', `s3://${BUCKET}/d/`, out, '--endpoint', proxy.endpoint, '--path-style'], env(), 90_000);
  t.equal(r.code, 0, r.stderr.slice(-500));
  t.match(r.stderr, /"msg":"listing s3:\/\/small45\/d\/: \d+ objects, [\d.]+ MB in \d+ s"/);
});

t.test('sluice run with the training command not after -- says where -- goes', async (t) => {
  const r = await runCli(['run', '--channel', `train=s3://${BUCKET}/d/`, '--path-style', 'python3', '-c', 'print(1)'], env(), 30_000);
  t.not(r.code, 0);
  t.match(r.stderr, /unexpected argument "python3"\. Put the training command after --/);
  t.match(r.stderr, /-- python3 -c print\(1\)/);
  t.equal(oneLine(r.stderr).length, 1);
});

t.test('a channel that was File and is now FastFile on the same --root: the error says what happened', async (t) => {
  const root = await tmpRoot(t);
  const first = await runCli(['run', '--root', root, '--channel', `train=s3://${BUCKET}/d/,mode=File`, ...s3Flags(s3), '--', 'true'], env(), 120_000);
  t.equal(first.code, 0, first.stderr.slice(-500));
  const second = await runCli(['run', '--root', root, '--channel', `train=s3://${BUCKET}/d/,mode=FastFile`, ...s3Flags(s3), '--', 'true'], env(), 120_000);
  t.not(second.code, 0);
  t.match(second.stderr, /channel "train" is FastFile in this run, but .*input\/data\/train holds \d+ entr(y|ies) that an earlier run on this --root left/);
  t.notMatch(second.stderr, /Choose an empty folder/);
});

t.test('a DNS failure of bucket.host hints --path-style', async (t) => {
  const dns = Object.assign(new Error('getaddrinfo ENOTFOUND bkt.store.example'), { code: 'ENOTFOUND' });
  const virtual = exhausted('unreachable', 3, dns, { operation: 'list', bucket: 'bkt', endpoint: 'https://store.example', virtualHosted: true }, 1000);
  t.match(virtual.oneLine(), /cannot reach S3 endpoint https:\/\/store\.example.*bkt\.store\.example does not resolve.*--path-style/);
  const path = exhausted('unreachable', 3, dns, { operation: 'list', bucket: 'bkt', endpoint: 'https://store.example', virtualHosted: false }, 1000);
  t.notMatch(path.oneLine(), /--path-style/, 'not when the bucket was not in the host name');
});
