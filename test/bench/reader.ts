// The bench's reader (src/bench/reader.ts), run in this process: every byte is still
// checked with sha256 whichever way it hashes, a wrong byte is caught, and with
// hash 'after' no hashing happens inside the timed span (startMs..endMs).
import t from 'tap';
import { skip } from '../helpers/tap.js';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createWriteStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { epochMs, randomOffsets, type ReadPlan } from '../../src/bench/read-plan.js';
import { mapArena, READ_SIZE, runPlan, type HashFactory } from '../../src/bench/reader.js';
import { checkHashes } from '../../src/bench/run-once.js';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

function pattern(n: number, seed: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed * 7 + (i >> 9)) & 0xff;
  return b;
}

/** A sha256 factory that records when each update ran (epoch ms), to compare with the span. */
function recording(): { factory: HashFactory; updates: number[] } {
  const updates: number[] = [];
  const factory: HashFactory = () => {
    const h = createHash('sha256');
    const w = {
      update(data: Parameters<typeof h.update>[0]) { updates.push(epochMs()); h.update(data as unknown as Buffer); return w as never; },
      digest: h.digest.bind(h),
    };
    return w as unknown as ReturnType<HashFactory>;
  };
  return { factory, updates };
}

const dir = mkdtempSync(path.join(os.tmpdir(), 'sluice-bench-reader-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
// Sizes around READ_SIZE: a multiple, one byte over, small, and several reads long.
const files = [READ_SIZE, READ_SIZE + 1, 40_000, 3 * READ_SIZE + 4321].map((n, i) => {
  const data = pattern(n, i);
  const p = path.join(dir, `f${i}`);
  writeFileSync(p, data);
  return { p, data, sha256: sha(data) };
});
const total = files.reduce((n, f) => n + f.data.length, 0);
const filesPlan = (extra: Partial<ReadPlan>): ReadPlan => ({ kind: 'files', paths: files.map((f) => f.p), maxSeconds: 60, ...extra } as ReadPlan);

t.test('hash after the span: right hashes, no hashing inside startMs..endMs, CPU split', async (t) => {
  const rec = recording();
  const r = await runPlan(filesPlan({ hash: 'after', keepBytes: total }), { hash: rec.factory });
  t.equal(r.error, undefined);
  t.equal(r.hash, 'after');
  t.equal(r.bytes, total);
  t.equal(r.items, files.length);
  t.same(r.sha256, files.map((f) => f.sha256), 'every file hashed, in plan order');
  t.equal(checkHashes(files.map((f) => f.sha256), r), 0);
  t.equal(r.inlineHashedBytes, 0, 'all bytes kept for after the span');
  t.ok(rec.updates.length > 0);
  t.ok(rec.updates.every((u) => u >= r.endMs), 'every hash update ran after the timed span ended');
  t.type(r.cpuSeconds, 'number');
  t.type(r.hashCpuSeconds, 'number');
  t.ok(r.hashCpuSeconds! >= 0);
});

t.test('hash inline (the old behaviour): updates inside the span, marked', async (t) => {
  const rec = recording();
  const r = await runPlan(filesPlan({ hash: 'inline' }), { hash: rec.factory });
  t.same(r.sha256, files.map((f) => f.sha256));
  t.equal(r.hash, 'inline');
  t.equal(r.inlineHashedBytes, total, 'every byte hashed inside the span');
  t.ok(rec.updates.every((u) => u >= r.startMs && u <= r.endMs), 'every hash update ran inside the timed span');
  t.ok(r.hashCpuSeconds! > 0, 'inline hash CPU measured');
  t.ok(r.cpuSeconds! >= 0, 'the reading\'s CPU is the span\'s less the hashing');
});

t.test('a plan without hashing fields hashes inline, as plans did before', async (t) => {
  const r = await runPlan(filesPlan({}));
  t.equal(r.hash, 'inline');
  t.same(r.sha256, files.map((f) => f.sha256));
});

t.test('over the keep budget: the rest is hashed inline, counted, and still right', async (t) => {
  const keep = READ_SIZE + 100; // the first file fits, the second starts in the arena then spills
  const rec = recording();
  const r = await runPlan(filesPlan({ hash: 'after', keepBytes: keep }), { hash: rec.factory });
  t.same(r.sha256, files.map((f) => f.sha256), 'hashes right across the spill');
  t.ok(r.inlineHashedBytes! > 0 && r.inlineHashedBytes! < total, `some bytes hashed inline (${r.inlineHashedBytes} of ${total})`);
  t.equal(r.inlineHashedBytes, total - files[0]!.data.length, 'everything after the first file');
  t.ok(rec.updates.some((u) => u <= r.endMs) && rec.updates.some((u) => u >= r.endMs));
});

t.test('a wrong byte is caught whichever way the reader hashes', async (t) => {
  const bad = Buffer.from(files[3]!.data);
  bad[2 * READ_SIZE + 17] ^= 0x01;
  writeFileSync(files[3]!.p, bad);
  t.teardown(() => writeFileSync(files[3]!.p, files[3]!.data));
  for (const extra of [{ hash: 'after' as const, keepBytes: total }, { hash: 'inline' as const }, { hash: 'after' as const, keepBytes: READ_SIZE }]) {
    const r = await runPlan(filesPlan(extra));
    t.equal(checkHashes(files.map((f) => f.sha256), r), 1, `one mismatch (${JSON.stringify(extra)})`);
    t.not(r.sha256[3], files[3]!.sha256);
    t.equal(r.sha256[0], files[0]!.sha256, 'the others still match');
  }
});

t.test('mapArena: one read of slack, every byte mapped; none for inline or keep 0', async (t) => {
  const a = mapArena({ hash: 'after', keepBytes: 5000 });
  t.equal(a!.length, 5000 + READ_SIZE);
  t.equal(mapArena({ hash: 'inline', keepBytes: 5000 }), undefined);
  t.equal(mapArena({ hash: 'after', keepBytes: 0 }), undefined);
});

t.test('stream (a real FIFO): segments hashed after the span, a wrong byte caught', async (t) => {
  if (spawnSync('mkfifo', ['--version'], { stdio: 'ignore' }).status !== 0) return skip(t, 'no mkfifo');
  const segs = [pattern(2 * READ_SIZE + 5, 11), pattern(30_000, 12), pattern(READ_SIZE, 13)];
  const all = Buffer.concat(segs);
  const want = segs.map(sha);
  const run = async (data: Buffer, extra: Partial<ReadPlan>) => {
    const fifo = path.join(dir, `fifo-${Math.random().toString(36).slice(2)}`);
    t.equal(spawnSync('mkfifo', [fifo]).status, 0);
    const w = createWriteStream(fifo);
    w.end(data);
    const rec = recording();
    const r = await runPlan({ kind: 'stream', path: fifo, segments: segs.map((s) => s.length), maxSeconds: 60, ...extra } as ReadPlan, { hash: rec.factory });
    return { r, rec };
  };
  const ok = await run(all, { hash: 'after', keepBytes: all.length });
  t.same(ok.r.sha256, want);
  t.equal(ok.r.items, 3);
  t.ok(ok.rec.updates.every((u) => u >= ok.r.endMs), 'no hashing inside the span');
  const bad = Buffer.from(all);
  bad[segs[0]!.length + 100] ^= 0x80;
  for (const extra of [{ hash: 'after' as const, keepBytes: all.length }, { hash: 'inline' as const }]) {
    const b = await run(bad, extra);
    t.equal(checkHashes(want, b.r), 1, `the flipped byte's segment, and only it, mismatches (${extra.hash})`);
    t.not(b.r.sha256[1], want[1]);
  }
});

t.test('random: blocks kept in the arena and hashed after the span; a wrong byte caught', async (t) => {
  const f = files[3]!;
  const plan = (extra: Partial<ReadPlan>) => ({ kind: 'random', path: f.p, fileSize: f.data.length, blockSize: 65536, ops: 40, threads: 4, seed: 9, maxSeconds: 60, ...extra } as ReadPlan);
  const offsets = randomOffsets(9, 40, f.data.length, 65536);
  const h = createHash('sha256');
  for (const o of offsets) h.update(f.data.subarray(o, Math.min(f.data.length, o + 65536)));
  const want = h.digest('hex');
  const rec = recording();
  const r = await runPlan(plan({ hash: 'after', keepBytes: 40 * 65536 }), { hash: rec.factory });
  t.same(r.sha256, [want]);
  t.equal(r.items, 40);
  t.equal(r.inlineHashedBytes, 0);
  t.ok(rec.updates.every((u) => u >= r.endMs), 'hashed after the span');
  const inline = await runPlan(plan({ hash: 'inline' }));
  t.same(inline.sha256, [want]);
  t.equal(inline.inlineHashedBytes, inline.bytes, 'inline: hashed inside the span, counted');
  const bad = Buffer.from(f.data);
  bad[offsets[0]! + 3] ^= 0x10;
  writeFileSync(f.p, bad);
  t.teardown(() => writeFileSync(f.p, f.data));
  const wrong = await runPlan(plan({ hash: 'after', keepBytes: 40 * 65536 }));
  t.not(wrong.sha256[0], want, 'the flipped byte changes the hash');
});
