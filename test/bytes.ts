/** src/bytes.ts: the loops agree with Buffer.compare and Buffer#copy on random ranges, short and long. */
import t from 'tap';
import { compareBytes, copyBytes } from '../src/bytes.js';

t.test('compareBytes orders ranges as Buffer.compare does; copyBytes copies as Buffer#copy does', async (t) => {
  let seed = 7;
  const rnd = (n: number) => { seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31; return seed % n; };
  // A small alphabet, so that equal prefixes and equal ranges are common.
  const buf = (n: number) => Buffer.from(Array.from({ length: n }, () => 97 + rnd(3)));
  let disagree = 0;
  let copies = 0;
  for (let i = 0; i < 2000; i++) {
    const a = buf(1 + rnd(80));
    const b = buf(1 + rnd(80));
    const as = rnd(a.length), ae = as + rnd(a.length - as + 1);
    const bs = rnd(b.length), be = bs + rnd(b.length - bs + 1);
    if (compareBytes(a, as, ae, b, bs, be) !== Buffer.compare(a.subarray(as, ae), b.subarray(bs, be))) disagree++;
    const dst = Buffer.alloc(ae - as + 4, 0xee);
    const want = Buffer.alloc(ae - as + 4, 0xee);
    copyBytes(a, as, ae, dst, 2);
    a.copy(want, 2, as, ae);
    if (dst.equals(want)) copies++;
  }
  t.equal(disagree, 0, 'every comparison agrees');
  t.equal(copies, 2000, 'every copy agrees, short (a loop) and long (Buffer#copy)');
  t.equal(compareBytes(Buffer.from('ab'), 0, 2, Buffer.from('abc'), 0, 3), -1, 'a prefix comes first');
});
