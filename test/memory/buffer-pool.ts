/**
 * The GET buffer pool (src/memory/buffer-pool.ts) and its safety in the block cache:
 * a recycled buffer is never visible to a reader that still holds a block of it.
 */
import t from 'tap';
import { BlockCache } from '../../src/cache/block-cache.js';
import { BufferPool } from '../../src/memory/buffer-pool.js';
import { BlockFetcher, type FileRef } from '../../src/prefetch/block-fetcher.js';
import { InflightBudget } from '../../src/prefetch/inflight-budget.js';
import { ReadCursor } from '../../src/prefetch/read-cursor.js';
import type { ObjectClient, ObjectInfo, RangeOptions } from '../../src/s3/object-client.js';
import { patternBytes } from '../helpers/fake-client.js';

const KiB = 1024;
const BLOCK = 64 * KiB;
const PART = 4 * BLOCK;

t.test('pool: exact lengths are recycled once the last reference is gone; others are not pooled', async (t) => {
  const pool = new BufferPool({ maxBytes: 4 * PART, unit: BLOCK });
  t.equal(pool.acquire(BLOCK + 1), undefined, 'a length that is not a whole number of units is not pooled');
  t.equal(pool.acquire(BLOCK / 2), undefined, 'nor one below a unit');
  const a = pool.acquire(PART)!;
  a.ref();
  a.unref();
  t.equal(pool.idleSize, 0, 'still referenced: not idle');
  a.unref();
  t.equal(pool.idleSize, PART, 'last reference gone: idle');
  t.throws(() => a.unref(), /released/, 'a double release is a bug, not a silent recycle');
  t.throws(() => a.ref(), /released/, 'so is taking a released buffer');
  const b = pool.acquire(PART)!;
  t.equal(b.buf, a.buf, 'the idle buffer is handed out again');
  t.equal(pool.stats.reused, 1);
  const c = pool.acquire(2 * BLOCK)!;
  t.not(c.buf, a.buf, 'another length gets its own buffer');
  b.unref();
  c.unref();
});

t.test('pool: held bytes stay within maxBytes', async (t) => {
  const pool = new BufferPool({ maxBytes: 2 * PART, unit: BLOCK });
  const slabs = [pool.acquire(PART)!, pool.acquire(PART)!, pool.acquire(PART)!];
  t.equal(pool.heldSize, 3 * PART, 'buffers in use are not refused (their owners bound them)');
  for (const s of slabs) s.unref();
  t.ok(pool.heldSize <= 2 * PART, 'buffers coming back over the bound are dropped');
  pool.acquire(BLOCK)!.unref();
  t.ok(pool.heldSize <= 2 * PART, 'a new length makes room by dropping idle buffers');
  pool.clear();
  t.equal(pool.heldSize, 0);
});

t.test('pool: every slab it drops goes to discard, and no slab anyone holds or it keeps', async (t) => {
  const discarded: Buffer[] = [];
  const pool = new BufferPool({ maxBytes: 2 * PART, unit: BLOCK, discard: (b) => discarded.push(b) });
  const [a, b, c] = [pool.acquire(PART)!, pool.acquire(PART)!, pool.acquire(PART)!];
  a.unref();
  t.same(discarded, [a.buf], 'coming back over the bound: dropped, discarded');
  b.unref();
  t.same(discarded, [a.buf], 'coming back within it: kept idle, not discarded');
  const d = pool.acquire(BLOCK)!;
  t.same(discarded, [a.buf, b.buf], 'an idle slab dropped to make room for another length: discarded');
  d.unref();
  t.equal(discarded.length, 2, 'c is held, d is idle: neither discarded');
  pool.clear();
  t.same(discarded, [a.buf, b.buf, d.buf], 'clear() discards the idle slabs');
  c.unref();
  t.equal(pool.heldSize, PART, 'c came back after clear(): idle, within the bound');
});

