/**
 * Deterministic, seeded shuffles for ShuffleConfig.Seed.
 *
 * Algorithm: a PRNG seeded from (seed, epoch), then a Fisher-Yates shuffle.
 *  - Seeding: splitmix64 (BigInt, run only 4 times per shuffle) turns the 64-bit seed
 *    and the epoch into four well-mixed 32-bit words. splitmix64 is the seeding routine
 *    the xoshiro authors recommend: nearby seeds (7, 8) and nearby epochs give
 *    unrelated streams.
 *  - Generator: xoshiro128** (32-bit arithmetic only, so it is fast in JavaScript).
 *  - Bounded integers: rejection sampling on 32-bit draws, so every permutation is
 *    equally likely (no modulo bias).
 * Same (seed, epoch) gives the same order on every host and every Node version; a
 * different epoch gives a different order. The input array is never modified.
 */
import { InvalidArgumentError } from '../errors.js';

const MASK64 = (1n << 64n) - 1n;
/** splitmix64's increment: the 64-bit golden ratio, as in the reference implementation. */
const GOLDEN = 0x9e3779b97f4a7c15n;

function splitmix64(state: bigint): [bigint, bigint] {
  const next = (state + GOLDEN) & MASK64;
  let z = next;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK64;
  return [next, z ^ (z >> 31n)];
}

/** A xoshiro128** generator of 32-bit unsigned integers, seeded from (seed, epoch). */
export function createRng(seed: number | bigint, epoch: number): () => number {
  if (typeof seed === 'number' && !Number.isSafeInteger(seed)) throw new InvalidArgumentError(`shuffle seed ${seed} is not an integer`);
  if (!Number.isSafeInteger(epoch) || epoch < 0) throw new InvalidArgumentError(`epoch ${epoch} is not a non-negative integer`);
  // Mix the epoch in through its own splitmix step so (seed, epoch) and (seed + 1, epoch - 1) differ.
  let state = BigInt.asUintN(64, BigInt(seed));
  let e: bigint;
  [, e] = splitmix64(BigInt(epoch) ^ 0x5eed5eedn);
  state ^= e;
  const words: number[] = [];
  while (words.length < 4) {
    let out: bigint;
    [state, out] = splitmix64(state);
    words.push(Number(out & 0xffffffffn), Number(out >> 32n));
  }
  let [a, b, c, d] = words.map((w) => w >>> 0) as [number, number, number, number];
  if ((a | b | c | d) === 0) a = 1; // the all-zero state is the one xoshiro cannot leave
  return () => {
    const result = Math.imul(rotl(Math.imul(b, 5), 7), 9) >>> 0;
    const t = b << 9;
    c ^= a; d ^= b; b ^= c; a ^= d; c ^= t; d = rotl(d, 11);
    return result;
  };
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}

/** A uniform integer in [0, n) from 32-bit draws, by rejection (n <= 2^32). */
export function uniformBelow(next: () => number, n: number): number {
  const limit = Math.floor(0x1_0000_0000 / n) * n;
  for (;;) {
    const u = next();
    if (u < limit) return u % n;
  }
}

/** A new array with `items` in the order fixed by (seed, epoch). */
export function shuffled<T>(items: readonly T[], seed: number, epoch: number): T[] {
  const out = items.slice();
  const next = createRng(seed, epoch);
  for (let i = out.length - 1; i > 0; i--) {
    const j = uniformBelow(next, i + 1);
    const tmp = out[i]!;
    out[i] = out[j]!;
    out[j] = tmp;
  }
  return out;
}
