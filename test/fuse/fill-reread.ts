/**
 * Issue 44: a file that fits the fill's threshold (half the cache by default) and is read at
 * random is fetched whole once, then served locally: random and sequential re-reads, through
 * the same handle and through new ones, make no GET (counted at a request-counting proxy), with
 * exact bytes. Closing the last handle stops a fill that is still under way. And a sequential
 * reader that comes back to the start (a second pass on one handle) fills the file too.
 * The kernel's page cache is dropped for the file before each re-read (POSIX_FADV_DONTNEED,
 * `dd iflag=nocache count=0`), so every re-read reaches the daemon.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createHash, randomBytes } from 'node:crypto';
import { open } from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { mountFastFile } from '../../src/fuse/fastfile.js';
import { tempMountpoint } from '../helpers/fuse.js';
import { localS3BehindProxy, testMountOptions } from '../helpers/mount-options.js';

const MiB = 1024 * 1024;
const BUCKET = 'fillreread';
/** 24 MiB under a 64 MiB cache: within the default threshold (half the cache), above the old one (a quarter). */
const SIZE = 24 * MiB;
const CACHE = 64 * MiB;
const READ = 256 * 1024;

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const run = promisify(execFile);
/** Drops the file's pages from the kernel's page cache, so the next reads reach the daemon (async: the daemon answers in this process). */
const dropPages = (file: string) => run('dd', [`if=${file}`, 'iflag=nocache', 'count=0', 'status=none'], { timeout: 30_000 });
/** Polls `cond` every 20 ms for at most `ms`. */
async function until(cond: () => boolean, ms = 20_000): Promise<boolean> {
  for (const t0 = Date.now(); Date.now() - t0 < ms; await new Promise((r) => setTimeout(r, 20))) if (cond()) return true;
  return cond();
}

t.test('a file read at random is filled once; random and sequential re-reads make no GET; close stops a fill', async (t) => {
  const { s3, proxy } = await localS3BehindProxy(t, BUCKET);
  const body = randomBytes(SIZE);
  await s3.putObject(BUCKET, 'data/a.bin', body);
  await s3.putObject(BUCKET, 'data/b.bin', body);
  await s3.putObject(BUCKET, 'data/c.bin', body);
  const dir = await tempMountpoint(t, 'fill');
  const m = await mountFastFile({
    uri: `s3://${BUCKET}/data/`, mountpoint: dir,
    options: testMountOptions(proxy.endpoint, { cacheSize: CACHE, partSize: 4 * MiB, maxPrefetch: 16 * MiB, maxInflight: 32 * MiB, crossFilePrefetch: 0 }),
  });
  t.teardown(() => m.unmount());
  const gets = (key: string) => proxy.gets.filter((g) => g.path === `/${BUCKET}/data/${key}`).length;
  const fill = m.core.randomFill;

  // 1. A random read starts the fill; the handle stays open until it has finished.
  const a = path.join(dir, 'a.bin');
  const fh = await open(a, 'r');
  try {
    const buf = Buffer.alloc(READ);
    await fh.read(buf, 0, READ, 10 * MiB);
    t.ok(buf.equals(body.subarray(10 * MiB, 10 * MiB + READ)), 'the first random read has the source bytes');
    t.ok(await until(() => fill.stats.completed === 1 && fill.inflightGets === 0), 'the fill completes');
    t.ok(fill.stats.bytes > 0 && fill.stats.bytes <= SIZE, `the fill fetched ${fill.stats.bytes} bytes, at most the file`);
    const fetched = proxy.gets.filter((g) => g.path === `/${BUCKET}/data/a.bin`).reduce((n, g) => n + g.end - g.start, 0);
    t.equal(fetched, SIZE, 'each byte of the file was fetched once');
    const after = gets('a.bin');

    // 2. Random re-reads through the same handle.
    await dropPages(a);
    for (let i = 0; i < 64; i++) {
      const at = Math.floor(Math.random() * (SIZE - READ));
      const { bytesRead } = await fh.read(buf, 0, READ, at);
      if (bytesRead !== READ || !buf.equals(body.subarray(at, at + READ))) { t.fail(`random re-read at ${at}: wrong bytes`); break; }
    }
    // 3. A sequential pass through the same handle, then through a new one (cat), twice.
    await dropPages(a);
    const whole = Buffer.alloc(SIZE);
    for (let at = 0; at < SIZE; at += MiB) await fh.read(whole, at, MiB, at);
    t.equal(sha(whole), sha(body), 'a sequential re-read through the same handle has the source bytes');
    for (const pass of [1, 2]) {
      await dropPages(a);
      const r = await run('sh', ['-c', `cat "${a}" | sha256sum`], { encoding: 'utf8', timeout: 60_000 });
      t.equal(r.stdout.split(' ')[0], sha(body), `cat pass ${pass} (a new handle) has the source bytes`);
    }
    t.equal(gets('a.bin'), after, 'no GET after the fill: every re-read was served from memory');
  } finally {
    await fh.close();
  }

  // 4. A sequential reader that comes back to the start fills the file, and its third pass makes no GET.
  const b = path.join(dir, 'b.bin');
  const fb = await open(b, 'r');
  try {
    const whole = Buffer.alloc(SIZE);
    for (const pass of [1, 2]) {
      await dropPages(b);
      for (let at = 0; at < SIZE; at += MiB) await fb.read(whole, at, MiB, at);
      t.equal(sha(whole), sha(body), `b: pass ${pass} has the source bytes`);
    }
    t.ok(await until(() => fill.stats.completed === 2 && fill.inflightGets === 0), 'b: the second pass started a fill that completes');
    const after = gets('b.bin');
    await dropPages(b);
    for (let at = 0; at < SIZE; at += MiB) await fb.read(whole, at, MiB, at);
    t.equal(sha(whole), sha(body), 'b: pass 3 has the source bytes');
    t.equal(gets('b.bin'), after, 'b: pass 3 made no GET');
  } finally {
    await fb.close();
  }

  // 5. Closing the only handle while its fill runs stops it (200 ms per request: the fill is still
  // under way): no GET of the file starts afterwards, and the file was not fetched whole.
  proxy.set({ latencyMs: 200 });
  const c = path.join(dir, 'c.bin');
  const fc = await open(c, 'r');
  await fc.read(Buffer.alloc(READ), 0, READ, 5 * MiB);
  t.equal(fill.stats.started, 3, 'c: the fill started');
  await fc.close();
  t.ok(await until(() => fill.stats.stopped === 1), 'c: the fill stopped once the handle closed');
  t.equal(fill.stats.completed, 2, 'c: the fill did not complete');
  await until(() => fill.inflightGets === 0);
  const atClose = gets('c.bin');
  await new Promise((r) => setTimeout(r, 500));
  t.equal(gets('c.bin'), atClose, 'c: no GET after the fill stopped');
  const fetched = proxy.gets.filter((g) => g.path === `/${BUCKET}/data/c.bin`).reduce((n, g) => n + g.end - g.start, 0);
  t.ok(fetched < SIZE, `c: ${fetched} of ${SIZE} bytes fetched`);
  t.comment(`fill stats ${JSON.stringify(fill.stats)}`);
});
