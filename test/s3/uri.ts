import t from 'tap';
import { parseS3Uri } from '../../src/s3/uri.js';
import { BadUriError } from '../../src/errors.js';

t.test('valid URIs', async (t) => {
  t.same(parseS3Uri('s3://bucket'), { bucket: 'bucket', prefix: '' });
  t.same(parseS3Uri('s3://bucket/'), { bucket: 'bucket', prefix: '' });
  t.same(parseS3Uri('s3://my-bucket.v2/train/'), { bucket: 'my-bucket.v2', prefix: 'train/' });
  t.same(parseS3Uri('s3://b12/a b/ü+%20/x'), { bucket: 'b12', prefix: 'a b/ü+%20/x' }, 'prefix kept byte for byte');
  t.same(parseS3Uri('S3://Legacy_Bucket/p'), { bucket: 'Legacy_Bucket', prefix: 'p' }, 'legacy names and scheme case');
  t.same(parseS3Uri('s3://bkt//double'), { bucket: 'bkt', prefix: '/double' });
});

t.test('invalid URIs give BadUriError with a reason and the fix', async (t) => {
  const cases: [string, RegExp][] = [
    ['', /empty/],
    ['bucket/prefix', /must start with s3:\/\//],
    ['https://bucket/x', /must start with s3:\/\//],
    ['s3://', /bucket name is missing/],
    ['s3:///prefix', /bucket name is missing/],
    ['s3://ab/x', /not a valid bucket name/],
    ['s3://bad bucket/x', /not a valid bucket name/],
    ['s3://.bucket/x', /dots/],
    ['s3://bu..cket/x', /dots/],
  ];
  for (const [uri, why] of cases) {
    const err = (() => { try { parseS3Uri(uri); return undefined; } catch (e) { return e; } })();
    t.type(err, BadUriError, JSON.stringify(uri));
    t.match((err as BadUriError).message, why);
    t.match((err as BadUriError).oneLine(), /Use the form s3:\/\/bucket\/prefix\//);
  }
});
