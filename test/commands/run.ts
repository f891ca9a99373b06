/**
 * `sluice run` end to end: the built CLI (node dist/cli.js) against the local S3 server,
 * with a `node -e` training command that reports what it sees.
 */
import t from 'tap';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, readdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { seedDataset, type SeededObject } from '../../src/local/dataset.js';
import { startLocalS3, type LocalS3 } from '../../src/local/s3-server.js';
import { runEnv, s3Flags, tmpRoot } from '../helpers/run.js';
import { runCli, startCli, waitExit } from '../helpers/cli.js';
import { cleanupMount } from '../helpers/fuse.js';
import { startFaultProxy } from '../helpers/fault-proxy.js';
import { spawn } from 'node:child_process';
import { CLI } from '../helpers/cli.js';
import { epochUnits, run as runCommand } from '../../src/commands/run.js';
import { isUserError, type SluiceError } from '../../src/errors.js';
import { shuffled } from '../../src/channels/shuffle.js';
import type { ChannelConfig } from '../../src/channels/input-config.js';
import type { HostIdentity } from '../../src/channels/hosts.js';

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

let s3: LocalS3;
let seeded: SeededObject[];
let valBodies: Buffer[];

t.before(async () => {
  s3 = await startLocalS3();
  await s3.createBucket('bkt');
  seeded = await seedDataset(s3, 'bkt', 'train/', { smallFiles: { count: 12, size: 3000, folders: 3 }, largeFiles: { count: 1, size: 300_000 }, seed: 5 });
  valBodies = [];
  for (let i = 0; i < 3; i++) {
    const body = Buffer.from(`validation object ${i}\n`.repeat(50 + i));
    valBodies.push(body);
    await s3.putObject('bkt', `val/part-${i}`, body);
  }
});
t.teardown(() => s3?.stop());

const env = runEnv;
const common = () => s3Flags(s3);

/** A training command that records the SM_* variables, the config files and the Pipe bytes. */
const REPORTER = `
const fs = require('fs'), path = require('path'), crypto = require('crypto');
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('SM_')));
const cfg = path.join(process.env.SM_INPUT_CONFIG_DIR);
const out = { env,
  inputdataconfig: JSON.parse(fs.readFileSync(path.join(cfg, 'inputdataconfig.json'), 'utf8')),
  resourceconfig: JSON.parse(fs.readFileSync(path.join(cfg, 'resourceconfig.json'), 'utf8')),
  hyperparameters: fs.readFileSync(path.join(cfg, 'hyperparameters.json'), 'utf8'),
  train: fs.readdirSync(process.env.SM_CHANNEL_TRAIN, { recursive: true }).map(String).sort(),
};
if (process.env.SM_CHANNEL_VAL) out.val = fs.readFileSync(process.env.SM_CHANNEL_VAL + '_0').toString('base64');
fs.writeFileSync(process.argv[1], JSON.stringify(out));
process.exit(Number(process.argv[2]));
`;

