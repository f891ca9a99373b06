import t from 'tap';
import { BlockCache } from '../../src/cache/block-cache.js';
import { SluiceFs } from '../../src/fs/core.js';
import { BlockFetcher, type FileRef } from '../../src/prefetch/block-fetcher.js';
import { InflightBudget } from '../../src/prefetch/inflight-budget.js';
import { RandomFill } from '../../src/prefetch/random-fill.js';
import { ReadCursor } from '../../src/prefetch/read-cursor.js';
import type { RangeOptions } from '../../src/s3/object-client.js';
import { FakeObjectClient, patternBytes } from '../helpers/fake-client.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const BLOCK = 64 * KiB;
const PART = 1 * MiB;
const FILL_GET = 256 * KiB;

/**
 * The fake client, plus: GETs of more than one block (fill GETs; a random read's demand GET
 * is one block here) are held while `holdFill` is set, and the most GETs in flight at once
 * is recorded.
 */
class HoldingClient extends FakeObjectClient {
  holdFill = false;
  /** Hold the one-block GETs (a random read's own GET) too. */
  holdDemand = false;
  inflight = 0;
  peakInflight = 0;
  held = 0;
  /** GETs asked for (held ones included; the fake's own counts start once a GET proceeds). */
  calls = 0;
  private waiters: Array<() => void> = [];
  private demandWaiters: Array<() => void> = [];

  override async getRange(key: string, start: number, end: number, etag: string, opts?: RangeOptions): Promise<Buffer> {
    this.calls++;
    this.inflight++;
    this.peakInflight = Math.max(this.peakInflight, this.inflight);
    try {
      if (this.holdDemand && end - start <= BLOCK) {
        await new Promise<void>((r) => this.demandWaiters.push(r));
      } else if (this.holdFill && end - start > BLOCK) {
        this.held++;
        await new Promise<void>((r) => this.waiters.push(r));
        this.held--;
      }
      return await super.getRange(key, start, end, etag, opts);
    } finally {
      this.inflight--;
    }
  }

  releaseDemand(): void {
    this.holdDemand = false;
    for (const w of this.demandWaiters.splice(0)) w();
  }

  releaseFill(): void {
    this.holdFill = false;
    for (const w of this.waiters.splice(0)) w();
  }
}

function setup(o: { size?: number; files?: number; maxInflight?: number; maxFileSize?: number; maxGets?: number; sharedGets?: number; cache?: number } = {}) {
  const client = new HoldingClient();
  const size = o.size ?? 4 * MiB;
  const files: FileRef[] = [];
  for (let i = 0; i < (o.files ?? 1); i++) {
    const key = `data/f${i}`;
    files.push({ key, etag: client.put(key, patternBytes(size, i + 1)), size });
  }
  const cache = new BlockCache({ capacityBytes: o.cache ?? 64 * MiB, blockSize: BLOCK });
  const budget = new InflightBudget(o.maxInflight ?? 16 * MiB);
  const fetcher = new BlockFetcher(client, cache, budget, PART);
  const fill = new RandomFill(fetcher, { maxFileSize: o.maxFileSize ?? 16 * MiB, maxGets: o.maxGets ?? 4, sharedGets: o.sharedGets, getSize: FILL_GET });
  const cursor = (f: FileRef) => new ReadCursor(f, fetcher, 4 * MiB, fill);
  return { client, files, cache, budget, fetcher, fill, cursor };
}

async function readAt(c: ReadCursor, pos: number, len: number): Promise<Buffer> {
  const dst = Buffer.alloc(len);
  const r = await c.read(dst, len, pos);
  return dst.subarray(0, r.bytes);
}

/** Lets pending GETs and their continuations run until the fill has nothing left (bounded). */
async function drain(fill: RandomFill, client: FakeObjectClient): Promise<void> {
  for (let i = 0; i < 10_000 && (fill.inflightGets > 0 || fill.fillingBytes > 0 || client.inflightBytes > 0); i++) {
    await new Promise((r) => setImmediate(r));
  }
}

function residentBlocks(s: ReturnType<typeof setup>, f: FileRef): number {
  let n = 0;
  for (let i = 0; i < s.fetcher.blockCount(f); i++) if (s.cache.get({ key: f.key, etag: f.etag, index: i })) n++;
  return n;
}

