/**
 * A local S3 server seeded with large files for one test file of FastFile's large-file read
 * paths (test/fuse/lend.ts, test/fuse/views.ts): each test takes files no earlier test read
 * (freshFile: no page cache, no resident blocks) and reads them through its own mount with
 * 4 MiB parts and cross-file prefetch off (mount), or with a command (run).
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import type { Test } from './tap.js';
import { tempMountpoint } from './fuse.js';
import { testMountOptions, useLocalCredentials } from './mount-options.js';
import { mountFastFile, type FastFileMount } from '../../src/fuse/fastfile.js';
import { seedDataset, type SeededObject } from '../../src/local/dataset.js';
import { startLocalS3, type LocalS3 } from '../../src/local/s3-server.js';

const MiB = 1024 * 1024;

/** 4 MiB parts, as a 256 MiB cache lends 32 MiB (8 parts) at most: a file of some tens of MiB needs several lends. */
export const LARGE_FILE_PART = 4 * MiB;

export interface LargeFiles {
  readonly s3: LocalS3;
  /** A file of the dataset that no earlier test read (throws once they are used up: raise `count`). */
  freshFile(): SeededObject;
  /** A FastFile mount of the dataset for this test (unmounted at its end), and a file's path in it. */
  mount(t: Test, name: string): Promise<{ m: FastFileMount; file: (o: SeededObject) => string }>;
  /** stdout of a command as a Buffer (bounded in time). */
  run(cmd: string, args: string[]): Promise<Buffer>;
}

export function largeFiles(t: Test, o: { bucket: string; prefix: string; count: number; size: number }): LargeFiles {
  let server: LocalS3 | undefined;
  let objects: SeededObject[] = [];
  let next = 0;
  t.before(async () => {
    server = await startLocalS3();
    useLocalCredentials(server.credentials);
    await server.createBucket(o.bucket);
    objects = await seedDataset(server, o.bucket, o.prefix, { largeFiles: { count: o.count, size: o.size } });
  });
  t.teardown(() => server?.stop());
  const s3 = (): LocalS3 => {
    if (!server) throw new Error('the local S3 server is not started yet (use it inside a test)');
    return server;
  };
  return {
    get s3() { return s3(); },
    freshFile() {
      const f = objects[next++];
      if (!f) throw new Error(`${o.bucket}: more tests than files: raise count`);
      return f;
    },
    async mount(t, name) {
      const dir = await tempMountpoint(t, name);
      const m = await mountFastFile({
        uri: `s3://${o.bucket}/${o.prefix}`, mountpoint: dir,
        // Cross-file prefetch off: a file's blocks are fetched only by its own reader.
        options: testMountOptions(s3().endpoint, { cacheSize: 256 * MiB, partSize: LARGE_FILE_PART, maxPrefetch: 16 * MiB, maxInflight: 64 * MiB, crossFilePrefetch: 0 }),
      });
      t.teardown(() => m.unmount());
      return { m, file: (f) => path.join(dir, f.key.slice(o.prefix.length)) };
    },
    run(cmd, args) {
      return new Promise((resolve, reject) => {
        execFile(cmd, args, { encoding: 'buffer', maxBuffer: 2 * o.size, timeout: 120_000 }, (err, stdout, stderr) => {
          if (err) reject(new Error(`${cmd} ${args.join(' ')} failed: ${String(stderr) || err.message}`));
          else resolve(stdout);
        });
      });
    },
  };
}