t.test('the child sees SageMaker\'s environment and files, and its exit code propagates', async (t) => {
  const root = await tmpRoot(t);
  const report = path.join(root, 'report.json');
  const channels = path.join(root, 'channels.json');
  await writeFile(channels, JSON.stringify([
    { ChannelName: 'train', DataSource: { S3DataSource: { S3Uri: 's3://bkt/train/', S3DataType: 'S3Prefix', S3DataDistributionType: 'FullyReplicated' } }, ContentType: 'application/octet-stream' },
  ]));
  const r = await runCli(['run', '--input-data-config', channels, '--channel', 'val=s3://bkt/val/,mode=Pipe', '--epochs', '1', '--root', root, ...common(),
    '--', process.execPath, '-e', REPORTER, report, '3'], env());
  t.equal(r.code, 3, `exit code propagates (stderr: ${r.stderr})`);
  const got = JSON.parse(await readFile(report, 'utf8'));
  const data = path.join(root, 'input', 'data');
  // The toolkit's strings: compact JSON with sorted keys (mapping.to_env_vars).
  const want: Record<string, string> = {
    SM_CHANNEL_TRAIN: path.join(data, 'train'),
    SM_CHANNEL_VAL: path.join(data, 'val'),
    SM_CHANNELS: '["train","val"]',
    SM_HOSTS: '["algo-1"]',
    SM_CURRENT_HOST: 'algo-1',
    SM_INPUT_DATA_CONFIG: '{"train":{"ContentType":"application/octet-stream","RecordWrapperType":"None","S3DistributionType":"FullyReplicated","TrainingInputMode":"File"},"val":{"RecordWrapperType":"None","S3DistributionType":"FullyReplicated","TrainingInputMode":"Pipe"}}',
    SM_RESOURCE_CONFIG: `{"current_group_name":"homogeneousCluster","current_host":"algo-1","current_instance_type":"local","hosts":["algo-1"],"instance_groups":[{"hosts":["algo-1"],"instance_group_name":"homogeneousCluster","instance_type":"local"}],"network_interface_name":"${got.env.SM_NETWORK_INTERFACE_NAME}"}`,
    SM_INPUT_DIR: path.join(root, 'input'),
    SM_INPUT_CONFIG_DIR: path.join(root, 'input', 'config'),
    SM_MODEL_DIR: path.join(root, 'model'),
    SM_OUTPUT_DIR: path.join(root, 'output'),
    SM_OUTPUT_DATA_DIR: path.join(root, 'output', 'data'),
    SM_OUTPUT_INTERMEDIATE_DIR: path.join(root, 'output', 'intermediate'),
    SM_HPS: '{}',
    SM_USER_ARGS: '[]',
    SM_FRAMEWORK_PARAMS: '{}',
    SM_LOG_LEVEL: '20',
    SM_NUM_GPUS: '0',
    SM_NUM_NEURONS: '0',
    SM_NUM_CPUS: String(os.cpus().length),
    SM_CURRENT_INSTANCE_TYPE: 'local',
    SM_CURRENT_INSTANCE_GROUP: 'homogeneousCluster',
    SM_CURRENT_INSTANCE_GROUP_HOSTS: '["algo-1"]',
    SM_INSTANCE_GROUPS: '["homogeneousCluster"]',
    SM_INSTANCE_GROUPS_DICT: '{"homogeneousCluster":{"hosts":["algo-1"],"instance_group_name":"homogeneousCluster","instance_type":"local"}}',
    SM_DISTRIBUTION_INSTANCE_GROUPS: '[]',
    SM_IS_HETERO: 'false',
    SM_MODULE_NAME: 'None',
    SM_MODULE_DIR: path.join(root, 'code'),
    SM_USER_ENTRY_POINT: '',
    SM_FRAMEWORK_MODULE: '',
  };
  t.same(Object.keys(got.env).sort(), [...Object.keys(want), 'SM_NETWORK_INTERFACE_NAME', 'SM_TRAINING_ENV'].sort(), 'exactly the toolkit\'s variables');
  for (const [k, v] of Object.entries(want)) t.equal(got.env[k], v, k);
  t.match(got.env.SM_NETWORK_INTERFACE_NAME, /^\S+$/);
  t.match(JSON.parse(got.env.SM_TRAINING_ENV), { hosts: ['algo-1'], current_host: 'algo-1', channel_input_dirs: { train: want.SM_CHANNEL_TRAIN, val: want.SM_CHANNEL_VAL } });
  t.same(got.inputdataconfig, {
    train: { ContentType: 'application/octet-stream', TrainingInputMode: 'File', S3DistributionType: 'FullyReplicated', RecordWrapperType: 'None' },
    val: { TrainingInputMode: 'Pipe', S3DistributionType: 'FullyReplicated', RecordWrapperType: 'None' },
  });
  t.same(JSON.parse(got.env.SM_RESOURCE_CONFIG), got.resourceconfig, 'SM_RESOURCE_CONFIG is resourceconfig.json');
  t.equal(got.hyperparameters, '{}', 'hyperparameters.json is written, {} without hyperparameters');
  const files = seeded.map((o) => o.key.slice('train/'.length));
  t.same(got.train.filter((f: string) => files.includes(f)).sort(), files.sort(), 'File channel downloaded before the command started');
  for (const o of seeded) t.equal(sha256(await readFile(path.join(data, 'train', o.key.slice('train/'.length)))), o.sha256);
  t.ok(Buffer.from(got.val, 'base64').equals(Buffer.concat(valBodies)), 'Pipe epoch 0 is the objects in key order');
  t.notOk(existsSync(path.join(data, 'val_0')), 'the FIFO is removed');
});

t.test('a child killed by a signal gives 128 + n; a missing command 127', async (t) => {
  const root = await tmpRoot(t);
  const r = await runCli(['run', '--channel', 'train=s3://bkt/val/', '--root', root, ...common(), '--', process.execPath, '-e', 'process.kill(process.pid, "SIGKILL")'], env());
  t.equal(r.code, 137, r.stderr);
  const m = await runCli(['run', '--channel', 'train=s3://bkt/val/', '--root', root, ...common(), '--', 'no-such-command-sluice'], env());
  t.equal(m.code, 127);
  t.match(m.stderr, /cannot start the training command "no-such-command-sluice" \(ENOENT\)/);
});

