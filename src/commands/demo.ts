/**
 * `sluice demo` (npm run demo, the README's Quick start): the whole product on one machine.
 *
 *  1. Starts a local S3-compatible server (s3rver, in a child process) and seeds it with a
 *     sample dataset: a folder tree of small "images" and a few large shards, with
 *     deterministic bytes whose sha256 we know (src/local/dataset.ts).
 *  2. Mounts it with `sluice mount` in a child process, exactly as a user would, and waits
 *     for its `ready <mountpoint>` line.
 *  3. Reads it the way a training loop does: walks the image folders in sorted order with a
 *     few DataLoader-like workers pulling the next file from a shared queue, then reads the
 *     shards one after another, sequentially. Every byte goes through sha256 and is
 *     compared with the source.
 *  4. Prints time to first byte (one figure: from the first open to its first byte), MB/s and
 *     files/s, and a few lines of /metrics.
 *  5. Unmounts (SIGTERM to the mount), stops the server and removes its files, also on
 *     failure or Ctrl-C.
 * Flags after `--` are passed to `sluice mount` (e.g. `-- --part-size 4MiB`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, open, readdir, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseOptions, parseSize } from '../config/options.js';
import { InvalidArgumentError, SluiceError } from '../errors.js';
import { detachMount, mountAt } from '../fuse/mountpoint.js';
import { seedDataset, type SeededObject } from '../local/dataset.js';
import { startLocalS3, type LocalS3 } from '../local/s3-server.js';
import { configureLogging } from '../log.js';

export const summary = 'Start a local S3 server with sample data, mount it, read it like a training loop, print the figures.';

/** Defaults: ~80 MB of 40 KB images plus 3 x 48 MiB shards, ~230 MB in all: a minute or two on 2 cores. */
const DEFAULTS = { small: 2000, smallSize: 40_000, large: 3, largeSize: 48 * 1024 * 1024, workers: 4 };
/** The bucket and prefix the demo seeds. */
const BUCKET = 'sluice-demo';
const PREFIX = 'dataset/';
/** Read size of the demo's reader: what a buffered reader of large shards typically asks for. */
const READ_CHUNK = 1024 * 1024;
/** Listing plus mounting on a loaded box; past this the mount is reported as failed. */
const MOUNT_READY_TIMEOUT_MS = 120_000;
/** After SIGTERM, how long the mount child gets to unmount before SIGKILL. */
const UNMOUNT_GRACE_MS = 20_000;
/** Key metric lines shown at the end (regexes over the /metrics text). */
const SHOWN_METRICS = [
  /^sluice_fuse_operations_total\{op="(open|read)",result="ok"\}/,
  /^sluice_served_bytes_total/,
  /^sluice_cache_(hits|misses)_total /,
  /^sluice_prefetch_bytes_total\{kind="cross_file"/,
  /^sluice_s3_requests_total\{operation="get"/,
  // Not sluice_time_to_first_byte_seconds: it counts from the mount's start, a second figure
  // beside the demo's own "time to first byte" (from the first open), issue 45.
];

function help(): string {
  return [
    'Usage: sluice demo [--small N] [--small-size BYTES] [--large N] [--large-size BYTES] [--workers N] [-- <sluice mount flags>]',
    '',
    summary,
    'Everything runs on 127.0.0.1 and is removed at the end. Needs FUSE (root, /dev/fuse, libfuse2).',
    '',
    'Options:',
    `  --small N            Small "image" files (default ${DEFAULTS.small}).`,
    `  --small-size BYTES   Size of each small file (default ${DEFAULTS.smallSize}).`,
    `  --large N            Large shards (default ${DEFAULTS.large}).`,
    `  --large-size BYTES   Size of each shard (default 48MiB).`,
    `  --workers N          Concurrent readers of the small files, like DataLoader workers (default ${DEFAULTS.workers}).`,
    '  --log-level LEVEL    Log level of the demo and the mount (default warn).',
    '  --log-format FORMAT  Log format of the demo and the mount: text, json or auto (default auto: text on a terminal).',
    '  --help, -h           Show this help.',
  ].join('\n');
}

function count(v: string | undefined, def: number, flag: string, min: number): number {
  if (v === undefined) return def;
  if (!/^\d+$/.test(v) || Number(v) < min) throw new InvalidArgumentError(`--${flag} must be a whole number >= ${min}, got ${JSON.stringify(v)}`, { hint: 'See sluice demo --help' });
  return Number(v);
}

const mb = (bytes: number) => bytes / 1e6;
const fmt = (n: number, digits = 1) => n.toFixed(digits);

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** Spawns `sluice mount` and resolves once it printed `ready <mountpoint>`. */
function startMount(args: string[], env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; stderr: () => string }> {
  const cli = fileURLToPath(new URL('../cli.js', import.meta.url));
  const child = spawn(process.execPath, [cli, 'mount', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr!.on('data', (b: Buffer) => { if (err.length < 20_000) err += b.toString(); });
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => fail(new Error(`sluice mount was not ready within ${MOUNT_READY_TIMEOUT_MS / 1000} s`)), MOUNT_READY_TIMEOUT_MS);
    const fail = (e: Error) => { clearTimeout(timer); child.off('exit', onExit); reject(Object.assign(e, { child })); };
    const onExit = (code: number | null) => fail(new Error(`sluice mount exited with ${code} before it was ready: ${err.trim().split('\n').slice(-3).join(' | ')}`));
    child.on('exit', onExit);
    child.stdout!.on('data', (b: Buffer) => {
      out += b.toString();
      if (/^ready .+\n/m.test(out)) {
        clearTimeout(timer);
        child.off('exit', onExit);
        resolve({ child, stderr: () => err });
      }
    });
  });
}

function stopChild(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const force = setTimeout(() => child.kill('SIGKILL'), UNMOUNT_GRACE_MS);
    child.once('exit', () => { clearTimeout(force); resolve(); });
    child.kill('SIGTERM');
  });
}

