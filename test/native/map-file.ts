// Issue 11, File mode: the addon's mapFile/unmapFile (native/binding.c js_map_file).
import t from 'tap';
import { mkdtemp, open, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileMapping } from '../../src/pipe/native.js';

const m = fileMapping();
if (m === undefined) {
  t.skip('the native addon is not built (or is an older build)');
} else {
  t.test('bytes stored in a mapped range are the file\'s; the range is reserved first; unaligned offsets work', async (t) => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-map-file-'));
    t.teardown(() => rm(dir, { recursive: true, force: true }));
    const fh = await open(path.join(dir, 'f'), 'w+');
    t.teardown(() => fh.close());
    // An offset inside a page and a length that ends inside one.
    const buf = m.map(fh.fd, 5000, 70_001)!;
    t.equal(buf.length, 70_001);
    t.equal((await stat(path.join(dir, 'f'))).size, 75_001, 'fallocate reserved (and sized) the range before any byte');
    for (let i = 0; i < buf.length; i++) buf[i] = (i * 7) & 0xff;
    m.unmap(buf);
    m.unmap(buf); // a second unmap is a no-op
    const got = await readFile(path.join(dir, 'f'));
    t.ok(got.subarray(0, 5000).equals(Buffer.alloc(5000)), 'bytes before the range are untouched (zero)');
    t.ok(got.subarray(5000).equals(Buffer.from(Array.from({ length: 70_001 }, (_, i) => (i * 7) & 0xff))), 'the stored bytes are in the file');
  });

  t.test('a file opened without read access, or a buffer of another kind, is refused with an error', async (t) => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-map-file-'));
    t.teardown(() => rm(dir, { recursive: true, force: true }));
    const fh = await open(path.join(dir, 'f'), 'w');
    t.teardown(() => fh.close());
    t.throws(() => m.map(fh.fd, 0, 4096), { code: 'EACCES' }, 'mmap of a write-only fd');
    t.throws(() => m.unmap(Buffer.alloc(10)), /unmapFile takes a Buffer from mapFile/);
    t.throws(() => m.map(fh.fd, 0, 0), /length must be > 0/);
  });
}
