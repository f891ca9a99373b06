/**
 * Channel definitions: SageMaker's InputDataConfig, and the short `--channel` form.
 *
 * Accepted input (see `sluice run --help`):
 *  - the `InputDataConfig` list exactly as passed to CreateTrainingJob, or a whole
 *    CreateTrainingJob request (its InputDataConfig, with AlgorithmSpecification's
 *    TrainingInputMode as the default mode; its TrainingJobName, HyperParameters,
 *    ResourceConfig.InstanceType and Environment go to the container: `job`);
 *  - `--channel NAME=s3://bucket/prefix/[,key=value...]` with keys mode, distribution,
 *    seed, type, wrapper, compression, content-type, attributes (names joined by '|'),
 *    and sluice's own snapshot, snapshot-out, filter (expressions joined by '&'; issue 15)
 *    and order-file (FastFile: the file the script writes its epoch's file order to; issue 48).
 *    Values are matched case-insensitively. A URI holding ',' needs the JSON form.
 *    In the JSON form the same three are sluice's own channel field
 *    `"Sluice": {"Snapshot": FILE, "SnapshotOut": FILE, "Filter": [EXPR, ...], "OrderFile": FILE}` (not sent to
 *    SageMaker: toSageMakerChannel leaves it out). Pipe resume (issue 48, pipe/resume.ts):
 *    `resume=E:N[:R]`, in JSON `"Sluice": {"ResumeFrom": "E:N[:R]"}`.
 *
 * SageMaker's defaults: S3DataType S3Prefix (as the SageMaker Python SDK), distribution
 * FullyReplicated, InputMode the job's (File), RecordWrapperType None, CompressionType None.
 * SageMaker's field is `S3DataDistributionType`; `S3DistributionType` (the name used in
 * the container's inputdataconfig.json) is accepted as well.
 *
 * SageMaker's rules, checked here so that a bad config fails before anything starts:
 * channel names match [A-Za-z0-9.\-_]+ (at most 64) and are unique; S3Uri is s3://bucket/...;
 * AugmentedManifestFile needs AttributeNames (1..16) and Pipe mode ("supported only for
 * channels using Pipe input mode"); AttributeNames only with AugmentedManifestFile; a
 * manifest's S3Uri names an object, not a folder; ShuffleConfig needs an integer Seed.
 * sluice's own limit: FastFile mounts a whole S3Prefix, so it takes neither manifests nor
 * ShardedByS3Key. RecordWrapperType and CompressionType apply to Pipe mode only ("In File
 * mode, leave this field unset or set it to None"): elsewhere they are ignored with a
 * warning, and File mode keeps the objects' bytes as they are.
 *
 * Every problem is a ConfigError: one line naming the channel, the field and the fix.
 */
import { BadUriError, ConfigError } from '../errors.js';
import { parseS3Uri } from '../s3/uri.js';
import type { Distribution } from './shard.js';
import { parseResume, type ResumePoint } from '../pipe/resume.js';

export type InputMode = 'File' | 'FastFile' | 'Pipe';
export type S3DataType = 'S3Prefix' | 'ManifestFile' | 'AugmentedManifestFile';
import type { Compression, RecordWrapper } from '../pipe/epoch-bytes.js';
export type { Compression, RecordWrapper };

export interface ChannelConfig {
  name: string;
  s3Uri: string;
  s3DataType: S3DataType;
  distribution: Distribution;
  /** AugmentedManifestFile only: the attributes to stream, in order. */
  attributeNames?: string[];
  inputMode: InputMode;
  recordWrapper: RecordWrapper;
  compression: Compression;
  contentType?: string;
  /** ShuffleConfig.Seed. */
  seed?: number;
  // ---- issue 15 (short form only: snapshot=FILE, snapshot-out=FILE, filter=A&B) ----
  /** Read exactly this snapshot's objects, with no listing. */
  snapshot?: string;
  /** Write the listing to this snapshot file. */
  snapshotOut?: string;
  /** --filter expressions (src/s3/filters.ts). */
  filters?: string[];
  /** Pipe resume point (issue 48): start at this epoch, object and record. */
  resumeFrom?: ResumePoint;
  /** FastFile: --order-file of this channel's mount (issue 48). */
  orderFile?: string;
}

