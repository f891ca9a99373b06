/**
 * CRC-32C of the disk tier's and the cache bucket's checksums, with @node-rs/crc32 (a
 * native addon) loaded on the first call instead of at import: a mount without --cache-dir
 * or --cache-bucket never calls it, and loading it cost ~15-35 ms of the mount command's
 * start on the shared 2-core host (issue 44, decision 0046: dlopen plus its loader's
 * platform probing, before the first byte).
 */
import { createRequire } from 'node:module';

type Crc32c = (input: Uint8Array | string, initialState?: number | null) => number;

const require = createRequire(import.meta.url);
let impl: Crc32c | undefined;

/** The CRC-32C of `input`, continuing from `initialState` when given (as @node-rs/crc32's crc32c). */
export function crc32c(input: Uint8Array | string, initialState?: number): number {
  impl ??= (require('@node-rs/crc32') as { crc32c: Crc32c }).crc32c;
  return impl(input, initialState);
}
