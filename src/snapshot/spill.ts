/**
 * An external sort of a listing into S3 order (issue 46), so that `sluice snapshot` of ten
 * million objects holds a bounded number of them, not the whole listing.
 *
 * The parallel lister (src/s3/lister.ts) yields its ranges' pages interleaved, so the
 * listing comes in no order. Algorithm:
 *  1. add(): serialise the object at once (objectLine, the writer's own bytes) and keep only
 *     {key, size, line}; at RUN_OBJECTS of them, sort them by key (compareKeys: S3's order;
 *     V8's sort is a merge sort that takes the pages' sorted stretches as they come) and
 *     write them to a run file as records [u32 key bytes][u32 line bytes][f64 size][key][line\n].
 *  2. sorted(): merge the runs (a binary heap on each run's current key), each read in
 *     READ_BYTES pieces, with the last run, never spilled, merged from memory. Equal keys
 *     come out next to each other: the writer (writeSnapshotStream) refuses them.
 * Memory: one run of entries plus one READ_BYTES buffer per run file (100 runs at 10 M
 * objects: 13 MiB), whatever the count. Disk: the runs, about the uncompressed snapshot's size, in a
 * folder beside the snapshot (same file system, same permissions), removed by close().
 */
import { mkdir, open, rm, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { SnapshotError } from '../errors.js';
import { compareKeys } from '../s3/lister.js';
import type { ObjectInfo } from '../s3/object-client.js';
import { objectLine, type SnapshotLine } from './snapshot.js';

/**
 * Objects per sorted run: ~300 bytes each as strings (a key, a ~200-byte line), so ~30 MiB
 * held at most, while 10 M objects make 100 runs (a merge of 100 costs ~7 comparisons per
 * object) and 100 M make 1,000 (still one pass: 125 MiB of read buffers).
 */
export const RUN_OBJECTS = 100_000;
/** Read size per run while merging: some 500 records per read, 128 KiB held per run. */
const READ_BYTES = 128 * 1024;
/** Write size while spilling a run. */
const WRITE_BYTES = 1024 * 1024;
/** Bytes of a record's fixed part: two u32 lengths and the size as a double. */
const REC_HEAD = 16;

interface Entry { key: string; size: number; line: string }

/** A source of records in key order: a run file, or the last run in memory. */
interface Cursor {
  cur: SnapshotLine | undefined;
  /** Moves to the next record; a promise only when it must read. */
  advance(): void | Promise<void>;
  close(): Promise<void>;
}

class FileCursor implements Cursor {
  cur: SnapshotLine | undefined;
  private buf = Buffer.allocUnsafe(READ_BYTES);
  private at = 0;
  private end = 0;
  private eof = false;
  constructor(private readonly fh: FileHandle, private readonly name: string) {}

  private take(): boolean {
    if (this.end - this.at < REC_HEAD) return false;
    const k = this.buf.readUInt32LE(this.at);
    const l = this.buf.readUInt32LE(this.at + 4);
    if (this.end - this.at < REC_HEAD + k + l) return false;
    const size = this.buf.readDoubleLE(this.at + 8);
    const ks = this.at + REC_HEAD;
    const key = this.buf.toString('utf8', ks, ks + k);
    const line = Buffer.from(this.buf.subarray(ks + k, ks + k + l)); // a copy: the buffer is reused
    this.at = ks + k + l;
    this.cur = { key, size, line };
    return true;
  }

  advance(): void | Promise<void> {
    if (this.take()) return;
    return this.fill();
  }

  private async fill(): Promise<void> {
    for (;;) {
      if (this.take()) return;
      if (this.eof) {
        if (this.end > this.at) throw new SnapshotError(`snapshot run file ${this.name} is truncated`, { hint: 'Another process changed the folder; write the snapshot again' });
        this.cur = undefined;
        return;
      }
      // Keep the partial record, then read after it (a record longer than the buffer grows it).
      const rest = this.end - this.at;
      if (this.at > 0) { this.buf.copy(this.buf, 0, this.at, this.end); this.at = 0; this.end = rest; }
      if (this.end === this.buf.length) { const b = Buffer.allocUnsafe(this.buf.length * 2); this.buf.copy(b, 0, 0, this.end); this.buf = b; }
      const { bytesRead } = await this.fh.read(this.buf, this.end, this.buf.length - this.end, null);
      if (bytesRead === 0) this.eof = true;
      this.end += bytesRead;
    }
  }

  close(): Promise<void> { return this.fh.close(); }
}

class MemoryCursor implements Cursor {
  cur: SnapshotLine | undefined;
  private i = 0;
  constructor(private readonly entries: Entry[]) {}
  advance(): void {
    const e = this.entries[this.i];
    if (e) this.entries[this.i] = undefined as unknown as Entry; // let it go once merged
    this.i++;
    this.cur = e ? { key: e.key, size: e.size, line: Buffer.from(`${e.line}\n`) } : undefined;
  }
  close(): Promise<void> { return Promise.resolve(); }
}

const byKey = (a: { key: string }, b: { key: string }) => compareKeys(a.key, b.key);

export class SnapshotSpill {
  private entries: Entry[] = [];
  private runs: string[] = [];
  private readonly dir: string;

  /** `file`: the snapshot the runs are for (they go in a folder beside it). */
  constructor(file: string, private readonly runObjects = RUN_OBJECTS) {
    this.dir = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.runs`);
  }

  /** Takes one object; spills a run (a promise) when it has RUN_OBJECTS. */
  add(o: ObjectInfo): void | Promise<void> {
    this.entries.push({ key: o.key, size: o.size, line: objectLine(o) });
    if (this.entries.length >= this.runObjects) return this.spill();
  }

  private async spill(): Promise<void> {
    const entries = this.entries.sort(byKey);
    this.entries = [];
    if (this.runs.length === 0) await mkdir(this.dir, { recursive: true });
    const name = path.join(this.dir, `run-${this.runs.length}`);
    this.runs.push(name);
    const fh = await open(name, 'w');
    try {
      let buf = Buffer.allocUnsafe(WRITE_BYTES);
      let at = 0;
      for (const e of entries) {
        const k = Buffer.byteLength(e.key);
        const l = Buffer.byteLength(e.line) + 1;
        if (at + REC_HEAD + k + l > buf.length) {
          if (at > 0) await fh.write(buf, 0, at);
          at = 0;
          if (REC_HEAD + k + l > buf.length) buf = Buffer.allocUnsafe(REC_HEAD + k + l);
        }
        buf.writeUInt32LE(k, at);
        buf.writeUInt32LE(l, at + 4);
        buf.writeDoubleLE(e.size, at + 8);
        at += REC_HEAD;
        at += buf.write(e.key, at);
        at += buf.write(e.line, at);
        buf[at++] = 0x0a;
      }
      if (at > 0) await fh.write(buf, 0, at);
    } finally {
      await fh.close();
    }
  }

  /** Every object added, in S3 order, as its line. Call once, after the last add(). */
  async *sorted(): AsyncGenerator<SnapshotLine> {
    const cursors: Cursor[] = [];
    try {
      for (const r of this.runs) cursors.push(new FileCursor(await open(r, 'r'), r));
      cursors.push(new MemoryCursor(this.entries.sort(byKey)));
      this.entries = [];
      const heap: Cursor[] = [];
      for (const c of cursors) {
        await c.advance();
        if (c.cur) heap.push(c);
      }
      const less = (i: number, j: number) => compareKeys(heap[i]!.cur!.key, heap[j]!.cur!.key) < 0;
      const down = (i: number) => {
        for (;;) {
          const l = 2 * i + 1;
          const r = l + 1;
          let m = i;
          if (l < heap.length && less(l, m)) m = l;
          if (r < heap.length && less(r, m)) m = r;
          if (m === i) return;
          [heap[i], heap[m]] = [heap[m]!, heap[i]!];
          i = m;
        }
      };
      for (let i = (heap.length >> 1) - 1; i >= 0; i--) down(i);
      while (heap.length > 0) {
        const top = heap[0]!;
        yield top.cur!;
        const p = top.advance();
        if (p) await p;
        if (!top.cur) {
          heap[0] = heap[heap.length - 1]!;
          heap.pop();
        }
        if (heap.length > 0) down(0);
      }
    } finally {
      await Promise.all(cursors.map((c) => c.close().catch(() => undefined)));
    }
  }

  /** Removes the run files. */
  async close(): Promise<void> {
    this.entries = [];
    if (this.runs.length > 0) await rm(this.dir, { recursive: true, force: true });
  }
}
