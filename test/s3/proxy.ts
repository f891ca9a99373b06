/**
 * Issue 45 (2): HTTP_PROXY / HTTPS_PROXY / NO_PROXY on every request path.
 *  - The rules: which variable, NO_PROXY matching as curl has it (hosts, domain suffixes,
 *    `*`, ports, IPs, CIDR), loopback not exempt.
 *  - A client behind our forward proxy (test/helpers/forward-proxy.ts) in front of s3rver:
 *    listing, HEAD (SDK), ranged GETs (wire client) and streams (undici) go through it, in
 *    absolute form for http://, through CONNECT for https://; with NO_PROXY, none do.
 *  - `sluice mount` with HTTP_PROXY in its environment: the bytes read are the source's and
 *    the proxy saw the ranged GETs; with NO_PROXY=127.0.0.1 it saw nothing.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { ConfigError, InvalidArgumentError } from '../../src/errors.js';
import { seedDataset } from '../../src/local/dataset.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { bypassesProxy, proxyFor, proxySettingsFromEnv } from '../../src/s3/proxy.js';
import { createObjectClient } from '../../src/s3/s3-client.js';
import { startCli, waitExit } from '../helpers/cli.js';
import { startForwardProxy } from '../helpers/forward-proxy.js';
import { tempMountpoint } from '../helpers/fuse.js';
import { checkRangedAndStream } from '../helpers/read-object.js';
import { makeTestCa, tlsFront } from '../helpers/tls.js';
import '../helpers/exit-watch.js';
import type { Test } from '../helpers/tap.js';

const BUCKET = 'proxied';
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

t.test('which proxy, and NO_PROXY as curl matches it', async (t) => {
  const s = proxySettingsFromEnv({ HTTP_PROXY: 'http://up:1', http_proxy: 'low:3128', HTTPS_PROXY: 'http://sec:8080', NO_PROXY: '.example.com, internal,10.0.0.0/8 [::1]:9000 minio:9000 192.168.1.5' });
  t.equal(s.http?.href, 'http://low:3128/', 'lower case first; no scheme is http://');
  t.equal(s.https?.href, 'http://sec:8080/');
  t.equal(proxyFor('https://s3.us-east-1.amazonaws.com', s)?.host, 'sec:8080', 'https:// uses HTTPS_PROXY');
  t.equal(proxyFor('http://s3.amazonaws.com', s)?.host, 'low:3128', 'http:// uses http_proxy');
  t.equal(proxyFor('http://127.0.0.1:9000', s)?.host, 'low:3128', 'loopback is not exempt by default (curl, AWS CLI)');
  t.equal(proxyFor('http://localhost:9000', s)?.host, 'low:3128', 'nor is localhost');
  const cases: Array<[string, number, boolean]> = [
    ['example.com', 443, true], ['s3.example.com', 443, true], ['a.b.example.com', 80, true], ['notexample.com', 443, false],
    ['internal', 80, true], ['s3.internal', 80, true], ['internal.com', 80, false],
    ['10.1.2.3', 80, true], ['11.1.2.3', 80, false], ['[::1]', 9000, true], ['[::1]', 9001, false],
    ['minio', 9000, true], ['minio', 80, false], ['192.168.1.5', 4568, true], ['192.168.1.6', 4568, false],
    ['S3.EXAMPLE.COM', 443, true], ['example.com.', 443, true],
  ];
  for (const [host, port, want] of cases) t.equal(bypassesProxy(host, port, s), want, `NO_PROXY ${want ? 'exempts' : 'does not exempt'} ${host}:${port}`);
  t.equal(proxyFor('https://anything', proxySettingsFromEnv({ HTTPS_PROXY: 'http://p:1', no_proxy: '*' })), undefined, '* exempts everything');
  t.equal(proxyFor('https://x', proxySettingsFromEnv({ ALL_PROXY: 'http://all:1' }))?.host, 'all:1', 'ALL_PROXY as a fallback');
  t.equal(proxyFor('https://x', proxySettingsFromEnv({ HTTPS_PROXY: '' })), undefined, 'empty is unset');
  t.throws(() => proxySettingsFromEnv({ HTTPS_PROXY: 'socks5://p:1080' }), InvalidArgumentError, 'a SOCKS proxy is one line');
  t.throws(() => proxySettingsFromEnv({ https_proxy: 'http://[bad' }), /bad proxy in https_proxy/);
});

t.test('through a forward proxy to s3rver', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket(BUCKET);
  const objects = await seedDataset(s3, BUCKET, 'p/', { smallFiles: { count: 4, size: 20_000, folders: 1 }, largeFiles: { count: 1, size: 3 * 1024 * 1024 } });
  const large = objects.find((o) => o.size > 1024 * 1024)!;
  const base = { bucket: BUCKET, endpoint: s3.endpoint, region: 'us-east-1', pathStyle: true, credentials: s3.credentials, maxAttempts: 2 };

  /** Lists, HEADs, reads one large object by ranged GET and by stream; checks the bytes. */
  const exercise = async (t: Test, c: ReturnType<typeof createObjectClient>) => {
    const keys: string[] = [];
    for await (const o of c.list('p/')) keys.push(o.key);
    t.same(keys.sort(), objects.map((o) => o.key).sort(), 'listed');
    const info = await c.head(large.key);
    await checkRangedAndStream(t, c, large, info.etag);
  };

  t.test('http:// endpoint: absolute-form requests through the proxy', async (t) => {
    const proxy = await startForwardProxy();
    t.teardown(() => proxy.close());
    const c = createObjectClient({ ...base, proxies: proxySettingsFromEnv({ HTTP_PROXY: proxy.url }) });
    t.teardown(() => c.close());
    await exercise(t, c);
    const gets = proxy.requests.filter((r) => r.method === 'GET' && r.url.includes(encodeURI(large.key)) && r.range !== undefined);
    t.ok(proxy.requests.some((r) => r.method === 'GET' && /list-type=2/.test(r.url)), 'the listing went through the proxy');
    t.ok(proxy.requests.some((r) => r.method === 'HEAD'), 'HEAD went through the proxy');
    t.ok(gets.length >= 3, `ranged GETs went through the proxy (${gets.length})`);
    t.ok(proxy.requests.every((r) => r.url.startsWith(`${s3.endpoint}/`)), 'each in absolute form, to the endpoint');
    t.same(proxy.connects, [], 'no CONNECT for http://');
  });

  t.test('NO_PROXY exempts the endpoint: nothing through the proxy', async (t) => {
    const proxy = await startForwardProxy();
    t.teardown(() => proxy.close());
    for (const noProxy of ['127.0.0.1', '127.0.0.0/8', `127.0.0.1:${s3.port}`, '*']) {
      const c = createObjectClient({ ...base, proxies: proxySettingsFromEnv({ HTTP_PROXY: proxy.url, HTTPS_PROXY: proxy.url, NO_PROXY: noProxy }) });
      await exercise(t, c);
      await c.close();
    }
    t.same(proxy.requests, [], 'the proxy saw no request');
    t.same(proxy.connects, [], 'nor a CONNECT');
  });

  t.test('https:// endpoint: CONNECT tunnels, TLS end to end', async (t) => {
    const ca = makeTestCa();
    const front = await tlsFront(ca, s3.port);
    t.teardown(() => front.close());
    const proxy = await startForwardProxy();
    t.teardown(() => proxy.close());
    const c = createObjectClient({ ...base, endpoint: front.endpoint, ca: ca.caPem, proxies: proxySettingsFromEnv({ https_proxy: proxy.url }) });
    t.teardown(() => c.close());
    await exercise(t, c);
    const authority = new URL(front.endpoint).host;
    t.ok(proxy.connects.length >= 2, `CONNECTs for the SDK's and the data path's connections (${proxy.connects.length})`);
    t.ok(proxy.connects.every((x) => x === authority), `each to ${authority}`);
    t.same(proxy.requests, [], 'no plain request: the proxy saw only tunnels');
    t.equal(front.connections, proxy.connects.length, 'every TLS connection came through a tunnel');
  });

  t.test('a proxy that wants a password: one line; with it in the URL, it works', async (t) => {
    const auth = `Basic ${Buffer.from('u:p w').toString('base64')}`;
    const proxy = await startForwardProxy({ auth });
    t.teardown(() => proxy.close());
    const ca = makeTestCa();
    const front = await tlsFront(ca, s3.port);
    t.teardown(() => front.close());
    const refused = createObjectClient({ ...base, endpoint: front.endpoint, ca: ca.caPem, proxies: proxySettingsFromEnv({ HTTPS_PROXY: proxy.url }) });
    t.teardown(() => refused.close());
    const err = await refused.getRange(large.key, 0, 10, '"x"').then(() => undefined, (e: unknown) => e);
    t.ok(err instanceof ConfigError, `a typed error: ${String(err)}`);
    t.match((err as ConfigError).oneLine(), /asks for authentication to CONNECT .*407.*user and password in the proxy URL/);
    const withAuth = proxy.url.replace('http://', 'http://u:p%20w@');
    for (const env of [{ HTTPS_PROXY: withAuth }, { HTTP_PROXY: withAuth }]) {
      const c = createObjectClient({ ...base, ...(env.HTTPS_PROXY ? { endpoint: front.endpoint, ca: ca.caPem } : {}), proxies: proxySettingsFromEnv(env) });
      await exercise(t, c);
      await c.close();
    }
    t.ok(proxy.connects.length > 0 && proxy.requests.length > 0, 'both ways authenticated');
  });

  t.test('sluice mount behind HTTP_PROXY, and not through it with NO_PROXY', async (t) => {
    const env: NodeJS.ProcessEnv = {
      ...process.env, AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey,
      AWS_REGION: 'us-east-1', SLUICE_LOG_LEVEL: 'warn',
    };
    for (const k of ['AWS_PROFILE', 'AWS_SESSION_TOKEN', 'NO_PROXY', 'no_proxy', 'HTTP_PROXY', 'http_proxy', 'HTTPS_PROXY', 'https_proxy', 'ALL_PROXY', 'all_proxy']) delete env[k];
    const common = ['--endpoint', s3.endpoint, '--path-style', '--metrics-port', '0', '--cache-size', '16MiB', '--part-size', '1MiB', '--max-prefetch', '2MiB', '--max-attempts', '2'];
    for (const [how, extra] of [['HTTP_PROXY', {}], ['NO_PROXY', { NO_PROXY: '127.0.0.1' }]] as const) {
      const proxy = await startForwardProxy();
      const mnt = await tempMountpoint(t, 'proxy');
      const r = await startCli(['mount', `s3://${BUCKET}/p/`, mnt, ...common], { ...env, HTTP_PROXY: proxy.url, ...extra });
      try {
        for (const o of objects) t.equal(sha(await readFile(path.join(mnt, o.key.slice(2)))), o.sha256, `${how}: ${o.key} exact`);
      } finally {
        r.child.kill('SIGTERM');
        t.equal((await waitExit(r)).code, 0, `${how}: clean exit`);
        await proxy.close();
      }
      const gets = proxy.requests.filter((x) => x.method === 'GET' && x.range !== undefined);
      if (how === 'HTTP_PROXY') {
        t.ok(gets.length >= objects.length, `the proxy saw the ranged GETs (${gets.length})`);
        t.ok(proxy.requests.some((x) => /list-type=2/.test(x.url)), 'and the listing');
      } else {
        t.same(proxy.requests, [], 'NO_PROXY: the proxy saw nothing');
      }
    }
  });
});
