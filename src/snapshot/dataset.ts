/**
 * What a mount or a channel reads (issue 15): a fresh listing, optionally filtered, or a
 * snapshot; archived objects found and handled; the result optionally saved as a snapshot.
 *
 * Steps, for the owner (src/fuse/fastfile.ts, src/commands/run.ts):
 *  1. `openDataset()`: read and verify --snapshot (before any request), check it is of the
 *     command's URI, and build the --filter (src/s3/filters.ts).
 *  2. list, or take the snapshot's objects (and pin the client to their version ids);
 *  3. `settle()`: find archived objects (HEAD where the listing cannot tell; a snapshot
 *     already says), drop them with --skip-archived (counted), write --snapshot-out, set the
 *     metrics that name the snapshot. The caller decides what archived objects mean for its
 *     mode: Pipe and File refuse to start (ArchivedObjectsError), FastFile shows them.
 */
import { open } from 'node:fs/promises';
import { ArchivedObjectsError } from '../errors.js';
import { log } from '../log.js';
import { archivedObjects, archivedSkipped, snapshotInfo, snapshotObjects } from '../metrics/metrics.js';
import { ARCHIVED_CLASSES, archivedAs, needsProbe, partitionArchived, PROBE_MAX, probeArchived } from '../s3/archive.js';
import { KeyFilter } from '../s3/filters.js';
import type { ListOptions, ObjectBytes, ObjectClient, ObjectInfo } from '../s3/object-client.js';
import { parseS3Uri } from '../s3/uri.js';
import { SnapshotSpill } from './spill.js';
import { checkSnapshotUri, readSnapshot, scanSnapshot, snapshotId, writeSnapshot, writeSnapshotStream, type Snapshot, type SnapshotHeader, type SnapshotTrailer } from './snapshot.js';

export interface DatasetOptions {
  snapshot?: string | undefined;
  snapshotOut?: string | undefined;
  filter?: string[] | undefined;
  skipArchived: boolean;
}

export interface Dataset {
  uri: string;
  bucket: string;
  prefix: string;
  /** Set when reading from a snapshot: its objects (filtered when --filter is given too). */
  snapshot: Snapshot | undefined;
  filter: KeyFilter | undefined;
  opts: DatasetOptions;
  channel: string;
  /** Set when the snapshot's objects went to a sink as it was read (openDataset's `stream`): `snapshot.objects` is then empty. */
  streamed?: Streamed;
}

/**
 * Where openDataset() puts a snapshot's objects as it reads them (issue 46: a FastFile mount of
 * ten million objects keeps them only in its catalog, src/fs/catalog.ts): made once the
 * snapshot's prefix is known, then given each object the filter keeps, archived ones left out
 * with --skip-archived. The caller drops what it built when openDataset() throws.
 */
export type StreamTo = (prefix: string, expected: number) => StreamSink;

/** A sink for a streamed snapshot; `addBytes`, when given, takes the objects read as bytes (decision 0044) that need no check here. */
export interface StreamSink {
  add(o: ObjectInfo): void;
  addBytes?(o: ObjectBytes): void;
}

/** What settle() would have found in a streamed snapshot. */
export interface Streamed {
  /** Objects handed to the sink. */
  kept: number;
  /** Archived objects handed to the sink (all of them are in the listing: FastFile shows them). */
  archived: ObjectInfo[];
  classes: string[];
  /** Archived objects left out (--skip-archived). */
  skippedArchived: number;
  /** Version ids of the objects kept that have one, by key (the client is pinned to them). */
  versions: Map<string, string>;
}

/**
 * Bytes of a snapshot line, for a guess of the object count from the file's size: an object
 * line is at least ~95 bytes, a synthetic one ~147, real ones with longer keys more; 128
 * guesses at most ~1.5 times too many (address space, not memory: StreamTo's `expected`).
 */
const LINE_BYTES_GUESS = 128;

/** About how many objects a plain snapshot holds (its size / LINE_BYTES_GUESS); 0 for gzip (unknown) or when the file cannot be read (the scan reports that). */
async function expectedObjects(file: string): Promise<number> {
  try {
    const fh = await open(file, 'r');
    try {
      const magic = Buffer.alloc(2);
      const { bytesRead } = await fh.read(magic, 0, 2, 0);
      if (bytesRead === 2 && magic[0] === 0x1f && magic[1] === 0x8b) return 0;
      return Math.floor((await fh.stat()).size / LINE_BYTES_GUESS);
    } finally {
      await fh.close();
    }
  } catch {
    return 0;
  }
}

