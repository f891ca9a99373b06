import t from 'tap';
import { defaultCacheSize, helpFor, OPTIONS, parseOptions, parseSize, type OptionName } from '../../src/config/options.js';
import { InvalidArgumentError } from '../../src/errors.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

t.test('sizes: binary and decimal suffixes, plain bytes', async (t) => {
  t.equal(parseSize('4096'), 4096);
  t.equal(parseSize('64KiB'), 64 * 1024);
  t.equal(parseSize('64kb'), 64_000);
  t.equal(parseSize('8MiB'), 8 * MiB);
  t.equal(parseSize('1.5GiB'), 1.5 * GiB);
  t.equal(parseSize(' 2 g '), 2 * GiB);
  for (const bad of ['', 'abc', '-1', '12XB', '1e9', '0x10']) {
    t.throws(() => parseSize(bad), InvalidArgumentError, `rejects ${JSON.stringify(bad)}`);
  }
});

t.test('default cache size: 1/8 of memory, clamped to 256 MiB .. 8 GiB', async (t) => {
  t.equal(defaultCacheSize(1 * GiB), 256 * MiB);
  t.equal(defaultCacheSize(24 * GiB), 3 * GiB);
  t.equal(defaultCacheSize(512 * GiB), 8 * GiB);
});

const NAMES = ['cacheSize', 'partSize', 'metricsPort', 'pathStyle', 'endpoint', 'maxConnections'] as const satisfies readonly OptionName[];

t.test('precedence: flag over environment over default', async (t) => {
  const none = parseOptions('mount', [], NAMES, {}, {});
  t.equal(none.options.partSize, 8 * MiB);
  t.equal(none.options.pathStyle, false);
  t.equal(none.options.endpoint, undefined);
  const env = parseOptions('mount', [], NAMES, {}, { SLUICE_PART_SIZE: '4MiB', SLUICE_PATH_STYLE: 'true' });
  t.equal(env.options.partSize, 4 * MiB);
  t.equal(env.options.pathStyle, true);
  const flag = parseOptions('mount', ['--part-size', '2MiB'], NAMES, {}, { SLUICE_PART_SIZE: '4MiB' });
  t.equal(flag.options.partSize, 2 * MiB);
});

t.test('positionals, the rest after --, and negative numbers as values', async (t) => {
  const r = parseOptions('mount', ['s3://b/p/', '/mnt', '--metrics-port', '-1', '--', 'python', '--x'], NAMES, {}, {});
  t.same(r.positionals, ['s3://b/p/', '/mnt']);
  t.same(r.rest, ['python', '--x']);
  t.equal(r.options.metricsPort, -1);
  t.equal(parseOptions('mount', ['--metrics-port=-1'], NAMES, {}, {}).options.metricsPort, -1);
});

t.test('invalid values are rejected at startup with one line naming the option', async (t) => {
  const cases: Array<[string[], NodeJS.ProcessEnv, RegExp]> = [
    [['--cache-size', '1MiB'], {}, /cache-size must be at least 4MiB/],
    [['--part-size', '1KiB'], {}, /part-size must be between/],
    [['--max-connections', '0'], {}, /max-connections must be between 1 and 1024/],
    [['--metrics-port', '70000'], {}, /metrics-port must be between/],
    [['--metrics-port', 'abc'], {}, /--metrics-port: "abc" is not an integer/],
    [[], { SLUICE_CACHE_SIZE: 'lots' }, /SLUICE_CACHE_SIZE: "lots" is not a size/],
    [[], { SLUICE_PATH_STYLE: 'maybe' }, /SLUICE_PATH_STYLE: "maybe" is not true or false/],
    [['--frobnicate'], {}, /unknown option '--frobnicate' \(sluice mount\)/],
    [['--cache-size'], {}, /argument missing/],
  ];
  for (const [argv, env, re] of cases) {
    const err = (() => { try { parseOptions('mount', argv, NAMES, {}, env); } catch (e) { return e; } return undefined; })();
    t.type(err, InvalidArgumentError, `${argv.join(' ')} ${JSON.stringify(env)}`);
    t.match((err as InvalidArgumentError).oneLine(), re);
    t.notMatch((err as InvalidArgumentError).oneLine(), /\n/, 'one line');
  }
});

t.test('every option is documented, and --help renders each flag and variable', async (t) => {
  const names = Object.keys(OPTIONS) as OptionName[];
  const help = helpFor(names);
  for (const n of names) {
    const s = OPTIONS[n] as { flag: string; env?: string; doc: string };
    t.ok(s.doc.length > 20, `${n} has a doc`);
    t.match(help, `--${s.flag}`);
    if (s.env) t.match(help, s.env);
  }
});
