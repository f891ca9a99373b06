/**
 * The `rmdir` disk fault of the read-path model (test/helpers/read-model.ts) removes the tier
 * folder while the daemon writes into it. A one-pass recursive rm failed with ENOTEMPTY when a
 * file landed in a folder after the walk listed it (soak seed 5, path 0:1:8:7:0): the program
 * failed on a harness error, not on a property. Here a writer keeps creating files under the
 * folder (bounded in count) while it is removed: the removal must succeed.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { removeTree } from '../helpers/read-model.js';

/** Files the writer creates at most per round, and rounds: a burst like a read batch's block writes, bounded. */
const WRITES = 400;
const ROUNDS = 10;

t.test('removeTree removes a folder while files are being written into it', async (t) => {
  const work = await mkdtemp(path.join(os.tmpdir(), 'sluice-rmdir-'));
  t.teardown(() => rm(work, { recursive: true, force: true, maxRetries: 20, retryDelay: 20 }));
  for (let round = 0; round < ROUNDS; round++) {
    const dir = path.join(work, `tier-${round}`);
    const sub = path.join(dir, 'objects', 'ab');
    await mkdir(sub, { recursive: true });
    for (let i = 0; i < 50; i++) await writeFile(path.join(sub, `seed-${i}`), 'x');
    let stop = false;
    const writer = (async () => {
      for (let i = 0; i < WRITES && !stop; i++) {
        // Like the tier's writer, a write into a folder that vanished fails and is dropped.
        await writeFile(path.join(sub, `f${i}`), 'x').catch(() => undefined);
      }
    })();
    try {
      await removeTree(dir);
    } finally {
      stop = true;
      await writer;
    }
    await removeTree(dir);
    t.notOk(existsSync(dir), `round ${round}: the folder is gone`);
  }
});
