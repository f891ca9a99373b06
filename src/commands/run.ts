/**
 * `sluice run`: give a training command SageMaker's input environment, then run it.
 *
 * Steps, cheapest first so that a bad config fails before anything slow:
 *  1. parse options and channels (--input-data-config, --channel), decide the host
 *     identity (channels/hosts.ts), write <root>/input/config/inputdataconfig.json,
 *     resourceconfig.json and hyperparameters.json, create model/ and output/ (removing an
 *     earlier run's output/failure);
 *  2. prepare each channel in order:
 *       File      list (or read the manifest), keep this host's shard, download
 *                 into <root>/input/data/<channel> (channels/file-mode.ts);
 *       FastFile  mount the prefix at <root>/input/data/<channel> (fuse/fastfile.ts);
 *       Pipe      list, then serve FIFOs <root>/input/data/<channel>_<epoch>
 *                 (pipe/pipe-channel.ts) with each epoch's shard, shuffled when a
 *                 ShuffleConfig.Seed is set; from a resume point (resume=E:N, or
 *                 SLUICE_RESUME_<CHANNEL>, which wins) when given, its progress in
 *                 <root>/input/data/<channel>.progress.json (pipe/resume.ts);
 *  3. run the command as a child with the variables of sagemaker-training-toolkit
 *     (channels/sagemaker-env.ts), stdin and stdout inherited, stderr passed through
 *     sluice so that its last lines can go to output/failure (channels/failure.ts);
 *  4. when it exits: write output/failure if it failed (output/success if not), stop the pipes (their FIFOs are
 *     removed), unmount, close the S3 clients, and exit with its code (killed by signal
 *     n: 128 + n, as a shell does).
 * SIGTERM/SIGINT: forwarded to the child while it runs (it decides how to stop, then
 * step 4), except a SIGINT when stdin is a terminal: Ctrl-C reached the child already;
 * during step 2 they abort the preparation, undo it, and exit 128 + n.
 * A Pipe channel that fails (object vanished, S3 down) stops the child with SIGTERM and
 * sluice reports the channel's error.
 */
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { setMaxListeners } from 'node:events';
import type { Readable } from 'node:stream';
import { mkdir, readdir, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { logMemoryPlan } from '../config/memory.js';
import { configureLogging, log } from '../log.js';
import { helpFor, OPTIONS, parseOptions, type Options } from '../config/options.js';
import { AbortedError, ChildFailedError, ConfigError, InvalidArgumentError, SluiceError } from '../errors.js';
import { METRICS_PORT_FALLBACKS, startMetricsServer, type MetricsServer } from '../metrics/server.js';
import { startSummary, summarizeDownload } from '../metrics/summary.js';
import { channelEpoch } from '../metrics/metrics.js';
import type { ObjectClient } from '../s3/object-client.js';
import { clientOptionsFrom, createObjectClient } from '../s3/s3-client.js';
import { parseS3Uri } from '../s3/uri.js';
import { FASTFILE_OPTION_NAMES, mountFastFile } from '../fuse/fastfile.js';
import { checkFuseAvailable, refuseDeadMount } from '../fuse/mountpoint.js';
import { DEFAULT_PIPE_MAX_INFLIGHT, startPipeChannel, type PipeChannel } from '../pipe/pipe-channel.js';
import { parseResume, progressFilePath, resumeEnvName } from '../pipe/resume.js';
import { planBudgets, type ChannelBudget } from '../channels/budget.js';
import { downloadChannel } from '../channels/file-mode.js';
import { resolveHosts, type HostIdentity } from '../channels/hosts.js';
import { hyperParametersFrom, readHyperParametersFlag, type HyperParameters } from '../channels/hyperparameters.js';
import { checkChannels, INPUT_MODES, parseChannelFlag, parseInputDataConfigText, type ChannelConfig, type InputMode, type TrainingJobSettings } from '../channels/input-config.js';
import { clearOutcome, failureText, TailBuffer, writeFailure, writeSuccess } from '../channels/failure.js';
import { defaultInterface, instanceTypeFromDmi, UNKNOWN_INSTANCE_TYPE } from '../channels/node-facts.js';
import { fromJs } from '../channels/pyjson.js';
import { sagemakerEnv, sagemakerPaths, writeConfigFiles, type SageMakerPaths } from '../channels/sagemaker-env.js';
import { shardObjects } from '../channels/shard.js';
import { shuffled } from '../channels/shuffle.js';
import { isFolderMarker, listChannel, type ChannelItem, type ChannelUnit, type ClientFor } from '../channels/sources.js';
import type { DiskCache } from '../cache/disk-cache.js';
import { withCacheBucket } from '../cache/cache-bucket.js';
import { acquireDiskTier, TieredClient, tierNamespace } from '../cache/tiered-client.js';

export const summary = 'Give a training command the SageMaker input environment: File, FastFile and Pipe channels, then run it.';

const RUN_OPTION_NAMES = [
  'inputDataConfig', 'channel', 'root', 'inputMode', 'hostConfig', 'currentHost', 'hosts', 'hostCount', 'epochs', 'progress',
  // --order-file is per channel (order-file=PATH): each channel is its own mount.
  'hyperparameters', 'instanceType', ...FASTFILE_OPTION_NAMES.filter((n): n is Exclude<typeof n, 'orderFile'> => n !== 'orderFile'), 'metricsPort', 'metricsHost', 'logLevel', 'logFormat', 'logFile', 'skipArchived',
  'allowEmptyChannel', 'fifoWaitWarning',
] as const;
type RunOptions = Options<(typeof RUN_OPTION_NAMES)[number]>;

export function help(): string {
  return [
    'Usage: sluice run (--input-data-config FILE | --channel NAME=s3://bucket/prefix/[,...])... [options] -- <training command...>',
    '',
    'Prepares every channel as SageMaker would, then runs the command with SageMaker\'s environment:',
    '  ROOT/input/config/inputdataconfig.json, resourceconfig.json and hyperparameters.json; the',
    '  variables sagemaker-training-toolkit sets, with its exact strings (SM_CHANNEL_<NAME>, SM_CHANNELS,',
    '  SM_HOSTS, SM_CURRENT_HOST, SM_HPS, SM_HP_<NAME>, SM_NUM_GPUS, SM_TRAINING_ENV, SM_MODEL_DIR, ...;',
    '  SAGEMAKER_BASE_DIR=ROOT when ROOT is not /opt/ml); ROOT/model/, ROOT/output/data/ and',
    '  ROOT/output/intermediate/ to write into; the data under ROOT/input/data/:',
    '    File      downloaded to ROOT/input/data/NAME before the command starts; the folder then holds',
    '              exactly this run\'s objects (present files with the same size and ETag are kept,',
    '              anything else there is removed);',
    '    FastFile  mounted read-only at ROOT/input/data/NAME (needs /dev/fuse);',
    '    Pipe      streamed through FIFOs ROOT/input/data/NAME_0, NAME_1, ... one per epoch.',
    '',
    'Channels: --input-data-config takes SageMaker\'s InputDataConfig list (or a whole CreateTrainingJob',
    'request); --channel is the short form, e.g.',
    '  --channel train=s3://bucket/train/,mode=Pipe,distribution=ShardedByS3Key,seed=7',
    'sluice\'s own short-form settings: snapshot=FILE (read exactly that snapshot, no listing),',
    'snapshot-out=FILE (save the listing to repeat the run), filter=dt>=2026-06-01&region=kr',
    '(partition and glob filters, see sluice mount --help), order-file=FILE (FastFile: the script writes',
    'its epoch\'s file order there and prefetch follows it, see sluice mount --order-file), resume=E:N (a Pipe',
    'channel starts at epoch E, object N of that epoch\'s order; SLUICE_RESUME_<CHANNEL>=E:N does the same and',
    'wins; its progress is in ROOT/input/data/NAME.progress.json). Archived objects (GLACIER, DEEP_ARCHIVE)',
    'stop a Pipe or File channel before the command starts, unless --skip-archived.',
    '',
    'Host identity (for ShardedByS3Key), first present: ROOT/input/config/resourceconfig.json or',
    '--host-config; RANK and WORLD_SIZE; JOB_COMPLETION_INDEX with --host-count; --current-host with',
    '--hosts or --host-count; else the single host algo-1.',
    '',
    '--cache-size, --max-inflight and --max-connections are one budget shared by all channels.',
    'A channel with no objects under its S3Uri fails the run (--allow-empty-channel starts it empty).',
    '',
    'The command\'s exit code becomes sluice\'s (128 + n when killed by signal n). SIGTERM and SIGINT are',
    'passed to it; when it exits, sluice unmounts, removes its FIFOs and stops. When it fails, the last',
    'lines of its stderr go to ROOT/output/failure (unless it wrote that file), as on SageMaker.',
    '',
    'Options:',
    helpFor(RUN_OPTION_NAMES),
  ].join('\n');
}

/**
 * `sluice run --channel ... python3 -c '...'` without `--`: the training command's own flags
 * (-c) would be read as sluice's and refused as unknown, far from the cause. The first word
 * that is neither a flag nor a flag's value starts the command: say where `--` goes.
 */
function refuseCommandWithoutDashes(argv: readonly string[]): void {
  const booleans = new Set(RUN_OPTION_NAMES.filter((n) => OPTIONS[n].type === 'boolean').map((n) => `--${OPTIONS[n].flag}`));
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a.startsWith('-')) {
      if ((a.startsWith('--') && !a.includes('=') && !booleans.has(a)) || a === '-o') i++; // the flag's value
      continue;
    }
    const shown = argv.slice(i).join(' ');
    throw new InvalidArgumentError(`unexpected argument ${JSON.stringify(a)}`, {
      hint: `Put the training command after --: sluice run ${argv.slice(0, i).join(' ')} -- ${shown.length > 60 ? `${shown.slice(0, 57)}...` : shown}`,
    });
  }
}

