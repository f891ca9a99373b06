/**
 * docker/grafana-dashboard.json against a live /metrics: every sluice_ series any panel
 * queries is exposed by startMetricsServer (a histogram's _bucket/_sum/_count by its
 * family), so the dashboard never shows "no data" because of a typo or a renamed metric.
 */
import t from 'tap';
import { readFileSync } from 'node:fs';
import { startMetricsServer } from '../../src/metrics/server.js';
import { parseExposition } from '../../src/metrics/exposition.js';

interface Panel { type: string; title: string; targets?: Array<{ expr: string; refId: string }>; panels?: Panel[] }
const dashboard = JSON.parse(readFileSync(new URL('../../docker/grafana-dashboard.json', import.meta.url), 'utf8')) as { title: string; uid: string; panels: Panel[] };

function allPanels(ps: Panel[]): Panel[] {
  return ps.flatMap((p) => [p, ...allPanels(p.panels ?? [])]);
}

const panels = allPanels(dashboard.panels).filter((p) => p.type !== 'row');
const exprs = panels.flatMap((p) => (p.targets ?? []).map((x) => ({ panel: p.title, expr: x.expr })));

t.test('the dashboard has panels with queries', async (t) => {
  t.ok(dashboard.title);
  t.ok(dashboard.uid);
  t.ok(panels.length >= 12, `${panels.length} panels`);
  for (const p of panels) t.ok((p.targets ?? []).length > 0, `panel "${p.title}" has a query`);
  for (const { panel, expr } of exprs) {
    let depth = 0;
    for (const c of expr) { depth += c === '(' ? 1 : c === ')' ? -1 : 0; if (depth < 0) break; }
    t.equal(depth, 0, `balanced parentheses in "${panel}": ${expr}`);
  }
});

t.test('every metric the dashboard queries exists on a live /metrics', async (t) => {
  const srv = await startMetricsServer({ host: '127.0.0.1', port: 0 });
  t.teardown(() => srv.close());
  const res = await fetch(`${srv.url}/metrics`);
  t.equal(res.status, 200);
  const { types } = parseExposition(await res.text());
  const exists = (name: string): boolean => {
    if (types.has(name)) return true;
    const m = /^(.*)_(bucket|sum|count)$/.exec(name);
    return m !== null && (types.get(m[1]!) === 'histogram' || types.get(m[1]!) === 'summary');
  };
  const names = new Set<string>();
  for (const { panel, expr } of exprs) {
    for (const m of expr.matchAll(/\b(?:sluice|process|nodejs)_[a-zA-Z0-9_]+/g)) {
      names.add(m[0]);
      t.ok(exists(m[0]), `"${panel}" queries ${m[0]}, which /metrics does not expose`);
    }
  }
  // The list of what the dashboard must show.
  for (const needed of [
    'sluice_starved_seconds_total', 'sluice_served_bytes_total', 'sluice_s3_received_bytes_total', 'sluice_cache_hits_total',
    'sluice_s3_requests_total', 'sluice_s3_retries_total', 'sluice_s3_first_byte_seconds_bucket', 'sluice_cache_bytes',
    'sluice_cache_capacity_bytes', 'sluice_inflight_bytes', 'process_resident_memory_bytes',
    'nodejs_eventloop_lag_p99_seconds', 'sluice_pipe_full_seconds_total', 'sluice_pipe_empty_seconds_total',
    'sluice_s3_concurrency_limit', 'sluice_time_to_first_byte_seconds',
  ]) t.ok(names.has(needed), `dashboard shows ${needed}`);
});

t.test('namespace, job and pod template variables filter every query', async (t) => {
  const d = JSON.parse(readFileSync(new URL('../../docker/grafana-dashboard.json', import.meta.url), 'utf8')) as { templating: { list: Array<{ name: string; type: string; query?: { query: string } }> } };
  for (const v of ['namespace', 'job', 'pod']) {
    const tv = d.templating.list.find((x) => x.name === v);
    t.equal(tv?.type, 'query', `$${v} is a query variable`);
    t.match(tv?.query?.query, new RegExp(`label_values\\(sluice_build_info.*, ${v}\\)`), `$${v} lists the values of label ${v}`);
  }
  for (const { panel, expr } of exprs) {
    for (const m of expr.matchAll(/\b(?:sluice|process|nodejs)_[a-zA-Z0-9_]+(\{[^}]*\})?/g)) {
      t.match(m[1] ?? '', /namespace=~"\$namespace", job=~"\$job", pod=~"\$pod"/, `"${panel}": ${m[0]} is filtered`);
    }
  }
});
