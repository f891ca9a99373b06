/**
 * A SageMaker Pipe-mode channel: the channel's items streamed through a FIFO
 * `<dataDir>/<channel>_<epoch>`, one FIFO per epoch.
 *
 * Per epoch:
 *  1. the epoch's FIFO exists already (epoch 0's is made before startPipeChannel()
 *     resolves, so the training command can be started right after);
 *  2. ask itemsForEpoch(epoch) for the items, in pipe order (the caller sorts,
 *     shards and shuffles), and start reading ahead at once, while waiting for the
 *     reader to open the FIFO (fifo-writer.ts polls; no thread blocks);
 *  3. once the reader is there, make the NEXT epoch's FIFO (unless this is the
 *     last epoch): a reader that finishes an epoch, or quits it early, opens the
 *     next FIFO at once, and must find it there, not race our cleanup. Its open()
 *     simply waits until this epoch is over and the next one's writer starts;
 *  4. write the epoch's bytes (epoch-bytes.ts: Gzip, RecordIO) with backpressure;
 *  5. close the write end when done (the reader reads the rest, then EOF), or stop
 *     at once when the reader closed early (EPIPE);
 *  6. remove the FIFO and go on with the next epoch, until `epochs` are done
 *     (unlimited by default) or stop() is called.
 *
 * Long waits: when the training script has not opened an epoch's FIFO, or holds it
 * without reading, for `waitWarningMs` (--fifo-wait-warning, then at doubling
 * intervals), a warning says which FIFO waits and what the script must do. A full
 * pipe is checked against the next epoch's FIFO: a reader waiting there means the
 * script opened <ch>_{N+1} while holding <ch>_N, and the warning says so. The daemon
 * never blocks on either (fifo-writer.ts); it keeps waiting, as SageMaker does.
 *
 * Failure: when an epoch cannot be completed (an object vanished, S3 keeps failing,
 * bad gzip), `done` rejects and the write end stays OPEN, so the reader blocks
 * rather than mistaking a cut-off epoch for a complete one. The caller must then
 * stop() the channel (and normally the training command with it). Before `done`
 * rejects, what the writer already accepted goes into the pipe (FAILURE_FLUSH_MS),
 * so a reading script gets every object ahead of the failed one, then blocks.
 *
 * Resume (issue 48, resume.ts): with `resumeFrom` E:N[:R], epochs before E are not served;
 * the first FIFO is <ch>_E, and epoch E's items are its usual ones (itemsForEpoch(E), the
 * same seeded order) from item N on, the first R RecordIO records of item N left out.
 * Progress: the epoch, the items entirely written into the FIFO and the bytes written go to
 * `progressFile` as the epoch streams (throttled; at once when an epoch starts and ends).
 *
 * Metrics: sluice_served_bytes_total{mode="Pipe"} (bytes into the pipe; its rate is
 * the reader's consumption rate), sluice_pipe_full_seconds_total (reader slow),
 * sluice_pipe_empty_seconds_total (S3 slow), sluice_channel_epoch and
 * sluice_channel_objects_total.
 */
import { mkdir } from 'node:fs/promises';
import type { Logger } from 'pino';
import path from 'node:path';
import { InvalidArgumentError } from '../errors.js';
import { log } from '../log.js';
import { channelEpoch, channelObjects, pipeEmptySeconds, pipeFullSeconds, servedBytes } from '../metrics/metrics.js';
import { markFirstByte, markFirstFile } from '../metrics/milestones.js';
import type { ObjectClient } from '../s3/object-client.js';
import { epochBytes, type Compression, type RecordWrapper } from './epoch-bytes.js';
import { DEFAULT_WAIT_WARNING_MS, FifoWriter, type LongWait } from './fifo-writer.js';
import type { BufferPool } from '../memory/buffer-pool.js';
import { fifoOps, nativeLoadError } from '../native/addon.js';
import { slabPool } from '../memory/slab-pool.js';
import { Readahead, type PipeItem } from './readahead.js';
import { DeliveryTracker, formatResume, ProgressFile, type ResumePoint } from './resume.js';