/**
 * A FastFile channel's folder that holds files: an earlier run on this --root downloaded the
 * channel there in File mode (sluice never writes into a FastFile channel's folder). The
 * mount point check would say "choose an empty folder", a folder the user never chose.
 */
async function refuseEarlierFileChannel(name: string, mountpoint: string, root: string): Promise<void> {
  let entries: string[];
  try { entries = await readdir(mountpoint); } catch { return; } // a stale mount or no folder: prepareMountpoint says
  if (entries.length === 0) return;
  throw new ConfigError(`channel ${JSON.stringify(name)} is FastFile in this run, but ${mountpoint} holds ${entries.length} entr${entries.length === 1 ? 'y' : 'ies'} that an earlier run on this --root left (a File-mode channel of that name downloads there)`, {
    hint: `Remove them (rm -r ${mountpoint}) or give this run another --root than ${root}`,
  });
}

/** Channels from --input-data-config and every --channel, with their warnings. */
async function loadChannels(o: RunOptions): Promise<{ channels: ChannelConfig[]; warnings: string[]; job: TrainingJobSettings }> {
  // Any case, as a channel's mode= (--input-mode pipe is Pipe).
  const mode = INPUT_MODES.find((m) => m.toLowerCase() === o.inputMode.toLowerCase()) ?? (o.inputMode as InputMode);
  const channels: ChannelConfig[] = [];
  const warnings: string[] = [];
  let job: TrainingJobSettings = {};
  if (o.inputDataConfig !== undefined) {
    let text: string;
    try {
      text = await readFile(o.inputDataConfig, 'utf8');
    } catch (err) {
      throw new ConfigError(`cannot read --input-data-config ${o.inputDataConfig} (${(err as NodeJS.ErrnoException).code ?? String(err)})`, { hint: 'Pass the path of a JSON file with the InputDataConfig list' });
    }
    const parsed = parseInputDataConfigText(text, o.inputDataConfig, mode);
    channels.push(...parsed.channels);
    warnings.push(...parsed.warnings);
    job = parsed.job ?? {};
  }
  for (const flag of o.channel ?? []) {
    const parsed = parseChannelFlag(flag, mode);
    channels.push(...parsed.channels);
    warnings.push(...parsed.warnings);
  }
  if (channels.length === 0) {
    throw new ConfigError('no channels defined', { hint: 'Pass --input-data-config FILE or --channel NAME=s3://bucket/prefix/' });
  }
  checkChannels(channels);
  resumeFromEnv(channels, warnings);
  return { channels, warnings, job };
}

