/**
 * `sluice run` with three FastFile channels: one --cache-size/--max-inflight budget for the
 * process (issue 12), measured as the sluice process's peak RSS.
 * The built CLI (node dist/cli.js) against the local S3 server.
 */
import t from 'tap';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { localS3ForFile, runEnv, tmpRoot } from '../helpers/run.js';
import { runCli } from '../helpers/cli.js';
import { cleanupMount } from '../helpers/fuse.js';

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

const local = localS3ForFile(t, 'bkt');
const env = runEnv;
const common = local.flags;

t.test('three FastFile channels share one --cache-size/--max-inflight budget: peak RSS stays near one budget', async (t) => {
  const MiB = 1024 * 1024;
  const FILES = 13;
  const SIZE = 8 * MiB;
  const sums: Record<string, Record<string, string>> = {};
  for (const ch of ['a', 'b', 'c']) {
    sums[ch] = {};
    for (let i = 0; i < FILES; i++) {
      const body = Buffer.alloc(SIZE);
      for (let o = 0; o < SIZE; o += 4) body.writeUInt32LE((Math.imul(o + 1, 2654435761) ^ (i * 7919) ^ ch.charCodeAt(0)) >>> 0, o);
      sums[ch][`f${i}`] = sha256(body);
      await local.s3.putObject('bkt', `budget/${ch}/f${i}`, body);
    }
  }
  const root = await tmpRoot(t);
  for (const ch of ['a', 'b', 'c']) t.teardown(() => cleanupMount(path.join(root, 'input', 'data', ch)));
  // Reads every file of the three mounts (sha256 of each), then reports sluice's memory
  // (its parent): VmRSS before reading, VmHWM (peak RSS) after.
  const script = `
    const fs = require('fs'), crypto = require('crypto');
    const mem = (k) => Number(fs.readFileSync('/proc/' + process.ppid + '/status', 'utf8').split('\\n').find((l) => l.startsWith(k + ':')).slice(k.length + 1).trim().split(' ')[0]) * 1024;
    const before = mem('VmRSS');
    const sums = {};
    for (const ch of ['a', 'b', 'c']) {
      const dir = process.env['SM_CHANNEL_' + ch.toUpperCase()];
      sums[ch] = Object.fromEntries(fs.readdirSync(dir).map((f) => [f, crypto.createHash('sha256').update(fs.readFileSync(dir + '/' + f)).digest('hex')]));
    }
    process.stdout.write(JSON.stringify({ before, peak: mem('VmHWM'), sums }));`;
  const cacheSize = 96 * MiB;
  const maxInflight = 24 * MiB;
  const r = await runCli(['run', ...['a', 'b', 'c'].flatMap((ch) => ['--channel', `${ch}=s3://bkt/budget/${ch}/,mode=FastFile`]), '--root', root, ...common(),
    '--cache-size', String(cacheSize), '--max-inflight', String(maxInflight), '--part-size', '4MiB', '--', process.execPath, '-e', script], env());
  if (!t.equal(r.code, 0, r.stderr.slice(-4000))) return;
  const out = JSON.parse(r.stdout) as { before: number; peak: number; sums: Record<string, Record<string, string>> };
  t.same(out.sums, sums, 'every byte read through the three mounts matches the source');
  const grew = out.peak - out.before;
  t.comment(`sluice RSS ${(out.before / MiB).toFixed(0)} MiB before reading, peak ${(out.peak / MiB).toFixed(0)} MiB (grew ${(grew / MiB).toFixed(0)} MiB) for a budget of ${(cacheSize + maxInflight) / MiB} MiB; ${3 * FILES * SIZE / MiB} MiB read`);
  // Per-channel budgets (the old behaviour) let each of the three fill its own 96 MiB cache
  // (104 MiB read per channel): 288 MiB of cache alone. One budget: 96 MiB of cache plus
  // 24 MiB in flight, with 80 MiB of slack for the heap, garbage and the allocator.
  t.ok(grew < cacheSize + maxInflight + 80 * MiB, `peak RSS grew ${(grew / MiB).toFixed(0)} MiB, within the one budget plus slack`);
});