t.test('random reads of a small file fill it: every block resident, bytes exact, within the budget', async (t) => {
  const s = setup({ size: 4 * MiB + 1000, maxInflight: 1 * MiB });
  const f = s.files[0]!;
  const body = s.client.body(f.key);
  const c = s.cursor(f);
  const got = await readAt(c, 3 * MiB + 5, 10 * KiB);
  t.ok(got.equals(body.subarray(3 * MiB + 5, 3 * MiB + 5 + 10 * KiB)), 'first random read exact');
  t.equal(s.fill.stats.started, 1, 'the first random read started the fill');
  t.equal(s.client.requests[0]!.end - s.client.requests[0]!.start, BLOCK, "the read's own GET went first, one block");
  await drain(s.fill, s.client);
  t.equal(residentBlocks(s, f), s.fetcher.blockCount(f), 'every block is resident');
  t.equal(s.client.getBytes, f.size, 'every byte fetched exactly once');
  t.equal(s.fill.stats.completed, 1);
  for (const r of s.client.requests.slice(1)) {
    t.ok(r.end - r.start <= FILL_GET, `fill GET ${r.start}-${r.end} at most getSize`);
    t.equal(Math.floor(r.start / PART), Math.floor((r.end - 1) / PART), 'no fill GET crosses a part boundary');
  }
  t.ok(s.budget.peakPrefetch <= s.budget.limit, `prefetch claims peaked at ${s.budget.peakPrefetch} <= ${s.budget.limit}`);
  t.ok(s.client.peakInflightBytes <= s.budget.limit + BLOCK, `GET bytes in flight peaked at ${s.client.peakInflightBytes}: budget + one demand block`);
  t.ok(s.client.peakInflight <= 4 + 1, 'at most maxGets fill GETs (+ the demand GET) at once');
  t.equal(s.budget.inUse, 0, 'every claim given back');

  // Later reads anywhere are hits and exact; no more GETs.
  const gets = s.client.gets;
  for (const pos of [0, 17, 2 * MiB - 3, 4 * MiB - 10]) {
    t.ok((await readAt(c, pos, 64 * KiB)).equals(body.subarray(pos, pos + 64 * KiB)), `bytes at ${pos}`);
  }
  t.equal(s.client.gets, gets, 'served from the cache');
  t.ok(s.cache.stats.prefetchUsed.random_fill > 0, 'fill blocks count as used prefetch when read');
  const filled = s.client.getBytes - BLOCK;
  s.cache.close();
  t.equal(s.cache.stats.prefetchUsed.random_fill + s.cache.stats.prefetchWasted.random_fill, filled, 'used + wasted = bytes filled');
});

t.test('a file above the size threshold is not filled: random reads fetch only their blocks', async (t) => {
  const s = setup({ size: 8 * MiB, maxFileSize: 4 * MiB });
  const f = s.files[0]!;
  const body = s.client.body(f.key);
  const c = s.cursor(f);
  for (const pos of [5 * MiB, 1 * MiB + 7, 7 * MiB]) {
    t.ok((await readAt(c, pos, 4 * KiB)).equals(body.subarray(pos, pos + 4 * KiB)));
  }
  await drain(s.fill, s.client);
  t.equal(s.fill.stats.started, 0, 'no fill');
  t.equal(s.client.gets, 3, 'one GET per random read');
  t.equal(s.client.getBytes, 3 * BLOCK);
});

t.test('a sequential reader does not fill', async (t) => {
  const s = setup({ size: 4 * MiB });
  const c = s.cursor(s.files[0]!);
  for (let pos = 0; pos < 1 * MiB; pos += 128 * KiB) await readAt(c, pos, 128 * KiB);
  await drain(s.fill, s.client);
  t.equal(s.fill.stats.started, 0);
  t.equal(c.stats.randomReads, 0);
});

