/**
 * Pipe resume (issue 48): where a resumed Pipe channel starts, and how far a running one
 * has delivered.
 *
 * Resume point `E:N[:R]`: epoch E, object N of that epoch's pipe order (the order an
 * uninterrupted run uses: sharded, then shuffled with (seed, E)), and optionally R RecordIO
 * records of object N already consumed (objects that are RecordIO files themselves, with
 * RecordWrapperType None). Epochs before E are not served: the first FIFO is <channel>_E, and
 * its bytes are the uninterrupted run's epoch E from object N (record R) on. With
 * RecordWrapperType RecordIO every object is one record, so N counts records and R is 0.
 * Given in the channel's settings (JSON `"Sluice": {"ResumeFrom": "E:N"}`, short form
 * `resume=E:N`) or by the environment, SLUICE_RESUME_<CHANNEL> (which wins).
 *
 * Progress (`ProgressFile`): as the channel streams, a small JSON file per channel says what
 * has been written into the FIFO (`delivered`: handed to the kernel; the reader may not
 * have read it yet: up to a pipe buffer of it, and whatever it buffered itself, is not
 * consumed). Rewritten atomically (temp file + rename) at most every PROGRESS_INTERVAL_MS,
 * and at once when an epoch starts and ends. Its `resume` value is an upper bound of what
 * the script consumed: a checkpointing script keeps its own count of consumed records.
 */
import { rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError } from '../errors.js';

export interface ResumePoint {
  epoch: number;
  /** Objects (items) of the epoch's pipe order already consumed: the first one served is this index. */
  object: number;
  /** RecordIO records of object `object` already consumed (objects that are RecordIO files). */
  record: number;
}

const RESUME_RE = /^(\d+):(\d+)(?::(\d+))?$/;
const RESUME_HINT = 'Write EPOCH:OBJECT or EPOCH:OBJECT:RECORD with whole numbers from 0, e.g. 3:1200';

/** Parse `E:N` or `E:N:R`; `what` names the setting in the one-line error. */
export function parseResume(text: unknown, what: string): ResumePoint {
  const m = typeof text === 'string' ? RESUME_RE.exec(text.trim()) : null;
  const nums = m ? [m[1], m[2], m[3] ?? '0'].map(Number) : [];
  if (!m || !nums.every((n) => Number.isSafeInteger(n))) {
    throw new ConfigError(`${what} ${JSON.stringify(text)} is not a resume point`, { hint: RESUME_HINT });
  }
  return { epoch: nums[0]!, object: nums[1]!, record: nums[2]! };
}

export function formatResume(p: ResumePoint): string {
  return p.record > 0 ? `${p.epoch}:${p.object}:${p.record}` : `${p.epoch}:${p.object}`;
}

/** SLUICE_RESUME_<CHANNEL>: the name upper-cased, every character but A-Z 0-9 as '_' (train-v2 → SLUICE_RESUME_TRAIN_V2). */
export function resumeEnvName(channel: string): string {
  return `SLUICE_RESUME_${channel.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`;
}

/** The channel's progress file: next to its FIFOs, `<dataDir>/<channel>.progress.json`. */
export function progressFilePath(dataDir: string, channel: string): string {
  return path.join(dataDir, `${channel}.progress.json`);
}

/** What the progress file holds (see SEMANTICS.md, "Pipe resume"). */
export interface PipeProgress {
  channel: string;
  /** The epoch being served (its FIFO is <channel>_<epoch>). */
  epoch: number;
  /** Objects in the epoch's pipe order. */
  objectsInEpoch: number;
  /** Objects 0..delivered-1 of the epoch are entirely in the FIFO (counted from 0 even when the epoch was resumed). */
  objectsDelivered: number;
  /** Bytes of the epoch this run wrote into the FIFO (a resumed epoch counts from its resume point). */
  bytesDelivered: number;
  /** Every byte of the epoch is in the FIFO and its write end is closed. */
  epochDone: boolean;
  /** What to pass as SLUICE_RESUME_<CHANNEL> to go on after what was delivered (an upper bound of what was consumed). */
  resume: string;
  /** The resume point this run started from. */
  resumedFrom: string;
  /** When this was written (ISO 8601). */
  updated: string;
}

/**
 * 500 ms: a checkpointing script reads the file when it checkpoints (minutes apart); half a
 * second of staleness is nothing against that, and two small writes a second cost nothing.
 */
export const PROGRESS_INTERVAL_MS = 500;

/**
 * A progress file rewritten atomically, at most every `intervalMs` unless forced. The state is
 * taken from `state()` only when a write is due, so a call per pipe write costs a clock read.
 * Never throws (a failed write is reported once to `onError`).
 */
export class ProgressFile {
  private state: (() => Omit<PipeProgress, 'updated'>) | undefined;
  private lastWrite = 0;
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();
  private failed = false;

  constructor(readonly file: string, private readonly onError: (err: unknown) => void, private readonly intervalMs = PROGRESS_INTERVAL_MS) {}

  /** The state changed (`state` says what it is now): written now when `force` or the interval has passed, else when it has. */
  changed(state: () => Omit<PipeProgress, 'updated'>, force = false): void {
    this.state = state;
    if (this.timer !== undefined && !force) return;
    const wait = this.lastWrite + this.intervalMs - Date.now();
    if (force || wait <= 0) {
      this.writeNow();
    } else {
      this.timer = setTimeout(() => this.writeNow(), wait);
      this.timer.unref();
    }
  }

  /** Write the latest state (if a write is pending) and wait for every write. */
  async flush(): Promise<void> {
    if (this.timer !== undefined) this.writeNow();
    await this.writing;
  }

  private writeNow(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const state = this.state;
    if (state === undefined) return;
    this.lastWrite = Date.now();
    const text = `${JSON.stringify({ ...state(), updated: new Date().toISOString() })}\n`;
    // One write at a time, in order: a late rename never puts an older state back.
    this.writing = this.writing.then(() => this.write(text));
  }

  private async write(text: string): Promise<void> {
    const tmp = path.join(path.dirname(this.file), `.${path.basename(this.file)}.${process.pid}.tmp`);
    try {
      await writeFile(tmp, text);
      await rename(tmp, this.file);
    } catch (err) {
      await rm(tmp, { force: true }).catch(() => undefined);
      if (!this.failed) this.onError(err);
      this.failed = true;
    }
  }
}

/**
 * Which objects of an epoch are entirely in the FIFO: bytes handed to the writer are counted
 * (`handed`), each object's end is noted at that count when its last byte is handed on, and
 * the objects whose end the written count (the kernel's) has reached are delivered.
 */
export class DeliveryTracker {
  handed = 0;
  written = 0;
  /** Ends (in handed bytes) of objects handed on and not yet delivered, in order. */
  private readonly ends: number[] = [];
  delivered: number;

  constructor(firstObject: number) {
    this.delivered = firstObject;
  }

  onHanded(bytes: number): void { this.handed += bytes; }

  onObjectHanded(): void {
    this.ends.push(this.handed);
    this.settle();
  }

  /** Called after every write the kernel took (the progress report, throttled). */
  onChange: (() => void) | undefined;

  onWritten(bytes: number): void {
    this.written += bytes;
    this.settle();
    this.onChange?.();
  }

  private settle(): void {
    let i = 0;
    while (i < this.ends.length && this.ends[i]! <= this.written) i++;
    if (i > 0) {
      this.ends.splice(0, i);
      this.delivered += i;
    }
  }
}
