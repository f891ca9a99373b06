/**
 * --direct-io (native/src/fuse_init.c "Direct I/O"): every OPEN of the mount is answered
 * with FOPEN_DIRECT_IO, so the kernel keeps no page cache for its files. What shows it
 * through a real mount: a second read of a file reaches the core again, and the core sees
 * the reader's own read size instead of the kernel's readahead. A shared mmap still works
 * where the kernel allows it (FUSE_DIRECT_IO_ALLOW_MMAP), and fails with ENODEV where it does
 * not; a private one works on any kernel.
 * A mount without the option, made after one with it, keeps the page cache. Every byte is
 * checked (sha256).
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { mountCore } from '../../src/fuse/kernel-mount.js';
import { loadFuseFdShim } from '../../src/fuse/native.js';
import { recordingCore } from '../helpers/mem-core.js';
import { tempMountpoint } from '../helpers/fuse.js';

const run = promisify(execFile);
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
/** 4 MiB and a bit: several reads, the last one short. */
const file = Buffer.from(Array.from({ length: 4 * 1024 * 1024 + 4321 }, (_, i) => (i * 197 + (i >> 11)) & 0xff));
const KiB = 1024;


const ddSha = async (p: string, bs: string) => (await run('sh', ['-c', `dd if="${p}" bs=${bs} status=none | sha256sum`])).stdout.split(' ')[0];

/** sha256 of the file read through a shared (or private) mmap(2), or the OSError's errno name. */
async function mmapSha(p: string, kind: 'shared' | 'private' = 'shared'): Promise<string> {
  const py = 'import hashlib, mmap, sys, errno\nf = open(sys.argv[1], "rb")\ntry:\n  m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED if sys.argv[2] == "shared" else mmap.MAP_PRIVATE, prot=mmap.PROT_READ)\nexcept OSError as e:\n  print("error " + errno.errorcode.get(e.errno, str(e.errno))); sys.exit(0)\nprint(hashlib.sha256(m[:]).hexdigest())\n';
  return (await run('python3', ['-c', py, p, kind])).stdout.trim();
}

const opts = { allowOther: false, attrTimeoutSec: 60, readaheadKb: 1024, fuseTimeoutMs: 60_000 };

t.test('--direct-io: no page cache, the reader\'s read size, mmap where the kernel allows it', async (t) => {
  const { core, lens } = recordingCore({ '/f.bin': file });
  const dir = await tempMountpoint(t);
  const m = await mountCore(core, dir, { ...opts, directIo: true });
  t.teardown(() => m.unmount());
  t.equal(m.directIo, true);
  const p = path.join(dir, 'f.bin');

  t.equal(await ddSha(p, '64k'), sha(file), 'sha256 of a read in 64 KiB pieces');
  const first = lens.length;
  t.ok(first >= Math.ceil(file.length / (64 * KiB)), `one request per read(2) at least (${first})`);
  t.equal(Math.max(...lens), 64 * KiB, 'no request larger than the reader asked for: no kernel readahead');

  t.equal(await ddSha(p, '1M'), sha(file), 'sha256 of a second read, in 1 MiB pieces');
  const second = lens.slice(first);
  t.ok(second.length >= Math.ceil(file.length / m.maxRead), `the second read reached the core again (${second.length} requests)`);
  t.equal(second.reduce((a, b) => a + b, 0) >= file.length, true, 'all of its bytes');

  // FUSE_DIRECT_IO_ALLOW_MMAP came with protocol 7.39 (Linux 6.6): a kernel that new offers it.
  const kernelMinor = loadFuseFdShim().fuseInitState!().kernelMinor;
  if (kernelMinor >= 39) t.equal(m.directIoMmap, true, `the INIT reply allowed mmap (kernel protocol 7.${kernelMinor})`);
  const mapped = await mmapSha(p);
  if (m.directIoMmap) t.equal(mapped, sha(file), 'mmap works (FUSE_DIRECT_IO_ALLOW_MMAP) and reads the same bytes');
  else t.equal(mapped, 'error ENODEV', 'this kernel refuses a shared mmap of a direct-I/O file (before Linux 6.6)');
  t.equal(await mmapSha(p, 'private'), sha(file), 'a private mmap works on any kernel');
});

t.test('without it (after a mount with it): the page cache serves a second read', async (t) => {
  const { core, lens } = recordingCore({ '/f.bin': file });
  const dir = await tempMountpoint(t);
  const m = await mountCore(core, dir, opts);
  t.teardown(() => m.unmount());
  t.equal(m.directIo, false);
  t.equal(m.directIoMmap, false);
  const p = path.join(dir, 'f.bin');
  t.equal(await ddSha(p, '64k'), sha(file));
  const first = lens.length;
  t.ok(Math.max(...lens) > 64 * KiB, `the kernel's readahead asked for more than the reader (largest ${Math.max(...lens)})`);
  t.equal(await ddSha(p, '64k'), sha(file));
  t.equal(lens.length, first, 'no request for the second read');
  t.equal(await mmapSha(p), sha(file), 'mmap');
});
