import t from 'tap';
import { createHash } from 'node:crypto';
import { AbortedError, BadRangeReplyError, NoSuchKeyError } from '../../src/errors.js';
import { RAMP_START_PARTS, Readahead, type PipeItem } from '../../src/pipe/readahead.js';
import type { StreamOptions } from '../../src/s3/object-client.js';
import { bytesFor, MemoryClient } from '../helpers/pipe.js';

/** Chunk sizes a network stream might give: tiny, odd, and socket-read sized. */
const CHUNK_SIZES = [1, 7, 4093, 64, 65_536, 1000, 3];

/**
 * A MemoryClient whose getStream() yields each range as many chunks of CHUNK_SIZES,
 * remembers every chunk it yielded, and can answer a range ending at `cut.end` with
 * `cut.by` bytes too few (negative: too many).
 */
class ChunkyClient extends MemoryClient {
  cut: { end: number; by: number } | undefined;
  readonly yielded = new Set<Buffer>();
  override async *getStream(key: string, etag: string, opts: StreamOptions = {}): AsyncIterable<Buffer> {
    const got: Buffer[] = [];
    for await (const c of super.getStream(key, etag, opts)) got.push(c);
    let body = Buffer.concat(got);
    if (this.cut !== undefined && opts.end === this.cut.end) {
      body = this.cut.by >= 0 ? body.subarray(0, body.length - this.cut.by) : Buffer.concat([body, Buffer.alloc(-this.cut.by, 0x55)]);
    }
    for (let at = 0, i = 0; at < body.length; i++) {
      const chunk = body.subarray(at, at + CHUNK_SIZES[i % CHUNK_SIZES.length]!);
      at += chunk.length;
      this.yielded.add(chunk);
      yield chunk;
    }
  }
}

const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

async function drainAll(ra: Readahead): Promise<{ index: number; data: Buffer; last: boolean }[]> {
  const out: { index: number; data: Buffer; last: boolean }[] = [];
  for (let i = 0; i < 10_000; i++) {
    const p = await ra.take();
    if (!p) return out;
    const data = Buffer.concat(p.chunks);
    if (data.length !== p.bytes) throw new Error(`part of item ${p.itemIndex}: ${data.length} bytes in chunks, ${p.bytes} announced`);
    out.push({ index: p.itemIndex, data, last: p.last });
  }
  throw new Error('too many parts');
}

t.test('parts come back in pipe order although GETs finish out of order', async (t) => {
  const client = new MemoryClient();
  const items: PipeItem[] = [];
  for (let i = 0; i < 20; i++) items.push({ kind: 'object', info: client.put(`k${i}`, bytesFor(`k${i}`, 100 + i)) });
  // Later keys answer sooner: completion order is the reverse of pipe order.
  client.delayMs = (key) => 40 - Number(key.slice(1)) * 2;
  const ra = new Readahead(items, { client, partSize: 1024, maxInflightBytes: 1 << 20, maxRequests: 8 });
  const parts = await drainAll(ra);
  t.same(parts.map((p) => p.index), items.map((_, i) => i));
  t.ok(parts.every((p, i) => p.last && p.data.equals(bytesFor(`k${i}`, 100 + i))), 'bytes of each object');
  t.ok(client.maxInflight > 1, `GETs ran in parallel (max ${client.maxInflight})`);
  t.ok(client.maxInflight <= 8, 'at most maxRequests at once');
});

t.test('a large object is fetched as ranged parts, several at once, bounded by bytes', async (t) => {
  const client = new MemoryClient();
  const body = bytesFor('big', 10_000);
  const items: PipeItem[] = [{ kind: 'object', info: client.put('big', body) }];
  client.delayMs = () => 5;
  const ra = new Readahead(items, { client, partSize: 1000, maxInflightBytes: 3000, maxRequests: 64 });
  const parts = await drainAll(ra);
  t.equal(parts.length, 10);
  t.same(parts.map((p) => p.last), [...Array(9).fill(false), true]);
  t.ok(Buffer.concat(parts.map((p) => p.data)).equals(body));
  t.same(client.requested.map((r) => [r.start, r.end]), Array.from({ length: 10 }, (_, i) => [i * 1000, (i + 1) * 1000]));
  t.ok(client.maxInflight >= 2 && client.maxInflight <= 3, `parallel within the 3000-byte budget (max ${client.maxInflight})`);
});

