import t from 'tap';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { lstat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { InvalidArgumentError } from '../../src/errors.js';
import { FifoWriter, PIPE_BUFFER_BYTES } from '../../src/pipe/fifo-writer.js';
import { fifoOps, NO_NATIVE_ENV } from '../../src/native/addon.js';
import { readFifo, tempDir, waitFor } from '../helpers/pipe.js';

t.test('create() makes a FIFO, replaces a stale one, refuses anything else', async (t) => {
  const dir = await tempDir(t);
  const p = path.join(dir, 'train_0');
  const w = await FifoWriter.create(p);
  t.ok((await lstat(p)).isFIFO());
  const again = await FifoWriter.create(p); // stale FIFO from an "earlier run"
  t.ok((await lstat(p)).isFIFO());
  await again.remove();
  await w.remove();
  t.notOk(existsSync(p), 'removed');
  const file = path.join(dir, 'train_1');
  await writeFile(file, 'user data');
  await t.rejects(FifoWriter.create(file), InvalidArgumentError);
  t.ok((await lstat(file)).isFile(), 'left alone');
});

t.test('open() waits for a reader without blocking; writes stream; end() gives EOF', async (t) => {
  const dir = await tempDir(t);
  const p = path.join(dir, 'train_0');
  const w = await FifoWriter.create(p);
  let written = 0;
  const opening = w.open();
  let opened = false;
  void opening.then(() => { opened = true; });
  // The event loop keeps running while nobody reads.
  await new Promise((r) => setTimeout(r, 30));
  t.notOk(opened, 'still waiting for a reader');
  const reader = readFifo(p);
  t.equal(await opening, true);
  if (fifoOps().backend === 'native') t.equal(w.pipeSize, PIPE_BUFFER_BYTES, '1 MiB pipe buffer');
  const chunk = Buffer.alloc(256 * 1024, 0x61);
  for (let i = 0; i < 8; i++) {
    t.equal(await w.write(chunk), true);
    written += chunk.length;
  }
  t.equal(await w.end(), true);
  const got = await reader;
  t.equal(got.length, written);
  await w.remove();
});

t.test('a reader that closes early makes write() resolve false (EPIPE), without an error', async (t) => {
  const dir = await tempDir(t);
  const p = path.join(dir, 'train_0');
  const fullWaits: number[] = [];
  const w = await FifoWriter.create(p, { onFullWait: (s) => fullWaits.push(s) });
  const reader = readFifo(p, { limit: 1000 });
  t.equal(await w.open(), true);
  const chunk = Buffer.alloc(64 * 1024, 0x62);
  let result = true;
  for (let i = 0; i < 1000 && result; i++) result = await w.write(chunk);
  t.equal(result, false, 'the write end saw the reader go');
  t.equal((await reader).length, 1000);
  t.equal(await w.end(), false);
  t.ok(fullWaits.length > 0, 'waits on a full pipe were reported');
  await w.remove();
});

t.test('open() is cancelled by its AbortSignal', async (t) => {
  const dir = await tempDir(t);
  const p = path.join(dir, 'train_0');
  const w = await FifoWriter.create(p);
  const ac = new AbortController();
  const opening = w.open(ac.signal);
  setTimeout(() => ac.abort(), 20);
  t.equal(await opening, false);
  await w.remove();
  t.notOk(existsSync(p));
});

t.test('remove() wakes a reader blocked in open(): it reads EOF instead of hanging', async (t) => {
  const dir = await tempDir(t);
  const p = path.join(dir, 'train_0');
  const w = await FifoWriter.create(p);
  // `cat` blocks in open() until a writer appears; we never open() for real.
  const child = spawn('cat', [p], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => { if (child.exitCode === null) child.kill('SIGKILL'); });
  const exited = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
  await waitFor(async () => existsSync(`/proc/${child.pid}`), 5000, 'cat to start');
  await new Promise((r) => setTimeout(r, 50)); // let it reach open()
  await w.remove();
  t.equal(await exited, 0, 'cat saw EOF and exited');
});

t.test(`works with the fallback backend (${NO_NATIVE_ENV}=1): default pipe size`, async (t) => {
  process.env[NO_NATIVE_ENV] = '1';
  t.teardown(() => { delete process.env[NO_NATIVE_ENV]; });
  const dir = await tempDir(t);
  const p = path.join(dir, 'train_0');
  const w = await FifoWriter.create(p);
  const reader = readFifo(p);
  t.equal(await w.open(), true);
  t.equal(w.pipeSize, undefined, 'unknown without the addon');
  t.equal(await w.write(Buffer.from('abc')), true);
  t.equal(await w.end(), true);
  t.equal((await reader).toString(), 'abc');
  await w.remove();
});
