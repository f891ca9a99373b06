// Deterministic test bytes: a xorshift32 stream seeded by `seed`, so two blocks with
// different seeds never match and a misplaced or stale byte is caught by a compare.
// Plain JavaScript so that both the TypeScript helpers (test/helpers/fake-client.ts) and the
// child processes that run without type stripping (test/helpers/disk-cache-writer.mjs) import it.

/**
 * @param {number} size bytes wanted
 * @param {number} seed any integer; 0 is replaced by 1 (xorshift's fixed point)
 * @returns {Buffer}
 */
export function patternBytes(size, seed) {
  const words = new Uint32Array(Math.ceil(size / 4));
  let x = (seed * 2654435761) >>> 0 || 1;
  for (let i = 0; i < words.length; i++) {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    words[i] = x;
  }
  return Buffer.from(words.buffer, 0, size);
}
