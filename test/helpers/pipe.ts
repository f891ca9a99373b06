/**
 * Test helpers for Pipe mode: an in-memory ObjectClient (with per-request delay,
 * failures and concurrency accounting) and FIFO readers that run in a child
 * process, as a training script would (`cat`, `head -c`).
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { AbortedError, NoSuchKeyError, ObjectChangedError } from '../../src/errors.js';
import type { ObjectClient, ObjectInfo, RequestOptions, StreamOptions } from '../../src/s3/object-client.js';
import { compareKeys } from '../../src/s3/lister.js';

export class MemoryClient implements ObjectClient {
  readonly bucket: string;
  readonly objects = new Map<string, { body: Buffer; info: ObjectInfo }>();
  /** Milliseconds each GET waits before answering (may depend on the key). */
  delayMs: (key: string) => number = () => 0;
  /** When it returns an error, the GET of that key fails with it. */
  fail: (key: string) => Error | undefined = () => undefined;
  /** Requests made, and the most ever in flight at once. */
  gets = 0;
  inflight = 0;
  maxInflight = 0;
  readonly requested: { key: string; start: number; end: number }[] = [];

  constructor(bucket = 'bucket') {
    this.bucket = bucket;
  }

  put(key: string, body: Buffer): ObjectInfo {
    const info: ObjectInfo = { key, size: body.length, etag: `"etag-${key}-${body.length}"`, lastModified: new Date(0) };
    this.objects.set(key, { body, info });
    return info;
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    for (const { info } of this.objects.values()) if (info.key.startsWith(prefix)) yield info;
  }

  async head(key: string): Promise<ObjectInfo> {
    const o = this.objects.get(key);
    if (!o) throw new NoSuchKeyError(this.bucket, key);
    return o.info;
  }

  async firstKeyUnder(prefix: string): Promise<string | undefined> {
    return [...this.objects.keys()].filter((k) => k.startsWith(prefix)).sort(compareKeys)[0];
  }

  async getRange(key: string, start: number, end: number, etag: string, opts: RequestOptions = {}): Promise<Buffer> {
    return this.get(key, start, end, etag, opts.signal);
  }

  async *getStream(key: string, etag: string, opts: StreamOptions = {}): AsyncIterable<Buffer> {
    const o = this.objects.get(key);
    const end = opts.end ?? opts.size ?? o?.body.length ?? 0;
    const body = await this.get(key, opts.start ?? 0, end, etag, opts.signal);
    // Several chunks, as a network stream would give.
    for (let at = 0; at < body.length; at += 1000) yield body.subarray(at, at + 1000);
  }

  async close(): Promise<void> {}

  private async get(key: string, start: number, end: number, etag: string, signal?: AbortSignal): Promise<Buffer> {
    this.gets += 1;
    this.inflight += 1;
    this.maxInflight = Math.max(this.maxInflight, this.inflight);
    this.requested.push({ key, start, end });
    try {
      const ms = this.delayMs(key);
      if (ms > 0) await abortableDelay(ms, signal);
      if (signal?.aborted) throw new AbortedError();
      const err = this.fail(key);
      if (err) throw err;
      const o = this.objects.get(key);
      if (!o) throw new NoSuchKeyError(this.bucket, key);
      if (o.info.etag !== etag) throw new ObjectChangedError(this.bucket, key, etag, o.info.etag);
      return Buffer.from(o.body.subarray(start, end));
    } finally {
      this.inflight -= 1;
    }
  }
}

function abortableDelay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { signal?.removeEventListener('abort', onAbort); resolve(); }, ms);
    const onAbort = (): void => { clearTimeout(timer); reject(new AbortedError()); };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Deterministic bytes of `size` for object `name`. */
export function bytesFor(name: string, size: number): Buffer {
  const out = Buffer.alloc(size);
  let x = 2166136261;
  for (const c of name) x = Math.imul(x ^ c.charCodeAt(0), 16777619) >>> 0;
  for (let i = 0; i < size; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out[i] = x >>> 24;
  }
  return out;
}

/** A fresh temp folder, removed in teardown. */
export async function tempDir(t: { teardown(fn: () => unknown): void }, tag = 'sluice-pipe-'): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), tag));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * Read a FIFO in a child process: all of it (`cat`), or only the first `limit`
 * bytes, then close early (`head -c`). Resolves with the bytes read. Killed after
 * `timeoutMs` (a bound, not an assertion on speed).
 */
export function readFifo(fifo: string, opts: { limit?: number; timeoutMs?: number } = {}): Promise<Buffer> {
  const args = opts.limit === undefined ? ['cat', [fifo]] as const : ['head', ['-c', String(opts.limit), fifo]] as const;
  return new Promise((resolve, reject) => {
    const child = spawn(args[0], [...args[1]], { stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let err = '';
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => { err += String(c); });
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(Buffer.concat(out));
      else reject(new Error(`${args[0]} ${fifo} exited with ${code ?? signal}: ${err.trim()}`));
    });
  });
}

/** Poll `cond` every 10 ms until true, at most `timeoutMs`. */
export async function waitFor(cond: () => boolean | Promise<boolean>, timeoutMs = 30_000, what = 'condition'): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
