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
import { runCli } from '../helpers/cli.js';

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
