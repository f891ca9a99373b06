/**
 * `sluice run` channel behaviour end to end (issue 12): empty prefixes fail alike in every
 * mode, and Pipe skips folder markers.
 * The built CLI (node dist/cli.js) against the local S3 server.
 */
import t from 'tap';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { localS3ForFile, runEnv, tmpRoot } from '../helpers/run.js';
import { runCli } from '../helpers/cli.js';
import { cleanupMount } from '../helpers/fuse.js';

const local = localS3ForFile(t, 'bkt');
const env = runEnv;
const common = local.flags;

t.test('an empty or mistyped prefix fails with the same one line in File, FastFile and Pipe; --allow-empty-channel starts it empty', async (t) => {
  await local.s3.putObject('bkt', 'only-markers/', Buffer.alloc(0));
  await local.s3.putObject('bkt', 'only-markers/sub/', Buffer.alloc(0));
  for (const prefix of ['trian/', 'only-markers/']) {
    const lines: string[] = [];
    for (const mode of ['File', 'FastFile', 'Pipe']) {
      const root = await tmpRoot(t);
      t.teardown(() => cleanupMount(path.join(root, 'input', 'data', 'train')));
      const marker = path.join(root, 'started');
      const r = await runCli(['run', '--channel', `train=s3://bkt/${prefix},mode=${mode}`, '--root', root, ...common(),
        '--', process.execPath, '-e', `require('fs').writeFileSync(${JSON.stringify(marker)}, 'x')`], { ...env(), SLUICE_LOG_LEVEL: 'silent' });
      t.equal(r.code, 2, `${prefix} ${mode}: exit 2`);
      t.equal(r.stderr.trim().split('\n').length, 1, `${prefix} ${mode}: one line: ${r.stderr}`);
      t.notOk(existsSync(marker), `${prefix} ${mode}: the script never started`);
      lines.push(r.stderr.trim());
    }
    t.match(lines[0], new RegExp(`^sluice: channel "train": no objects under s3://bkt/${prefix}\\. .*--allow-empty-channel`));
    t.same(lines, [lines[0], lines[0], lines[0]], `${prefix}: the same line in every mode`);
  }
  for (const mode of ['File', 'FastFile']) {
    const root = await tmpRoot(t);
    const dir = path.join(root, 'input', 'data', 'train');
    t.teardown(() => cleanupMount(dir));
    const r = await runCli(['run', '--channel', `train=s3://bkt/trian/,mode=${mode}`, '--allow-empty-channel', '--root', root, ...common(),
      '--', process.execPath, '-e', 'process.stdout.write(JSON.stringify(require("fs").readdirSync(process.env.SM_CHANNEL_TRAIN)))'], env());
    t.equal(r.code, 0, `${mode} with --allow-empty-channel: ${r.stderr}`);
    t.equal(r.stdout, '[]', `${mode}: the script sees an empty channel`);
  }
});

t.test('Pipe skips folder markers: RecordIO holds only data objects, and sharding counts only them', async (t) => {
  for (const k of ['pm/', 'pm/a', 'pm/sub/', 'pm/sub/b', 'pm/sub/c', 'pm/z/']) await local.s3.putObject('bkt', k, Buffer.from(k.endsWith('/') ? '' : `data of ${k}`));
  // Counts RecordIO records (MXNet framing: magic, cflag<<29|length, data, padding to 4) and returns their text.
  const script = `
    const fs = require('fs');
    const b = fs.readFileSync(process.env.SM_CHANNEL_TRAIN + '_0');
    const out = [];
    for (let at = 0; at < b.length;) {
      if (b.readUInt32LE(at) !== 0xced7230a) throw new Error('bad magic');
      const len = b.readUInt32LE(at + 4) & ((1 << 29) - 1);
      out.push(b.subarray(at + 8, at + 8 + len).toString());
      at += 8 + len + ((4 - (len % 4)) % 4);
    }
    process.stdout.write(JSON.stringify(out));`;
  const one = await runCli(['run', '--channel', 'train=s3://bkt/pm/,mode=Pipe,wrapper=RecordIO', '--epochs', '1', '--root', await tmpRoot(t), ...common(),
    '--', process.execPath, '-e', script], env());
  t.equal(one.code, 0, one.stderr);
  t.same(JSON.parse(one.stdout), ['data of pm/a', 'data of pm/sub/b', 'data of pm/sub/c'], 'no empty record for a marker');
  const counts: number[] = [];
  for (const h of [1, 2]) {
    const r = await runCli(['run', '--channel', 'train=s3://bkt/pm/,mode=Pipe,wrapper=RecordIO,distribution=ShardedByS3Key', '--epochs', '1',
      '--current-host', `algo-${h}`, '--host-count', '2', '--root', await tmpRoot(t), ...common(), '--', process.execPath, '-e', script], env());
    t.equal(r.code, 0, r.stderr);
    counts.push((JSON.parse(r.stdout) as string[]).length);
  }
  t.same(counts.sort(), [1, 2], '3 data objects over 2 hosts: 2 and 1 (markers not counted)');
});

