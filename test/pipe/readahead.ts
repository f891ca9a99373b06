import t from 'tap';
import { AbortedError, NoSuchKeyError } from '../../src/errors.js';
import { RAMP_START_PARTS, Readahead, type PipeItem } from '../../src/pipe/readahead.js';
import { bytesFor, MemoryClient } from '../helpers/pipe.js';

async function drainAll(ra: Readahead): Promise<{ index: number; data: Buffer; last: boolean }[]> {
  const out: { index: number; data: Buffer; last: boolean }[] = [];
  for (let i = 0; i < 10_000; i++) {
    const p = await ra.take();
    if (!p) return out;
    out.push({ index: p.itemIndex, data: p.data, last: p.last });
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
  t.equal((await ra.take())?.data.toString(), 'a');
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
  t.ok(first!.data.equals(body.subarray(0, 1000)));
  t.equal(client.requested.length, 1 + 2 * RAMP_START_PARTS, 'after one part is taken the window has doubled');
  const rest = await drainAll(ra);
  t.ok(Buffer.concat([first!.data, ...rest.map((p) => p.data)]).equals(body), 'every byte, in order');
  t.ok(client.maxInflight > RAMP_START_PARTS && client.maxInflight <= 16, `the window grew to the budget (max ${client.maxInflight} in flight)`);
});
