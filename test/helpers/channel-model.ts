/**
 * The model-based test of Pipe and File mode (issue 43, deliverable 2): `sluice run` (the
 * built CLI) with one channel over the fault-injecting model server (test/helpers/model-s3.ts),
 * under a program of faults (each for the next N data GETs), an overwrite made when the server
 * sees its k-th data GET (after the listing, while GETs of the channel are under way), and
 * random part sizes and connection counts.
 *
 * The reference: the versions listed, in key order. Properties:
 *   - Pipe: the bytes the training command read from the FIFO are the listed versions'
 *     bytes concatenated, whole when the run succeeds, a prefix of them when it fails
 *     (never a wrong byte, never a byte of another version);
 *   - File: when the run succeeds, the channel folder holds exactly the listed keys with
 *     their listed bytes and the command ran; when it fails, the command did not run and
 *     every complete file left holds its listed bytes;
 *   - a failure is a nonzero exit with an error line and no stack trace, and only when the
 *     program has a cause for one (a fault of the server or an overwrite);
 *   - the run ends within its deadline.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { s3DeadlineMs } from '../../src/fuse/deadline.js';
import { CLI } from './cli.js';
import { bytesOf, DRIP_MAX_MS, FAULTS, startModelS3, type Fault, type Version } from './model-s3.js';
import { ModelViolation, MAX_ATTEMPTS, REQUEST_TIMEOUT_MS } from './read-model.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const BUCKET = 'model';
const PREFIX = 'ds/';
/** Objects of every shape a channel meets: empty, one byte, below and above a part, several parts. */
const SIZES = [0, 1, 5000, 100_000, 300_000 + 7, 1100 * KiB, 3 * MiB + 11];

export interface ChannelProgram {
  mode: 'Pipe' | 'File';
  partSize: number;
  maxConnections: number;
  faults: Array<{ fault: Fault; n: number }>;
  /** Overwrite object `file` when the server sees data GET number `atGet`. */
  overwrite?: { file: number; atGet: number };
}

export function channelProgramArb(mode: 'Pipe' | 'File', faults: readonly Fault[] = FAULTS): fc.Arbitrary<ChannelProgram> {
  return fc.record({
    mode: fc.constant(mode),
    partSize: fc.constantFrom(64 * KiB, 1 * MiB),
    maxConnections: fc.constantFrom(1, 4, 8),
    faults: fc.array(fc.record({ fault: fc.constantFrom(...faults), n: fc.integer({ min: 1, max: 4 }) }), { maxLength: 4 }),
    overwrite: fc.option(fc.record({ file: fc.nat(SIZES.length - 1), atGet: fc.integer({ min: 1, max: 12 }) }), { nil: undefined }),
  }, { requiredKeys: ['mode', 'partSize', 'maxConnections', 'faults'] });
}

/** A run's deadline: every object fetched one part at a time, each part failing as slowly as it may, plus drips and the process's start. */
function runDeadlineMs(p: ChannelProgram): number {
  const parts = SIZES.reduce((n, s) => n + Math.max(1, Math.ceil(s / p.partSize)), 0);
  const faulty = p.faults.reduce((n, f) => n + f.n, 0);
  return 30_000 + faulty * (s3DeadlineMs({ requestTimeoutMs: REQUEST_TIMEOUT_MS, maxAttempts: MAX_ATTEMPTS }) + DRIP_MAX_MS) + parts * 200;
}

export const channelTotals = { programs: 0, runsOk: 0, runsFailed: 0, bytes: 0 };

/** The reader of the FIFO (Pipe) or the marker (File): the training command. */
const PIPE_READER = "const fs=require('fs');const w=fs.createWriteStream(process.argv[2]);fs.createReadStream(process.argv[1]).pipe(w);w.on('finish',()=>process.exit(0));";
const FILE_MARKER = "require('fs').writeFileSync(process.argv[1], 'ran')";

