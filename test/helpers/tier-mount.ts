/**
 * FastFile mounts over a disk tier for the tests of what C answers (test/fuse/memread.ts,
 * test/fuse/check-ahead.ts): a mount of s3://bucket/prefix with the tier in `cacheDir`,
 * unmounted in teardown, and a wait until every handle the kernel released reached the core.
 */
import { mountFastFile, type FastFileMount } from '../../src/fuse/fastfile.js';
import { tempMountpoint } from './fuse.js';
import { testMountOptions } from './mount-options.js';

const MiB = 1024 * 1024;

interface Test { teardown(fn: () => unknown): void; equal(found: unknown, wanted: unknown, msg: string): unknown }

/** Mounts `uri` over the tier in `cacheDir` and waits for its listing; checks that the listing reached C (`native`) or not. */
export async function tierMount(t: Test, o: { endpoint: string; uri: string; cacheDir: string; name: string; native?: boolean; directIo?: boolean }): Promise<FastFileMount> {
  const native = o.native ?? true;
  const mnt = await tempMountpoint(t, o.name);
  const m = await mountFastFile({ uri: o.uri, mountpoint: mnt, options: testMountOptions(o.endpoint, { cacheDir: o.cacheDir, cacheDirWriteRate: 1024 * MiB, directIo: o.directIo ?? false }) });
  t.teardown(() => m.unmount());
  await m.listed;
  // The listing reaches C a little after it is done: from then on C opens small files (unless SLUICE_NO_C_OPEN).
  t.equal(await m.attrTable, native, native ? 'the listing is handed to C' : 'no listing in C');
  return m;
}

/** Waits (bounded) until the core holds no open handle, taking what C answered (kernel-mount.ts does it once a second). */
export async function drained(m: FastFileMount): Promise<boolean> {
  for (let i = 0; i < 100; i++) {
    m.takeCounts();
    if (m.core.openHandleCount === 0) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

/** Epoch 1: mounts `uri` over the tier in `cacheDir`, reads it with `read(mountpoint)`, unmounts (which flushes the tier's writes); whether the kernel offered passthrough. */
export async function fillTier(t: Test, o: { endpoint: string; uri: string; cacheDir: string; name: string }, read: (mountpoint: string) => Promise<unknown>): Promise<boolean> {
  const mnt = await tempMountpoint(t, o.name);
  const m = await mountFastFile({ uri: o.uri, mountpoint: mnt, options: testMountOptions(o.endpoint, { cacheDir: o.cacheDir, cacheDirWriteRate: 1024 * MiB }) });
  try {
    await m.listed;
    await read(mnt);
  } finally {
    await m.unmount();
  }
  return m.passthrough;
}
