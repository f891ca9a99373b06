/**
 * A reader process for `sluice bench` (`node dist/bench/reader.js PLAN.json`):
 * plays the training script's part, so the reading happens outside sluice's
 * process and outside the runner's. It runs one ReadPlan (see read-plan.ts),
 * hashes what it read, and prints one JSON ReadResult line on stdout.
 *
 *  - files: reads each file whole with READ_SIZE reads, in order;
 *  - random: `threads` concurrent preads of `blockSize` at seeded offsets (libuv's
 *    pool runs them in parallel; the runner sets UV_THREADPOOL_SIZE to `threads`);
 *  - stream: reads a FIFO to its end, hashing each object's segment separately.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { open, readFile } from 'node:fs/promises';
import { epochMs, randomOffsets, type ReadPlan, type ReadResult } from './read-plan.js';

/** 1 MiB reads: what a data loader's buffered reader does; the kernel splits them into FUSE max_read requests. */
const READ_SIZE = 1024 * 1024;

async function readFiles(plan: Extract<ReadPlan, { kind: 'files' }>, r: ReadResult): Promise<void> {
  const deadline = r.startMs + plan.maxSeconds * 1000;
  const buf = Buffer.allocUnsafe(READ_SIZE);
  for (const p of plan.paths) {
    if (epochMs() > deadline) { r.truncated = true; break; }
    const fh = await open(p, 'r');
    try {
      const h = createHash('sha256');
      let pos = 0;
      for (;;) {
        const { bytesRead } = await fh.read(buf, 0, READ_SIZE, pos);
        if (bytesRead === 0) break;
        r.firstByteMs ??= epochMs();
        h.update(buf.subarray(0, bytesRead));
        pos += bytesRead;
      }
      r.bytes += pos;
      r.items++;
      r.sha256.push(h.digest('hex'));
    } finally {
      await fh.close();
    }
  }
}

async function readRandom(plan: Extract<ReadPlan, { kind: 'random' }>, r: ReadResult): Promise<void> {
  const deadline = r.startMs + plan.maxSeconds * 1000;
  const offsets = randomOffsets(plan.seed, plan.ops, plan.fileSize, plan.blockSize);
  const blocks: Buffer[] = new Array(offsets.length);
  const fh = await open(plan.path, 'r');
  let next = 0;
  let done = 0;
  const thread = async () => {
    while (next < offsets.length) {
      if (epochMs() > deadline) { r.truncated = true; return; }
      const i = next++;
      const b = Buffer.allocUnsafe(plan.blockSize);
      const { bytesRead } = await fh.read(b, 0, plan.blockSize, offsets[i]!);
      r.firstByteMs ??= epochMs();
      blocks[i] = b.subarray(0, bytesRead);
      r.bytes += bytesRead;
      done++;
    }
  };
  try {
    await Promise.all(Array.from({ length: plan.threads }, thread));
  } finally {
    await fh.close();
  }
  // Hash the completed prefix of ops in op order (ops finish out of order; a truncated run hashes what it has contiguously).
  const h = createHash('sha256');
  let items = 0;
  while (items < blocks.length && blocks[items] !== undefined) h.update(blocks[items++]!);
  r.items = items;
  if (items < done) r.truncated = true;
  r.sha256.push(h.digest('hex'));
}

async function readStream(plan: Extract<ReadPlan, { kind: 'stream' }>, r: ReadResult): Promise<void> {
  const deadline = r.startMs + plan.maxSeconds * 1000;
  const stream = createReadStream(plan.path, { highWaterMark: READ_SIZE });
  let seg = 0;
  let left = plan.segments[0] ?? 0;
  let h = createHash('sha256');
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    r.firstByteMs ??= epochMs();
    r.bytes += chunk.length;
    let off = 0;
    while (off < chunk.length) {
      if (seg >= plan.segments.length) { r.error = `stream longer than the ${plan.segments.length} objects expected`; return; }
      const n = Math.min(left, chunk.length - off);
      h.update(chunk.subarray(off, off + n));
      off += n;
      left -= n;
      if (left === 0) {
        r.sha256.push(h.digest('hex'));
        r.items++;
        seg++;
        h = createHash('sha256');
        left = plan.segments[seg] ?? 0;
      }
    }
    if (epochMs() > deadline) {
      r.truncated = true;
      const done = plan.segments[seg] === undefined ? 0 : plan.segments[seg]! - left;
      if (done > 0) r.partial = { sha256: h.digest('hex'), bytes: done };
      stream.destroy();
      break;
    }
  }
}

const plan = JSON.parse(await readFile(process.argv[2]!, 'utf8')) as ReadPlan;
const result: ReadResult = { startMs: epochMs(), endMs: 0, firstByteMs: undefined, bytes: 0, items: 0, sha256: [], truncated: false };
try {
  if (plan.kind === 'files') await readFiles(plan, result);
  else if (plan.kind === 'random') await readRandom(plan, result);
  else await readStream(plan, result);
} catch (err) {
  result.error = err instanceof Error ? err.message : String(err);
}
result.endMs = epochMs();
const cpu = process.cpuUsage();
result.cpuSeconds = (cpu.user + cpu.system) / 1e6;
process.stdout.write(JSON.stringify(result) + '\n');
