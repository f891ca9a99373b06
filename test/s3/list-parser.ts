/**
 * Our ListObjectsV2 reply parser (src/s3/list-parser.ts): what S3 sends is read exactly
 * (URL-encoded keys, CommonPrefixes, IsTruncated, NextContinuationToken, entities), and a
 * reply that is not well-formed XML or not a listing fails with MalformedReplyError. The
 * last test pages through a truncated listing served by s3rver through the real client.
 */
import t from 'tap';
import { MalformedReplyError } from '../../src/errors.js';
import { parseListObjectsV2, parseXml } from '../../src/s3/list-parser.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { S3ObjectClient } from '../../src/s3/s3-client.js';

const page = (body: string, head = '<?xml version="1.0" encoding="UTF-8"?>\n') =>
  `${head}<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">${body}</ListBucketResult>`;
const item = (key: string, size = '5') => `<Contents><Key>${key}</Key><LastModified>2026-01-02T03:04:05.000Z</LastModified><ETag>&quot;abc&quot;</ETag><Size>${size}</Size><StorageClass>STANDARD</StorageClass></Contents>`;

t.test('a page: objects, prefixes, truncation and token, entities decoded', async (t) => {
  const p = parseListObjectsV2(page(`<Name>b</Name><Prefix>d/</Prefix><KeyCount>3</KeyCount><MaxKeys>1000</MaxKeys><Delimiter>/</Delimiter><IsTruncated>true</IsTruncated>${item('d/a&amp;b')}${item('d/c', '0')}<CommonPrefixes><Prefix>d/sub/</Prefix></CommonPrefixes><NextContinuationToken>tok+/=</NextContinuationToken>`));
  t.same(p.objects.map((o) => [o.key, o.size, o.etag, o.storageClass, o.lastModified.toISOString()]), [
    ['d/a&b', 5, '"abc"', 'STANDARD', '2026-01-02T03:04:05.000Z'], ['d/c', 0, '"abc"', 'STANDARD', '2026-01-02T03:04:05.000Z']]);
  t.same(p.prefixes, ['d/sub/']);
  t.equal(p.truncated, true);
  t.equal(p.nextToken, 'tok+/=');
  const last = parseListObjectsV2(page(`<IsTruncated>false</IsTruncated>${item('x')}<NextContinuationToken>ignored</NextContinuationToken>`));
  t.equal(last.truncated, false);
  t.equal(last.nextToken, undefined, 'no next page when not truncated');
});

t.test('encoding-type=url: keys and prefixes decoded as S3 encodes them; not decoded without it', async (t) => {
  const p = parseListObjectsV2(page(`<EncodingType>url</EncodingType><IsTruncated>false</IsTruncated>${item('d/a+b%2Bc%25%0A%C3%A9')}<CommonPrefixes><Prefix>d/x%20y/</Prefix></CommonPrefixes>`));
  t.equal(p.objects[0]!.key, 'd/a b+c%\né');
  t.same(p.prefixes, ['d/x y/']);
  const raw = parseListObjectsV2(page(`<IsTruncated>false</IsTruncated>${item('d/a+b%2B')}`));
  t.equal(raw.objects[0]!.key, 'd/a+b%2B', 'a server that ignores encoding-type: keys as sent');
  t.throws(() => parseListObjectsV2(page(`<EncodingType>url</EncodingType><IsTruncated>false</IsTruncated>${item('d/%E0%A4')}`)), MalformedReplyError, 'broken URL encoding');
});

t.test('CDATA, comments and numeric references', async (t) => {
  const p = parseListObjectsV2(page(`<!-- c --><IsTruncated>false</IsTruncated>${item('<![CDATA[a<b]]>&#x41;&#66;')}`));
  t.equal(p.objects[0]!.key, 'a<bAB');
});

t.test('malformed XML and non-listings fail with MalformedReplyError', async (t) => {
  const cases: Record<string, string> = {
    empty: '',
    'cut short': page(`<IsTruncated>false</IsTruncated>${item('a')}`).slice(0, -10),
    'mismatched tags': page('<IsTruncated>false</Truncated>'),
    'unknown entity': page(`<IsTruncated>false</IsTruncated>${item('a&nbsp;b')}`),
    'bare ampersand': page(`<IsTruncated>false</IsTruncated>${item('a & b')}`),
    doctype: `<!DOCTYPE x [<!ENTITY e "boom">]>${page('<IsTruncated>false</IsTruncated>')}`,
    'text after the root': `${page('<IsTruncated>false</IsTruncated>')}junk`,
    'two roots': `${page('<IsTruncated>false</IsTruncated>')}<a/>`,
    'control character': page(`<IsTruncated>false</IsTruncated>${item('a\u0001b')}`),
    'error body': '<?xml version="1.0"?><Error><Code>AccessDenied</Code></Error>',
    'no IsTruncated': page(item('a')),
    'IsTruncated not a boolean': page('<IsTruncated>yes</IsTruncated>'),
    'no Key': page('<IsTruncated>false</IsTruncated><Contents><Size>1</Size></Contents>'),
    'size not a number': page(`<IsTruncated>false</IsTruncated>${item('a', '-1')}`),
    'size too large': page(`<IsTruncated>false</IsTruncated>${item('a', '99999999999999999')}`),
    'bad date': page('<IsTruncated>false</IsTruncated><Contents><Key>a</Key><Size>1</Size><LastModified>never</LastModified></Contents>'),
    'two keys in one entry': page('<IsTruncated>false</IsTruncated><Contents><Key>a</Key><Key>b</Key><Size>1</Size></Contents>'),
    'unknown encoding': page('<EncodingType>base64</EncodingType><IsTruncated>false</IsTruncated>'),
    'unquoted attribute': '<ListBucketResult a=b><IsTruncated>false</IsTruncated></ListBucketResult>',
  };
  for (const [what, xml] of Object.entries(cases)) {
    t.throws(() => parseListObjectsV2(xml), MalformedReplyError, what);
  }
  t.equal(parseXml('<a x="1"><b/>t</a>').children[0]!.name, 'b', 'a self-closing child');
});

t.test('pagination through the real client: every key once, in order, across truncated pages', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket('pages');
  const keys = Array.from({ length: 25 }, (_, i) => `p/k ${String(i).padStart(2, '0')}+&é`);
  for (const k of keys) await s3.putObject('pages', k, Buffer.from(k));
  const client = new S3ObjectClient({ bucket: 'pages', endpoint: s3.endpoint, region: 'us-east-1', pathStyle: true, credentials: s3.credentials, listConcurrency: 1 });
  t.teardown(() => client.close());
  const seen: string[] = [];
  let pages = 0;
  // max-keys is the lister's; ten per page here forces three pages.
  for await (const o of (client as unknown as { listWith: (p: string, o: object, f: unknown) => AsyncIterable<{ key: string; size: number }> }).listWith('p/', {}, async (q: object, s?: AbortSignal) => {
    pages++;
    return (client as unknown as { listPage: (q: object, s?: AbortSignal) => Promise<unknown> }).listPage({ ...q, maxKeys: 10 }, s);
  })) { seen.push(o.key); t.equal(o.size, Buffer.byteLength(o.key)); }
  t.same(seen, [...keys].sort());
  t.ok(pages >= 3, `${pages} pages`);
});