interface ReadStats { files: number; bytes: number; bad: string[]; firstByteAt: number | undefined }

/** Reads a whole file in READ_CHUNK reads, hashing as it goes; notes when the first byte arrived. */
async function readAndHash(file: string, stats: ReadStats, buf: Buffer): Promise<string> {
  const fh = await open(file, 'r');
  try {
    const h = createHash('sha256');
    for (;;) {
      const { bytesRead } = await fh.read(buf, 0, buf.length, null);
      if (bytesRead === 0) break;
      stats.firstByteAt ??= performance.now();
      stats.bytes += bytesRead;
      h.update(buf.subarray(0, bytesRead));
    }
    stats.files++;
    return h.digest('hex');
  } finally {
    await fh.close();
  }
}

/** Files under `dir`, depth first, each folder in sorted order (what a dataset class does). */
async function walk(dir: string): Promise<string[]> {
  const out: string[] = [];
  const ents = (await readdir(dir, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const e of ents) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...(await walk(p)));
    else out.push(p);
  }
  return out;
}

export async function run(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(help() + '\n');
    return 0;
  }
  const { options, extra, positionals, rest } = parseOptions('demo', argv, ['logLevel', 'logFormat'], {
    small: { type: 'string' }, 'small-size': { type: 'string' }, large: { type: 'string' }, 'large-size': { type: 'string' }, workers: { type: 'string' },
  }, { ...process.env, SLUICE_LOG_LEVEL: process.env.SLUICE_LOG_LEVEL || 'warn' });
  if (positionals.length > 0) throw new InvalidArgumentError(`sluice demo takes no arguments, got ${JSON.stringify(positionals[0])}`, { hint: 'See sluice demo --help' });
  configureLogging(options);
  const small = count(extra.small as string | undefined, DEFAULTS.small, 'small', 0);
  const smallSize = extra['small-size'] === undefined ? DEFAULTS.smallSize : parseSize(String(extra['small-size']), '--small-size');
  const large = count(extra.large as string | undefined, DEFAULTS.large, 'large', 0);
  const largeSize = extra['large-size'] === undefined ? DEFAULTS.largeSize : parseSize(String(extra['large-size']), '--large-size');
  const workers = count(extra.workers as string | undefined, DEFAULTS.workers, 'workers', 1);
  if (small + large === 0) throw new InvalidArgumentError('the demo dataset is empty', { hint: 'Pass --small or --large greater than 0' });

  const say = (line: string) => process.stdout.write(line + '\n');
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'sluice-demo-'));
  const mnt = path.join(tmp, 'mnt');
  let s3: LocalS3 | undefined;
  let mountChild: ChildProcess | undefined;
  let interrupted: NodeJS.Signals | undefined;
  const onSignal = (s: NodeJS.Signals) => {
    interrupted = s;
    say(`\n${s}: stopping the demo and cleaning up...`);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const checkInterrupted = () => {
    if (interrupted) throw new InvalidArgumentError(`interrupted by ${interrupted}`);
  };

  try {
    // 1. Local S3 with a sample dataset.
    let t0 = performance.now();
    s3 = await startLocalS3({ dir: path.join(tmp, 's3') });
    await s3.createBucket(BUCKET);
    const objects = await seedDataset(s3, BUCKET, PREFIX, {
      ...(small > 0 ? { smallFiles: { count: small, size: smallSize, folders: 16 } } : {}),
      ...(large > 0 ? { largeFiles: { count: large, size: largeSize } } : {}),
    });
    const total = objects.reduce((n, o) => n + o.size, 0);
    say(`local S3 at ${s3.endpoint}: seeded s3://${BUCKET}/${PREFIX} with ${objects.length} objects, ${fmt(mb(total))} MB, in ${fmt((performance.now() - t0) / 1000)} s`);
    checkInterrupted();

    // 2. Mount it.
    await mkdir(mnt);
    const metricsPort = await freePort();
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey, AWS_REGION: 'us-east-1',
    };
    delete env.AWS_SESSION_TOKEN;
    delete env.AWS_PROFILE;
    t0 = performance.now();
    const started = await startMount([
      `s3://${BUCKET}/${PREFIX}`, mnt, '--endpoint', s3.endpoint, '--path-style',
      '--metrics-port', String(metricsPort), '--log-level', options.logLevel, '--log-format', options.logFormat, ...rest,
    ], env).catch((err: Error & { child?: ChildProcess }) => { mountChild = err.child; throw err; });
    mountChild = started.child;
    const metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
    say(`mounted at ${mnt} in ${fmt((performance.now() - t0) / 1000)} s (S3 has answered the listing; the rest of it runs behind the mount); metrics at ${metricsUrl}`);
    checkInterrupted();

    // 3. Read it like a training loop.
    const expected = new Map<string, SeededObject>(objects.map((o) => [path.join(mnt, o.key.slice(PREFIX.length)), o]));
    const bad: string[] = [];
    const check = (file: string, sha: string) => { if (expected.get(file)?.sha256 !== sha) bad.push(file); };
    const images: ReadStats = { files: 0, bytes: 0, bad, firstByteAt: undefined };
    let readStart: number | undefined;
    if (small > 0) {
      const tw = performance.now();
      const files = await walk(path.join(mnt, 'small'));
      say(`walked the image folders: ${files.length} files in ${fmt((performance.now() - tw) / 1000, 2)} s`);
      let next = 0;
      const t = performance.now();
      readStart = t;
      await Promise.all(Array.from({ length: workers }, async () => {
        const buf = Buffer.allocUnsafe(Math.max(smallSize, 4096));
        while (next < files.length && !interrupted) {
          const f = files[next++]!;
          check(f, await readAndHash(f, images, buf));
        }
      }));
      checkInterrupted();
      const s = (performance.now() - t) / 1000;
      say(`images: ${images.files} files, ${fmt(mb(images.bytes))} MB in ${fmt(s, 2)} s: ${fmt(images.files / s, 0)} files/s, ${fmt(mb(images.bytes) / s)} MB/s (${workers} workers)`);
    }
    const shards: ReadStats = { files: 0, bytes: 0, bad, firstByteAt: undefined };
    if (large > 0) {
      const files = (await readdir(path.join(mnt, 'large'))).sort().map((n) => path.join(mnt, 'large', n));
      const buf = Buffer.allocUnsafe(READ_CHUNK);
      const t = performance.now();
      readStart ??= t;
      for (const f of files) {
        checkInterrupted();
        check(f, await readAndHash(f, shards, buf));
      }
      const s = (performance.now() - t) / 1000;
      say(`shards: ${shards.files} files, ${fmt(mb(shards.bytes))} MB in ${fmt(s, 2)} s: ${fmt(mb(shards.bytes) / s)} MB/s (sequential, one reader)`);
    }
    const firstByte = images.firstByteAt ?? shards.firstByteAt;
    if (firstByte !== undefined && readStart !== undefined) say(`time to first byte: ${fmt(firstByte - readStart, 1)} ms from the first open`);
    const read = images.files + shards.files;
    if (bad.length > 0) {
      say(`FAILED: ${bad.length} of ${read} files differ from their source, e.g. ${bad[0]}`);
      return 1;
    }
    say(`verified: all ${read} files match the sha256 of their source (${fmt(mb(images.bytes + shards.bytes))} MB)`);

    // 4. What /metrics shows.
    try {
      const text = await (await fetch(metricsUrl)).text();
      const lines = text.split('\n').filter((l) => SHOWN_METRICS.some((re) => re.test(l)));
      say(`metrics (from ${metricsUrl}, which stops with the mount below; on a mount of your own, sluice status summarises them):`);
      for (const l of lines) say(`  ${l}`);
    } catch (err) {
      say(`metrics: could not fetch ${metricsUrl}: ${err instanceof Error ? err.message : String(err)}`);
    }
    return 0;
  } catch (err) {
    if (interrupted) return 130;
    if (err instanceof SluiceError) throw err;
    throw new InvalidArgumentError(`demo failed: ${err instanceof Error ? err.message : String(err)}`, { hint: 'Run with --log-level info for details' });
  } finally {
    await stopChild(mountChild);
    if (await mountAt(mnt).catch(() => undefined)) await detachMount(mnt);
    await s3?.stop().catch(() => undefined);
    await rm(tmp, { recursive: true, force: true }).catch(() => undefined);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    say('cleaned up: unmounted, local S3 stopped, temporary files removed');
  }
}
