/**
 * The SageMaker training environment a script expects, as files and variables.
 *
 * Files (writeConfigFiles), as SageMaker writes them into <root>/input/config:
 *   inputdataconfig.json  {"<channel>": {"ContentType"?, "TrainingInputMode", "S3DistributionType",
 *                          "RecordWrapperType"}}
 *   resourceconfig.json   {"current_host", "current_instance_type", "current_group_name", "hosts",
 *                          "instance_groups", "network_interface_name"} (channels/hosts.ts)
 *   hyperparameters.json  {"<name>": "<string value>"}, {} when there are none
 *                         (channels/hyperparameters.ts)
 * and the folders a script writes into: model/, output/data/, output/intermediate/.
 *
 * Variables (sagemakerEnv): exactly what sagemaker-training-toolkit's
 * Environment.to_env_vars() gives the script of a SageMaker framework container, computed
 * the toolkit's way from the files above read back from disk (environment.py), and rendered
 * its way (mapping.py): a str as it is, None as "", anything else as
 * json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=True) (pyjson.ts).
 * Besides the SM_* variables, the toolkit's process sets CURRENT_HOST, SAGEMAKER_JOB_NAME
 * and SAGEMAKER_REGION, which its script inherits; sluice sets them too, and
 * SAGEMAKER_BASE_DIR when the root is not /opt/ml (the toolkit, and libraries that find
 * /opt/ml themselves, read it). SEMANTICS.md "SageMaker contract" lists every one.
 * In Pipe mode SM_CHANNEL_<NAME> is still the folder path; the FIFOs are <path>_<epoch>.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError } from '../errors.js';
import { writeResourceConfig, type HostIdentity, type ResourceFacts } from './hosts.js';
import { deserialize, type HyperParameters } from './hyperparameters.js';
import { containerInputDataConfig, type ChannelConfig } from './input-config.js';
import { countCpus, countGpus, countNeuronCores, installed } from './node-facts.js';
import { dumpsCompact, parse, str, type PyValue } from './pyjson.js';

/** SageMaker's root in the container; the toolkit reads SAGEMAKER_BASE_DIR instead when set. */
export const SAGEMAKER_ROOT = '/opt/ml';

export interface SageMakerPaths {
  root: string;
  inputDir: string;
  configDir: string;
  dataDir: string;
  modelDir: string;
  outputDir: string;
  outputDataDir: string;
  outputIntermediateDir: string;
  /** <root>/code: the toolkit's default module_dir (sluice does not create it). */
  codeDir: string;
}

export function sagemakerPaths(root: string): SageMakerPaths {
  const r = path.resolve(root);
  return {
    root: r,
    inputDir: path.join(r, 'input'),
    configDir: path.join(r, 'input', 'config'),
    dataDir: path.join(r, 'input', 'data'),
    modelDir: path.join(r, 'model'),
    outputDir: path.join(r, 'output'),
    outputDataDir: path.join(r, 'output', 'data'),
    outputIntermediateDir: path.join(r, 'output', 'intermediate'),
    codeDir: path.join(r, 'code'),
  };
}

export const HYPERPARAMETERS_FILE = 'hyperparameters.json';
/** Holds the exact text sluice last wrote to hyperparameters.json (as hosts.ts does for resourceconfig.json). */
const HYPERPARAMETERS_SIDECAR = '.hyperparameters.sluice.json';

export interface ConfigInputs extends ResourceFacts {
  /** undefined: none given; an existing hyperparameters.json that SageMaker wrote is kept. */
  hyperparameters: HyperParameters | undefined;
}

/** Create the folders and write inputdataconfig.json, resourceconfig.json and hyperparameters.json. */
export async function writeConfigFiles(paths: SageMakerPaths, channels: readonly ChannelConfig[], id: HostIdentity, inputs: ConfigInputs): Promise<void> {
  for (const d of [paths.configDir, paths.dataDir, paths.modelDir, paths.outputDataDir, paths.outputIntermediateDir]) await mkdir(d, { recursive: true });
  await writeFile(path.join(paths.configDir, 'inputdataconfig.json'), JSON.stringify(containerInputDataConfig(channels)));
  await writeResourceConfig(paths.configDir, id, inputs);
  const file = path.join(paths.configDir, HYPERPARAMETERS_FILE);
  const sidecar = path.join(paths.configDir, HYPERPARAMETERS_SIDECAR);
  if (inputs.hyperparameters === undefined) {
    // A file SageMaker wrote (running on SageMaker itself) stays; one sluice wrote is reset.
    const present = await readFile(file, 'utf8').catch(() => undefined);
    const ours = await readFile(sidecar, 'utf8').catch(() => undefined);
    if (present !== undefined && present !== ours) return;
  }
  const text = JSON.stringify(inputs.hyperparameters ?? {});
  await writeFile(file, text);
  await writeFile(sidecar, text);
}