t.test('a demand read issued while the fill runs does not wait for it', async (t) => {
  const s = setup({ size: 4 * MiB, maxGets: 2 });
  const f = s.files[0]!;
  const body = s.client.body(f.key);
  const c = s.cursor(f);
  s.client.holdFill = true;
  await readAt(c, 2 * MiB, 4 * KiB); // random: starts the fill, whose GETs are now held
  t.equal(s.client.held, 2, 'two fill GETs in flight, held');
  // Block 60 (3.75 MiB) is far from the fill's first GETs (the first 512 KiB): its own GET.
  const pos = 60 * BLOCK + 100;
  const got = await readAt(c, pos, 1000);
  t.ok(got.equals(body.subarray(pos, pos + 1000)), 'the read completed, exact, with the fill still held');
  t.equal(s.client.held, 2, 'the fill GETs are still held');
  t.equal(s.fill.inflightGets, 2, 'no fill GET was added meanwhile (maxGets)');
  s.client.releaseFill();
  await drain(s.fill, s.client);
  t.equal(residentBlocks(s, f), s.fetcher.blockCount(f), 'the fill completed afterwards');
  t.equal(s.client.getBytes, f.size, 'the demanded block was not fetched again');
});

t.test("while readers' own GETs are in flight the fill keeps to sharedGets with them (one GET at least), then goes back to maxGets", async (t) => {
  const ticks = async () => { for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r)); };
  const s = setup({ size: 8 * MiB, maxGets: 8, sharedGets: 4 });
  const f = s.files[0]!;
  const body = s.client.body(f.key);
  s.client.holdFill = true;
  s.client.holdDemand = true;
  const c1 = s.cursor(f);
  const r1 = readAt(c1, 5 * MiB + 3, 1000); // random: its own GET (held), then the fill
  await ticks();
  t.equal(s.fetcher.demandGets, 1, "the reader's GET is in flight");
  t.equal(s.fill.inflightGets, 3, 'fill GETs + the reader\'s = sharedGets (4), not maxGets (8)');
  // Three more readers waiting: the fill adds nothing, and keeps what it has.
  const more = [7 * MiB + 11, 6 * MiB + 200 * KiB, 4 * MiB + 500 * KiB].map((p) => ({ p, r: readAt(s.cursor(f), p, 1000) }));
  await ticks();
  t.equal(s.fetcher.demandGets, 4);
  t.equal(s.fill.inflightGets, 3, 'no fill GET added beside four readers');
  s.client.releaseFill(); // the fill's GETs finish while the readers' are still held: it goes on with one GET
  s.client.holdFill = true;
  await ticks();
  t.equal(s.fill.inflightGets, 1, 'beside four readers the fill keeps one GET');
  s.client.releaseDemand();
  s.client.releaseFill();
  t.ok((await r1).equals(body.subarray(5 * MiB + 3, 5 * MiB + 3 + 1000)), 'first reader exact');
  for (const m of more) t.ok((await m.r).equals(body.subarray(m.p, m.p + 1000)), `reader at ${m.p} exact`);
  s.client.peakInflight = 0;
  s.client.holdFill = false;
  await drain(s.fill, s.client);
  t.equal(s.fetcher.demandGets, 0);
  t.ok(s.client.peakInflight > 4, `with no reader waiting the fill went past sharedGets (peak ${s.client.peakInflight})`);
  t.equal(residentBlocks(s, f), s.fetcher.blockCount(f), 'the fill completed');
  t.equal(s.client.getBytes, f.size, 'every byte fetched once');
});

t.test('closing the handle stops the fill; another handle of the file keeps it going', async (t) => {
  const s = setup({ size: 4 * MiB, maxGets: 2 });
  const f = s.files[0]!;
  const a = s.cursor(f);
  const b = s.cursor(f);
  s.client.holdFill = true;
  await readAt(a, 3 * MiB, 4 * KiB);
  await readAt(b, 1 * MiB, 4 * KiB);
  t.equal(s.fill.stats.started, 1, 'two handles share one fill');
  a.close();
  t.equal(s.fill.fillingBytes, f.size, 'b still holds the fill');
  b.close();
  b.close(); // idempotent
  t.equal(s.fill.fillingBytes, 0, 'no handle left: the fill stopped');
  t.equal(s.fill.stats.stopped, 1);
  const calls = s.client.calls;
  s.client.releaseFill();
  await drain(s.fill, s.client);
  t.equal(s.client.calls, calls, 'no fill GET started after the stop');
  t.ok(residentBlocks(s, f) < s.fetcher.blockCount(f), 'the file was not filled');
  t.equal(s.budget.inUse, 0, 'the held GETs completed and gave their claims back');
});

