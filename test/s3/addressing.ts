import t from 'tap';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { addressingFor, defaultEndpoint, pathStyleFor, encodeKey, endpointFromEnv, parseEndpoint, regionFromEnv } from '../../src/s3/addressing.js';
import { InvalidArgumentError } from '../../src/errors.js';

t.test('keys are encoded once, per segment, RFC 3986', async (t) => {
  t.equal(encodeKey('a/b c/d+e.txt'), 'a/b%20c/d%2Be.txt');
  t.equal(encodeKey("x!'()*~-_.y"), 'x%21%27%28%29%2A~-_.y');
  t.equal(encodeKey('ünï/日本'), '%C3%BCn%C3%AF/%E6%97%A5%E6%9C%AC');
  t.equal(encodeKey('100%/a//b/'), '100%25/a//b/');
});

t.test('path-style and virtual-hosted addressing', async (t) => {
  const p = addressingFor('my-bucket', 'http://127.0.0.1:9000', 'us-east-1', true);
  t.equal(p.origin, 'http://127.0.0.1:9000');
  t.equal(p.pathFor('a b/c'), '/my-bucket/a%20b/c');
  const v = addressingFor('my-bucket', undefined, 'eu-west-1', false);
  t.equal(v.origin, 'https://my-bucket.s3.eu-west-1.amazonaws.com');
  t.equal(v.pathFor('a b/c'), '/a%20b/c');
  t.equal(v.endpoint, 'https://s3.eu-west-1.amazonaws.com');
  const dotted = addressingFor('my.bucket', undefined, 'us-east-1', false);
  t.equal(dotted.origin, 'https://s3.us-east-1.amazonaws.com', 'dots force path-style (TLS wildcard)');
  t.equal(dotted.pathFor('k'), '/my.bucket/k');
  t.equal(defaultEndpoint('cn-north-1'), 'https://s3.cn-north-1.amazonaws.com.cn');
  t.equal(addressingFor('bkt', 'http://h:1/base/', 'r', true).pathFor('k'), '/base/bkt/k', 'endpoint base path kept');
  t.equal(addressingFor('bkt', 'http://minio.local:9000', 'r', 'virtual').origin, 'http://bkt.minio.local:9000', 'virtual-hosted on a custom endpoint when asked');
  for (const ep of ['http://127.0.0.1:9000', 'http://[::1]:9000', 'http://localhost:9000']) {
    t.equal(addressingFor('bkt', ep, 'r', false).pathFor('k'), '/bkt/k', `${ep} is path-style`);
  }
});

t.test('the data path encodes keys exactly as the SDK does', async (t) => {
  let captured: { path: string; hostname: string } | undefined;
  const sdk = new S3Client({
    region: 'us-east-1', endpoint: 'http://127.0.0.1:9', forcePathStyle: true,
    credentials: { accessKeyId: 'a', secretAccessKey: 'b' }, maxAttempts: 1,
    requestHandler: { handle: async (req: { path: string; hostname: string }) => { captured = req; throw new Error('captured'); } } as never,
  });
  t.teardown(() => sdk.destroy());
  const a = addressingFor('bkt', 'http://127.0.0.1:9', 'us-east-1', true);
  for (const key of ['plain.bin', 'with space/ü+日本 %20 (1)!.bin', "x'*~=&;,$@:.bin", 'a//b']) {
    await sdk.send(new GetObjectCommand({ Bucket: 'bkt', Key: key })).catch(() => undefined);
    t.equal(a.pathFor(key), captured?.path, key);
  }
});

t.test('endpoint and region from the environment; bad endpoints rejected', async (t) => {
  t.equal(endpointFromEnv({ AWS_ENDPOINT_URL_S3: 'http://a', AWS_ENDPOINT_URL: 'http://b' }), 'http://a');
  t.equal(endpointFromEnv({ AWS_ENDPOINT_URL: 'http://b' }), 'http://b');
  t.equal(endpointFromEnv({}), undefined);
  t.equal(regionFromEnv({ AWS_REGION: 'r1', AWS_DEFAULT_REGION: 'r2' }), 'r1');
  t.equal(regionFromEnv({ AWS_DEFAULT_REGION: 'r2' }), 'r2');
  t.equal(regionFromEnv({}), undefined);
  t.throws(() => parseEndpoint('127.0.0.1:9000x'), InvalidArgumentError);
  t.throws(() => parseEndpoint('nope'), InvalidArgumentError);
});

// Issue 45: one addressing decision for the SDK client and the data path.
t.test('issue 45: custom endpoints are path-style by default, AWS S3 virtual-hosted', async (t) => {
  const cases: Array<[string | undefined, boolean | 'auto' | 'path' | 'virtual', boolean, string]> = [
    ['http://localhost:4568', false, true, 'localhost'],
    ['http://127.0.0.1:9000', false, true, 'IPv4'],
    ['http://[::1]:9000', 'virtual', true, 'IPv6, even when virtual-hosted is asked'],
    ['http://minio:9000', false, true, 'a single-label host (compose service)'],
    ['https://storage.example.com', false, true, 'a custom S3-compatible store'],
    ['https://storage.example.com', 'virtual', false, 'a custom store with --virtual-hosted'],
    ['https://s3.eu-west-1.amazonaws.com', false, false, 'AWS S3 named as the endpoint'],
    ['https://bucket.vpce-1a2b.s3.us-east-1.vpce.amazonaws.com', false, false, 'an AWS VPC endpoint'],
    [undefined, false, false, 'AWS S3 by default'],
    [undefined, true, true, '--path-style on AWS S3'],
  ];
  for (const [ep, style, path, what] of cases) {
    t.equal(pathStyleFor('bkt', ep, style), path, `${what}: ${path ? 'path-style' : 'virtual-hosted'}`);
    t.equal(addressingFor('bkt', ep, 'us-east-1', style).virtualHosted, !path, `${what}: the data path agrees`);
  }
  t.equal(pathStyleFor('my.bucket', 'https://s3.us-east-1.amazonaws.com', false), true, 'dotted bucket names stay path-style');
});
