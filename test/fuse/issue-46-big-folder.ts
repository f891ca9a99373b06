/**
 * Issue 46: a folder of 100 k files through a real mount (from a snapshot written here, so
 * no object is stored): `ls -f` and `find` name every entry exactly once, within bounded
 * time (each command has a timeout; a hang fails the test instead of holding tap).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { mountFastFile } from '../../src/fuse/fastfile.js';
import { setLogLevel } from '../../src/log.js';
import type { ObjectInfo } from '../../src/s3/object-client.js';
import { writeSnapshot } from '../../src/snapshot/snapshot.js';
import { tempMountpoint } from '../helpers/fuse.js';
import { testMountOptions } from '../helpers/mount-options.js';
import '../helpers/exit-watch.js';

setLogLevel('error');

/** Files in the big folder: well past one getdents buffer (a few hundred names) and one FUSE readdir reply. */
const FILES = 100_000;
/** Small folders next to it, so that find also walks more than one folder. */
const SMALL = 3;
/** Upper bound for each shell command: a listing that hangs fails here. */
const COMMAND_TIMEOUT_MS = 120_000;

function sh(cmd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('sh', ['-c', cmd], { timeout: COMMAND_TIMEOUT_MS, maxBuffer: 64 * 1024 * 1024 }, (err, out) => (err ? reject(err) : resolve(out)));
  });
}

t.test('ls -f and find list a folder of 100 k files exactly', async (t) => {
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'sluice-issue46-'));
  t.teardown(() => rm(tmp, { recursive: true, force: true }));
  const lastModified = new Date(Date.UTC(2026, 0, 1));
  const objects: ObjectInfo[] = [];
  for (let i = 0; i < FILES; i++) objects.push({ key: `ds/big/f${String(i).padStart(6, '0')}.bin`, size: i + 1, etag: `"${i.toString(16).padStart(32, '0')}"`, lastModified });
  for (let i = 0; i < SMALL; i++) objects.push({ key: `ds/small${i}/x.bin`, size: 1, etag: `"${'e'.repeat(32)}"`, lastModified });
  const file = path.join(tmp, 'big.snapshot');
  await writeSnapshot(file, { uri: 's3://issue46/ds/', bucket: 'issue46', prefix: 'ds/', listing: { filters: [], skipArchived: false } }, objects);

  const dir = await tempMountpoint(t, 'issue46');
  // No request is sent with a snapshot: the endpoint is a closed loopback port.
  const m = await mountFastFile({ uri: undefined, mountpoint: dir, options: testMountOptions('http://127.0.0.1:9'), dataset: { snapshot: file, skipArchived: false } });
  t.teardown(() => m.unmount());
  await m.listed;

  const ls = (await sh(`ls -f '${dir}/big'`)).split('\n').filter((l) => l !== '');
  t.equal(ls.length, FILES + 2, 'ls -f: every file plus . and ..');
  t.equal(new Set(ls).size, ls.length, 'ls -f: no name twice');
  t.ok(ls.includes('f000000.bin') && ls.includes(`f${String(FILES - 1).padStart(6, '0')}.bin`));

  const found = (await sh(`find '${dir}' -type f`)).split('\n').filter((l) => l !== '');
  t.equal(found.length, FILES + SMALL, 'find: every file once');
  t.equal(new Set(found).size, found.length);
  const dirs = (await sh(`find '${dir}' -mindepth 1 -type d`)).split('\n').filter((l) => l !== '');
  t.equal(dirs.length, 1 + SMALL);
});