t.test('a part larger than the budget still goes when nothing else is held', async (t) => {
  const client = new MemoryClient();
  const items: PipeItem[] = [
    { kind: 'object', info: client.put('a', bytesFor('a', 5000)) },
    { kind: 'object', info: client.put('b', bytesFor('b', 5000)) },
  ];
  const ra = new Readahead(items, { client, partSize: 8000, maxInflightBytes: 100, maxRequests: 4 });
  const parts = await drainAll(ra);
  t.same(parts.map((p) => p.data.length), [5000, 5000]);
  t.equal(client.maxInflight, 1, 'one at a time');
});

t.test('empty objects need no GET; inline items are parts of their own', async (t) => {
  const client = new MemoryClient();
  const items: PipeItem[] = [
    { kind: 'object', info: client.put('empty', Buffer.alloc(0)) },
    { kind: 'inline', data: Buffer.from('{"label":1}') },
    { kind: 'object', info: client.put('x', Buffer.from('xyz')) },
  ];
  const parts = await drainAll(new Readahead(items, { client, partSize: 1000, maxInflightBytes: 1000, maxRequests: 4 }));
  t.same(parts.map((p) => [p.index, p.data.toString(), p.last]), [[0, '', true], [1, '{"label":1}', true], [2, 'xyz', true]]);
  t.equal(client.gets, 1);
});

t.test('an item may bring its own client (another bucket)', async (t) => {
  const a = new MemoryClient('a');
  const b = new MemoryClient('b');
  const items: PipeItem[] = [{ kind: 'object', info: b.put('k', Buffer.from('from b')), client: b }];
  const parts = await drainAll(new Readahead(items, { client: a, partSize: 1000, maxInflightBytes: 1000, maxRequests: 4 }));
  t.equal(parts[0]!.data.toString(), 'from b');
  t.equal(a.gets, 0);
});

t.test('a failed GET surfaces at its take(), not before, and never unhandled', async (t) => {
  const client = new MemoryClient();
  const items: PipeItem[] = ['a', 'b', 'c'].map((k) => ({ kind: 'object', info: client.put(k, Buffer.from(k)) }) as PipeItem);
  client.fail = (key) => (key === 'b' ? new NoSuchKeyError('bucket', key) : undefined);
  const ra = new Readahead(items, { client, partSize: 1000, maxInflightBytes: 1000, maxRequests: 4 });
  ra.start();
  await new Promise((r) => setTimeout(r, 20)); // let 'b' fail while nobody awaits it
  t.equal(Buffer.concat((await ra.take())!.chunks).toString(), 'a');
  await t.rejects(ra.take(), NoSuchKeyError);
  ra.close();
});

t.test('close() aborts GETs in flight and take() then throws AbortedError', async (t) => {
  const client = new MemoryClient();
  const items: PipeItem[] = [{ kind: 'object', info: client.put('slow', Buffer.from('s')) }];
  client.delayMs = () => 60_000;
  const outer = new AbortController();
  const ra = new Readahead(items, { client, partSize: 1000, maxInflightBytes: 1000, maxRequests: 4, signal: outer.signal });
  ra.start();
  const pending = ra.take();
  outer.abort();
  await t.rejects(pending, AbortedError);
  await t.rejects(ra.take(), AbortedError);
  t.equal(client.inflight, 0, 'the GET ended');
});

t.test('time to first byte: an epoch starts with RAMP_START_PARTS parts in flight, then the window doubles per part taken', async (t) => {
  const client = new MemoryClient();
  const body = bytesFor('big', 32_000);
  const items: PipeItem[] = [{ kind: 'object', info: client.put('big', body) }];
  client.delayMs = () => 5;
  const ra = new Readahead(items, { client, partSize: 1000, maxInflightBytes: 16_000, maxRequests: 64 });
  ra.start();
  t.equal(client.requested.length, RAMP_START_PARTS, 'only the first parts compete for the link at first');
  const first = await ra.take();
  t.ok(Buffer.concat(first!.chunks).equals(body.subarray(0, 1000)));
  t.equal(client.requested.length, 1 + 2 * RAMP_START_PARTS, 'after one part is taken the window has doubled');
  const rest = await drainAll(ra);
  t.ok(Buffer.concat([...first!.chunks, ...rest.map((p) => p.data)]).equals(body), 'every byte, in order');
  t.ok(client.maxInflight > RAMP_START_PARTS && client.maxInflight <= 16, `the window grew to the budget (max ${client.maxInflight} in flight)`);
});