export type { PipeItem } from './readahead.js';

const MiB = 1024 * 1024;
/**
 * 128 MiB: 16 parts of 8 MiB in flight. At ~80 MB/s per S3 stream that is over
 * 1 GB/s, more than a training process reads through one pipe, and it leaves
 * memory for the other channels of the host.
 */
export const DEFAULT_PIPE_MAX_INFLIGHT = 128 * MiB;
/** 8 MiB, AWS's recommended ranged-GET size (as --part-size): amortises TTFB, still parallel. */
export const DEFAULT_PIPE_PART_SIZE = 8 * MiB;
/** 64 GETs at once, the default --max-connections: more would only queue in the client's pool. */
export const DEFAULT_PIPE_MAX_REQUESTS = 64;
/**
 * Decompressed bytes of one RecordIO record held in memory (Gzip + RecordIO), at most a
 * quarter of maxInflight (the read-ahead gets the rest): most samples are far smaller; a
 * larger record spills to disk (recordio.ts). So a channel holds at most maxInflight.
 */
export const RECORD_HOLD_MAX = 16 * MiB;
/**
 * When an epoch fails, the bytes the writer accepted before the failure (whole objects
 * ahead of the failed one) are let into the pipe before `done` rejects, so the reader
 * always sees everything up to the failed object, not a variable part of it. 1 s: the
 * writer thread needs microseconds when the reader is reading; a reader that is not
 * reading must not hold back the failure report for long.
 */
const FAILURE_FLUSH_MS = 1000;
/** SageMaker's channel names: letters, digits, '.', '-', '_' (and never a path). */
const CHANNEL_NAME_RE = /^[A-Za-z0-9._-]+$/;

export interface PipeChannelOptions {
  client: ObjectClient;
  /** The channel name: the FIFOs are `<dataDir>/<channel>_<epoch>`. */
  channel: string;
  /** The folder of the FIFOs, normally `<root>/input/data`; created when missing. */
  dataDir: string;
  /** The items of an epoch, in the order they go into the pipe. Called once per epoch, when its FIFO is made. */
  itemsForEpoch: (epoch: number) => PipeItem[];
  recordWrapper: RecordWrapper;
  compression: Compression;
  /** Number of epochs to serve; unlimited when absent. */
  epochs?: number;
  /** Bytes fetched ahead of the pipe at most (default DEFAULT_PIPE_MAX_INFLIGHT). */
  maxInflight?: number;
  /** Bytes of one ranged GET (default DEFAULT_PIPE_PART_SIZE). */
  partSize?: number;
  /** GETs in flight at most (default DEFAULT_PIPE_MAX_REQUESTS). */
  maxRequests?: number;
  /** Folder for records too large to hold in memory (Gzip + RecordIO); default: the OS temp folder. */
  spillDir?: string;
  /** Warn when a FIFO has waited this long (ms) for the script (default DEFAULT_WAIT_WARNING_MS), then at doubling intervals. */
  waitWarningMs?: number;
  /** Logger (default: sluice's, with component and channel). */
  logger?: Logger;
  /** Start at this epoch, item and record instead of 0:0 (resume.ts). */
  resumeFrom?: ResumePoint;
  /** Where to write the channel's progress (resume.ts); none when absent. */
  progressFile?: string;
}

export interface PipeChannel {
  /** The FIFO of `epoch`: `<dataDir>/<channel>_<epoch>`. */
  fifoPath(epoch: number): string;
  /** The epoch being served (its FIFO exists or is being made). */
  readonly currentEpoch: number;
  /** Resolves when every epoch was served or after stop(); rejects when an epoch failed (then call stop()). */
  done: Promise<void>;
  /** Stop serving: cancel GETs and a pending open, close the write end, remove the FIFO. Idempotent. */
  stop(): Promise<void>;
}

type EpochOutcome = 'finished' | 'reader-closed' | 'stopped';

let warnedNoNative = false;

