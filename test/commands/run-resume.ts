/**
 * `sluice run` Pipe resume end to end (issue 48): an uninterrupted run; a run whose script
 * is "preempted" part way into epoch 1 and saves the progress file's resume value; a run
 * resumed from it, whose bytes are the uninterrupted run's from that object on, byte for
 * byte, with the same seeded order; bad resume values fail with one line and exit 2.
 * The built CLI (node dist/cli.js) against the local S3 server.
 */
import t from 'tap';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseInputDataConfig } from '../../src/channels/input-config.js';
import { shuffled } from '../../src/channels/shuffle.js';
import { generateBytes } from '../../src/local/dataset.js';
import { framedLength } from '../../src/pipe/recordio.js';
import type { PipeProgress } from '../../src/pipe/resume.js';
import { localS3ForFile, runEnv, tmpRoot } from '../helpers/run.js';
import { runCli } from '../helpers/cli.js';

const local = localS3ForFile(t, 'bkt');
const SEED = 11;
/** 10 objects, 2.5 MB: more than a pipe buffer (1 MiB), so a stopped reader leaves objects undelivered. */
const SIZES = [250_001, 249_999, 250_013, 1, 250_100, 262_144, 250_007, 99_999, 400_003, 250_003];
const KEYS = SIZES.map((_, i) => `ds/part-${String(i).padStart(2, '0')}`);
const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

t.before(async () => {
  for (const [i, key] of KEYS.entries()) await local.s3.putObject('bkt', key, generateBytes(key, SIZES[i]!));
});

/**
 * The training script: writes the data folder's listing, then reads each CHANNEL:EPOCH of READ
 * into OUT/<channel>-<epoch>.bin; with STOP_AT, reads only that many bytes of the last one, waits
 * for its progress file to settle, copies it to OUT/progress.json and exits 3 (as a preempted job).
 */
const SCRIPT = `
const fs = require('fs'), path = require('path');
const out = process.env.OUT, data = path.dirname(process.env.SM_CHANNEL_TRAIN);
fs.writeFileSync(path.join(out, 'listing.json'), JSON.stringify(fs.readdirSync(data)));
const reads = process.env.READ.split(',');
for (const [i, r] of reads.entries()) {
  const [ch, e] = r.split(':');
  const stopAt = i === reads.length - 1 && process.env.STOP_AT ? Number(process.env.STOP_AT) : Infinity;
  const fd = fs.openSync(path.join(data, ch + '_' + e), 'r');
  const parts = [];
  let got = 0;
  const buf = Buffer.alloc(1 << 16);
  for (;;) {
    const n = fs.readSync(fd, buf, 0, Math.min(buf.length, stopAt - got));
    if (n === 0) break;
    parts.push(Buffer.from(buf.subarray(0, n)));
    got += n;
  }
  fs.writeFileSync(path.join(out, ch + '-' + e + '.bin'), Buffer.concat(parts));
  if (stopAt !== Infinity) {
    // The pipe is full now; the progress file is rewritten within 500 ms of a change.
    const progress = path.join(data, ch + '.progress.json');
    let last = '', same = 0;
    for (let i = 0; i < 100 && same < 2; i++) {
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300);
      const now = fs.existsSync(progress) ? fs.readFileSync(progress, 'utf8').replace(/"updated":"[^"]*"/, '') : '';
      same = now !== '' && now === last ? same + 1 : 0;
      last = now;
    }
    fs.copyFileSync(progress, path.join(out, 'progress.json'));
    process.exit(3);
  }
  fs.closeSync(fd);
}`;

interface Run { code: number | null; stderr: string; out: string; root: string }

async function sluiceRun(t: Parameters<typeof tmpRoot>[0], channels: string[], env: Record<string, string>): Promise<Run> {
  const root = await tmpRoot(t);
  const out = path.join(root, 'out');
  await mkdir(out);
  const r = await runCli(['run', ...channels.flatMap((c) => ['--channel', c]), '--epochs', '2', '--root', root, ...local.flags(), '--', process.execPath, '-e', SCRIPT],
    { ...runEnv(), OUT: out, ...env });
  return { code: r.code, stderr: r.stderr, out, root };
}

/** Epoch 1's order in sluice: the keys sorted, then shuffled with (seed, 1). */
const ORDER1 = shuffled(KEYS.map((_, i) => i), SEED, 1);
const onWire = (wrapper: 'None' | 'RecordIO', i: number): number => (wrapper === 'RecordIO' ? framedLength(SIZES[i]!) : SIZES[i]!);
const skippedBytes = (wrapper: 'None' | 'RecordIO', n: number): number => ORDER1.slice(0, n).reduce((s, i) => s + onWire(wrapper, i), 0);

const readProgress = async (root: string, channel: string): Promise<PipeProgress> => JSON.parse(await readFile(path.join(root, 'input', 'data', `${channel}.progress.json`), 'utf8')) as PipeProgress;

