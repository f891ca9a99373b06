/**
 * <root>/output/failure: why the training failed, as SageMaker's container contract has it.
 *
 * SageMaker returns the first 1024 characters of /opt/ml/output/failure as the job's
 * FailureReason; sagemaker-training-toolkit writes the error of a failed script there,
 * unless the script wrote the file itself. sluice does the same for the training command:
 * on a nonzero exit (or death by a signal) it writes one line saying how the command
 * ended, then the last lines of the command's stderr that fit within those 1024
 * characters, unless the command wrote the file. A run that fails in sluice itself
 * (a channel that cannot be prepared or a Pipe channel failing mid-run) writes sluice's
 * one-line error instead. On exit code 0 it writes an empty output/success, as the
 * toolkit's trainer does. Both files left by an earlier run are removed at the start: on
 * SageMaker, output/ starts empty.
 *
 * The command's stderr goes through sluice to keep that tail (TailBuffer): it still
 * reaches sluice's stderr unchanged, but the command sees a pipe instead of a terminal,
 * as it does on SageMaker, where stderr goes to CloudWatch.
 */
import { writeFile, rm } from 'node:fs/promises';
import path from 'node:path';

/** SageMaker shows this many characters of output/failure as FailureReason. */
export const FAILURE_MAX_CHARS = 1024;
/**
 * Bytes of stderr kept: a few dozen lines of a traceback, enough to fill FAILURE_MAX_CHARS
 * even when the last lines are long (progress bars, log lines with JSON).
 */
const TAIL_BYTES = 64 * 1024;

/** The last TAIL_BYTES of a stream, in chunks (no copy per chunk). */
export class TailBuffer {
  private chunks: Buffer[] = [];
  private bytes = 0;
  push(b: Buffer): void {
    this.chunks.push(b);
    this.bytes += b.length;
    while (this.chunks.length > 1 && this.bytes - this.chunks[0]!.length >= TAIL_BYTES) this.bytes -= this.chunks.shift()!.length;
  }
  text(): string {
    const all = Buffer.concat(this.chunks);
    return all.subarray(Math.max(0, all.length - TAIL_BYTES)).toString('utf8');
  }
}

/**
 * `head` on the first line, then the last lines of `stderr` that fit in FAILURE_MAX_CHARS.
 * A line rewritten with carriage returns (a progress bar) counts as what a terminal shows:
 * its last part.
 */
export function failureText(head: string, stderr: string): string {
  const lines = stderr.split('\n').map((l) => l.slice(l.lastIndexOf('\r') + 1).trimEnd()).filter((l) => l !== '');
  const out: string[] = [];
  let size = head.length + 1; // and the final newline
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i]!;
    if (size + 1 + line.length > FAILURE_MAX_CHARS) {
      // The last line alone is too long: keep its end, where the message usually is.
      if (out.length === 0) out.unshift(line.slice(line.length - (FAILURE_MAX_CHARS - size - 1)));
      break;
    }
    out.unshift(line);
    size += 1 + line.length;
  }
  return [head, ...out].join('\n') + '\n';
}

export function failurePath(outputDir: string): string {
  return path.join(outputDir, 'failure');
}

/** Writes output/failure unless it exists (the command wrote its own). Never throws. */
export async function writeFailure(outputDir: string, text: string): Promise<boolean> {
  try {
    await writeFile(failurePath(outputDir), text, { flag: 'wx' });
    return true;
  } catch {
    return false;
  }
}

/** The empty output/success the toolkit writes after a successful script. Never throws. */
export async function writeSuccess(outputDir: string): Promise<void> {
  await writeFile(path.join(outputDir, 'success'), '').catch(() => undefined);
}

/** Removes an earlier run's output/failure and output/success. */
export async function clearOutcome(outputDir: string): Promise<void> {
  await rm(failurePath(outputDir), { force: true });
  await rm(path.join(outputDir, 'success'), { force: true });
}