/** Step 1. `uri` may be undefined when a snapshot is given (its URI is used). */
export async function openDataset(uri: string | undefined, opts: DatasetOptions, channel: string, stream?: StreamTo): Promise<Dataset> {
  let snapshot: Snapshot | undefined;
  let streamed: Streamed | undefined;
  if (opts.snapshot !== undefined && stream !== undefined && opts.snapshotOut === undefined) {
    // Steps 1 to 3 as the file is read: no object is kept here.
    const file = opts.snapshot;
    const s: Streamed = { kept: 0, archived: [], classes: [], skippedArchived: 0, versions: new Map() };
    let sink: StreamSink | undefined;
    let keep: ((key: string) => boolean) | undefined;
    /** Whether objects read as bytes go straight to the sink: without a filter (it matches key strings). */
    let asBytes = false;
    const open = (header: SnapshotHeader) => {
      const u = checkSnapshotUri({ file, header }, uri);
      const { prefix } = parseS3Uri(u);
      const f = opts.filter && opts.filter.length > 0 ? new KeyFilter(opts.filter, prefix) : undefined;
      keep = f ? (k) => f.matches(k) : () => true;
      const out = stream(prefix, expected);
      asBytes = f === undefined && out.addBytes !== undefined;
      return out;
    };
    const expected = await expectedObjects(file);
    const scan = await scanSnapshot(file, (o, header) => {
      sink ??= open(header);
      if (!keep!(o.key)) return;
      const why = archivedAs(o);
      if (why !== undefined) {
        if (opts.skipArchived) {
          s.skippedArchived++;
          return;
        }
        s.archived.push(o);
        s.classes.push(why);
      }
      if (o.versionId !== undefined) s.versions.set(o.key, o.versionId);
      s.kept++;
      sink.add(o);
    }, {
      // A line read as bytes has no version id, archive tier or restore (parseObjectBytes), so
      // its archive state is its class's: an archived class goes the object way above.
      onBytes: (o, header) => {
        sink ??= open(header);
        if (!asBytes || ARCHIVED_CLASSES.has(o.storageClass)) return false;
        s.kept++;
        sink.addBytes!(o);
        return true;
      },
    });
    sink ??= open(scan.header);
    snapshot = { file, header: scan.header, objects: [], trailer: scan.trailer };
    uri = checkSnapshotUri(snapshot, uri);
    streamed = s;
  } else if (opts.snapshot !== undefined) {
    snapshot = await readSnapshot(opts.snapshot);
    uri = checkSnapshotUri(snapshot, uri);
  }
  const { bucket, prefix } = parseS3Uri(uri!);
  const filter = opts.filter && opts.filter.length > 0 ? new KeyFilter(opts.filter, prefix) : undefined;
  if (snapshot) {
    const id = snapshotId(snapshot);
    snapshotInfo.set({ channel, ...id }, 1);
    log.info({ channel, snapshot: snapshot.file, checksum: id.checksum, objects: snapshot.trailer.objects, createdAt: snapshot.header.createdAt }, `reading from snapshot ${id.name} (${id.checksum}) of ${snapshot.header.uri}: no listing`);
  }
  return { uri: uri!, bucket, prefix, snapshot, filter, opts, channel, ...(streamed ? { streamed } : {}) };
}

/** Step 2 and 3 for a streamed snapshot (openDataset's `stream`): pins the client to the version ids, sets what settle() sets. */
export function settleStreamed(ds: Dataset, client: ObjectClient): Pick<Settled, 'archived' | 'classes'> {
  const s = ds.streamed!;
  if (s.versions.size > 0) client.pinVersions?.(s.versions);
  if (s.skippedArchived > 0) {
    archivedSkipped.inc({ channel: ds.channel }, s.skippedArchived);
    log.warn({ channel: ds.channel, archived: s.skippedArchived }, `--skip-archived: left out ${s.skippedArchived} archived object${s.skippedArchived === 1 ? '' : 's'}`);
  }
  archivedObjects.set({ channel: ds.channel }, s.archived.length);
  snapshotObjects.set({ channel: ds.channel }, s.kept);
  return { archived: s.archived, classes: s.classes };
}

/**
 * Step 2 for a listing: what to ask of the client's list(). --filter prunes folders while
 * listing; a listing saved as a snapshot (--snapshot-out, `sluice snapshot`) records version
 * ids when the bucket is versioned. The run itself stays pinned by ETag: GET ?versionId=
 * needs s3:GetObjectVersion, which a role that only lists and reads may lack.
 */
export function listOptionsFor(ds: Dataset): Pick<ListOptions, 'filter' | 'versions'> {
  return { ...(ds.filter ? { filter: ds.filter } : {}), ...(ds.opts.snapshotOut !== undefined ? { versions: true } : {}) };
}

/** Step 2 for a snapshot: its objects, with the client pinned to their version ids. */
export function snapshotObjectsFor(ds: Dataset, client: ObjectClient): ObjectInfo[] {
  const all = ds.snapshot!.objects;
  const versions = new Map<string, string>();
  for (const o of all) if (o.versionId !== undefined) versions.set(o.key, o.versionId);
  if (versions.size > 0) client.pinVersions?.(versions);
  return ds.filter ? all.filter((o) => ds.filter!.matches(o.key)) : all.slice();
}

export interface Settled {
  objects: ObjectInfo[];
  /** Archived objects still in `objects` (none with --skip-archived). */
  archived: ObjectInfo[];
  classes: string[];
}