function checkOptions(o: PipeChannelOptions): void {
  const bad = (what: string, fix: string): never => {
    throw new InvalidArgumentError(`Pipe channel ${JSON.stringify(o.channel)}: ${what}`, { hint: fix });
  };
  if (typeof o.channel !== 'string' || !CHANNEL_NAME_RE.test(o.channel) || o.channel === '.' || o.channel === '..') {
    bad('the channel name must be letters, digits, ".", "-" or "_"', 'Rename the channel (ChannelName)');
  }
  if (typeof o.dataDir !== 'string' || o.dataDir === '') bad('no data folder given', 'Pass dataDir, e.g. /opt/ml/input/data');
  if (typeof o.itemsForEpoch !== 'function') bad('itemsForEpoch is not a function', 'Pass a function from the epoch number to its items');
  if (o.recordWrapper !== 'None' && o.recordWrapper !== 'RecordIO') bad(`RecordWrapperType ${JSON.stringify(o.recordWrapper)} is not None or RecordIO`, 'Use None or RecordIO');
  if (o.compression !== 'None' && o.compression !== 'Gzip') bad(`CompressionType ${JSON.stringify(o.compression)} is not None or Gzip`, 'Use None or Gzip');
  if (o.epochs !== undefined && !(Number.isSafeInteger(o.epochs) && o.epochs >= 1)) bad(`epochs must be a whole number >= 1, got ${o.epochs}`, 'Pass --epochs 1 or more, or leave it out for no limit');
  const r = o.resumeFrom;
  if (r !== undefined) {
    if (![r.epoch, r.object, r.record].every((n) => Number.isSafeInteger(n) && n >= 0)) bad(`resume point ${JSON.stringify(r)} is not whole numbers from 0`, 'Write EPOCH:OBJECT, e.g. 3:1200');
    if (o.epochs !== undefined && r.epoch >= o.epochs) bad(`resume point ${formatResume(r)} is at epoch ${r.epoch}, but only epochs 0..${o.epochs - 1} are served (--epochs ${o.epochs})`, 'Resume at an earlier epoch, or raise --epochs');
    if (r.record > 0 && o.recordWrapper === 'RecordIO') bad(`resume point ${formatResume(r)} skips records inside an object, but with RecordWrapperType RecordIO each object is one record`, `Resume at ${r.epoch}:${r.object + 1} (the next object)`);
  }
  for (const [name, v] of [['maxInflight', o.maxInflight], ['partSize', o.partSize], ['maxRequests', o.maxRequests], ['waitWarningMs', o.waitWarningMs]] as const) {
    if (v !== undefined && !(Number.isSafeInteger(v) && v >= 1)) bad(`${name} must be a whole number >= 1, got ${v}`, `Fix ${name}`);
  }
}

class PipeChannelImpl implements PipeChannel {
  currentEpoch = 0;
  done!: Promise<void>;
  private readonly o: Required<Omit<PipeChannelOptions, 'epochs' | 'spillDir' | 'logger' | 'progressFile'>> & { epochs: number | undefined; spillDir?: string };
  private readonly abort = new AbortController();
  private readonly log: Logger;
  /** FIFOs made and not yet removed: the current epoch's, then maybe the next one's. */
  private readonly fifos = new Map<number, FifoWriter>();
  private stopping = false;
  /** Part buffers, kept across epochs (compression None only): an epoch after the first maps no new memory. */
  private pool: BufferPool | undefined;
  /** The resume epoch's items, checked against the resume point in start(). */
  private resumeItems: PipeItem[] | undefined;
  private readonly progress: ProgressFile | undefined;
  /** The delivery count of each epoch being served (the writer's onWritten feeds it). */
  private readonly deliveries = new Map<number, DeliveryTracker>();

