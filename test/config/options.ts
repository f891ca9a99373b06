import t from 'tap';
import { closest, defaultCacheSize, defaultText, helpFor, OPTION_GROUPS, OPTIONS, parseOptions, parseSize, type OptionName, type OptionSpec } from '../../src/config/options.js';
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
  t.equal(defaultCacheSize(24_683_573_248), 2942 * MiB, 'a total the kernel reports (24 GiB less its reservations): whole MiB');
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

t.test('deployment options: octal modes, owner, log format, daemon, no-sign-request', async (t) => {
  const names = ['fileMode', 'dirMode', 'uid', 'gid', 'logFormat', 'logFile', 'noSignRequest', 'allowRoot', 'daemon'] as const;
  const d = parseOptions('mount', [], names, {}, {});
  t.same({ ...d.options }, { fileMode: 0o444, dirMode: 0o555, uid: undefined, gid: undefined, logFormat: 'auto', logFile: undefined, noSignRequest: false, allowRoot: false, daemon: false });
  const o = parseOptions('mount', ['--file-mode', '0640', '--dir-mode=750', '--uid', '1000', '--gid', '1000', '--log-format', 'json', '--no-sign-request', '--daemon'], names, {}, {});
  t.equal(o.options.fileMode, 0o640);
  t.equal(o.options.dirMode, 0o750);
  t.equal(o.options.uid, 1000);
  t.equal(o.options.logFormat, 'json');
  t.equal(o.options.noSignRequest, true);
  t.equal(o.options.daemon, true);
  t.equal(parseOptions('mount', [], names, {}, { SLUICE_FILE_MODE: '0o600', SLUICE_NO_SIGN_REQUEST: '1' }).options.fileMode, 0o600, 'from the environment, 0o prefix');
  t.throws(() => parseOptions('mount', ['--file-mode', '0999'], names, {}, {}), { code: 'SLUICE_INVALID_ARGUMENT', message: /not an octal mode/ });
  t.throws(() => parseOptions('mount', ['--file-mode', '01777'], names, {}, {}), { message: /file-mode must be octal between 000 and 777/ });
  t.throws(() => parseOptions('mount', ['--log-format', 'xml'], names, {}, {}), { message: /log-format must be auto, text or json/ });
  t.throws(() => parseOptions('mount', ['--uid', '-1'], names, {}, {}), { message: /uid must be between/ });
});

t.test('"did you mean" for a misspelled option', async (t) => {
  const names = ['cacheSize', 'partSize', 'logLevel', 'noSignRequest', 'allowOther'] as const;
  const hint = (argv: string[]) => { try { parseOptions('mount', argv, names, {}, {}); } catch (e) { return (e as InvalidArgumentError).oneLine(); } return ''; };
  t.match(hint(['--cache-szie', '1GiB']), /unknown option '--cache-szie'.*Did you mean --cache-size\?/);
  t.match(hint(['--no-sign-requests']), /Did you mean --no-sign-request\?/);
  t.match(hint(['--allow_other']), /Did you mean --allow-other\?/);
  t.match(hint(['--cache', '1GiB']), /Did you mean --cache-size\?/, 'a prefix of one option');
  t.notMatch(hint(['--frobnicate']), /Did you mean/, 'nothing close: no guess');
  t.match(hint(['--frobnicate']), /See sluice mount --help/);
  t.equal(closest('mnt', ['mount', 'run', 'bench', 'status', 'demo']), 'mount');
  t.equal(closest('xyz', ['mount', 'run']), undefined);
});

t.test('--help is grouped by topic and shows each default', async (t) => {
  const help = helpFor(['endpoint', 'cacheSize', 'partSize', 'requestTimeout', 'pathStyle', 'fileMode', 'logFormat', 'uid', 'metricsPort']);
  const titles = [...help.matchAll(/^(\S[^\n]*):$/gm)].map((m) => m[1]);
  t.same(titles, ['S3', 'Cache and read-ahead', 'Mount (FUSE)', 'Metrics and logs'], 'topics in order, empty ones left out');
  t.match(help, /--part-size BYTES \[env SLUICE_PART_SIZE\] \(default: 8MiB\)/);
  t.match(help, /--request-timeout MS \[env SLUICE_REQUEST_TIMEOUT\] \(default: 10000 ms\)/);
  t.match(help, /--path-style \[env SLUICE_PATH_STYLE\] \(default: off\)/);
  t.match(help, /--file-mode MODE \[env SLUICE_FILE_MODE\] \(default: 0444\)/);
  t.match(help, /--log-format VALUE \[env SLUICE_LOG_FORMAT\] \(default: auto\)/);
  t.match(help, /--metrics-port N \[env SLUICE_METRICS_PORT\] \(default: 9400\)/);
  t.match(help, /--cache-size BYTES \[env SLUICE_CACHE_SIZE\] \(default: [\d.]+(MiB|GiB)\)/, 'a computed default shows its value here');
  t.notMatch(help, /--uid N \[env SLUICE_UID\] \(default/, 'no default: the doc says what happens');
  for (const g of OPTION_GROUPS) for (const n of g.names) t.ok(n in OPTIONS, `group ${g.title} names option ${n}`);
  t.equal(defaultText(OPTIONS.maxInflight as OptionSpec), '512MiB');
});
