/**
 * The addon's paced FIFO writer (src/pipe/paced-writer.ts, native/src/pipe_writer.c) through
 * FifoWriter: exact bytes and order with slow, pausing and small-read readers while buffers
 * are reused as soon as they are reported written; a reader that leaves early; destroy()
 * with writes queued; far fewer writes than the reader makes reads; the pipe size fallback.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { FifoWriter, growPipe, PIPE_BUFFER_BYTES, WRITE_AHEAD_BYTES } from '../../src/pipe/fifo-writer.js';
import { pipeWriterAddon } from '../../src/native/addon.js';
import { bytesFor, tempDir } from '../helpers/pipe.js';

const MiB = 1024 * 1024;

interface ReadResult { bytes: number; sha256: string; reads: number }

/**
 * Read a FIFO in a child process `readSize` bytes per read(2), sleeping `pauseMs` after every
 * `pauseEvery` bytes, up to `limit` bytes (then close early). Reports bytes, sha256 and reads.
 */
function slowReader(fifo: string, o: { readSize: number; pauseEvery?: number; pauseMs?: number; limit?: number }): Promise<ReadResult> {
  const script = `
    const fs = require('node:fs'), { createHash } = require('node:crypto');
    const [fifo, readSize, pauseEvery, pauseMs, limit] = process.argv.slice(1);
    const fd = fs.openSync(fifo, 'r'); const h = createHash('sha256'); const buf = Buffer.alloc(Number(readSize));
    let bytes = 0, reads = 0, sincePause = 0; const sleeper = new Int32Array(new SharedArrayBuffer(4));
    for (;;) {
      const want = Math.min(buf.length, Number(limit) - bytes); if (want <= 0) break;
      const n = fs.readSync(fd, buf, 0, want, null); reads++; if (n === 0) break;
      h.update(buf.subarray(0, n)); bytes += n; sincePause += n;
      if (Number(pauseEvery) > 0 && sincePause >= Number(pauseEvery)) { sincePause = 0; Atomics.wait(sleeper, 0, 0, Number(pauseMs)); }
    }
    fs.closeSync(fd);
    process.stdout.write(JSON.stringify({ bytes, sha256: h.digest('hex'), reads }));`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', script, fifo, String(o.readSize), String(o.pauseEvery ?? 0), String(o.pauseMs ?? 0), String(o.limit ?? Number.MAX_SAFE_INTEGER)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => { out += String(c); });
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000); // a bound, not a speed assertion
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(JSON.parse(out) as ReadResult);
      else reject(new Error(`reader exited with ${code}`));
    });
  });
}

const native = pipeWriterAddon() !== undefined;

t.test('bytes and order exact with a slow, pausing reader, buffers reused once written', { skip: !native && 'addon not built' }, async (t) => {
  const dir = await tempDir(t);
  const p = path.join(dir, 'train_0');
  const w = await FifoWriter.create(p);
  const reader = slowReader(p, { readSize: 32 * 1024, pauseEvery: 3 * MiB, pauseMs: 30 });
  t.equal(await w.open(), true);
  // Two "slabs" reused in turn, as the read-ahead's pool does, plus RecordIO-like small
  // headers between them: each slab is overwritten as soon as flushed() says its bytes
  // are in the pipe, so a writer that read a slab late would send the wrong bytes.
  const slabs = [Buffer.alloc(3 * MiB + 5), Buffer.alloc(3 * MiB + 5)];
  const expected = createHash('sha256');
  const releases: Promise<void>[] = [Promise.resolve(), Promise.resolve()];
  for (let i = 0; i < 12; i++) {
    const slab = slabs[i % 2]!;
    await releases[i % 2]; // the slab's previous bytes are in the pipe
    slab.set(bytesFor(`b${i + 1}`, slab.length));
    const header = Buffer.from(`header ${i}\n`);
    expected.update(header).update(slab);
    t.equal(await w.write(header), true);
    t.equal(await w.write(slab), true);
    releases[i % 2] = w.flushed();
  }
  t.equal(await w.end(), true);
  const got = await reader;
  t.equal(got.bytes, 12 * (3 * MiB + 5) + Array.from({ length: 12 }, (_, i) => `header ${i}\n`.length).reduce((a, b) => a + b));
  t.equal(got.sha256, expected.digest('hex'), 'sha256 of everything written, in order');
  const s = w.writerStats()!;
  t.equal(s.written, got.bytes, 'the writer counted every byte');
  t.ok(s.idleWaits > 0, `the reader's pauses were waited out without spinning (${s.idleWaits} waits for room)`);
  await w.remove();
});

