/**
 * The process that runs sluice's File or Pipe mode for `sluice bench`
 * (`node dist/bench/host.js ARGS.json`), so that its peak RSS and CPU time can be
 * read from /proc like those of `sluice mount` (FastFile) and of the peers.
 *
 * File: list the prefix, download it with the File-mode downloader into
 * <dataDir>/bench, print `{"done":...}`. Pipe: list the prefix, start one Pipe
 * channel per reader (reader i gets its shard of keys, in the order given),
 * print `{"fifos":[...],"epochFifos":[[...],...]}` (epoch 0's FIFOs, then every epoch's:
 * a later epoch's FIFO appears once its reader has opened the one before, as in a
 * SageMaker Pipe channel), and keep feeding until every channel is done.
 * In both cases the process then waits for stdin to close (or SIGTERM), so the
 * runner can read its figures before it exits. `--check MODE` prints whether
 * the mode's modules are present in this build.
 *
 * Modules are imported when a mode needs them, and a mode whose module is missing is
 * reported "not available" (an older build under comparison). scripts/bundle.mjs bundles
 * this file as it bundles dist/cli.js, so the host starts as `sluice run` does: File
 * mode's start-up is inside its figure. `node dist/bench/host.js --check File` (loads File
 * mode's modules, 2026-12-02, Node 20): 0.70-0.77 s and ~0.9 CPU s unbundled, loading
 * them file by file from dist/ and node_modules; 0.55-0.58 s and ~0.6 CPU s bundled (on
 * Node 24 with the compile cache, 0.33-0.43 s). The difference fell before the first GET
 * of every File run, which `sluice run` users do not pay.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { ObjectClient, ObjectInfo } from '../s3/object-client.js';
import { enableCompileCache } from '../compile-cache.js';

export interface HostArgs {
  mode: 'File' | 'Pipe';
  bucket: string;
  prefix: string;
  endpoint: string;
  credentials: { accessKeyId: string; secretAccessKey: string };
  /** For an https endpoint: the PEM file of the CA to trust (S3ClientOptions.ca). */
  caFile?: string;
  dataDir: string;
  partSize: number;
  /** File: bytes requested at once; Pipe: split evenly among the channels. */
  maxInflight: number;
  maxConnections: number;
  /** Pipe: the keys of each reader's channel, in order. */
  shards?: string[][];
  /** Pipe: epochs each channel serves, every one the same keys in the same order; default 1. */
  epochs?: number;
}

type CreateClient = (o: Record<string, unknown>) => ObjectClient;

type Module = Record<string, unknown>;

/**
 * The modules the host loads: the function it calls in each, and the import written out,
 * so that the bundler sees and bundles it.
 */
const LOADERS = {
  '../s3/s3-client.js': { needs: 'createObjectClient', load: () => import('../s3/s3-client.js') as Promise<Module> },
  '../channels/file-mode.js': { needs: 'downloadChannel', load: () => import('../channels/file-mode.js') as Promise<Module> },
  '../pipe/pipe-channel.js': { needs: 'startPipeChannel', load: () => import('../pipe/pipe-channel.js') as Promise<Module> },
} as const;
type ModulePath = keyof typeof LOADERS;

const MODULES: Record<HostArgs['mode'], ModulePath[]> = {
  File: ['../s3/s3-client.js', '../channels/file-mode.js'],
  Pipe: ['../s3/s3-client.js', '../pipe/pipe-channel.js'],
};

function load(rel: ModulePath): Promise<Module> {
  return LOADERS[rel].load();
}

/** Tries the modules of a mode; undefined when all load and export what the host calls. */
async function checkMode(mode: HostArgs['mode']): Promise<string | undefined> {
  for (const rel of MODULES[mode]) {
    const { needs } = LOADERS[rel];
    try {
      const m = await load(rel);
      if (typeof m[needs] !== 'function') return `${rel.replace('../', 'src/').replace(/\.js$/, '.ts')} does not export ${needs}`;
    } catch {
      return `${rel.replace('../', 'src/').replace(/\.js$/, '.ts')} is not in this build`;
    }
  }
  return undefined;
}

function say(obj: unknown): void {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

async function listAll(client: ObjectClient, prefix: string): Promise<ObjectInfo[]> {
  const out: ObjectInfo[] = [];
  for await (const o of client.list(prefix)) out.push(o);
  out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return out;
}

async function main(): Promise<void> {
  await enableCompileCache(); // as src/cli.ts does, before a mode's modules load
  if (process.argv[2] === '--check') {
    say({ reason: await checkMode(process.argv[3] as HostArgs['mode']) ?? null });
    return;
  }
  const a = JSON.parse(await readFile(process.argv[2]!, 'utf8')) as HostArgs;
  const { createObjectClient } = await load('../s3/s3-client.js') as { createObjectClient: CreateClient };
  const client = createObjectClient({
    bucket: a.bucket, endpoint: a.endpoint, region: 'us-east-1', pathStyle: true,
    maxConnections: a.maxConnections, credentials: a.credentials,
    ...(a.caFile ? { ca: await readFile(a.caFile, 'utf8') } : {}),
  });
  const objects = await listAll(client, a.prefix);
  if (a.mode === 'File') {
    const { downloadChannel } = await load('../channels/file-mode.js') as { downloadChannel: (o: Record<string, unknown>) => Promise<{ downloaded: number; downloadedBytes: number }> };
    const r = await downloadChannel({
      channel: 'bench', dataDir: a.dataDir, stateDir: path.join(a.dataDir, '.sluice-state'), partSize: a.partSize, maxInflight: a.maxInflight, maxConnections: a.maxConnections, progress: 'none',
      objects: objects.map((o) => ({ key: o.key, size: o.size, etag: o.etag, rel: o.key.slice(a.prefix.length), client })),
    });
    say({ done: true, files: r.downloaded, bytes: r.downloadedBytes });
  } else {
    const { startPipeChannel } = await load('../pipe/pipe-channel.js') as { startPipeChannel: (o: Record<string, unknown>) => Promise<{ fifoPath(epoch: number): string; done: Promise<void>; stop(): Promise<void> }> };
    const byKey = new Map(objects.map((o) => [o.key, o]));
    const channels = await Promise.all((a.shards ?? []).map((keys, i) => startPipeChannel({
      client, channel: `bench${i}`, dataDir: a.dataDir, epochs: a.epochs ?? 1, recordWrapper: 'None', compression: 'None', maxInflight: Math.max(2 * a.partSize, Math.floor(a.maxInflight / (a.shards ?? [[]]).length)), partSize: a.partSize,
      itemsForEpoch: () => keys.map((k) => {
        const info = byKey.get(k);
        if (!info) throw new Error(`key ${k} is not listed under ${a.prefix}`);
        return { kind: 'object', info };
      }),
    })));
    const epochs = Array.from({ length: a.epochs ?? 1 }, (_, e) => channels.map((c) => c.fifoPath(e)));
    say({ fifos: epochs[0], epochFifos: epochs });
    await Promise.all(channels.map((c) => c.done));
    say({ done: true });
  }
  // Stay alive until the runner has read our /proc figures.
  await new Promise<void>((resolve) => {
    process.stdin.on('end', resolve);
    process.stdin.on('error', resolve);
    process.on('SIGTERM', resolve);
    process.stdin.resume();
  });
  await client.close();
}

main().then(() => process.exit(0), (err: unknown) => {
  say({ error: err instanceof Error ? err.message : String(err) });
  process.exit(1);
});
