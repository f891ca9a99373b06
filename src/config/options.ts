/**
 * Every option sluice takes, declared once: flag, environment variable, type,
 * default, documentation and validation. `parseOptions()` turns argv + env
 * into a typed, validated object at startup; `helpFor()` renders --help from
 * the same table, and docs/CONFIGURATION.md is checked against it by a test.
 *
 * Precedence: flag > environment variable > default.
 * Sizes accept suffixes: 64KiB, 8MiB, 2GiB (binary), 64KB, 8MB (decimal), or plain bytes.
 */
import { parseArgs } from 'node:util';
import { InvalidArgumentError } from '../errors.js';
import { translateAliases } from './aliases.js';
import { memoryLimit } from './memory.js';

export type OptionType = 'string' | 'boolean' | 'int' | 'size' | 'duration-ms' | 'string[]' | 'octal';

export interface OptionSpec<T = unknown> {
  /** Long flag name without dashes, e.g. 'cache-size'. */
  flag: string;
  /** Environment variable consulted when the flag is absent. */
  env?: string;
  type: OptionType;
  default?: T | (() => T);
  /** One or two sentences for --help and docs/CONFIGURATION.md. */
  doc: string;
  /** Returns an error message when the value is out of range. */
  validate?: (v: T) => string | undefined;
}

const KiB = 1024;
const MiB = 1024 * KiB;
const GiB = 1024 * MiB;

/**
 * Default block cache: 1/8 of the memory limit (the container's, else the machine's:
 * ./memory.ts), clamped to [256 MiB, 8 GiB].
 * A training host's memory belongs to the training job; 1/8 leaves it almost all,
 * while keeping several max-prefetch windows (64 MiB each) for every open file.
 */
export function defaultCacheSize(totalmem = memoryLimit().bytes): number {
  // Whole MiB: os.totalmem() is what the kernel has left after its own reservations (24 GiB
  // reads as 23.54 GiB), and a default shown as "3085446KiB" in --help reads as a mistake.
  return Math.min(8 * GiB, Math.max(256 * MiB, Math.floor(totalmem / 8 / MiB) * MiB));
}

/**
 * Default --max-inflight: 1/8 of the memory limit, clamped to [64 MiB, 512 MiB]. 512 MiB keeps
 * 64 parts of 8 MiB in flight (a full --max-connections pool) and is reached from a 4 GiB
 * limit up; a smaller pod keeps cache plus in-flight bytes within a quarter of its memory.
 * 64 MiB is one full --max-prefetch window.
 */
export function defaultMaxInflight(limit = memoryLimit().bytes): number {
  return Math.min(512 * MiB, Math.max(64 * MiB, Math.floor(limit / 8 / MiB) * MiB));
}

const positive = (what: string) => (v: number) => (v > 0 ? undefined : `${what} must be > 0`);

