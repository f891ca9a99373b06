/**
 * mountFastFile(): one S3 prefix, mounted read-only at a folder (SageMaker FastFile mode).
 *
 * The steps run cheapest-first, so a user error is reported before any slow work:
 *   1. parse the URI (BadUriError);
 *   2. check the host can mount FUSE (FuseUnavailableError);
 *   3. check the mount point, cleaning up a stale mount left by a killed run (MountpointError);
 *   4. create the S3 client, start listing the prefix into a SluiceFs, and wait for the
 *      listing's first page (one round trip; the FUSE binding loads meanwhile):
 *      NoSuchBucketError, MissingCredentialsError, ... come from here, before anything
 *      is mounted;
 *   5. mount through the kernel and stat the root through it (kernel-mount.ts). The
 *      mount answers lookups while the rest of the listing runs (src/fs/core.ts asks S3
 *      for each path until then), so a known file can be read before a large prefix is
 *      listed.
 * With --snapshot (src/snapshot/dataset.ts) step 4 sends no request: the view is built from
 * the snapshot before the mount, so the mount is complete when it first answers.
 * It resolves once the mount answers; whatever was set up is torn down again when a
 * later step fails. `listed` reports the rest of the
 * listing: its owner stops the mount and reports the error if it fails. `unmount()`
 * undoes all of it, in reverse order.
 */
import path from 'node:path';
import type { Options } from '../config/options.js';
import { SluiceFs } from '../fs/core.js';
import { InvalidArgumentError } from '../errors.js';
import { log } from '../log.js';
import type { TieredClient } from '../cache/tiered-client.js';
import { clientOptionsFrom, createObjectClient } from '../s3/s3-client.js';
import type { ObjectInfo } from '../s3/object-client.js';
import { archivedAs, needsProbe } from '../s3/archive.js';
import { restoreHint } from '../errors.js';
import { listOptionsFor, openDataset, settle, settleStreamed, snapshotObjectsFor, type DatasetOptions } from '../snapshot/dataset.js';
import { CatalogBuilder } from '../fs/catalog.js';
import { fuseTimeoutMs } from './deadline.js';
import { mountCore } from './kernel-mount.js';
import { checkFuseAvailable, checkFuseFdMount, fuseFdOf, prepareMountpoint } from './mountpoint.js';
import { loadFuse } from './native.js';

/** The shared options (src/config/options.ts) a FastFile mount takes. */
export const FASTFILE_OPTION_NAMES = [
  'endpoint', 'region', 'pathStyle', 'maxConnections', 'maxAttempts', 'requestTimeout', 'caBundle',
  'virtualHosted', 'profile', 'requesterPays', 'expectedBucketOwner',
  'cacheSize', 'partSize', 'maxPrefetch', 'maxInflight', 'crossFilePrefetch', 'crossFileMaxSize', 'orderFile', 'randomFillMaxSize',
  'allowOther', 'readAheadKb', 'attrTimeout',
  'noSignRequest', 'allowRoot', 'uid', 'gid', 'fileMode', 'dirMode',
  'cacheDir', 'cacheDirSize', 'cacheDirWriteRate', 'cacheDirDirectWrite', 'cacheDirGroup', 'cacheDirMode', 'cacheBucket',
  'fuseMaxRead', 'directIo',
] as const;

/** Issue 15: what to read (snapshot, filters, archived objects); `sluice run` sets them per channel. */
export const DATASET_OPTION_NAMES = ['snapshot', 'snapshotOut', 'filter', 'skipArchived'] as const;

export type FastFileOptions = Options<(typeof FASTFILE_OPTION_NAMES)[number]>;

export interface FastFileMount {
  /** The absolute mount point. */
  readonly mountpoint: string;
  readonly core: SluiceFs;
  /** Resolves when the whole prefix is listed (the view is then complete); rejects with the listing's error. */
  readonly listed: Promise<void>;
  /** Settles true once lookups of listed paths are answered in libfuse's thread (kernel-mount.ts), false when they never will be. */
  readonly attrTable: Promise<boolean>;
  /** The mount negotiated FUSE passthrough (KernelMount.passthrough). */
  readonly passthrough: boolean;
  /** Takes now what libfuse's thread answered without JavaScript into the core and the metrics (else once a second; KernelMount.takeCounts). */
  takeCounts(): void;
  /** Resolves when the mount was removed from outside (fusermount -u, umount); see kernel-mount.ts. */
  readonly gone: Promise<void>;
  /** Unmounts, stops prefetch and closes the S3 client. Idempotent. */
  unmount(): Promise<void>;
}

