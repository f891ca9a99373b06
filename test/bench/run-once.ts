import t from 'tap';
import { assignBatches } from '../../src/bench/run-once.js';

t.test('readers take batches of 16 in turn, like data-loader workers', async (t) => {
  const items = Array.from({ length: 40 }, (_, i) => i);
  const [a, b] = assignBatches(items, 2);
  t.same(a, [...items.slice(0, 16), ...items.slice(32, 40)]);
  t.same(b, items.slice(16, 32));
  t.same(assignBatches(items, 1)[0], items);
  const many = assignBatches([1, 2, 3], 4);
  t.same(many, [[1], [2], [3], []], 'fewer files than readers: one each, the last reader gets none');
  t.same(assignBatches([1, 2, 3, 4], 4), [[1], [2], [3], [4]], 'a few large files: every reader reads one at the same time');
  t.same(assignBatches(Array.from({ length: 10 }, (_, i) => i), 4), [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]], '10 files, 4 readers: batches of ceil(10 / 4) = 3');
  t.same(assignBatches(Array.from({ length: 200 }, (_, i) => i), 4).map((x) => x.length), [56, 48, 48, 48], 'many files: batches of 16 as before');
});

t.test('readers hash as the scenario says; the keep budget is split over the readers, no more than each reads', async (t) => {
  const { readerHashing, addReaderFigures } = await import('../../src/bench/run-once.js');
  const config = { readerKeepBytes: 1000 } as Parameters<typeof readerHashing>[1];
  const sc = { readerHash: 'after' } as Parameters<typeof readerHashing>[0];
  t.same(readerHashing(sc, config, 1, 600), { hash: 'after', keepBytes: 600 });
  t.same(readerHashing(sc, config, 4, 600), { hash: 'after', keepBytes: 250 });
  t.same(readerHashing({ ...sc, readerHash: 'inline' }, config, 1, 600), { hash: 'inline' });
  const r: Parameters<typeof addReaderFigures>[0] = { rep: 0, value: null, seconds: 0, bytes: 0, items: 0, verified: false, mismatches: 0, truncated: false };
  const res = (x: object) => ({ startMs: 0, endMs: 1, firstByteMs: 0, bytes: 10, items: 1, sha256: [], truncated: false, ...x });
  addReaderFigures(r, [res({ cpuSeconds: 1, hashCpuSeconds: 0.5, hash: 'after', inlineHashedBytes: 0 }), res({ cpuSeconds: 2, hashCpuSeconds: 0.25, hash: 'after', inlineHashedBytes: 3 })]);
  t.equal(r.readerCpuSeconds, 3);
  t.equal(r.readerHashCpuSeconds, 0.75);
  t.equal(r.readerInlineHashedBytes, 3);
  t.equal(r.readerHash, 'after');
  addReaderFigures(r, [res({ cpuSeconds: 1 }), res({ cpuSeconds: 1, hash: 'after' })]);
  t.equal(r.readerHash, 'inline', 'a reader of an old plan hashed inline');
  t.equal(r.readerHashCpuSeconds, 0.75, 'not every reader split its CPU: left as it was');
});

t.test('list: the deadline ends a walk in the middle, also a readdir that never returns', async (t) => {
  const { walkCount } = await import('../../src/bench/run-once.js');
  const { epochMs } = await import('../../src/bench/read-plan.js');
  const { mkdtempSync, mkdirSync, writeFileSync, rmSync } = await import('node:fs');
  const os = await import('node:os');
  const path = await import('node:path');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sluice-bench-walk-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const d of ['a', 'b', 'b/c']) mkdirSync(path.join(dir, d), { recursive: true });
  for (const f of ['x', 'a/y', 'b/z', 'b/c/w']) writeFileSync(path.join(dir, f), '1');
  t.same((await walkCount(dir, 100)).sort(), ['a/y', 'b/c/w', 'b/z', 'x'], 'no deadline: the whole tree');
  t.same((await walkCount(dir, 100, epochMs() + 60_000)).sort(), ['a/y', 'b/c/w', 'b/z', 'x']);
  await t.rejects(walkCount(dir, 100, epochMs() - 1), { name: 'WalkDeadlineError' }, 'a deadline already passed');
  // A mount whose listing hangs: the first folder answers, the next never does.
  let calls = 0;
  const hung = async (p: string) => {
    if (calls++ === 0) return [{ name: 'sub', isDirectory: () => true }, { name: 'f', isDirectory: () => false }];
    void p;
    return new Promise<never>(() => {});
  };
  const t0 = epochMs();
  await t.rejects(walkCount(dir, 100, t0 + 150, hung), { name: 'WalkDeadlineError' }, 'a stuck readdir inside the walk ends at the deadline');
  const took = epochMs() - t0;
  t.ok(took >= 140 && took < 5000, `ended at the deadline (${took.toFixed(0)} ms), not never`);
  t.equal(calls, 2);
});
