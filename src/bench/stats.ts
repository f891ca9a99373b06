/** Small statistics for benchmark figures. */

/**
 * The median of the finite values, or null when there are none (even counts average the
 * middle two). Missing values (undefined, null: a run that has no such figure) are skipped.
 */
export function median(values: readonly (number | null | undefined)[]): number | null {
  const v = values.filter((x): x is number => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return null;
  const mid = v.length >> 1;
  return v.length % 2 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2;
}
