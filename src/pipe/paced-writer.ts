/**
 * PacedPipe: the JS side of the addon's paced FIFO writer (native/src/pipe_writer.c).
 *
 * The addon's thread owns the FIFO's write end and copies pushed buffers into it with
 * writev(2); it sleeps while the reader drains the pipe (its rate measured with FIONREAD)
 * instead of waking on every read the reader makes, so a GB costs about a thousand
 * wake-ups and writes instead of tens of thousands of event-loop turns (BENCHMARKS.md,
 * "t11-pipe"). This class keeps every pushed buffer referenced until the thread reports
 * its bytes written (a running total), so a buffer is never reused or collected while the
 * thread may still read it; once the thread reports it finished (end, cancel or a write
 * error) it touches no buffer any more and everything still queued is let go.
 *
 * No promise per buffer: waitWritten(n) makes one only when the caller must wait.
 */

import type { PipeWriterAddon } from '../native/addon.js';

export type { PipeWriterAddon };

/** What one writer did: counts per epoch, for the log (and tests). */
export interface PacedPipeStats {
  /** writev(2) calls that wrote bytes. */
  writes: number;
  /** Times the pipe was full (a partial write or EAGAIN). */
  full: number;
  /** Paced sleeps while the reader drained the pipe. */
  sleeps: number;
  /** Sleeps after which the pipe was empty (the reader may have waited; the next sleep is shorter). */
  starved: number;
  /** Waits for room after the reader paused (no CPU while waiting). */
  idleWaits: number;
  /** Bytes written. */
  written: number;
}

/** errno values the thread reports (Linux). */
const EPIPE = 32;

interface Waiter { until: number; resolve: () => void }

export class PacedPipe {
  private readonly handle: unknown;
  /** Pushed buffers not yet known to be written, in order, with the running total at their end. */
  private readonly pending: Buffer[] = [];
  private readonly pendingEnds: number[] = [];
  private waiters: Waiter[] = [];
  /** Bytes pushed so far. */
  pushed = 0;
  /** Bytes the thread has written so far. */
  written = 0;
  /** The thread has stopped and closed the write end. */
  finished = false;
  /** errno of the write that stopped the thread (0: none). */
  errno = 0;

  constructor(private readonly addon: PipeWriterAddon, fd: number, pipeSize: number, private readonly onWritten?: (bytes: number) => void) {
    this.handle = addon.pipeWriterOpen(fd, pipeSize, (written, finished, errno) => this.progress(written, finished, errno));
  }

  /** The reader closed its end (EPIPE). */
  get readerGone(): boolean {
    return this.errno === EPIPE;
  }

  /** Queue `buf`; false when the writer has finished (nothing queued). */
  push(buf: Buffer): boolean {
    if (buf.length === 0) return !this.finished;
    if (this.finished || !this.addon.pipeWriterPush(this.handle, buf)) return false;
    this.pushed += buf.length;
    this.pending.push(buf);
    this.pendingEnds.push(this.pushed);
    return true;
  }

  /** Resolves once `until` bytes are written, or the writer finished. */
  waitWritten(until: number): Promise<void> {
    if (this.written >= until || this.finished) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ until, resolve }));
  }

  /** Close the write end once everything queued is written; resolves when closed. */
  end(): Promise<void> {
    if (!this.finished) this.addon.pipeWriterEnd(this.handle);
    return this.waitWritten(Infinity);
  }

  /** Stop now; unwritten bytes are dropped. The write end is closed by the thread, just after. */
  cancel(): void {
    if (!this.finished) this.addon.pipeWriterCancel(this.handle);
  }

  stats(): PacedPipeStats {
    const [writes = 0, full = 0, sleeps = 0, starved = 0, idleWaits = 0, written = 0] = this.addon.pipeWriterStats(this.handle);
    return { writes, full, sleeps, starved, idleWaits, written };
  }

  private progress(written: number, finished: boolean, errno: number): void {
    if (written > this.written) this.onWritten?.(written - this.written);
    this.written = written;
    // The queue is short (a part being written, the next one, RecordIO's headers): shift() is fine.
    while (this.pendingEnds.length > 0 && (finished || this.pendingEnds[0]! <= written)) {
      this.pending.shift();
      this.pendingEnds.shift();
    }
    if (finished) {
      this.finished = true;
      this.errno = errno;
    }
    if (this.waiters.length > 0) {
      const still: Waiter[] = [];
      for (const w of this.waiters) {
        if (finished || w.until <= written) w.resolve();
        else still.push(w);
      }
      this.waiters = still;
    }
  }
}