/** SLUICE_RESUME_<CHANNEL> over a channel's own resume point (a restarted job sets it; pipe/resume.ts). */
function resumeFromEnv(channels: ChannelConfig[], warnings: string[]): void {
  for (const c of channels) {
    const name = resumeEnvName(c.name);
    const v = process.env[name];
    if (v === undefined || v === '') continue;
    if (c.inputMode !== 'Pipe') {
      warnings.push(`${name} is set, but channel ${JSON.stringify(c.name)} is ${c.inputMode}: only Pipe channels resume (${c.inputMode} serves every object whenever the script reads it)`);
      continue;
    }
    c.resumeFrom = parseResume(v, name);
  }
}

/** hyperparameters.json's content: the request's, then --hyperparameters over it; undefined when neither. */
async function loadHyperParameters(o: RunOptions, job: TrainingJobSettings, warnings: string[]): Promise<HyperParameters | undefined> {
  if (job.hyperParameters === undefined && o.hyperparameters === undefined) return undefined;
  return {
    ...(job.hyperParameters !== undefined ? hyperParametersFrom(fromJs(job.hyperParameters), `${o.inputDataConfig}: HyperParameters`, warnings) : {}),
    ...(o.hyperparameters !== undefined ? await readHyperParametersFlag(o.hyperparameters, warnings) : {}),
  };
}

