/**
 * Seeds the benchmark's datasets with a layout every client can list.
 *
 * The bytes are those of src/local/dataset.ts (generateBytes: a pure function of
 * seed, key and size, so sourceBytes() regenerates any range for verification),
 * but the keys are at most one folder deep: `<prefix>fNN/file-NNNNN.bin` for small
 * files (`<prefix>file-NNNNN.bin` with one folder) and `<prefix>large/large-N.bin`.
 * Why: s3rver answers a delimiter listing (what s3fs and rclone use to show a
 * folder) without the common prefixes of keys two or more folders below the
 * listed prefix, so the peers would see dataset.ts's small/dNN/sNN/ tree as empty.
 */
import { createHash } from 'node:crypto';
import { mkdir, open, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { generateChunks, uploadLayout, type DatasetSpec, type SeededObject } from '../local/dataset.js';
import type { LocalS3 } from '../local/s3-server.js';

/**
 * Datasets of more keys than this are written straight into s3rver's folder instead of
 * PUT one by one: 100,000 PUTs through s3rver take 10+ minutes on a loaded 2-core machine,
 * the files take seconds. Below it, the PUT path (which tests s3rver the way clients do).
 */
const DIRECT_SEED_MIN_KEYS = 20_000;
/**
 * Datasets with an object this large are written straight into s3rver's folder too, streamed
 * in chunks: a PUT holds the whole body in memory, and a Buffer holds at most 4 GiB on Node 20
 * (issue 44's fio file is 4 GiB).
 */
const DIRECT_SEED_MIN_OBJECT = 256 * 1024 * 1024;
/** Objects written at once when seeding on disk: enough to keep the disk busy, few open files. */
const DIRECT_SEED_CONCURRENCY = 64;

export function benchLayout(prefix: string, spec: DatasetSpec): { key: string; size: number }[] {
  const out: { key: string; size: number }[] = [];
  if (spec.smallFiles) {
    const folders = Math.max(1, spec.smallFiles.folders ?? 1);
    const per = Math.ceil(spec.smallFiles.count / folders);
    for (let i = 0; i < spec.smallFiles.count; i++) {
      const folder = folders === 1 ? '' : `f${String(Math.floor(i / per)).padStart(2, '0')}/`;
      out.push({ key: `${prefix}${folder}file-${String(i).padStart(5, '0')}.bin`, size: spec.smallFiles.size });
    }
  }
  if (spec.largeFiles) {
    for (let i = 0; i < spec.largeFiles.count; i++) out.push({ key: `${prefix}large/large-${i}.bin`, size: spec.largeFiles.size });
  }
  return out;
}

/** Uploads a dataset; resolves with its objects sorted by key. */
export async function seedBenchDataset(s3: LocalS3, bucket: string, prefix: string, spec: DatasetSpec): Promise<SeededObject[]> {
  const layout = benchLayout(prefix, spec);
  const out = layout.length >= DIRECT_SEED_MIN_KEYS || layout.some((x) => x.size >= DIRECT_SEED_MIN_OBJECT)
    ? await writeS3rverObjects(s3, bucket, layout, spec.seed ?? 1)
    : await uploadLayout(s3, bucket, layout, spec.seed ?? 1);
  return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/**
 * Writes objects the way s3rver's file store keeps them (s3rver 3.x, lib/stores/filesystem.js):
 * `<dir>/<bucket>/<key>._S3rver_object` (the bytes), `._S3rver_object.md5` (hex MD5, the ETag)
 * and `._S3rver_metadata.json` (the headers a PUT stored). s3rver reads these on every
 * request and keeps no index, so the objects are served exactly as if PUT. The first object
 * is then read back through the server (an anonymous HEAD, which s3rver allows): its ETag and size must match, so a change of
 * s3rver's layout fails the seeding with a clear message rather than a bench of empty listings.
 */
export async function writeS3rverObjects(s3: LocalS3, bucket: string, layout: readonly { key: string; size: number }[], seed: number): Promise<SeededObject[]> {
  const result: SeededObject[] = new Array(layout.length);
  const root = path.join(s3.dir, bucket);
  const madeDirs = new Map<string, Promise<unknown>>();
  let next = 0;
  const worker = async () => {
    while (next < layout.length) {
      const i = next++;
      const { key, size } = layout[i]!;
      const file = path.join(root, ...key.split('/'));
      const dir = path.dirname(file);
      let made = madeDirs.get(dir);
      if (!made) madeDirs.set(dir, made = mkdir(dir, { recursive: true }));
      await made;
      const md5h = createHash('md5');
      const sha = createHash('sha256');
      const fh = await open(`${file}._S3rver_object`, 'w');
      try {
        for (const chunk of generateChunks(key, size, seed)) {
          md5h.update(chunk);
          sha.update(chunk);
          await fh.write(chunk);
        }
      } finally { await fh.close(); }
      const md5 = md5h.digest('hex');
      await Promise.all([
        writeFile(`${file}._S3rver_object.md5`, md5),
        writeFile(`${file}._S3rver_metadata.json`, '{"content-type":"application/octet-stream"}'),
      ]);
      result[i] = { key, size, sha256: sha.digest('hex'), etag: JSON.stringify(md5), seed };
    }
  };
  await Promise.all(Array.from({ length: Math.min(DIRECT_SEED_CONCURRENCY, layout.length) }, worker));
  if (result.length > 0) {
    const probe = result[0]!;
    const head = await fetch(`${s3.endpoint}/${bucket}/${probe.key.split('/').map(encodeURIComponent).join('/')}`, { method: 'HEAD' });
    if (head.headers.get('etag') !== probe.etag || Number(head.headers.get('content-length')) !== probe.size) {
      throw new Error(`seeding s3rver's folder directly did not work (HEAD ${probe.key}: ${head.status}, ETag ${head.headers.get('etag')}, expected ${probe.etag}): s3rver's file layout has changed; lower the dataset's count or update writeS3rverObjects`);
    }
  }
  return result;
}