export const INPUT_MODES: readonly InputMode[] = ['File', 'FastFile', 'Pipe'];
export const S3_DATA_TYPES: readonly S3DataType[] = ['S3Prefix', 'ManifestFile', 'AugmentedManifestFile'];
export const DISTRIBUTIONS: readonly Distribution[] = ['FullyReplicated', 'ShardedByS3Key'];
export const RECORD_WRAPPERS: readonly RecordWrapper[] = ['None', 'RecordIO'];
export const COMPRESSIONS: readonly Compression[] = ['None', 'Gzip'];

/** SageMaker's ChannelName pattern and length limit. */
const CHANNEL_NAME_RE = /^[A-Za-z0-9.\-_]+$/;
const CHANNEL_NAME_MAX = 64;

/**
 * Why `name` cannot name a channel, or undefined. SageMaker's pattern, minus "." and "..":
 * a channel is the folder <root>/input/data/<name> (File mode sweeps it, FastFile mounts on
 * it), and those two names are input/data itself and input/ (issue 43: a File channel "."
 * or ".." swept the other channels' folders and input/config away).
 */
export function channelNameProblem(name: string): string | undefined {
  if (!CHANNEL_NAME_RE.test(name) || name.length > CHANNEL_NAME_MAX) return `ChannelName must be 1 to ${CHANNEL_NAME_MAX} of A-Z a-z 0-9 . - _`;
  if (name === '.' || name === '..') return `ChannelName ${JSON.stringify(name)} names a folder above the channel's own`;
  return undefined;
}
/** SageMaker's limit on AttributeNames. */
const MAX_ATTRIBUTE_NAMES = 16;

const CHANNEL_FIELDS = new Set(['ChannelName', 'DataSource', 'InputMode', 'RecordWrapperType', 'ShuffleConfig', 'ContentType', 'CompressionType', 'Sluice']);
/** Fields of sluice's own channel field "Sluice" (issue 15: the JSON form of snapshot=, snapshot-out=, filter=). */
const SLUICE_FIELDS = new Set(['Snapshot', 'SnapshotOut', 'Filter', 'OrderFile', 'ResumeFrom']);
const S3_SOURCE_FIELDS = new Set(['S3Uri', 'S3DataType', 'S3DataDistributionType', 'S3DistributionType', 'AttributeNames']);
/** Fields SageMaker defines that do not change what sluice reads (instance groups, model access). */
const S3_SOURCE_IGNORED = new Set(['InstanceGroupNames', 'ModelAccessConfig', 'HubAccessConfig']);

export interface ParsedChannels {
  channels: ChannelConfig[];
  /** Settings accepted but ignored (e.g. Gzip in File mode), one line each, for the log. */
  warnings: string[];
  /** What else a whole CreateTrainingJob request says about the container (absent for a bare list). */
  job?: TrainingJobSettings;
}

/** The parts of a CreateTrainingJob request, besides its channels, that reach the container. */
export interface TrainingJobSettings {
  /** TrainingJobName: SageMaker sets TRAINING_JOB_NAME to it. */
  name?: string;
  /** HyperParameters, as given (SageMaker requires string values). */
  hyperParameters?: Record<string, unknown>;
  /** ResourceConfig.InstanceType, e.g. ml.p4d.24xlarge. */
  instanceType?: string;
  /** Environment: variables SageMaker sets in the container. */
  environment?: Record<string, string>;
}

/** The TrainingJobSettings of a whole CreateTrainingJob request; `source` names it in errors. */
function jobSettings(req: Record<string, unknown>, source: string): TrainingJobSettings {
  const job: TrainingJobSettings = {};
  if (req.TrainingJobName !== undefined) {
    if (typeof req.TrainingJobName !== 'string') throw new ConfigError(`${source}: TrainingJobName must be a string`, { hint: 'E.g. "TrainingJobName": "my-job"' });
    job.name = req.TrainingJobName;
  }
  if (req.HyperParameters !== undefined) {
    if (!isObject(req.HyperParameters)) throw new ConfigError(`${source}: HyperParameters must be an object`, { hint: 'E.g. "HyperParameters": {"epochs": "10"}' });
    job.hyperParameters = req.HyperParameters;
  }
  const rc = req.ResourceConfig;
  if (isObject(rc) && rc.InstanceType !== undefined) {
    if (typeof rc.InstanceType !== 'string') throw new ConfigError(`${source}: ResourceConfig.InstanceType must be a string`, { hint: 'E.g. "InstanceType": "ml.p4d.24xlarge"' });
    job.instanceType = rc.InstanceType;
  }
  if (req.Environment !== undefined) {
    const env = req.Environment;
    if (!isObject(env) || !Object.values(env).every((v) => typeof v === 'string')) {
      throw new ConfigError(`${source}: Environment must be an object of string values`, { hint: 'E.g. "Environment": {"NCCL_DEBUG": "INFO"}' });
    }
    job.environment = env as Record<string, string>;
  }
  return job;
}

