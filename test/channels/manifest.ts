import t from 'tap';
import { ManifestError } from '../../src/errors.js';
import { parseAugmentedManifest, parseManifestFile } from '../../src/channels/manifest.js';

t.test('ManifestFile in SageMaker\'s shape: prefix + entries, with lines', async (t) => {
  const text = '[ {"prefix": "s3://customer_bucket/some/prefix/"},\n"relative/path/to/custdata-1",\n"relative/path/custdata-2",\n\n  "x y+z%.bin"\n]\n';
  t.same(parseManifestFile(text), [
    { bucket: 'customer_bucket', key: 'some/prefix/relative/path/to/custdata-1', rel: 'relative/path/to/custdata-1', line: 2 },
    { bucket: 'customer_bucket', key: 'some/prefix/relative/path/custdata-2', rel: 'relative/path/custdata-2', line: 3 },
    { bucket: 'customer_bucket', key: 'some/prefix/x y+z%.bin', rel: 'x y+z%.bin', line: 5 },
  ]);
  t.same(parseManifestFile('[{"prefix":"s3://bkt/p-"},"a","b"]').map((e) => e.key), ['p-a', 'p-b'], 'concatenated as text');
  const multi = '[\n  {\n    "prefix": "s3://bkt/p/"\n  },\n  "k1", "k2",\n  "k3"\n]';
  t.same(parseManifestFile(multi).map((e) => e.line), [5, 5, 6]);
});

t.test('malformed ManifestFiles are reported with their line', async (t) => {
  const cases: [string, number, RegExp][] = [
    ['{"prefix": "s3://bkt/p/"}', 1, /must be a JSON list/],
    ['[]', 1, /empty list/],
    ['[\n"a",\n"b"\n]', 2, /first element must be \{"prefix"/],
    ['[\n{"prefix": "http://b/p/"}\n]', 2, /"prefix": bad S3 URI/],
    ['[{"prefix": "s3://bkt/p/"},\n"a",\n42,\n"c"]', 3, /expected a key relative to the prefix/],
    ['[{"prefix": "s3://bkt/p/"},\n"a",\n"b\n]', 3, /not valid JSON|not closed/],
    ['[{"prefix": "s3://bkt/p/"},\n"a",\n"b",\n]', 4, /expected a list element, found "\]"/],
    ['[{"prefix": "s3://bkt/p/"},\n"a"\n"b"]', 3, /expected , or \] after an element/],
    ['[{"prefix": "s3://bkt/p/"},\n"a"', 2, /not closed with \]/],
    ['[{"prefix": "s3://bkt/p/"},\n""]', 2, /empty key/],
    ['[{"prefix": "s3://bkt/p/"}]\n\n"x"', 3, /unexpected text after the closing \]/],
  ];
  for (const [text, line, re] of cases) {
    try {
      parseManifestFile(text);
      t.fail(`no error for ${JSON.stringify(text)}`);
    } catch (err) {
      t.ok(err instanceof ManifestError, 'a ManifestError');
      t.equal((err as ManifestError).line, line, `line of ${JSON.stringify(text)}`);
      t.match((err as Error).message, new RegExp(`^manifest line ${line}: `));
      t.match((err as Error).message, re);
    }
  }
});

t.test('AugmentedManifestFile: attributes in AttributeNames order, -ref as S3 locations', async (t) => {
  const text = [
    '{"source-ref": "s3://bkt/img/1.jpg", "class": 1, "extra": "ignored"}',
    '',
    '{"class": {"label": "cat"}, "source-ref": "s3://other/img/2.jpg"}',
  ].join('\n') + '\n';
  const recs = parseAugmentedManifest(text, ['source-ref', 'class']);
  t.equal(recs.length, 2);
  t.same(recs[0], { line: 1, attributes: [{ kind: 'ref', name: 'source-ref', bucket: 'bkt', key: 'img/1.jpg' }, { kind: 'inline', name: 'class', data: Buffer.from('1') }] });
  t.equal(recs[1]!.line, 3);
  t.same(recs[1]!.attributes[0], { kind: 'ref', name: 'source-ref', bucket: 'other', key: 'img/2.jpg' });
  t.equal((recs[1]!.attributes[1] as { data: Buffer }).data.toString(), '{"label":"cat"}');
  t.same(parseAugmentedManifest(text, ['class']).map((r) => r.attributes.length), [1, 1]);
});

t.test('malformed AugmentedManifestFiles are reported with their line', async (t) => {
  const ok = '{"source-ref": "s3://bkt/k", "class": 0}';
  const cases: [string, number, RegExp][] = [
    [`${ok}\n{"source-ref": "s3://bkt/k"}`, 2, /attribute "class" is missing/],
    [`${ok}\n${ok}\n{"source-ref": 5, "class": 1}`, 3, /attribute "source-ref" must be an s3:\/\/ URI string/],
    [`${ok}\n{"source-ref": "/tmp/x", "class": 1}`, 2, /attribute "source-ref": bad S3 URI/],
    [`${ok}\n{not json}`, 2, /not valid JSON/],
    [`${ok}\n[1, 2]`, 2, /must be a JSON object/],
    ['\n\n', 1, /no records/],
  ];
  for (const [text, line, re] of cases) {
    try {
      parseAugmentedManifest(text, ['source-ref', 'class']);
      t.fail(`no error for ${JSON.stringify(text)}`);
    } catch (err) {
      t.ok(err instanceof ManifestError);
      t.equal((err as ManifestError).line, line);
      t.match((err as Error).message, re);
    }
  }
});