t.test('ShardedByS3Key across 4 simulated hosts: disjoint downloads whose union is every object', async (t) => {
  const union: string[] = [];
  // The 4 hosts run at once, as they would in a cluster.
  await Promise.all([1, 2, 3, 4].map(async (h) => {
    const root = await tmpRoot(t);
    const r = await runCli(['run', '--channel', 'train=s3://bkt/train/,distribution=ShardedByS3Key', '--root', root, '--current-host', `algo-${h}`, '--host-count', '4', ...common(),
      '--', process.execPath, '-e', 'process.exit(0)'], env());
    t.equal(r.code, 0, r.stderr);
    const files = (await readdir(path.join(root, 'input', 'data', 'train'), { recursive: true, withFileTypes: true })).filter((d) => d.isFile());
    t.ok(files.length > 0, `host ${h} has a share`);
    union.push(...files.map((d) => path.relative(path.join(root, 'input', 'data', 'train'), path.join(d.parentPath, d.name))));
    t.same(JSON.parse(await readFile(path.join(root, 'input', 'config', 'resourceconfig.json'), 'utf8')).current_host, `algo-${h}`);
  }));
  t.equal(new Set(union).size, union.length, 'disjoint');
  t.same(union.sort(), seeded.map((o) => o.key.slice('train/'.length)).sort(), 'complete');
});

t.test('SIGTERM is passed to the child, then FIFOs are removed and sluice exits 128 + 15', async (t) => {
  const root = await tmpRoot(t);
  // The handler before "ready", as in test/reliability/crash.ts: the test signals once it reads that line.
  const child = `process.on('SIGTERM', () => process.exit(143)); console.log('ready ' + process.pid); setInterval(() => {}, 1000);`;
  const running = await startCli(['run', '--channel', 'val=s3://bkt/val/,mode=Pipe', '--root', root, ...common(), '--', process.execPath, '-e', child], env());
  t.teardown(() => { running.child.kill('SIGKILL'); });
  t.ok(existsSync(path.join(root, 'input', 'data', 'val_0')), 'the FIFO exists while the child runs');
  running.child.kill('SIGTERM');
  const { code } = await waitExit(running);
  t.equal(code, 143);
  t.notOk(existsSync(path.join(root, 'input', 'data', 'val_0')), 'the FIFO is removed');
});

