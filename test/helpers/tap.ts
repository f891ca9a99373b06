/**
 * The type of a subtest's `t` (what `t.test(name, (t) => ...)` passes), for helpers that
 * take one. tap's root `t` is a TAP, a subclass with more members, so `typeof t` is too narrow
 * a parameter type for a subtest. The last overload of `t.test` is `(cb) => ...`.
 */
import type tap from 'tap';

export type Test = Parameters<Parameters<typeof tap.test>[0]>[0];

/**
 * Skips the rest of test `t` with `why` shown as a skipped subtest: what `t.skip(why)` does,
 * which tap's types reject (they want a callback, here one that never runs).
 */
export function skip(t: Test, why: string): void {
  void t.skip(why, () => undefined);
}