/** The toolkit's SAGEMAKER_HYPERPARAMETERS: its own settings, kept out of the user's hyperparameters. */
const TOOLKIT_HYPERPARAMETERS = new Set([
  'sagemaker_program', 'sagemaker_submit_directory', 'sagemaker_enable_cloudwatch_metrics', 'sagemaker_region',
  'sagemaker_container_log_level', 'sagemaker_job_name', 'default_user_module_name', '_tuning_objective_metric', 'sagemaker_s3_output',
]);
const TOOLKIT_PREFIX = 'sagemaker_';
/** Framework parameters that put the current instance group into distribution (get_distribution_instance_groups_from_resource_config). */
const DISTRIBUTION_FLAGS = [
  'sagemaker_mpi_enabled', 'sagemaker_parameter_server_enabled', 'sagemaker_distributed_dataparallel_enabled', 'sagemaker_pytorch_ddp_enabled',
  'sagemaker_pytorch_xla_multi_worker_enabled', 'sagemaker_multi_worker_mirrored_strategy_enabled', 'sagemaker_torch_distributed_enabled',
];
/** Python's logging.INFO, the toolkit's default log level. */
const LOG_LEVEL_INFO = 20n;

/** Python truthiness. */
function truthy(v: PyValue | undefined): boolean {
  if (v === undefined || v === null || v === false || v === '' || v === 0n || v === 0) return false;
  if (Array.isArray(v)) return v.length > 0;
  if (v instanceof Map) return v.size > 0;
  return true;
}

const asMap = (v: PyValue | undefined): Map<string, PyValue> => (v instanceof Map ? v : new Map());
const asList = (v: PyValue | undefined): PyValue[] => (Array.isArray(v) ? v : []);

/** What the toolkit's Environment reads besides the files. */
export interface ToolkitInputs {
  paths: SageMakerPaths;
  resourceConfig: Map<string, PyValue>;
  inputDataConfig: Map<string, PyValue>;
  /** hyperparameters.json as read (values normally strings). */
  hyperparameters: Map<string, PyValue>;
  numGpus: number;
  numCpus: number;
  numNeurons: number;
  /** The environment the toolkit would run in (SAGEMAKER_PROGRAM, TRAINING_JOB_NAME, ...). */
  env: NodeJS.ProcessEnv;
  installed(cmd: string): boolean;
}

export interface ToolkitEnvironment {
  /** dict(Environment()): SM_TRAINING_ENV. */
  training: Map<string, PyValue>;
  /** The hyperparameters without the toolkit's own (SM_HPS). */
  hps: Map<string, PyValue>;
  /** sagemaker_* parameters the toolkit hands to frameworks (SM_FRAMEWORK_PARAMS). */
  frameworkParams: Map<string, PyValue>;
  /** The toolkit's own settings (sagemaker_program, sagemaker_region, ...). */
  toolkitParams: Map<string, PyValue>;
}

