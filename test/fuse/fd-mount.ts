/**
 * Mounting from an already-open /dev/fuse descriptor ("/dev/fd/N"), as a CSI driver or a
 * privileged init helper does for an unprivileged pod: this test opens /dev/fuse, mounts
 * with that descriptor (mount(2) through `mount -i -t fuse.sluice -o fd=3,...`, which calls
 * no helper), then starts `sluice mount s3://... /dev/fd/3` with the descriptor as its fd 3,
 * reads every file through the folder and compares sha256 with the source. Sluice does not
 * unmount a descriptor mount (its maker does): the test unmounts in teardown.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, openSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { mountAt } from '../../src/fuse/mountpoint.js';
import { seedDataset } from '../../src/local/dataset.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { CLI, runCli, startCli, waitExit, type RunningCli } from '../helpers/cli.js';
import { tempMountpoint } from '../helpers/fuse.js';

const BUCKET = 'fdmount';
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** Runs a command with `fd` as its descriptor 3; resolves with its exit code and stderr (bounded in time). */
function runWithFd(cmd: string, args: string[], fd: number, timeoutMs = 60_000): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const c = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe', fd] });
    let stderr = '';
    c.stderr!.on('data', (b: Buffer) => { stderr += b.toString(); });
    const timer = setTimeout(() => c.kill('SIGKILL'), timeoutMs);
    c.on('exit', (code) => { clearTimeout(timer); resolve({ code, stderr }); });
  });
}

/** mount(2) of a FUSE filesystem served through `fd`, as a CSI driver does (-i: no mount.fuse helper). */
async function mountWithFd(fd: number, dir: string): Promise<void> {
  const uid = process.getuid?.() ?? 0;
  const gid = process.getgid?.() ?? 0;
  const r = await runWithFd('mount', ['-i', '-t', 'fuse.sluice', '-o', `ro,nosuid,nodev,fd=3,rootmode=40000,user_id=${uid},group_id=${gid}`, 'sluice', dir], fd);
  if (r.code !== 0) throw new Error(`mount with fd=3 failed: ${r.stderr.trim()}`);
}

t.test('sluice serves a mount made by someone else from its /dev/fuse descriptor', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket(BUCKET);
  const objects = await seedDataset(s3, BUCKET, 'p/', { smallFiles: { count: 12, size: 7000, folders: 2 }, largeFiles: { count: 1, size: 2 * 1024 * 1024 } });
  const env: NodeJS.ProcessEnv = {
    ...process.env, AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey, AWS_REGION: 'us-east-1',
  };
  delete env.AWS_PROFILE;
  const dir = await tempMountpoint(t, 'fd'); // unmounted in teardown whatever happens
  const fuseFd = openSync('/dev/fuse', 'r+');
  let fdOpen = true;
  t.teardown(() => { if (fdOpen) closeSync(fuseFd); });

  await mountWithFd(fuseFd, dir);
  t.equal((await mountAt(dir))?.fstype, 'fuse.sluice', 'mounted by the "helper" with fd=3, before sluice starts');

  const started: RunningCli[] = [];
  t.teardown(() => { for (const r of started) r.child.kill('SIGKILL'); });
  const r = await startCli(['mount', `s3://${BUCKET}/p/`, '/dev/fd/3', '--endpoint', s3.endpoint, '--path-style', '--metrics-port', '0', '--cache-size', '16MiB'],
    env, /^ready .+$/m, 90_000, [fuseFd]);
  started.push(r);
  // The helper's copy of the descriptor is no longer needed: sluice holds its own.
  closeSync(fuseFd);
  fdOpen = false;
  t.equal(r.stdout(), 'ready /dev/fd/3\n', 'ready once the kernel INIT was answered');

  t.same((await readdir(dir)).sort(), [...new Set(objects.map((o) => o.key.slice(2).split('/')[0]!))].sort(), 'the listing shows through the folder');
  for (const o of objects) t.equal(sha(await readFile(path.join(dir, o.key.slice(2)))), o.sha256, `${o.key} matches its source`);

  r.child.kill('SIGTERM');
  const { code } = await waitExit(r);
  t.equal(code, 0, 'exits 0 on SIGTERM');
  t.ok(await mountAt(dir), 'the mount stays: it belongs to whoever made it (teardown unmounts it)');
  await t.rejects(readdir(dir), { code: 'ENOTCONN' }, 'with its server gone it answers ENOTCONN until unmounted');
});

t.test('a /dev/fd/N that is not an open /dev/fuse descriptor: one line with the fix', async (t) => {
  const notOpen = await runCli(['mount', 's3://some-bucket/p/', '/dev/fd/57', '--metrics-port', '-1']);
  t.equal(notOpen.code, 2);
  t.match(notOpen.stderr, /^sluice: \/dev\/fd\/57 is not an open file descriptor of this process\. .+\n$/);
  const devNull = openSync('/dev/null', 'r');
  t.teardown(() => closeSync(devNull));
  const wrong = await runWithFd(process.execPath, [CLI, 'mount', 's3://some-bucket/p/', '/dev/fd/3', '--metrics-port', '-1'], devNull);
  t.equal(wrong.code, 2);
  t.match(wrong.stderr, /^sluice: \/dev\/fd\/3 is not a \/dev\/fuse descriptor\. .+\n$/);
});
