import t from 'tap';
import client from 'prom-client';
import { has, labelValues, parseExposition, quantileFromBuckets, quantileOf, sumOf } from '../../src/metrics/exposition.js';

t.test('reads what prom-client writes, including escaped label values', async (t) => {
  const reg = new client.Registry();
  const c = new client.Counter({ name: 'x_total', help: 'h', labelNames: ['a', 'b'], registers: [reg] });
  const g = new client.Gauge({ name: 'g', help: 'h', registers: [reg] });
  const h = new client.Histogram({ name: 'lat_seconds', help: 'h', labelNames: ['op'], buckets: [0, 0.1, 1], registers: [reg] });
  c.inc({ a: 'x', b: 'quote " back \\ nl \n end' }, 2);
  c.inc({ a: 'y', b: 'z' }, 3);
  g.set(-1.5);
  for (const v of [0, 0, 0.05, 0.5]) h.observe({ op: 'get' }, v);
  h.observe({ op: 'head' }, 5);
  const e = parseExposition(await reg.metrics());
  t.equal(e.types.get('x_total'), 'counter');
  t.equal(e.types.get('lat_seconds'), 'histogram');
  t.equal(sumOf(e, 'x_total'), 5);
  t.equal(sumOf(e, 'x_total', { b: 'quote " back \\ nl \n end' }), 2);
  t.equal(sumOf(e, 'x_total', { a: (v) => v !== 'x' }), 3);
  t.equal(sumOf(e, 'g'), -1.5);
  t.same(labelValues(e, 'x_total', 'a').sort(), ['x', 'y']);
  t.ok(has(e, 'lat_seconds_bucket', { le: '+Inf' }));
  t.notOk(has(e, 'nope'));
  t.equal(sumOf(e, 'lat_seconds_count'), 5);
  t.equal(sumOf(e, 'lat_seconds_bucket', { op: 'get', le: '0' }), 2);
  t.equal(quantileOf(e, 'lat_seconds', 0.5, { op: 'get' }), 0);
  t.ok(Math.abs(quantileOf(e, 'lat_seconds', 0.75, { op: 'get' }) - 0.1) < 1e-9);
  t.equal(quantileOf(e, 'lat_seconds', 0.99, { op: 'head' }), 1, 'beyond the last bound: the last bound');
  t.ok(Number.isNaN(quantileOf(e, 'lat_seconds', 0.5, { op: 'list' })));
});

t.test('quantiles interpolate like histogram_quantile', async (t) => {
  t.equal(quantileFromBuckets([[1, 0], [2, 10], [Infinity, 10]], 0.5), 1.5);
  t.ok(Number.isNaN(quantileFromBuckets([], 0.5)));
});

t.test('timestamps, special values and bad lines', async (t) => {
  const e = parseExposition('# HELP a x\n# TYPE a gauge\na 1 1700000000000\nb{l="v"} +Inf\nc NaN\n\n');
  t.equal(sumOf(e, 'a'), 1);
  t.equal(sumOf(e, 'b'), Infinity);
  t.ok(Number.isNaN(sumOf(e, 'c')));
  t.throws(() => parseExposition('<html>nope</html>'), /cannot parse metrics line/);
  t.throws(() => parseExposition('a{l=v} 1'), /cannot parse labels/);
});
