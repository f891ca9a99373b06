/** Reading through an FsCore (src/fs/) the way the FUSE adapter does, for the core's tests. */
import type { FsCore } from '../../src/fs/types.js';

/** All of `path`, read in `chunk`-byte reads from offset 0 until a read returns 0 (128 KiB: libfuse 2's largest request). */
export async function readAll(fs: Pick<FsCore, 'open' | 'read' | 'release'>, path: string, chunk = 128 * 1024): Promise<Buffer> {
  const fh = await fs.open(path, 0);
  const parts: Buffer[] = [];
  for (let pos = 0; ; ) {
    const dst = Buffer.alloc(chunk);
    const n = await fs.read(fh, dst, chunk, pos);
    if (n === 0) break;
    parts.push(dst.subarray(0, n));
    pos += n;
  }
  await fs.release(fh);
  return Buffer.concat(parts);
}
