#!/usr/bin/env node
/**
 * The receive path alone, without FUSE: CPU s/GB of this process (process.cpuUsage) for
 * reading one object with 8 MiB ranged GETs, 8 at a time, each body copied into (or landing
 * in) a reused 8 MiB slab, through
 *   undici-request   undici Pool.request, body consumed with for-await (the old data path);
 *   undici-dispatch  undici Pool.dispatch with a handler: no stream, no promise per chunk;
 *   wire             sluice's own client (src/s3/wire.ts) via S3ObjectClient.getRange(into).
 * Each mode runs in its own process; "fresh" is its first pass over the object, "warm" the second.
 * The GETs land in 8 slabs, or with --slabs N in N slabs taken in turn (a larger working set,
 * each slab's first write in the fresh pass); with --arena the slabs come from the block
 * cache's pool (populated in its region, src/native/addon.ts slabPool), else Buffer.alloc.
 * Every pass is sha256-verified. Usage: node scripts/receive-floor.mjs [--size MiB] [--rounds N]
 * [--modes wire,undici-request,...] [--slabs N] [--arena]
 */
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const dist = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'dist');
const PART = 8 * 1024 * 1024;
const PARALLEL = 8;

if (process.argv[2] === '--child') {
  const [, , , mode, endpoint, etag, sizeStr, want] = process.argv;
  const size = Number(sizeStr);
  const { createObjectClient } = await import(path.join(dist, 's3/s3-client.js'));
  const client = createObjectClient({ bucket: 'floor', endpoint, region: 'us-east-1', pathStyle: true, credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } });
  const { pool, reader, addressing } = await client.getDataPath();
  const sign = reader.o.sign;
  const count = Number(process.env.RECEIVE_FLOOR_SLABS ?? PARALLEL);
  const { slabPool } = await import(path.join(dist, 'memory/slab-pool.js'));
  const arena = process.env.RECEIVE_FLOOR_ARENA === '1' ? slabPool(count * PART, 256 * 1024) : undefined;
  const all = Array.from({ length: count }, () => (arena ? arena.acquire(PART).buf : Buffer.alloc(PART)));
  let turn = 0;
  /** The next PARALLEL slabs, in turn. */
  const nextSlabs = () => {
    const out = Array.from({ length: PARALLEL }, (_, i) => all[(turn + i) % count]);
    turn = (turn + PARALLEL) % count;
    return out;
  };
  const getPart = async (start, end, slab) => {
    const p = addressing.pathFor('obj');
    if (mode === 'wire') return client.getRange('obj', start, end, etag, { into: slab.subarray(0, end - start) });
    const headers = await sign(p, { range: `bytes=${start}-${end - 1}`, 'if-match': etag });
    if (mode === 'undici-request') {
      const res = await pool.request({ path: p, method: 'GET', headers });
      let off = 0;
      for await (const c of res.body) { c.copy(slab, off); off += c.length; }
      return slab.subarray(0, off);
    }
    return new Promise((resolve, reject) => {
      let off = 0;
      pool.dispatch({ path: p, method: 'GET', headers }, {
        onConnect() {}, onHeaders() { return true; },
        onData(c) { c.copy(slab, off); off += c.length; return true; },
        onComplete() { resolve(slab.subarray(0, off)); }, onError: reject,
      });
    });
  };
  const pass = async () => {
    const hash = createHash('sha256');
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    let hashCpu = 0;
    for (let s = 0; s < size; s += PART * PARALLEL) {
      const got = await Promise.all(nextSlabs().map((slab, i) => {
        const a = s + i * PART;
        return a < size ? getPart(a, Math.min(size, a + PART), slab) : undefined;
      }));
      const h0 = process.cpuUsage();
      for (const b of got) if (b) hash.update(b);
      const h = process.cpuUsage(h0);
      hashCpu += (h.user + h.system) / 1e6; // the check is ours, not the path's: left out
    }
    const secs = (performance.now() - t0) / 1000;
    const c = process.cpuUsage(c0);
    if (hash.digest('hex') !== want) throw new Error(`${mode}: sha256 mismatch`);
    return { cpuPerGB: ((c.user + c.system) / 1e6 - hashCpu) / (size / 1e9), mbps: size / 1e6 / secs };
  };
  const fresh = await pass();
  const warm = await pass();
  console.log(JSON.stringify({ fresh, warm }));
  await client.close();
  process.exit(0);
}

const args = process.argv.slice(2);
let sizeMiB = 512, rounds = 3, modes = ['undici-request', 'undici-dispatch', 'wire'];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--size') sizeMiB = Number(args[++i]);
  if (args[i] === '--rounds') rounds = Number(args[++i]);
  if (args[i] === '--modes') modes = args[++i].split(',');
  if (args[i] === '--slabs') process.env.RECEIVE_FLOOR_SLABS = String(Number(args[++i]));
  if (args[i] === '--arena') process.env.RECEIVE_FLOOR_ARENA = '1';
}
/** Node flags for the measured child processes, e.g. RECEIVE_FLOOR_NODE_ARGS='--cpu-prof --cpu-prof-dir=DIR'. */
const childArgs = (process.env.RECEIVE_FLOOR_NODE_ARGS ?? '').split(' ').filter(Boolean);
const { startLocalS3 } = await import(path.join(dist, 'local/s3-server.js'));
const s3 = await startLocalS3();
try {
  await s3.createBucket('floor');
  const body = randomBytes(sizeMiB * 1024 * 1024);
  const want = createHash('sha256').update(body).digest('hex');
  const etag = await s3.putObject('floor', 'obj', body);
  const res = {};
  for (let r = 0; r < rounds; r++) for (const m of modes) {
    const out = spawnSync(process.execPath, [...childArgs, fileURLToPath(import.meta.url), '--child', m, s3.endpoint, etag, String(body.length), want], { encoding: 'utf8', timeout: 600_000 });
    if (out.status !== 0) throw new Error(`${m}: ${out.stderr}`);
    (res[m] ??= []).push(JSON.parse(out.stdout.trim().split('\n').pop()));
  }
  const med = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
  console.log(`receive path alone, ${sizeMiB} MiB, 8 MiB GETs x ${PARALLEL}, ${rounds} rounds, medians (loadavg ${readFileSync('/proc/loadavg', 'utf8').trim()})`);
  console.log('| path | fresh CPU s/GB | fresh MB/s | warm CPU s/GB | warm MB/s |');
  console.log('|---|---|---|---|---|');
  for (const m of modes) {
    const xs = res[m];
    console.log(`| ${m} | ${med(xs.map((x) => x.fresh.cpuPerGB)).toFixed(2)} | ${med(xs.map((x) => x.fresh.mbps)).toFixed(0)} | ${med(xs.map((x) => x.warm.cpuPerGB)).toFixed(2)} | ${med(xs.map((x) => x.warm.mbps)).toFixed(0)} |`);
  }
} finally {
  await s3.stop();
}
