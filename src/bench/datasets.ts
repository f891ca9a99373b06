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
import { uploadLayout, type DatasetSpec, type SeededObject } from '../local/dataset.js';
import type { LocalS3 } from '../local/s3-server.js';

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
  const out = await uploadLayout(s3, bucket, benchLayout(prefix, spec), spec.seed ?? 1);
  return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}
