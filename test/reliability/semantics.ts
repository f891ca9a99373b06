/**
 * Issue 6, item 8: SEMANTICS.md says what it promises, and this checks it.
 *  - Every deadline in its table equals the default in the code (src/config/options.ts,
 *    src/s3/retry.ts, src/s3/outage.ts, src/s3/range-reader.ts, src/fuse/deadline.ts),
 *    and the two formulas of the request deadline (s3 and fuse) agree.
 *  - The fixed memory overhead it states is the one the load test asserts.
 *  - Its error-code -> errno table is what errnoFor() does.
 *  - Every operation of its POSIX table, run against a real mount of the local server,
 *    gives the result it lists (ok or the errno), including ESTALE for an object
 *    overwritten or deleted after the mount.
 * Needs a build (dist/).
 */
import { constants } from 'node:fs';
import { access, chmod, mkdir, open, readdir, readFile, rename, rmdir, stat, statfs, symlink, truncate, unlink, utimes } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { OPTIONS } from '../../src/config/options.js';
import { Errno, errnoFor, SluiceError, type ErrorCode } from '../../src/errors.js';
import { FUSE_TIMEOUT_MARGIN_MS, fuseTimeoutMs, s3DeadlineMs } from '../../src/fuse/deadline.js';
import { seedDataset, sourceBytes } from '../../src/local/dataset.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { OUTAGE_POLL_MS, requestDeadlineMs } from '../../src/s3/outage.js';
import { UNREACHABLE_MAX_ATTEMPTS } from '../../src/s3/range-reader.js';
import { BACKOFF_BASE_MS, BACKOFF_CAP_MS } from '../../src/s3/retry.js';
import { startCli, waitExit } from '../helpers/cli.js';
import { tempMountpoint } from '../helpers/fuse.js';
import { FIXED_OVERHEAD_MIB } from '../helpers/memory-budget.js';

/** The errno name of a failed call; libuv has no name for some (ESTALE is "Unknown system error -116"). */
function errnoName(e: NodeJS.ErrnoException): string {
  if (e.code && /^E[A-Z]+$/.test(e.code)) return e.code;
  const n = typeof e.errno === 'number' ? -e.errno : NaN;
  return Object.entries(os.constants.errno).find(([, v]) => v === n)?.[0] ?? String(e);
}

const DOC = fileURLToPath(new URL('../../SEMANTICS.md', import.meta.url));

t.test('the deadlines SEMANTICS.md states are the defaults in the code', async (t) => {
  const doc = await readFile(DOC, 'utf8');
  const rows = new Map([...doc.matchAll(/^\| `([a-z-]+)` \| `(\d+) (ms|attempts)` \|/gm)].map((m) => [m[1]!, Number(m[2])]));
  const defaults = { requestTimeoutMs: OPTIONS.requestTimeout.default, maxAttempts: OPTIONS.maxAttempts.default };
  const expected: Record<string, number> = {
    'request-timeout': OPTIONS.requestTimeout.default,
    'max-attempts': OPTIONS.maxAttempts.default,
    'backoff-base': BACKOFF_BASE_MS,
    'backoff-cap': BACKOFF_CAP_MS,
    'request-deadline': s3DeadlineMs(defaults),
    'unreachable-attempts': UNREACHABLE_MAX_ATTEMPTS,
    'outage-poll': OUTAGE_POLL_MS,
    'fuse-timeout': fuseTimeoutMs(defaults),
  };
  t.same([...rows.keys()].sort(), Object.keys(expected).sort(), 'the table lists exactly these deadlines');
  for (const [name, value] of Object.entries(expected)) t.equal(rows.get(name), value, `${name} = ${value}`);
  for (const [rt, at] of [[10_000, 10], [1000, 3], [500, 1], [30_000, 20]] as const) {
    t.equal(requestDeadlineMs({ requestTimeoutMs: rt, maxAttempts: at }), s3DeadlineMs({ requestTimeoutMs: rt, maxAttempts: at }), `the S3 and FUSE formulas agree (${rt} ms x ${at})`);
  }
  t.match(doc, new RegExp(`2 x \`request-deadline\` \\+ ${FUSE_TIMEOUT_MARGIN_MS / 1000} s`), 'the FUSE margin');
  t.equal(Number(/fixed overhead of\s+`(\d+) MiB`/.exec(doc)?.[1]), FIXED_OVERHEAD_MIB, 'the memory overhead the load test asserts');
});

t.test('the error -> errno table is what errnoFor() does', async (t) => {
  const doc = await readFile(DOC, 'utf8');
  const rows = [...doc.matchAll(/^\| `(SLUICE_[A-Z_]+)` \| `(E[A-Z]+)` \|$/gm)];
  t.ok(rows.length >= 10, `${rows.length} rows`);
  for (const [, code, errno] of rows) {
    t.equal(errnoFor(new SluiceError(code as ErrorCode, 'x')), Errno[errno as keyof typeof Errno], `${code} -> ${errno}`);
  }
});