t.test('past its second doubling the window doubles only while that raises the rate: a shared link stops it, a latency-bound one does not', async (t) => {
  // Link-bound: GETs are served one after another, 25 ms each (a link of fixed bandwidth), so
  // more parts in flight bring no more bytes per second. Latency-bound: every GET takes 25 ms,
  // however many are in flight. (25 ms: long against a loaded machine's timer lateness.)
  let linkFreeAt = 0;
  const serial = (): number => {
    const now = performance.now();
    linkFreeAt = Math.max(now, linkFreeAt) + 25;
    return linkFreeAt - now;
  };
  for (const [name, delay, check] of [
    ['link-bound', serial, (max: number) => max <= 4 * RAMP_START_PARTS],
    ['latency-bound', () => 25, (max: number) => max > 4 * RAMP_START_PARTS],
  ] as const) {
    const client = new MemoryClient();
    const body = bytesFor(name, 48_000);
    const items: PipeItem[] = [{ kind: 'object', info: client.put(name, body) }];
    client.delayMs = () => delay();
    const ra = new Readahead(items, { client, partSize: 1000, maxInflightBytes: 16_000, maxRequests: 64 });
    const rest = await drainAll(ra);
    t.ok(Buffer.concat(rest.map((p) => p.data)).equals(body), `${name}: every byte, in order`);
    t.ok(check(client.maxInflight), `${name}: at most ${client.maxInflight} GETs in flight (stops at ${4 * RAMP_START_PARTS} only when the link is shared)`);
  }
});

/**
 * A link of `capacity` bytes/ms that the GETs on it share equally, each at most `perGet` bytes/ms
 * (a connection's own bandwidth): the shape of S3 behind a NIC, where a GET takes as long however
 * many run until they fill the link, and then longer in proportion.
 */
class SharedLink {
  private readonly active = new Set<{ left: number; done: () => void }>();
  private timer: NodeJS.Timeout | undefined;
  private last = 0;
  constructor(private readonly capacity: number, private readonly perGet: number) {}

  transfer(bytes: number): Promise<void> {
    return new Promise((done) => {
      if (this.active.size > 0) this.step();
      else this.last = performance.now();
      this.active.add({ left: bytes, done });
      this.timer ??= setInterval(() => this.step(), 1);
    });
  }

  /** Hands out the bytes the time since the last step carried, by the real clock (a late timer only makes it lumpier). */
  private step(): void {
    const now = performance.now();
    const each = Math.min(this.perGet, this.capacity / this.active.size) * (now - this.last);
    this.last = now;
    for (const g of this.active) {
      g.left -= each;
      if (g.left <= 0) {
        this.active.delete(g);
        g.done();
      }
    }
    if (this.active.size === 0) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }
}

class SharedLinkClient extends MemoryClient {
  constructor(private readonly link: SharedLink) {
    super();
  }

  override async *getStream(key: string, etag: string, opts: StreamOptions = {}): AsyncIterable<Buffer> {
    await this.link.transfer((opts.end ?? 0) - (opts.start ?? 0));
    yield* super.getStream(key, etag, opts);
  }
}

t.test('the window stops doubling once its GETs queue for the link, though the last doubling paid', async (t) => {
  // Parts of 1000 bytes, 100 ms each alone (10 bytes/ms per GET). On a link that 5 parts fill,
  // 8 parts take 1.25x the rate of 4 (the doubling paid) and GETs take 1.6x as long (q 0.63):
  // 16 would bring nothing. The take rates alone doubled to 16 here. On a link that 12 parts
  // fill, GETs of 8 parts take as long as alone, and the window must go on to 16.
  for (const [fill, check] of [
    [5, (w: number) => w === 8000],
    [12, (w: number) => w >= 16_000],
  ] as const) {
    const client = new SharedLinkClient(new SharedLink(fill * 10, 10));
    const body = bytesFor(`fill-${fill}`, 100_000);
    const items: PipeItem[] = [{ kind: 'object', info: client.put(`fill-${fill}`, body) }];
    const ra = new Readahead(items, { client, partSize: 1000, maxInflightBytes: 32_000, maxRequests: 64 });
    const rest = await drainAll(ra);
    t.ok(Buffer.concat(rest.map((p) => p.data)).equals(body), `link of ${fill} parts: every byte, in order`);
    const { windowBytes } = ra.stats();
    t.ok(check(windowBytes), `link of ${fill} parts: the window reached ${windowBytes / 1000} parts`);
  }
});

