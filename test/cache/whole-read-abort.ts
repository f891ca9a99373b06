/**
 * Issue 43 (the rule of defect 1 on the disk tier's whole-file reader): a read that waits for
 * its window and is given up (its signal fires: the FUSE read deadline answered the kernel,
 * which may reuse the buffer) rejects with AbortedError and never writes into dst afterwards.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { DiskCache } from '../../src/cache/disk-cache.js';
import { DISK_BLOCK_SIZE } from '../../src/cache/tier-layout.js';
import { WINDOW } from '../../src/cache/tier-readers.js';
import { AbortedError } from '../../src/errors.js';
import { patternBytes } from '../helpers/fake-client.js';

const B = DISK_BLOCK_SIZE;
const MiB = 1024 * 1024;
const NS = 'http://fake\0bucket';
const id = { ns: NS, key: 'k', etag: '"e"' };
/** Several windows, each larger than what the reader reads synchronously: its reads wait for a pread. */
const SIZE = 4 * WINDOW;

t.test('a whole-file read given up while it waits writes nothing into dst', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-whole-abort-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const c = await DiskCache.open({ dir, maxBytes: 64 * MiB, writeBytesPerSec: 4096 * MiB, freeBytes: async () => 1e15 });
  t.teardown(() => c.close());
  const body = patternBytes(SIZE, 43);
  for (let k = 0; k * B < SIZE; k++) c.write({ ...id, index: k }, body.subarray(k * B, (k + 1) * B));
  await c.flush();
  for (const at of [WINDOW + 4096, 2 * WINDOW - 1000]) {
    const w = c.openWhole(id, SIZE);
    t.ok(w, 'the file is whole on disk');
    if (!w) return;
    const dst = Buffer.alloc(128 * 1024);
    const ctrl = new AbortController();
    const r = w.read(dst, dst.length, at, ctrl.signal);
    t.type(r, Promise, `a read at ${at} waits for its window`);
    ctrl.abort();
    await t.rejects(Promise.resolve(r), AbortedError, 'it rejects once given up');
    // Whatever pread was under way for it has finished by the time close() lets the buffers go.
    await new Promise((resolve) => setTimeout(resolve, 200));
    t.ok(dst.every((b) => b === 0), 'and nothing was written into dst after it settled');
    // The reader still serves later reads.
    const again = Buffer.alloc(4096);
    const n = await w.read(again, again.length, at);
    t.equal(n, again.length);
    t.equal(Buffer.compare(again, body.subarray(at, at + again.length)), 0, 'a later read gets the right bytes');
    w.close();
  }
});
