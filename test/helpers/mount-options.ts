/**
 * FastFile options for tests: small parts, windows and cache, so a few MiB of data
 * exercises read-ahead, eviction and cross-file prefetch. Every other option has the value
 * `sluice mount` gives it with no flag and no SLUICE_* variable set.
 */
import { parseOptions } from '../../src/config/options.js';
import { FASTFILE_OPTION_NAMES, type FastFileOptions } from '../../src/fuse/fastfile.js';
import { startLocalS3, type LocalS3 } from '../../src/local/s3-server.js';
import { startFaultProxy, type FaultProxy } from './fault-proxy.js';

const MiB = 1024 * 1024;

export function testMountOptions(endpoint: string, over: Partial<FastFileOptions> = {}): FastFileOptions {
  return {
    ...parseOptions('mount', [], FASTFILE_OPTION_NAMES, {}, {}).options,
    endpoint, region: 'us-east-1', pathStyle: true,
    maxConnections: 16, maxAttempts: 3, requestTimeout: 10_000,
    cacheSize: 8 * MiB, partSize: 1 * MiB, maxPrefetch: 4 * MiB, maxInflight: 16 * MiB,
    crossFilePrefetch: 8, crossFileMaxSize: 1 * MiB,
    allowOther: false, readAheadKb: 1024, attrTimeout: 60, cacheDirWriteRate: 1024 * MiB, cacheDirDirectWrite: false,
    ...over,
  };
}

/** Credentials of the local S3 server, for the client's standard chain (environment). */
export function useLocalCredentials(creds: { accessKeyId: string; secretAccessKey: string }): void {
  process.env.AWS_ACCESS_KEY_ID = creds.accessKeyId;
  process.env.AWS_SECRET_ACCESS_KEY = creds.secretAccessKey;
  delete process.env.AWS_SESSION_TOKEN;
  delete process.env.AWS_PROFILE;
}

/**
 * A local S3 server with `bucket` made, its credentials in the environment, and a
 * request-counting fault proxy in front of it (mount through `proxy.endpoint`; seed through
 * `s3`, which the proxy never sees); both stopped in `t`'s teardown.
 */
export async function localS3BehindProxy(t: { teardown(fn: () => unknown): void }, bucket: string): Promise<{ s3: LocalS3; proxy: FaultProxy }> {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  useLocalCredentials(s3.credentials);
  await s3.createBucket(bucket);
  const proxy = await startFaultProxy(s3.port);
  t.teardown(() => proxy.close());
  return { s3, proxy };
}