/** Answers each GET only when the test says so, reading into `into` like the real client. */
class ManualClient implements ObjectClient {
  readonly bucket = 'b';
  readonly pending: Array<{ key: string; start: number; end: number; answer: () => void; fail: () => void }> = [];
  intoUsed = 0;
  constructor(private readonly bodies: Map<string, Buffer>) {}
  async *list(): AsyncIterable<ObjectInfo> {}
  async head(): Promise<ObjectInfo> { throw new Error('unused'); }
  async firstKeyUnder(): Promise<string | undefined> { throw new Error('unused'); }
  async *getStream(): AsyncIterable<Buffer> {}
  async close(): Promise<void> {}
  getRange(key: string, start: number, end: number, _etag: string, opts?: RangeOptions): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      this.pending.push({
        key, start, end,
        fail: () => {
          opts?.into?.fill(0xee);
          reject(new Error('injected failure'));
        },
        answer: () => {
          const body = this.bodies.get(key)!;
          if (opts?.into) {
            this.intoUsed++;
            body.copy(opts.into, 0, start, end);
            resolve(opts.into);
          } else {
            resolve(Buffer.from(body.subarray(start, end)));
          }
        },
      });
    });
  }
  /** Fails the pending GET of `key` at `start`, after scribbling over its buffer. */
  fail(key: string, start: number): void {
    const i = this.pending.findIndex((p) => p.key === key && p.start === start);
    if (i < 0) throw new Error(`no pending GET of ${key} at ${start}`);
    this.pending.splice(i, 1)[0]!.fail();
  }
  /** Answers the pending GET of `key` at `start`. */
  answer(key: string, start: number): void {
    const i = this.pending.findIndex((p) => p.key === key && p.start === start);
    if (i < 0) throw new Error(`no pending GET of ${key} at ${start}`);
    this.pending.splice(i, 1)[0]!.answer();
  }
}

const settle = () => new Promise((r) => setImmediate(r));

function setup() {
  const bodies = new Map<string, Buffer>();
  const files: Record<string, FileRef> = {};
  for (const [i, key] of ['a', 'b', 'c', 'd'].entries()) {
    bodies.set(key, patternBytes(2 * PART, 50 + i));
    files[key] = { key, etag: `"${key}"`, size: 2 * PART };
  }
  const client = new ManualClient(bodies);
  // Room for exactly one part: every new part evicts the previous one (and its buffer's group).
  const cache = new BlockCache({ capacityBytes: PART, blockSize: BLOCK, poolBytes: 16 * PART });
  const fetcher = new BlockFetcher(client, cache, new InflightBudget(16 * PART), PART);
  /** Fetches one whole part of `key` and lets it land in the cache. */
  const loadPart = async (key: string, part: number) => {
    const first = part * 4;
    const got = fetcher.demand(files[key]!, first, first + 3);
    client.answer(key, part * PART);
    await Promise.all(got);
    await settle();
  };
  /**
   * Loads part 0 of b, c and d: the first evicts whatever `a` had resident, the next two are
   * new GETs that take buffers from the pool (and must not get one a reader still holds).
   */
  const churn = async () => {
    for (const key of ['b', 'c', 'd']) await loadPart(key, 0);
  };
  return { bodies, files, client, cache, fetcher, loadPart, churn };
}

t.test('a resident block held by a waiting read is not recycled when evicted', async (t) => {
  const s = setup();
  await s.loadPart('a', 0);
  const cursor = new ReadCursor(s.files.a!, s.fetcher, PART);
  const dst = Buffer.alloc(2 * BLOCK);
  // Blocks 3 (resident, part 0) and 4 (missing, part 1): the read waits on block 4's GET.
  const reading = cursor.read(dst, dst.length, 3 * BLOCK, undefined);
  await settle();
  await s.churn(); // evicts a's part 0 while the read holds its block 3
  s.client.answer('a', PART);
  const r = await reading;
  t.equal(r.bytes, 2 * BLOCK);
  t.ok(dst.equals(s.bodies.get('a')!.subarray(3 * BLOCK, 5 * BLOCK)), 'the held bytes are unchanged');
  t.ok(s.client.intoUsed >= 4, 'GETs read into pooled buffers');
  // Once the read is done, its buffer is recycled by the next GET of that length.
  const before = s.cache.pool!.stats.reused;
  await s.loadPart('b', 1);
  t.ok(s.cache.pool!.stats.reused > before, 'released buffers are reused');
});

