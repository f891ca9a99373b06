/**
 * The link limit: what the emulated S3 link delivers to raw parallel ranged GETs
 * with no filesystem, no cache and no FUSE in between. Every mode is reported as
 * a fraction of it.
 *
 * `connections` workers share one undici Pool of as many keep-alive connections
 * (one proxy token bucket each) and take `partSize` ranges of the dataset's large
 * objects from one queue, so every connection stays busy until the last part.
 * The parts are kept in memory (the limit dataset's size) and hashed after the
 * clock stops, so the figure is the link's, not this process's SHA-256 speed.
 * Requests are anonymous path-style GETs (s3rver accepts them): signing would add
 * client CPU the limit should not include. The limit's bytes are verified too.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'undici';
import { epochMs } from './read-plan.js';

/** Attempts per part: a dropped connection is retried as any S3 client would, and counted. */
const MAX_ATTEMPTS = 3;

export interface LimitResult {
  /** Parts that needed another attempt. */
  retries: number;
  bytes: number;
  seconds: number;
  mbps: number;
  requests: number;
  verified: boolean;
  mismatches: string[];
  /** The timed span (epoch ms). */
  startMs?: number;
  endMs?: number;
  /** Cores' worth of CPU the whole machine used over the span (the runner's ./machine-busy.ts). */
  machineBusyCores?: number;
}

/** What to fetch for the limit: the objects, through `endpoint`, in parts over `connections` connections. */
export interface LimitOptions {
  endpoint: string;
  bucket: string;
  objects: { key: string; size: number; sha256: string }[];
  connections: number;
  partSize: number;
  /** PEM file of the CA to trust for an https endpoint (a CA made for the run). */
  caFile?: string;
}

export async function measureLimit(opts: LimitOptions): Promise<LimitResult> {
  const pool = new Pool(opts.endpoint, { connections: opts.connections, pipelining: 1, ...(opts.caFile ? { connect: { ca: readFileSync(opts.caFile, 'utf8') } } : {}) });
  const parts: { obj: number; index: number; start: number; end: number }[] = [];
  const buffers: Buffer[][] = opts.objects.map((o) => new Array(Math.ceil(o.size / opts.partSize)));
  opts.objects.forEach((o, obj) => {
    for (let start = 0, index = 0; start < o.size; start += opts.partSize, index++) parts.push({ obj, index, start, end: Math.min(o.size, start + opts.partSize) });
  });
    const mismatches: string[] = [];
  let bytes = 0;
  let retries = 0;
  let next = 0;
  const t0 = epochMs();
  const worker = async () => {
    while (next < parts.length) {
      const p = parts[next++]!;
      const o = opts.objects[p.obj]!;
      const path = `/${opts.bucket}/${o.key.split('/').map(encodeURIComponent).join('/')}`;
      let body: Buffer | undefined;
      for (let attempt = 1; body === undefined; attempt++) {
        try {
          const res = await pool.request({ method: 'GET', path, headers: { range: `bytes=${p.start}-${p.end - 1}` } });
          const chunks: Buffer[] = [];
          for await (const c of res.body) chunks.push(c as Buffer);
          const b = Buffer.concat(chunks);
          if (res.statusCode !== 206 && !(res.statusCode === 200 && p.start === 0 && p.end === o.size)) throw new Error(`answered ${res.statusCode}`);
          if (b.length !== p.end - p.start) throw new Error(`returned ${b.length} bytes`);
          body = b;
        } catch (err) {
          if (attempt >= MAX_ATTEMPTS) throw new Error(`limit: GET ${o.key} ${p.start}-${p.end - 1} failed ${attempt} times: ${err instanceof Error ? err.message : String(err)}`);
          retries++;
        }
      }
      bytes += body.length;
      buffers[p.obj]![p.index] = body;
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(opts.connections, parts.length) }, worker));
  } finally {
    await pool.close();
  }
  const t1 = epochMs();
  const seconds = (t1 - t0) / 1000;
  // Verified after the clock stopped: hashing on this event loop would slow the link's own figure.
  opts.objects.forEach((o, i) => {
    const h = createHash('sha256');
    for (const b of buffers[i]!) h.update(b);
    if (h.digest('hex') !== o.sha256) mismatches.push(o.key);
    buffers[i] = [];
  });
  return { retries, bytes, seconds, mbps: bytes / 1e6 / seconds, requests: parts.length, verified: mismatches.length === 0, mismatches, startMs: t0, endMs: t1 };
}

/**
 * The same measurement with curl, the issue's own yardstick ("raw parallel curl
 * GETs"): `connections` curl processes, each fetching its share of the parts one
 * after another over one keep-alive connection (transfers chained with --next),
 * each part into its own file. The clock covers the processes' lifetime; the files
 * are hashed after it stops. A C client spends far less CPU per byte than a Node
 * one, so on a loaded 2-core machine this limit is the higher, more honest one.
 */
export async function measureLimitCurl(opts: LimitOptions): Promise<LimitResult> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-bench-limit-'));
  try {
    const parts: { obj: number; start: number; end: number; file: string }[] = [];
    opts.objects.forEach((o, obj) => {
      for (let start = 0; start < o.size; start += opts.partSize) parts.push({ obj, start, end: Math.min(o.size, start + opts.partSize), file: path.join(dir, `p${parts.length}`) });
    });
    const workers = Math.min(opts.connections, parts.length);
    const argv: string[][] = Array.from({ length: workers }, () => []);
    parts.forEach((p, i) => {
      const o = opts.objects[p.obj]!;
      const url = `${opts.endpoint}/${opts.bucket}/${o.key.split('/').map(encodeURIComponent).join('/')}`;
      const a = argv[i % workers]!;
      if (a.length > 0) a.push('--next');
      if (opts.caFile) a.push('--cacert', opts.caFile);
      a.push('-s', '-S', '-f', '--retry', String(MAX_ATTEMPTS - 1), '-r', `${p.start}-${p.end - 1}`, '-o', p.file, url);
    });
    const t0 = epochMs();
    await Promise.all(argv.map((args) => new Promise<void>((resolve, reject) => {
      const child = spawn('curl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
      let err = '';
      child.stderr.on('data', (b: Buffer) => { if (err.length < 2000) err += b.toString(); });
      child.on('error', reject);
      child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`limit: curl exited ${code}: ${err.trim()}`))));
    })));
    const t1 = epochMs();
    const seconds = (t1 - t0) / 1000;
    const mismatches: string[] = [];
    let bytes = 0;
    for (let obj = 0; obj < opts.objects.length; obj++) {
      const h = createHash('sha256');
      for (const p of parts.filter((x) => x.obj === obj)) {
        const b = await readFile(p.file);
        if (b.length !== p.end - p.start) throw new Error(`limit: curl fetched ${b.length} bytes of ${opts.objects[obj]!.key} ${p.start}-${p.end - 1}`);
        bytes += b.length;
        h.update(b);
      }
      if (h.digest('hex') !== opts.objects[obj]!.sha256) mismatches.push(opts.objects[obj]!.key);
    }
    return { retries: 0, bytes, seconds, mbps: bytes / 1e6 / seconds, requests: parts.length, verified: mismatches.length === 0, mismatches, startMs: t0, endMs: t1 };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
