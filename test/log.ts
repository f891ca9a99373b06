import t from 'tap';
import { Writable } from 'node:stream';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { configureLogging, createLogger, log, REDACTED, scrub, setLogLevel, textLine } from '../src/log.js';

/** A logger writing into an array of parsed lines. */
function capture(level = 'trace') {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) { lines.push(...String(chunk).split('\n').filter(Boolean)); cb(); },
  });
  return { logger: createLogger(stream, level), lines };
}

const SECRET = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
const KEY_ID = 'AKIAIOSFODNN7EXAMPLE';
const TOKEN = 'IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQDexample';

t.test('writes JSON lines with level labels', async (t) => {
  const { logger, lines } = capture('info');
  logger.info({ channel: 'train', files: 3 }, 'listed');
  logger.debug('hidden');
  t.equal(lines.length, 1);
  const rec = JSON.parse(lines[0]!);
  t.equal(rec.level, 'info');
  t.equal(rec.msg, 'listed');
  t.equal(rec.channel, 'train');
  t.equal(rec.files, 3);
  t.equal(rec.name, 'sluice');
  t.match(rec.time, /^\d{4}-\d\d-\d\dT/);
});

t.test('credentials never appear, at any depth, in fields, messages or errors', async (t) => {
  const { logger, lines } = capture();
  logger.info({ credentials: { accessKeyId: KEY_ID, secretAccessKey: SECRET, sessionToken: TOKEN } }, 'creds object');
  logger.info({ req: { headers: { Authorization: `AWS4-HMAC-SHA256 Credential=${KEY_ID}/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=${'ab'.repeat(32)}`, 'X-Amz-Security-Token': TOKEN } } }, 'headers');
  logger.info({ url: `https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=${KEY_ID}%2F20260101&X-Amz-Signature=${'cd'.repeat(32)}&X-Amz-Security-Token=${encodeURIComponent(TOKEN)}&x-id=GetObject` }, 'presigned');
  logger.warn(`env AWS_SECRET_ACCESS_KEY=${SECRET} AWS_ACCESS_KEY_ID=${KEY_ID}`);
  logger.error(new Error(`request failed with secret ${SECRET} in it`));
  logger.info({ nested: [{ deeper: { aws_session_token: TOKEN } }] }, 'array');
  logger.info({ authorization: ['Bearer abc.def'] }, 'array header');
  logger.info('sent authorization: Bearer xyz.uvw and password=hunter2');
  const all = lines.join('\n');
  t.equal(lines.length, 8);
  for (const s of [SECRET, KEY_ID, TOKEN, encodeURIComponent(TOKEN), 'ab'.repeat(32), 'cd'.repeat(32), 'Bearer abc.def', 'xyz.uvw', 'hunter2']) {
    t.notOk(all.includes(s), `no ${s.slice(0, 12)}...`);
  }
  for (const l of lines) JSON.parse(l); // still valid JSON after scrubbing
  t.ok(all.includes(REDACTED));
  const presigned = JSON.parse(lines[2]!);
  t.match(presigned.url, /X-Amz-Algorithm=AWS4-HMAC-SHA256/, 'harmless parameters stay');
  t.match(presigned.url, /x-id=GetObject$/);
});

t.test('ordinary values are kept', async (t) => {
  const sha1 = 'a94a8fe5ccb19ba61c4c0873d391e987982fbbd3';
  const etag = '"9e107d9d372bb6826bd81d3542a419d6"';
  const path = '/mnt/data/train/shard-00001/images/0001.jpg';
  const text = `etag ${etag} sha1 ${sha1} path ${path} key s3://bucket/AKIA-not-a-key/x`;
  t.equal(scrub(text), text);
  t.equal(scrub('{"token":1,"status":"ok"}'), '{"token":1,"status":"ok"}');
});

t.test('setLogLevel changes the level of the logger and its children; bad levels are one-line errors', async (t) => {
  const before = log.level;
  t.teardown(() => setLogLevel(before));
  const child = log.child({ component: 'test' });
  setLogLevel('debug');
  t.equal(log.level, 'debug');
  t.ok(child.isLevelEnabled('debug'));
  setLogLevel('warn');
  t.notOk(child.isLevelEnabled('info'));
  t.throws(() => setLogLevel('loud'), { code: 'SLUICE_INVALID_ARGUMENT', message: /log level "loud"/ });
  t.equal(log.level, 'warn');
});

t.test('SLUICE_LOG_LEVEL sets the initial level', async (t) => {
  const { spawnSync } = await import('node:child_process');
  const url = new URL('../src/log.ts', import.meta.url).href;
  const r = spawnSync(process.execPath, [...process.execArgv, '--input-type=module', '-e', `const m = await import(${JSON.stringify(url)}); console.log(m.log.level)`], {
    env: { ...process.env, SLUICE_LOG_LEVEL: 'debug' }, encoding: 'utf8', timeout: 60_000,
  });
  t.equal(r.stdout.trim(), 'debug', r.stderr);
});

t.test('--log-format text: one readable line per event, secrets still scrubbed', async (t) => {
  const json = JSON.stringify({ level: 'warn', time: '2026-01-01T00:00:00.000Z', pid: 7, name: 'sluice', component: 'fuse', msg: 'FUSE operation failed', op: 'read', path: '/a b', n: 3, secretAccessKey: REDACTED });
  t.equal(textLine(json + '\n'), `2026-01-01T00:00:00.000Z WARN  fuse: FUSE operation failed op=read path="/a b" n=3 secretAccessKey=${REDACTED}\n`);
  t.equal(textLine('not json\n'), 'not json\n', 'anything else passes through');
});

t.test('configureLogging: --log-file appends JSON lines (or text), auto picks text only on a terminal', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sluice-log-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'sub', 'sluice.log');
  const before = log.level;
  t.teardown(() => { configureLogging({ logLevel: before, logFormat: 'json' }, false); });
  configureLogging({ logLevel: 'info', logFormat: 'auto', logFile: file }, true);
  log.info({ key: 'AKIAABCDEFGHIJKLMNOP' }, 'to the file');
  const line = JSON.parse(readFileSync(file, 'utf8').trim().split('\n').pop()!) as Record<string, unknown>;
  t.equal(line.msg, 'to the file', 'auto with a log file: JSON, even on a terminal');
  t.equal(line.key, REDACTED, 'scrubbed');
  configureLogging({ logLevel: 'info', logFormat: 'text', logFile: file }, false);
  log.info('as text');
  t.match(readFileSync(file, 'utf8').trim().split('\n').pop()!, /^\d{4}-\d\d-\d\dT[\d:.]+Z INFO  as text$/);
  t.throws(() => configureLogging({ logLevel: 'info', logFile: path.join(file, 'under-a-file.log') }), { code: 'SLUICE_INVALID_ARGUMENT', message: /cannot open --log-file/ });
});