function where(name: string | undefined, index: number): string {
  return name === undefined ? `channel #${index + 1}` : `channel ${JSON.stringify(name)}`;
}

function oneOf<T extends string>(value: unknown, allowed: readonly T[], what: string, field: string): T {
  if (typeof value === 'string' && (allowed as readonly string[]).includes(value)) return value as T;
  const near = typeof value === 'string' ? allowed.find((a) => a.toLowerCase() === value.toLowerCase()) : undefined;
  throw new ConfigError(`${what}: ${field} ${JSON.stringify(value)} is not valid`, {
    hint: near ? `Did you mean ${near}? Values are case-sensitive` : `Use one of ${allowed.join(', ')}`,
  });
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Parse the text of an InputDataConfig file (`source` names it in errors).
 * `defaultInputMode` is the job's TrainingInputMode (SageMaker's default: File).
 */
export function parseInputDataConfigText(text: string, source: string, defaultInputMode: InputMode = 'File'): ParsedChannels {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    const msg = err instanceof Error ? err.message.split('\n')[0] : String(err);
    throw new ConfigError(`${source} is not valid JSON (${msg})`, { hint: 'Write the InputDataConfig list of CreateTrainingJob, e.g. [{"ChannelName": "train", "DataSource": {"S3DataSource": {"S3Uri": "s3://bucket/train/"}}}]' });
  }
  return parseInputDataConfig(json, source, defaultInputMode);
}

export function parseInputDataConfig(json: unknown, source = 'input data config', defaultInputMode: InputMode = 'File'): ParsedChannels {
  let list = json;
  let mode = defaultInputMode;
  let job: TrainingJobSettings | undefined;
  if (isObject(json) && 'InputDataConfig' in json) {
    list = json.InputDataConfig;
    job = jobSettings(json, source);
    const spec = json.AlgorithmSpecification;
    if (isObject(spec) && spec.TrainingInputMode !== undefined) {
      mode = oneOf(spec.TrainingInputMode, INPUT_MODES, source, 'AlgorithmSpecification.TrainingInputMode');
    }
  }
  if (!Array.isArray(list)) {
    throw new ConfigError(`${source}: expected a JSON list of channels (SageMaker's InputDataConfig)`, { hint: 'Wrap the channels in [ ... ], or pass a CreateTrainingJob request with an InputDataConfig field' });
  }
  if (list.length === 0) throw new ConfigError(`${source}: the channel list is empty`, { hint: 'Define at least one channel' });
  const warnings: string[] = [];
  const channels = list.map((c, i) => channelFromJson(c, i, mode, warnings));
  checkChannels(channels, warnings);
  return { channels, warnings, ...(job ? { job } : {}) };
}

