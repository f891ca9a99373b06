/**
 * Byte-range helpers for the paths that read listings and snapshots as bytes (issue 46,
 * decision 0044): keys, names and folder paths are a few bytes long, where Buffer#compare's
 * and Buffer#copy's argument checks cost more than the work (measured: ~0.7 µs a call), so
 * short ranges are compared and copied by a loop.
 */

/** Buffer#copy's checks pay for themselves past this many bytes (decision 0044). */
const COPY_LOOP_MAX = 32;

/** Bytes [as, ae) of a against [bs, be) of b, as Buffer.compare orders them (-1, 0, 1). */
export function compareBytes(a: Buffer, as: number, ae: number, b: Buffer, bs: number, be: number): number {
  const n = Math.min(ae - as, be - bs);
  for (let k = 0; k < n; k++) {
    const x = a[as + k]!;
    const y = b[bs + k]!;
    if (x !== y) return x < y ? -1 : 1;
  }
  const d = (ae - as) - (be - bs);
  return d < 0 ? -1 : d > 0 ? 1 : 0;
}

/** Bytes [s, e) of src to dst at `at`: a loop for short runs, Buffer#copy past COPY_LOOP_MAX bytes. */
export function copyBytes(src: Buffer, s: number, e: number, dst: Buffer, at: number): void {
  if (e - s > COPY_LOOP_MAX) src.copy(dst, at, s, e);
  else for (let k = s; k < e; k++) dst[at++] = src[k]!;
}
