/**
 * The toolkit's variables, computed in process, against sagemaker-training-toolkit's own
 * documented examples (ENVIRONMENT_VARIABLES.md) and its rules for instance groups; and the
 * files writeConfigFiles leaves.
 */
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import type { HostIdentity } from '../../src/channels/hosts.js';
import type { ChannelConfig } from '../../src/channels/input-config.js';
import { fromJs, parse, type PyValue } from '../../src/channels/pyjson.js';
import { sagemakerEnv, sagemakerPaths, toCmdArgs, toEnvVars, toolkitEnvironment, writeConfigFiles, type ToolkitInputs } from '../../src/channels/sagemaker-env.js';

const asMap = (v: unknown) => fromJs(v) as Map<string, PyValue>;
const paths = sagemakerPaths('/opt/ml');

function inputs(over: Partial<ToolkitInputs> = {}): ToolkitInputs {
  return {
    paths,
    resourceConfig: asMap({ current_host: 'algo-1', hosts: ['algo-1', 'algo-2'] }),
    inputDataConfig: asMap({
      testing: { RecordWrapperType: 'None', S3DistributionType: 'FullyReplicated', TrainingInputMode: 'File' },
      training: { RecordWrapperType: 'None', S3DistributionType: 'FullyReplicated', TrainingInputMode: 'File' },
    }),
    hyperparameters: asMap({ 'batch-size': '256', 'learning-rate': '0.0001', communicator: 'pure_nccl' }),
    numGpus: 1, numCpus: 32, numNeurons: 0, env: {}, installed: () => false,
    ...over,
  };
}

t.test("the toolkit's documented examples (ENVIRONMENT_VARIABLES.md)", async (t) => {
  const env = toEnvVars(toolkitEnvironment(inputs()));
  // Verbatim from the documentation:
  t.equal(env.SM_CHANNELS, '["testing","training"]');
  t.equal(env.SM_CHANNEL_TRAINING, '/opt/ml/input/data/training');
  t.equal(env.SM_CHANNEL_TESTING, '/opt/ml/input/data/testing');
  t.equal(env.SM_HOSTS, '["algo-1","algo-2"]');
  t.equal(env.SM_CURRENT_HOST, 'algo-1');
  t.equal(env.SM_RESOURCE_CONFIG, '{"current_host":"algo-1","hosts":["algo-1","algo-2"]}');
  t.equal(env.SM_MODEL_DIR, '/opt/ml/model');
  t.equal(env.SM_INPUT_CONFIG_DIR, '/opt/ml/input/config');
  t.equal(env['SM_HP_LEARNING-RATE'], '0.0001');
  t.equal(env.SM_HP_COMMUNICATOR, 'pure_nccl');
  t.equal(env.SM_NUM_GPUS, '1');
  t.equal(env.SM_NUM_CPUS, '32');
  t.equal(env.SM_LOG_LEVEL, '20');
  // The documentation shows these pretty-printed or unsorted; the toolkit's code
  // (mapping.to_env_vars, to_cmd_args) renders them compact with sorted keys:
  t.equal(env.SM_INPUT_DATA_CONFIG, '{"testing":{"RecordWrapperType":"None","S3DistributionType":"FullyReplicated","TrainingInputMode":"File"},"training":{"RecordWrapperType":"None","S3DistributionType":"FullyReplicated","TrainingInputMode":"File"}}');
  t.equal(env.SM_HPS, '{"batch-size":256,"communicator":"pure_nccl","learning-rate":0.0001}');
  t.equal(env.SM_USER_ARGS, '["--batch-size","256","--communicator","pure_nccl","--learning-rate","0.0001"]');
  t.equal(env.SM_INPUT_DIR, '/opt/ml/input');
  t.equal(env.SM_OUTPUT_DATA_DIR, '/opt/ml/output/data');
  t.equal(env.SM_NETWORK_INTERFACE_NAME, 'eth0', 'the default when resourceconfig.json has none');
  t.equal(env.SM_CURRENT_INSTANCE_TYPE, 'local', 'the default when resourceconfig.json has none');
  t.equal(env.SM_INSTANCE_GROUPS, '[]');
  t.equal(env.SM_IS_HETERO, 'false');
  t.equal(env.SM_MODULE_NAME, 'None', 'str(None), as the toolkit, without sagemaker_program');
  const training = parse(env.SM_TRAINING_ENV!) as Map<string, PyValue>;
  t.same([...training.keys()], [...training.keys()].sort(), 'SM_TRAINING_ENV has sorted keys');
  t.equal(training.size, 37);
  t.equal(training.get('master_hostname'), 'algo-1');
});

