import t from 'tap';
import { exhausted, judgeError, judgeReply, TransientError, type FailureContext } from '../../src/s3/s3-errors.js';
import {
  AbortedError, AccessDeniedError, BadRangeReplyError, EndpointUnreachableError, InvalidCredentialsError, MissingCredentialsError,
  NoSuchBucketError, NoSuchKeyError, ObjectChangedError, RetriesExhaustedError, S3Error, TimeoutError,
} from '../../src/errors.js';

const get: FailureContext = { operation: 'get', bucket: 'bkt', key: 'a/b.bin', endpoint: 'http://127.0.0.1:1', etag: '"e"' };
const list: FailureContext = { operation: 'list', bucket: 'bkt', key: 'a/', endpoint: 'http://127.0.0.1:1' };

t.test('retryable replies and their reasons', async (t) => {
  const retry = (status: number, code?: string) => { const v = judgeReply(status, code, undefined, get); return 'retry' in v ? v.retry : 'fail'; };
  t.equal(retry(503, 'SlowDown'), 'throttled');
  t.equal(retry(503), 'throttled');
  t.equal(retry(429), 'throttled');
  t.equal(retry(400, 'ThrottlingException'), 'throttled');
  t.equal(retry(500, 'InternalError'), 'server_error');
  t.equal(retry(502), 'server_error');
  t.equal(retry(503, 'ServiceUnavailable'), 'server_error');
  t.equal(retry(504), 'server_error');
  t.equal(retry(400, 'RequestTimeout'), 'timeout');
  t.equal(retry(403, 'AccessDenied'), 'fail');
});

t.test('final replies become typed errors naming the bucket and key', async (t) => {
  const fail = (status: number, code: string | undefined, ctx = get) => { const v = judgeReply(status, code, 'msg', ctx); if ('fail' in v) return v.fail; throw new Error('retried'); };
  t.type(fail(404, 'NoSuchBucket'), NoSuchBucketError);
  t.type(fail(404, 'NoSuchKey'), NoSuchKeyError);
  t.type(fail(404, undefined), NoSuchKeyError, 'HEAD 404 on a key');
  t.type(fail(404, 'NotFound', list), NoSuchBucketError, '404 on a listing');
  t.type(fail(403, 'AccessDenied'), AccessDeniedError);
  t.type(fail(403, undefined), AccessDeniedError, 'HEAD 403');
  for (const code of ['InvalidAccessKeyId', 'SignatureDoesNotMatch', 'InvalidToken']) {
    const e = fail(403, code);
    t.type(e, InvalidCredentialsError, code);
    t.match(e.message, new RegExp(`s3://bkt/a/b\\.bin \\(${code}: msg\\)`));
  }
  // Expired credentials are renewed once (src/s3/credentials.ts); the error is for when that fails.
  for (const code of ['ExpiredToken', 'TokenRefreshRequired']) {
    const v = judgeReply(400, code, 'msg', get);
    if (!('renew' in v)) { t.fail(`${code}: not renewed`); continue; }
    t.type(v.renew, InvalidCredentialsError, code);
    t.match(v.renew.message, new RegExp(`s3://bkt/a/b\\.bin \\(${code}: msg\\)`));
  }
  // A HEAD reply has no body: a bare 400/403 may be expired credentials, renewed once too.
  const head = { ...get, operation: 'head' as const };
  for (const status of [400, 403]) {
    const v = judgeReply(status, undefined, undefined, head);
    t.ok('renew' in v, `HEAD ${status} without a code: renew once`);
  }
  t.ok('fail' in judgeReply(404, undefined, undefined, head), 'HEAD 404: final');
  t.type(fail(412, 'PreconditionFailed'), ObjectChangedError);
  t.type(fail(416, 'InvalidRange'), BadRangeReplyError);
  t.match(fail(301, 'PermanentRedirect').oneLine(), /another region.*--region/);
  t.match(fail(403, 'RequestTimeTooSkewed').oneLine(), /clock/);
  const other = fail(400, 'InvalidArgument');
  t.type(other, S3Error);
  t.match(other.message, /S3 get of s3:\/\/bkt\/a\/b\.bin failed: 400 InvalidArgument \(msg\)/);
  t.match(fail(403, 'AccessDenied').message, 's3://bkt/a/b.bin');
});

