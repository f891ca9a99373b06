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
 *
 * When the bytes are hashed (plan.hash):
 *  - 'after' (the default the runner asks for): the bytes are read into one arena of
 *    `keepBytes` (+ one read of slack), mapped and touched before the clock starts, and
 *    hashed after it stops. The timed span then measures the data source alone, as the
 *    link limit (curl into files, hashed afterwards) does, so "% of the link" compares
 *    like with like, and sha256 still checks every byte. When a run reads more than the
 *    arena holds, the rest is hashed inline as below, and `inlineHashedBytes` says how
 *    much (the report marks such figures).
 *  - 'inline' (the behaviour before, kept to measure the difference): each read is
 *    hashed as it arrives, inside the timed span, with one reused READ_SIZE buffer.
 * Either way the reader's CPU is reported split: `hashCpuSeconds` is all hashing (inline
 * hashing timed around each update, deferred hashing what follows the span), and
 * `cpuSeconds` the rest of the span (the reading).
 */
import { createHash, type Hash } from 'node:crypto';
import { open, readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { prefaultedAlloc } from '../native/addon.js';
import { epochMs, randomOffsets, type ReadPlan, type ReaderHashing, type ReadResult } from './read-plan.js';

/** 1 MiB reads: what a data loader's buffered reader does; the kernel splits them into FUSE max_read requests. */
export const READ_SIZE = 1024 * 1024;

/** What hashes: node:crypto's sha256 (tests pass a recording wrapper). */
export type HashFactory = () => Pick<Hash, 'update' | 'digest'>;
const sha256: HashFactory = () => createHash('sha256');

function cpuNow(): number {
  const c = process.cpuUsage();
  return (c.user + c.system) / 1e6;
}

/** One file's (or one stream segment's, or the random ops') bytes: kept in the arena, or hashed as they came. */
interface Item { kept: Buffer[]; h: ReturnType<HashFactory> | undefined }

/**
 * Where read bytes go: the arena while it has room for a whole read, then (for the
 * rest of the run) a reused scratch buffer whose bytes are hashed at once.
 */
class Keeper {
  private pos = 0;
  private full: boolean;
  inlineHashedBytes = 0;
  inlineHashCpu = 0;
  private readonly scratch = Buffer.allocUnsafe(READ_SIZE);

  constructor(private readonly arena: Buffer | undefined, private readonly hash: HashFactory) {
    this.full = arena === undefined;
  }

  item(): Item { return { kept: [], h: undefined }; }

  /** The buffer and offset the next read of up to `n` bytes goes to. */
  target(n: number): [Buffer, number] {
    if (!this.full && this.arena!.length - this.pos >= n) return [this.arena!, this.pos];
    this.full = true;
    return [this.scratch, 0];
  }

  /** `n` bytes were read into `buf` at `off` (from target()): the arena keeps them. */
  advance(buf: Buffer, n: number): void {
    if (buf === this.arena) this.pos += n;
  }

  /** Bytes buf[off, off+n) belong to `it`: kept if in the arena, else hashed now. */
  add(it: Item, buf: Buffer, off: number, n: number): void {
    if (buf === this.arena) { it.kept.push(buf.subarray(off, off + n)); return; }
    const c0 = cpuNow();
    it.h ??= this.hash();
    for (const k of it.kept) { it.h.update(k); this.inlineHashedBytes += k.length; }
    it.kept = [];
    it.h.update(buf.subarray(off, off + n));
    this.inlineHashedBytes += n;
    this.inlineHashCpu += cpuNow() - c0;
  }

  /** The item's sha256: what was hashed inline, then what was kept. */
  digest(it: Item): string {
    const h = it.h ?? this.hash();
    for (const k of it.kept) h.update(k);
    it.kept = [];
    return h.digest('hex');
  }
}

/** Work left for after the span: digests in plan order, filled into `r`. */
type Finish = (() => void)[];

async function readFiles(plan: Extract<ReadPlan, { kind: 'files' }>, r: ReadResult, k: Keeper, after: Finish): Promise<void> {
  const deadline = r.startMs + plan.maxSeconds * 1000;
  for (const p of plan.paths) {
    if (epochMs() > deadline) { r.truncated = true; break; }
    const fh = await open(p, 'r');
    try {
      const it = k.item();
      let pos = 0;
      for (;;) {
        const [buf, off] = k.target(READ_SIZE);
        const { bytesRead } = await fh.read(buf, off, READ_SIZE, pos);
        if (bytesRead === 0) break;
        r.firstByteMs ??= epochMs();
        k.advance(buf, bytesRead);
        k.add(it, buf, off, bytesRead);
        pos += bytesRead;
      }
      r.bytes += pos;
      r.items++;
      after.push(() => { r.sha256.push(k.digest(it)); });
    } finally {
      await fh.close();
    }
  }
}

async function readRandom(plan: Extract<ReadPlan, { kind: 'random' }>, r: ReadResult, arena: Buffer | undefined, hash: HashFactory, after: Finish): Promise<void> {
  const deadline = r.startMs + plan.maxSeconds * 1000;
  const offsets = randomOffsets(plan.seed, plan.ops, plan.fileSize, plan.blockSize);
  // Every op's block is kept (the ops finish out of order and are hashed in op order):
  // in the arena at op * blockSize when it holds them all, else one buffer per op.
  const inArena = arena !== undefined && arena.length >= offsets.length * plan.blockSize;
  const blocks: Buffer[] = new Array(offsets.length);
  const fh = await open(plan.path, 'r');
  let next = 0;
  let done = 0;
  const thread = async () => {
    while (next < offsets.length) {
      if (epochMs() > deadline) { r.truncated = true; return; }
      const i = next++;
      const b = inArena ? arena!.subarray(i * plan.blockSize, (i + 1) * plan.blockSize) : Buffer.allocUnsafe(plan.blockSize);
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
  // Hash the completed prefix of ops in op order (a truncated run hashes what it has contiguously).
  const finish = () => {
    const h = hash();
    let items = 0;
    while (items < blocks.length && blocks[items] !== undefined) h.update(blocks[items++]!);
    r.items = items;
    if (items < done) r.truncated = true;
    r.sha256.push(h.digest('hex'));
    return blocks.slice(0, items).reduce((n, b) => n + b.length, 0);
  };
  if (inArena) { after.push(() => { finish(); }); return; }
  // Not kept for later: hashed here, inside the span, as before.
  const c0 = cpuNow();
  r.inlineHashedBytes = finish();
  r.hashCpuSeconds = cpuNow() - c0;
}

async function readStream(plan: Extract<ReadPlan, { kind: 'stream' }>, r: ReadResult, k: Keeper, after: Finish): Promise<void> {
  const deadline = r.startMs + plan.maxSeconds * 1000;
  // Position null: a FIFO is read as it comes, READ_SIZE at most per read (libuv's pool, as createReadStream does).
  const fh = await open(plan.path, 'r');
  try {
    let seg = 0;
    let left = plan.segments[0] ?? 0;
    let it = k.item();
    for (;;) {
      const [buf, off] = k.target(READ_SIZE);
      const { bytesRead } = await fh.read(buf, off, READ_SIZE, null);
      if (bytesRead === 0) break;
      r.firstByteMs ??= epochMs();
      r.bytes += bytesRead;
      k.advance(buf, bytesRead);
      let o = 0;
      while (o < bytesRead) {
        if (seg >= plan.segments.length) { r.error = `stream longer than the ${plan.segments.length} objects expected`; return; }
        const n = Math.min(left, bytesRead - o);
        k.add(it, buf, off + o, n);
        o += n;
        left -= n;
        if (left === 0) {
          const done = it;
          after.push(() => { r.sha256.push(k.digest(done)); });
          r.items++;
          seg++;
          it = k.item();
          left = plan.segments[seg] ?? 0;
        }
      }
      if (epochMs() > deadline) {
        r.truncated = true;
        const got = plan.segments[seg] === undefined ? 0 : plan.segments[seg]! - left;
        if (got > 0) { const cut = it; after.push(() => { r.partial = { sha256: k.digest(cut), bytes: got }; }); }
        break;
      }
    }
  } finally {
    await fh.close();
  }
}

/**
 * The keep arena for `h` (undefined for inline hashing or keepBytes 0): keepBytes plus one
 * read of slack, so the last read of the last kept file still finds a whole READ_SIZE free,
 * with every page mapped now (our addon's pre-faulted mapping, else a fill), so no page
 * fault is charged to the span.
 */
export function mapArena(h: ReaderHashing): Buffer | undefined {
  const keep = h.hash === 'after' ? Math.max(0, h.keepBytes ?? 0) : 0;
  if (keep === 0) return undefined;
  const n = keep + READ_SIZE;
  return prefaultedAlloc()?.(n) ?? Buffer.allocUnsafeSlow(n).fill(0);
}

/**
 * Runs one plan in this process and returns its result. The span (startMs..endMs, and
 * cpuSeconds) covers the reads; deferred hashing follows it. `arena`: one mapped
 * beforehand by mapArena(plan) (a prepared reader); else it is mapped here, untimed.
 */
export async function runPlan(plan: ReadPlan, opts: { arena?: Buffer | undefined; hash?: HashFactory } = {}): Promise<ReadResult> {
  const after = plan.hash === 'after';
  const hash = opts.hash ?? sha256;
  const arena = after ? opts.arena ?? mapArena(plan) : undefined;
  const k = new Keeper(plan.kind === 'random' ? undefined : arena, hash);
  const finish: Finish = [];
  const cpu0 = cpuNow();
  const r: ReadResult = { startMs: epochMs(), endMs: 0, firstByteMs: undefined, bytes: 0, items: 0, sha256: [], truncated: false, hash: after ? 'after' : 'inline' };
  try {
    if (plan.kind === 'files') await readFiles(plan, r, k, finish);
    else if (plan.kind === 'random') await readRandom(plan, r, arena, hash, finish);
    else await readStream(plan, r, k, finish);
  } catch (err) {
    r.error = err instanceof Error ? err.message : String(err);
  }
  r.endMs = epochMs();
  const cpu1 = cpuNow();
  r.cpuSeconds = cpu1 - cpu0 - k.inlineHashCpu;
  for (const f of finish) f();
  r.inlineHashedBytes = (r.inlineHashedBytes ?? 0) + k.inlineHashedBytes;
  r.hashCpuSeconds = (r.hashCpuSeconds ?? 0) + k.inlineHashCpu + (cpuNow() - cpu1);
  return r;
}

/**
 * As a process: `reader.js PLAN.json` runs the plan at once; `reader.js -` is a prepared
 * reader: its first stdin line is its ReaderHashing, it maps the arena, prints "ready",
 * then runs the plan of its second stdin line. The runner prepares readers before it
 * starts the target, so neither process start-up nor the arena is in any target's time.
 */
async function main(arg: string): Promise<void> {
  let plan: ReadPlan;
  let arena: Buffer | undefined;
  if (arg === '-') {
    const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
    const next = async () => { const l = await lines.next(); if (l.done) process.exit(0); return JSON.parse(l.value) as unknown; };
    arena = mapArena((await next()) as ReaderHashing);
    process.stdout.write('ready\n');
    plan = (await next()) as ReadPlan;
  } else {
    plan = JSON.parse(await readFile(arg, 'utf8')) as ReadPlan;
  }
  process.stdout.write(JSON.stringify(await runPlan(plan, { arena })) + '\n');
  process.exit(0);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main(process.argv[2] ?? '-');
