/**
 * `sluice bench [scenarios.yaml] [--out DIR] [--quick] [--https]`: the data-source benchmark.
 *
 * Loads and checks the scenario file, prints the settings (latency profiles, the
 * peers found), runs everything (src/bench/runner.ts: local S3 server, latency
 * proxy, link limit, sluice's modes and the peers, every byte verified), then
 * prints the Markdown table on stdout and writes <out>/<timestamp>.json and
 * <out>/<timestamp>/<scenario>.svg. Progress lines go to stderr. Ctrl-C stops
 * after the current run and cleans up (mounts, servers, temp folders).
 * Exit code 1 when any bytes read differ from the source, 0 otherwise.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseOptions } from '../config/options.js';
import { InvalidArgumentError } from '../errors.js';
import { describeProfile } from '../bench/latency-proxy.js';
import { fioTables, hasWrongBytes, markdownTable, targetsTable, writeJson } from '../bench/report.js';
import { runBench } from '../bench/runner.js';
import { loadScale, runScale, scaleTable } from '../bench/scale.js';
import { loadBenchConfig, PEERS, withHttpsTwins } from '../bench/scenarios.js';
import { writeSvgs } from '../bench/svg.js';
import { whyUnavailable } from '../bench/targets.js';

export const summary = 'Benchmark the input modes and their peers against emulated S3 latency.';

const PACKAGE_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const DEFAULT_FILE = path.join(PACKAGE_ROOT, 'bench', 'scenarios', 'default.yaml');

function help(): string {
  return [
    'Usage: sluice bench [scenarios.yaml] [--out DIR] [--quick] [--https]',
    '',
    summary,
    '',
    'Starts a local S3 server (s3rver) with the datasets the scenario file names, and puts',
    'a latency proxy of its own in front of it: each request waits a fixed time to first',
    'byte, and each connection is capped by a token bucket, like one S3 TCP stream. It then',
    'measures the link limit (raw parallel ranged GETs, no filesystem) and runs each',
    "scenario with sluice's File, FastFile and Pipe modes and with the peers that are",
    'installed (s3fs-fuse, rclone mount, aws s3 cp), 1 and several reader processes, a fresh',
    'mount or download per run. Every byte read is checked against the source (sha256);',
    'peak RSS and CPU seconds per GB of each target process are recorded.',
    '',
    'Output: a Markdown table on stdout (each figure the median of the runs, as a fraction',
    'of the link limit and as sluice ÷ peer), DIR/<timestamp>.json with every figure, and',
    'DIR/<timestamp>/<scenario>.svg charts. Progress goes to stderr.',
    '',
    'Arguments:',
    `  scenarios.yaml   Scenario file (default: bench/scenarios/default.yaml). Names the`,
    '                   latency profiles, datasets, modes, reader counts and peers.',
    'Options:',
    '  --out DIR        Where to write results (default: bench-results).',
    '  --quick          One repetition per figure and half the time limits.',
    '  --https          Also run every scenario over HTTPS: each profile gets a twin',
    '                   NAME-https whose proxy terminates TLS with a CA made for the',
    '                   run, trusted by each client through its own option (sluice and',
    '                   aws: AWS_CA_BUNDLE; s3fs: CURL_CA_BUNDLE; rclone: --ca-cert).',
    '                   A profile can also set https: true in the scenario file.',
    '  --help, -h       Show this help.',
    '',
    'Peers are found on PATH; install them with: apt-get install -y s3fs rclone (and',
    'pip install awscli). Missing ones are reported as "not available", not run.',
    'Needs FUSE (/dev/fuse, libfuse2) for FastFile, s3fs and rclone.',
  ].join('\n');
}

/** A `kind: scale` file (src/bench/scale.ts): the listing cost curve, no s3rver, no proxy. */
async function runScaleFile(file: string, cfg: NonNullable<Awaited<ReturnType<typeof loadScale>>>): Promise<number> {
  const say = (line: string) => process.stderr.write(`bench: ${line}\n`);
  say(`scale file ${file}: ${cfg.sizes.join(', ')} objects in folders of ${cfg.perFolder}; builds ${Object.entries(cfg.clis).map(([k, v]) => `${k}=${v}`).join(', ')}`);
  const figures = await runScale(cfg, say);
  process.stdout.write(scaleTable(figures) + '\n');
  return 0;
}

export async function run(argv: string[]): Promise<number> {
  const { positionals, extra } = parseOptions('bench', argv, [], {
    out: { type: 'string' }, quick: { type: 'boolean' }, https: { type: 'boolean' }, help: { type: 'boolean', short: 'h' },
  });
  if (extra.help) {
    process.stdout.write(help() + '\n');
    return 0;
  }
  if (positionals.length > 1) throw new InvalidArgumentError(`sluice bench takes one scenario file, got ${positionals.length} arguments`, { hint: 'See sluice bench --help' });
  const file = positionals[0] ?? DEFAULT_FILE;
  const scale = await loadScale(file);
  if (scale) return runScaleFile(file, scale);
  const loaded = loadBenchConfig(file, { quick: extra.quick === true });
  const config = extra.https === true ? withHttpsTwins(loaded) : loaded;
  const outDir = typeof extra.out === 'string' && extra.out ? extra.out : 'bench-results';
  const say = (line: string) => process.stderr.write(`bench: ${line}\n`);

  say(`scenario file ${file}, ${config.repetitions} repetition(s) per figure`);
  for (const p of config.profiles) say(`profile ${describeProfile(p)}`);
  const peers = PEERS.filter((p) => config.scenarios.some((s) => s.peers.includes(p)));
  for (const peer of peers) say(`peer ${peer}: ${whyUnavailable(peer) ?? 'found'}`);

  const ac = new AbortController();
  const onSignal = () => { say('interrupted: stopping after the current run'); ac.abort(); };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    const res = await runBench(config, { log: say, signal: ac.signal });
    const json = await writeJson(res, outDir);
    const svgs = await writeSvgs(res, path.join(outDir, path.basename(json, '.json')));
    const fio = fioTables(res);
    process.stdout.write(markdownTable(res) + '\n\n' + (fio ? fio + '\n' : '') + targetsTable(res) + '\n\n');
    process.stdout.write(`JSON: ${json}\n`);
    process.stdout.write(`Charts: ${svgs.join(', ')}\n`);
    const bad = res.figures.filter(hasWrongBytes);
    if (bad.length > 0) {
      say(`WRONG BYTES read by: ${bad.map((f) => `${f.scenario}/${f.profile}/${f.target}x${f.readers}`).join(', ')}`);
      return 1;
    }
    return 0;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
