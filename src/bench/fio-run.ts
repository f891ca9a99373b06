/**
 * One run of one fio job (issue 44) on one mount target, the way Mountpoint's fs_bench.sh
 * runs its jobs: a fresh mount per job, then
 *   fio --thread --output-format=json --directory=<mount> --filename=<object> <job>
 * with the run's overrides (./fio-job.ts) in a copy of the job text in the run's folder, and
 * --readonly so fio can never write to the mount. The mount's CPU time counts from the moment
 * it answers (start-up apart, as in ./run-once.ts) to fio's exit; bytes are fio's io_bytes.
 * fio does not compare what it reads: afterwards, outside the figures, spot blocks of the
 * object (the whole object when small) are read through the same mount and compared with
 * the source bytes.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, open, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { sourceBytes, type SeededObject } from '../local/dataset.js';
import { applyFioOverrides, fioOverrides, parseFioOutput } from './fio-job.js';
import { epochMs } from './read-plan.js';
import { applyStats, type RunResult } from './run-once.js';
import type { FioJobDef, ScenarioDef } from './scenarios.js';
import { onPath, startMount, type TargetEnv } from './targets.js';

const MiB = 1024 * 1024;
/** Beyond the job's runtime before fio is killed: mount-side stalls, fio's own start and end; a latency job's 10 loops take well under a second. */
const FIO_GRACE_MS = 90_000;
/** Objects up to this size are compared whole after the job; larger ones by SPOT_BLOCKS blocks. */
const WHOLE_CHECK_MAX = 64 * MiB;
/** Spot blocks of a large object, within its first WHOLE_CHECK_MAX bytes (sourceBytes generates a prefix; the whole 4 GiB would take ~15 s a run). */
const SPOT_BLOCKS = 4;
/** A spot block: the jobs' block size. */
const SPOT_BYTES = 256 * 1024;

/** Why fio jobs cannot run here, or undefined. */
export function fioUnavailable(): string | undefined {
  return onPath('fio') ? undefined : 'fio is not installed (apt-get install -y fio)';
}

/** The fio command line of a run (the job file last), for the report and the run itself. */
export function fioArgs(mountDir: string, objectRel: string, jobFile: string, outFile: string): string[] {
  return ['--thread', '--output-format=json', `--output=${outFile}`, `--directory=${mountDir}`, `--filename=${objectRel}`, '--readonly', '--eta=never', jobFile];
}

/** Offsets the after-job check reads: 0, then seeded blocks in the first WHOLE_CHECK_MAX bytes. */
export function spotOffsets(size: number, rep: number): number[] {
  if (size <= WHOLE_CHECK_MAX) return [0];
  const out = [0];
  let x = 0x2545f491 ^ (rep + 1);
  for (let i = 1; i < SPOT_BLOCKS; i++) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    out.push(Math.floor((x / 2 ** 32) * ((WHOLE_CHECK_MAX - SPOT_BYTES) / 4096)) * 4096);
  }
  return out;
}

/** Reads the check's blocks through the mount; the number that differ from the source. */
async function checkBytes(file: string, obj: SeededObject, rep: number): Promise<number> {
  const fh = await open(file, 'r');
  try {
    if (obj.size <= WHOLE_CHECK_MAX) {
      const b = Buffer.alloc(obj.size);
      const { bytesRead } = await fh.read(b, 0, b.length, 0);
      return bytesRead === obj.size && createHash('sha256').update(b).digest('hex') === obj.sha256 ? 0 : 1;
    }
    const source = sourceBytes(obj, 0, WHOLE_CHECK_MAX);
    let bad = 0;
    for (const off of spotOffsets(obj.size, rep)) {
      const b = Buffer.alloc(SPOT_BYTES);
      const { bytesRead } = await fh.read(b, 0, b.length, off);
      if (bytesRead !== SPOT_BYTES || !b.equals(source.subarray(off, off + SPOT_BYTES))) bad++;
    }
    return bad;
  } finally { await fh.close(); }
}

/** Runs fio to its end (or kills it past `timeoutMs`); its exit code and stderr's tail. */
function runFio(args: string[], timeoutMs: number): Promise<{ code: number | null; stderr: string; timedOut: boolean }> {
  return new Promise((resolve) => {
    const child = spawn('fio', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    let timedOut = false;
    child.stderr!.on('data', (b: Buffer) => { stderr = (stderr + b.toString()).slice(-2000); });
    const timer = setTimeout(() => { timedOut = true; child.kill('SIGKILL'); }, timeoutMs);
    child.once('error', (err) => { clearTimeout(timer); resolve({ code: null, stderr: err.message, timedOut }); });
    child.once('exit', (code) => { clearTimeout(timer); resolve({ code, stderr, timedOut }); });
  });
}

export async function runFioOnce(sc: ScenarioDef, job: FioJobDef, target: 'FastFile' | 's3fs' | 'rclone', obj: SeededObject, env: TargetEnv, rep: number, stops: Set<() => Promise<void>>): Promise<RunResult> {
  const fio = sc.fio!;
  const r: RunResult = { rep, value: null, seconds: 0, bytes: 0, items: 0, verified: false, mismatches: 0, truncated: false };
  const jobFile = path.join(env.runDir, `${job.name}.fio`);
  const outFile = path.join(env.runDir, `${job.name}.json`);
  await mkdir(env.runDir, { recursive: true });
  await writeFile(jobFile, applyFioOverrides(job.text, fioOverrides(job.job, obj.size, fio.runtimeSeconds)));
  const m = await startMount(target, env);
  const stopM = () => m.stop();
  stops.add(stopM);
  try {
    await m.ready;
    const ready = m.stats();
    r.startupCpuSeconds = ready?.cpuSeconds ?? 0;
    const rel = obj.key.slice(env.prefix.length);
    const t0 = epochMs();
    const timeoutMs = (job.job.timeBased ? fio.runtimeSeconds * 1000 : 0) + FIO_GRACE_MS;
    const res = await runFio(fioArgs(m.dir, rel, jobFile, outFile), timeoutMs);
    r.spanStartMs = t0;
    r.spanEndMs = epochMs();
    applyStats(r, m.stats(), ready);
    if (res.timedOut) throw new Error(`fio did not finish within ${timeoutMs / 1000} s`);
    if (m.exited()) throw new Error(`${target} exited during the job: ${m.tail()}`);
    if (res.code !== 0) throw new Error(`fio exited ${res.code}: ${res.stderr.trim().split('\n').slice(-2).join(' ')}`);
    const f = parseFioOutput(await readFile(outFile, 'utf8'));
    r.seconds = f.seconds;
    r.bytes = f.ioBytes;
    r.items = f.ios;
    r.value = job.job.latency ? f.clatMeanMs : f.readBytesPerSec / MiB;
    r.mismatches = await checkBytes(path.join(m.dir, rel), obj, rep);
    r.verified = r.mismatches === 0;
  } finally {
    stops.delete(stopM);
    await m.stop();
  }
  return r;
}
