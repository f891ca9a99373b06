/**
 * `sluice mount s3://bucket/prefix/ /mnt/point [options]`: FastFile mode on its own.
 *
 * Sequence: parse and check every option; start the metrics endpoint (so /healthz
 * answers and /readyz says "not ready" while the bucket is listed); mount
 * (src/fuse/fastfile.ts); once the mount answers, mark it ready, write --ready-file and
 * print exactly one line `ready <mountpoint>` on stdout. Then stay in the foreground
 * until SIGINT or SIGTERM, unmount, remove the ready file and resolve with 0. A mount
 * removed from outside (fusermount -u, umount) ends the command the same way, on its
 * own within about a second, or at once on the next signal.
 * A signal that arrives while mounting is honoured as soon as the mount is up; a second
 * signal falls through to Node's default handler (the process dies, and the next
 * `sluice mount` cleans up the stale mount point).
 */
import { rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { helpFor, parseOptions } from '../config/options.js';
import { InvalidArgumentError } from '../errors.js';
import { checkFastFileOptions, DATASET_OPTION_NAMES, FASTFILE_OPTION_NAMES, mountFastFile } from '../fuse/fastfile.js';
import { logMemoryPlan } from '../config/memory.js';
import { configureLogging, log } from '../log.js';
import { METRICS_PORT_FALLBACKS, startMetricsServer, type MetricsServer } from '../metrics/server.js';
import { startSummary, type Summary } from '../metrics/summary.js';
import { loadMetrics } from '../metrics/metrics.js';
import { DAEMON_CHILD_ENV, mountInBackground } from './daemon.js';

export const summary = 'Mount an S3 prefix read-only at a folder (SageMaker FastFile mode).';

/**
 * 1 s after "ready": by then the first byte of a file opened at once has come (issue 44's
 * case: ~0.2 s after the mount answers), so compiling prom-client (~50 ms of CPU on the
 * shared 2-core host) does not delay it.
 */
const METRICS_BUILD_DELAY_MS = 1_000;

const NAMES = [...FASTFILE_OPTION_NAMES, 'metricsPort', 'metricsHost', 'readyFile', 'logLevel', 'logFormat', 'logFile', 'daemon', ...DATASET_OPTION_NAMES] as const;

function help(): string {
  return [
    'Usage: sluice mount s3://bucket/prefix/ /mnt/point [options]',
    '       sluice mount [s3://bucket/prefix/] /mnt/point --snapshot FILE [options]',
    '',
    summary,
    '',
    'Lists the prefix once and shows it as a read-only folder tree: "/" in keys makes',
    'folders, and the prefix is always a folder (s3://b/data means s3://b/data/). The view',
    'does not change while mounted; remount to see new objects. The mount comes up while the',
    'listing runs: until it completes, a path is looked up in S3 directly (HEAD), and listing',
    'a folder waits for it; if the listing fails, sluice unmounts and exits with the error.',
    'Files are read from S3 on demand, through a block cache and read-ahead, with each file',
    'pinned to the ETag it was listed (or looked up) with: an object overwritten since then',
    'fails reads with ESTALE, never mixed bytes.',
    '',
    'With --snapshot FILE (written by sluice snapshot or --snapshot-out) nothing is listed: the',
    'mount shows exactly the snapshot\'s objects and is complete before any request; reads are',
    'pinned to the snapshot\'s versions, so an object overwritten since fails with ESTALE.',
    '--filter keeps one partition of a Hive-style layout without listing the others. Objects in',
    'GLACIER / DEEP_ARCHIVE are shown, and opening one fails with ENODATA (see --skip-archived).',
    '',
    'Prints "ready <mountpoint>" on stdout once the mount answers (it mounts once S3 has',
    'answered the first listing request), then stays in the foreground until SIGINT or',
    'SIGTERM, and unmounts. If the mount is removed from outside (fusermount -u, umount), sluice',
    'exits on its own (exit code 0), as s3fs and mount-s3 do. A mount point left behind by a killed',
    'run ("Transport endpoint is not connected") is cleaned up and reused. With --daemon it',
    'returns once the mount is ready instead (exit status 0: mounted) and serves it from a',
    'background process.',
    '',
    'mount-s3 and s3fs names work too: sluice mount BUCKET /mnt --prefix P/ (mount-s3\'s form),',
    '--endpoint-url, --force-path-style, --foreground/-f (sluice stays in the foreground anyway),',
    '--read-only (always), --debug, --cache DIR (= --cache-dir) and -o allow_other,uid=N,gid=N,',
    'umask=022,url=URL,use_path_request_style,... (unknown -o options are refused, naming those known).',
    '',
    'The mount point may be /dev/fd/N: an open /dev/fuse descriptor that a CSI driver or a',
    'privileged helper mounted with (mount option fd=N) and passed on. Sluice then serves',
    'that mount and needs neither /dev/fuse nor CAP_SYS_ADMIN; whoever mounted unmounts.',
    '',
    'Options:',
    helpFor(NAMES),
    '  --help, -h',
    '      Show this help.',
    '',
    'Examples:',
    '  sluice mount s3://my-bucket/train/ /mnt/train --cache-size 4GiB',
    '  sluice mount s3://my-bucket/train/ /mnt/train --daemon --log-file /var/log/sluice.log',
    '  sluice mount s3://open-dataset/ /mnt/open --no-sign-request --allow-other --uid 1000 --gid 1000',
  ].join('\n');
}

/**
 * mount-s3's form `BUCKET [--prefix P]` as an s3:// URI; an s3:// URI is taken as it is, and
 * --prefix may only add to one without a prefix.
 */
export function mountS3Uri(first: string, prefix: string | undefined): string {
  const isUri = /^s3:\/\//i.test(first);
  if (prefix === undefined) return isUri || first.includes('/') ? first : `s3://${first}/`;
  const base = isUri ? first : `s3://${first}`;
  const m = /^s3:\/\/[^/]*\/?(.*)$/is.exec(base);
  if (m && m[1] !== '') {
    throw new InvalidArgumentError(`--prefix ${prefix} given with ${first}, which names a prefix already`, { hint: `Put the whole prefix in the URI: s3://bucket/prefix/ (--prefix is mount-s3's form: sluice mount BUCKET /mnt --prefix P)` });
  }
  return `${base.replace(/\/$/, '')}/${prefix.replace(/^\//, '')}`;
}

const SIGNALS = ['SIGINT', 'SIGTERM'] as const;

/** Resolves with the first SIGINT/SIGTERM; after it, the handlers are removed so a second one kills. */
function firstSignal(): { promise: Promise<NodeJS.Signals>; received(): NodeJS.Signals | undefined; dispose(): void } {
  let handler: ((s: NodeJS.Signals) => void) | undefined;
  let got: NodeJS.Signals | undefined;
  const dispose = () => { for (const s of SIGNALS) if (handler) process.off(s, handler); };
  const promise = new Promise<NodeJS.Signals>((resolve) => {
    handler = (s: NodeJS.Signals) => { got = s; dispose(); resolve(s); };
    for (const s of SIGNALS) process.on(s, handler);
  });
  return { promise, received: () => got, dispose };
}

/** Writes the ready file atomically (temp file + rename), so a watcher never sees it half-written. */
async function writeReadyFile(file: string, mountpoint: string): Promise<void> {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.tmp`);
  try {
    await writeFile(tmp, `${mountpoint}\n`);
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true }).catch(() => undefined);
    throw new InvalidArgumentError(`cannot write --ready-file ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, { hint: 'Choose a path in a writable folder' });
  }
}