t.test('issue 43 defect 2: --channel ".." or "." is refused with one line, and nothing of the job\'s root is removed', async (t) => {
  await local.s3.putObject('bkt', 'dots/a', Buffer.from('a'));
  for (const name of ['..', '.']) {
    const root = await tmpRoot(t);
    const keep = [path.join(root, 'input', 'config', 'hyperparameters.json'), path.join(root, 'input', 'data', 'val', 'v.bin')];
    for (const f of keep) {
      await mkdir(path.dirname(f), { recursive: true });
      await writeFile(f, '{}'); // valid JSON: the run reads input/config/hyperparameters.json
    }
    const r = await runCli(['run', '--channel', `train=s3://bkt/dots/`, '--channel', `${name}=s3://bkt/dots/`, '--root', root, ...common(),
      '--', process.execPath, '-e', '0'], { ...env(), SLUICE_LOG_LEVEL: 'silent' });
    t.equal(r.code, 2, `${name}: exit 2`);
    t.equal(r.stderr.trim().split('\n').length, 1, `${name}: one line: ${r.stderr}`);
    t.match(r.stderr, /Rename the channel/, `${name}: names the fix`);
    for (const f of keep) t.ok(existsSync(f), `${name}: ${path.relative(root, f)} is still there`);
  }
});

t.test('order-file per FastFile channel (issue 48): followed once the script writes it; a missing folder is one line at start; no global --order-file', async (t) => {
  for (const k of ['of/a.bin', 'of/b.bin', 'of/c.bin']) await local.s3.putObject('bkt', k, Buffer.from(`data of ${k}`));
  const root = await tmpRoot(t);
  const dir = path.join(root, 'input', 'data', 'train');
  t.teardown(() => cleanupMount(dir));
  const order = path.join(root, 'order.txt');
  // The script writes the order (renamed into place), then reads the files in it.
  const script = `
    const fs = require('fs'), p = require('path'), d = process.env.SM_CHANNEL_TRAIN;
    const names = ['c.bin', 'a.bin', 'b.bin'];
    fs.writeFileSync(${JSON.stringify(order)} + '.tmp', names.join('\\n') + '\\n');
    fs.renameSync(${JSON.stringify(order)} + '.tmp', ${JSON.stringify(order)});
    setTimeout(() => process.stdout.write(names.map((n) => fs.readFileSync(p.join(d, n), 'utf8')).join('|')), 300);`;
  const r = await runCli(['run', '--channel', `train=s3://bkt/of/,mode=FastFile,order-file=${order}`, '--root', root, ...common(), '--log-format', 'text',
    '--', process.execPath, '-e', script], { ...env(), SLUICE_LOG_LEVEL: 'info' });
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, 'data of of/c.bin|data of of/a.bin|data of of/b.bin', 'bytes through the mount');
  t.match(r.stderr, /order file read: prefetch follows it/, 'the channel read the order');

  const bad = await runCli(['run', '--channel', `train=s3://bkt/of/,mode=FastFile,order-file=${path.join(root, 'nowhere', 'o.txt')}`, '--root', await tmpRoot(t), ...common(),
    '--', process.execPath, '-e', '0'], { ...env(), SLUICE_LOG_LEVEL: 'silent' });
  t.equal(bad.code, 2, 'exit 2');
  t.match(bad.stderr.trim(), /^sluice: the folder of --order-file .*nowhere\/o\.txt does not exist\. /, `one line: ${bad.stderr}`);
  t.equal(bad.stderr.trim().split('\n').length, 1);

  const global = await runCli(['run', '--channel', 'train=s3://bkt/of/,mode=FastFile', '--order-file', order, '--root', await tmpRoot(t), ...common(), '--', process.execPath, '-e', '0'], { ...env(), SLUICE_LOG_LEVEL: 'silent' });
  t.equal(global.code, 2, `sluice run takes order-file per channel only: ${global.stderr.trim()}`);
});