/**
 * The command's environment: sluice's own, the request's Environment (SageMaker sets it in
 * the container), TRAINING_JOB_NAME from the request's name, then the toolkit's variables.
 * A name the kernel cannot pass (with "=" or NUL, from a hyperparameter's name) is left out.
 */
async function childEnv(paths: SageMakerPaths, job: TrainingJobSettings): Promise<NodeJS.ProcessEnv> {
  const base: NodeJS.ProcessEnv = { ...process.env, ...job.environment };
  if (job.name !== undefined && base.TRAINING_JOB_NAME === undefined) base.TRAINING_JOB_NAME = job.name;
  const env = { ...base, ...await sagemakerEnv(paths, base) };
  for (const [k, v] of Object.entries(env)) {
    if (k === '' || k.includes('=') || k.includes('\0') || v?.includes('\0')) {
      log.warn({ variable: k.slice(0, 60) }, 'variable left out of the training command\'s environment: its name or value cannot be passed');
      delete env[k];
    }
  }
  return env;
}

/**
 * After the command exits, how long its stderr may still deliver its last lines: the pipe
 * closes at once unless a process it started still holds it, which must not keep sluice.
 */
const STDERR_DRAIN_MS = 2000;

const signalNumber = (sig: NodeJS.Signals): number => os.constants.signals[sig] ?? 15;

/** Undo steps, run in reverse order of registration; each failure is logged, not thrown. */
class Cleanup {
  private readonly steps: { what: string; fn: () => Promise<void> }[] = [];
  add(what: string, fn: () => Promise<void>): void { this.steps.push({ what, fn }); }
  async run(): Promise<void> {
    while (this.steps.length > 0) {
      const s = this.steps.pop()!;
      try { await s.fn(); } catch (err) { log.warn({ err, step: s.what }, 'cleanup step failed'); }
    }
  }
}

