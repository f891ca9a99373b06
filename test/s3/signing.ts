/**
 * The data-path signer against AWS's published SigV4 example for S3 (GET Object with a
 * Range header, "Signature Calculations for the Authorization Header" in the S3 API
 * reference). s3rver does not check SigV4 signatures, so this vector is what proves them.
 */
import t from 'tap';
import { S3Client } from '@aws-sdk/client-s3';
import { createGetSigner, type GetSignerOptions } from '../../src/s3/signing.js';

const sdk = new S3Client({ region: 'us-east-1', credentials: { accessKeyId: 'x', secretAccessKey: 'y' } });
t.teardown(() => sdk.destroy());
const sha256 = sdk.config.sha256;
const credentials = { accessKeyId: 'AKIAIOSFODNN7EXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY' } as GetSignerOptions['credentials'];

t.test('matches the AWS example signature for GET /test.txt with Range', async (t) => {
  const sign = createGetSigner({ origin: 'https://examplebucket.s3.amazonaws.com', region: 'us-east-1', credentials, sha256 });
  const headers = await sign('/test.txt', {
    range: 'bytes=0-9',
    'x-amz-content-sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
  }, new Date('2013-05-24T00:00:00Z'));
  t.equal(headers['x-amz-date'], '20130524T000000Z');
  t.equal(headers.authorization,
    'AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, '
    + 'SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, '
    + 'Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41');
});

t.test('signs UNSIGNED-PAYLOAD, If-Match and a session token by default', async (t) => {
  const sign = createGetSigner({
    origin: 'http://127.0.0.1:9000', region: 'eu-west-1', sha256,
    credentials: { ...(credentials as object), sessionToken: 'TOKEN' } as GetSignerOptions['credentials'],
  });
  const headers = await sign('/bucket/a%20b', { range: 'bytes=0-0', 'if-match': '"abc"' });
  t.equal(headers['x-amz-content-sha256'], 'UNSIGNED-PAYLOAD');
  t.equal(headers['x-amz-security-token'], 'TOKEN');
  t.equal(headers.host, '127.0.0.1:9000');
  t.match(headers.authorization, /Credential=AKIAIOSFODNN7EXAMPLE\/\d{8}\/eu-west-1\/s3\/aws4_request/);
  t.match(headers.authorization, /SignedHeaders=host;if-match;range;x-amz-content-sha256;x-amz-date;x-amz-security-token,/);
});

t.test('our signer signs exactly as the SDK\'s (HEAD, listing queries, session tokens, s3express)', async (t) => {
  const { SignatureV4 } = await import('@smithy/signature-v4');
  const date = new Date('2026-12-07T19:08:41Z');
  const cases: Array<{ method: 'GET' | 'HEAD'; path: string; query: Record<string, string>; headers: Record<string, string>; token?: string }> = [
    { method: 'HEAD', path: '/bucket/a%20b/c%2Bd', query: {}, headers: {} },
    { method: 'HEAD', path: '/bucket/k', query: { versionId: 'v+1/=' }, headers: { 'x-amz-request-payer': 'requester' }, token: 'TOK' },
    { method: 'GET', path: '/bucket/', query: { 'list-type': '2', prefix: 'd/é x+y!*\'()', delimiter: '/', 'encoding-type': 'url', 'continuation-token': 'a+b/c=', 'max-keys': '1' }, headers: { 'x-amz-expected-bucket-owner': '123456789012' } },
    { method: 'GET', path: '/', query: { 'list-type': '2', prefix: '', 'start-after': 'k 1' }, headers: { range: 'bytes=0-9', 'if-match': '"e"' }, token: 'T2' },
  ];
  for (const c of cases) {
    const creds = { ...(credentials as { accessKeyId: string; secretAccessKey: string }), ...(c.token ? { sessionToken: c.token } : {}) };
    const ours = await createGetSigner({ origin: 'http://127.0.0.1:9000', region: 'eu-west-1', credentials: creds })(c.path, c.headers, date, c.query, c.method);
    const sdkSigner = new SignatureV4({ service: 's3', region: 'eu-west-1', credentials: creds, sha256, uriEscapePath: false, applyChecksum: false });
    const theirs = await sdkSigner.sign({ method: c.method, protocol: 'http:', hostname: '127.0.0.1', port: 9000, path: c.path, query: c.query,
      headers: { host: '127.0.0.1:9000', 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', ...c.headers } } as never, { signingDate: date }) as unknown as { headers: Record<string, string> };
    t.equal(ours.authorization, theirs.headers.authorization, `${c.method} ${c.path} ${JSON.stringify(c.query)}`);
    t.equal(ours['x-amz-security-token'], theirs.headers['x-amz-security-token']);
  }
});
