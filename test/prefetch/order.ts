import t from 'tap';
import type { FileRef } from '../../src/prefetch/block-fetcher.js';
import { FileOrder, SCAN_STRIDE } from '../../src/prefetch/order.js';

const file = (i: number): FileRef => ({ key: `k${i}`, etag: 'e', size: 10 });

t.test('places, progress and duplicates', async (t) => {
  const f = [file(0), file(1), file(2)];
  const o = new FileOrder([f[2]!, f[0]!, f[2]!, f[1]!], () => undefined);
  t.equal(o.position, -1);
  t.equal(o.open(f[0]!), 1);
  t.equal(o.position, 1);
  t.equal(o.open(f[2]!), 0, 'first occurrence not yet opened');
  t.equal(o.position, 1, 'progress is the furthest place');
  t.equal(o.open(f[2]!), 2, 'a file listed twice: its second open is its second place');
  t.equal(o.open(f[2]!), 2, 'a third open stays at its last place');
  t.equal(o.open(file(9)), undefined, 'a file not in the order');
});

t.test('places left behind unopened are handed over once, after DROP_BEHIND and a stride', async (t) => {
  const files = Array.from({ length: 400 }, (_, i) => file(i));
  const skipped: number[] = [];
  const o = new FileOrder(files, (f) => skipped.push(Number(f.key.slice(1))), 10);
  for (let i = 0; i < 400; i += 2) o.open(files[i]!); // every other file skipped
  const last = 398 - 10;
  t.ok(skipped.length > 0 && skipped.every((i) => i % 2 === 1 && i < last), 'only unopened places, DROP_BEHIND behind');
  t.ok(skipped.length >= Math.floor((last - SCAN_STRIDE) / 2), `most of them by now (${skipped.length})`);
  t.equal(new Set(skipped).size, skipped.length, 'each once');
  o.end();
  t.equal(skipped.length, 200, 'end() hands over the rest');
  t.equal(new Set(skipped).size, 200, 'still each once');
});
