/**
 * Issue 6, item 6: hostile input. Every parser of user input is fed malformed and random
 * input (fast-check, bounded runs, fixed seeds) and must either succeed or throw a typed
 * SluiceError: never another exception, never a hang (tap's timeout bounds each file).
 * Covered: the input-data-config parser (text and JSON values), the short --channel form,
 * the manifest and augmented-manifest parsers, and the RecordIO decoder (whole and
 * chunked). Hostile object keys: ./keys.ts.
 */
import fc from 'fast-check';
import t from 'tap';
import { SluiceError } from '../../src/errors.js';
import { parseChannelFlag, parseInputDataConfig, parseInputDataConfigText } from '../../src/channels/input-config.js';
import { parseAugmentedManifest, parseManifestFile } from '../../src/channels/manifest.js';
import { decodeRecordIO, encodeRecord, RecordIODecoder } from '../../src/pipe/recordio.js';

/** Runs per property: enough to find shallow crashes, few enough for a loaded 2-core box. */
const RUNS = 400;
const SEED = 6_2026;

/** Succeeds, or throws a SluiceError; anything else fails the property with what was thrown. */
function typedOrOk(fn: () => unknown): boolean {
  try {
    fn();
    return true;
  } catch (err) {
    if (err instanceof SluiceError) return true;
    throw new Error(`untyped ${(err as Error)?.name}: ${(err as Error)?.message}`, { cause: err });
  }
}

/** JSON-ish text: fragments of the real formats glued at random, plus arbitrary strings. */
const FRAGMENTS = ['{', '}', '[', ']', ',', ':', '"', '\\', 'null', 'true', '0', '-1', '1e999', '"ChannelName"', '"train"', '"DataSource"',
  '"S3DataSource"', '"S3Uri"', '"s3://b/p/"', '"s3://"', '"InputMode"', '"Pipe"', '"FastFile"', '"S3DataType"', '"ManifestFile"',
  '"AugmentedManifestFile"', '"AttributeNames"', '"RecordWrapperType"', '"RecordIO"', '"CompressionType"', '"Gzip"', '"S3DataDistributionType"',
  '"ShardedByS3Key"', '"ShuffleConfig"', '"Seed"', '"InputDataConfig"', '"prefix"', '"source-ref"', '\n', ' ', '\u0000', '\ud800', '"\u00e9"'];
const jsonish = fc.oneof(
  fc.string({ maxLength: 200 }),
  fc.array(fc.constantFrom(...FRAGMENTS), { maxLength: 60 }).map((a) => a.join('')),
  fc.json({ maxDepth: 4 }),
);

/** Channel objects close to valid, with random replacements: reaches the deep checks. */
const channelLike = fc.record({
  ChannelName: fc.oneof(fc.constantFrom('train', 'val', '', 'a'.repeat(70), 'bad name!'), fc.anything()),
  InputMode: fc.option(fc.oneof(fc.constantFrom('File', 'FastFile', 'Pipe', 'pipe', ''), fc.anything())),
  DataSource: fc.oneof(
    fc.record({ S3DataSource: fc.record({
      S3Uri: fc.oneof(fc.constantFrom('s3://b/p/', 's3://bkt/m.json', 's3://', 'http://x', 's3://b/\u0000'), fc.anything()),
      S3DataType: fc.option(fc.oneof(fc.constantFrom('S3Prefix', 'ManifestFile', 'AugmentedManifestFile', 'x'), fc.anything())),
      S3DataDistributionType: fc.option(fc.oneof(fc.constantFrom('FullyReplicated', 'ShardedByS3Key'), fc.anything())),
      AttributeNames: fc.option(fc.oneof(fc.array(fc.string()), fc.anything())),
    }, { requiredKeys: [] }) }, { requiredKeys: [] }),
    fc.anything(),
  ),
  RecordWrapperType: fc.option(fc.oneof(fc.constantFrom('None', 'RecordIO'), fc.anything())),
  CompressionType: fc.option(fc.oneof(fc.constantFrom('None', 'Gzip'), fc.anything())),
  ShuffleConfig: fc.option(fc.oneof(fc.record({ Seed: fc.oneof(fc.integer(), fc.anything()) }), fc.anything())),
  ContentType: fc.option(fc.anything()),
}, { requiredKeys: [] });

