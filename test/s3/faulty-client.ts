import t from 'tap';
import { FaultyClient } from '../../src/s3/faulty-client.js';
import { TimeoutError, NoSuchKeyError } from '../../src/errors.js';
import { FakeObjectClient } from '../helpers/fake-client.js';

t.test('injects queued faults per operation, then passes through', async (t) => {
  const fake = new FakeObjectClient('bkt');
  const etag = fake.put('a', Buffer.from('0123456789'));
  const c = new FaultyClient(fake).failNext('getRange', 2, () => new TimeoutError('injected')).failNext('head', 1, () => new NoSuchKeyError('bkt', 'a'));
  t.equal(c.bucket, 'bkt');
  await t.rejects(c.getRange('a', 0, 3, etag), TimeoutError);
  await t.rejects(c.getRange('a', 0, 3, etag), TimeoutError);
  t.equal((await c.getRange('a', 0, 3, etag)).toString(), '012');
  await t.rejects(c.head('a'), NoSuchKeyError);
  t.equal((await c.head('a')).size, 10);
  t.same(c.calls, { list: 0, head: 2, getRange: 3, getStream: 0 });
  c.failNext('list', 1, () => new TimeoutError('x'));
  await t.rejects((async () => { for await (const _ of c.list('')) { /* drain */ } })(), TimeoutError);
  const keys: string[] = [];
  for await (const o of c.list('')) keys.push(o.key);
  t.same(keys, ['a']);
  c.failNext('getRange', 5, () => new TimeoutError('x'));
  c.heal();
  t.equal((await c.getRange('a', 0, 1, etag)).toString(), '0', 'healed');
  await c.close();
});

t.test('a getStream fault can strike mid-stream', async (t) => {
  const fake = new FakeObjectClient('bkt');
  const etag = fake.put('a', Buffer.from('0123456789'));
  const c = new FaultyClient(fake).failNext('getStream', 1, () => new TimeoutError('mid'), 4);
  const got: Buffer[] = [];
  await t.rejects((async () => { for await (const b of c.getStream('a', etag, { size: 10 })) got.push(b); })(), TimeoutError);
  t.equal(Buffer.concat(got).toString(), '0123', 'the bytes before the fault');
  const all: Buffer[] = [];
  for await (const b of c.getStream('a', etag, { size: 10 })) all.push(b);
  t.equal(Buffer.concat(all).toString(), '0123456789');
});