t.test('stopped part way into epoch 1, resumed from the progress file (SLUICE_RESUME_TRAIN) and from resume=1:4 (RecordIO): the uninterrupted bytes from there on', async (t) => {
  // Two channels over the same objects: train (RecordWrapperType None), rec (RecordIO).
  const train = `train=s3://bkt/ds/,mode=Pipe,seed=${SEED}`;
  const rec = `rec=s3://bkt/ds/,mode=Pipe,seed=${SEED},wrapper=RecordIO`;
  const full = await sluiceRun(t, [train, rec], { READ: 'train:0,train:1,rec:0,rec:1' });
  t.equal(full.code, 0, full.stderr);
  const epoch1: Record<string, Buffer> = {};
  for (const [ch, wrapper] of [['train', 'None'], ['rec', 'RecordIO']] as const) {
    epoch1[ch] = await readFile(path.join(full.out, `${ch}-1.bin`));
    t.equal(epoch1[ch]!.length, skippedBytes(wrapper, 10), `${ch}: epoch 1 whole`);
    t.match(await readProgress(full.root, ch), { channel: ch, epoch: 1, objectsInEpoch: 10, objectsDelivered: 10, bytesDelivered: epoch1[ch]!.length, epochDone: true, resume: '2:0', resumedFrom: '0:0' });
  }

  // Preempted: epoch 0 read, then 100 000 bytes of epoch 1.
  const stopped = await sluiceRun(t, [train], { READ: 'train:0,train:1', STOP_AT: '100000' });
  t.equal(stopped.code, 3, stopped.stderr);
  const p = JSON.parse(await readFile(path.join(stopped.out, 'progress.json'), 'utf8')) as PipeProgress;
  t.equal(p.epoch, 1);
  t.equal(p.epochDone, false);
  const n = p.objectsDelivered;
  t.ok(n >= 0 && n < 10, `${n} objects delivered`);
  t.equal(p.resume, `1:${n}`);
  const skipped = skippedBytes('None', n);
  t.ok(p.bytesDelivered >= 100_000 && p.bytesDelivered >= skipped && p.bytesDelivered < skipped + onWire('None', ORDER1[n]!),
    `bytes delivered ${p.bytesDelivered}: objects 0..${n - 1} entirely, object ${n} not`);
  t.ok(p.bytesDelivered <= 100_000 + 2 * 1024 * 1024, 'no more than what was read plus the pipe buffer and a part');

  // Resumed: train by the environment, rec by its own setting.
  const resumed = await sluiceRun(t, [train, `${rec},resume=1:4`], { READ: 'train:1,rec:1', SLUICE_RESUME_TRAIN: p.resume });
  t.equal(resumed.code, 0, resumed.stderr);
  const listing = JSON.parse(await readFile(path.join(resumed.out, 'listing.json'), 'utf8')) as string[];
  t.notOk(listing.includes('train_0') || listing.includes('rec_0'), 'no FIFO for epoch 0');
  for (const [ch, wrapper, at, from] of [['train', 'None', n, p.resume], ['rec', 'RecordIO', 4, '1:4']] as const) {
    const tail = await readFile(path.join(resumed.out, `${ch}-1.bin`));
    const skip = skippedBytes(wrapper, at);
    t.equal(tail.length, epoch1[ch]!.length - skip, `${ch}: the first ${at} objects left out`);
    t.equal(sha(tail), sha(epoch1[ch]!.subarray(skip)), `${ch}: byte for byte the uninterrupted epoch 1 from object ${at} on`);
    t.match(await readProgress(resumed.root, ch), { epoch: 1, objectsDelivered: 10, bytesDelivered: tail.length, epochDone: true, resume: '2:0', resumedFrom: from });
  }
});

t.test('bad resume values: one line, exit 2, the script never starts', async (t) => {
  const base = `train=s3://bkt/ds/,mode=Pipe,seed=${SEED}`;
  const root = await tmpRoot(t);
  const cases: [string, string[], Record<string, string>, RegExp][] = [
    ['resume=1:x', ['--channel', `${base},resume=1:x`], {}, /^sluice: --channel train: resume "1:x" is not a resume point\. Write EPOCH:OBJECT/],
    ['SLUICE_RESUME_TRAIN=abc', ['--channel', base], { SLUICE_RESUME_TRAIN: 'abc' }, /^sluice: SLUICE_RESUME_TRAIN "abc" is not a resume point/],
    ['past the end', ['--channel', base], { SLUICE_RESUME_TRAIN: '1:11' }, /resume point 1:11 is past the end of epoch 1, which has 10 objects on this host/],
  ];
  for (const [what, args, env, re] of cases) {
    const marker = path.join(root, 'started');
    const r = await runCli(['run', ...args, '--epochs', '2', '--root', root, ...local.flags(), '--', process.execPath, '-e', `require('fs').writeFileSync(${JSON.stringify(marker)}, 'x')`],
      { ...runEnv(), SLUICE_LOG_LEVEL: 'silent', ...env });
    t.equal(r.code, 2, `${what}: exit 2`);
    t.equal(r.stderr.trim().split('\n').length, 1, `${what}: one line: ${r.stderr}`);
    t.match(r.stderr.trim(), re, what);
    t.notOk(existsSync(marker), `${what}: the script never started`);
  }
  // The JSON form, parsed in process (the same path as --input-data-config).
  const channel = (resume: unknown) => [{ ChannelName: 'train', InputMode: 'Pipe', DataSource: { S3DataSource: { S3Uri: 's3://bkt/ds/' } }, Sluice: { ResumeFrom: resume } }];
  t.same(parseInputDataConfig(channel('3:7')).channels[0]!.resumeFrom, { epoch: 3, object: 7, record: 0 });
  t.throws(() => parseInputDataConfig(channel('1-2')), /^channel "train": Sluice\.ResumeFrom "1-2" is not a resume point$/);
});