t.test('input data config: typed error or channels, for any text and any JSON value', async (t) => {
  fc.assert(fc.property(jsonish, (text) => typedOrOk(() => parseInputDataConfigText(text, 'fuzz.json'))), { numRuns: RUNS, seed: SEED });
  fc.assert(fc.property(fc.anything(), (v) => typedOrOk(() => parseInputDataConfig(v))), { numRuns: RUNS, seed: SEED });
  fc.assert(fc.property(fc.array(channelLike, { maxLength: 4 }), fc.boolean(), (list, wrapped) => typedOrOk(() => parseInputDataConfig(wrapped ? { InputDataConfig: list } : list))),
    { numRuns: RUNS, seed: SEED });
  t.pass(`${3 * RUNS} configs`);
});

t.test('the short --channel form: typed error or a channel', async (t) => {
  const parts = ['train', 'val', '=', ',', 's3://b/p/', 's3://', 'mode=', 'File', 'FastFile', 'Pipe', 'distribution=', 'ShardedByS3Key', 'seed=', '7', '-1',
    '99999999999999999999', 'type=', 'ManifestFile', 'AugmentedManifestFile', 'attributes=', 'a|b', '|', 'wrapper=', 'RecordIO', 'compression=', 'Gzip',
    'content-type=', 'x/y', '\u0000', ' ', '%', '\ud800'];
  const flag = fc.oneof(fc.string({ maxLength: 120 }), fc.array(fc.constantFrom(...parts), { maxLength: 20 }).map((a) => a.join('')));
  fc.assert(fc.property(flag, (text) => typedOrOk(() => parseChannelFlag(text))), { numRuns: 2 * RUNS, seed: SEED });
  t.pass();
});

t.test('manifest and augmented manifest: typed error or entries', async (t) => {
  const line = fc.oneof(fc.string({ maxLength: 80 }), fc.json({ maxDepth: 3 }), fc.constantFrom(
    '{"prefix": "s3://b/p/"}', '"a.jpg"', '{"source-ref": "s3://b/x"}', '{"source-ref": 3}', '{"a": 1, "b": "s3://b/k"}', '[', ']', ',', '{"prefix": "s3://"}',
  ));
  const text = fc.oneof(jsonish, fc.array(line, { maxLength: 12 }).map((a) => a.join('\n')), fc.array(line, { maxLength: 12 }).map((a) => `[${a.join(',')}]`));
  fc.assert(fc.property(text, (s) => typedOrOk(() => parseManifestFile(s))), { numRuns: RUNS, seed: SEED });
  fc.assert(fc.property(text, fc.array(fc.constantFrom('source-ref', 'a', 'b', 'label', ''), { maxLength: 3 }), (s, attrs) => typedOrOk(() => parseAugmentedManifest(s, attrs))),
    { numRuns: RUNS, seed: SEED });
  t.pass();
});

t.test('RecordIO decoder: typed error or records, for random and mutated input, whole or chunked', async (t) => {
  const valid = fc.array(fc.uint8Array({ maxLength: 64 }), { maxLength: 6 }).map((recs) => Buffer.concat(recs.flatMap((r) => encodeRecord(Buffer.from(r)))));
  const mutated = fc.tuple(valid, fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 4 }), fc.nat()).map(([buf, flips, cut]) => {
    const b = Buffer.from(buf);
    for (const [i, v] of flips) if (b.length > 0) b[i % b.length] = v;
    return b.subarray(0, b.length === 0 ? 0 : cut % (b.length + 1));
  });
  const input = fc.oneof(fc.uint8Array({ maxLength: 200 }).map((a) => Buffer.from(a)), mutated, valid);
  fc.assert(fc.property(input, (buf) => typedOrOk(() => decodeRecordIO(buf))), { numRuns: RUNS, seed: SEED });
  fc.assert(fc.property(input, fc.array(fc.integer({ min: 1, max: 17 }), { minLength: 1, maxLength: 8 }), (buf, sizes) => typedOrOk(() => {
    const d = new RecordIODecoder();
    for (let off = 0, i = 0; off < buf.length; i++) {
      const n = sizes[i % sizes.length]!;
      d.push(buf.subarray(off, off + n));
      off += n;
    }
    d.end();
  })), { numRuns: RUNS, seed: SEED });
  // And valid input round-trips exactly.
  fc.assert(fc.property(fc.array(fc.uint8Array({ maxLength: 100 }), { maxLength: 8 }), (recs) => {
    const out = decodeRecordIO(Buffer.concat(recs.flatMap((r) => encodeRecord(Buffer.from(r)))));
    return out.length === recs.length && out.every((b, i) => b.equals(Buffer.from(recs[i]!)));
  }), { numRuns: RUNS, seed: SEED });
  t.pass();
});
