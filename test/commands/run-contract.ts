/**
 * `sluice run`'s container contract end to end (SEMANTICS.md "SageMaker contract"): the
 * built CLI against the local S3 server, with a Python training command that loads the
 * environment as sagemaker-training-toolkit does, and failing commands for output/failure.
 */
import t from 'tap';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startLocalS3, type LocalS3 } from '../../src/local/s3-server.js';
import { runCli } from '../helpers/cli.js';

let s3: LocalS3;

t.before(async () => {
  s3 = await startLocalS3();
  await s3.createBucket('bkt');
  for (let i = 0; i < 3; i++) await s3.putObject('bkt', `val/part-${i}`, Buffer.from(`validation object ${i}\n`));
});
t.teardown(() => s3?.stop());

async function tmpRoot(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-contract-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

// NODE_NO_WARNINGS: the AWS SDK warns about Node 20 on stderr, which is not sluice's output.
const env = () => ({ ...process.env, NODE_NO_WARNINGS: '1', AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_REGION: 'us-east-1', SLUICE_LOG_LEVEL: 'warn' });
const common = () => ['--endpoint', s3.endpoint, '--path-style', '--metrics-port=-1', '--max-attempts', '3'];

/** The toolkit-loading training command (test/helpers/toolkit_env.py); python3 is needed. */
const TOOLKIT_ENV_PY = path.join(import.meta.dirname, '..', 'helpers', 'toolkit_env.py');
const python3 = (process.env.PATH ?? '/usr/bin').split(':').map((d) => path.join(d, 'python3')).find((p) => existsSync(p));

t.test('a Python script loading the environment as sagemaker-training-toolkit does sees its exact variables', { skip: python3 ? false : 'python3 is not installed' }, async (t) => {
  const root = await tmpRoot(t);
  const report = path.join(root, 'report.json');
  const request = path.join(root, 'request.json');
  await writeFile(request, JSON.stringify({
    TrainingJobName: 'sluice-test-job',
    AlgorithmSpecification: { TrainingInputMode: 'File', TrainingImage: 'x' },
    ResourceConfig: { InstanceType: 'ml.p3.2xlarge', InstanceCount: 1, VolumeSizeInGB: 10 },
    Environment: { SAGEMAKER_PROGRAM: 'train.py', MY_SETTING: 'on' },
    HyperParameters: {
      epochs: '10', 'learning-rate': '0.0001', 'batch-size': 256, model: '"resnet"', flag: 'true', ratio: '1e-5', whole: '2.0',
      big: '12345678901234567890', nested: '{"b": 1, "a": [1.0, "x", null]}', mapping: '{"z": 2, "y": "v"}', nothing: 'null',
      text: 'plain text', unicode: '"h\u00e9llo"', e: 'short', sagemaker_container_log_level: '10', sagemaker_pytorch_ddp_enabled: 'true',
      sagemaker_submit_directory: '"/opt/ml/code"',
    },
    InputDataConfig: [
      { ChannelName: 'training', DataSource: { S3DataSource: { S3Uri: 's3://bkt/val/' } }, ContentType: 'text/plain' },
      { ChannelName: 'testing', DataSource: { S3DataSource: { S3Uri: 's3://bkt/val/', S3DataDistributionType: 'ShardedByS3Key' } } },
    ],
  }));
  const r = await runCli(['run', '--input-data-config', request, '--hyperparameters', '{"epochs": 12, "extra": [1, 2]}', '--root', root, ...common(),
    '--', python3!, TOOLKIT_ENV_PY, report, '0'], env());
  t.equal(r.code, 0, r.stderr);
  const got = JSON.parse(await readFile(report, 'utf8')) as { mismatches: unknown[]; checked: string[]; real_toolkit: boolean; env: Record<string, string>; files: { hyperparameters: Record<string, string>; resourceconfig: unknown } };
  t.same(got.mismatches, [], `every variable is the toolkit's string (${got.checked.length} checked${got.real_toolkit ? ', and against the real toolkit' : ''})`);
  t.same(got.files.hyperparameters, {
    epochs: '12', 'learning-rate': '0.0001', 'batch-size': '256', model: '"resnet"', flag: 'true', ratio: '1e-5', whole: '2.0',
    big: '12345678901234567890', nested: '{"b": 1, "a": [1.0, "x", null]}', mapping: '{"z": 2, "y": "v"}', nothing: 'null',
    text: 'plain text', unicode: '"h\u00e9llo"', e: 'short', sagemaker_container_log_level: '10', sagemaker_pytorch_ddp_enabled: 'true',
    sagemaker_submit_directory: '"/opt/ml/code"', extra: '[1, 2]',
  }, 'hyperparameters.json: the request\'s, --hyperparameters over them, every value a string');
  t.same(got.files.resourceconfig, {
    current_host: 'algo-1', current_instance_type: 'ml.p3.2xlarge', current_group_name: 'homogeneousCluster', hosts: ['algo-1'],
    instance_groups: [{ instance_group_name: 'homogeneousCluster', instance_type: 'ml.p3.2xlarge', hosts: ['algo-1'] }],
    network_interface_name: got.env.SM_NETWORK_INTERFACE_NAME,
  }, 'resourceconfig.json: the request\'s instance type, one instance group');
  // The strings themselves, as the toolkit renders them (Python json.dumps, str()).
  t.equal(got.env.SM_HOSTS, '["algo-1"]');
  t.equal(got.env.SM_CHANNELS, '["testing","training"]');
  t.equal(got.env.SM_HPS, '{"batch-size":256,"big":12345678901234567890,"e":"short","epochs":12,"extra":[1,2],"flag":true,"learning-rate":0.0001,"mapping":{"y":"v","z":2},"model":"resnet","nested":{"a":[1.0,"x",null],"b":1},"nothing":null,"ratio":1e-05,"text":"plain text","unicode":"h\\u00e9llo","whole":2.0}');
  t.equal(got.env.SM_USER_ARGS, '["--batch-size","256","--big","12345678901234567890","-e","short","--epochs","12","--extra","[1, 2]","--flag","True","--learning-rate","0.0001","--mapping","y=v,z=2","--model","resnet","--nested","a=[1.0, \'x\', None],b=1","--nothing","","--ratio","1e-05","--text","plain text","--unicode","h\\u00e9llo","--whole","2.0"]');
  t.equal(got.env['SM_HP_LEARNING-RATE'], '0.0001');
  t.equal(got.env.SM_HP_RATIO, '1e-05');
  t.equal(got.env.SM_HP_FLAG, 'true');
  t.equal(got.env.SM_HP_NOTHING, '');
  t.equal(got.env.SM_HP_MODEL, 'resnet');
  t.equal(got.env.SM_LOG_LEVEL, '10', 'sagemaker_container_log_level');
  t.equal(got.env.SM_FRAMEWORK_PARAMS, '{"sagemaker_pytorch_ddp_enabled":true}');
  t.equal(got.env.SM_MODULE_NAME, 'train', 'SAGEMAKER_PROGRAM from the request\'s Environment, without .py');
  t.equal(got.env.SM_USER_ENTRY_POINT, 'train.py');
  t.equal(got.env.SM_CURRENT_INSTANCE_TYPE, 'ml.p3.2xlarge');
  t.equal(got.env.SM_CURRENT_INSTANCE_GROUP, 'homogeneousCluster');
  t.equal(got.env.SM_CURRENT_INSTANCE_GROUP_HOSTS, '["algo-1"]');
  t.equal(got.env.SM_INSTANCE_GROUPS, '["homogeneousCluster"]');
  t.equal(got.env.SM_IS_HETERO, 'false');
  t.equal(got.env.SM_NUM_GPUS, '0', 'no NVIDIA devices on this machine');
  t.equal(got.env.SAGEMAKER_BASE_DIR, root, 'the relocated root, for libraries that find /opt/ml themselves');
  const training = JSON.parse(got.env.SM_TRAINING_ENV!);
  t.match(training, { job_name: 'sluice-test-job', master_hostname: 'algo-1', is_master: true, distribution_instance_groups: ['homogeneousCluster'], module_dir: '/opt/ml/code' });
  t.equal(Object.keys(training).length, 37, 'every property of the toolkit\'s Environment');
  for (const d of ['model', 'output/data', 'output/intermediate']) t.ok(existsSync(path.join(root, d)), `${d}/ exists`);
  t.notOk(existsSync(path.join(root, 'output', 'failure')), 'no failure file after success');
  t.ok(existsSync(path.join(root, 'output', 'success')), 'output/success, as the toolkit writes it');
});

t.test('a failing command: output/failure holds how it ended and the last lines of its stderr', async (t) => {
  const root = await tmpRoot(t);
  // process.exitCode, not process.exit(): a Node command that calls process.exit() while
  // its stderr writes are queued (the socket buffer full because sluice, starved of CPU, has
  // not read yet) loses them itself; seen on Node 24 under load, 1 run in 6.
  const script = `for (let i = 0; i < 200; i++) console.error('noise line ' + i); console.error('progress 10%\\rprogress 90%'); console.error('ValueError: the real reason'); process.exitCode = 3;`;
  const r = await runCli(['run', '--channel', 'train=s3://bkt/val/', '--root', root, ...common(), '--', process.execPath, '-e', script], env());
  t.equal(r.code, 3);
  t.match(r.stderr, /ValueError: the real reason/, 'stderr still reaches the terminal');
  const failure = await readFile(path.join(root, 'output', 'failure'), 'utf8');
  t.match(failure, /^The training command ".*" exited with code 3\.\n/, 'says how the command ended');
  t.match(failure, /\nprogress 90%\nValueError: the real reason\n$/, 'ends with its last lines, a progress line as a terminal shows it');
  t.ok(failure.length <= 1024, `within the 1024 characters SageMaker reports (${failure.length})`);
  t.match(failure, /noise line 199\n/, 'as many lines as fit');
  t.notOk(existsSync(path.join(root, 'output', 'success')), 'no success file');

  // A command that writes output/failure itself keeps its own; a later success removes it.
  const own = `require('fs').writeFileSync(process.env.SM_OUTPUT_DIR + '/failure', 'my reason'); process.exit(1);`;
  t.equal((await runCli(['run', '--channel', 'train=s3://bkt/val/', '--root', root, ...common(), '--', process.execPath, '-e', own], env())).code, 1);
  t.equal(await readFile(path.join(root, 'output', 'failure'), 'utf8'), 'my reason', 'the command\'s own failure file is kept');
  t.equal((await runCli(['run', '--channel', 'train=s3://bkt/val/', '--root', root, ...common(), '--', process.execPath, '-e', 'process.exit(0)'], env())).code, 0);
  t.notOk(existsSync(path.join(root, 'output', 'failure')), 'an earlier run\'s failure file is gone');
});


t.test('on SageMaker\'s own resourceconfig.json (two instance groups, topology) the variables follow it', { skip: python3 ? false : 'python3 is not installed' }, async (t) => {
  const root = await tmpRoot(t);
  const report = path.join(root, 'report.json');
  const configDir = path.join(root, 'input', 'config');
  await mkdir(configDir, { recursive: true });
  const rc = {
    current_host: 'algo-2', current_instance_type: 'ml.p4d.24xlarge', current_group_name: 'train', hosts: ['algo-1', 'algo-2', 'algo-3'],
    instance_groups: [
      { instance_group_name: 'data', instance_type: 'ml.c5.18xlarge', hosts: ['algo-1'] },
      { instance_group_name: 'train', instance_type: 'ml.p4d.24xlarge', hosts: ['algo-3', 'algo-2'] },
    ],
    network_interface_name: 'eth0', topology: [{ hostName: 'algo-2', capacityUnitId: 'cu-1' }],
  };
  await writeFile(path.join(configDir, 'resourceconfig.json'), JSON.stringify(rc));
  const r = await runCli(['run', '--channel', 'train=s3://bkt/val/,distribution=ShardedByS3Key', '--root', root, ...common(),
    '--hyperparameters', '{"sagemaker_distribution_instance_groups": "[\\"train\\"]"}', '--', python3!, TOOLKIT_ENV_PY, report, '0'], env());
  t.equal(r.code, 0, r.stderr);
  const got = JSON.parse(await readFile(report, 'utf8')) as { mismatches: unknown[]; real_toolkit: boolean; env: Record<string, string>; files: { resourceconfig: unknown } };
  t.same(got.mismatches, [], `every variable is the toolkit's string${got.real_toolkit ? ' (and the real toolkit\'s)' : ''}`);
  t.same(got.files.resourceconfig, rc, 'SageMaker\'s file is left as it is');
  t.equal(got.env.SM_IS_HETERO, 'true');
  t.equal(got.env.SM_CURRENT_INSTANCE_GROUP_HOSTS, '["algo-3","algo-2"]');
  t.equal(got.env.SM_TOPOLOGY, '[{"capacityUnitId":"cu-1","hostName":"algo-2"}]');
  t.match(JSON.parse(got.env.SM_TRAINING_ENV!), { master_hostname: 'algo-3', is_master: false, distribution_hosts: ['algo-3', 'algo-2'] });
});

t.test('a run that fails in sluice itself writes its one-line error to output/failure', async (t) => {
  const root = await tmpRoot(t);
  const r = await runCli(['run', '--channel', 'train=s3://bkt/nothing-here/', '--root', root, ...common(), '--', process.execPath, '-e', 'process.exit(0)'], { ...env(), SLUICE_LOG_LEVEL: 'silent' });
  t.equal(r.code, 2);
  t.equal(await readFile(path.join(root, 'output', 'failure'), 'utf8'), `${r.stderr.trim()}\n`, 'the same line as on stderr');
});
