/**
 * Issue 46: a mount from a snapshot of 1 M objects died with "RangeError: Maximum call stack
 * size exceeded" (`objects.push(...listing)` in src/fs/core.ts). The core is given a
 * synthetic listing (what `--snapshot` hands it) big enough to overflow a spread, and must
 * come up with every object in place. Then a readdir of a big folder through the FUSE adapter
 * must not ask getattr per entry (issue 46 item 4; decision 0032) and must give each kind.
 */
import t from 'tap';
import { SluiceFs } from '../../src/fs/core.js';
import { fuseOpsFor } from '../../src/fuse/adapter.js';
import type { NativeStat } from '../../src/fuse/native.js';
import type { ObjectInfo } from '../../src/s3/object-client.js';
import { FakeObjectClient } from '../helpers/fake-client.js';

const MiB = 1024 * 1024;
/** Past V8's argument limit for a spread (~120 k on a default stack), with margin. */
const OBJECTS = 250_000;
/** Files per folder: the listing has OBJECTS / PER_FOLDER folders under the prefix. */
const PER_FOLDER = 1000;

t.test('a snapshot listing of 250 k objects mounts (no spread of the listing)', async (t) => {
  const lastModified = new Date(0);
  const listing: ObjectInfo[] = [];
  for (let i = 0; i < OBJECTS; i++) {
    listing.push({ key: `ds/d${Math.floor(i / PER_FOLDER)}/f${i}`, size: i, etag: `"${i.toString(16).padStart(32, '0')}"`, lastModified });
  }
  const fs = await SluiceFs.create({
    client: new FakeObjectClient(), prefix: 'ds', channel: 'issue-46', listing, cacheSize: 64 * MiB, partSize: 1 * MiB,
    maxPrefetch: 8 * MiB, maxInflight: 32 * MiB, crossFilePrefetch: 4, crossFileMaxSize: 1 * MiB,
  });
  t.teardown(() => fs.close());
  t.equal(fs.fileCount, OBJECTS);
  t.equal((await fs.readdir('/')).length, OBJECTS / PER_FOLDER);
  const last = OBJECTS - 1;
  t.equal((await fs.getattr(`/d${Math.floor(last / PER_FOLDER)}/f${last}`)).size, last);
});

t.test('readdir of a big folder: no getattr per entry, kinds right', async (t) => {
  const lastModified = new Date(0);
  const FILES = 20_000;
  const listing: ObjectInfo[] = [];
  for (let i = 0; i < FILES; i++) listing.push({ key: `ds/big/f${i}`, size: i, etag: `"${'a'.repeat(32)}"`, lastModified });
  listing.push({ key: 'ds/big/sub/x', size: 1, etag: `"${'b'.repeat(32)}"`, lastModified });
  const fs = await SluiceFs.create({
    client: new FakeObjectClient(), prefix: 'ds', channel: 'issue-46-readdir', listing, cacheSize: 64 * MiB, partSize: 1 * MiB,
    maxPrefetch: 8 * MiB, maxInflight: 32 * MiB, crossFilePrefetch: 4, crossFileMaxSize: 1 * MiB,
  });
  t.teardown(() => fs.close());
  let getattrs = 0;
  const getattr = fs.getattr.bind(fs);
  fs.getattr = (p: string) => { getattrs++; return getattr(p); };
  const ops = fuseOpsFor(fs);
  const reply = await new Promise<{ code: number; names?: string[]; stats?: NativeStat[] }>((resolve) => ops.readdir!('/big', (code, names, stats) => resolve({ code, names, stats })));
  t.equal(reply.code, 0);
  t.equal(reply.names!.length, FILES + 3, '".", "..", every file and the folder');
  t.ok(getattrs <= 3, `getattr calls for one readdir: ${getattrs} (the folder and one entry of each kind at most)`);
  const isDir = (i: number) => (reply.stats![i]!.mode & 0o170000) === 0o040000;
  const dirs = reply.names!.filter((_, i) => isDir(i));
  t.same(dirs.sort(), ['.', '..', 'sub'].sort());
});