  constructor(o: PipeChannelOptions) {
    this.o = {
      ...o,
      epochs: o.epochs,
      maxInflight: o.maxInflight ?? DEFAULT_PIPE_MAX_INFLIGHT,
      partSize: o.partSize ?? DEFAULT_PIPE_PART_SIZE,
      maxRequests: o.maxRequests ?? DEFAULT_PIPE_MAX_REQUESTS,
      waitWarningMs: o.waitWarningMs ?? DEFAULT_WAIT_WARNING_MS,
      resumeFrom: o.resumeFrom ?? { epoch: 0, object: 0, record: 0 },
    };
    this.log = o.logger ?? log.child({ component: 'pipe', channel: o.channel });
    if (o.progressFile !== undefined) {
      this.progress = new ProgressFile(o.progressFile, (err) => this.log.warn({ err, file: o.progressFile }, 'cannot write the Pipe progress file; the channel goes on without it'));
    }
  }

  fifoPath(epoch: number): string {
    return path.join(this.o.dataDir, `${this.o.channel}_${epoch}`);
  }

  async start(): Promise<void> {
    await mkdir(this.o.dataDir, { recursive: true }).catch((err: NodeJS.ErrnoException) => {
      throw new InvalidArgumentError(`cannot create the data folder ${this.o.dataDir}: ${err.code ?? err.message}`, {
        hint: 'Choose a writable --root', cause: err,
      });
    });
    const r = this.o.resumeFrom;
    if (r.epoch > 0 || r.object > 0 || r.record > 0) {
      // Checked before the first FIFO exists: a resume point past the epoch's end is the user's error, said now.
      this.resumeItems = this.o.itemsForEpoch(r.epoch);
      const n = this.resumeItems.length;
      if (r.object > n || (r.object === n && r.record > 0)) {
        throw new InvalidArgumentError(`Pipe channel ${JSON.stringify(this.o.channel)}: resume point ${formatResume(r)} is past the end of epoch ${r.epoch}, which has ${n} object${n === 1 ? '' : 's'} on this host`, {
          hint: `Resume at ${r.epoch}:0..${r.epoch}:${n}, or at ${r.epoch + 1}:0`,
        });
      }
      this.log.info({ resumeFrom: formatResume(r), objects: n }, 'Pipe channel resumes');
    }
    await this.createFifo(r.epoch);
    this.done = this.run();
    this.done.catch(() => {}); // the caller's handler is theirs to attach; never an unhandled rejection here
  }

  async stop(): Promise<void> {
    if (!this.stopping) {
      this.stopping = true;
      this.abort.abort();
      for (const w of this.fifos.values()) w.destroy();
    }
    await this.done.catch(() => {});
    await this.progress?.flush();
    this.pool?.clear();
    for (const [epoch, w] of [...this.fifos]) {
      this.fifos.delete(epoch);
      await w.remove();
    }
  }

  private async createFifo(epoch: number): Promise<FifoWriter> {
    const labels = { channel: this.o.channel };
    const writer = await FifoWriter.create(this.fifoPath(epoch), {
      onWritten: (n) => {
        this.deliveries.get(epoch)?.onWritten(n);
        servedBytes.inc({ ...labels, mode: 'Pipe' }, n);
        markFirstByte(this.o.channel, 'Pipe');
      },
      onFullWait: (s) => pipeFullSeconds.inc(labels, s),
      onLongWait: (what, ms) => { void this.warnLongWait(epoch, what, ms); },
      waitWarningMs: this.o.waitWarningMs,
    });
    this.fifos.set(epoch, writer);
    return writer;
  }

  /** Say which FIFO has waited how long for the script, and what the script must do. */
  private async warnLongWait(epoch: number, what: LongWait, waitedMs: number): Promise<void> {
    const fifo = this.fifoPath(epoch);
    const waitedSeconds = Math.round(waitedMs / 1000);
    if (what === 'open') {
      this.log.warn({ epoch, fifo, waitedSeconds },
        `Pipe channel ${this.o.channel}: no reader has opened ${fifo} for ${waitedSeconds} s; the training script must open it to receive epoch ${epoch} (sluice keeps waiting)`);
      return;
    }
    const next = this.fifos.get(epoch + 1);
    if (next !== undefined && (await next.probeReader())) {
      this.log.warn({ epoch, fifo, next: next.path, waitedSeconds },
        `Pipe channel ${this.o.channel}: the training script opened ${next.path} while still holding ${fifo} open without reading it for ${waitedSeconds} s; epochs are served one at a time, so it must read ${fifo} to its end or close it before reading the next epoch (sluice keeps waiting)`);
      return;
    }
    this.log.warn({ epoch, fifo, waitedSeconds },
      `Pipe channel ${this.o.channel}: ${fifo} is open but nothing has been read from it for ${waitedSeconds} s (the pipe is full; sluice keeps waiting)`);
  }