/** The table. Commands choose subsets of it by flag name. */
export const OPTIONS = {
  endpoint: { flag: 'endpoint', env: 'SLUICE_ENDPOINT', type: 'string', doc: 'S3-compatible endpoint URL, e.g. http://127.0.0.1:9000. Default: AWS S3 for the region (also read from AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL).' },
  region: { flag: 'region', env: 'AWS_REGION', type: 'string', doc: 'AWS region. Default: AWS_REGION, AWS_DEFAULT_REGION, the profile, then us-east-1.' },
  pathStyle: { flag: 'path-style', env: 'SLUICE_PATH_STYLE', type: 'boolean', default: false, doc: 'Address buckets as endpoint/bucket/key instead of bucket.endpoint/key. Default: path-style for a custom --endpoint (localhost, an IP, a name such as minio, any host not under amazonaws.com) and for bucket names with dots; virtual-hosted for AWS S3 (as the AWS CLI does). Alias: --force-path-style.' },
  virtualHosted: { flag: 'virtual-hosted', env: 'SLUICE_VIRTUAL_HOSTED', type: 'boolean', default: false, doc: 'Address buckets as bucket.endpoint/key on a custom --endpoint too, for stores that refuse path-style (an IP or localhost endpoint stays path-style).' },
  profile: { flag: 'profile', env: 'AWS_PROFILE', type: 'string', doc: 'Shared profile (~/.aws/config, ~/.aws/credentials) for credentials and region, as aws --profile and mount-s3 --profile.' },
  requesterPays: { flag: 'requester-pays', env: 'SLUICE_REQUESTER_PAYS', type: 'boolean', default: false, doc: 'Read a Requester Pays bucket: every request (listing, HEAD, GET) carries x-amz-request-payer: requester, and your account pays for the requests and transfer.' },
  expectedBucketOwner: { flag: 'expected-bucket-owner', env: 'SLUICE_EXPECTED_BUCKET_OWNER', type: 'string', doc: 'Account id that must own the bucket: every request carries x-amz-expected-bucket-owner, and S3 refuses it (403) when another account owns the bucket.', validate: (v: string) => (/^\d{12}$/.test(v) ? undefined : 'expected-bucket-owner must be a 12-digit AWS account id') },
  maxConnections: { flag: 'max-connections', env: 'SLUICE_MAX_CONNECTIONS', type: 'int', default: 64, doc: 'Keep-alive connections in the data-path pool. 64 saturates a 25 Gbit/s NIC at ~50 MB/s per S3 stream.', validate: (v: number) => (v >= 1 && v <= 1024 ? undefined : 'max-connections must be between 1 and 1024') },
  maxAttempts: { flag: 'max-attempts', env: 'SLUICE_MAX_ATTEMPTS', type: 'int', default: 10, doc: 'Attempts per S3 request (first try plus retries) for throttling, 5xx, resets and timeouts.', validate: (v: number) => (v >= 1 && v <= 100 ? undefined : 'max-attempts must be between 1 and 100') },
  requestTimeout: { flag: 'request-timeout', env: 'SLUICE_REQUEST_TIMEOUT', type: 'duration-ms', default: 10_000, doc: 'Deadline for one S3 request attempt with no progress (headers or body bytes), in ms. A stalled attempt is aborted and retried.', validate: positive('request-timeout') },
  cacheSize: { flag: 'cache-size', env: 'SLUICE_CACHE_SIZE', type: 'size', default: () => defaultCacheSize(), doc: "Bytes of the in-memory block cache. Default: 1/8 of the container's memory limit (cgroup v1 or v2), else of the machine's memory, between 256 MiB and 8 GiB. Above half of that limit together with --max-inflight, sluice warns.", validate: (v: number) => (v >= 4 * MiB ? undefined : 'cache-size must be at least 4MiB') },
  partSize: { flag: 'part-size', env: 'SLUICE_PART_SIZE', type: 'size', default: 8 * MiB, doc: 'Size of one read-ahead ranged GET (cache blocks are at most 256 KiB, so random reads fetch only what they touch). 8 MiB is the size AWS recommends per ranged GET: large enough to amortise ~20 ms time-to-first-byte, small enough to parallelise.', validate: (v: number) => (v >= 64 * KiB && v <= 256 * MiB ? undefined : 'part-size must be between 64KiB and 256MiB') },
  maxPrefetch: { flag: 'max-prefetch', env: 'SLUICE_MAX_PREFETCH', type: 'size', default: 64 * MiB, doc: 'Largest read-ahead window of one sequential reader. 64 MiB keeps 8 parts of 8 MiB in flight: at 80 MB/s per stream and 25 ms TTFB that fills a 5 Gbit/s share per file. Two or more readers at once start by sharing one window, a budget that grows toward a full window each while ranged GETs keep their best speed (SEMANTICS.md).', validate: positive('max-prefetch') },
  maxInflight: { flag: 'max-inflight', env: 'SLUICE_MAX_INFLIGHT', type: 'size', default: () => defaultMaxInflight(), doc: "Bound on bytes being fetched at once across all readers (prefetch included). Bounds memory together with --cache-size. Default: 1/8 of the container's memory limit (else the machine's), between 64 MiB and 512 MiB.", validate: positive('max-inflight') },
  crossFilePrefetch: { flag: 'cross-file-prefetch', env: 'SLUICE_CROSS_FILE_PREFETCH', type: 'int', default: 32, doc: 'When files of a folder are read one after another, fetch up to this many next files (in listing order) ahead. 0 disables.', validate: (v: number) => (v >= 0 && v <= 4096 ? undefined : 'cross-file-prefetch must be between 0 and 4096') },
  orderFile: { flag: 'order-file', env: 'SLUICE_ORDER_FILE', type: 'string', doc: "A file in which the training script writes the epoch's file order (paths relative to the mount, one per line; writing it anew, best by rename, starts a new order): files are fetched ahead in that order instead of listing order, up to --cross-file-prefetch files ahead of the readers. Its folder must exist; the file may appear later. `sluice run`: per channel (order-file=PATH). See SEMANTICS.md." },
  crossFileMaxSize: { flag: 'cross-file-max-size', env: 'SLUICE_CROSS_FILE_MAX_SIZE', type: 'size', default: 4 * MiB, doc: 'Only files up to this size are fetched ahead whole by cross-file prefetch.', validate: positive('cross-file-max-size') },
  randomFillMaxSize: { flag: 'random-fill-max-size', env: 'SLUICE_RANDOM_FILL_MAX_SIZE', type: 'size', doc: 'A file read at random offsets, or read again from an earlier offset, is fetched whole in the background when it is at most this size, so its later reads are cache hits; files being filled together stay within it too. Default: 1/2 of --cache-size (at most --cache-size). 0 disables.', validate: (v: number) => (v >= 0 ? undefined : 'random-fill-max-size must be 0 or more') },
  metricsPort: { flag: 'metrics-port', env: 'SLUICE_METRICS_PORT', type: 'int', default: 9400, doc: 'Port of the Prometheus /metrics, /healthz and /readyz endpoint. 0 picks a free port; -1 disables. When the default port is taken (another sluice on the node), the next free one of the 16 after it is used and logged; sluice status finds it. A port given explicitly fails when taken.', validate: (v: number) => (v >= -1 && v <= 65535 ? undefined : 'metrics-port must be between -1 and 65535') },
  metricsHost: { flag: 'metrics-host', env: 'SLUICE_METRICS_HOST', type: 'string', default: '127.0.0.1', doc: 'Address the metrics endpoint binds to. Use 0.0.0.0 only when Prometheus scrapes from outside the pod.' },
  readyFile: { flag: 'ready-file', env: 'SLUICE_READY_FILE', type: 'string', doc: 'Write this file once the mount answers (for scripts and readiness probes).' },
  allowOther: { flag: 'allow-other', env: 'SLUICE_ALLOW_OTHER', type: 'boolean', default: false, doc: 'Let users other than the one running sluice read the mount (FUSE allow_other).' },
  logLevel: { flag: 'log-level', env: 'SLUICE_LOG_LEVEL', type: 'string', default: 'info', doc: 'Log level: fatal, error, warn, info, debug or trace. Where and how logs are written: --log-file, --log-format.', validate: (v: string) => (['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(v) ? undefined : 'log-level must be one of fatal, error, warn, info, debug, trace, silent') },
  readAheadKb: { flag: 'read-ahead-kb', env: 'SLUICE_READ_AHEAD_KB', type: 'int', default: 1024, doc: "Kernel readahead of the mount in KiB (its bdi read_ahead_kb; the kernel's default is 128). 1024 measured best for a cold sequential read through the mount (about 1.7x the throughput of 128; 4096 was no better). 0 leaves the kernel's value.", validate: (v: number) => (v >= 0 && v <= 65536 ? undefined : 'read-ahead-kb must be between 0 and 65536') },
  attrTimeout: { flag: 'attr-timeout', env: 'SLUICE_ATTR_TIMEOUT', type: 'int', default: 3600, doc: 'Seconds the kernel caches file attributes and lookups (also failed ones). The listing is fixed for the life of the mount, so long is safe and saves a round trip per lookup.', validate: (v: number) => (v >= 0 && v <= 86400 * 365 ? undefined : 'attr-timeout must be between 0 and 31536000 seconds') },
  // ---- disk tier (src/cache/disk-cache.ts) ----
  cacheDir: { flag: 'cache-dir', env: 'SLUICE_CACHE_DIR', type: 'string', doc: 'Keep fetched blocks in this local folder (e.g. on the instance NVMe), under the memory cache: later epochs, restarted jobs and other sluice processes on the node read them from disk instead of S3. Shared safely by concurrent processes; every block is checksummed. Default: no disk tier.' },
  cacheDirSize: { flag: 'cache-dir-size', env: 'SLUICE_CACHE_DIR_SIZE', type: 'size', doc: 'Bound on the bytes the disk tier holds, for all processes sharing --cache-dir together (least recently used blocks are evicted). Default: half of the free space of its filesystem less 1 GiB, plus what the tier already holds.', validate: (v: number) => (v >= 64 * KiB ? undefined : 'cache-dir-size must be at least 64KiB') },
  cacheDirWriteRate: { flag: 'cache-dir-write-rate', env: 'SLUICE_CACHE_DIR_WRITE_RATE', type: 'size', default: 1 * GiB, doc: 'Bytes per second the disk tier may write (blocks beyond it are not cached). 1 GiB/s is about half of what one NVMe drive writes, leaving the rest to the job.', validate: positive('cache-dir-write-rate') },
  cacheDirGroup: { flag: 'cache-dir-group', env: 'SLUICE_CACHE_DIR_GROUP', type: 'string', doc: 'Share the disk tier with the members of this group (a name or a number; this process must be in it): its folders get the group, --cache-dir-mode and the setgid bit, its files the mode\'s read/write bits. Members can read every cached byte and plant bytes for each other (SEMANTICS.md, "The disk tier: who can read it"). Default: no group, the tier is this user\'s alone (folders 0700, files 0600), and a --cache-dir that another user owns or may write is refused.' },
  cacheDirMode: { flag: 'cache-dir-mode', env: 'SLUICE_CACHE_DIR_MODE', type: 'octal', doc: 'Permission bits of the disk tier\'s folders when it is shared with --cache-dir-group, in octal: 0770 (members read and write; the default) or 0750 (members read only). Others never get any bit.', validate: (v: number) => (v >= 0 && v <= 0o777 ? undefined : 'cache-dir-mode must be octal between 000 and 777') },
  cacheBucket: { flag: 'cache-bucket', env: 'SLUICE_CACHE_BUCKET', type: 'string', doc: 'Share fetched blocks between nodes through this bucket, s3://BUCKET[/PREFIX] (an S3 Express One Zone directory bucket on AWS, or any bucket of the same endpoint): a block missing from memory and the disk tier is read from it before the source, and every block read from the source is PUT there in the background (1 MiB blocks, checksummed; 64 MiB of writes at most queued). Whoever may write it can feed every node bytes: see SEMANTICS.md, "The cache bucket". Default: no cache bucket.', validate: (v: string) => (/^s3:\/\/[^/]+/i.test(v) ? undefined : 'cache-bucket must be s3://BUCKET or s3://BUCKET/PREFIX') },
  cacheDirDirectWrite: { flag: 'cache-dir-direct-write', env: 'SLUICE_CACHE_DIR_DIRECT_WRITE', type: 'boolean', default: false, doc: 'Write the disk tier with O_DIRECT, from the GET buffers themselves: epoch 1 then costs next to no CPU for the tier (no copy into the page cache: 1-3 CPU s/GB on VMs), but the tier\'s bytes are not in the page cache afterwards, so the next epoch reads them from the disk. For datasets larger than the RAM, or a CPU-bound first epoch. Falls back to ordinary writes where the filesystem refuses O_DIRECT.' },
  caBundle: { flag: 'ca-bundle', env: 'AWS_CA_BUNDLE', type: 'string', doc: 'PEM file of the certificate authorities to trust for an https endpoint, instead of the built-in ones (as AWS_CA_BUNDLE for the AWS CLI and SDKs, and mount-s3 --ca-bundle). Used for listing, HEAD and data GETs alike. NODE_EXTRA_CA_CERTS still adds to the built-in set when this is not given.' },
  // ---- FUSE read size (native/src/fuse_init.c) ----
  directIo: { flag: 'direct-io', env: 'SLUICE_DIRECT_IO', type: 'boolean', default: false, doc: "Open the mount's files without the kernel's page cache (FUSE direct I/O, as mountpoint-s3 does by default): bytes go from sluice straight into the reader's buffer, so reading a dataset once neither fills the page cache (which counts against a container's memory limit) nor pays to allocate it. The reader's read size becomes the request size: reads of 128KiB or more keep full speed, 8KiB reads are several times slower than with the page cache. A second read of a file is served by sluice again (its caches, else S3), not by the kernel. Shared mmap needs Linux 6.6 or later. Disk-tier files that are passed through keep the page cache. See SEMANTICS.md, \"Direct I/O\"." },
  fuseMaxRead: { flag: 'fuse-max-read', env: 'SLUICE_FUSE_MAX_READ', type: 'size', default: 1 * MiB, doc: "Largest read the kernel sends the mount. libfuse 2 leaves it at 128KiB; sluice's addon raises it (Linux 4.20 or later) up to 1MiB, which makes a sequential read 8 times fewer FUSE requests. 128KiB keeps libfuse's value.", validate: (v: number) => (v >= 128 * KiB && v <= 1 * MiB && v % (4 * KiB) === 0 ? undefined : 'fuse-max-read must be a multiple of 4KiB between 128KiB and 1MiB') },
  // ---- sluice run (channels) ----
  inputDataConfig: { flag: 'input-data-config', env: 'SLUICE_INPUT_DATA_CONFIG', type: 'string', doc: "JSON file with the channels: SageMaker's InputDataConfig list (as passed to CreateTrainingJob), or a whole CreateTrainingJob request." },
  channel: { flag: 'channel', type: 'string[]', doc: 'A channel in short form, repeatable: NAME=s3://bucket/prefix/[,mode=File|FastFile|Pipe][,distribution=FullyReplicated|ShardedByS3Key][,seed=N][,type=S3Prefix|ManifestFile|AugmentedManifestFile][,attributes=a|b][,wrapper=None|RecordIO][,compression=None|Gzip][,content-type=T].' },
  root: { flag: 'root', env: 'SLUICE_ROOT', type: 'string', default: '/opt/ml', doc: "SageMaker's /opt/ml: config goes to ROOT/input/config, data to ROOT/input/data." },
  inputMode: { flag: 'input-mode', env: 'SLUICE_INPUT_MODE', type: 'string', default: 'File', doc: "The job's TrainingInputMode: the mode of channels that do not set InputMode (File, FastFile or Pipe; any case, as a channel's mode=).", validate: (v: string) => (['file', 'fastfile', 'pipe'].includes(v.toLowerCase()) ? undefined : 'input-mode must be File, FastFile or Pipe (in any case)') },
  hostConfig: { flag: 'host-config', env: 'SLUICE_HOST_CONFIG', type: 'string', doc: 'A resourceconfig.json ({"current_host", "hosts"}) to take the host identity from, instead of ROOT/input/config/resourceconfig.json.' },
  currentHost: { flag: 'current-host', env: 'SLUICE_CURRENT_HOST', type: 'string', doc: 'This host\'s name (e.g. algo-2), when no resourceconfig.json, RANK/WORLD_SIZE or JOB_COMPLETION_INDEX says it.' },
  hosts: { flag: 'hosts', env: 'SLUICE_HOSTS', type: 'string', doc: 'All host names, comma-separated (e.g. algo-1,algo-2), with --current-host.' },
  hostCount: { flag: 'host-count', env: 'SLUICE_HOST_COUNT', type: 'int', doc: 'Number of hosts (hosts are algo-1..algo-N): with JOB_COMPLETION_INDEX (set it to the Indexed Job\'s completions) or with --current-host.', validate: (v: number) => (v >= 1 ? undefined : 'host-count must be at least 1') },
  epochs: { flag: 'epochs', env: 'SLUICE_EPOCHS', type: 'int', doc: 'Pipe mode: epochs to serve (FIFOs CHANNEL_0 .. CHANNEL_{N-1}). Default: no limit, as on SageMaker.', validate: (v: number) => (v >= 1 ? undefined : 'epochs must be at least 1') },
  progress: { flag: 'progress', env: 'SLUICE_PROGRESS', type: 'string', default: 'auto', doc: 'Progress of File mode downloads (sluice run) and of sluice snapshot\'s listing: auto (a bar on a terminal, else a log line every 10 s, 5 s for a snapshot), bar, log or none.', validate: (v: string) => (['auto', 'bar', 'log', 'none'].includes(v) ? undefined : 'progress must be auto, bar, log or none') },
  // ---- deployment: access, ownership, logging, daemon (issue 13) ----
  noSignRequest: { flag: 'no-sign-request', env: 'SLUICE_NO_SIGN_REQUEST', type: 'boolean', default: false, doc: 'Send S3 requests unsigned, without looking for credentials: for public buckets (open datasets), as aws s3 --no-sign-request.' },
  uid: { flag: 'uid', env: 'SLUICE_UID', type: 'int', doc: 'Owner (user id) that files and folders of the mount show. Default: the user running sluice.', validate: (v: number) => (v >= 0 && v <= 0xfffffffe ? undefined : 'uid must be between 0 and 4294967294') },
  gid: { flag: 'gid', env: 'SLUICE_GID', type: 'int', doc: 'Group id that files and folders of the mount show. Default: the group of the user running sluice.', validate: (v: number) => (v >= 0 && v <= 0xfffffffe ? undefined : 'gid must be between 0 and 4294967294') },
  fileMode: { flag: 'file-mode', env: 'SLUICE_FILE_MODE', type: 'octal', default: 0o444, doc: 'Permission bits of files in the mount, in octal. The kernel enforces them (default_permissions) together with --uid and --gid; write bits are refused anyway (read-only mount).', validate: (v: number) => (v >= 0 && v <= 0o777 ? undefined : 'file-mode must be octal between 000 and 777') },
  dirMode: { flag: 'dir-mode', env: 'SLUICE_DIR_MODE', type: 'octal', default: 0o555, doc: 'Permission bits of folders in the mount, in octal (x lets a user enter the folder).', validate: (v: number) => (v >= 0 && v <= 0o777 ? undefined : 'dir-mode must be octal between 000 and 777') },
  allowRoot: { flag: 'allow-root', env: 'SLUICE_ALLOW_ROOT', type: 'boolean', default: false, doc: 'Let root read the mount as well as the user running sluice (FUSE allow_root). Cannot be combined with --allow-other.' },
  logFormat: { flag: 'log-format', env: 'SLUICE_LOG_FORMAT', type: 'string', default: 'auto', doc: 'Log format: text (one readable line per event), json (JSON lines, for log collectors) or auto (text when stderr is a terminal and no --log-file, else json).', validate: (v: string) => (['auto', 'text', 'json'].includes(v) ? undefined : 'log-format must be auto, text or json') },
  logFile: { flag: 'log-file', env: 'SLUICE_LOG_FILE', type: 'string', doc: 'Append logs to this file instead of stderr (created if missing). Errors that stop sluice are still printed on stderr.' },
  daemon: { flag: 'daemon', env: 'SLUICE_DAEMON', type: 'boolean', default: false, doc: 'sluice mount: return once the mount is ready and keep serving it in the background (exit status 0 when it mounted). Logs go to --log-file, else to a file named on stderr. Stop it with kill PID (it unmounts) or fusermount -u.' },
  // ---- datasets: snapshots, filters, archived objects (issue 15) ----
  snapshot: { flag: 'snapshot', env: 'SLUICE_SNAPSHOT', type: 'string', doc: 'Read exactly the objects of this snapshot file (written by sluice snapshot or --snapshot-out), with no LIST at start; reads are pinned to the snapshot\'s versions (ETag, or version id when recorded). See docs/SNAPSHOTS.md.' },
  snapshotOut: { flag: 'snapshot-out', env: 'SLUICE_SNAPSHOT_OUT', type: 'string', doc: 'After listing, write what was listed to this snapshot file (gzip-compressed if it ends in .gz), so the run can be repeated on the same data with --snapshot.' },
  filter: { flag: 'filter', type: 'string[]', doc: "Keep only matching keys, applied while listing (folders that cannot match are never listed). Repeatable. Partition filters NAME OP VALUE for Hive-style layouts (dt>=2026-06-01, region=kr|jp; OP = != >= <= > <) must all hold; globs on the key below the prefix ('**/*.jpg', 'train/shard-0*') are alternatives." },
  skipArchived: { flag: 'skip-archived', env: 'SLUICE_SKIP_ARCHIVED', type: 'boolean', default: false, doc: 'Leave out objects archived in GLACIER, DEEP_ARCHIVE or an Intelligent-Tiering archive tier (not restored), counted in sluice_archived_skipped_objects_total. Default: Pipe and File channels refuse to start; FastFile shows them and fails their open with ENODATA.' },
  // ---- sluice run (container contract) ----
  hyperparameters: { flag: 'hyperparameters', env: 'SLUICE_HYPERPARAMETERS', type: 'string', doc: 'Hyperparameters for ROOT/input/config/hyperparameters.json (and SM_HPS, SM_HP_<NAME>, SM_USER_ARGS): a JSON object inline (\'{"epochs": "10"}\') or a file holding one. Values are passed as strings, as SageMaker does; they override a CreateTrainingJob request\'s HyperParameters key by key. Default: the request\'s, else {}.' },
  instanceType: { flag: 'instance-type', env: 'SLUICE_INSTANCE_TYPE', type: 'string', doc: 'SageMaker instance type for resourceconfig.json and SM_CURRENT_INSTANCE_TYPE, e.g. ml.p4d.24xlarge. Default: a CreateTrainingJob request\'s ResourceConfig.InstanceType, else ml.<type> on an EC2 Nitro instance (from DMI, no network), else "local" (the toolkit\'s value for an unknown type).' },
  // ---- sluice run: channel checks and Pipe waits (issue 12) ----
  allowEmptyChannel: { flag: 'allow-empty-channel', env: 'SLUICE_ALLOW_EMPTY_CHANNEL', type: 'boolean', default: false, doc: 'Let a channel whose S3Uri matches no object start empty (File: an empty folder, FastFile: an empty mount, Pipe: FIFOs that give EOF) instead of failing the run.' },
  fifoWaitWarning: { flag: 'fifo-wait-warning', env: 'SLUICE_FIFO_WAIT_WARNING', type: 'duration-ms', default: 10_000, doc: 'Pipe mode: log a warning when a FIFO has waited this long (ms) for the training script to open it, read from it, or close the previous epoch; repeated at doubling intervals (at most every 10 min).', validate: (v: number) => (v >= 1 ? undefined : 'fifo-wait-warning must be at least 1 ms') },
} as const satisfies Record<string, OptionSpec<any>>;

export type OptionName = keyof typeof OPTIONS;

type ValueOf<S> = S extends { type: 'boolean' } ? boolean
  : S extends { type: 'int' | 'size' | 'duration-ms' | 'octal' } ? number
  : S extends { type: 'string[]' } ? string[]
  : string;
type HasDefault<S> = S extends { default: unknown } ? true : false;

/** The parsed values of the chosen options; those without a default may be undefined. */
export type Options<N extends OptionName> = {
  [K in N]: HasDefault<(typeof OPTIONS)[K]> extends true ? ValueOf<(typeof OPTIONS)[K]> : ValueOf<(typeof OPTIONS)[K]> | undefined;
};

const SIZE_RE = /^(\d+(?:\.\d+)?)\s*(b|k|kb|kib|m|mb|mib|g|gb|gib|t|tb|tib)?$/i;
const SIZE_UNITS: Record<string, number> = {
  b: 1, k: KiB, kib: KiB, kb: 1000, m: MiB, mib: MiB, mb: 1000 ** 2, g: GiB, gib: GiB, gb: 1000 ** 3,
  t: 1024 * GiB, tib: 1024 * GiB, tb: 1000 ** 4,
};

export function parseSize(text: string, what = 'size'): number {
  const m = SIZE_RE.exec(text.trim());
  if (!m) throw new InvalidArgumentError(`${what}: ${JSON.stringify(text)} is not a size`, { hint: 'Use bytes or a suffix, e.g. 512MiB or 2GiB' });
  const n = Math.floor(Number(m[1]) * SIZE_UNITS[(m[2] ?? 'b').toLowerCase()]!);
  if (!Number.isSafeInteger(n)) throw new InvalidArgumentError(`${what}: ${JSON.stringify(text)} is too large`);
  return n;
}

function parseInt10(text: string, what: string): number {
  if (!/^-?\d+$/.test(text.trim())) throw new InvalidArgumentError(`${what}: ${JSON.stringify(text)} is not an integer`);
  return Number(text.trim());
}

/** Permission bits in octal: 644, 0644 or 0o644. */
function parseOctal(text: string, what: string): number {
  const m = /^(?:0o?)?([0-7]{1,4})$/i.exec(text.trim());
  if (!m) throw new InvalidArgumentError(`${what}: ${JSON.stringify(text)} is not an octal mode`, { hint: 'Use octal permission bits, e.g. 0444 or 0555' });
  return parseInt(m[1]!, 8);
}

function parseBool(text: string, what: string): boolean {
  const t = text.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(t)) return true;
  if (['0', 'false', 'no', 'off', ''].includes(t)) return false;
  throw new InvalidArgumentError(`${what}: ${JSON.stringify(text)} is not true or false`);
}

function convert(spec: OptionSpec, raw: string | boolean | string[], source: string): unknown {
  const what = `${source}`;
  switch (spec.type) {
    case 'boolean': return typeof raw === 'boolean' ? raw : parseBool(String(raw), what);
    case 'int': return parseInt10(String(raw), what);
    case 'duration-ms': return parseInt10(String(raw), what);
    case 'size': return parseSize(String(raw), what);
    case 'string[]': return Array.isArray(raw) ? raw : [String(raw)];
    case 'octal': return parseOctal(String(raw), what);
    default: return String(raw);
  }
}

export interface ParseResult<N extends OptionName> {
  options: Options<N>;
  positionals: string[];
  /** Everything after a literal `--` (the training command for `sluice run`). */
  rest: string[];
  /** Extra command-specific flags declared by the caller, raw. */
  extra: Record<string, string | boolean | string[] | undefined>;
  /** The options set by a flag or an environment variable (the others have their default). */
  given: ReadonlySet<N>;
}

export interface ExtraFlag {
  type: 'string' | 'boolean';
  multiple?: boolean;
  short?: string;
}

/**
 * Parse argv for one command. `names` picks the shared options the command takes;
 * `extra` declares flags that only this command has (validated by the command).
 * Unknown flags are an InvalidArgumentError naming the flag and pointing at --help.
 */
export function parseOptions<N extends OptionName>(
  command: string,
  argv: string[],
  names: readonly N[],
  extra: Record<string, ExtraFlag> = {},
  env: NodeJS.ProcessEnv = process.env,
): ParseResult<N> {
  const dd = argv.indexOf('--');
  const rest = dd === -1 ? [] : argv.slice(dd + 1);
  const parseSpec: Record<string, { type: 'string' | 'boolean'; multiple?: boolean; short?: string }> = {};
  for (const n of names) {
    const s = OPTIONS[n] as OptionSpec;
    parseSpec[s.flag] = { type: s.type === 'boolean' ? 'boolean' : 'string', ...(s.type === 'string[]' ? { multiple: true } : {}) };
  }
  for (const [k, v] of Object.entries(extra)) parseSpec[k] = v;
  // mount-s3 / s3fs / AWS CLI names (./aliases.ts), for the flags this command takes.
  const head = translateAliases(dd === -1 ? argv : argv.slice(0, dd), command, (f) => Object.hasOwn(parseSpec, f.replace(/^--/, '')));
  // `--metrics-port -1`: parseArgs takes "-1" for a flag; join a negative number to its flag.
  const args: string[] = [];
  for (let i = 0; i < head.length; i++) {
    const a = head[i]!;
    const next = head[i + 1];
    const spec = a.startsWith('--') && !a.includes('=') ? parseSpec[a.slice(2)] : undefined;
    if (spec?.type === 'string' && next !== undefined && /^-\d/.test(next)) {
      args.push(`${a}=${next}`);
      i++;
    } else {
      args.push(a);
    }
  }
  let parsed;
  try {
    parsed = parseArgs({ args, options: parseSpec, allowPositionals: true, strict: true });
  } catch (err) {
    // parseArgs explains at length; the first sentence names the problem.
    const message = err instanceof Error ? err.message : String(err);
    const first = message.split(/\.(?:\s|$)/)[0]!;
    const unknown = /^Unknown option '--([^'=]+)/.exec(message)?.[1];
    const guess = unknown === undefined ? undefined : closest(unknown, Object.keys(parseSpec));
    throw new InvalidArgumentError(`${first.replace(/^Unknown option/, 'unknown option').replace(/^Option/, 'option')} (sluice ${command})`, {
      hint: guess ? `Did you mean --${guess}? See sluice ${command} --help` : `See sluice ${command} --help`,
    });
  }
  const values = parsed.values as Record<string, string | boolean | string[] | undefined>;
  const out: Record<string, unknown> = {};
  const given = new Set<N>();
  for (const n of names) {
    const s = OPTIONS[n] as OptionSpec;
    let v: unknown;
    const fromFlag = values[s.flag];
    if (fromFlag !== undefined) { v = convert(s, fromFlag, `--${s.flag}`); given.add(n); }
    else if (s.env && env[s.env] !== undefined && env[s.env] !== '') { v = convert(s, env[s.env]!, s.env); given.add(n); }
    else v = typeof s.default === 'function' ? (s.default as () => unknown)() : s.default;
    if (v !== undefined && s.validate) {
      const problem = (s.validate as (x: unknown) => string | undefined)(v);
      if (problem) throw new InvalidArgumentError(problem, { hint: `See sluice ${command} --help` });
    }
    out[n] = v;
  }
  const extraOut: Record<string, string | boolean | string[] | undefined> = {};
  for (const k of Object.keys(extra)) extraOut[k] = values[k];
  return { options: out as Options<N>, positionals: parsed.positionals, rest, extra: extraOut, given };
}

