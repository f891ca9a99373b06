import t from 'tap';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../../src/errors.js';
import { loadBenchConfig, parseBenchConfig, withHttpsTwins } from '../../src/bench/scenarios.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const smoke = readFileSync(path.join(ROOT, 'bench/scenarios/smoke.yaml'), 'utf8');

t.test('the default file parses into the issue\'s scenarios', async (t) => {
  const c = loadBenchConfig(path.join(ROOT, 'bench/scenarios/default.yaml'));
  t.ok(c.repetitions >= 3, 'several repetitions');
  t.same(c.profiles.map((p) => p.name), ['s3-like', 'no-latency']);
  t.same(c.profiles[0], { name: 's3-like', ttfbMs: 25, bytesPerSec: 80e6 });
  t.same(c.profiles[1], { name: 'no-latency', ttfbMs: 0, bytesPerSec: 0 });
  const names = c.scenarios.map((s) => s.name);
  for (const n of ['A', 'B', 'C', 'D', 'random', 'ttfb', 'list']) t.ok(names.includes(n), `scenario ${n}`);
  const a = c.scenarios.find((s) => s.name === 'A')!;
  t.equal(a.metric, 'files/s');
  t.same(a.modes, ['File', 'FastFile', 'Pipe']);
  t.same(a.peers, ['s3fs', 'rclone', 'aws']);
  t.equal(c.scenarios.find((s) => s.name === 'D')!.metric, 'MB/s');
  t.equal(c.datasets['keys-5k']!.smallFiles!.count, 5000);
  t.ok(c.scenarios.some((s) => s.profiles.includes('no-latency')), 'the no-latency profile is used');
  const r = c.scenarios.find((s) => s.name === 'random')!;
  t.same(r.random, { threads: 8, blockSize: 65536, ops: 2000 });
});

t.test('--quick keeps one repetition and halves time limits', async (t) => {
  const full = parseBenchConfig(smoke.replace('repetitions: 1', 'repetitions: 3'), 'smoke.yaml');
  const quick = parseBenchConfig(smoke.replace('repetitions: 1', 'repetitions: 3'), 'smoke.yaml', { quick: true });
  t.equal(full.repetitions, 3);
  t.equal(quick.repetitions, 1);
  t.equal(quick.scenarios[0]!.maxSeconds, full.scenarios[0]!.maxSeconds / 2);
});

t.test('problems are one-line ConfigErrors naming the field', async (t) => {
  const cases: [string, string, RegExp][] = [
    ['ttfbMs: 5', 'ttfbMs: -5', /ttfbMs/],
    ['bandwidth: 80MB/s', 'bandwidth: fast', /bandwidth.*not a size/],
    ['dataset: tiny-small }', 'dataset: nope }', /unknown dataset "nope"/],
    ['readers: [2]', 'readers: [0]', /readers must be a list of integers/],
    ['modes: [File, FastFile, Pipe]', 'modes: [File, Turbo]', /unknown "Turbo"/],
    ['kind: random', 'kind: sideways', /kind "sideways" is unknown/],
    ['limit: { dataset: tiny-large', 'limit: { dataset: tiny-small', /limit.dataset must have largeFiles/],
  ];
  for (const [from, to, re] of cases) {
    const text = smoke.replace(from, to);
    t.not(text, smoke, `fixture edit ${from}`);
    let caught: unknown;
    try { parseBenchConfig(text, 'x.yaml'); } catch (err) { caught = err; }
    t.ok(caught instanceof ConfigError, `${to}: a ConfigError`);
    t.match((caught as ConfigError).message, re, to);
    t.notOk((caught as ConfigError).oneLine().includes('\n'), `${to}: one line`);
  }
  t.throws(() => parseBenchConfig('a: [', 'x.yaml'), /not valid YAML/);
  t.throws(() => parseBenchConfig('- 1', 'x.yaml'), /top level must be a mapping/);
  t.throws(() => loadBenchConfig('/nonexistent.yaml'), /cannot read scenario file/);
});

t.test('--https twins every plain profile and runs each scenario under both; warm is checked', async (t) => {
  const c = loadBenchConfig(path.join(ROOT, 'bench', 'scenarios', 'cpu-per-gb.yaml'));
  t.same(c.scenarios.map((s) => [s.name, s.warm === true]), [['cpu-fresh', false], ['cpu-warm', true]], 'the CPU-per-GB file: a fresh and a warm daemon');
  const h = withHttpsTwins(c);
  t.same(h.profiles.map((p) => [p.name, p.https === true]), [['no-latency', false], ['no-latency-https', true]]);
  for (const s of h.scenarios) t.same(s.profiles, ['no-latency', 'no-latency-https'], `${s.name} runs over HTTP and HTTPS`);
  t.same(withHttpsTwins(h).profiles.length, 2, 'idempotent');
});

