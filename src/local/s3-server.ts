/**
 * A real S3-compatible server on loopback, for tests, `sluice demo` and `sluice bench`.
 *
 * How it works:
 *  - s3rver runs in a CHILD process started as `node --openssl-legacy-provider -e <script>`.
 *    The flag is required on Node >= 17: s3rver's ListObjectsV2 continuation tokens use DES,
 *    so without it every page after the first 1,000 keys fails with InternalError. A child
 *    also keeps s3rver's CPU work and its old dependencies out of our process.
 *  - The child script is embedded below as a string and s3rver's path is resolved here and
 *    passed in the environment, so this works the same from src/ (tests) and dist/ (CLI)
 *    and from any working directory, with no extra file to ship.
 *  - The child listens on 127.0.0.1 port 0 and reports its port as one JSON line on stdout.
 *    It exits when told (SIGTERM) or when its stdin closes (our process died).
 *  - The data directory is a fresh temp dir unless `dir` is given; a temp dir is removed on stop().
 *  - Buckets and objects are managed with @aws-sdk/client-s3 (path-style, static credentials).
 *  - s3rver is a devDependency: a production install (`npm ci --omit=dev`, the Docker image)
 *    does not carry it. Only the demo, the bench and the tests start it, and without it they
 *    stop with one line naming the fix (s3rverPath()).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { ConfigError } from '../errors.js';
import {
  CreateBucketCommand, DeleteObjectCommand, PutObjectCommand, S3Client,
} from '@aws-sdk/client-s3';

/**
 * The SDK warns at every start on Node < 22 that its releases after January 2027 will need
 * Node 22. sluice pins its SDK and supports Node >= 20, so on stderr (our JSON log lines)
 * that is noise; an explicit setting by the user still wins.
 */
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

export interface LocalS3 {
  endpoint: string;
  port: number;
  dir: string;
  credentials: { accessKeyId: string; secretAccessKey: string };
  createBucket(name: string): Promise<void>;
  /** Uploads `body` and resolves with the ETag exactly as S3 returns it (quotes included). */
  putObject(bucket: string, key: string, body: Buffer): Promise<string>;
  deleteObject(bucket: string, key: string): Promise<void>;
  stop(): Promise<void>;
}

/** s3rver's built-in account: it accepts only these credentials and checks signatures with them. */
const S3RVER_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } as const;
/** s3rver ignores regions, but SigV4 needs one; us-east-1 is every SDK's default. */
const REGION = 'us-east-1';
/** Generous: on a loaded 2-core machine a cold `node` + koa start can take several seconds. */
const START_TIMEOUT_MS = 30_000;
/** After SIGTERM, how long to wait before SIGKILL. */
const STOP_GRACE_MS = 5_000;

/** Runs in the child (CommonJS, via `node -e`). Keep it dependency-free apart from s3rver. */
const CHILD_SCRIPT = `
const S3rver = require(process.env.SLUICE_S3RVER_PATH);
const server = new S3rver({
  address: '127.0.0.1', port: 0, silent: true,
  directory: process.env.SLUICE_S3RVER_DIR,
});
let closing = false;
function shutdown() {
  if (closing) return; closing = true;
  server.close().catch(() => {}).finally(() => process.exit(0));
  setTimeout(() => process.exit(0), 2000).unref();
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
process.stdin.on('end', shutdown);
process.stdin.on('error', shutdown);
process.stdin.resume();
server.run().then((addr) => {
  process.stdout.write(JSON.stringify({ port: addr.port }) + '\\n');
}, (err) => {
  process.stderr.write('s3rver failed to start: ' + (err && err.stack || err) + '\\n');
  process.exit(1);
});
`;

/**
 * Where s3rver is installed. It is a development dependency, absent from a production
 * install: then a ConfigError (one line with the fix), not a MODULE_NOT_FOUND stack.
 */
export function s3rverPath(resolve: (id: string) => string = createRequire(import.meta.url).resolve): string {
  try {
    return resolve('s3rver');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'MODULE_NOT_FOUND') throw err;
    throw new ConfigError('the local S3 server (s3rver) used by the demo and the bench is not installed: this is a production install (npm ci --omit=dev)', {
      hint: 'Install the development packages with npm ci (or npm install --include=dev) in the sluice folder',
    });
  }
}

export async function startLocalS3(opts: { dir?: string } = {}): Promise<LocalS3> {
  const s3rver = s3rverPath();
  const ownDir = opts.dir === undefined;
  const dir = opts.dir ?? await mkdtemp(path.join(os.tmpdir(), 'sluice-s3rver-'));
  const child = spawn(process.execPath, ['--openssl-legacy-provider', '-e', CHILD_SCRIPT], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, SLUICE_S3RVER_PATH: s3rver, SLUICE_S3RVER_DIR: dir, NODE_OPTIONS: '' },
  });
  let port: number;
  try {
    port = await waitForPort(child);
  } catch (err) {
    await killChild(child);
    if (ownDir) await rm(dir, { recursive: true, force: true });
    throw err;
  }
  const endpoint = `http://127.0.0.1:${port}`;
  const sdk = new S3Client({
    endpoint, region: REGION, forcePathStyle: true, credentials: { ...S3RVER_CREDENTIALS },
    // s3rver does not understand the flexible-checksum trailers newer SDKs add by default.
    requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED',
  });
  let stopped: Promise<void> | undefined;
  return {
    endpoint, port, dir,
    credentials: { ...S3RVER_CREDENTIALS },
    async createBucket(name) {
      await sdk.send(new CreateBucketCommand({ Bucket: name }));
    },
    async putObject(bucket, key, body) {
      const out = await sdk.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ContentLength: body.length }));
      if (!out.ETag) throw new Error(`local S3 returned no ETag for ${bucket}/${key}`);
      return out.ETag;
    },
    async deleteObject(bucket, key) {
      await sdk.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));
    },
    stop() {
      stopped ??= (async () => {
        sdk.destroy();
        await killChild(child);
        if (ownDir) await rm(dir, { recursive: true, force: true });
      })();
      return stopped;
    },
  };
}

function waitForPort(child: ChildProcess): Promise<number> {
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => done(new Error(`local S3 (s3rver) did not start within ${START_TIMEOUT_MS} ms: ${err.trim()}`)), START_TIMEOUT_MS);
    const done = (e: Error | undefined, port?: number) => {
      clearTimeout(timer);
      child.stdout!.off('data', onOut);
      child.off('exit', onExit);
      child.stdout!.resume(); // keep draining, never block the child on a full pipe
      if (e) reject(e); else resolve(port!);
    };
    const onOut = (b: Buffer) => {
      out += b.toString();
      const nl = out.indexOf('\n');
      if (nl < 0) return;
      try {
        const { port } = JSON.parse(out.slice(0, nl)) as { port: number };
        done(undefined, port);
      } catch {
        done(new Error(`local S3 (s3rver) sent an unexpected line: ${out.slice(0, nl)}`));
      }
    };
    const onExit = (code: number | null) => done(new Error(`local S3 (s3rver) exited with ${code} before starting: ${err.trim()}`));
    child.stdout!.on('data', onOut);
    child.stderr!.on('data', (b: Buffer) => { if (err.length < 10_000) err += b.toString(); });
    child.on('exit', onExit);
    child.on('error', (e) => done(e));
  });
}

function killChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const force = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
    child.once('exit', () => { clearTimeout(force); resolve(); });
    child.stdin?.end();
    child.kill('SIGTERM');
  });
}