/** Edit distance (insertions, deletions, substitutions, adjacent swaps) between a and b. */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...new Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}

/**
 * The candidate closest to `word` for a "did you mean", or undefined when none is close:
 * within a third of the word's length (at least 2, at most 3 edits), or a candidate the
 * word is a prefix of (--cache for --cache-size).
 */
export function closest(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestD = Infinity;
  for (const c of candidates) {
    const dist = editDistance(word.toLowerCase(), c);
    if (dist < bestD) { best = c; bestD = dist; }
  }
  if (best !== undefined && bestD <= Math.min(3, Math.max(2, Math.floor(word.length / 3)))) return best;
  const prefixed = candidates.filter((c) => word.length >= 3 && c.startsWith(word.toLowerCase()));
  return prefixed.length === 1 ? prefixed[0] : undefined;
}

/** Topics of --help, in order. Options not listed here are shown under "Other options". */
export const OPTION_GROUPS: ReadonlyArray<{ title: string; names: readonly OptionName[] }> = [
  { title: 'S3', names: ['endpoint', 'region', 'pathStyle', 'virtualHosted', 'profile', 'noSignRequest', 'requesterPays', 'expectedBucketOwner', 'maxConnections', 'maxAttempts', 'requestTimeout'] },
  { title: 'Cache and read-ahead', names: ['cacheSize', 'partSize', 'maxPrefetch', 'maxInflight', 'crossFilePrefetch', 'crossFileMaxSize', 'orderFile', 'randomFillMaxSize', 'readAheadKb', 'fuseMaxRead', 'directIo'] },
  { title: 'Mount (FUSE)', names: ['allowOther', 'allowRoot', 'uid', 'gid', 'fileMode', 'dirMode', 'attrTimeout', 'readyFile', 'daemon'] },
  { title: 'Channels and hosts (sluice run)', names: ['inputDataConfig', 'channel', 'root', 'inputMode', 'hostConfig', 'currentHost', 'hosts', 'hostCount', 'epochs', 'progress'] },
  { title: 'Datasets: snapshots, filters, archived objects', names: ['snapshot', 'snapshotOut', 'filter', 'skipArchived'] },
  { title: 'Metrics and logs', names: ['metricsPort', 'metricsHost', 'logLevel', 'logFormat', 'logFile'] },
];

