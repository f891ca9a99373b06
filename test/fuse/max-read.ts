/**
 * Larger FUSE reads (native/src/fuse_init.c): our addon's INIT reply raises the kernel's
 * max_pages, so a sequential read reaches the core in requests of up to --fuse-max-read
 * instead of libfuse 2's 128 KiB; 128 KiB keeps libfuse's reply. Every byte is checked.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { open } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { DEFAULT_FUSE_MAX_READ, mountCore } from '../../src/fuse/kernel-mount.js';
import { LIBFUSE2_MAX_READ, loadFuseFdShim } from '../../src/fuse/native.js';
import { recordingCore } from '../helpers/mem-core.js';
import { tempMountpoint } from '../helpers/fuse.js';

const run = promisify(execFile);
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
/** 8 MiB and a bit: the last read is a short one. */
const file = Buffer.from(Array.from({ length: 8 * 1024 * 1024 + 12_345 }, (_, i) => (i * 131 + (i >> 13)) & 0xff));


const state = loadFuseFdShim().fuseInitState!;

t.test('reads of up to 1 MiB by default', async (t) => {
  const { core, lens } = recordingCore({ '/f.bin': file });
  const dir = await tempMountpoint(t);
  const m = await mountCore(core, dir, { allowOther: false, attrTimeoutSec: 60, readaheadKb: 1024, fuseTimeoutMs: 60_000 });
  t.teardown(() => m.unmount());
  const kernelMinor = state().kernelMinor;
  if (kernelMinor < 28) {
    t.equal(m.maxRead, LIBFUSE2_MAX_READ, `a kernel before protocol 7.28 (this one: 7.${kernelMinor}) keeps 128 KiB`);
    return;
  }
  t.equal(m.maxRead, DEFAULT_FUSE_MAX_READ, 'the INIT reply asked for 1 MiB');
  const { stdout } = await run('sh', ['-c', `dd if="${path.join(dir, 'f.bin')}" bs=4M status=none | sha256sum`]);
  t.equal(stdout.split(' ')[0], sha(file), 'sha256 of a sequential read');
  t.ok(Math.max(...lens) > LIBFUSE2_MAX_READ, `reads larger than 128 KiB reach the core (largest ${Math.max(...lens)})`);
  t.ok(Math.max(...lens) <= DEFAULT_FUSE_MAX_READ, 'and none larger than asked');
  t.ok(lens.length <= 2 * Math.ceil(file.length / DEFAULT_FUSE_MAX_READ), `about one request per MiB (${lens.length})`);

  // Large preads at unaligned offsets, across 1 MiB boundaries, and one past the end.
  const fh = await open(path.join(dir, 'f.bin'));
  try {
    for (const [pos, len] of [[1_048_575, 2 * 1024 * 1024], [3 * 1024 * 1024 + 17, 1024 * 1024 + 3], [file.length - 5000, 1024 * 1024]] as const) {
      const buf = Buffer.alloc(len);
      const { bytesRead } = await fh.read(buf, 0, len, pos);
      t.same(buf.subarray(0, bytesRead), file.subarray(pos, pos + len), `pread of ${len} at ${pos}`);
      t.equal(bytesRead, Math.min(len, file.length - pos));
    }
  } finally {
    await fh.close();
  }
});

t.test('--fuse-max-read 128KiB keeps libfuse 2 reply', async (t) => {
  const { core, lens } = recordingCore({ '/f.bin': file });
  const dir = await tempMountpoint(t);
  const m = await mountCore(core, dir, { allowOther: false, attrTimeoutSec: 60, readaheadKb: 1024, fuseTimeoutMs: 60_000, fuseMaxRead: LIBFUSE2_MAX_READ });
  t.teardown(() => m.unmount());
  t.equal(m.maxRead, LIBFUSE2_MAX_READ);
  t.equal(state().maxPages, 0, 'the INIT reply was left as libfuse wrote it');
  const { stdout } = await run('sh', ['-c', `dd if="${path.join(dir, 'f.bin')}" bs=4M status=none | sha256sum`]);
  t.equal(stdout.split(' ')[0], sha(file), 'sha256 of a sequential read');
  t.ok(lens.length > 0 && Math.max(...lens) <= LIBFUSE2_MAX_READ, `no read larger than 128 KiB (largest ${Math.max(...lens)})`);
});

t.test('a size in between: whole pages', async (t) => {
  const { core, lens } = recordingCore({ '/f.bin': file });
  const dir = await tempMountpoint(t);
  const m = await mountCore(core, dir, { allowOther: false, attrTimeoutSec: 60, readaheadKb: 1024, fuseTimeoutMs: 60_000, fuseMaxRead: 512 * 1024 });
  t.teardown(() => m.unmount());
  if (state().kernelMinor < 28) return;
  t.equal(m.maxRead, 512 * 1024);
  const { stdout } = await run('sh', ['-c', `dd if="${path.join(dir, 'f.bin')}" bs=1M status=none | sha256sum`]);
  t.equal(stdout.split(' ')[0], sha(file));
  t.ok(Math.max(...lens) > LIBFUSE2_MAX_READ && Math.max(...lens) <= 512 * 1024, `largest read ${Math.max(...lens)}`);
});
