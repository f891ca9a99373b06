/**
 * mountFastFile(): one S3 prefix, mounted read-only at a folder (SageMaker FastFile mode).
 *
 * The steps run cheapest-first, so a user error is reported before any slow work:
 *   1. parse the URI (BadUriError);
 *   2. check the host can mount FUSE (FuseUnavailableError);
 *   3. check the mount point, cleaning up a stale mount left by a killed run (MountpointError);
 *   4. create the S3 client and list the prefix into a SluiceFs (NoSuchBucketError,
 *      MissingCredentialsError, ... come from here);
 *   5. mount through the kernel and stat the root through it (kernel-mount.ts).
 * It resolves only once the mount answers; whatever was set up is torn down again
 * when a later step fails. `unmount()` undoes all of it, in reverse order.
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
  'cacheSize', 'partSize', 'maxPrefetch', 'maxInflight', 'crossFilePrefetch', 'crossFileMaxSize',
  'allowOther', 'readAheadKb', 'attrTimeout',
] as const;

export type FastFileOptions = Options<(typeof FASTFILE_OPTION_NAMES)[number]>;

export interface FastFileMount {
  /** The absolute mount point. */
  readonly mountpoint: string;
  readonly core: SluiceFs;
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
  try {
    const t0 = Date.now();
    core = await SluiceFs.create({
      client, prefix,
      ...(opts.channel !== undefined ? { channel: opts.channel } : {}),
      cacheSize: o.cacheSize, partSize: o.partSize, maxPrefetch: o.maxPrefetch, maxInflight: o.maxInflight,
      crossFilePrefetch: o.crossFilePrefetch, crossFileMaxSize: o.crossFileMaxSize,
    });
    mlog.info({ uri: opts.uri, files: core.fileCount, entries: core.entryCount, bytes: core.totalBytes, ms: Date.now() - t0 }, 'listed the prefix');
    for (const s of core.skippedKeys.slice(0, 20)) mlog.warn({ skipped: s }, 'object not shown in the mount');
    if (core.skippedKeys.length > 20) mlog.warn({ more: core.skippedKeys.length - 20 }, 'more objects not shown in the mount');

    const km = await mountCore(core, mountpoint, {
      allowOther: o.allowOther,
      attrTimeoutSec: o.attrTimeout,
      readaheadKb: o.readAheadKb,
      fuseTimeoutMs: fuseTimeoutMs({ requestTimeoutMs: o.requestTimeout, maxAttempts: o.maxAttempts }),
    });
    mlog.info({ readaheadKb: km.readaheadKb }, 'mounted');
    const mounted = core;
    let done: Promise<void> | undefined;
    return {
      mountpoint,
      core: mounted,
      unmount() {
        done ??= (async () => {
          await km.unmount();
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
