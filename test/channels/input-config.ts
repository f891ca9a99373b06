import t from 'tap';
import { ConfigError } from '../../src/errors.js';
import {
  containerInputDataConfig, parseChannelFlag, parseInputDataConfig, parseInputDataConfigText, toSageMakerChannel,
} from '../../src/channels/input-config.js';

const ch = (over: Record<string, unknown> = {}, s3: Record<string, unknown> = {}) => ({
  ChannelName: 'train',
  DataSource: { S3DataSource: { S3Uri: 's3://bucket/train/', ...s3 } },
  ...over,
});

t.test('SageMaker defaults', async (t) => {
  const { channels, warnings } = parseInputDataConfig([ch()]);
  t.same(channels, [{
    name: 'train', s3Uri: 's3://bucket/train/', s3DataType: 'S3Prefix', distribution: 'FullyReplicated',
    inputMode: 'File', recordWrapper: 'None', compression: 'None',
  }]);
  t.same(warnings, []);
});

t.test('every field, both distribution field names, and a whole CreateTrainingJob request', async (t) => {
  const full = ch({ InputMode: 'Pipe', RecordWrapperType: 'RecordIO', CompressionType: 'Gzip', ContentType: 'text/csv', ShuffleConfig: { Seed: 7 } },
    { S3DataType: 'S3Prefix', S3DataDistributionType: 'ShardedByS3Key' });
  const c = parseInputDataConfig([full]).channels[0]!;
  t.match(c, { inputMode: 'Pipe', recordWrapper: 'RecordIO', compression: 'Gzip', contentType: 'text/csv', seed: 7, distribution: 'ShardedByS3Key' });
  t.equal(parseInputDataConfig([ch({}, { S3DistributionType: 'ShardedByS3Key' })]).channels[0]!.distribution, 'ShardedByS3Key');
  const req = { AlgorithmSpecification: { TrainingInputMode: 'Pipe' }, InputDataConfig: [ch(), ch({ ChannelName: 'val', InputMode: 'File' })] };
  t.same(parseInputDataConfig(req).channels.map((x) => x.inputMode), ['Pipe', 'File']);
  t.same(toSageMakerChannel(c), {
    ChannelName: 'train',
    DataSource: { S3DataSource: { S3Uri: 's3://bucket/train/', S3DataType: 'S3Prefix', S3DataDistributionType: 'ShardedByS3Key' } },
    InputMode: 'Pipe', RecordWrapperType: 'RecordIO', CompressionType: 'Gzip', ContentType: 'text/csv', ShuffleConfig: { Seed: 7 },
  });
});

t.test('the container inputdataconfig.json has SageMaker\'s shape', async (t) => {
  const { channels } = parseInputDataConfig([ch({ ContentType: 'text/csv' }), ch({ ChannelName: 'val', InputMode: 'Pipe' }, { S3DataDistributionType: 'ShardedByS3Key' })]);
  t.same(containerInputDataConfig(channels), {
    train: { ContentType: 'text/csv', TrainingInputMode: 'File', S3DistributionType: 'FullyReplicated', RecordWrapperType: 'None' },
    val: { TrainingInputMode: 'Pipe', S3DistributionType: 'ShardedByS3Key', RecordWrapperType: 'None' },
  });
});

t.test('the short --channel form', async (t) => {
  const c = parseChannelFlag('train=s3://bkt/p/,mode=Pipe,distribution=ShardedByS3Key,seed=7').channels[0]!;
  t.same(c, { name: 'train', s3Uri: 's3://bkt/p/', s3DataType: 'S3Prefix', distribution: 'ShardedByS3Key', inputMode: 'Pipe', recordWrapper: 'None', compression: 'None', seed: 7 });
  const d = parseChannelFlag('aug=s3://bkt/x.manifest,type=augmented,mode=pipe,wrapper=recordio,compression=gzip,content-type=application/x-recordio,attributes=source-ref|class').channels[0]!;
  t.match(d, { s3DataType: 'AugmentedManifestFile', inputMode: 'Pipe', recordWrapper: 'RecordIO', compression: 'Gzip', contentType: 'application/x-recordio', attributeNames: ['source-ref', 'class'] });
  t.equal(parseChannelFlag('p=s3://bkt/date=2020-01-01/').channels[0]!.s3Uri, 's3://bkt/date=2020-01-01/', 'a = in the URI is kept');
  t.equal(parseChannelFlag('p=s3://bkt/p/', 'FastFile').channels[0]!.inputMode, 'FastFile', 'job default mode');
});