const KIB_UNITS: Array<[number, string]> = [[GiB, 'GiB'], [MiB, 'MiB'], [KiB, 'KiB']];

/** The default as --help shows it, or undefined when the option has none (its doc says what happens). */
export function defaultText(s: OptionSpec): string | undefined {
  const v = typeof s.default === 'function' ? (s.default as () => unknown)() : s.default;
  if (v === undefined) return undefined;
  switch (s.type) {
    case 'boolean': return v ? 'on' : 'off';
    case 'size': {
      const n = v as number;
      const exact = KIB_UNITS.find(([u]) => n >= u && n % u === 0);
      if (exact) return `${n / exact[0]}${exact[1]}`;
      const near = KIB_UNITS.find(([u]) => n >= u); // a computed default: about this much
      return near ? `${(n / near[0]).toFixed(1)}${near[1]}` : String(n);
    }
    case 'duration-ms': return `${v as number} ms`;
    case 'octal': return `0${(v as number).toString(8)}`;
    default: return String(v);
  }
}

function helpLine(s: OptionSpec): string {
  const arg = s.type === 'boolean' ? '' : s.type === 'size' ? ' BYTES' : s.type === 'int' ? ' N' : s.type === 'duration-ms' ? ' MS' : s.type === 'octal' ? ' MODE' : ' VALUE';
  const env = s.env ? ` [env ${s.env}]` : '';
  const def = defaultText(s);
  return `  --${s.flag}${arg}${env}${def === undefined ? '' : ` (default: ${def})`}\n      ${s.doc}`;
}

/** --help for the chosen options, from the same table, grouped by topic (OPTION_GROUPS) with each default. */
export function helpFor(names: readonly OptionName[]): string {
  const chosen = new Set(names);
  const sections: string[] = [];
  const shown = new Set<OptionName>();
  for (const g of OPTION_GROUPS) {
    const inGroup = g.names.filter((n) => chosen.has(n));
    if (inGroup.length === 0) continue;
    for (const n of inGroup) shown.add(n);
    sections.push(`${g.title}:\n${inGroup.map((n) => helpLine(OPTIONS[n] as OptionSpec)).join('\n')}`);
  }
  const rest = names.filter((n) => !shown.has(n));
  if (rest.length > 0) sections.push(`Other options:\n${rest.map((n) => helpLine(OPTIONS[n] as OptionSpec)).join('\n')}`);
  return sections.join('\n\n');
}