t.test('thrown errors: SDK exceptions, sockets, ours', async (t) => {
  const sdkErr = (name: string, status: number) => Object.assign(new Error(name), { name, $metadata: { httpStatusCode: status } });
  const v1 = judgeError(sdkErr('NoSuchBucket', 404), list);
  t.type('fail' in v1 && v1.fail, NoSuchBucketError);
  const v2 = judgeError(sdkErr('SlowDown', 503), list);
  t.equal('retry' in v2 && v2.retry, 'throttled');
  const v3 = judgeError(Object.assign(new Error('x'), { name: 'CredentialsProviderError' }), list);
  t.type('fail' in v3 && v3.fail, MissingCredentialsError);
  const sock = (code: string) => Object.assign(new Error(code), { code });
  t.same(Object.keys(judgeError(sock('ECONNREFUSED'), get)), ['retry', 'cause']);
  t.equal((judgeError(sock('ECONNREFUSED'), get) as { retry: string }).retry, 'unreachable');
  t.equal((judgeError(sock('ENOTFOUND'), get) as { retry: string }).retry, 'unreachable');
  t.equal((judgeError(sock('ECONNRESET'), get) as { retry: string }).retry, 'reset');
  t.equal((judgeError(Object.assign(new Error('wrapped'), { cause: sock('EPIPE') }), get) as { retry: string }).retry, 'reset', 'cause chain');
  t.equal((judgeError(new AggregateError([sock('ECONNREFUSED')]), get) as { retry: string }).retry, 'unreachable', 'happy eyeballs');
  t.equal((judgeError(sock('UND_ERR_HEADERS_TIMEOUT'), get) as { retry: string }).retry, 'timeout');
  t.equal((judgeError(new TransientError('short_body', 'x'), get) as { retry: string }).retry, 'short_body');
  const ours = new AbortedError();
  t.equal((judgeError(ours, get) as { fail: unknown }).fail, ours, 'SluiceErrors pass through');
  t.type((judgeError(new Error('weird'), get) as { fail: unknown }).fail, S3Error);
});

t.test('exhausted retries', async (t) => {
  t.type(exhausted('unreachable', 5, undefined, get, 1000), EndpointUnreachableError);
  t.match(exhausted('unreachable', 5, undefined, get, 1000).message, 'http://127.0.0.1:1');
  const to = exhausted('timeout', 3, undefined, get, 1000);
  t.type(to, TimeoutError);
  t.match(to.oneLine(), /made no progress for 1000 ms, 3 times.*--request-timeout/);
  const th = exhausted('throttled', 10, new Error('503 SlowDown'), get, 1000);
  t.type(th, RetriesExhaustedError);
  t.match(th.oneLine(), /failed 10 times \(last: throttled: 503 SlowDown\).*lower --max-connections/);
});

t.test('a GET pinned to a version: NoSuchVersion is a missing key, AccessDenied names s3:GetObjectVersion', async (t) => {
  const pinned: FailureContext = { ...get, versionId: 'v1' };
  const gone = judgeReply(404, 'NoSuchVersion', 'The specified version does not exist.', pinned);
  t.type('fail' in gone && gone.fail, NoSuchKeyError, 'ESTALE in FastFile, as a deleted key');
  t.match('fail' in gone && gone.fail.oneLine(), /s3:\/\/bkt\/a\/b\.bin does not exist.*version v1 recorded in the snapshot was deleted/);
  const denied = judgeReply(403, 'AccessDenied', 'Access Denied', pinned);
  t.match('fail' in denied && denied.fail.oneLine(), /access denied.*s3:GetObjectVersion/);
  const plain = judgeReply(403, 'AccessDenied', 'Access Denied', get);
  t.notMatch('fail' in plain && plain.fail.oneLine(), /GetObjectVersion/, 'unpinned GETs keep the usual hint');
});
