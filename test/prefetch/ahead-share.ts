import t from 'tap';
import { ACTIVE_MS, AheadShare, FLOOR_WINDOWS, GROW_Q, MIN_READER_PARTS, SHRINK_Q } from '../../src/prefetch/ahead-share.js';
import { registry } from '../../src/metrics/metrics.js';

const MiB = 1024 * 1024;
const PART = 8 * MiB;
const MAX = 64 * MiB;

function setup(channel = 'share-test') {
  let now = 1000;
  const share = new AheadShare({ maxPrefetch: MAX, partSize: PART, channel, now: () => now });
  return { share, advance: (ms: number) => { now += ms; } };
}

/** What a cursor does at a batch (read-cursor.ts readAhead): the window it may use for one it wants of `want` bytes. */
function cap(share: AheadShare, reader: object, want: number): number {
  const limit = share.limit(reader);
  if (want > limit) share.wantMore();
  return Math.min(want, limit);
}

/** What limit() gives each of `n` readers of a budget at `budget` bytes: B / n in whole parts, never under MIN_READER_PARTS parts. */
function shareOf(budget: number, n: number): number {
  return Math.max(MIN_READER_PARTS * PART, Math.floor(budget / n / PART) * PART);
}

/** Reports `n` whole-part GETs that each took `ms`. */
function samples(share: AheadShare, n: number, ms: number): void {
  for (let i = 0; i < n; i++) share.sample(ms);
}

async function gauge(channel: string): Promise<number | undefined> {
  const m = await registry.getSingleMetric('sluice_prefetch_share_bytes')!.get();
  return m.values.find((v) => v.labels.channel === channel)?.value;
}

t.test('one reader keeps its whole window; more share the floor, never below two parts each', async (t) => {
  const { share } = setup();
  t.equal(share.floor, FLOOR_WINDOWS * MAX);
  const readers = Array.from({ length: 20 }, () => ({}));
  t.equal(cap(share, readers[0]!, MAX), MAX, 'one reader: its window');
  t.equal(share.floor, MAX, 'the floor is one window: a reader alone keeps what it had');
  t.equal(cap(share, readers[1]!, MAX), share.floor / 2, 'two readers: half the floor each (32 MiB)');
  t.equal(cap(share, readers[2]!, MAX), shareOf(share.floor, 3), 'three readers: a third of the floor, in whole parts, at least two');
  cap(share, readers[3]!, MAX);
  t.equal(share.readers, 4);
  t.equal(cap(share, readers[0]!, MAX), MIN_READER_PARTS * PART, 'four readers: a quarter of the floor is two parts each (16 MiB)');
  t.equal(cap(share, readers[0]!, 16 * MiB), 16 * MiB, 'a window below the share is left alone');
  for (const r of readers) cap(share, r, MAX);
  t.equal(cap(share, readers[0]!, MAX), MIN_READER_PARTS * PART, 'twenty readers: never below two parts each');
  t.equal(share.bytes, share.floor, 'the budget stayed at its floor (no samples)');
});

t.test('the budget grows by a part per round of GETs while GETs keep their best rate and a reader wants more, up to a full window per reader', async (t) => {
  const { share } = setup('share-grow');
  const readers = [{}, {}, {}, {}];
  for (const r of readers) cap(share, r, MAX);
  t.equal(await gauge('share-grow'), share.floor, 'the gauge shows the floor at first');
  // Steady rates: q = 1. Each sample finds a reader capped since the last growth (cap() below).
  const floorParts = share.floor / PART;
  for (let i = 0; i < floorParts - 1; i++) {
    cap(share, readers[i % 4]!, MAX);
    share.sample(100);
  }
  t.equal(share.bytes, share.floor, 'no growth before a round (as many samples as the budget has parts)');
  cap(share, readers[0]!, MAX);
  share.sample(100);
  t.equal(share.bytes, share.floor + PART, 'one part at the end of the first round');
  let n = floorParts;
  for (; n < 2000 && share.bytes < readers.length * MAX; n++) {
    cap(share, readers[n % 4]!, MAX);
    share.sample(100);
  }
  // Rounds of 16, 17, ... 31 samples: from 16 parts to 32.
  let expected = 0;
  for (let parts = floorParts; parts < readers.length * MAX / PART; parts++) expected += parts;
  t.equal(n, expected, `reached a full window per reader after ${expected} samples, a round per part`);
  for (let i = 0; i < 100; i++) {
    cap(share, readers[i % 4]!, MAX);
    share.sample(100);
  }
  t.equal(share.bytes, readers.length * MAX, 'grew to one full window per reader, no further');
  t.equal(cap(share, readers[0]!, MAX), MAX, 'every reader has its whole window again');
  t.equal(share.stats.grew, (readers.length * MAX - share.floor) / PART, 'one part per growth');
  t.equal(await gauge('share-grow'), readers.length * MAX, 'the gauge follows');
});

t.test('no growth without demand: samples with no reader capped since the last growth leave the budget', async (t) => {
  const { share } = setup('share-demand');
  const readers = [{}, {}, {}, {}];
  for (const r of readers) cap(share, r, MAX);
  samples(share, share.floor / PART, 100);
  t.equal(share.bytes, share.floor + PART, 'capped readers: grew once, after a round');
  samples(share, 100, 100);
  t.equal(share.bytes, share.floor + PART, 'no reader asked for more since: held');
  for (const r of readers) cap(share, r, 16 * MiB); // windows below the share: not capped
  samples(share, 100, 100);
  t.equal(share.bytes, share.floor + PART, 'readers under their share do not make it grow');
});