function channelFromJson(c: unknown, index: number, defaultInputMode: InputMode, warnings: string[]): ChannelConfig {
  if (!isObject(c)) throw new ConfigError(`${where(undefined, index)}: expected an object with ChannelName and DataSource`, { hint: 'See the Channel type of SageMaker CreateTrainingJob' });
  const rawName = c.ChannelName;
  if (typeof rawName !== 'string') throw new ConfigError(`${where(undefined, index)}: ChannelName is missing or not a string`, { hint: 'Add "ChannelName": "train"' });
  const at = where(rawName, index);
  for (const k of Object.keys(c)) {
    if (!CHANNEL_FIELDS.has(k)) throw new ConfigError(`${at}: unknown field ${JSON.stringify(k)}`, { hint: `Channel fields are ${[...CHANNEL_FIELDS].join(', ')} (case-sensitive)` });
  }
  const ds = c.DataSource;
  if (!isObject(ds) || !isObject(ds.S3DataSource)) {
    const other = isObject(ds) ? Object.keys(ds)[0] : undefined;
    throw new ConfigError(`${at}: DataSource.S3DataSource is missing${other ? ` (${other} is not supported)` : ''}`, { hint: 'Add "DataSource": {"S3DataSource": {"S3Uri": "s3://bucket/prefix/"}}' });
  }
  const s3 = ds.S3DataSource;
  for (const k of Object.keys(s3)) {
    if (!S3_SOURCE_FIELDS.has(k) && !S3_SOURCE_IGNORED.has(k)) {
      throw new ConfigError(`${at}: unknown field DataSource.S3DataSource.${k}`, { hint: `S3DataSource fields are ${[...S3_SOURCE_FIELDS].join(', ')} (case-sensitive)` });
    }
  }
  if (typeof s3.S3Uri !== 'string') throw new ConfigError(`${at}: DataSource.S3DataSource.S3Uri is missing or not a string`, { hint: 'Add "S3Uri": "s3://bucket/prefix/"' });
  const f = 'DataSource.S3DataSource';
  if (s3.S3DataDistributionType !== undefined && s3.S3DistributionType !== undefined && s3.S3DataDistributionType !== s3.S3DistributionType) {
    throw new ConfigError(`${at}: ${f}.S3DataDistributionType and S3DistributionType disagree`, { hint: 'Keep only S3DataDistributionType' });
  }
  const dist = s3.S3DataDistributionType ?? s3.S3DistributionType;
  let attributeNames: string[] | undefined;
  if (s3.AttributeNames !== undefined) {
    if (!Array.isArray(s3.AttributeNames) || !s3.AttributeNames.every((a) => typeof a === 'string' && a.length > 0)) {
      throw new ConfigError(`${at}: ${f}.AttributeNames must be a list of attribute names`, { hint: 'E.g. "AttributeNames": ["source-ref", "class"]' });
    }
    attributeNames = s3.AttributeNames as string[];
  }
  let seed: number | undefined;
  if (c.ShuffleConfig !== undefined) {
    const sc = c.ShuffleConfig;
    if (!isObject(sc) || sc.Seed === undefined) throw new ConfigError(`${at}: ShuffleConfig needs a Seed`, { hint: 'E.g. "ShuffleConfig": {"Seed": 7}' });
    seed = parseSeed(sc.Seed, at, 'ShuffleConfig.Seed');
  }
  if (c.ContentType !== undefined && typeof c.ContentType !== 'string') throw new ConfigError(`${at}: ContentType must be a string`, { hint: 'E.g. "ContentType": "application/x-recordio"' });
  const channel: ChannelConfig = {
    name: rawName,
    s3Uri: s3.S3Uri,
    s3DataType: s3.S3DataType === undefined ? 'S3Prefix' : oneOf(s3.S3DataType, S3_DATA_TYPES, at, `${f}.S3DataType`),
    distribution: dist === undefined ? 'FullyReplicated' : oneOf(dist, DISTRIBUTIONS, at, `${f}.S3DataDistributionType`),
    inputMode: c.InputMode === undefined ? defaultInputMode : oneOf(c.InputMode, INPUT_MODES, at, 'InputMode'),
    recordWrapper: c.RecordWrapperType === undefined ? 'None' : oneOf(c.RecordWrapperType, RECORD_WRAPPERS, at, 'RecordWrapperType'),
    compression: c.CompressionType === undefined ? 'None' : oneOf(c.CompressionType, COMPRESSIONS, at, 'CompressionType'),
    ...(attributeNames ? { attributeNames } : {}),
    ...(typeof c.ContentType === 'string' ? { contentType: c.ContentType } : {}),
    ...(seed !== undefined ? { seed } : {}),
    ...(c.Sluice !== undefined ? sluiceFields(c.Sluice, at) : {}),
  };
  checkChannel(channel, warnings);
  return channel;
}

