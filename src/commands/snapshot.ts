/**
 * `sluice snapshot s3://bucket/prefix/ FILE`: list a prefix once and save the listing as a
 * snapshot (src/snapshot/snapshot.ts, docs/SNAPSHOTS.md), for `--snapshot FILE` later.
 * `sluice snapshot --diff A B`: what changed between two snapshots (exit 0 when nothing
 * did, 1 when something did, as diff(1)).
 */
import { helpFor, parseOptions } from '../config/options.js';
import { InvalidArgumentError } from '../errors.js';
import { configureLogging, log } from '../log.js';
import { clientOptionsFrom, createObjectClient } from '../s3/s3-client.js';
import { listOptionsFor, openDataset, writeListingSnapshot } from '../snapshot/dataset.js';
import { diffSnapshots, readSnapshot } from '../snapshot/snapshot.js';

export const summary = 'Save the listing of an S3 prefix as a snapshot file (or --diff two snapshots).';

const NAMES = ['endpoint', 'region', 'pathStyle', 'virtualHosted', 'profile', 'noSignRequest', 'requesterPays', 'expectedBucketOwner', 'maxConnections', 'maxAttempts', 'requestTimeout', 'caBundle', 'filter', 'skipArchived', 'progress', 'logLevel', 'logFormat', 'logFile'] as const;

function help(): string {
  return [
    'Usage: sluice snapshot s3://bucket/prefix/ FILE [options]',
    '       sluice snapshot --diff A B',
    '',
    summary,
    '',
    'Lists the prefix once and writes every key with its size, ETag, storage class and',
    'last-modified time (and version id when the bucket is versioned: ListObjectVersions),',
    'the listing\'s parameters and a checksum, as JSON lines (gzip-compressed',
    'when FILE ends in .gz; format in docs/SNAPSHOTS.md). Pass it to sluice mount --snapshot FILE',
    'or a channel\'s snapshot=FILE to read exactly these objects again, with no listing. An object',
    'overwritten or deleted since is read at its recorded version when there is one (needs',
    's3:GetObjectVersion), else its reads fail (ESTALE); never with new bytes.',
    'Objects in archive classes are HEADed to find those not restored; they are counted on the',
    'summary line (and left out with --skip-archived).',
    '',
    '--diff A B prints the keys added (+), removed (-) and modified (~) from A to B and a summary;',
    'it exits 0 when the snapshots hold the same objects, 1 when they differ.',
    '',
    'Options:',
    helpFor(NAMES),
    '',
    'Example:',
    "  sluice snapshot s3://my-bucket/table/ table.snap.gz --filter 'dt>=2026-06-01'",
  ].join('\n');
}

const mb = (n: number) => `${(n / 1e6).toFixed(1)} MB`;

/** A terminal's progress line is redrawn this often: smooth to the eye, negligible work. */
const BAR_INTERVAL_MS = 250;
/** Without a terminal (a log collector), one progress line this often: a listing of millions of keys shows it is alive. */
const LOG_INTERVAL_MS = 5_000;

/**
 * Progress of a listing: on a terminal one line on stderr, redrawn; otherwise (or --progress
 * log) a log line every LOG_INTERVAL_MS; none with --progress none. stop() clears the line.
 */
function listingProgress(mode: string, uri: string): { add(o: { size: number }): void; stop(): void } {
  const tty = process.stderr.isTTY === true;
  const bar = mode === 'bar' || (mode === 'auto' && tty);
  const logs = mode === 'log' || (mode === 'auto' && !tty);
  let n = 0;
  let bytes = 0;
  const t0 = performance.now();
  const text = () => `listing ${uri}: ${n.toLocaleString('en-US')} objects, ${mb(bytes)} in ${((performance.now() - t0) / 1000).toFixed(0)} s`;
  const timer = bar || logs
    ? setInterval(() => {
      if (bar) process.stderr.write(`\r${text()}\x1b[K`);
      else log.info({ objects: n, bytes }, text());
    }, bar ? BAR_INTERVAL_MS : LOG_INTERVAL_MS)
    : undefined;
  timer?.unref();
  return {
    add(o) { n++; bytes += o.size; },
    stop() {
      if (timer) clearInterval(timer);
      if (bar) process.stderr.write('\r\x1b[K');
    },
  };
}

async function diff(a: string, b: string): Promise<number> {
  const [sa, sb] = await Promise.all([readSnapshot(a), readSnapshot(b)]);
  const d = diffSnapshots(sa.objects, sb.objects);
  const out: string[] = [];
  for (const o of d.added) out.push(`+ ${o.key} (${o.size} bytes)`);
  for (const o of d.removed) out.push(`- ${o.key} (${o.size} bytes)`);
  for (const [x, y] of d.modified) out.push(`~ ${x.key} (${x.size} -> ${y.size} bytes, ETag ${x.etag} -> ${y.etag})`);
  const bytes = (os: { size: number }[]) => os.reduce((s, o) => s + o.size, 0);
  out.push(`${d.added.length} added (${mb(bytes(d.added))}), ${d.removed.length} removed (${mb(bytes(d.removed))}), ${d.modified.length} modified (${mb(bytes(d.modified.map(([, y]) => y)))} now), ${d.unchanged} unchanged`);
  if (sa.header.uri !== sb.header.uri) out.push(`note: A is of ${sa.header.uri}, B of ${sb.header.uri}`);
  process.stdout.write(out.join('\n') + '\n');
  return d.added.length + d.removed.length + d.modified.length === 0 ? 0 : 1;
}

export async function run(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(help() + '\n');
    return 0;
  }
  const { options, positionals, extra } = parseOptions('snapshot', argv, NAMES, { diff: { type: 'boolean' } });
  configureLogging(options);
  if (positionals.length !== 2) {
    throw new InvalidArgumentError(`sluice snapshot takes ${extra.diff ? 'two snapshot files' : 'an S3 URI and a file'}, got ${positionals.length} argument${positionals.length === 1 ? '' : 's'}`, {
      hint: 'Example: sluice snapshot s3://bucket/prefix/ data.snap.gz (see sluice snapshot --help)',
    });
  }
  if (extra.diff) return diff(positionals[0]!, positionals[1]!);
  const [uri, file] = positionals as [string, string];
  const t0 = performance.now();
  const ds = await openDataset(uri, { snapshotOut: file, filter: options.filter, skipArchived: options.skipArchived }, 'snapshot');
  const client = createObjectClient({ ...clientOptionsFrom(ds.bucket, options) });
  try {
    const progress = listingProgress(options.progress, uri);
    const listing = async function* () {
      for await (const o of client.list(ds.prefix, listOptionsFor(ds))) {
        if (!ds.filter || ds.filter.matches(o.key)) { progress.add(o); yield o; }
      }
      progress.stop();
    };
    let s;
    try {
      s = await writeListingSnapshot(ds, listing(), client);
    } finally {
      progress.stop();
    }
    process.stdout.write(`wrote ${file}: ${s.trailer.objects} objects, ${mb(s.trailer.bytes)}${s.archived > 0 ? `, ${s.archived} archived (not restored)` : ''} of ${uri} in ${((performance.now() - t0) / 1000).toFixed(2)} s\n`);
    return 0;
  } finally {
    await client.close();
  }
}