/** sagemaker_training.environment.Environment(), property by property. */
export function toolkitEnvironment(i: ToolkitInputs): ToolkitEnvironment {
  const rc = i.resourceConfig;
  const all = deserialize(i.hyperparameters);
  const toolkitParams = new Map<string, PyValue>();
  const hps = new Map<string, PyValue>();
  for (const [k, v] of all) (TOOLKIT_HYPERPARAMETERS.has(k) || k.startsWith(TOOLKIT_PREFIX) ? toolkitParams : hps).set(k, v);
  const frameworkParams = new Map([...toolkitParams].filter(([k]) => !TOOLKIT_HYPERPARAMETERS.has(k)));

  const hosts = asList(rc.get('hosts'));
  const currentHost = rc.get('current_host') ?? null;
  const currentGroup = rc.has('current_group_name') ? rc.get('current_group_name')! : 'homogeneousCluster';
  const groups = asList(rc.get('instance_groups')).map(asMap);
  const groupNames = groups.map((g) => g.get('instance_group_name') ?? null);
  const currentGroupHosts = groups.find((g) => g.get('instance_group_name') === currentGroup)?.get('hosts') ?? [];
  const distributionGroups = frameworkParams.has('sagemaker_distribution_instance_groups')
    ? frameworkParams.get('sagemaker_distribution_instance_groups')!
    : DISTRIBUTION_FLAGS.some((f) => truthy(frameworkParams.get(f))) ? [currentGroup] : [];
  const distributionHosts: PyValue[] = groups.length > 0
    ? groups.filter((g) => asList(distributionGroups).includes(g.get('instance_group_name') ?? null)).flatMap((g) => asList(g.get('hosts')))
    : [...hosts];
  const masterHost = distributionHosts.length > 0 ? distributionHosts[0]! : hosts[0] ?? null;

  const program = i.env.SAGEMAKER_PROGRAM;
  const moduleName = program ?? str(toolkitParams.get('sagemaker_program') ?? null);
  const mp = i.env.SM_HP_MP_PARAMETERS;
  const p = i.paths;
  const training = new Map<string, PyValue>([
    ['additional_framework_parameters', frameworkParams],
    ['channel_input_dirs', new Map([...i.inputDataConfig.keys()].map((c) => [c, path.join(p.dataDir, c)]))],
    ['current_host', currentHost],
    ['current_instance_group', currentGroup],
    ['current_instance_group_hosts', currentGroupHosts],
    ['current_instance_type', rc.has('current_instance_type') ? rc.get('current_instance_type')! : 'local'],
    ['distribution_hosts', distributionHosts],
    ['distribution_instance_groups', distributionGroups],
    ['framework_module', i.env.SAGEMAKER_TRAINING_MODULE ?? null],
    ['hosts', hosts],
    ['hyperparameters', hps],
    ['input_config_dir', p.configDir],
    ['input_data_config', i.inputDataConfig],
    ['input_dir', p.inputDir],
    ['instance_groups', groupNames],
    ['instance_groups_dict', new Map(groups.map((g) => [str(g.get('instance_group_name') ?? null), g]))],
    ['is_hetero', groupNames.length > 1],
    ['is_master', currentHost === masterHost],
    ['is_modelparallel_enabled', mp === undefined ? null : mp === '' ? '' : mp !== '{}'],
    ['is_smddpmprun_installed', i.installed('smddpmprun')],
    ['is_smddprun_installed', i.installed('smddprun')],
    ['job_name', i.env.TRAINING_JOB_NAME ?? null],
    ['log_level', toolkitParams.has('sagemaker_container_log_level') ? toolkitParams.get('sagemaker_container_log_level')! : LOG_LEVEL_INFO],
    ['master_hostname', masterHost],
    ['model_dir', p.modelDir],
    ['module_dir', str(toolkitParams.has('sagemaker_submit_directory') ? toolkitParams.get('sagemaker_submit_directory')! : p.codeDir)],
    ['module_name', moduleName.endsWith('.py') ? moduleName.slice(0, -3) : moduleName],
    ['network_interface_name', rc.has('network_interface_name') ? rc.get('network_interface_name')! : 'eth0'],
    ['num_cpus', BigInt(i.numCpus)],
    ['num_gpus', BigInt(i.numGpus)],
    ['num_neurons', BigInt(i.numNeurons)],
    ['output_data_dir', p.outputDataDir],
    ['output_dir', p.outputDir],
    ['output_intermediate_dir', p.outputIntermediateDir],
    ['resource_config', rc],
    ['topology', rc.has('topology') ? rc.get('topology')! : []],
    ['user_entry_point', program || (toolkitParams.get('sagemaker_program') ?? null)],
  ]);
  return { training, hps, frameworkParams, toolkitParams };
}

/** mapping.to_cmd_args(hyperparameters): sorted "--name value" pairs. */
export function toCmdArgs(hps: ReadonlyMap<string, PyValue>): string[] {
  const keys = [...hps.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const arg = (v: PyValue): string => {
    if (v instanceof Map) return [...v].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, x]) => `${k}=${str(x)}`).join(',');
    return v === null ? '' : str(v);
  };
  return keys.flatMap((k) => [k === '' ? '' : k.length > 1 ? `--${k}` : `-${k}`, arg(hps.get(k)!)]);
}

/** mapping.to_env_vars' format_value. */
function envValue(v: PyValue): string {
  if (v === null) return '';
  return typeof v === 'string' ? v : dumpsCompact(v);
}