t.test('bad configs and bad input get one-line errors and exit 2', async (t) => {
  const root = await tmpRoot(t);
  const bad = path.join(root, 'bad.json');
  await writeFile(bad, '[{"ChannelName": "train", "DataSource": {"S3DataSource": {"S3Uri": "s3://bkt/train/"}}, "InputMode": "pipe"}]');
  // Through the CLI: the one-line output and the exit code.
  const cases: [string[], RegExp][] = [
    [['--input-data-config', bad], /^sluice: channel "train": InputMode "pipe" is not valid\. Did you mean Pipe\? Values are case-sensitive$/],
    [['--channel', 'train=s3://bkt/nothing-here/'], /^sluice: channel "train": no objects under s3:\/\/bkt\/nothing-here\//],
  ];
  for (const [args, re] of cases) {
    const r = await runCli(['run', ...args, '--root', root, ...common(), '--', process.execPath, '-e', 'process.exit(0)'], { ...env(), SLUICE_LOG_LEVEL: 'silent' });
    t.equal(r.code, 2, args.join(' '));
    t.match(r.stderr.trim(), re, args.join(' '));
    t.equal(r.stderr.trim().split('\n').length, 1, `one line: ${r.stderr}`);
  }
  const noCmd = await runCli(['run', '--channel', 'train=s3://bkt/train/', '--root', root], env());
  t.equal(noCmd.code, 2);
  t.match(noCmd.stderr, /^sluice: no training command given\. Add it after --/);

  // In process (no S3 needed): the error each bad input raises, all user errors on one line.
  const missingAttrs = path.join(root, 'aug.json');
  await writeFile(missingAttrs, JSON.stringify([{ ChannelName: 'aug', InputMode: 'Pipe', DataSource: { S3DataSource: { S3Uri: 's3://bkt/m.jsonl', S3DataType: 'AugmentedManifestFile' } } }]));
  const inProcess: [string[], RegExp][] = [
    [['--input-data-config', missingAttrs], /^channel "aug": AugmentedManifestFile needs AttributeNames\. /],
    [['--input-data-config', path.join(root, 'nope.json')], /^cannot read --input-data-config .*nope\.json \(ENOENT\)/],
    [['--channel', 'train=s3://bkt/train/,mode=Stream'], /^--channel train: mode "Stream" is not valid\. Use one of File, FastFile, Pipe$/],
    [['--channel', 'train=s3://bkt/train/', '--channel', 'train=s3://bkt/val/'], /^channel "train" is defined twice/],
    [['--channel', 'train=s3://bkt/train/,distribution=ShardedByS3Key', '--current-host', 'algo-9', '--host-count', '2'], /^--current-host\/--hosts: current host "algo-9" is not in hosts/],
    [['--channel', 'train=s3://bkt/train/', '--epochs', '0'], /^epochs must be at least 1/],
    [['--channel', 'train=s3://bkt/train/', '--input-mode', 'Stream'], /^input-mode must be File, FastFile or Pipe/],
    [['--channel', 'train=s3://bkt/train/', 'stray'], /^unexpected argument "stray"\. Put the training command after --/],
    [[], /^no channels defined\. Pass --input-data-config FILE or --channel/],
  ];
  for (const [args, re] of inProcess) {
    const what = args.join(' ') || '(no channels)';
    try {
      await runCommand([...args, '--root', root, '--metrics-port=-1', '--log-level', 'silent', '--', 'true']);
      t.fail(`${what}: no error`);
    } catch (err) {
      t.ok(isUserError(err), `${what}: a user error`);
      t.match((err as SluiceError).oneLine(), re, what);
      t.notOk((err as SluiceError).oneLine().includes('\n'), `${what}: one line`);
    }
  }
});

t.test('--help explains the command', async (t) => {
  const r = await runCli(['run', '--help'], env());
  t.equal(r.code, 0);
  t.match(r.stdout, /Usage: sluice run/);
  t.match(r.stdout, /--input-data-config/);
  t.match(r.stdout, /JOB_COMPLETION_INDEX/);
});

/** Reads FIFOs <SM_CHANNEL_VAL>_0 .. _{n-1} in turn (waiting, bounded, for each to appear). */
const PIPE_READER = `
const fs = require('fs');
const [report, epochs] = [process.argv[1], Number(process.argv[2])];
const out = [];
for (let e = 0; e < epochs; e++) {
  const fifo = process.env.SM_CHANNEL_VAL + '_' + e;
  for (let i = 0; i < 600 && !fs.existsSync(fifo); i++) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
  out.push(fs.readFileSync(fifo).toString('base64'));
}
fs.writeFileSync(report, JSON.stringify(out));
`;

t.test('Pipe with a shuffle seed: each epoch is the objects shuffled by (seed, epoch)', async (t) => {
  const root = await tmpRoot(t);
  const report = path.join(root, 'report.json');
  const r = await runCli(['run', '--channel', 'val=s3://bkt/val/,mode=Pipe,seed=11', '--epochs', '3', '--root', root, ...common(),
    '--', process.execPath, '-e', PIPE_READER, report, '3'], env());
  t.equal(r.code, 0, r.stderr);
  const epochs = (JSON.parse(await readFile(report, 'utf8')) as string[]).map((b) => Buffer.from(b, 'base64'));
  const orders: number[][] = [];
  for (let e = 0; e < 3; e++) {
    const order = shuffled([0, 1, 2], 11, e);
    orders.push(order);
    t.ok(epochs[e]!.equals(Buffer.concat(order.map((i) => valBodies[i]!))), `epoch ${e} is in order ${order}`);
  }
});

t.test('AugmentedManifestFile with RecordIO through sluice run', async (t) => {
  const root = await tmpRoot(t);
  await s3.putObject('bkt', 'aug/train.jsonl', Buffer.from('{"source-ref": "s3://bkt/val/part-1", "class": 1}\n{"source-ref": "s3://bkt/val/part-0", "class": {"k": "v"}}\n'));
  const report = path.join(root, 'report.json');
  const r = await runCli(['run', '--channel', 'val=s3://bkt/aug/train.jsonl,type=AugmentedManifestFile,attributes=source-ref|class,mode=Pipe,wrapper=RecordIO', '--epochs', '1', '--root', root, ...common(),
    '--', process.execPath, '-e', PIPE_READER, report, '1'], env());
  t.equal(r.code, 0, r.stderr);
  const bytes = Buffer.from((JSON.parse(await readFile(report, 'utf8')) as string[])[0]!, 'base64');
  // Parse RecordIO: magic, length word (cflag in the top 3 bits), data, padding to 4 bytes.
  const records: Buffer[] = [];
  for (let off = 0; off < bytes.length;) {
    t.equal(bytes.readUInt32LE(off), 0xced7230a, 'magic');
    const len = bytes.readUInt32LE(off + 4) & ((1 << 29) - 1);
    records.push(bytes.subarray(off + 8, off + 8 + len));
    off += 8 + len + ((4 - (len % 4)) % 4);
  }
  t.same(records.map((b) => b.toString()), [valBodies[1]!.toString(), '1', valBodies[0]!.toString(), '{"k":"v"}']);
});

t.test('FastFile: the prefix is mounted for the child and unmounted after', async (t) => {
  const root = await tmpRoot(t);
  const mnt = path.join(root, 'input', 'data', 'ff');
  t.teardown(() => cleanupMount(mnt));
  const o = seeded.find((x) => x.key.includes('large/'))!;
  const script = `
    const fs = require('fs'), crypto = require('crypto');
    const file = process.env.SM_CHANNEL_FF + '/' + process.argv[1];
    process.stdout.write(crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex'));`;
  const r = await runCli(['run', '--channel', 'ff=s3://bkt/train/,mode=FastFile', '--root', root, ...common(), '--cache-size', '64MiB',
    '--', process.execPath, '-e', script, o.key.slice('train/'.length)], env());
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, o.sha256, 'bytes read through the mount match the source');
  t.notOk((await readFile('/proc/mounts', 'utf8')).includes(mnt), 'unmounted');
});

