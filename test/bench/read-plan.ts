import t from 'tap';
import { epochMs, randomOffsets } from '../../src/bench/read-plan.js';

t.test('random offsets are deterministic, block-aligned and inside the file', async (t) => {
  const a = randomOffsets(7, 500, 10 * 65536 + 100, 65536);
  t.same(a, randomOffsets(7, 500, 10 * 65536 + 100, 65536));
  t.notSame(a, randomOffsets(8, 500, 10 * 65536 + 100, 65536));
  for (const o of a) {
    t.equal(o % 65536, 0);
    t.ok(o + 65536 <= 10 * 65536 + 100);
  }
  t.ok(new Set(a).size > 5, 'spread over the file');
  t.same(randomOffsets(1, 3, 100, 65536), [0, 0, 0], 'a file smaller than a block: offset 0');
});

t.test('epochMs is comparable with Date.now()', async (t) => {
  t.ok(Math.abs(epochMs() - Date.now()) < 1000);
});