t.test('heterogeneous cluster: groups, the current group\'s hosts, the master of the distribution groups', async (t) => {
  const rc = {
    current_host: 'algo-3', current_instance_type: 'ml.p4d.24xlarge', current_group_name: 'train', hosts: ['algo-1', 'algo-2', 'algo-3'],
    instance_groups: [
      { instance_group_name: 'data', instance_type: 'ml.c5.18xlarge', hosts: ['algo-1'] },
      { instance_group_name: 'train', instance_type: 'ml.p4d.24xlarge', hosts: ['algo-3', 'algo-2'] },
    ],
    network_interface_name: 'eth0',
  };
  const hps = { sagemaker_distribution_instance_groups: '["train"]', sagemaker_program: '"train.py"', 'x': '1' };
  const e = toolkitEnvironment(inputs({ resourceConfig: asMap(rc), hyperparameters: asMap(hps), numNeurons: 0 }));
  const env = toEnvVars(e);
  t.equal(env.SM_IS_HETERO, 'true');
  t.equal(env.SM_CURRENT_INSTANCE_GROUP, 'train');
  t.equal(env.SM_CURRENT_INSTANCE_GROUP_HOSTS, '["algo-3","algo-2"]');
  t.equal(env.SM_INSTANCE_GROUPS, '["data","train"]');
  t.equal(env.SM_DISTRIBUTION_INSTANCE_GROUPS, '["train"]');
  t.equal(env.SM_FRAMEWORK_PARAMS, '{"sagemaker_distribution_instance_groups":["train"]}');
  t.equal(env.SM_HPS, '{"x":1}', 'sagemaker_* parameters are not user hyperparameters');
  t.equal(env.SM_MODULE_NAME, 'train');
  t.equal(env.SM_USER_ENTRY_POINT, 'train.py');
  const training = parse(env.SM_TRAINING_ENV!) as Map<string, PyValue>;
  t.equal(training.get('master_hostname'), 'algo-3', 'the first host of the distribution groups');
  t.equal(training.get('is_master'), true);
  t.same(training.get('distribution_hosts'), ['algo-3', 'algo-2']);
});

t.test('to_cmd_args: sorted; one-letter names take one dash; dicts as k=v', async (t) => {
  t.same(toCmdArgs(asMap({ b: 'x', aa: 1.5, m: { z: 1, y: true }, n: null })), ['--aa', '1.5', '-b', 'x', '-m', 'y=True,z=1', '-n', '']);
});

t.test('writeConfigFiles: the files, the layout, and a SageMaker-written hyperparameters.json kept', async (t) => {
  const root = await mkdtemp(path.join(os.tmpdir(), 'sluice-smenv-'));
  t.teardown(() => rm(root, { recursive: true, force: true }));
  const p = sagemakerPaths(root);
  const channels: ChannelConfig[] = [{ name: 'train', s3Uri: 's3://b/p/', s3DataType: 'S3Prefix', distribution: 'FullyReplicated', inputMode: 'File', recordWrapper: 'None', compression: 'None' }];
  const id: HostIdentity = { currentHost: 'algo-1', hosts: ['algo-1'], hostIndex: 0, hostCount: 1, source: 'default' };
  const facts = { instanceType: 'local', networkInterfaceName: 'eth0' };
  const hpFile = path.join(p.configDir, 'hyperparameters.json');
  await writeConfigFiles(p, channels, id, { ...facts, hyperparameters: undefined });
  t.equal(await readFile(hpFile, 'utf8'), '{}', '{} without hyperparameters');
  await writeConfigFiles(p, channels, id, { ...facts, hyperparameters: { a: '1' } });
  t.equal(await readFile(hpFile, 'utf8'), '{"a":"1"}');
  await writeConfigFiles(p, channels, id, { ...facts, hyperparameters: undefined });
  t.equal(await readFile(hpFile, 'utf8'), '{}', 'what sluice wrote before is reset');
  await writeFile(hpFile, '{"from": "sagemaker"}');
  await writeConfigFiles(p, channels, id, { ...facts, hyperparameters: undefined });
  t.equal(await readFile(hpFile, 'utf8'), '{"from": "sagemaker"}', 'a file sluice did not write is SageMaker\'s: kept');
  for (const d of ['model', 'output/data', 'output/intermediate', 'input/data']) {
    t.ok((await stat(path.join(root, d))).isDirectory(), `${d}/ exists`);
  }
  const env = await sagemakerEnv(p, {});
  t.equal(env.SAGEMAKER_BASE_DIR, root, 'set for a root other than /opt/ml');
  t.equal(env.SM_HP_FROM, 'sagemaker');
  t.equal(env.CURRENT_HOST, 'algo-1');
  t.equal(env.SAGEMAKER_JOB_NAME, '');
  t.equal(env.SAGEMAKER_REGION, '', 'no region anywhere');
  t.equal((await sagemakerEnv(p, { AWS_DEFAULT_REGION: 'eu-west-1' })).SAGEMAKER_REGION, 'eu-west-1');
  await writeFile(hpFile, '{"a": ');
  await t.rejects(sagemakerEnv(p, {}), { code: 'SLUICE_CONFIG', message: /hyperparameters\.json is not valid JSON/ }, 'a broken SageMaker file: one line');
});
