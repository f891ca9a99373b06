/**
 * Mount-point helpers for tests that mount: a unique empty folder under os.tmpdir()
 * that is unmounted (fusermount -uz, then umount -l) and removed in teardown, even
 * when the test failed half-way.
 */
import { mkdtemp, rmdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { detachMount, mountAt } from '../../src/fuse/mountpoint.js';

interface Teardown { teardown(fn: () => unknown): void }

/** How many times teardown retries detaching a mount that is still listed. */
const DETACH_TRIES = 5;

export async function cleanupMount(dir: string): Promise<void> {
  for (let i = 0; i < DETACH_TRIES && (await mountAt(dir)); i++) {
    await detachMount(dir);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function tempMountpoint(t: Teardown, name = 'mnt'): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), `sluice-test-${name}-`));
  t.teardown(async () => {
    await cleanupMount(dir);
    await rmdir(dir).catch(() => undefined);
  });
  return dir;
}
