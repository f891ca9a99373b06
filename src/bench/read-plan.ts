/**
 * What a reader process is asked to do and what it answers, shared by the
 * benchmark runner (which writes the plan) and src/bench/reader.ts (which runs it
 * in its own process, so the reading is not in sluice's or the runner's process).
 *
 * Random reads use a seeded xorshift32 sequence of block-aligned offsets, so the
 * runner can compute the expected bytes from the dataset's source without
 * seeing what the reader read.
 */

/**
 * When the reader hashes (see reader.ts): 'after' the timed span, from an arena of
 * `keepBytes` (what does not fit is hashed inline and counted), or 'inline', as each
 * read arrives. Absent: inline with no arena (the behaviour of old plans).
 */
export interface ReaderHashing {
  hash?: 'after' | 'inline';
  keepBytes?: number;
}

export type ReadPlan = ReaderHashing & (
  | {
    kind: 'files';
    /** Files to read whole, in this order. */
    paths: string[];
    /** Stop starting new files after this many seconds (the figure covers the files read). */
    maxSeconds: number;
  }
  | {
    kind: 'random';
    path: string;
    fileSize: number;
    blockSize: number;
    ops: number;
    threads: number;
    seed: number;
    maxSeconds: number;
  }
  | {
    kind: 'stream';
    /** A FIFO (Pipe mode) read to its end; split into segments of these sizes for hashing. */
    path: string;
    segments: number[];
    maxSeconds: number;
  });

export interface ReadResult {
  /** Epoch ms (performance.timeOrigin + now) when the reader began and ended. */
  startMs: number;
  endMs: number;
  /** Epoch ms when the first byte arrived. */
  firstByteMs: number | undefined;
  bytes: number;
  /** The reader process's CPU seconds (user + system) spent reading: the timed span's, less any inline hashing. */
  cpuSeconds?: number;
  /** CPU seconds spent hashing: inline (inside the span) plus after the span. */
  hashCpuSeconds?: number;
  /** How the reader hashed (ReaderHashing.hash), and how many bytes it hashed inside the timed span. */
  hash?: 'after' | 'inline';
  inlineHashedBytes?: number;
  /** Files read whole / random ops done / stream segments read. */
  items: number;
  /** sha256 (hex) per file or per stream segment, in plan order; for random: one hash of all blocks in op order. */
  sha256: string[];
  /** stream: the object cut short by the time limit, hashed as far as it was read (checked against the source's prefix). */
  partial?: { sha256: string; bytes: number };
  /** True when the time limit stopped the reader early. */
  truncated: boolean;
  error?: string;
}

/** Block-aligned pseudo-random offsets (xorshift32 from `seed`). */
export function randomOffsets(seed: number, count: number, fileSize: number, blockSize: number): number[] {
  const blocks = Math.max(1, Math.floor(fileSize / blockSize));
  let x = (seed >>> 0) || 0x9e3779b9;
  const out: number[] = [];
  for (let i = 0; i < count; i++) {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    out.push((x % blocks) * blockSize);
  }
  return out;
}

/** Epoch milliseconds with sub-ms precision, comparable across processes. */
export function epochMs(): number {
  return performance.timeOrigin + performance.now();
}
