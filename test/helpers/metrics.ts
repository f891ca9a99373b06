/** Reading sluice's Prometheus registry in tests. */
import { registry } from '../../src/metrics/metrics.js';

/** Sum of a metric's values whose labels include `labels` (all of them when none are given). */
export async function metricSum(name: string, labels: Record<string, string> = {}): Promise<number> {
  const m = registry.getSingleMetric(name);
  if (!m) throw new Error(`no metric ${name}`);
  const { values } = await m.get();
  return values.filter((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x)).reduce((a, v) => a + v.value, 0);
}