/** The JSON form of the short form's snapshot=, snapshot-out= and filter= (issue 15). */
function sluiceFields(v: unknown, at: string): Pick<ChannelConfig, 'snapshot' | 'snapshotOut' | 'filters' | 'orderFile' | 'resumeFrom'> {
  const example = 'E.g. "Sluice": {"Snapshot": "train.snap.gz"} or "Sluice": {"Filter": ["dt>=2026-06-01", "region=kr"]}';
  if (!isObject(v)) throw new ConfigError(`${at}: Sluice must be an object`, { hint: example });
  for (const k of Object.keys(v)) {
    if (!SLUICE_FIELDS.has(k)) throw new ConfigError(`${at}: unknown field Sluice.${k}`, { hint: `Sluice fields are ${[...SLUICE_FIELDS].join(', ')} (case-sensitive)` });
  }
  const out: Pick<ChannelConfig, 'snapshot' | 'snapshotOut' | 'filters' | 'orderFile' | 'resumeFrom'> = {};
  if (v.ResumeFrom !== undefined) out.resumeFrom = parseResume(v.ResumeFrom, `${at}: Sluice.ResumeFrom`);
  for (const [field, key] of [['Snapshot', 'snapshot'], ['SnapshotOut', 'snapshotOut'], ['OrderFile', 'orderFile']] as const) {
    if (v[field] === undefined) continue;
    if (typeof v[field] !== 'string' || v[field] === '') throw new ConfigError(`${at}: Sluice.${field} must be a file path`, { hint: example });
    out[key] = v[field];
  }
  if (v.Filter !== undefined) {
    const list = typeof v.Filter === 'string' ? [v.Filter] : v.Filter;
    if (!Array.isArray(list) || list.length === 0 || !list.every((f) => typeof f === 'string' && f.trim() !== '')) {
      throw new ConfigError(`${at}: Sluice.Filter must be a filter expression or a list of them`, { hint: example });
    }
    out.filters = (list as string[]).map((f) => f.trim());
  }
  return out;
}

function parseSeed(v: unknown, at: string, field: string): number {
  const n = typeof v === 'string' && /^-?\d+$/.test(v.trim()) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isSafeInteger(n)) {
    throw new ConfigError(`${at}: ${field} ${JSON.stringify(v)} is not an integer`, { hint: `Use a whole number between ${Number.MIN_SAFE_INTEGER} and ${Number.MAX_SAFE_INTEGER}` });
  }
  return n;
}

/** Short-form keys and the values (lower case) they accept, with a few aliases. */
const SHORT_VALUES = {
  mode: { file: 'File', fastfile: 'FastFile', pipe: 'Pipe' },
  distribution: { fullyreplicated: 'FullyReplicated', replicated: 'FullyReplicated', shardedbys3key: 'ShardedByS3Key', sharded: 'ShardedByS3Key' },
  type: { s3prefix: 'S3Prefix', prefix: 'S3Prefix', manifestfile: 'ManifestFile', manifest: 'ManifestFile', augmentedmanifestfile: 'AugmentedManifestFile', augmented: 'AugmentedManifestFile' },
  wrapper: { none: 'None', recordio: 'RecordIO' },
  compression: { none: 'None', gzip: 'Gzip' },
} as const;
const SHORT_KEYS = [...Object.keys(SHORT_VALUES), 'seed', 'content-type', 'attributes', 'snapshot', 'snapshot-out', 'filter', 'resume', 'order-file'];

