/**
 * Issue 6, item 5, extended with faults: the reference model of test/fs/model.ts (random
 * open, read at random offsets and sizes, seek and close from several handles, through
 * the block cache and the prefetchers, with a small cache and small parts), while GETs
 * fail at random with the typed errors the S3 client gives up with. Every read must give
 * exactly the source bytes or reject with a SluiceError (EIO/ETIMEDOUT through FUSE);
 * once S3 heals, the same read must give exactly the source bytes: a failed GET never
 * poisons the cache, never leaves a short block, never wedges a handle.
 */
import fc from 'fast-check';
import t from 'tap';
import { EndpointUnreachableError, RetriesExhaustedError, SluiceError, TimeoutError } from '../../src/errors.js';
import { SluiceFs } from '../../src/fs/core.js';
import { FaultyClient } from '../../src/s3/faulty-client.js';
import { FakeObjectClient, patternBytes } from '../helpers/fake-client.js';

const KiB = 1024;
const SIZES = [0, 1, 5000, 64 * KiB + 1, 300 * KiB + 7, 1100 * KiB];
const SLOTS = 3;
const ERRORS = [
  () => new RetriesExhaustedError('S3 get failed 10 times (last: throttled)', 10),
  () => new TimeoutError('S3 get made no progress'),
  () => new EndpointUnreachableError('http://127.0.0.1:1'),
];

type Op =
  | { kind: 'open'; slot: number; file: number }
  | { kind: 'close'; slot: number }
  | { kind: 'read'; slot: number; at: number; len: number }
  | { kind: 'fault'; count: number; error: number };

const slot = fc.integer({ min: 0, max: SLOTS - 1 });
const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('open' as const), slot, file: fc.integer({ min: 0, max: SIZES.length - 1 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('close' as const), slot }) },
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('read' as const), slot, at: fc.integer({ min: 0, max: 1200 * KiB }), len: fc.integer({ min: 0, max: 200 * KiB }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('fault' as const), count: fc.integer({ min: 1, max: 4 }), error: fc.integer({ min: 0, max: ERRORS.length - 1 }) }) },
);

t.test('reads under random GET failures: exact bytes or a typed error, and exact bytes after healing', async (t) => {
  const fake = new FakeObjectClient();
  const bodies = SIZES.map((size, i) => {
    fake.put(`m/f${i}`, patternBytes(size, 300 + i));
    return fake.body(`m/f${i}`);
  });
  let failedReads = 0;
  let checked = 0;
  await fc.assert(fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 30 }), fc.constantFrom(64 * KiB, 256 * KiB), async (ops, partSize) => {
    const client = new FaultyClient(fake);
    const fs = await SluiceFs.create({
      client, prefix: 'm', cacheSize: 3 * partSize, partSize, maxPrefetch: 2 * partSize, maxInflight: 2 * partSize, crossFilePrefetch: 2, crossFileMaxSize: 80 * KiB,
    });
    const slots: Array<{ fh: number; file: number } | undefined> = [];
    const readAt = async (s: { fh: number; file: number }, at: number, len: number) => {
      const dst = Buffer.alloc(len);
      const n = await fs.read(s.fh, dst, len, at);
      const want = bodies[s.file]!.subarray(Math.min(at, bodies[s.file]!.length), at + len);
      if (n !== want.length || !dst.subarray(0, n).equals(want)) throw new Error(`file ${s.file}: read ${len} at ${at}: wrong bytes`);
      checked += n;
    };
    try {
      for (const o of ops) {
        if (o.kind === 'fault') { client.failNext('getRange', o.count, ERRORS[o.error]!); continue; }
        if (o.kind === 'open') {
          if (slots[o.slot]) await fs.release(slots[o.slot]!.fh);
          slots[o.slot] = { fh: await fs.open(`/f${o.file}`, 0), file: o.file };
          continue;
        }
        const s = slots[o.slot];
        if (!s) continue;
        if (o.kind === 'close') { await fs.release(s.fh); slots[o.slot] = undefined; continue; }
        try {
          await readAt(s, o.at, o.len);
        } catch (err) {
          if (!(err instanceof SluiceError)) throw err;
          failedReads++;
          client.heal();
          await readAt(s, o.at, o.len); // healed: must be exact now
        }
      }
    } finally {
      await fs.close();
    }
  }), { numRuns: 120, seed: 6_2026, endOnFailure: true });
  t.ok(failedReads > 0, `${failedReads} reads failed with a typed error and then read exact bytes after healing`);
  t.comment(`model with faults: ${checked} bytes compared`);
});
