/**
 * The kernel readahead of a FUSE mount.
 *
 * Every FUSE mount gets its own backing device (bdi) named "<major>:<minor>" of the
 * mount's st_dev (/sys/class/bdi/0:53 for a mount whose mountinfo device is 0:53).
 * Its read_ahead_kb starts at 128 KiB, and libfuse2 cannot raise it (the INIT reply can
 * only lower it), so after mounting we write the sysfs file directly. A larger window
 * turns a cold sequential read into fewer, larger, overlapping FUSE reads that our
 * prefetcher serves from memory. Writing needs root and a writable /sys; without them
 * the mount still works at 128 KiB, and we say so in the log.
 */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { mountAt } from './mountpoint.js';

export interface ReadaheadResult {
  /** The bdi name, e.g. "0:53". */
  bdi: string;
  previousKb: number;
  kb: number;
}

/** The sysfs file holding the readahead window of the mount at `mountpoint`. */
export async function readaheadFile(mountpoint: string): Promise<string> {
  const entry = await mountAt(path.resolve(mountpoint));
  if (!entry) throw new Error(`${mountpoint} is not a mount point`);
  return path.join('/sys/class/bdi', entry.dev, 'read_ahead_kb');
}

export async function getReadaheadKb(mountpoint: string): Promise<number> {
  return Number((await readFile(await readaheadFile(mountpoint), 'utf8')).trim());
}

/** Sets the mount's readahead to `kb` KiB; rejects (with the OS error) when sysfs refuses. */
export async function setReadaheadKb(mountpoint: string, kb: number): Promise<ReadaheadResult> {
  const file = await readaheadFile(mountpoint);
  const previousKb = Number((await readFile(file, 'utf8')).trim());
  if (previousKb !== kb) await writeFile(file, `${kb}\n`);
  return { bdi: path.basename(path.dirname(file)), previousKb, kb: Number((await readFile(file, 'utf8')).trim()) };
}
