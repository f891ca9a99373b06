/** Shared pieces of the `sluice run` end-to-end tests: a temp root, the child's environment, the S3 flags. */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startLocalS3, type LocalS3 } from '../../src/local/s3-server.js';

/** A fresh --root, removed at teardown. */
export async function tmpRoot(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-run-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

// NODE_NO_WARNINGS: the AWS SDK warns about Node 20 on stderr, which is not sluice's output.
export const runEnv = (): NodeJS.ProcessEnv => ({ ...process.env, NODE_NO_WARNINGS: '1', AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_REGION: 'us-east-1', SLUICE_LOG_LEVEL: 'warn' });

/** The flags that point sluice at the local server, with metrics off. */
export const s3Flags = (s3: LocalS3): string[] => ['--endpoint', s3.endpoint, '--path-style', '--metrics-port=-1', '--max-attempts', '3'];

/**
 * One local S3 server for a whole test file, with `bucket` created: started before the
 * file's first test, stopped at its end. `s3` is the server once started; `flags()` its s3Flags.
 */
export function localS3ForFile(t: { before(fn: () => Promise<void>): void; teardown(fn: () => unknown): void }, bucket: string): { readonly s3: LocalS3; flags(): string[] } {
  let server: LocalS3 | undefined;
  t.before(async () => {
    server = await startLocalS3();
    await server.createBucket(bucket);
  });
  t.teardown(() => server?.stop());
  const started = () => {
    if (!server) throw new Error('the local S3 server is not started yet (use it inside a test)');
    return server;
  };
  return { get s3() { return started(); }, flags: () => s3Flags(started()) };
}
