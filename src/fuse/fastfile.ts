/**
 * mountFastFile(): one S3 prefix, mounted read-only at a folder (SageMaker FastFile mode).
 *
 * The steps run cheapest-first, so a user error is reported before any slow work:
 *   1. parse the URI (BadUriError);
 *   2. check the host can mount FUSE (FuseUnavailableError);
 *   3. check the mount point, cleaning up a stale mount left by a killed run (MountpointError);
 *   4. create the S3 client and start listing the prefix into a SluiceFs;
 *   5. at the same time, mount through the kernel and stat the root through it
 *      (kernel-mount.ts). The mount answers lookups while the listing runs (src/fs/core.ts
 *      asks S3 for each path until then), so a known file can be read before a large
 *      prefix is listed;
 *   6. wait for the listing's first answer: NoSuchBucketError, MissingCredentialsError,
 *      ... come from here, and the mount is taken down again.
 * It resolves once the mount answers and S3 has answered the listing; whatever was set
 * up is torn down again when a later step fails. `listed` reports the rest of the
 * listing: its owner stops the mount and reports the error if it fails. `unmount()`
 * undoes all of it, in reverse order.
 */
import path from 'node:path';
import type { Options } from '../config/options.js';
import { SluiceFs } from '../fs/core.js';
import { log } from '../log.js';
import { clientOptionsFrom, createObjectClient } from '../s3/s3-client.js';
import { parseS3Uri } from '../s3/uri.js';
import { fuseTimeoutMs } from './deadline.js';
import { mountCore } from './kernel-mount.js';
import { checkFuseAvailable, prepareMountpoint } from './mountpoint.js';

/** The shared options (src/config/options.ts) a FastFile mount takes. */
export const FASTFILE_OPTION_NAMES = [
  'endpoint', 'region', 'pathStyle', 'maxConnections', 'maxAttempts', 'requestTimeout',
  'cacheSize', 'partSize', 'maxPrefetch', 'maxInflight', 'crossFilePrefetch', 'crossFileMaxSize', 'randomFillMaxSize',
  'allowOther', 'readAheadKb', 'attrTimeout',
] as const;

export type FastFileOptions = Options<(typeof FASTFILE_OPTION_NAMES)[number]>;

export interface FastFileMount {
  /** The absolute mount point. */
  readonly mountpoint: string;
  readonly core: SluiceFs;
  /** Resolves when the whole prefix is listed (the view is then complete); rejects with the listing's error. */
  readonly listed: Promise<void>;
  /** Unmounts, stops prefetch and closes the S3 client. Idempotent. */
  unmount(): Promise<void>;
}

export interface MountFastFileOptions {
  uri: string;
  mountpoint: string;
  /** Channel name for metric labels (sluice run passes the channel's name). */
  channel?: string;
  options: FastFileOptions;
}

export async function mountFastFile(opts: MountFastFileOptions): Promise<FastFileMount> {
  const o = opts.options;
  const { bucket, prefix } = parseS3Uri(opts.uri);
  const mountpoint = path.resolve(opts.mountpoint);
  checkFuseAvailable();
  await prepareMountpoint(mountpoint);

  const client = createObjectClient(clientOptionsFrom(bucket, o));
  const mlog = log.child({ component: 'fastfile', mountpoint, ...(opts.channel ? { channel: opts.channel } : {}) });
  let core: SluiceFs | undefined;
  let km: Awaited<ReturnType<typeof mountCore>> | undefined;
  try {
    const t0 = Date.now();
    const fs = SluiceFs.start({
      client, prefix,
      ...(opts.channel !== undefined ? { channel: opts.channel } : {}),
      cacheSize: o.cacheSize, partSize: o.partSize, maxPrefetch: o.maxPrefetch, maxInflight: o.maxInflight,
      crossFilePrefetch: o.crossFilePrefetch, crossFileMaxSize: o.crossFileMaxSize,
      ...(o.randomFillMaxSize !== undefined ? { randomFillMaxSize: o.randomFillMaxSize } : {}), maxConnections: o.maxConnections,
    });
    core = fs;
    const listed = fs.listed.then(() => {
      mlog.info({ uri: opts.uri, files: fs.fileCount, entries: fs.entryCount, bytes: fs.totalBytes, ms: Date.now() - t0 }, 'listed the prefix');
      for (const s of fs.skippedKeys.slice(0, 20)) mlog.warn({ skipped: s }, 'object not shown in the mount');
      if (fs.skippedKeys.length > 20) mlog.warn({ more: fs.skippedKeys.length - 20 }, 'more objects not shown in the mount');
    });
    listed.catch(() => undefined); // the owner observes it through FastFileMount.listed

    const mounting = mountCore(fs, mountpoint, {
      allowOther: o.allowOther,
      attrTimeoutSec: o.attrTimeout,
      readaheadKb: o.readAheadKb,
      fuseTimeoutMs: fuseTimeoutMs({ requestTimeoutMs: o.requestTimeout, maxAttempts: o.maxAttempts }),
    });
    // A bad bucket or bad credentials fail the first listing request: report that, not a mount.
    const [m, first] = await Promise.allSettled([mounting, fs.firstAnswer]);
    if (m.status === 'fulfilled') km = m.value;
    // The listing's error first: it names the user's mistake, and it can be why the mount's
    // own check failed (the root stat answers with the listing's error once it failed).
    if (first.status === 'rejected') throw first.reason;
    if (m.status === 'rejected') throw m.reason;
    const kmount = m.value;
    mlog.info({ readaheadKb: kmount.readaheadKb, listed: fs.isListed }, 'mounted');
    const mounted = core;
    let done: Promise<void> | undefined;
    return {
      mountpoint,
      core: mounted,
      listed,
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
    await km?.unmount().catch(() => undefined);
    await core?.close().catch(() => undefined);
    await client.close().catch(() => undefined);
    throw err;
  }
}
