/**
 * Issue 7: "/readyz turns ready only after the mount answers". `sluice mount` runs as a
 * user runs it (the built CLI, a child process) behind the fault proxy, whose latency
 * makes the listing take seconds. /readyz is polled from the moment the endpoint is up:
 * it must say 503 while the prefix is listed, and at the first 200 the mount must
 * already be in /proc/mounts and answer a readdir with the objects.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { mountAt } from '../../src/fuse/mountpoint.js';
import { seedDataset } from '../../src/local/dataset.js';
import { startLocalS3 } from '../../src/local/s3-server.js';
import { CLI } from '../helpers/cli.js';
import { startFaultProxy } from '../helpers/fault-proxy.js';
import { tempMountpoint } from '../helpers/fuse.js';

/** Added to every S3 request: listing takes at least this long, a window /readyz must cover. */
const LATENCY_MS = 1500;
const POLL_MS = 50;
/** Bounds on every wait: the machine is shared and slow at times. */
const MAX_POLLS = 2400;
const URL_WAIT_MS = 60_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('/readyz is 503 while mounting and 200 only once the mount answers', async (t) => {
  const s3 = await startLocalS3();
  t.teardown(() => s3.stop());
  await s3.createBucket('ready');
  const objects = await seedDataset(s3, 'ready', 'p/', { smallFiles: { count: 5, size: 1000, folders: 1 } });
  const proxy = await startFaultProxy(s3.port);
  t.teardown(() => proxy.close());
  const dir = await tempMountpoint(t, 'readyz');

  const env: NodeJS.ProcessEnv = {
    ...process.env, AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey,
    AWS_REGION: 'us-east-1', SLUICE_LOG_LEVEL: 'info',
  };
  delete env.AWS_PROFILE;
  delete env.AWS_SESSION_TOKEN;
  proxy.set({ latencyMs: LATENCY_MS });
  const child = spawn(process.execPath, [CLI, 'mount', 's3://ready/p/', dir, '--endpoint', proxy.endpoint, '--path-style', '--metrics-port', '0', '--cache-size', '8MiB'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b: Buffer) => { stdout += b.toString(); });
  child.stderr.on('data', (b: Buffer) => { if (stderr.length < 100_000) stderr += b.toString(); });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  t.teardown(() => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL'); });

  let url: string | undefined;
  for (const t0 = Date.now(); !url && Date.now() - t0 < URL_WAIT_MS && child.exitCode === null; await sleep(POLL_MS)) {
    url = /"url":"(http:\/\/127\.0\.0\.1:\d+)\/metrics"/.exec(stderr)?.[1];
  }
  if (!url) { t.fail(`no metrics URL logged: ${stderr}`); return; }

  t.equal((await fetch(`${url}/healthz`)).status, 200, '/healthz answers while mounting');
  let notReady = 0;
  let ready = false;
  const otherStatuses: number[] = [];
  for (let i = 0; i < MAX_POLLS && child.exitCode === null; i++) {
    const res = await fetch(`${url}/readyz`);
    const body = await res.text();
    if (res.status === 200) {
      ready = true;
      t.ok(await mountAt(dir), 'mounted when /readyz says ready');
      const names = await readdir(dir, { recursive: true });
      t.ok(objects.every((o) => names.some((n) => o.key.endsWith(n))), 'the mount answers with the objects');
      break;
    }
    if (res.status !== 503) otherStatuses.push(res.status);
    else if (notReady++ === 0) t.match(body, /^not ready:\nmount /, '503 names what it waits for');
    await sleep(POLL_MS);
  }
  t.ok(ready, ready ? '/readyz turned ready' : `/readyz never turned ready; stderr: ${stderr.slice(-2000)}`);
  t.same(otherStatuses, [], 'only 503 before ready');
  t.ok(notReady > 0, `/readyz said 503 ${notReady} times before the mount answered`);
  t.match(stdout, /^ready /m);

  child.kill('SIGTERM');
  t.equal(await Promise.race([exited, sleep(30_000).then(() => 'timeout')]), 0, 'exits 0 on SIGTERM');
  t.notOk(await mountAt(dir), 'unmounted');
});
