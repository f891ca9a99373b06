/**
 * A dead FUSE mount in sluice's way (a `sluice mount` killed with -9 leaves its mount, and
 * every access to it fails with ENOTCONN): File mode and the mount-point check fail with
 * one line naming the folder to unmount and the command; after that command, the run works.
 * A real mount of the built CLI, killed for real; every mount is unmounted in teardown.
 */
import t from 'tap';
import { mkdir, readFile, statfs } from 'node:fs/promises';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { mountAt } from '../../src/fuse/mountpoint.js';
import { runCli, startCli, waitExit } from '../helpers/cli.js';
import { cleanupMount } from '../helpers/fuse.js';
import { localS3ForFile, runEnv, tmpRoot } from '../helpers/run.js';

const local = localS3ForFile(t, 'bkt');

t.test('a dead FUSE mount at a File-mode channel folder, or above a mount point: one line naming fusermount -u', async (t) => {
  await local.s3.putObject('bkt', 'dead/a.txt', Buffer.from('first object'));
  await local.s3.putObject('bkt', 'dead/sub/b.txt', Buffer.from('second object'));
  const root = await tmpRoot(t);
  const channel = path.join(root, 'input', 'data', 'train');
  await mkdir(channel, { recursive: true });
  t.teardown(() => cleanupMount(channel));

  // A FastFile mount of the channel folder, killed with -9: its mount stays, dead.
  const m = await startCli(['mount', 's3://bkt/dead/', channel, ...local.flags()], runEnv());
  m.child.kill('SIGKILL');
  await waitExit(m);
  t.ok(await mountAt(channel), 'the mount is still there');
  await t.rejects(statfs(channel), { code: 'ENOTCONN' }, 'and it is dead');

  const run = (mode: string) => runCli(['run', '--channel', `train=s3://bkt/dead/,mode=${mode}`, '--root', root, ...local.flags(), '--', 'sh', '-c', `cat "${channel}/a.txt" "${channel}/sub/b.txt"`], runEnv());
  const file = await run('File');
  t.equal(file.code, 2, 'a user error');
  const lines = file.stderr.trim().split('\n').filter((l) => l.startsWith('sluice:'));
  t.equal(lines.length, 1, 'one line');
  t.match(lines[0], `sluice: the folder of File-mode channel "train": ${channel} is a dead FUSE mount (ENOTCONN: the daemon that served it is gone). Unmount it: fusermount -u ${channel} (or umount -l ${channel} as root), then retry`);
  t.notMatch(file.stderr, /\n\s+at /, 'no stack trace');

  // A mount point below the dead mount: the dead mount is named, not the mount point.
  const below = path.join(channel, 'inner');
  const mnt = await runCli(['mount', 's3://bkt/dead/', below, ...local.flags()], runEnv());
  t.equal(mnt.code, 2);
  t.match(mnt.stderr, `sluice: mount point ${below} is under a dead FUSE mount at ${channel} (ENOTCONN: the daemon that served it is gone). Unmount it: fusermount -u ${channel}`);
  t.notMatch(mnt.stderr, /\n\s+at /, 'no stack trace');

  // The fix the line gives works: the same File-mode run now downloads and runs.
  execFileSync('fusermount', ['-u', channel]);
  t.notOk(await mountAt(channel), 'unmounted');
  const again = await run('File');
  t.equal(again.code, 0, again.stderr.slice(-2000));
  t.equal(again.stdout, 'first objectsecond object', 'the script read the downloaded files');
  t.equal(await readFile(path.join(channel, 'a.txt'), 'utf8'), 'first object');
});
