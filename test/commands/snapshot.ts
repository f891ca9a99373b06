/**
 * `sluice snapshot` on the command line (dist/cli.js): --diff output and exit codes, and
 * one-line errors for a damaged snapshot or a snapshot of another prefix.
 */
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import type { ObjectInfo } from '../../src/s3/object-client.js';
import { writeSnapshot } from '../../src/snapshot/snapshot.js';
import { existsSync } from 'node:fs';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { runCli } from '../helpers/cli.js';
import { startFaultProxy } from '../helpers/fault-proxy.js';

const header = { uri: 's3://bucket/p/', bucket: 'bucket', prefix: 'p/', listing: { filters: [], skipArchived: false } };
const obj = (key: string, size: number, etag: string): ObjectInfo => ({ key, size, etag, lastModified: new Date(0), storageClass: 'STANDARD' });

t.test('--diff lists added, removed and modified keys; exit 1 when they differ, 0 when not', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'snapcli-'));
  const a = path.join(dir, 'a.snap');
  const b = path.join(dir, 'b.snap.gz');
  await writeSnapshot(a, header, [obj('p/keep', 1, '"k"'), obj('p/gone', 2, '"g"'), obj('p/mod', 3, '"m1"')]);
  await writeSnapshot(b, header, [obj('p/keep', 1, '"k"'), obj('p/mod', 4, '"m2"'), obj('p/new', 5, '"n"')]);
  const d = await runCli(['snapshot', '--diff', a, b]);
  t.equal(d.code, 1);
  t.match(d.stdout, /^\+ p\/new \(5 bytes\)$/m);
  t.match(d.stdout, /^- p\/gone \(2 bytes\)$/m);
  t.match(d.stdout, /^~ p\/mod \(3 -> 4 bytes, ETag "m1" -> "m2"\)$/m);
  t.match(d.stdout, /1 added .*1 removed .*1 modified .*1 unchanged/);
  const same = await runCli(['snapshot', '--diff', a, a]);
  t.equal(same.code, 0);
  t.match(same.stdout, /0 added .*0 removed .*0 modified .*3 unchanged/);

  // A damaged file: one line, exit 2, no stack.
  const text = await readFile(a, 'utf8');
  await writeFile(path.join(dir, 'bad.snap'), text.replace('"p/keep"', '"p/kept"'));
  const bad = await runCli(['snapshot', '--diff', a, path.join(dir, 'bad.snap')]);
  t.equal(bad.code, 2);
  t.match(bad.stderr, /^sluice: snapshot .*bad\.snap does not match its checksum.*sluice snapshot s3:\/\/bucket\/prefix\/ FILE\n$/);

  // A snapshot of another prefix than the one on the command line.
  const mnt = await mkdtemp(path.join(os.tmpdir(), 'snapcli-mnt-'));
  const other = await runCli(['mount', 's3://bucket/other/', mnt, '--snapshot', a, '--metrics-port', '-1']);
  t.equal(other.code, 2);
  t.match(other.stderr, /snapshot .*a\.snap is of s3:\/\/bucket\/p\/, not s3:\/\/bucket\/other\//);
  t.notMatch(other.stderr, /\n\s+at /, 'no stack trace');
});

t.test('sluice run: a Pipe channel with archived objects fails in one line before the command starts', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket('runarch');
  for (const k of ['d/a', 'd/b', 'd/c', 'd/d', 'd/e']) await s3.putObject('runarch', k, Buffer.from(k));
  const proxy = await startFaultProxy(s3.port);
  t.teardown(() => proxy.close());
  proxy.set({ storageClass: { 'd/b': 'GLACIER', 'd/c': 'DEEP_ARCHIVE', 'd/d': 'GLACIER', 'd/e': 'GLACIER' } });
  const root = await mkdtemp(path.join(os.tmpdir(), 'runarch-'));
  const marker = path.join(root, 'started');
  const env = { ...process.env, AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey, AWS_REGION: 'us-east-1' };
  const args = ['run', '--channel', 'train=s3://runarch/d/,mode=Pipe', '--root', root, '--endpoint', proxy.endpoint, '--path-style', '--metrics-port', '-1', '--log-level', 'error'];
  const r = await runCli([...args, '--', 'touch', marker], env);
  t.equal(r.code, 2);
  t.notOk(existsSync(marker), 'the training command never started');
  const lines = r.stderr.trim().split('\n').filter((l) => l.startsWith('sluice:'));
  t.equal(lines.length, 1, 'one line');
  t.match(lines[0], /channel "train" \(s3:\/\/runarch\/d\/\): 4 objects are archived \(GLACIER, DEEP_ARCHIVE\) and cannot be read without a restore: "d\/b", "d\/c", "d\/d" and 1 more\. Restore with: aws s3api restore-object --bucket runarch --key "d\/b"/);
  // --skip-archived: the command runs on the readable objects.
  const ok = await runCli([...args, '--skip-archived', '--epochs', '1', '--', 'sh', '-c', `cat "${root}/input/data/train_0" > "${marker}"`], env);
  t.equal(ok.code, 0, ok.stderr);
  t.equal(await readFile(marker, 'utf8'), 'd/a', 'only the readable object was streamed');
});

t.test('sluice snapshot takes --log-format (text or json) and --log-file like the other commands', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket('logfmt');
  await s3.putObject('logfmt', 'p/a', Buffer.from('a'));
  const dir = await mkdtemp(path.join(os.tmpdir(), 'snaplog-'));
  const env = { ...process.env, AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey, AWS_REGION: 'us-east-1' };
  const args = (out: string) => ['snapshot', 's3://logfmt/p/', path.join(dir, out), '--endpoint', s3.endpoint, '--path-style', '--log-level', 'debug'];
  // s3rver has no versioning: a debug line says the listing records no version ids.
  const text = await runCli([...args('t.snap'), '--log-format', 'text'], env);
  t.equal(text.code, 0, text.stderr);
  t.match(text.stderr, /^\S+Z DEBUG bucket versioning is off or not visible: listing without version ids bucket=logfmt$/m, 'text lines');
  t.notMatch(text.stderr, /^\{/m, 'no JSON line');
  const json = await runCli([...args('j.snap'), '--log-format', 'json'], env);
  t.equal(json.code, 0, json.stderr);
  const lines = json.stderr.trim().split('\n').map((l) => JSON.parse(l) as { msg: string });
  t.ok(lines.some((l) => l.msg === 'bucket versioning is off or not visible: listing without version ids'), 'JSON lines');
  const logFile = path.join(dir, 'snap.log');
  const file = await runCli([...args('f.snap'), '--log-file', logFile], env);
  t.equal(file.code, 0, file.stderr);
  t.match(await readFile(logFile, 'utf8'), /listing without version ids/, '--log-file');
  const bad = await runCli([...args('b.snap'), '--log-format', 'xml'], env);
  t.equal(bad.code, 2);
  t.match(bad.stderr, /^sluice: .*log-format must be auto, text or json/);
});