t.test('readerHash: after by default, inline per file or scenario; readerKeep sized; bad values named', async (t) => {
  const c = parseBenchConfig(smoke, 'smoke.yaml');
  t.ok(c.scenarios.every((s) => s.readerHash === 'after'), 'hash after the timed span by default');
  t.equal(c.readerKeepBytes, 1024 ** 3, '1 GiB keep budget by default');
  const d = parseBenchConfig(smoke.replace('defaults:', 'readerKeep: 64MiB\ndefaults:\n  readerHash: inline'), 'smoke.yaml');
  t.ok(d.scenarios.every((s) => s.readerHash === 'inline'));
  t.equal(d.readerKeepBytes, 64 * 1024 * 1024);
  const one = parseBenchConfig(smoke.replace('{ name: small,', '{ name: small, readerHash: inline,'), 'smoke.yaml');
  t.equal(one.scenarios[0]!.readerHash, 'inline');
  t.equal(one.scenarios[1]!.readerHash, 'after');
  t.throws(() => parseBenchConfig(smoke.replace('defaults:', 'defaults:\n  readerHash: later'), 'smoke.yaml'), { name: 'ConfigError', message: /defaults\.readerHash "later" is unknown/ });
});

t.test('order (issue 48): listing by default; shuffled and order-file with a seed; sequential only; bad values named', async (t) => {
  const c = parseBenchConfig(smoke, 'smoke.yaml');
  t.ok(c.scenarios.every((s) => s.order === 'listing'));
  const o = parseBenchConfig(smoke.replace('{ name: small,', '{ name: small, order: order-file, seed: 3,'), 'smoke.yaml');
  t.equal(o.scenarios[0]!.order, 'order-file');
  t.equal(o.scenarios[0]!.seed, 3);
  t.throws(() => parseBenchConfig(smoke.replace('{ name: small,', '{ name: small, order: random,'), 'smoke.yaml'), { message: /scenarios\.small\.order "random" is unknown/ });
  t.throws(() => parseBenchConfig(smoke.replace('{ name: ttfb,', '{ name: ttfb, order: shuffled,'), 'smoke.yaml'), { message: /order applies to sequential scenarios only/ });
  t.doesNotThrow(() => loadBenchConfig(path.join(ROOT, 'bench/scenarios/order-file.yaml')), 'the shipped scenario file parses');
});

t.test('ttfb-large (issue 44): the first MiB of one 100 MB file, beside both peers; a bad readBytes is named', async (t) => {
  const c = loadBenchConfig(path.join(ROOT, 'bench/scenarios/ttfb-large.yaml'));
  const sc = c.scenarios.find((s) => s.name === 'ttfb-large')!;
  t.equal(sc.kind, 'ttfb');
  t.equal(sc.readBytes, 1024 * 1024, 'the first MiB');
  t.same(sc.peers, ['s3fs', 'rclone']);
  t.same(c.datasets['one-large']!.largeFiles, { count: 1, size: 100e6 });
  t.equal(parseBenchConfig(smoke, 'smoke.yaml').scenarios.find((s) => s.kind === 'ttfb')!.readBytes, undefined, 'no readBytes: the whole file');
  t.throws(() => parseBenchConfig(smoke.replace('kind: ttfb,', 'kind: ttfb, readBytes: lots,'), 'smoke.yaml'), { name: 'ConfigError', message: /readBytes: "lots" is not a size/ });
});

t.test('server: s3rver by default, stored when asked (order-file.yaml asks); anything else named', async (t) => {
  t.equal(parseBenchConfig(smoke, 'smoke.yaml').server, 's3rver');
  t.equal(parseBenchConfig(`server: stored\n${smoke}`, 'smoke.yaml').server, 'stored');
  t.equal(loadBenchConfig(path.join(ROOT, 'bench/scenarios/order-file.yaml')).server, 'stored');
  t.throws(() => parseBenchConfig(`server: minio\n${smoke}`, 'x.yaml'), /x\.yaml: server must be s3rver or stored/);
});