t.test('a block that landed while its read waits on another GET is not recycled', async (t) => {
  const s = setup();
  const cursor = new ReadCursor(s.files.a!, s.fetcher, PART);
  const dst = Buffer.alloc(2 * BLOCK);
  // Blocks 3 and 4 are both missing, in two parts: two GETs.
  const reading = cursor.read(dst, dst.length, 3 * BLOCK, undefined);
  await settle();
  s.client.answer('a', 3 * BLOCK); // block 3 lands in the cache
  await settle();
  await s.churn(); // evicts it
  s.client.answer('a', PART);
  await reading;
  t.ok(dst.equals(s.bodies.get('a')!.subarray(3 * BLOCK, 5 * BLOCK)), 'the held bytes are unchanged');
});

t.test('a block a reader found in flight (read-ahead) is not recycled before the reader copies it', async (t) => {
  const s = setup();
  t.equal(s.fetcher.prefetch(s.files.a!, 0, 3, 'sequential'), 4, 'part 0 read ahead');
  const cursor = new ReadCursor(s.files.a!, s.fetcher, PART);
  const dst = Buffer.alloc(2 * BLOCK);
  // Block 3 is in flight (the read-ahead's GET), block 4 is missing: the read waits on both.
  const reading = cursor.read(dst, dst.length, 3 * BLOCK, undefined);
  await settle();
  s.client.answer('a', 0);
  await settle();
  await s.churn(); // evicts a's part 0
  s.client.answer('a', PART);
  await reading;
  t.ok(dst.equals(s.bodies.get('a')!.subarray(3 * BLOCK, 5 * BLOCK)), 'the held bytes are unchanged');
});

t.test('a failed GET gives its buffer back, and its bytes are never served', async (t) => {
  const s = setup();
  const cursor = new ReadCursor(s.files.a!, s.fetcher, PART);
  // Not at 0: a random read, so no read-ahead GETs hold buffers too.
  const reading = cursor.read(Buffer.alloc(BLOCK), BLOCK, 2 * BLOCK, undefined);
  await settle();
  s.client.fail('a', 2 * BLOCK);
  await t.rejects(reading, /injected/);
  const pool = s.cache.pool!;
  t.equal(pool.heldSize - pool.idleSize, 0, 'the failed GET\'s buffer is idle again');
  t.equal(s.cache.size, 0, 'nothing cached');
  const again = cursor.read(Buffer.alloc(BLOCK), BLOCK, 5 * BLOCK, undefined);
  await settle();
  s.client.answer('a', 5 * BLOCK);
  await again;
  t.equal(pool.stats.reused, 1, 'the next GET of that length reuses it');
});

t.test('an aborted read lets go of its buffers', async (t) => {
  const s = setup();
  const cursor = new ReadCursor(s.files.a!, s.fetcher, PART);
  const ctrl = new AbortController();
  const reading = cursor.read(Buffer.alloc(BLOCK), BLOCK, 5 * BLOCK, ctrl.signal);
  ctrl.abort();
  await t.rejects(reading);
  s.client.answer('a', 5 * BLOCK);
  await settle();
  const pool = s.cache.pool!;
  t.equal(pool.heldSize - pool.idleSize, BLOCK, 'only the cache holds the landed block');
  s.cache.close();
  t.equal(pool.heldSize - pool.idleSize, 0, 'nothing referenced once the cache is closed');
});

t.test('pool: a slab\'s generation changes each time it is handed out again', async (t) => {
  const pool = new BufferPool({ maxBytes: 1024, unit: 256 });
  const a = pool.acquire(256)!;
  const g = a.generation;
  a.ref();
  a.unref();
  t.equal(a.generation, g, 'references alone do not change it');
  a.unref();
  const b = pool.acquire(256)!;
  t.equal(b, a, 'the same slab again');
  t.not(b.generation, g, 'a holder of the old generation can tell');
  b.unref();
});