t.test('close() of the fill (the core closing) stops every fill', async (t) => {
  const s = setup({ size: 2 * MiB, files: 2, maxGets: 1 });
  s.client.holdFill = true;
  await readAt(s.cursor(s.files[0]!), 1 * MiB, 4 * KiB);
  await readAt(s.cursor(s.files[1]!), 1 * MiB, 4 * KiB);
  t.equal(s.fill.stats.started, 2);
  s.fill.close();
  t.equal(s.fill.fillingBytes, 0);
  const calls = s.client.calls;
  s.client.releaseFill();
  await drain(s.fill, s.client);
  t.equal(s.client.calls, calls, 'no fill GET started after close()');
  t.equal(s.fill.request(s.files[0]!), undefined, 'a closed fill starts nothing');
});

t.test('fills together stay within the size threshold; the next file fills once room is made', async (t) => {
  const s = setup({ size: 3 * MiB, files: 2, maxFileSize: 4 * MiB });
  s.client.holdFill = true;
  const a = s.cursor(s.files[0]!);
  const b = s.cursor(s.files[1]!);
  await readAt(a, 1 * MiB, 4 * KiB);
  await readAt(b, 1 * MiB, 4 * KiB);
  t.equal(s.fill.stats.started, 1, 'the second file does not fit beside the first');
  s.client.releaseFill();
  await drain(s.fill, s.client);
  await readAt(b, 2 * MiB, 4 * KiB);
  t.equal(s.fill.stats.started, 2, "the second file's next random read starts its fill");
  await drain(s.fill, s.client);
  t.equal(residentBlocks(s, s.files[1]!), s.fetcher.blockCount(s.files[1]!));
});

t.test('the fill waits for the in-flight budget and resumes when it frees up', async (t) => {
  const s = setup({ size: 2 * MiB, maxInflight: 512 * KiB, maxGets: 8 });
  const f = s.files[0]!;
  const release = s.budget.acquireDemand(512 * KiB); // e.g. other readers' GETs
  const c = s.cursor(f);
  await readAt(c, 1 * MiB, 4 * KiB);
  t.equal(s.fill.inflightGets, 0, 'budget full: no fill GET');
  release();
  await drain(s.fill, s.client);
  t.equal(residentBlocks(s, f), s.fetcher.blockCount(f), 'filled once the budget freed');
  t.ok(s.budget.peakPrefetch <= 512 * KiB);
});

t.test('a failed fill GET stops the fill; reads still get exact bytes', async (t) => {
  const s = setup({ size: 2 * MiB, maxGets: 1 });
  const f = s.files[0]!;
  const body = s.client.body(f.key);
  const c = s.cursor(f);
  s.client.holdFill = true;
  await readAt(c, 1 * MiB, 4 * KiB);
  s.client.failNext = 1;
  s.client.releaseFill();
  await drain(s.fill, s.client);
  t.equal(s.fill.stats.stopped, 1, 'stopped after the failure');
  t.ok(residentBlocks(s, f) < s.fetcher.blockCount(f));
  t.ok((await readAt(c, 0, 100 * KiB)).equals(body.subarray(0, 100 * KiB)), 'the failed blocks are fetched again on demand');
});

t.test('SluiceFs: a random reader fills a small file; release stops; --random-fill-max-size 0 disables', async (t) => {
  for (const randomFillMaxSize of [undefined, 0]) {
    const client = new FakeObjectClient();
    const body = patternBytes(3 * MiB, 9);
    client.put('ds/a.bin', body);
    const core = await SluiceFs.create({
      client, prefix: 'ds', cacheSize: 64 * MiB, partSize: 1 * MiB, maxPrefetch: 4 * MiB, maxInflight: 8 * MiB,
      crossFilePrefetch: 0, crossFileMaxSize: MiB, ...(randomFillMaxSize !== undefined ? { randomFillMaxSize } : {}),
    });
    const fh = await core.open('/a.bin', 0);
    const dst = Buffer.alloc(4 * KiB);
    await core.read(fh, dst, dst.length, 2 * MiB + 1);
    t.ok(dst.equals(body.subarray(2 * MiB + 1, 2 * MiB + 1 + 4 * KiB)));
    await drain(core.randomFill, client);
    if (randomFillMaxSize === 0) t.equal(client.getBytes, core.cache.blockSize, 'disabled: only the read block');
    else t.equal(client.getBytes, body.length, 'the whole file was fetched');
    await core.release(fh);
    t.equal(core.randomFill.fillingBytes, 0);
    await core.close();
  }
  await t.rejects(SluiceFs.create({
    client: new FakeObjectClient(), prefix: 'ds', cacheSize: 64 * MiB, partSize: 1 * MiB, maxPrefetch: 4 * MiB, maxInflight: 8 * MiB,
    crossFilePrefetch: 0, crossFileMaxSize: MiB, randomFillMaxSize: 65 * MiB,
  }), { code: 'INVALID_ARGUMENT' }, 'a fill size above the cache is refused');
});

