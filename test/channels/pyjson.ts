/**
 * pyjson against Python itself: json.loads, json.dumps (the toolkit's compact sorted form
 * and the default form) and str(), over documented cases and generated JSON values.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import t from 'tap';
import { dumps, dumpsCompact, floatRepr, parse, PyJsonError, str } from '../../src/channels/pyjson.js';

const python3 = (process.env.PATH ?? '/usr/bin').split(':').map((d) => path.join(d, 'python3')).find((p) => existsSync(p));
/** Generated values per run: enough to cover the number and string shapes, quick in one Python process. */
const GENERATED = 400;

const PY = `
import json, sys
out = []
for line in sys.stdin:
    v = json.loads(json.loads(line))
    out.append([json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=True), json.dumps(v), str(v)])
print(json.dumps(out))
`;

t.test('known cases', async (t) => {
  t.equal(dumpsCompact(parse('{"b": [1, 2.50], "a": "x"}')), '{"a":"x","b":[1,2.5]}');
  t.equal(dumps(parse('{"b": [1, 2.50], "a": "x"}')), '{"b": [1, 2.5], "a": "x"}');
  t.equal(str(parse('[1.0, "it\'s", null, true]')), '[1.0, "it\'s", None, True]');
  t.equal(str(parse('12345678901234567890123')), '12345678901234567890123', 'ints keep every digit');
  for (const [x, want] of [[1e-5, '1e-05'], [0.0001, '0.0001'], [1e16, '1e+16'], [1e15, '1000000000000000.0'], [-0, '-0.0'], [2.5e-7, '2.5e-07'], [1.7976931348623157e308, '1.7976931348623157e+308']] as const) {
    t.equal(floatRepr(x), want, `repr(${x})`);
  }
  t.equal(dumpsCompact(parse('"\\u00e9\\ud83d\\ude00\\u007f"')), '"\\u00e9\\ud83d\\ude00\\u007f"', 'ensure_ascii');
  t.equal(dumpsCompact(parse('[NaN, Infinity, -Infinity]')), '[NaN,Infinity,-Infinity]');
  for (const bad of ['', '{', '[1,]', '01', '"\\x"', '{"a" 1}', '1 2', "'a'"]) t.throws(() => parse(bad), PyJsonError, `rejects ${JSON.stringify(bad)}`);
});

t.test('generated values render as Python renders them', { skip: python3 ? false : 'python3 is not installed' }, async (t) => {
  const texts = fc.sample(fc.oneof(
    fc.jsonValue().map((v) => JSON.stringify(v)),
    fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => JSON.stringify(d)),
    fc.tuple(fc.integer({ min: -999, max: 999 }), fc.integer({ min: 0, max: 99 }), fc.integer({ min: -30, max: 30 })).map(([a, b, e]) => `${a}.${b}e${e}`),
    fc.string({ unit: 'binary' }).map((s) => JSON.stringify(s)),
  ), { numRuns: GENERATED, seed: 12 });
  const r = spawnSync(python3!, ['-c', PY], { input: texts.map((x) => JSON.stringify(x)).join('\n') + '\n', encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  t.equal(r.status, 0, r.stderr);
  const want = JSON.parse(r.stdout) as [string, string, string][];
  let same = 0;
  texts.forEach((text, i) => {
    const v = parse(text);
    const got: [string, string, string] = [dumpsCompact(v), dumps(v), str(v)];
    if (JSON.stringify(got) === JSON.stringify(want[i])) same++;
    else t.same(got, want[i], text);
  });
  t.equal(same, texts.length, `${same} of ${texts.length} values identical`);
});