export interface MountFastFileOptions {
  /** The prefix to mount; may be left out with a snapshot (the snapshot's is used). */
  uri: string | undefined;
  mountpoint: string;
  /** Channel name for metric labels (sluice run passes the channel's name). */
  channel?: string;
  options: FastFileOptions;
  /** Issue 15: --snapshot, --snapshot-out, --filter, --skip-archived (src/snapshot/dataset.ts). */
  dataset?: DatasetOptions;
}

/** Checks between options (each alone was validated by parseOptions): call it before starting anything. */
export function checkFastFileOptions(o: Pick<FastFileOptions, 'allowOther' | 'allowRoot'>): void {
  if (o.allowOther && o.allowRoot) {
    throw new InvalidArgumentError('--allow-other and --allow-root cannot be combined', { hint: 'Use --allow-other (it includes root) or --allow-root alone' });
  }
}

export async function mountFastFile(opts: MountFastFileOptions): Promise<FastFileMount> {
  const o = opts.options;
  // A snapshot goes straight into the catalog as it is read (issue 46): no object of it is kept on the way.
  let builder: CatalogBuilder | undefined;
  const ds = await openDataset(opts.uri, opts.dataset ?? { skipArchived: false }, opts.channel ?? 'fastfile', (prefix, expected) => (builder = new CatalogBuilder(prefix, expected)));
  const catalog = ds.streamed && builder ? builder.finish() : undefined;
  builder = undefined;
  const { bucket, prefix } = ds;
  checkFastFileOptions(o);
  const mountpoint = path.resolve(opts.mountpoint);
  // "/dev/fd/N": a mount made by someone else, served from its descriptor (mountpoint.ts).
  const fromFd = fuseFdOf(mountpoint) !== undefined;
  if (fromFd) {
    checkFuseFdMount(fuseFdOf(mountpoint)!);
  } else {
    checkFuseAvailable();
    await prepareMountpoint(mountpoint);
  }

  // With --cache-dir, reads go through the disk tier, under the memory block cache; with
  // --cache-bucket, through the cache bucket under the disk tier (src/cache/cache-bucket.ts).
  // Their modules (~90 KB of the bundle, compiled at every start on Node 20) are loaded
  // only when asked for: a plain mount's first byte waits for neither (decision 0046).
  const s3 = createObjectClient(clientOptionsFrom(bucket, o));
  let tiered: TieredClient | undefined;
  const client = await (async () => {
    const below = o.cacheBucket ? (await import('../cache/cache-bucket.js')).withCacheBucket(s3, o, prefix) : s3;
    if (!o.cacheDir) return below;
    const { TieredClient: Tiered, withDiskTier } = await import('../cache/tiered-client.js');
    const c = await withDiskTier(below, o);
    if (c instanceof Tiered) tiered = c;
    return c;
  })().catch(async (err: unknown) => {
    await s3.close().catch(() => undefined);
    throw err;
  });
  const mlog = log.child({ component: 'fastfile', mountpoint, ...(opts.channel ? { channel: opts.channel } : {}) });
  let core: SluiceFs | undefined;
  try {
    const t0 = Date.now();
    // Archived objects stay visible (an open fails with ENODATA), counted once here.
    const warnArchived = (settled: { archived: ObjectInfo[]; classes: string[] }) => {
      if (settled.archived.length > 0) {
        mlog.warn({ archived: settled.archived.length, first: settled.archived.slice(0, 3).map((a) => a.key), classes: [...new Set(settled.classes)] },
          `${settled.archived.length} archived object${settled.archived.length === 1 ? ' is' : 's are'} shown but cannot be read until restored (open fails with ENODATA). ${restoreHint(bucket, settled.archived[0]!.key)}`);
      }
    };
    const onListing = async (objects: ObjectInfo[]) => {
      const settled = await settle(ds, objects, client);
      warnArchived(settled);
      return settled.objects;
    };
    if (catalog) warnArchived(settleStreamed(ds, client));
    // A live listing not saved as a snapshot: settle() needs to see only the objects of archive
    // classes (probe, --skip-archived); the rest go straight into the catalog.
    const holdBack = !ds.snapshot && ds.opts.snapshotOut === undefined ? (o: ObjectInfo) => needsProbe(o) || archivedAs(o) !== undefined : undefined;
    const fs = SluiceFs.start({
      client, prefix, onListing, ...(holdBack ? { holdBack } : {}),
      ...(catalog ? { catalog } : ds.snapshot ? { listing: snapshotObjectsFor(ds, client) } : {}),
      ...listOptionsFor(ds),
      ...(opts.channel !== undefined ? { channel: opts.channel } : {}),
      cacheSize: o.cacheSize, partSize: o.partSize, maxPrefetch: o.maxPrefetch, maxInflight: o.maxInflight,
      crossFilePrefetch: o.crossFilePrefetch, crossFileMaxSize: o.crossFileMaxSize,
      ...(o.orderFile !== undefined ? { orderFile: o.orderFile, mountpoint } : {}),
      ...(o.randomFillMaxSize !== undefined ? { randomFillMaxSize: o.randomFillMaxSize } : {}), maxConnections: o.maxConnections,
      owner: { uid: o.uid, gid: o.gid, fileMode: o.fileMode, dirMode: o.dirMode },
      ...(tiered ? { pinObject: (key: string, etag: string, size: number) => tiered!.pin(key, etag, size), openDirect: (key: string, etag: string, size: number) => tiered!.openWhole(key, etag, size), tierFiles: tiered.tierFiles() } : {}),
      // 0 leaves the kernel's value, 128 KiB: within the cursor's own tolerances.
      kernelReadahead: o.readAheadKb * 1024,
      // SLUICE_NO_SHARE=1: every sequential reader's window grows to --max-prefetch on its own (comparisons).
      shareReadAhead: process.env.SLUICE_NO_SHARE !== '1',
    });
    core = fs;
    const listed = fs.listed.then(() => {
      mlog.info({ uri: ds.uri, ...(ds.snapshot ? { snapshot: ds.snapshot.file } : {}), files: fs.fileCount, entries: fs.entryCount, bytes: fs.totalBytes, ms: Date.now() - t0 }, 'listed the prefix');
      for (const s of fs.skippedKeys.slice(0, 20)) mlog.warn({ skipped: s }, 'object not shown in the mount');
      if (fs.skippedKeys.length > 20) mlog.warn({ more: fs.skippedKeys.length - 20 }, 'more objects not shown in the mount');
    });
    listed.catch(() => undefined); // the owner observes it through FastFileMount.listed

    // A bad bucket or bad credentials fail the first listing request: report that before
    // mounting anything. The FUSE binding loads while that request is in flight.
    loadFuse({ fromFd });
    await fs.firstAnswer;
    const mounting = mountCore(fs, mountpoint, {
      allowOther: o.allowOther,
      allowRoot: o.allowRoot,
      attrTimeoutSec: o.attrTimeout,
      readaheadKb: o.readAheadKb,
      fuseMaxRead: o.fuseMaxRead,
      directIo: o.directIo,
      fuseTimeoutMs: fuseTimeoutMs({ requestTimeoutMs: o.requestTimeout, maxAttempts: o.maxAttempts }),
    });
    // The rest of the listing waits for the mount (bounded), so the first lookups go first.
    fs.holdListingUntil(mounting);
    const kmount = await mounting; // on failure, mountCore has taken down what it mounted
    mlog.info({ readaheadKb: kmount.readaheadKb, maxReadKb: kmount.maxRead / 1024, passthrough: kmount.passthrough, directIo: kmount.directIo, listed: fs.isListed }, 'mounted');
    if (kmount.directIo && !kmount.directIoMmap) mlog.warn({ mountpoint }, 'with --direct-io, a shared mmap of a file in this mount fails (ENODEV): the kernel predates FUSE_DIRECT_IO_ALLOW_MMAP (Linux 6.6); read such files with read(2), or mount without --direct-io');
    const mounted = core;
    let done: Promise<void> | undefined;
    return {
      mountpoint,
      core: mounted,
      listed,
      gone: kmount.gone,
      attrTable: kmount.attrTable,
      takeCounts: () => kmount.takeCounts(),
      passthrough: kmount.passthrough,
      unmount() {
        done ??= (async () => {
          await kmount.unmount();
          await mounted.close();
          await client.close();
          mlog.info('unmounted');
        })();
        return done;
      },
    };
  } catch (err) {
    await core?.close().catch(() => undefined);
    await client.close().catch(() => undefined);
    throw err;
  }
}