export async function runChannelProgram(p: ChannelProgram): Promise<void> {
  const server = await startModelS3(BUCKET);
  const root = await mkdtemp(path.join(os.tmpdir(), 'sluice-model-run-'));
  try {
    SIZES.forEach((size, i) => server.put(`${PREFIX}f${i}`, bytesOf(size, 2000 + i)));
    let listed: Map<string, Version> | undefined;
    const causes: string[] = [];
    server.onDataGet = (n) => {
      // The first data GET comes after the listing: the versions listed are the current ones then.
      if (n === 1) listed = server.snapshot();
      if (p.overwrite && n === p.overwrite.atGet) { server.overwrite(`${PREFIX}f${p.overwrite.file}`); causes.push('overwrite'); }
    };
    for (const f of p.faults) { server.inject(f.fault, f.n); causes.push(f.fault); }
    const out = path.join(root, 'out');
    const data = path.join(root, 'input', 'data');
    const cmd = p.mode === 'Pipe' ? ['-e', PIPE_READER, path.join(data, 'train_0'), out] : ['-e', FILE_MARKER, out];
    const args = ['run', '--channel', `train=s3://${BUCKET}/${PREFIX},mode=${p.mode}`, '--root', root, ...(p.mode === 'Pipe' ? ['--epochs', '1'] : []),
      '--endpoint', server.endpoint, '--path-style', '--region', 'us-east-1', '--metrics-port=-1', '--progress', 'none', '--log-level', 'error',
      '--request-timeout', String(REQUEST_TIMEOUT_MS), '--max-attempts', String(MAX_ATTEMPTS), '--max-connections', String(p.maxConnections),
      '--part-size', String(p.partSize), '--', process.execPath, ...cmd];
    const env = { ...process.env, NODE_NO_WARNINGS: '1', AWS_ACCESS_KEY_ID: 'MODEL', AWS_SECRET_ACCESS_KEY: 'MODEL', AWS_REGION: 'us-east-1' };
    const child = spawn(process.execPath, [CLI, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => { if (stderr.length < 100_000) stderr += b.toString(); });
    child.stdout.resume();
    const deadline = runDeadlineMs(p);
    let late = false;
    const timer = setTimeout(() => { late = true; child.kill('SIGKILL'); }, deadline);
    const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
    clearTimeout(timer);
    if (late) throw new ModelViolation(`${p.mode}: the run did not end within its deadline of ${deadline} ms`);
    const want = listed ?? server.snapshot();
    const keys = [...want.keys()].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    if (code !== 0) {
      channelTotals.runsFailed++;
      if (causes.length === 0) throw new ModelViolation(`${p.mode}: the run failed (exit ${code}) with no fault in the program: ${stderr.slice(-1500)}`);
      if (/^\s+at .+\(.+:\d+:\d+\)$/m.test(stderr)) throw new ModelViolation(`${p.mode}: the run failed with a stack trace: ${stderr.slice(-1500)}`);
    } else channelTotals.runsOk++;
    if (p.mode === 'Pipe') {
      const got = existsSync(out) ? await readFile(out) : Buffer.alloc(0);
      const whole = Buffer.concat(keys.map((k) => want.get(k)!.bytes));
      channelTotals.bytes += got.length;
      if (!whole.subarray(0, got.length).equals(got)) {
        let i = 0;
        while (i < got.length && got[i] === whole[i]) i++;
        throw new ModelViolation(`Pipe: the FIFO gave a wrong byte at offset ${i} of ${got.length} (exit ${code})`);
      }
      if (code === 0 && got.length !== whole.length) throw new ModelViolation(`Pipe: the run succeeded but the FIFO gave ${got.length} of ${whole.length} bytes`);
      return;
    }
    const ran = existsSync(out);
    if (code === 0 && !ran) throw new ModelViolation('File: the run succeeded but the training command did not run');
    if (code !== 0 && ran) throw new ModelViolation(`File: the run failed (exit ${code}) after the training command ran`);
    const chan = path.join(data, 'train');
    const files = (await readdir(chan, { recursive: true }).catch(() => [] as string[])).map(String).filter((f) => !f.endsWith('.sluice-part'));
    for (const f of files) {
      const v = want.get(PREFIX + f);
      if (!v) throw new ModelViolation(`File: ${f} in the channel is no listed object`);
      const got = await readFile(path.join(chan, f));
      channelTotals.bytes += got.length;
      if (!got.equals(v.bytes)) throw new ModelViolation(`File: ${f} holds other bytes than its listed version (${got.length} of ${v.bytes.length} bytes; exit ${code})`);
    }
    if (code === 0 && files.length !== keys.length) throw new ModelViolation(`File: the run succeeded with ${files.length} of ${keys.length} files`);
  } finally {
    await server.close();
    await rm(root, { recursive: true, force: true }).catch(() => undefined);
    channelTotals.programs++;
  }
}