/** Environment.to_env_vars(): the SM_* variables. */
export function toEnvVars(e: ToolkitEnvironment): Record<string, string> {
  const t = e.training;
  const get = (k: string) => t.get(k)!;
  const vars = new Map<string, PyValue>([
    ['hosts', get('hosts')], ['network_interface_name', get('network_interface_name')], ['hps', e.hps],
    ['user_entry_point', get('user_entry_point')], ['framework_params', e.frameworkParams], ['resource_config', get('resource_config')],
    ['input_data_config', get('input_data_config')], ['output_data_dir', get('output_data_dir')],
    ['channels', [...asMap(get('channel_input_dirs')).keys()].sort()], ['current_host', get('current_host')],
    ['current_instance_type', get('current_instance_type')], ['current_instance_group', get('current_instance_group')],
    ['current_instance_group_hosts', get('current_instance_group_hosts')], ['instance_groups', get('instance_groups')],
    ['instance_groups_dict', get('instance_groups_dict')], ['distribution_instance_groups', get('distribution_instance_groups')],
    ['is_hetero', get('is_hetero')], ['module_name', get('module_name')], ['log_level', get('log_level')],
    ['framework_module', get('framework_module')], ['input_dir', get('input_dir')], ['input_config_dir', get('input_config_dir')],
    ['output_dir', get('output_dir')], ['num_cpus', get('num_cpus')], ['num_gpus', get('num_gpus')], ['num_neurons', get('num_neurons')],
    ['model_dir', get('model_dir')], ['module_dir', get('module_dir')], ['training_env', t], ['user_args', toCmdArgs(e.hps)],
    ['output_intermediate_dir', get('output_intermediate_dir')],
  ]);
  // The toolkit adds topology (GB200 UltraServers) only when it is not empty.
  if (truthy(get('topology'))) vars.set('topology', get('topology'));
  for (const [c, dir] of asMap(get('channel_input_dirs'))) vars.set(`channel_${c}`, dir);
  for (const [k, v] of e.hps) vars.set(`hp_${k}`, v);
  const out: Record<string, string> = {};
  for (const [k, v] of vars) out[k === '' ? '' : `SM_${k.toUpperCase()}`] = envValue(v);
  return out;
}

async function readConfig(file: string): Promise<Map<string, PyValue>> {
  let v: PyValue;
  try {
    v = parse(await readFile(file, 'utf8'));
  } catch (err) {
    // Only a file SageMaker (or a person) wrote can be bad: sluice writes valid JSON.
    throw new ConfigError(`${file} is not valid JSON (${err instanceof Error ? err.message : String(err)})`, { hint: 'Fix or remove the file' });
  }
  if (!(v instanceof Map)) throw new ConfigError(`${file} must hold a JSON object`, { hint: 'Fix or remove the file' });
  return v;
}

/**
 * Every variable sluice sets for the training command: the toolkit's SM_* variables and
 * the toolkit process's own, computed from the config files as written. `env` is the
 * environment the command starts from (sluice's, plus a request's Environment).
 */
export async function sagemakerEnv(paths: SageMakerPaths, env: NodeJS.ProcessEnv): Promise<Record<string, string>> {
  const resourceConfig = await readConfig(path.join(paths.configDir, 'resourceconfig.json'));
  const instanceType = resourceConfig.get('current_instance_type');
  const te = toolkitEnvironment({
    paths,
    resourceConfig,
    inputDataConfig: await readConfig(path.join(paths.configDir, 'inputdataconfig.json')),
    hyperparameters: await readConfig(path.join(paths.configDir, HYPERPARAMETERS_FILE)),
    numGpus: await countGpus(),
    numCpus: countCpus(),
    numNeurons: await countNeuronCores(typeof instanceType === 'string' ? instanceType : 'local', env),
    env,
    installed: (cmd) => installed(cmd, env),
  });
  const out = toEnvVars(te);
  const region = te.toolkitParams.get('sagemaker_region');
  out.CURRENT_HOST = envValue(te.training.get('current_host')!);
  out.SAGEMAKER_JOB_NAME = envValue(te.toolkitParams.get('sagemaker_job_name') ?? '');
  out.SAGEMAKER_REGION = region !== undefined ? envValue(region) : env.AWS_DEFAULT_REGION ?? env.AWS_REGION ?? '';
  if (paths.root !== SAGEMAKER_ROOT || (env.SAGEMAKER_BASE_DIR !== undefined && env.SAGEMAKER_BASE_DIR !== paths.root)) out.SAGEMAKER_BASE_DIR = paths.root;
  return out;
}