export async function run(argv: string[]): Promise<number> {
  const dd = argv.indexOf('--');
  const head = dd < 0 ? argv : argv.slice(0, dd);
  if (head.includes('--help') || head.includes('-h')) {
    process.stdout.write(help() + '\n');
    return 0;
  }
  if (dd < 0) refuseCommandWithoutDashes(argv);
  const { options: o, rest, positionals, given } = parseOptions('run', argv, RUN_OPTION_NAMES);
  configureLogging(o);
  if (positionals.length > 0) throw new InvalidArgumentError(`unexpected argument ${JSON.stringify(positionals[0])}`, { hint: 'Put the training command after --, e.g. sluice run --channel train=s3://bucket/train/ -- python train.py' });
  if (rest.length === 0) throw new InvalidArgumentError('no training command given', { hint: 'Add it after --, e.g. sluice run --channel train=s3://bucket/train/ -- python train.py' });

  const { channels, warnings, job } = await loadChannels(o);
  const hyperparameters = await loadHyperParameters(o, job, warnings);
  for (const w of warnings) log.warn(w);
  // FastFile needs /dev/fuse: say so now, not after another channel's long download.
  if (channels.some((c) => c.inputMode === 'FastFile')) checkFuseAvailable();
  const paths = sagemakerPaths(o.root);
  // A dead FUSE mount at (or above) --root: one line naming the fix, not an ENOTCONN from the first file read.
  await refuseDeadMount(paths.root, 'the --root folder');
  const id = await resolveHosts(paths.configDir, {
    ...(o.hostConfig !== undefined ? { hostConfig: o.hostConfig } : {}),
    ...(o.currentHost !== undefined ? { currentHost: o.currentHost } : {}),
    ...(o.hosts !== undefined ? { hosts: o.hosts } : {}),
    ...(o.hostCount !== undefined ? { hostCount: o.hostCount } : {}),
  });
  // After the checks of the command line and the channels: a user error stays one line.
  logMemoryPlan(o);
  log.info({ currentHost: id.currentHost, hosts: id.hosts, source: id.source }, 'host identity');
  const instanceType = o.instanceType ?? job.instanceType ?? await instanceTypeFromDmi() ?? UNKNOWN_INSTANCE_TYPE;
  await writeConfigFiles(paths, channels, id, { hyperparameters, instanceType, networkInterfaceName: await defaultInterface() });
  await clearOutcome(paths.outputDir);
  // From the files just written: a bad SageMaker-written file stops the run before any download.
  const env = await childEnv(paths, job);

  const cleanup = new Cleanup();
  const abort = new AbortController();
  setMaxListeners(0, abort.signal); // each listing, HEAD and download listens on it
  let child: ChildProcessByStdio<null, null, Readable> | undefined;
  let stopSignal: NodeJS.Signals | undefined;
  const onSignal = (sig: NodeJS.Signals) => {
    stopSignal ??= sig;
    if (child && child.exitCode === null && child.signalCode === null) {
      // Ctrl-C at a terminal already reached the child (same foreground process group):
      // a second SIGINT would interrupt its own clean-up.
      if (sig === 'SIGINT' && process.stdin.isTTY) return;
      log.info({ signal: sig }, 'passing the signal to the training command');
      child.kill(sig);
    } else {
      abort.abort(new AbortedError(`stopped by ${sig}`));
    }
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    const pipes: { name: string; pipe: PipeChannel }[] = [];
    const metrics = await startMetrics(o, cleanup, given.has('metricsPort'));
    // One budget for the process: each channel gets its share (channels/budget.ts).
    const budgets = planBudgets(channels, o);
    log.info({ channels: Object.fromEntries(budgets.byChannel), sharedPoolConnections: budgets.sharedPoolConnections }, 'memory and connection budget per channel');
    // The disk tier (--cache-dir) is opened once here and shared by every channel (mounts take their own reference).
    const tier = await acquireDiskTier(o);
    if (tier) cleanup.add('disk tier', tier.release);
    const clientFor = clientCache(o, cleanup, budgets.sharedPoolConnections, tier?.cache);
    for (const c of channels) metrics?.setReady(`channel ${c.name}`, false);
    for (const c of channels) {
      if (abort.signal.aborted) break;
      try {
        const pipe = await prepareChannel(c, o, budgets.byChannel.get(c.name)!, paths, id, clientFor, cleanup, abort.signal);
        if (pipe) pipes.push({ name: c.name, pipe });
        metrics?.setReady(`channel ${c.name}`, true);
      } catch (err) {
        if (abort.signal.aborted) break;
        throw err;
      }
    }
    if (abort.signal.aborted) {
      log.info({ signal: stopSignal }, 'stopped before the training command started');
      return 128 + signalNumber(stopSignal ?? 'SIGTERM');
    }

    log.info({ command: rest }, 'starting the training command');
    const c = spawn(rest[0]!, rest.slice(1), { stdio: ['inherit', 'inherit', 'pipe'], env });
    child = c;
    const stderrTail = new TailBuffer();
    const stderrClosed = new Promise<void>((resolve) => { c.stderr.once('close', resolve); });
    c.stderr.on('data', (b: Buffer) => stderrTail.push(b));
    c.stderr.pipe(process.stderr, { end: false });
    // A throughput line per channel once a minute and at exit (src/metrics/summary.ts).
    const summaryLines = startSummary();
    cleanup.add('summary', async () => { await summaryLines.stop(); });
    let pipeError: unknown;
    for (const { name, pipe } of pipes) {
      pipe.done.catch((err: unknown) => {
        if (pipeError !== undefined) return;
        pipeError = err;
        log.error({ err, channel: name }, 'Pipe channel failed; stopping the training command');
        if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
      });
    }
    const outcome = await new Promise<{ code: number | null; signal: NodeJS.Signals | null } | Error>((resolve) => {
      c.once('error', (err) => resolve(err));
      c.once('exit', (code, signal) => resolve({ code, signal }));
    });
    if (outcome instanceof Error) {
      const code = (outcome as NodeJS.ErrnoException).code;
      throw new ChildFailedError(`cannot start the training command ${JSON.stringify(rest[0])} (${code ?? outcome.message})`, code === 'ENOENT' ? 127 : 126, {
        hint: code === 'ENOENT' ? 'Check the command name and PATH' : 'Check the command is executable',
      });
    }
    const exitCode = outcome.code ?? 128 + signalNumber(outcome.signal ?? 'SIGTERM');
    log.info({ exitCode, signal: outcome.signal }, 'training command exited');
    // The last of its stderr, unless a process it started holds the pipe open.
    const closed = await Promise.race([stderrClosed.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), STDERR_DRAIN_MS).unref())]);
    // A loop that got no CPU for the whole wait runs the timer before it polls the pipe: let
    // one poll read what the command wrote before it exited (its last lines: the reason).
    if (!closed) await new Promise((r) => setImmediate(r));
    c.stderr.destroy();
    if (pipeError !== undefined) throw pipeError;
    if (exitCode !== 0) {
      const how = outcome.signal ? `was killed by ${outcome.signal}` : `exited with code ${exitCode}`;
      await writeFailure(paths.outputDir, failureText(`The training command ${JSON.stringify(rest.join(' ').slice(0, 200))} ${how}.`, stderrTail.text()));
    } else {
      await writeSuccess(paths.outputDir);
    }
    return exitCode;
  } catch (err) {
    // sluice's own failure (a channel, a Pipe): the reason goes where SageMaker's would.
    if (!(err instanceof AbortedError)) {
      const line = err instanceof SluiceError ? err.oneLine() : err instanceof Error ? err.message : String(err);
      await writeFailure(paths.outputDir, `sluice: ${line}\n`);
    }
    throw err;
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    await cleanup.run();
  }
}

