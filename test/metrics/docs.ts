/**
 * docs/METRICS.md against src/metrics/metrics.ts, both ways: every registered metric has
 * a row (name, type, labels) in one of the doc's tables, and every sluice_ name the doc
 * mentions anywhere (tables and PromQL) is a registered metric, or a histogram's
 * _bucket/_sum/_count series.
 */
import t from 'tap';
import { readFileSync } from 'node:fs';
import { loadMetrics, registry } from '../../src/metrics/metrics.js';

const doc = readFileSync(new URL('../../docs/METRICS.md', import.meta.url), 'utf8');
const ROW_RE = /^\|\s*`((?:sluice|process|nodejs)_[a-z0-9_]+)`\s*\|\s*(counter|gauge|histogram|summary)\s*\|([^|]*)\|/gm;

interface Row { type: string; labels: string[] }
const rows = new Map<string, Row>();
const duplicates: string[] = [];
for (const m of doc.matchAll(ROW_RE)) {
  if (rows.has(m[1]!)) duplicates.push(m[1]!);
  rows.set(m[1]!, { type: m[2]!, labels: m[3]!.split(',').map((l) => l.trim()).filter(Boolean).sort() });
}
await loadMetrics(); // the process metrics are prom-client's, there once it is built
const metrics = registry.getMetricsAsArray() as unknown as Array<{ name: string; type: string; labelNames?: readonly string[] }>;
const declared = new Map(metrics.map((m) => [m.name, { type: String(m.type), labels: [...(m.labelNames ?? [])].sort() }]));

t.test('the doc has metric rows to check', async (t) => {
  t.ok(rows.size >= 40, `found ${rows.size} rows`);
  t.same(duplicates, [], 'each metric documented once');
});

t.test('every declared metric is documented with its type and labels', async (t) => {
  for (const [name, d] of declared) {
    const row = rows.get(name);
    if (!row) { t.fail(`${name} is declared in src/metrics/metrics.ts but not documented in docs/METRICS.md`); continue; }
    t.equal(row.type, d.type, `${name}: type`);
    t.same(row.labels, d.labels, `${name}: labels`);
  }
});

t.test('every metric the doc names exists', async (t) => {
  const series = new Set<string>();
  for (const [name, d] of declared) {
    series.add(name);
    if (d.type === 'histogram' || d.type === 'summary') for (const s of ['_bucket', '_sum', '_count']) series.add(name + s);
  }
  const named = new Set([...doc.matchAll(/\bsluice_[a-z0-9_]*[a-z0-9]\b/g)].map((m) => m[0]));
  t.ok(named.size > 0);
  for (const name of named) t.ok(series.has(name), `${name} is named in docs/METRICS.md but not declared`);
  for (const name of rows.keys()) t.ok(declared.has(name), `${name} has a row in docs/METRICS.md but is not declared`);
});

t.test('labels never carry object keys or paths', async (t) => {
  const forbidden = ['key', 'path', 'file', 'bucket', 'prefix', 'uri', 'url'];
  for (const [name, d] of declared) for (const l of d.labels) t.notOk(forbidden.includes(l), `${name} has label ${l}`);
});