t.test('epochUnits: 4 hosts, per epoch disjoint and complete; same seed same order, new epoch new order', async (t) => {
  const units = Array.from({ length: 40 }, (_, i) => ({ key: `k/${String(i).padStart(3, '0')}`, size: 100 + (i % 7) * 10, items: [] }));
  const c: ChannelConfig = { name: 'c', s3Uri: 's3://bkt/k/', s3DataType: 'S3Prefix', distribution: 'ShardedByS3Key', inputMode: 'Pipe', recordWrapper: 'None', compression: 'None', seed: 5 };
  const host = (i: number): HostIdentity => ({ currentHost: `algo-${i + 1}`, hosts: ['algo-1', 'algo-2', 'algo-3', 'algo-4'], hostIndex: i, hostCount: 4, source: 'flags' });
  for (let epoch = 0; epoch < 3; epoch++) {
    const keys = [0, 1, 2, 3].flatMap((h) => epochUnits(units, c, host(h), epoch).map((u) => u.key));
    t.equal(new Set(keys).size, 40, `epoch ${epoch}: disjoint`);
    t.same(keys.slice().sort(), units.map((u) => u.key), `epoch ${epoch}: complete`);
  }
  t.same(epochUnits(units, c, host(0), 1), epochUnits(units, c, host(0), 1));
  t.notSame(epochUnits(units, c, host(0), 0).map((u) => u.key), epochUnits(units, c, host(0), 1).map((u) => u.key));
  const noSeed = { ...c, seed: undefined, distribution: 'FullyReplicated' as const };
  t.same(epochUnits(units, noSeed, host(2), 4).map((u) => u.key), units.map((u) => u.key), 'without a seed: key order, every epoch');
});

t.test('SIGTERM during a File download stops it, leaves no partial file and never starts the command', async (t) => {
  const root = await tmpRoot(t);
  const proxy = await startFaultProxy(s3.port);
  t.teardown(() => proxy.close());
  const marker = path.join(root, 'started');
  const args = ['run', '--channel', 'train=s3://bkt/train/', '--root', root, '--endpoint', proxy.endpoint, '--path-style', '--metrics-port=-1', '--progress', 'log',
    '--', process.execPath, '-e', `require('fs').writeFileSync(${JSON.stringify(marker)}, 'x')`];
  // Every request waits 4 s: the listing gets through, and when the progress line shows, the
  // GETs are still waiting, however slow this machine is.
  proxy.set({ latencyMs: 4000 });
  const child = spawn(process.execPath, [CLI, ...args], { env: { ...env(), SLUICE_LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
  t.teardown(() => { child.kill('SIGKILL'); });
  let stderr = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no File mode progress line: ${stderr}`)), 60_000);
    child.stderr!.on('data', (b: Buffer) => {
      stderr += b.toString();
      if (stderr.includes('File mode:')) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const code = await exited;
  clearTimeout(timer);
  t.equal(code, 143, stderr.slice(-2000));
  t.notOk(existsSync(marker), 'the training command never started');
  const left = await readdir(path.join(root, 'input', 'data', 'train'), { recursive: true }).catch(() => []);
  t.notOk(left.some((f) => String(f).endsWith('.sluice-part')), 'no partial files');
});