  private isLast(epoch: number): boolean {
    return this.o.epochs !== undefined && epoch + 1 >= this.o.epochs;
  }

  private async run(): Promise<void> {
    for (let epoch = this.o.resumeFrom.epoch; ; ) {
      this.currentEpoch = epoch;
      channelEpoch.set({ channel: this.o.channel, mode: 'Pipe' }, epoch);
      const writer = this.fifos.get(epoch) ?? (await this.createFifo(epoch));
      if (this.stopping) return; // stop() came while the FIFO was made: it removes it
      const outcome = await this.serveEpoch(epoch, writer);
      this.log.info({ epoch, outcome }, 'pipe epoch ended');
      this.fifos.delete(epoch);
      await writer.remove();
      if (outcome === 'stopped' || this.stopping || this.isLast(epoch)) return;
      epoch += 1;
    }
  }

  /** Bytes of a decompressed record held in memory: taken out of maxInflight, so the channel stays within it. */
  private get recordHold(): number {
    return this.o.recordWrapper === 'RecordIO' && this.o.compression === 'Gzip' ? Math.min(Math.floor(this.o.maxInflight / 4), RECORD_HOLD_MAX) : 0;
  }

  private async serveEpoch(epoch: number, writer: FifoWriter): Promise<EpochOutcome> {
    const resumed = epoch === this.o.resumeFrom.epoch ? this.o.resumeFrom : undefined;
    const all = resumed && this.resumeItems ? this.resumeItems : this.o.itemsForEpoch(epoch);
    this.resumeItems = undefined;
    const first = resumed?.object ?? 0;
    const items = first > 0 ? all.slice(first) : all;
    const track = new DeliveryTracker(first);
    this.deliveries.set(epoch, track);
    const state = (epochDone: boolean) => () => ({
      channel: this.o.channel, epoch, objectsInEpoch: all.length, objectsDelivered: track.delivered, bytesDelivered: track.written, epochDone,
      resume: epochDone ? `${epoch + 1}:0` : formatResume({ epoch, object: track.delivered, record: 0 }), resumedFrom: formatResume(this.o.resumeFrom),
    });
    const streaming = state(false);
    const report = (epochDone: boolean, force: boolean): void => this.progress?.changed(epochDone ? state(true) : streaming, force);
    track.onChange = () => report(false, false);
    let outcome: EpochOutcome | undefined;
    try {
      outcome = await this.serveItems(epoch, writer, items, track, report, resumed?.record ?? 0);
      return outcome;
    } finally {
      this.deliveries.delete(epoch);
      if (outcome !== 'finished') report(false, true); // where a stopped, cut or failed epoch got to
    }
  }