export async function run(argv: string[]): Promise<number> {
  // Start-up steps, in ms since the process started (performance.now()'s origin), logged at
  // "ready" so BENCHMARKS.md can break time to first byte down (issue 15): cli (Node started,
  // cli.js loaded), command (this command's modules loaded), config (options parsed and
  // checked, logging on), metrics (endpoint bound), ready (mounted and answering).
  const steps: Record<string, number> = {};
  for (const name of ['cli', 'command']) {
    const mark = performance.getEntriesByName(`sluice:${name}`, 'mark')[0];
    if (mark) steps[name] = mark.startTime;
  }
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(help() + '\n');
    return 0;
  }
  const { options, positionals, extra, given } = parseOptions('mount', argv, NAMES, { prefix: { type: 'string' } });
  configureLogging(options);
  // With --snapshot the URI may be left out: the snapshot names it.
  if (positionals.length === 1 && options.snapshot !== undefined) positionals.unshift(undefined as unknown as string);
  if (positionals.length !== 2) {
    throw new InvalidArgumentError(`sluice mount takes an S3 URI and a mount point, got ${positionals.length} argument${positionals.length === 1 ? '' : 's'}`, {
      hint: 'Example: sluice mount s3://bucket/prefix/ /mnt/data (see sluice mount --help)',
    });
  }
  checkFastFileOptions(options);
  if (positionals[0] !== undefined) positionals[0] = mountS3Uri(positionals[0], extra.prefix as string | undefined);
  steps.config = performance.now();
  if (options.daemon && !process.env[DAEMON_CHILD_ENV]) return mountInBackground(argv, options.logFile);
  const [uri, mountpointArg] = positionals as [string | undefined, string];
  const mountpoint = path.resolve(mountpointArg);
  const readyName = `mount ${mountpoint}`;
  const signal = firstSignal();
  let metrics: MetricsServer | undefined;
  // A throughput line once a minute and at exit (src/metrics/summary.ts). It starts with the
  // mount, not at "ready": reads can begin before that (the mount answers while it lists).
  let summaryLines: Summary | undefined;
  try {
    if (options.metricsPort >= 0) {
      // The default port, when taken by another sluice on the node, moves to the next free one.
      metrics = await startMetricsServer({ host: options.metricsHost, port: options.metricsPort, fallbackPorts: given.has('metricsPort') ? 0 : METRICS_PORT_FALLBACKS });
      metrics.setReady(readyName, false);
      const moved = metrics.port !== options.metricsPort && options.metricsPort !== 0;
      log.info({ url: `${metrics.url}/metrics`, ...(moved ? { taken: options.metricsPort } : {}) },
        moved ? `metrics port ${options.metricsPort} is taken (another sluice?): metrics at ${metrics.url}/metrics` : `metrics at ${metrics.url}/metrics`);
    }
    steps.metrics = performance.now();
    summaryLines = startSummary();
    const mount = await mountFastFile({
      uri, mountpoint, options,
      dataset: { snapshot: options.snapshot, snapshotOut: options.snapshotOut, filter: options.filter, skipArchived: options.skipArchived },
    });
    // A prefix with no object mounts as an empty folder: almost always a typo in the URI.
    void mount.listed.then(() => {
      if (mount.core.fileCount === 0) {
        log.warn({ uri: uri ?? options.snapshot, mountpoint }, `${uri ?? 'the snapshot'} holds no object: ${mountpoint} is an empty folder (check the bucket and prefix; a prefix matches keys that start with it)`);
      }
    }, () => undefined);
    try {
      if (signal.received() === undefined) {
        metrics?.setReady(readyName, true);
        if (options.readyFile) await writeReadyFile(options.readyFile, mountpoint);
        process.stdout.write(`ready ${mountpoint}\n`);
        steps.ready = performance.now();
        log.info({ startupMs: Object.fromEntries(Object.entries(steps).map(([k, v]) => [k, Math.round(v)])), timeOrigin: Math.round(performance.timeOrigin) }, 'start-up steps (ms since the process started)');
        // Once mounted, beside the start-up steps: a failed start stays one line (a user error).
        logMemoryPlan(options);
        // prom-client is loaded once the first reads are under way, not before the mount
        // answers (issue 44, src/metrics/metrics.ts): a scrape before then builds it at once.
        setTimeout(() => void loadMetrics(), METRICS_BUILD_DELAY_MS).unref();
      }
      // Stay mounted until a signal, until the mount is removed from outside, or until the
      // listing (still running behind the mount) fails.
      const outcome = await Promise.race([
        signal.promise.then((got) => ({ got })),
        mount.gone.then(() => ({ gone: true as const })),
        mount.listed.then(() => new Promise<never>(() => undefined), (err: unknown) => ({ err })),
      ]);
      if ('err' in outcome) {
        log.error({ err: outcome.err }, 'listing the prefix failed: unmounting');
        throw outcome.err;
      }
      if ('gone' in outcome) log.info({ mountpoint }, 'the mount was removed from outside: stopping');
      else log.info({ signal: outcome.got }, 'unmounting');
    } finally {
      await summaryLines.stop();
      metrics?.setReady(readyName, false);
      await mount.unmount();
      if (options.readyFile) await rm(options.readyFile, { force: true }).catch(() => undefined);
    }
    return 0;
  } finally {
    await summaryLines?.stop();
    signal.dispose();
    await metrics?.close();
  }
}