/** Parse `--channel train=s3://b/p/,mode=Pipe,distribution=ShardedByS3Key,seed=7`. */
export function parseChannelFlag(text: string, defaultInputMode: InputMode = 'File'): ParsedChannels {
  const [head, ...pairs] = text.split(',');
  const eq = head!.indexOf('=');
  const example = 'E.g. --channel train=s3://bucket/train/,mode=Pipe,distribution=ShardedByS3Key,seed=7';
  if (eq <= 0) throw new ConfigError(`--channel ${JSON.stringify(text)}: expected NAME=s3://bucket/prefix/ first`, { hint: example });
  const name = head!.slice(0, eq);
  const at = `--channel ${name}`;
  const channel: ChannelConfig = {
    name, s3Uri: head!.slice(eq + 1), s3DataType: 'S3Prefix', distribution: 'FullyReplicated',
    inputMode: defaultInputMode, recordWrapper: 'None', compression: 'None',
  };
  const seen = new Set<string>();
  for (const pair of pairs) {
    const i = pair.indexOf('=');
    const key = (i < 0 ? pair : pair.slice(0, i)).trim().toLowerCase();
    const value = i < 0 ? '' : pair.slice(i + 1).trim();
    if (!SHORT_KEYS.includes(key)) throw new ConfigError(`${at}: unknown setting ${JSON.stringify(key)}`, { hint: `Settings are ${SHORT_KEYS.join(', ')} (an S3 URI holding ',' needs --input-data-config)` });
    if (i < 0 || value === '') throw new ConfigError(`${at}: ${key} needs a value`, { hint: example });
    if (seen.has(key)) throw new ConfigError(`${at}: ${key} is given twice`, { hint: 'Keep one' });
    seen.add(key);
    if (key in SHORT_VALUES) {
      const table = SHORT_VALUES[key as keyof typeof SHORT_VALUES] as Record<string, string>;
      const v = table[value.toLowerCase()];
      if (!v) throw new ConfigError(`${at}: ${key} ${JSON.stringify(value)} is not valid`, { hint: `Use one of ${[...new Set(Object.values(table))].join(', ')}` });
      if (key === 'mode') channel.inputMode = v as InputMode;
      else if (key === 'distribution') channel.distribution = v as Distribution;
      else if (key === 'type') channel.s3DataType = v as S3DataType;
      else if (key === 'wrapper') channel.recordWrapper = v as RecordWrapper;
      else channel.compression = v as Compression;
    } else if (key === 'seed') {
      channel.seed = parseSeed(value, at, 'seed');
    } else if (key === 'content-type') {
      channel.contentType = value;
    } else if (key === 'snapshot') {
      channel.snapshot = value;
    } else if (key === 'snapshot-out') {
      channel.snapshotOut = value;
    } else if (key === 'resume') {
      channel.resumeFrom = parseResume(value, `${at}: resume`);
    } else if (key === 'order-file') {
      channel.orderFile = value;
    } else if (key === 'filter') {
      // Several filters joined by '&' (',' separates settings): filter=dt>=2026-06-01&region=kr
      channel.filters = value.split('&').map((f) => f.trim());
      if (channel.filters.some((f) => f === '')) throw new ConfigError(`${at}: filter has an empty expression`, { hint: 'Join filters with &, e.g. filter=dt>=2026-06-01&region=kr' });
    } else {
      channel.attributeNames = value.split('|').map((a) => a.trim());
      if (channel.attributeNames.some((a) => a === '')) throw new ConfigError(`${at}: attributes has an empty name`, { hint: 'Join names with |, e.g. attributes=source-ref|class' });
    }
  }
  const warnings: string[] = [];
  checkChannel(channel, warnings);
  return { channels: [channel], warnings };
}

