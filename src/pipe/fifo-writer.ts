/**
 * The write end of one FIFO (one epoch of a Pipe channel).
 *
 * Lifecycle: create() makes the FIFO (replacing a stale FIFO left by an earlier
 * run, refusing to touch anything else); open() waits for a reader; write() and
 * end() stream bytes with backpressure; remove() unlinks the FIFO.
 *
 * Opening without blocking the event loop. A plain open(O_WRONLY) of a FIFO blocks
 * until a reader opens it. Done in libuv's threadpool (fs.open) it would hold one
 * of its 4 threads for as long as the training script takes to open the pipe, and
 * every channel holds one: a few Pipe channels would starve all file system work
 * and DNS lookups (the S3 client's getaddrinfo runs there too). So open() polls
 * instead: open(O_WRONLY | O_NONBLOCK) fails with ENXIO while there is no reader
 * and succeeds at once when one is waiting (a reader blocked in open() already
 * counts as a reader). Polls back off from 1 ms to OPEN_POLL_MAX_MS. Cancelling
 * is just an AbortSignal: there is no blocked thread to wake.
 *
 * Writing, with the addon (paced-writer.ts, native/src/pipe_writer.c): the fd goes to a
 * writer thread that copies queued buffers into the pipe with writev(2) and sleeps while
 * the reader drains it, so a GB costs about a thousand wake-ups instead of one per reader
 * read. write() queues its buffer and resolves once at most max(WRITE_AHEAD_BYTES, its
 * length) bytes wait ahead of the pipe: the next part is queued while one is written, so
 * the pipe never runs dry between parts, and the writer holds at most two parts.
 *
 * Writing, without the addon: the open fd is wrapped in a net.Socket (a libuv pipe
 * handle on epoll), so writes never block a thread either. When the socket buffers more than its
 * high-water mark, write() waits for 'drain': the kernel pipe is full and the
 * reader is slow; that time is reported through onFullWait. A reader that closes
 * early makes the kernel answer EPIPE (Node ignores SIGPIPE); write() and end()
 * then resolve false instead of throwing, and the caller moves to the next epoch.
 *
 * Waits that may never end. A training script that never opens the FIFO, or holds it
 * open without reading (typically: it opened the next epoch's FIFO while still holding
 * this one), leaves the writer waiting forever; the daemon itself never blocks (no
 * thread is held, stop() always works). Such waits are reported through onLongWait,
 * the first time a wait passes `waitWarningMs`, then whenever one passes twice the
 * previous threshold (then at most WAIT_WARNING_MAX_MS apart): a stuck script is named
 * in the log within seconds, and a merely slow reader only a few times per epoch.
 * probeReader() tells whether a reader is already waiting in its open(): it opens the
 * write end early and keeps it for open(), because closing it would hand that reader
 * an early EOF, which it would take for an empty epoch.
 *
 * Pipe buffer. Once open, the FIFO's buffer is raised to PIPE_BUFFER_BYTES with
 * F_SETPIPE_SZ (native addon). Without the addon the kernel default (64 KiB) stays.
 */
import { close as closeCb, constants as fsConstants, open as openCb } from 'node:fs';
import { lstat, readFile, unlink } from 'node:fs/promises';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { getSystemErrorName, promisify } from 'node:util';
import { InvalidArgumentError } from '../errors.js';
import { fifoOps, pipeWriterAddon, type FifoOps } from '../native/addon.js';
import { PacedPipe, type PacedPipeStats } from './paced-writer.js';

const openFd = promisify(openCb);
const closeFd = promisify(closeCb);

/**
 * 1 MiB: the default of /proc/sys/fs/pipe-max-size, the largest buffer an
 * unprivileged process may set. Against the 64 KiB default it means 16 times fewer
 * reader wake-ups and lets the pipe ride out short S3 hiccups.
 */
export const PIPE_BUFFER_BYTES = 1024 * 1024;
/** Where Linux publishes the per-pipe limit, read when PIPE_BUFFER_BYTES is refused. */
const PIPE_MAX_SIZE_FILE = '/proc/sys/fs/pipe-max-size';
/** The kernel's default pipe buffer (16 pages), assumed when the size cannot be read. */
const DEFAULT_PIPE_BYTES = 64 * 1024;
/**
 * 8 MiB, the default Pipe part size: write() resolves once at most this much (or its own
 * buffer's length, if larger) is queued ahead of the pipe, so one part is written while the
 * next waits queued (the pipe never runs dry between parts) and the writer holds two parts.
 */
export const WRITE_AHEAD_BYTES = 8 * 1024 * 1024;
/** First poll delay for a reader: a reader already waiting is found on the first try. */
const OPEN_POLL_MIN_MS = 1;
/**
 * Longest poll delay. A reader's open() returns at our next poll, so this is the
 * most an epoch's start can be delayed (once per epoch: invisible), while 20 failed
 * non-blocking opens per second cost nothing measurable.
 */