  private async serveItems(epoch: number, writer: FifoWriter, items: PipeItem[], track: DeliveryTracker,
    report: (epochDone: boolean, force: boolean) => void, skipRecordsOfFirst: number): Promise<EpochOutcome> {
    // The writer holds a part being written and the next one queued (fifo-writer.ts): one of
    // them comes out of the read-ahead's window, so the channel holds maxInflight plus one
    // part, as when the writer held one part at a time.
    const recycleParts = this.o.compression === 'None';
    const writerAhead = recycleParts ? this.o.partSize : 0;
    const maxInflightBytes = Math.max(1, this.o.maxInflight - this.recordHold - writerAhead);
    if (recycleParts && this.pool === undefined) {
      // As readahead.ts sizes its own: the window plus the part being written and the one queued.
      this.pool = slabPool(maxInflightBytes + 2 * this.o.partSize, this.o.partSize);
    }
    const ra = new Readahead(items, {
      client: this.o.client,
      partSize: this.o.partSize,
      maxInflightBytes,
      maxRequests: this.o.maxRequests,
      signal: this.abort.signal,
      recycleParts,
      ...(this.pool ? { pool: this.pool } : {}),
      // A part that comes late starves the reader only when the writer has nothing queued.
      starved: () => writer.drained(),
    });
    try {
      ra.start(); // fetch while the reader has not opened the FIFO yet
      if (!(await writer.open(this.abort.signal))) return 'stopped';
      this.log.info({ epoch, fifo: writer.path, items: items.length, pipeBufferBytes: writer.pipeSize }, 'pipe reader connected');
      this.warnIfNoNative();
      report(false, true);
      if (!this.isLast(epoch) && !this.fifos.has(epoch + 1)) await this.createFifo(epoch + 1);
      const bytes = epochBytes(items, ra, {
        recordWrapper: this.o.recordWrapper,
        compression: this.o.compression,
        recordHoldLimit: this.recordHold,
        ...(this.o.spillDir !== undefined ? { spillDir: this.o.spillDir } : {}),
        bucket: this.o.client.bucket,
        ...(skipRecordsOfFirst > 0 ? { skipRecordsOfFirst } : {}),
        onItemDone: () => {
          track.onObjectHanded();
          report(false, false);
          channelObjects.inc({ channel: this.o.channel, mode: 'Pipe' });
          markFirstFile(this.o.channel, 'Pipe');
        },
        afterWritten: () => writer.flushed(),
      });
      try {
        for (;;) {
          const t0 = process.hrtime.bigint();
          const next = await bytes.next();
          pipeEmptySeconds.inc({ channel: this.o.channel }, Number(process.hrtime.bigint() - t0) / 1e9);
          if (next.done) break;
          track.onHanded(next.value.length);
          if (!(await writer.write(next.value))) return this.stopping ? 'stopped' : 'reader-closed';
        }
      } finally {
        await bytes.return(undefined).catch(() => {});
      }
      if (!(await writer.end())) return this.stopping ? 'stopped' : 'reader-closed';
      report(true, true);
      this.logWriterStats(epoch, writer, ra);
      return 'finished';
    } catch (err) {
      if (this.stopping) return 'stopped'; // GETs aborted by stop()
      await flushWithin(writer, FAILURE_FLUSH_MS);
      this.log.error({ epoch, err }, 'pipe epoch failed; the FIFO stays open until the channel is stopped');
      throw err;
    } finally {
      ra.close();
    }
  }

  /** The paced writer's counts for the epoch, per GB: how often it woke and wrote. */
  private logWriterStats(epoch: number, writer: FifoWriter, ra: Readahead): void {
    const s = writer.writerStats();
    if (s === undefined || s.written === 0) return;
    const perGB = (n: number): number => Math.round((n / s.written) * 1e9);
    this.log.debug({ epoch, ...s, ...ra.stats(), writesPerGB: perGB(s.writes), sleepsPerGB: perGB(s.sleeps), starvedPerGB: perGB(s.starved), idleWaitsPerGB: perGB(s.idleWaits) }, 'pipe writer stats');
  }

  private warnIfNoNative(): void {
    if (warnedNoNative || fifoOps().backend === 'native') return;
    warnedNoNative = true;
    const why = nativeLoadError();
    this.log.warn({ reason: why instanceof Error ? why.message.split('\n')[0] : 'SLUICE_NO_NATIVE is set' },
      'native addon not in use: FIFOs made with the mkfifo command, pipe buffer left at the kernel default (64 KiB)');
  }
}

/** Wait until `writer` has written what it accepted, or `ms`, whichever comes first; never throws. */
async function flushWithin(writer: FifoWriter, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => { timer = setTimeout(resolve, ms); });
  try {
    await Promise.race([writer.flushed().catch(() => {}), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Create the channel's first FIFO and start serving it (see the module comment). */
export async function startPipeChannel(opts: PipeChannelOptions): Promise<PipeChannel> {
  checkOptions(opts);
  const channel = new PipeChannelImpl(opts);
  await channel.start();
  return channel;
}