t.test('a sequential handle that comes back over what it read fills the file, then keeps every block', async (t) => {
  const s = setup({ size: 8 * MiB });
  const f = s.files[0]!;
  const body = s.client.body(f.key);
  const c = s.cursor(f);
  for (let pos = 0; pos < f.size; pos += 128 * KiB) await readAt(c, pos, 128 * KiB);
  await drain(s.fill, s.client);
  t.equal(s.fill.stats.started, 0, 'one pass: no fill');
  t.ok(residentBlocks(s, f) < s.fetcher.blockCount(f), 'one pass: the blocks behind the reader were retired');
  // Pass 2 from offset 0: still inside the run (sequential), but a re-read: it asks for the fill.
  const got = await readAt(c, 0, 128 * KiB);
  t.ok(got.equals(body.subarray(0, 128 * KiB)), 'exact bytes');
  t.equal(s.fill.stats.started, 1, 'the re-read started the fill');
  for (let pos = 128 * KiB; pos < f.size; pos += 128 * KiB) await readAt(c, pos, 128 * KiB);
  await drain(s.fill, s.client);
  t.equal(residentBlocks(s, f), s.fetcher.blockCount(f), 'pass 2 retired nothing: the file is whole');
  const gets = s.client.calls;
  c.close();
  t.ok(s.fill.keeps(f), 'the filled file is kept for later handles');
  const d = s.cursor(f);
  for (let pos = 0; pos < f.size; pos += 128 * KiB) {
    const b = await readAt(d, pos, 128 * KiB);
    if (!b.equals(body.subarray(pos, pos + 128 * KiB))) { t.fail(`wrong bytes at ${pos}`); break; }
  }
  d.close();
  t.equal(s.client.calls, gets, 'a later sequential handle made no GET');
  t.equal(residentBlocks(s, f), s.fetcher.blockCount(f), 'and retired nothing');
});

t.test('keeps(): only a file whose fill completed and that is still whole', async (t) => {
  const s = setup({ size: 2 * MiB, files: 2 });
  const [a, b] = [s.files[0]!, s.files[1]!];
  const c = s.cursor(a);
  await readAt(c, 1 * MiB, 4 * KiB);
  await drain(s.fill, s.client);
  t.ok(s.fill.keeps(a), 'filled and whole');
  t.notOk(s.fill.keeps(b), 'never filled');
  s.cache.close(); // every block gone
  t.notOk(s.fill.keeps(a), 'no longer whole: forgotten');
  c.close();
});

t.test('a late read far behind a sequential reader, on blocks fetched ahead and unread, is not a second pass', async (t) => {
  // At read_ahead_kb 4096 the kernel queues several 4 MiB windows, and libfuse hands a
  // request over up to 12 MiB after later ones: such a straggler must not start the fill.
  const s = setup({ size: 16 * MiB });
  const f = s.files[0]!;
  const body = s.client.body(f.key);
  const c = s.cursor(f);
  const gap = 1 * MiB;
  for (let pos = 0; pos < gap; pos += 128 * KiB) await readAt(c, pos, 128 * KiB);
  for (let pos = gap + 128 * KiB; pos < 7 * MiB; pos += 128 * KiB) await readAt(c, pos, 128 * KiB);
  t.ok(s.cache.unreadAhead(f.key, f.etag, gap / BLOCK), 'the skipped block was fetched ahead and is unread');
  const late = await readAt(c, gap, 128 * KiB);
  t.ok(late.equals(body.subarray(gap, gap + 128 * KiB)), 'exact bytes');
  await drain(s.fill, s.client);
  t.equal(s.fill.stats.started, 0, 'the late read started no fill');
  t.equal(c.stats.randomReads, 0, 'and was sequential');
  // The same distance back onto a block already read is a second pass.
  await readAt(c, 0, 128 * KiB);
  t.equal(s.fill.stats.started, 1, 'a read back over read bytes starts the fill');
  c.close();
  await drain(s.fill, s.client);
});