export const OPEN_POLL_MAX_MS = 50;
/** rw-r--r--, like the files File mode writes: the training job may run as another user. */
export const FIFO_MODE = 0o644;

/** Default first warning about a wait (--fifo-wait-warning). */
export const DEFAULT_WAIT_WARNING_MS = 10_000;
/** Longest gap between two warnings about the same wait: a stuck job still says so every 10 min. */
export const WAIT_WARNING_MAX_MS = 10 * 60_000;

export type LongWait = 'open' | 'read';

export interface FifoWriterHooks {
  /** A wait passed its warning threshold: 'open' (no reader opened the FIFO) or 'read' (the pipe is full and nothing is read). */
  onLongWait?(what: LongWait, waitedMs: number): void;
  /** First warning threshold (default DEFAULT_WAIT_WARNING_MS). */
  waitWarningMs?: number;
  /** Seconds a write waited because the pipe was full (the reader is slower than S3). */
  onFullWait?(seconds: number): void;
  /** Bytes handed to the kernel. */
  onWritten?(bytes: number): void;
}

export class FifoWriter {
  /** Writes handed to the socket whose callback has not come yet. */
  private pendingWrites = 0;
  private readonly flushWaiters: (() => void)[] = [];
  readonly path: string;
  private readonly hooks: FifoWriterHooks;
  private socket: net.Socket | undefined;
  /** The addon's paced writer, when in use (instead of `socket`). */
  private paced: PacedPipe | undefined;
  /** destroy() was called. */
  private destroyed = false;
  /** EPIPE (or any close) seen: the reader is gone. */
  private readerGone = false;
  private error: Error | undefined;
  /** The pipe buffer size in effect after open(), or undefined when it could not be read (no addon). */
  pipeSize: number | undefined;
  private removed = false;
  /** A write end opened by probeReader(), for open() to take. */
  private early: number | undefined;
  /** Wait (ms) at which the next warning of each kind is due; escalates over the FIFO's life. */
  private readonly warnAt: Record<LongWait, number>;

  private constructor(path: string, hooks: FifoWriterHooks) {
    this.path = path;
    this.hooks = hooks;
    const first = hooks.waitWarningMs ?? DEFAULT_WAIT_WARNING_MS;
    this.warnAt = { open: first, read: first };
  }

  /** Time a wait on the reader (`wait` settles when it has read enough): long-wait reports while it lasts; its seconds. */
  private async timeReaderWait(wait: () => Promise<void>): Promise<number> {
    const t0 = process.hrtime.bigint();
    const stopWatch = this.watchWait('read');
    await wait();
    stopWatch();
    return Number(process.hrtime.bigint() - t0) / 1e9;
  }

  /** Start timing a wait of kind `what`; call the returned function when it ends. */
  private watchWait(what: LongWait): () => void {
    const hook = this.hooks.onLongWait;
    if (!hook) return () => {};
    const t0 = Date.now();
    let timer: NodeJS.Timeout | undefined;
    const arm = (): void => {
      timer = setTimeout(() => {
        const waited = Date.now() - t0;
        const at = this.warnAt[what];
        this.warnAt[what] = Math.min(at * 2, at + WAIT_WARNING_MAX_MS);
        hook(what, waited);
        arm();
      }, Math.max(0, this.warnAt[what] - (Date.now() - t0)));
      timer.unref();
    };
    arm();
    return () => clearTimeout(timer);
  }

  /**
   * True when a reader has the FIFO open or is waiting in open(). Then the write end is
   * opened now (that reader's open() returns; its reads wait for data) and kept for
   * open(). Never blocks.
   */
  async probeReader(): Promise<boolean> {
    if (this.early !== undefined || this.socket !== undefined || this.paced !== undefined) return true;
    if (this.removed) return false;
    try {
      this.early = await openFd(this.path, fsConstants.O_WRONLY | fsConstants.O_NONBLOCK);
      return true;
    } catch {
      return false; // ENXIO: no reader
    }
  }