/** The rules of one channel; pushes ignored settings to `warnings`. */
export function checkChannel(c: ChannelConfig, warnings: string[]): void {
  const at = `channel ${JSON.stringify(c.name)}`;
  const nameProblem = channelNameProblem(c.name);
  if (nameProblem !== undefined) throw new ConfigError(`${at}: ${nameProblem}`, { hint: 'Rename the channel, e.g. "train"' });
  let prefix: string;
  try {
    prefix = parseS3Uri(c.s3Uri).prefix;
  } catch (err) {
    const why = err instanceof BadUriError ? err.message.replace(/^bad S3 URI /, '') : String(err);
    throw new ConfigError(`${at}: S3Uri ${why}`, { hint: 'Use the form s3://bucket/prefix/' });
  }
  if (c.s3DataType !== 'S3Prefix' && (prefix === '' || prefix.endsWith('/'))) {
    throw new ConfigError(`${at}: S3Uri ${JSON.stringify(c.s3Uri)} must name the manifest object for ${c.s3DataType}`, { hint: 'Use the form s3://bucket/path/train.manifest' });
  }
  if (c.s3DataType === 'AugmentedManifestFile') {
    if (!c.attributeNames || c.attributeNames.length === 0) {
      throw new ConfigError(`${at}: AugmentedManifestFile needs AttributeNames`, { hint: 'Add "AttributeNames": ["source-ref", "class"] to S3DataSource (short form: attributes=source-ref|class)' });
    }
    if (c.inputMode !== 'Pipe') throw new ConfigError(`${at}: AugmentedManifestFile works only with InputMode Pipe`, { hint: 'Set "InputMode": "Pipe" (short form: mode=Pipe)' });
  }
  if (c.attributeNames) {
    if (c.s3DataType !== 'AugmentedManifestFile') throw new ConfigError(`${at}: AttributeNames applies only to S3DataType AugmentedManifestFile`, { hint: 'Remove AttributeNames, or set "S3DataType": "AugmentedManifestFile"' });
    if (c.attributeNames.length > MAX_ATTRIBUTE_NAMES) throw new ConfigError(`${at}: AttributeNames has ${c.attributeNames.length} names, SageMaker allows at most ${MAX_ATTRIBUTE_NAMES}`, { hint: 'List fewer attributes' });
    if (new Set(c.attributeNames).size !== c.attributeNames.length) throw new ConfigError(`${at}: AttributeNames lists a name twice`, { hint: 'List each attribute once' });
  }
  if (c.s3DataType !== 'S3Prefix' && (c.snapshot !== undefined || c.snapshotOut !== undefined || c.filters !== undefined)) {
    throw new ConfigError(`${at}: snapshot, snapshot-out and filter apply to S3Prefix channels; ${c.s3DataType} lists its objects itself`, { hint: 'Remove them, or use type=S3Prefix' });
  }
  if (c.orderFile !== undefined && c.inputMode !== 'FastFile') {
    throw new ConfigError(`${at}: order-file applies to FastFile channels (it orders the mount's prefetch); ${c.inputMode} mode has no mount`, { hint: 'Remove order-file, or use mode=FastFile' });
  }
  if (c.inputMode === 'FastFile') {
    if (c.s3DataType !== 'S3Prefix') throw new ConfigError(`${at}: FastFile mounts an S3Prefix; ${c.s3DataType} is not supported`, { hint: 'Use InputMode File or Pipe for manifests' });
    if (c.distribution === 'ShardedByS3Key') throw new ConfigError(`${at}: FastFile mounts the whole prefix, so it cannot shard by key`, { hint: 'Use InputMode File or Pipe with ShardedByS3Key, or FullyReplicated with FastFile' });
  }
  if (c.inputMode !== 'Pipe') {
    if (c.recordWrapper !== 'None') warnings.push(`${at}: RecordWrapperType ${c.recordWrapper} applies to Pipe mode only; ${c.inputMode} mode ignores it`);
    if (c.compression !== 'None') warnings.push(`${at}: CompressionType ${c.compression} applies to Pipe mode only; ${c.inputMode} mode keeps the objects' bytes as they are`);
    if (c.resumeFrom !== undefined) warnings.push(`${at}: ResumeFrom applies to Pipe mode only; ${c.inputMode} mode ignores it (it serves every object whenever the script reads it)`);
  }
}

/** Rules across channels (unique names). */
export function checkChannels(channels: readonly ChannelConfig[], _warnings: string[] = []): void {
  const seen = new Set<string>();
  for (const c of channels) {
    if (seen.has(c.name)) throw new ConfigError(`channel ${JSON.stringify(c.name)} is defined twice`, { hint: 'Give every channel a unique ChannelName' });
    seen.add(c.name);
  }
}

/** The InputDataConfig entry (CreateTrainingJob shape) for a channel. */
export function toSageMakerChannel(c: ChannelConfig): Record<string, unknown> {
  return {
    ChannelName: c.name,
    DataSource: {
      S3DataSource: {
        S3Uri: c.s3Uri,
        S3DataType: c.s3DataType,
        S3DataDistributionType: c.distribution,
        ...(c.attributeNames ? { AttributeNames: c.attributeNames } : {}),
      },
    },
    InputMode: c.inputMode,
    RecordWrapperType: c.recordWrapper,
    CompressionType: c.compression,
    ...(c.contentType !== undefined ? { ContentType: c.contentType } : {}),
    ...(c.seed !== undefined ? { ShuffleConfig: { Seed: c.seed } } : {}),
  };
}

/**
 * The container's /opt/ml/input/config/inputdataconfig.json (also SM_INPUT_DATA_CONFIG),
 * in SageMaker's shape: an object keyed by channel name.
 */
export function containerInputDataConfig(channels: readonly ChannelConfig[]): Record<string, Record<string, string>> {
  const out: Record<string, Record<string, string>> = {};
  for (const c of channels) {
    out[c.name] = {
      ...(c.contentType !== undefined ? { ContentType: c.contentType } : {}),
      TrainingInputMode: c.inputMode,
      S3DistributionType: c.distribution,
      RecordWrapperType: c.recordWrapper,
    };
  }
  return out;
}