async function startMetrics(o: RunOptions, cleanup: Cleanup, portGiven: boolean): Promise<MetricsServer | undefined> {
  if (o.metricsPort < 0) return undefined;
  let server: MetricsServer;
  try {
    server = await startMetricsServer({ host: o.metricsHost, port: o.metricsPort, fallbackPorts: portGiven ? 0 : METRICS_PORT_FALLBACKS });
  } catch (err) {
    // Metrics are for operators; a busy port must not stop a training job.
    log.warn({ err, port: o.metricsPort }, 'metrics endpoint not started (pass --metrics-port 0 for a free port, or -1 to disable)');
    return undefined;
  }
  if (server.port !== o.metricsPort && o.metricsPort !== 0) log.info({ url: `${server.url}/metrics`, taken: o.metricsPort }, `metrics port ${o.metricsPort} is taken (another sluice?): metrics at ${server.url}/metrics`);
  else log.info({ url: server.url }, 'metrics endpoint');
  cleanup.add('metrics server', () => server.close());
  return server;
}

/** One ObjectClient per bucket (manifests may point at several), closed at cleanup. */
function clientCache(o: RunOptions, cleanup: Cleanup, poolConnections: number, tier?: DiskCache): ClientFor {
  const clients = new Map<string, ObjectClient>();
  cleanup.add('S3 clients', async () => { await Promise.all([...clients.values()].map((c) => c.close())); });
  return (bucket) => {
    let c = clients.get(bucket);
    if (!c) {
      c = createObjectClient(clientOptionsFrom(bucket, { ...o, maxConnections: poolConnections }));
      // With --cache-bucket and --cache-dir, File mode and Pipe read through them too.
      c = withCacheBucket(c, o);
      if (tier) c = new TieredClient(c, tier, tierNamespace(o, bucket));
      clients.set(bucket, c);
    }
    return c;
  };
}