t.test('every POSIX operation SEMANTICS.md lists gives the result it states, through a real mount', async (t) => {
  const doc = await readFile(DOC, 'utf8');
  const table = [...doc.matchAll(/^\| `([a-z-]+)` \| [^|]+ \| (ok|`(E[A-Z]+)`)/gm)].map((m) => ({ id: m[1]!, want: m[3] ?? 'ok' }));
  t.ok(table.length >= 20, `${table.length} operations in the table`);

  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket('sem');
  const [file] = await seedDataset(s3, 'sem', 'p/', { largeFiles: { count: 1, size: 600_000 }, seed: 4 });
  await s3.putObject('sem', 'p/later/changed.bin', Buffer.alloc(300_000, 1));
  await s3.putObject('sem', 'p/later/deleted.bin', Buffer.alloc(300_000, 2));
  const dir = await tempMountpoint(t, 'semantics');
  const env: NodeJS.ProcessEnv = { ...process.env, NODE_NO_WARNINGS: '1', AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_REGION: 'us-east-1', SLUICE_LOG_LEVEL: 'error' };
  const mount = await startCli(['mount', 's3://sem/p/', dir, '--endpoint', s3.endpoint, '--path-style', '--metrics-port=-1', '--cross-file-prefetch', '0',
    '--cache-size', '8MiB', '--part-size', '1MiB', '--max-attempts', '2', '--request-timeout', '2000'], env);
  t.teardown(() => { mount.child.kill('SIGKILL'); });
  // "ready" comes before the listing completes (the mount answers while it lists); a readdir
  // waits for it, so the overwrite and delete below come after the listing, as intended.
  await readdir(dir);
  await s3.putObject('sem', 'p/later/changed.bin', Buffer.alloc(300_000, 3)); // a new version after the listing
  await s3.deleteObject('sem', 'p/later/deleted.bin');

  const f = path.join(dir, file!.key.slice(2));
  const d = path.join(dir, 'large');
  const ops: Record<string, () => Promise<unknown>> = {
    read: async () => {
      const h = await open(f, 'r');
      try {
        const buf = Buffer.alloc(70_000);
        const { bytesRead } = await h.read(buf, 0, buf.length, 123_456);
        if (!buf.subarray(0, bytesRead).equals(sourceBytes(file!, 123_456, 123_456 + 70_000))) throw Object.assign(new Error('wrong bytes'), { code: 'WRONG_BYTES' });
      } finally { await h.close(); }
    },
    'seek-read': async () => {
      const h = await open(f, 'r');
      try {
        const buf = Buffer.alloc(1000);
        await h.read(buf, 0, 1000, 599_500); // positional read past a seek target; 500 bytes to EOF
        const { bytesRead } = await h.read(buf, 0, 1000, 599_500);
        if (bytesRead !== 500 || !buf.subarray(0, 500).equals(sourceBytes(file!, 599_500))) throw Object.assign(new Error('wrong bytes'), { code: 'WRONG_BYTES' });
      } finally { await h.close(); }
    },
    readdir: async () => { if (!(await readdir(dir)).includes('large')) throw new Error('missing entry'); },
    stat: async () => { if ((await stat(f)).size !== file!.size) throw new Error('wrong size'); },
    statfs: () => statfs(dir),
    fsync: async () => { const h = await open(f, 'r'); try { await h.sync(); } finally { await h.close(); } },
    'access-read': () => access(f, constants.R_OK),
    'stat-missing': () => stat(path.join(dir, 'no-such-file')),
    'path-through-file': () => stat(path.join(f, 'x')),
    'read-dir': async () => { const h = await open(d, 'r'); try { await h.read(Buffer.alloc(10), 0, 10, 0); } finally { await h.close(); } },
    'open-write': async () => (await open(f, 'r+')).close(),
    create: async () => (await open(path.join(dir, 'new-file'), 'w')).close(),
    'access-write': () => access(f, constants.W_OK),
    truncate: () => truncate(f, 0),
    mkdir: () => mkdir(path.join(dir, 'new-dir')),
    rmdir: () => rmdir(d),
    unlink: () => unlink(f),
    rename: () => rename(f, path.join(dir, 'renamed')),
    chmod: () => chmod(f, 0o644),
    utimes: () => utimes(f, new Date(), new Date()),
    symlink: () => symlink(f, path.join(dir, 'link')),
    'read-changed': () => readFile(path.join(dir, 'later', 'changed.bin')),
    'read-deleted': () => readFile(path.join(dir, 'later', 'deleted.bin')),
  };
  for (const { id, want } of table) {
    const op = ops[id];
    if (!op) { t.fail(`no check for the documented operation ${id}`); continue; }
    const got = await op().then(() => 'ok', errnoName);
    t.equal(got, want, `${id}: ${want}`);
  }
  t.equal(mount.child.exitCode, null, 'the daemon is still up after all of it');
  mount.child.kill('SIGTERM');
  t.equal((await waitExit(mount)).code, 0);
});