/** Step 3. */
export async function settle(ds: Dataset, objects: ObjectInfo[], client: ObjectClient, signal?: AbortSignal): Promise<Settled> {
  if (!ds.snapshot) {
    const heads = await probeArchived(objects, client, signal);
    if (heads > 0) log.debug({ channel: ds.channel, heads }, 'asked S3 for the archive state of objects in archive classes');
  }
  const { archived, classes } = partitionArchived(objects);
  let kept = objects;
  let stillArchived = archived;
  if (archived.length > 0 && ds.opts.skipArchived) {
    const drop = new Set(archived);
    kept = objects.filter((o) => !drop.has(o));
    archivedSkipped.inc({ channel: ds.channel }, archived.length);
    log.warn({ channel: ds.channel, archived: archived.length, first: archived[0]!.key }, `--skip-archived: left out ${archived.length} archived object${archived.length === 1 ? '' : 's'}`);
    stillArchived = [];
  }
  archivedObjects.set({ channel: ds.channel }, stillArchived.length);
  if (ds.snapshot) snapshotObjects.set({ channel: ds.channel }, kept.length);
  if (ds.opts.snapshotOut !== undefined) {
    const t0 = performance.now();
    const trailer = await writeSnapshot(ds.opts.snapshotOut, headerFor(ds), kept);
    log.info({ channel: ds.channel, file: ds.opts.snapshotOut, objects: trailer.objects, checksum: trailer.sha256.slice(0, 12), ms: Math.round(performance.now() - t0) }, `wrote snapshot ${ds.opts.snapshotOut}`);
  }
  return { objects: kept, archived: stillArchived, classes: stillArchived.length > 0 ? classes : [] };
}

/** The header a listing saved as a snapshot gets (createdAt: now, unless given). */
function headerFor(ds: Dataset, createdAt?: string) {
  return {
    uri: ds.uri, bucket: ds.bucket, prefix: ds.prefix,
    listing: { filters: ds.filter ? [...ds.filter.texts] : [], skipArchived: ds.opts.skipArchived },
    generator: 'sluice',
    ...(createdAt !== undefined ? { createdAt } : {}),
  };
}

/**
 * `sluice snapshot` (issue 46): steps 2 and 3 for a listing that is only saved, in bounded
 * memory. The same file as settle() with --snapshot-out, byte for byte, without holding the
 * listing: each object goes to an external sort (src/snapshot/spill.ts) as it comes, except
 * those whose archive state only a HEAD tells (at most PROBE_MAX, as probeArchived() asks),
 * which wait for the listing's end, are probed, then go the same way. Archived objects are
 * counted, and left out with --skip-archived. `listing` yields the objects the filter keeps.
 */
export async function writeListingSnapshot(ds: Dataset, listing: AsyncIterable<ObjectInfo>, client: ObjectClient, opts: { createdAt?: string; runObjects?: number; signal?: AbortSignal } = {}): Promise<{ trailer: SnapshotTrailer; archived: number }> {
  const file = ds.opts.snapshotOut!;
  const spill = new SnapshotSpill(file, opts.runObjects);
  try {
    const probe: ObjectInfo[] = [];
    let archived = 0;
    let first: string | undefined;
    const keep = (o: ObjectInfo): void | Promise<void> => {
      if (archivedAs(o) !== undefined) {
        archived++;
        first ??= o.key;
        if (ds.opts.skipArchived) return;
      }
      return spill.add(o);
    };
    for await (const o of listing) {
      if (probe.length < PROBE_MAX && needsProbe(o)) probe.push(o);
      else await keep(o);
    }
    const heads = await probeArchived(probe, client, opts.signal);
    if (heads > 0) log.debug({ channel: ds.channel, heads }, 'asked S3 for the archive state of objects in archive classes');
    for (const o of probe) await keep(o);
    probe.length = 0;
    if (archived > 0 && ds.opts.skipArchived) {
      archivedSkipped.inc({ channel: ds.channel }, archived);
      log.warn({ channel: ds.channel, archived, first }, `--skip-archived: left out ${archived} archived object${archived === 1 ? '' : 's'}`);
    }
    archivedObjects.set({ channel: ds.channel }, ds.opts.skipArchived ? 0 : archived);
    const t0 = performance.now();
    const trailer = await writeSnapshotStream(file, headerFor(ds, opts.createdAt), spill.sorted());
    log.info({ channel: ds.channel, file, objects: trailer.objects, checksum: trailer.sha256.slice(0, 12), ms: Math.round(performance.now() - t0) }, `wrote snapshot ${file}`);
    return { trailer, archived: ds.opts.skipArchived ? 0 : archived };
  } finally {
    await spill.close();
  }
}

/** Pipe and File: archived objects stop the channel before the training command starts. */
export function refuseArchived(ds: Dataset, s: Settled): void {
  if (s.archived.length === 0) return;
  throw new ArchivedObjectsError(`channel ${JSON.stringify(ds.channel)} (${ds.uri})`, ds.bucket, s.archived.map((o) => o.key), s.classes);
}
