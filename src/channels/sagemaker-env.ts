/**
 * The SageMaker training environment a script expects, as files and variables.
 *
 * Files (written by the caller with writeConfigFiles):
 *   <root>/input/config/inputdataconfig.json  {"<channel>": {"ContentType"?, "TrainingInputMode",
 *                                              "S3DistributionType", "RecordWrapperType"}}
 *   <root>/input/config/resourceconfig.json   {"current_host", "hosts", "network_interface_name"}
 * Variables, as the sagemaker-training toolkit sets them: JSON values are rendered the
 * way Python's json.dumps renders them (", " and ": " separators), because scripts and
 * tests written against SageMaker sometimes compare the strings:
 *   SM_CHANNEL_<NAME> (NAME upper-cased, as the toolkit does) = <root>/input/data/<channel>
 *   SM_CHANNELS = sorted channel names, SM_HOSTS, SM_CURRENT_HOST, SM_INPUT_DATA_CONFIG,
 *   SM_RESOURCE_CONFIG, SM_NETWORK_INTERFACE_NAME, SM_INPUT_DIR, SM_INPUT_CONFIG_DIR,
 *   SM_MODEL_DIR, SM_OUTPUT_DIR, SM_OUTPUT_DATA_DIR.
 * In Pipe mode SM_CHANNEL_<NAME> is still the folder path; the FIFOs are <path>_<epoch>.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { resourceConfigJson, writeResourceConfig, type HostIdentity } from './hosts.js';
import { containerInputDataConfig, type ChannelConfig } from './input-config.js';

export interface SageMakerPaths {
  root: string;
  inputDir: string;
  configDir: string;
  dataDir: string;
  modelDir: string;
  outputDir: string;
  outputDataDir: string;
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
  };
}

/** JSON as Python's json.dumps writes it (default separators ", " and ": ", ASCII only). */
export function pyJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(pyJson).join(', ')}]`;
  if (v !== null && typeof v === 'object') {
    return `{${Object.entries(v as Record<string, unknown>).map(([k, x]) => `${pyJson(k)}: ${pyJson(x)}`).join(', ')}}`;
  }
  const s = JSON.stringify(v);
  return typeof v === 'string' ? s.replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`) : s;
}

export function sagemakerEnv(paths: SageMakerPaths, channels: readonly ChannelConfig[], id: HostIdentity): Record<string, string> {
  const env: Record<string, string> = {};
  for (const c of channels) env[`SM_CHANNEL_${c.name.toUpperCase()}`] = path.join(paths.dataDir, c.name);
  env.SM_CHANNELS = pyJson(channels.map((c) => c.name).sort());
  env.SM_HOSTS = pyJson(id.hosts);
  env.SM_CURRENT_HOST = id.currentHost;
  env.SM_INPUT_DATA_CONFIG = pyJson(containerInputDataConfig(channels));
  const rc = resourceConfigJson(id);
  env.SM_RESOURCE_CONFIG = pyJson(rc);
  env.SM_NETWORK_INTERFACE_NAME = rc.network_interface_name;
  env.SM_INPUT_DIR = paths.inputDir;
  env.SM_INPUT_CONFIG_DIR = paths.configDir;
  env.SM_MODEL_DIR = paths.modelDir;
  env.SM_OUTPUT_DIR = paths.outputDir;
  env.SM_OUTPUT_DATA_DIR = paths.outputDataDir;
  return env;
}

/** Create the folders and write inputdataconfig.json and resourceconfig.json. */
export async function writeConfigFiles(paths: SageMakerPaths, channels: readonly ChannelConfig[], id: HostIdentity): Promise<void> {
  for (const d of [paths.configDir, paths.dataDir, paths.modelDir, paths.outputDataDir]) await mkdir(d, { recursive: true });
  await writeFile(path.join(paths.configDir, 'inputdataconfig.json'), JSON.stringify(containerInputDataConfig(channels)));
  await writeResourceConfig(paths.configDir, id);
}
