/**
 * The example alert rules in docs/METRICS.md: the YAML block parses as a Prometheus rule
 * file, has the four alerts the docs promise (starvation, S3 errors, throttling, cache
 * thrash), and every metric a rule queries is one sluice exports (histograms by family).
 * Also: the process metrics carry prom-client's standard names, and sluice_build_info.
 */
import t from 'tap';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { parseExposition } from '../../src/metrics/exposition.js';
import { registry } from '../../src/metrics/metrics.js';

const doc = readFileSync(new URL('../../docs/METRICS.md', import.meta.url), 'utf8');
const section = doc.slice(doc.indexOf('## Alert rules'));
const block = /```yaml\n([\s\S]*?)```/.exec(section)?.[1];

interface Rule { alert: string; expr: string; for?: string; labels?: Record<string, string>; annotations?: Record<string, string> }

t.test('the alert rules parse and query exported metrics', async (t) => {
  t.ok(block, 'docs/METRICS.md has a yaml block under "Alert rules"');
  const file = parse(block!) as { groups: Array<{ name: string; rules: Rule[] }> };
  const rules = file.groups.flatMap((g) => g.rules);
  t.same(rules.map((r) => r.alert).sort(), ['SluiceCacheThrash', 'SluiceS3Errors', 'SluiceS3Throttled', 'SluiceStarving']);
  const { types } = parseExposition(await registry.metrics());
  for (const r of rules) {
    t.match(r.for, /^\d+m$/, `${r.alert} has a for: duration`);
    t.ok(r.labels?.severity, `${r.alert} has a severity`);
    t.ok(r.annotations?.summary, `${r.alert} has a summary`);
    const names = [...r.expr.matchAll(/\bsluice_[a-z0-9_]+/g)].map((m) => m[0]);
    t.ok(names.length > 0, `${r.alert} queries sluice metrics`);
    for (const n of names) t.ok(types.has(n), `${r.alert}: ${n} is exported`);
    let depth = 0;
    for (const c of r.expr) { depth += c === '(' ? 1 : c === ')' ? -1 : 0; t.ok(depth >= 0); }
    t.equal(depth, 0, `${r.alert}: balanced parentheses`);
  }
});

t.test('standard process metric names, no counter/histogram name collision, build info', async (t) => {
  const text = await registry.metrics();
  const { types } = parseExposition(text);
  for (const n of ['process_cpu_seconds_total', 'process_resident_memory_bytes', 'process_start_time_seconds', 'nodejs_eventloop_lag_p99_seconds', 'nodejs_heap_size_used_bytes']) {
    t.ok(types.has(n), `${n} under its standard name`);
  }
  t.notMatch(text, /sluice_process_/, 'no prefixed process metrics');
  // OpenMetrics names a counter by its family without _total: no family may be taken twice.
  const families = new Map<string, string>();
  for (const [name, type] of types) {
    const family = type === 'counter' ? name.replace(/_total$/, '') : name;
    t.notOk(families.has(family), `${name} (${type}) and ${families.get(family)} share the family ${family}`);
    families.set(family, name);
  }
  t.ok(types.has('sluice_starved_seconds_total') && types.get('sluice_read_wait_seconds') === 'histogram', 'the starvation counter was renamed, the histogram kept');
  const info = /^sluice_build_info\{([^}]*)\} 1$/m.exec(text)?.[1];
  t.ok(info, 'sluice_build_info is exported with value 1');
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  t.match(info, `version="${pkg.version}"`);
  t.match(info, `node="${process.version}"`);
  t.match(info, /fuse="fuse-native \d+\.\d+\.\d+, libfuse\.so\.2"/);
});