t.test('a small-read reader wakes the writer far less often than it reads', { skip: !native && 'addon not built' }, async (t) => {
  const dir = await tempDir(t);
  const p = path.join(dir, 'train_0');
  const w = await FifoWriter.create(p);
  const reader = slowReader(p, { readSize: 4096 });
  t.equal(await w.open(), true);
  const body = bytesFor(`b${7}`, 24 * MiB);
  // One 24 MiB buffer, as a part: the kernel takes what fits, the thread paces the rest.
  t.equal(await w.write(body), true);
  t.equal(await w.end(), true);
  const got = await reader;
  t.equal(got.sha256, createHash('sha256').update(body).digest('hex'));
  const s = w.writerStats()!;
  // A writer woken per freed page of a full pipe writes about once per reader read.
  t.ok(s.writes * 4 < got.reads, `${s.writes} writes for ${got.reads} reads of 4 KiB (${s.sleeps} paced sleeps, ${s.starved} starved)`);
  await w.remove();
});

t.test('a reader that closes early: write() resolves false, end() false, the thread stops', { skip: !native && 'addon not built' }, async (t) => {
  const dir = await tempDir(t);
  const p = path.join(dir, 'train_0');
  const w = await FifoWriter.create(p);
  const reader = slowReader(p, { readSize: 64 * 1024, limit: 3 * MiB });
  t.equal(await w.open(), true);
  const chunk = bytesFor(`b${3}`, MiB);
  let result = true;
  let n = 0;
  for (; n < 200 && result; n++) result = await w.write(chunk);
  t.equal(result, false, 'the write end saw the reader go');
  t.ok(n < 200, `stopped after ${n} writes`);
  t.equal((await reader).bytes, 3 * MiB);
  t.equal(await w.end(), false);
  t.equal(await w.write(chunk), false, 'later writes are refused');
  await w.flushed(); // resolves: nothing the thread still reads
  await w.remove();
});

t.test('destroy() with writes queued stops the thread and closes the write end: the reader sees EOF', { skip: !native && 'addon not built' }, async (t) => {
  const dir = await tempDir(t);
  const p = path.join(dir, 'train_0');
  const w = await FifoWriter.create(p);
  const reader = slowReader(p, { readSize: 64 * 1024, pauseEvery: MiB, pauseMs: 50 });
  t.equal(await w.open(), true);
  const big = bytesFor(`b${5}`, WRITE_AHEAD_BYTES);
  t.equal(await w.write(big), true);
  const flushed = w.flushed();
  w.destroy();
  await flushed; // the thread let go of `big`
  const got = await reader;
  t.ok(got.bytes < big.length, `the reader got ${got.bytes} bytes, then EOF`);
  t.equal(got.sha256, createHash('sha256').update(big.subarray(0, got.bytes)).digest('hex'), 'a prefix of what was written');
  t.equal(await w.end(), false);
  await w.remove();
});

t.test('pipe size: asks for 1 MiB, falls back to pipe-max-size, then to the kernel default', async (t) => {
  const asked: number[] = [];
  const ops = (refuseAbove: number, current = 65536) => ({
    setPipeSize: (_fd: number, bytes: number) => {
      asked.push(bytes);
      if (bytes > refuseAbove) throw Object.assign(new Error('EPERM'), { code: 'EPERM' });
      return bytes;
    },
    getPipeSize: () => current,
  });
  t.equal(await growPipe(3, ops(Infinity), async () => '1048576\n'), PIPE_BUFFER_BYTES);
  t.same(asked.splice(0), [PIPE_BUFFER_BYTES]);
  t.equal(await growPipe(3, ops(256 * 1024), async () => '262144\n'), 256 * 1024, 'the administrator\'s lower limit');
  t.same(asked.splice(0), [PIPE_BUFFER_BYTES, 256 * 1024]);
  t.equal(await growPipe(3, ops(0), async () => '262144\n'), 65536, 'per-user quota: the default stays');
  t.equal(await growPipe(3, ops(0), async () => { throw new Error('ENOENT'); }), 65536, 'no /proc: the default stays');
  t.equal(await growPipe(3, { setPipeSize: () => undefined, getPipeSize: () => undefined }), undefined, 'no addon: unknown');
});