t.test('GETs slowing to under half their best rate shrink the budget to its floor, never below; the band between holds', async (t) => {
  const { share } = setup('share-shrink');
  const readers = [{}, {}, {}, {}, {}, {}];
  for (let i = 0; i < 400; i++) {
    cap(share, readers[i % readers.length]!, MAX);
    share.sample(100);
  }
  const grown = share.bytes;
  t.ok(grown > share.floor + 8 * PART, `grew while rates held (${grown / MiB} MiB)`);
  // Rates in the band: between SHRINK_Q and GROW_Q of the best. The EWMA takes a few GETs to get there.
  const band = 100 / ((GROW_Q + SHRINK_Q) / 2);
  samples(share, 30, band);
  t.ok(share.quality > SHRINK_Q && share.quality < GROW_Q, `q in the band (${share.quality.toFixed(2)})`);
  const held = share.bytes;
  for (let i = 0; i < 100; i++) {
    cap(share, readers[i % readers.length]!, MAX);
    share.sample(band);
  }
  t.equal(share.bytes, held, 'in the band: neither grows nor shrinks, even with readers capped');
  // A saturated link: every GET at a third of the best rate.
  samples(share, 200, 300);
  t.ok(share.quality < SHRINK_Q);
  t.equal(share.bytes, share.floor, 'shrank to the floor and stopped there');
  t.ok(share.stats.shrank > 0);
});

t.test('readers that stop asking stop counting after ACTIVE_MS; leave() is at once; the budget above their windows goes with them', async (t) => {
  const { share, advance } = setup('share-active');
  const a = {}, b = {}, c = {}, d = {};
  for (const r of [a, b, c, d]) cap(share, r, MAX);
  for (let i = 0; i < 1000; i++) {
    cap(share, [a, b, c, d][i % 4]!, MAX);
    share.sample(100);
  }
  t.equal(share.bytes, 4 * MAX);
  share.leave(d);
  t.equal(share.readers, 3, 'leave() counts at once');
  advance(ACTIVE_MS / 2);
  cap(share, a, MAX);
  advance(ACTIVE_MS / 2 + 200);
  t.equal(cap(share, a, MAX), MAX, 'b and c went quiet: a alone keeps its whole window');
  t.equal(share.readers, 1);
  t.equal(share.bytes, share.floor, 'the budget came back down to what the readers left can use');
  share.leave(d);
  t.equal(share.readers, 1, 'a second leave() changes nothing');
});

t.test('the best rate is kept: a link that stays slow keeps the budget at its floor', async (t) => {
  const { share } = setup('share-keep');
  const readers = [{}, {}, {}, {}];
  for (const r of readers) cap(share, r, MAX);
  samples(share, share.floor / PART, 100);
  t.equal(share.bytes, share.floor + PART, 'grew after the first round (q = 1)');
  for (let i = 0; i < 2000; i++) {
    cap(share, readers[i % 4]!, MAX);
    share.sample(300);
  }
  t.equal(share.bytes, share.floor, 'two thousand slow GETs later, still at the floor');
  // The EWMA (weight 1/8) falls from the old rate toward a third of it: below GROW_Q of its top
  // after ln((GROW_Q - 1/3) / (2/3)) / ln(7/8) = 4.4 slow GETs, well within the next round.
  t.equal(share.stats.grew, 1, 'no growth after the rate came down');
  t.equal(share.limit({}), shareOf(share.floor, 5), 'a fifth reader gets a fifth of the floor, or two parts');
});

t.test('GETs that vary by ±40%, and one freak fast GET, still grow the budget: the rates are compared smoothed', async (t) => {
  const { share } = setup('share-noise');
  const readers = [{}, {}, {}, {}];
  let x = 4242;
  for (let i = 0; i < 1000; i++) {
    cap(share, readers[i % 4]!, MAX);
    x = (x * 1103515245 + 12345) % 2 ** 31;
    const ms = i === 3 ? 5 : 60 + (x % 81); // 60..140 ms around 100; the fourth GET a freak 5 ms (e.g. a very short queue)
    share.sample(ms);
  }
  t.equal(share.bytes, readers.length * MAX, `grew to a full window per reader (q ${share.quality.toFixed(2)})`);
});

t.test('a link that saturates as the budget grows: growth stops near where GETs slow to GROW_Q of their best, not several parts past it', async (t) => {
  // A link that 20 parts in flight fill: with P > 20 parts, each GET takes P / 20 times as long,
  // so q settles at 20 / P. Growth should stop where q < GROW_Q, at P = 20 / 0.7 = 28.6 parts.
  // Judged at every sample, the EWMA (about 8 GETs of memory) lagged the growth it caused: the
  // first version grew on to 36 parts, where the link gives no more and the parts only hold memory.
  const { share } = setup('share-saturate');
  const readers = Array.from({ length: 8 }, () => ({}));
  let most = 0;
  for (let i = 0; i < 3000; i++) {
    cap(share, readers[i % readers.length]!, MAX);
    const parts = share.bytes / PART;
    share.sample(100 * Math.max(1, parts / 20));
    most = Math.max(most, parts);
  }
  t.ok(most <= 30, `the budget peaked at ${most} parts (the link fills at 20, q = 0.7 at 28.6)`);
  t.ok(share.bytes / PART >= 24, `and holds near it (${share.bytes / PART} parts), above the floor of ${share.floor / PART}`);
});