/** Sharded (and, with a seed, shuffled) units of one epoch, in pipe order. */
export function epochUnits(units: ChannelUnit[], c: ChannelConfig, id: HostIdentity, epoch: number): ChannelUnit[] {
  const shard = shardObjects(units, {
    distribution: c.distribution, hostIndex: id.hostIndex, hostCount: id.hostCount, epoch,
    ...(c.seed !== undefined ? { seed: c.seed } : {}),
  });
  return c.seed === undefined ? shard : shuffled(shard, c.seed, epoch);
}

/**
 * A channel whose S3Uri matches no object (folder markers do not count): the same
 * one-line error in every mode, unless --allow-empty-channel lets it start empty.
 */
function emptyChannel(c: ChannelConfig, o: RunOptions, clog: typeof log): void {
  if (o.allowEmptyChannel) {
    clog.warn({ uri: c.s3Uri }, 'the channel is empty (no objects under its S3Uri); starting anyway (--allow-empty-channel)');
    return;
  }
  throw new ConfigError(`channel ${JSON.stringify(c.name)}: no objects under ${c.s3Uri}`, {
    hint: 'Check the S3Uri (a prefix matches keys that start with it), or pass --allow-empty-channel to start with an empty channel',
  });
}

async function prepareChannel(
  c: ChannelConfig, o: RunOptions, budget: ChannelBudget, paths: SageMakerPaths, id: HostIdentity, clientFor: ClientFor, cleanup: Cleanup, signal: AbortSignal,
): Promise<PipeChannel | undefined> {
  const clog = log.child({ channel: c.name, mode: c.inputMode });
  channelEpoch.set({ channel: c.name, mode: c.inputMode }, 0);
  if (c.inputMode === 'FastFile') {
    const mountpoint = path.join(paths.dataDir, c.name);
    await mkdir(mountpoint, { recursive: true }).catch(() => undefined); // prepareMountpoint reports what is wrong
    await refuseEarlierFileChannel(c.name, mountpoint, paths.root);
    const mount = await mountFastFile({
      uri: c.s3Uri, mountpoint, channel: c.name, options: { ...o, ...budget, orderFile: c.orderFile },
      dataset: { snapshot: c.snapshot, snapshotOut: c.snapshotOut, filter: c.filters, skipArchived: o.skipArchived },
    });
    cleanup.add(`unmount ${mountpoint}`, () => mount.unmount());
    // The script starts with every FastFile channel completely listed, so a listing error
    // stops the run before the script starts (as SageMaker reports a bad channel).
    await mount.listed;
    if (mount.core.fileCount === 0) emptyChannel(c, o, clog);
    clog.info({ mountpoint, files: mount.core.entryCount }, 'FastFile channel mounted');
    void mount.gone.then(() => clog.error({ mountpoint }, 'the FastFile mount was removed from outside: the training command now sees an empty folder'));
    return undefined;
  }
  const listing = await listChannel(c, clientFor, signal, o.skipArchived);
  if (listing.units.length === 0) emptyChannel(c, o, clog);
  if (c.inputMode === 'File') {
    // Folder markers become folders on every host; only data objects are sharded (and counted).
    const markers = listing.objects.filter((x) => isFolderMarker(x.key));
    const mine = shardObjects(listing.objects.filter((x) => !isFolderMarker(x.key)), {
      distribution: c.distribution, hostIndex: id.hostIndex, hostCount: id.hostCount, epoch: 0,
      ...(c.seed !== undefined ? { seed: c.seed } : {}),
    });
    if (mine.length === 0) clog.warn({ objects: listing.objects.length, hosts: id.hostCount }, 'this host\'s shard is empty');
    // The summary line of a File channel covers its download (src/metrics/summary.ts).
    await summarizeDownload(c.name, () => downloadChannel({
      channel: c.name, dataDir: paths.dataDir, stateDir: path.join(paths.root, '.sluice', 'file-mode'), objects: [...markers, ...mine], partSize: o.partSize, maxInflight: budget.maxInflight,
      maxConnections: budget.maxConnections, progress: o.progress as 'auto' | 'bar' | 'log' | 'none', signal,
    }));
    return undefined;
  }
  // Pipe: the shard without a seed is the same every epoch; compute it once.
  const fixed = c.seed === undefined ? epochUnits(listing.units, c, id, 0) : undefined;
  const itemsForEpoch = (epoch: number): ChannelItem[] => (fixed ?? epochUnits(listing.units, c, id, epoch)).flatMap((u) => u.items);
  const pipe = await startPipeChannel({
    client: clientFor(parseS3Uri(c.s3Uri).bucket),
    channel: c.name,
    dataDir: paths.dataDir,
    itemsForEpoch,
    recordWrapper: c.recordWrapper,
    compression: c.compression,
    partSize: o.partSize,
    // Its share of --max-inflight, and never more read-ahead than one pipe can use.
    maxInflight: Math.min(budget.maxInflight, DEFAULT_PIPE_MAX_INFLIGHT),
    maxRequests: budget.maxConnections,
    spillDir: path.join(paths.root, '.sluice', 'spill'),
    waitWarningMs: o.fifoWaitWarning,
    ...(o.epochs !== undefined ? { epochs: o.epochs } : {}),
    ...(c.resumeFrom !== undefined ? { resumeFrom: c.resumeFrom } : {}),
    progressFile: progressFilePath(paths.dataDir, c.name),
  });
  cleanup.add(`stop Pipe channel ${c.name}`, () => pipe.stop());
  clog.info({ fifo: pipe.fifoPath(c.resumeFrom?.epoch ?? 0), units: listing.units.length }, 'Pipe channel ready');
  return pipe;
}
