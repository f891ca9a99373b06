/**
 * The bench's cheap S3 server (scenario `server: stored`): the seeded objects' real bytes,
 * ETags and keys, served by ./synthetic-s3.ts's request handling from memory, in a process of
 * its own (./stored-s3-child.ts), so its CPU is measured apart as s3rver's is.
 *
 * Why: on this kind of 2-core machine s3rver (koa, SigV4 checks, a stat, a metadata JSON and
 * an MD5 file read for every GET) costs more CPU per small-file GET than the sluice daemon
 * that asks for it (decision 0043: 2.3 ms against 1.7 ms a 40 KB file), and real S3 costs the
 * client machine none. A small-file scenario run against s3rver then measures the emulator.
 * This server answers a GET with a slice of a Buffer: a few tens of microseconds.
 *
 * How: s3rver is still started and seeded as always (the PUT path, the same bytes and ETags);
 * then the child reads each seeded object's bytes from s3rver's folder
 * (`<dir>/<bucket>/<key>._S3rver_object`, datasets.ts) once, checks its size, and serves it.
 * Listing, HEAD, ranged GET, If-Match: synthetic-s3.ts. Signatures are not checked.
 * The objects are held in memory: at most MAX_STORED_BYTES.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stopChild } from './proc-stats.js';
import { afterIn, compareUtf8, searchFrom, type ObjectTable } from './synthetic-s3.js';

/**
 * 2 GiB: the stored server keeps every object in memory; small-file scenarios need ~100 MB.
 * Scenarios with multi-GiB objects (fio) stay on s3rver, which streams from disk.
 */
export const MAX_STORED_BYTES = 2 * 1024 ** 3;

export interface StoredObject { key: string; etag: string; size: number }

/** Objects in S3's key order, bytes in memory. */
export class StoredObjects implements ObjectTable {
  private readonly objs: (StoredObject & { data: Buffer })[];
  private readonly byKey = new Map<string, number>();

  constructor(objs: readonly (StoredObject & { data: Buffer })[]) {
    this.objs = [...objs].sort((a, b) => compareUtf8(a.key, b.key));
    this.objs.forEach((o, i) => this.byKey.set(o.key, i));
  }

  get total(): number { return this.objs.length; }
  key(k: number): string { return this.objs[k]!.key; }
  size(k: number): number { return this.objs[k]!.size; }
  etag(k: number): string { return this.objs[k]!.etag; }
  bytes(k: number, start: number, end: number): Buffer { return this.objs[k]!.data.subarray(start, end); }
  after(s: string, inclusive = false): number { return afterIn(this, s, inclusive); }
  pastPrefix(from: number, p: string): number { return searchFrom(this, from, (key) => key.startsWith(p)); }
  indexOf(key: string): number | undefined { return this.byKey.get(key); }
}

/** Reads the objects' bytes from s3rver's folder (`dir`, as given to startLocalS3). */
export function loadFromS3rverDir(dir: string, bucket: string, objs: readonly StoredObject[]): StoredObjects {
  const total = objs.reduce((n, o) => n + o.size, 0);
  if (total > MAX_STORED_BYTES) throw new Error(`server: stored holds the objects in memory, at most ${MAX_STORED_BYTES} bytes; these are ${total}`);
  return new StoredObjects(objs.map((o) => {
    const data = readFileSync(path.join(dir, bucket, `${o.key}._S3rver_object`));
    if (data.length !== o.size) throw new Error(`stored server: ${o.key} in s3rver's folder is ${data.length} bytes, seeded ${o.size}`);
    return { ...o, data };
  }));
}

export interface StoredS3Process {
  endpoint: string;
  port: number;
  pid: number;
  stop(): Promise<void>;
}

const CHILD_PATH = path.join(path.dirname(fileURLToPath(import.meta.url)), 'stored-s3-child.js');

/** Starts the stored server's process over the objects in s3rver's folder; resolves once it listens. */
export function startStoredS3Process(dir: string, bucket: string, objs: readonly StoredObject[]): Promise<StoredS3Process> {
  const child = spawn(process.execPath, [CHILD_PATH], { stdio: ['pipe', 'pipe', 'pipe'] });
  child.stdin.write(JSON.stringify({ dir, bucket, objects: objs }) + '\n');
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    child.stderr.on('data', (b: Buffer) => { if (err.length < 10_000) err += b.toString(); });
    child.once('exit', (code) => reject(new Error(`stored S3 server exited (${code}): ${err.trim()}`)));
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      const nl = out.indexOf('\n');
      if (nl < 0) return;
      const { port } = JSON.parse(out.slice(0, nl)) as { port: number };
      resolve({
        endpoint: `http://127.0.0.1:${port}`, port, pid: child.pid!,
        stop: () => stopChild(child),
      });
    });
  });
}
