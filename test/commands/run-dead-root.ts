/**
 * A dead FUSE mount at sluice's --root (a `sluice mount` of that folder killed with -9):
 * `sluice run` fails with one line naming the folder and `fusermount -u`, for every mode,
 * not a raw ENOTCONN; after the fix, the run works. A real mount, killed for real, unmounted
 * in teardown.
 */
import t from 'tap';
import { mkdir, statfs } from 'node:fs/promises';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { mountAt } from '../../src/fuse/mountpoint.js';
import { runCli, startCli, waitExit } from '../helpers/cli.js';
import { cleanupMount } from '../helpers/fuse.js';
import { localS3ForFile, runEnv, tmpRoot } from '../helpers/run.js';

const local = localS3ForFile(t, 'bkt');

t.test('a dead FUSE mount at --root: one line naming fusermount -u, for each mode', async (t) => {
  await local.s3.putObject('bkt', 'dead/a.txt', Buffer.from('first object'));
  const base = await tmpRoot(t);
  const root = path.join(base, 'ml');
  await mkdir(root, { recursive: true });
  t.teardown(() => cleanupMount(root));

  const m = await startCli(['mount', 's3://bkt/dead/', root, ...local.flags()], runEnv());
  m.child.kill('SIGKILL');
  await waitExit(m);
  t.ok(await mountAt(root), 'the mount is still there');
  await t.rejects(statfs(root), { code: 'ENOTCONN' }, 'and it is dead');

  const run = (mode: string) => runCli(['run', '--channel', `train=s3://bkt/dead/,mode=${mode}`, '--root', root, ...local.flags(), '--', 'sh', '-c', `cat "${root}/input/data/train/a.txt" 2>/dev/null || cat "${root}/input/data/train_0"`], runEnv());
  for (const mode of ['FastFile', 'File', 'Pipe']) {
    const r = await run(mode);
    t.equal(r.code, 2, `${mode}: a user error (${r.stderr.slice(-400)})`);
    const lines = r.stderr.trim().split('\n').filter((l) => l.startsWith('sluice:'));
    t.equal(lines.length, 1, `${mode}: one line`);
    t.equal(lines[0], `sluice: the --root folder ${root} is a dead FUSE mount (ENOTCONN: the daemon that served it is gone). Unmount it: fusermount -u ${root} (or umount -l ${root} as root), then retry`, `${mode}: names the folder and the fix`);
    t.notMatch(r.stderr, /\n\s+at /, `${mode}: no stack trace`);
  }

  execFileSync('fusermount', ['-u', root]);
  t.notOk(await mountAt(root), 'unmounted');
  const again = await run('FastFile');
  t.equal(again.code, 0, again.stderr.slice(-2000));
  t.equal(again.stdout, 'first object', 'the script read through the new mount');
});