  /** Make the FIFO at `path`; a stale FIFO there is replaced, anything else is an error. */
  static async create(path: string, hooks: FifoWriterHooks = {}): Promise<FifoWriter> {
    const existing = await lstat(path).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return undefined;
      throw err;
    });
    if (existing !== undefined) {
      if (!existing.isFIFO()) {
        throw new InvalidArgumentError(`${path} exists and is not a FIFO`, {
          hint: 'Remove it, or point the data folder (--root) elsewhere',
        });
      }
      await unlink(path); // left by an earlier run that did not clean up
    }
    try {
      await fifoOps().mkfifo(path, FIFO_MODE);
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      throw new InvalidArgumentError(`cannot create the FIFO ${path}: ${e.code ?? e.message}`, {
        hint: e.code === 'ENOSYS'
          ? 'Install coreutils (the mkfifo command) or build the native addon (cd native && npx node-gyp rebuild)'
          : 'Make sure the data folder (--root) is writable, on a local file system that supports FIFOs',
        cause: err,
      });
    }
    return new FifoWriter(path, hooks);
  }

  /**
   * Wait for a reader, then open the write end. Resolves true when open, false
   * when `signal` aborted first (nothing is left open).
   */
  async open(signal?: AbortSignal): Promise<boolean> {
    const stopWatch = this.watchWait('open');
    try {
      return await this.openPolling(signal);
    } finally {
      stopWatch();
    }
  }

  private async openPolling(signal?: AbortSignal): Promise<boolean> {
    let delay = OPEN_POLL_MIN_MS;
    for (;;) {
      if (signal?.aborted) return false;
      let fd: number;
      try {
        // libuv adds O_CLOEXEC: the training child must not inherit the write end, or it would never see EOF.
        if (this.early !== undefined) {
          fd = this.early;
          this.early = undefined;
        } else {
          fd = await openFd(this.path, fsConstants.O_WRONLY | fsConstants.O_NONBLOCK);
        }
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENXIO') throw err;
        try {
          await sleep(delay, undefined, signal ? { signal } : {});
        } catch {
          return false; // aborted while waiting
        }
        delay = Math.min(delay * 2, OPEN_POLL_MAX_MS);
        continue;
      }
      if (signal?.aborted) {
        // Opened just as we were stopped: close at once, so the reader sees EOF.
        await closeFd(fd).catch(() => {});
        return false;
      }
      this.pipeSize = await growPipe(fd);
      const addon = pipeWriterAddon();
      if (addon !== undefined) {
        try {
          this.paced = new PacedPipe(addon, fd, this.pipeSize ?? DEFAULT_PIPE_BYTES, this.hooks.onWritten);
          return true;
        } catch {
          // no thread or eventfd to spare: write through libuv as without the addon
        }
      }
      this.attach(fd);
      return true;
    }
  }

  /**
   * Write `data`. Resolves true when accepted, false when the reader has gone.
   * Waits while the pipe is full. Throws on errors other than the reader leaving.
   */
  async write(data: Buffer): Promise<boolean> {
    if (this.paced !== undefined) return this.writePaced(this.paced, data);
    const socket = this.socket;
    if (socket === undefined) throw new Error('FifoWriter.write() before open()');
    if (this.error) throw this.error;
    if (this.readerGone || socket.destroyed) return false;
    if (data.length === 0) return true;
    const n = data.length;
    this.pendingWrites++;
    const accepted = socket.write(data, (err) => {
      if (!err) this.hooks.onWritten?.(n);
      if (--this.pendingWrites === 0) for (const w of this.flushWaiters.splice(0)) w();
    });
    if (!accepted) {
      const waited = await this.timeReaderWait(() => new Promise<void>((resolve) => {
        const done = (): void => {
          socket.off('drain', done);
          socket.off('close', done);
          resolve();
        };
        socket.on('drain', done);
        socket.on('close', done);
      }));
      this.hooks.onFullWait?.(waited);
    }
    if (this.error) throw this.error;
    return !this.readerGone;
  }

  private async writePaced(p: PacedPipe, data: Buffer): Promise<boolean> {
    if (this.destroyed) return false;
    if (p.finished) return this.pacedOutcome(p);
    if (!p.push(data)) {
      // Refused: the thread is stopping (a write error it has not reported yet). Wait for it.
      await p.waitWritten(Infinity);
      return this.pacedOutcome(p);
    }
    const until = p.pushed - Math.max(WRITE_AHEAD_BYTES, data.length);
    if (p.written < until) {
      const waited = await this.timeReaderWait(() => p.waitWritten(until));
      this.hooks.onFullWait?.(waited);
    }
    return p.finished ? this.pacedOutcome(p) : true;
  }

  /** After the paced writer stopped: false when the reader left or destroy() stopped it; throws other write errors. */
  private pacedOutcome(p: PacedPipe): boolean {
    if (p.errno !== 0 && !p.readerGone) {
      const code = getSystemErrorName(-p.errno);
      throw Object.assign(new Error(`${code}: cannot write to the FIFO ${this.path}`), { code, errno: -p.errno, syscall: 'write', path: this.path });
    }
    return !p.finished || (!p.readerGone && !this.destroyed && p.written === p.pushed);
  }

  /** True when no byte written so far still waits to enter the pipe (the reader may be about to run dry). */
  drained(): boolean {
    const p = this.paced;
    return p !== undefined ? p.written >= p.pushed : this.pendingWrites === 0;
  }

  /** What the paced writer did (undefined without the addon's writer). */
  writerStats(): PacedPipeStats | undefined {
    return this.paced?.stats();
  }

  /**
   * Resolves once every write accepted so far has completed (its bytes are in the pipe, or
   * the write failed): the caller may then reuse the buffers it wrote.
   */
  flushed(): Promise<void> {
    const p = this.paced;
    if (p !== undefined) {
      if (p.written >= p.pushed || p.finished) return Promise.resolve();
      const stopWatch = this.watchWait('read');
      return p.waitWritten(p.pushed).then(stopWatch);
    }
    if (this.pendingWrites === 0) return Promise.resolve();
    // Writes still pending wait on the reader as much as a 'drain' does (a write the
    // socket accepted whole, below its high-water mark, may still sit in a full pipe):
    // the same long-wait reports apply.
    const stopWatch = this.watchWait('read');
    return new Promise((resolve) => this.flushWaiters.push(() => { stopWatch(); resolve(); }));
  }

  /**
   * Flush and close the write end: the reader reads what is left, then EOF.
   * Resolves true when everything was flushed, false when the reader left first.
   * Waits while the reader has not read the rest; destroy() cuts that short.
   */
  async end(): Promise<boolean> {
    const p = this.paced;
    if (p !== undefined) {
      if (this.destroyed) return false;
      const waited = await this.timeReaderWait(() => p.end());
      if (waited > 0) this.hooks.onFullWait?.(waited);
      return this.pacedOutcome(p);
    }
    const socket = this.socket;
    if (socket === undefined) return false;
    if (!socket.destroyed) {
      const waited = await this.timeReaderWait(() => new Promise<void>((resolve) => {
        socket.once('close', () => resolve());
        socket.end();
      }));
      if (waited > 0) this.hooks.onFullWait?.(waited);
    }
    this.socket = undefined;
    if (this.error) throw this.error;
    return !this.readerGone;
  }

  /** Close the write end now, dropping unwritten bytes. */
  destroy(): void {
    this.destroyed = true;
    this.paced?.cancel();
    this.socket?.destroy();
    this.socket = undefined;
    this.closeEarly();
  }

  /** Close a write end probeReader() opened and open() never took (the channel stops). */
  private closeEarly(): void {
    if (this.early === undefined) return;
    closeCb(this.early, () => {});
    this.early = undefined;
  }

  /**
   * Unlink the FIFO (once; a FIFO already gone is fine). A reader blocked in open()
   * on it would stay blocked forever once it is unlinked, so first open and close a
   * write end: such a reader wakes up and reads EOF.
   */
  async remove(): Promise<void> {
    if (this.removed) return;
    this.removed = true;
    this.closeEarly();
    try {
      const fd = await openFd(this.path, fsConstants.O_WRONLY | fsConstants.O_NONBLOCK);
      await closeFd(fd);
    } catch {
      // ENXIO: nobody is waiting (or the FIFO is already gone): nothing to wake
    }
    await unlink(this.path).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
  }

  private attach(fd: number): void {
    const socket = new net.Socket({ fd, readable: false, writable: true });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE' || err.code === 'ECONNRESET') this.readerGone = true;
      else this.error = err;
    });
    socket.on('close', () => {
      // Closed by the peer (not by end()/destroy()): treat as the reader leaving.
      if (!socket.writableFinished) this.readerGone = true;
    });
    this.socket = socket;
  }
}

/**
 * Raise the pipe buffer of `fd` to PIPE_BUFFER_BYTES, or to the system limit when an
 * administrator set /proc/sys/fs/pipe-max-size lower; the size in effect, if known (the
 * kernel's default stays when both are refused, e.g. by the per-user pipe quota).
 * `ops` and `readLimit` are for tests.
 */
export async function growPipe(
  fd: number,
  ops: Pick<FifoOps, 'setPipeSize' | 'getPipeSize'> = fifoOps(),
  readLimit: () => Promise<string> = () => readFile(PIPE_MAX_SIZE_FILE, 'utf8'),
): Promise<number | undefined> {
  try {
    return ops.setPipeSize(fd, PIPE_BUFFER_BYTES);
  } catch {
    // EPERM: an administrator lowered pipe-max-size below 1 MiB. Take what is allowed.
    const limit = Number((await readLimit().catch(() => '')).trim());
    if (Number.isInteger(limit) && limit > 0 && limit < PIPE_BUFFER_BYTES) {
      try {
        return ops.setPipeSize(fd, limit);
      } catch {
        // keep the default
      }
    }
    try {
      return ops.getPipeSize(fd);
    } catch {
      return undefined;
    }
  }
}
