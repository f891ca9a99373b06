/** Shared pieces of the `sluice run` end-to-end tests: a temp root, the child's environment, the S3 flags. */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { LocalS3 } from '../../src/local/s3-server.js';

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