t.test('a consumer slower than S3 never waits for a part, so the window stays at its first few parts', async (t) => {
  const client = new MemoryClient();
  const body = bytesFor('slow-reader', 32_000);
  const items: PipeItem[] = [{ kind: 'object', info: client.put('slow-reader', body) }];
  const ra = new Readahead(items, { client, partSize: 1000, maxInflightBytes: 16_000, maxRequests: 64 });
  ra.start();
  const got: Buffer[] = [];
  let taken = 0;
  let mostAhead = 0;
  for (;;) {
    await new Promise((r) => setTimeout(r, 5)); // the reader is busy; every GET (0 ms) has landed meanwhile
    mostAhead = Math.max(mostAhead, client.requested.length - taken);
    const part = await ra.take();
    if (part === undefined) break;
    taken += 1;
    got.push(...part.chunks);
  }
  t.ok(Buffer.concat(got).equals(body), 'every byte, in order');
  // No take() waits (each part landed while the reader was busy): the window never doubles.
  t.equal(mostAhead, RAMP_START_PARTS, `parts fetched ahead of the reader stay at ${RAMP_START_PARTS} (of the 16 the budget allows)`);
});

t.test('a part streamed as many chunks is handed on as those very chunks, every byte exact (sha256)', async (t) => {
  const client = new ChunkyClient();
  const body = bytesFor('chunky', 1_000_003); // a short last part
  const items: PipeItem[] = [{ kind: 'object', info: client.put('chunky', body) }, { kind: 'inline', data: Buffer.from('tail') }];
  client.delayMs = () => 2;
  const ra = new Readahead(items, { client, partSize: 100_000, maxInflightBytes: 400_000, maxRequests: 8 });
  const hash = createHash('sha256');
  let parts = 0;
  let chunks = 0;
  let copied = 0;
  for (let part; (part = await ra.take()) !== undefined && part.itemIndex === 0;) {
    parts += 1;
    let n = 0;
    for (const c of part.chunks) {
      hash.update(c);
      n += c.length;
      chunks += 1;
      if (!client.yielded.has(c)) copied += 1;
    }
    t.equal(n, part.bytes, `part ${parts - 1}: its chunks hold its bytes`);
    if (part.last) break;
  }
  t.equal(parts, 11, '10 full parts and a short one');
  t.equal(hash.digest('hex'), sha256(body), 'sha256 of the chunks, in order, is the object\'s');
  t.ok(chunks >= 11 * 8, `many chunks per part, not one buffer (${chunks})`);
  t.equal(copied, 0, 'every chunk is one the client yielded: no copy, no part-sized buffer');
  const tail = await ra.take();
  t.same([tail?.itemIndex, Buffer.concat(tail!.chunks).toString(), tail?.last], [1, 'tail', true]);
  t.equal(await ra.take(), undefined);
});

t.test('a part shorter or longer than its range fails with BadRangeReplyError at its take(), never unhandled', async (t) => {
  for (const by of [1, 4093, -1]) {
    const client = new ChunkyClient();
    const body = bytesFor('big', 50_000);
    const items: PipeItem[] = [{ kind: 'object', info: client.put('big', body) }];
    client.cut = { end: 30_000, by }; // the third part of 10,000 bytes
    const ra = new Readahead(items, { client, partSize: 10_000, maxInflightBytes: 50_000, maxRequests: 8 });
    ra.start();
    await new Promise((r) => setTimeout(r, 20)); // let the bad part fail while nobody awaits it
    for (let i = 0; i < 2; i++) t.ok(Buffer.concat((await ra.take())!.chunks).equals(body.subarray(i * 10_000, (i + 1) * 10_000)), `part ${i} by ${by}: exact`);
    await t.rejects(ra.take(), BadRangeReplyError, `${by > 0 ? by + ' bytes short' : -by + ' byte(s) long'}: BadRangeReplyError`);
    ra.close();
  }
});