/** Each bad config: one line, a ConfigError, naming the field. */
const bad: [string, () => unknown, RegExp][] = [
  ['not JSON', () => parseInputDataConfigText('{oops', 'channels.json'), /channels\.json is not valid JSON/],
  ['not a list', () => parseInputDataConfig({ ChannelName: 'x' }), /expected a JSON list of channels/],
  ['empty list', () => parseInputDataConfig([]), /the channel list is empty/],
  ['no name', () => parseInputDataConfig([{ DataSource: {} }]), /channel #1: ChannelName is missing/],
  ['bad name', () => parseInputDataConfig([ch({ ChannelName: 'tr ain' })]), /channel "tr ain": ChannelName must be 1 to 64/],
  ['long name', () => parseInputDataConfig([ch({ ChannelName: 'x'.repeat(65) })]), /ChannelName must be 1 to 64/],
  ['duplicate', () => parseInputDataConfig([ch(), ch()]), /channel "train" is defined twice/],
  ['unknown field', () => parseInputDataConfig([ch({ Inputmode: 'Pipe' })]), /unknown field "Inputmode"/],
  ['unknown S3 field', () => parseInputDataConfig([ch({}, { S3Url: 'x' })]), /unknown field DataSource\.S3DataSource\.S3Url/],
  ['no S3DataSource', () => parseInputDataConfig([{ ChannelName: 'a', DataSource: { FileSystemDataSource: {} } }]), /S3DataSource is missing \(FileSystemDataSource is not supported\)/],
  ['no S3Uri', () => parseInputDataConfig([ch({}, { S3Uri: undefined })]), /S3Uri is missing/],
  ['bad S3Uri', () => parseInputDataConfig([ch({}, { S3Uri: 'https://b/x' })]), /channel "train": S3Uri "https:\/\/b\/x": it must start with s3:\/\//],
  ['bad mode', () => parseInputDataConfig([ch({ InputMode: 'pipe' })]), /InputMode "pipe" is not valid\. Did you mean Pipe\?/],
  ['bad mode 2', () => parseInputDataConfig([ch({ InputMode: 'Stream' })]), /InputMode "Stream" is not valid\. Use one of File, FastFile, Pipe/],
  ['bad distribution', () => parseInputDataConfig([ch({}, { S3DataDistributionType: 'Sharded' })]), /S3DataDistributionType "Sharded" is not valid/],
  ['distribution names disagree', () => parseInputDataConfig([ch({}, { S3DataDistributionType: 'ShardedByS3Key', S3DistributionType: 'FullyReplicated' })]), /disagree/],
  ['bad type', () => parseInputDataConfig([ch({}, { S3DataType: 'Prefix' })]), /S3DataType "Prefix" is not valid/],
  ['bad wrapper', () => parseInputDataConfig([ch({ RecordWrapperType: 'Protobuf' })]), /RecordWrapperType "Protobuf" is not valid/],
  ['bad compression', () => parseInputDataConfig([ch({ CompressionType: 'Zstd' })]), /CompressionType "Zstd" is not valid/],
  ['no seed', () => parseInputDataConfig([ch({ ShuffleConfig: {} })]), /ShuffleConfig needs a Seed/],
  ['bad seed', () => parseInputDataConfig([ch({ ShuffleConfig: { Seed: 1.5 } })]), /ShuffleConfig\.Seed 1\.5 is not an integer/],
  ['augmented without attributes', () => parseInputDataConfig([ch({ InputMode: 'Pipe' }, { S3DataType: 'AugmentedManifestFile', S3Uri: 's3://bkt/m.jsonl' })]), /AugmentedManifestFile needs AttributeNames/],
  ['augmented in File mode', () => parseInputDataConfig([ch({}, { S3DataType: 'AugmentedManifestFile', S3Uri: 's3://bkt/m.jsonl', AttributeNames: ['a'] })]), /AugmentedManifestFile works only with InputMode Pipe/],
  ['attributes without augmented', () => parseInputDataConfig([ch({}, { AttributeNames: ['a'] })]), /AttributeNames applies only to S3DataType AugmentedManifestFile/],
  ['manifest URI is a folder', () => parseInputDataConfig([ch({}, { S3DataType: 'ManifestFile' })]), /must name the manifest object/],
  ['FastFile with a manifest', () => parseInputDataConfig([ch({ InputMode: 'FastFile' }, { S3DataType: 'ManifestFile', S3Uri: 's3://bkt/m' })]), /FastFile mounts an S3Prefix/],
  ['FastFile sharded', () => parseInputDataConfig([ch({ InputMode: 'FastFile' }, { S3DataDistributionType: 'ShardedByS3Key' })]), /FastFile mounts the whole prefix, so it cannot shard/],
  ['short: no URI', () => parseChannelFlag('train'), /expected NAME=s3:\/\/bucket\/prefix\/ first/],
  ['short: unknown key', () => parseChannelFlag('train=s3://bkt/p/,speed=9'), /--channel train: unknown setting "speed"/],
  ['short: bad value', () => parseChannelFlag('train=s3://bkt/p/,mode=stream'), /--channel train: mode "stream" is not valid\. Use one of File, FastFile, Pipe/],
  ['short: no value', () => parseChannelFlag('train=s3://bkt/p/,seed='), /seed needs a value/],
  ['short: twice', () => parseChannelFlag('train=s3://bkt/p/,seed=1,seed=2'), /seed is given twice/],
  ['short: bad seed', () => parseChannelFlag('train=s3://bkt/p/,seed=x'), /--channel train: seed "x" is not an integer/],
];

t.test('bad configs get one-line ConfigErrors naming the channel and field', async (t) => {
  for (const [name, fn, re] of bad) {
    try {
      fn();
      t.fail(`${name}: no error`);
    } catch (err) {
      t.ok(err instanceof ConfigError, `${name}: a ConfigError`);
      const line = (err as ConfigError).oneLine();
      t.match(line, re, name);
      t.notOk(line.includes('\n'), `${name}: one line`);
      t.ok((err as ConfigError).hint, `${name}: has a fix`);
    }
  }
});

t.test('Pipe-only settings in File mode are accepted with a warning', async (t) => {
  const { channels, warnings } = parseInputDataConfig([ch({ CompressionType: 'Gzip', RecordWrapperType: 'RecordIO' })]);
  t.equal(channels[0]!.compression, 'Gzip');
  t.equal(warnings.length, 2);
  t.match(warnings[1], /CompressionType Gzip applies to Pipe mode only; File mode keeps the objects' bytes as they are/);
});

t.test('a whole CreateTrainingJob request: its name, hyperparameters, instance type and Environment reach the container', async (t) => {
  const req = {
    TrainingJobName: 'job-1', HyperParameters: { epochs: '3' }, ResourceConfig: { InstanceType: 'ml.g5.xlarge', InstanceCount: 2 },
    Environment: { A: 'b' }, InputDataConfig: [ch()],
  };
  t.same(parseInputDataConfig(req).job, { name: 'job-1', hyperParameters: { epochs: '3' }, instanceType: 'ml.g5.xlarge', environment: { A: 'b' } });
  t.equal(parseInputDataConfig([ch()]).job, undefined, 'a bare list has none');
  const bad: [Record<string, unknown>, RegExp][] = [
    [{ HyperParameters: ['x'] }, /HyperParameters must be an object/],
    [{ Environment: { A: 1 } }, /Environment must be an object of string values/],
    [{ TrainingJobName: 5 }, /TrainingJobName must be a string/],
    [{ ResourceConfig: { InstanceType: 3 } }, /ResourceConfig.InstanceType must be a string/],
  ];
  for (const [extra, re] of bad) t.throws(() => parseInputDataConfig({ ...extra, InputDataConfig: [ch()] }, 'req.json'), { code: 'SLUICE_CONFIG', message: re }, String(re));
});

// Issue 15: the JSON form of snapshot=, snapshot-out= and filter= is the channel field "Sluice".
t.test('JSON form: Sluice.Snapshot, SnapshotOut and Filter match the short form', async (t) => {
  const json = parseInputDataConfig([ch({ InputMode: 'Pipe', Sluice: { Snapshot: 'a.snap.gz', SnapshotOut: 'b.snap', Filter: ['dt>=2026-06-01', ' region=kr '] } })]).channels[0]!;
  const short = parseChannelFlag('train=s3://bucket/train/,mode=Pipe,snapshot=a.snap.gz,snapshot-out=b.snap,filter=dt>=2026-06-01&region=kr').channels[0]!;
  t.same(json, short);
  t.same(json.filters, ['dt>=2026-06-01', 'region=kr']);
  t.same(parseInputDataConfig([ch({ Sluice: { Filter: 'region=kr' } })]).channels[0]!.filters, ['region=kr'], 'one filter as a string');
  t.notOk('Sluice' in toSageMakerChannel(json), 'not sent to SageMaker');
  const bad: Array<[unknown, RegExp]> = [
    ['x', /channel "train": Sluice must be an object/],
    [{ snapshot: 'a' }, /channel "train": unknown field Sluice\.snapshot/],
    [{ Snapshot: 3 }, /channel "train": Sluice\.Snapshot must be a file path/],
    [{ SnapshotOut: '' }, /channel "train": Sluice\.SnapshotOut must be a file path/],
    [{ Filter: [] }, /channel "train": Sluice\.Filter must be a filter expression or a list of them/],
    [{ Filter: ['a=b', ' '] }, /Sluice\.Filter must be/],
  ];
  for (const [v, re] of bad) {
    t.throws(() => parseInputDataConfig([ch({ Sluice: v })]), re, JSON.stringify(v));
  }
  t.throws(() => parseInputDataConfig([ch({ Sluice: { Snapshot: 'a' } }, { S3DataType: 'ManifestFile', S3Uri: 's3://bucket/m.manifest' })]), /snapshot, snapshot-out and filter apply to S3Prefix channels/);
});

// issue 43 defect 2: "." and ".." are input/data and input/ themselves; File mode's sweep removed other channels and input/config.
t.test('issue 43: channel names "." and ".." are refused in the short form and in JSON, one line naming the fix', async (t) => {
  for (const name of ['.', '..']) {
    const tries: [string, () => unknown][] = [
      ['--channel', () => parseChannelFlag(`${name}=s3://bkt/p/`)],
      ['JSON', () => parseInputDataConfig([{ ChannelName: name, DataSource: { S3DataSource: { S3Uri: 's3://bkt/p/' } } }])],
    ];
    for (const [form, fn] of tries) {
      try {
        fn();
        t.fail(`${form} ${name}: accepted`);
      } catch (err) {
        t.ok(err instanceof ConfigError, `${form} ${name}: a ConfigError`);
        const line = (err as ConfigError).oneLine();
        t.match(line, new RegExp(`channel "${name.replace(/\./g, '\\.')}"`), `${form} ${name}: names the channel`);
        t.match(line, /Rename the channel/, `${form} ${name}: names the fix`);
        t.notOk(line.includes('\n'), `${form} ${name}: one line`);
      }
    }
  }
  // Names that merely hold dots stay valid (SageMaker's pattern allows them).
  for (const name of ['...', '.hidden', 'v1.2', 'a..b']) t.equal(parseChannelFlag(`${name}=s3://bkt/p/`).channels[0]!.name, name);
});

// Issue 48: a FastFile channel's order file (short form order-file=, JSON Sluice.OrderFile).
t.test('order-file: per FastFile channel, in both forms; refused elsewhere', async (t) => {
  const short = parseChannelFlag('train=s3://bucket/train/,mode=FastFile,order-file=/tmp/order.txt').channels[0]!;
  t.equal(short.orderFile, '/tmp/order.txt');
  const json = parseInputDataConfig([ch({ InputMode: 'FastFile', Sluice: { OrderFile: '/tmp/order.txt' } })]).channels[0]!;
  t.equal(json.orderFile, '/tmp/order.txt');
  t.throws(() => parseChannelFlag('train=s3://bucket/train/,mode=Pipe,order-file=/tmp/o.txt'), { name: 'ConfigError', message: /order-file applies to FastFile channels/ });
  t.throws(() => parseInputDataConfig([ch({ InputMode: 'FastFile', Sluice: { OrderFile: '' } })]), { message: /Sluice\.OrderFile must be a file path/ });
});
