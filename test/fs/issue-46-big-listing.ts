/**
 * Issue 46: a mount from a snapshot of 1 M objects died with "RangeError: Maximum call stack
 * size exceeded" (`objects.push(...listing)` in src/fs/core.ts). The core is given a
 * synthetic listing (what `--snapshot` hands it) big enough to overflow a spread, and must
 * come up with every object in place.
 */
import t from 'tap';
import { SluiceFs } from '../../src/fs/core.js';
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
