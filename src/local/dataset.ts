/**
 * Deterministic generated datasets for tests, `sluice demo` and `sluice bench`.
 *
 * Every object's bytes are a pure function of (seed, key, size): a xorshift32 stream whose
 * state comes from sha256(seed + key). So a test can regenerate any object's source bytes
 * (`sourceBytes()`) instead of keeping them in memory, and two runs with one seed upload
 * byte-identical data. The layout under `prefix`:
 *   small/dNN/sNN/file-NNNNN.bin   many small files spread over `folders` nested folders
 *   large/large-N.bin              a few large files
 *   special/...                    keys with spaces, non-ASCII, '+', '%', '=' (specialNames)
 * Uploads run with bounded concurrency; the result lists key, size, sha256 and ETag of each.
 */
import { createHash } from 'node:crypto';
import type { LocalS3 } from './s3-server.js';

export interface DatasetSpec {
  smallFiles?: { count: number; size: number; folders?: number };
  largeFiles?: { count: number; size: number };
  specialNames?: boolean;
  seed?: number;
}

export interface SeededObject {
  key: string;
  size: number;
  sha256: string;
  etag: string;
  /** The seed the bytes were generated from (so `sourceBytes()` can regenerate them). */
  seed: number;
}

/** Uploads in flight at once: enough to hide per-request latency, few enough for a 2-core CI box. */
const UPLOAD_CONCURRENCY = 8;
/** Default folder fan-out for small files: wide enough that listing splits on common prefixes. */
const DEFAULT_FOLDERS = 16;
const DEFAULT_SEED = 1;

/** Special names: a space, non-ASCII (Latin, CJK, emoji), '+', '%' and '=' and '&' - the usual URI-encoding traps. */
const SPECIAL_NAMES = [
  'special/with space.txt',
  'special/ünïcödé-日本語.bin',
  'special/plus+sign.bin',
  'special/percent%20literal.bin',
  'special/eq=amp&semi;.bin',
  'special/deep folder/é/🚀 rocket.bin',
];
const SPECIAL_SIZE = 3000;

/** The xorshift32 state an object's stream starts from. */
function streamStart(key: string, seed: number): number {
  const digest = createHash('sha256').update(`${seed}\0${key}`).digest();
  return digest.readUInt32LE(0) || 0x9e3779b9; // xorshift32 must not start at 0
}

/** Fills `buf` (a multiple of 4 bytes) with the stream from state `x`; returns the state after it. */
function fillStream(buf: Buffer, x: number): number {
  for (let i = 0; i < buf.length; i += 4) {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    buf.writeUInt32LE(x, i);
  }
  return x;
}

/**
 * The object's bytes: deterministic from (seed, key, size). The stream depends on seed and
 * key only, so an object's first n bytes are those of any longer object of the same key.
 */
export function generateBytes(key: string, size: number, seed: number = DEFAULT_SEED): Buffer {
  const buf = Buffer.allocUnsafe(Math.ceil(size / 4) * 4);
  fillStream(buf, streamStart(key, seed));
  return buf.subarray(0, size);
}

/** The same bytes as generateBytes, in chunks of `chunkBytes` (a multiple of 4): an object larger than memory allows, or than a Buffer holds. */
export function* generateChunks(key: string, size: number, seed: number = DEFAULT_SEED, chunkBytes = 8 * 1024 * 1024): Generator<Buffer> {
  let x = streamStart(key, seed);
  for (let at = 0; at < size; at += chunkBytes) {
    const n = Math.min(chunkBytes, size - at);
    const buf = Buffer.allocUnsafe(Math.ceil(n / 4) * 4);
    x = fillStream(buf, x);
    yield buf.subarray(0, n);
  }
}

/** The source bytes of a seeded object (or of [start, end) of it); generates the first `end` bytes only. */
export function sourceBytes(obj: { key: string; size: number; seed?: number }, start = 0, end = obj.size): Buffer {
  return generateBytes(obj.key, end, obj.seed ?? DEFAULT_SEED).subarray(start, end);
}

/** The keys and sizes a spec produces under `prefix`, without uploading anything. */
export function datasetLayout(prefix: string, spec: DatasetSpec): { key: string; size: number }[] {
  const out: { key: string; size: number }[] = [];
  if (spec.smallFiles) {
    const { count, size } = spec.smallFiles;
    const folders = Math.max(1, spec.smallFiles.folders ?? DEFAULT_FOLDERS);
    const top = Math.max(1, Math.ceil(Math.sqrt(folders)));
    for (let i = 0; i < count; i++) {
      const f = i % folders;
      const d = String(f % top).padStart(2, '0');
      const s = String(Math.floor(f / top)).padStart(2, '0');
      out.push({ key: `${prefix}small/d${d}/s${s}/file-${String(i).padStart(5, '0')}.bin`, size });
    }
  }
  if (spec.largeFiles) {
    for (let i = 0; i < spec.largeFiles.count; i++) out.push({ key: `${prefix}large/large-${i}.bin`, size: spec.largeFiles.size });
  }
  if (spec.specialNames) {
    for (const name of SPECIAL_NAMES) out.push({ key: prefix + name, size: SPECIAL_SIZE });
  }
  return out;
}

/** Generates and uploads the dataset; resolves with every object in layout order. */
export async function seedDataset(s3: LocalS3, bucket: string, prefix: string, spec: DatasetSpec): Promise<SeededObject[]> {
  return uploadLayout(s3, bucket, datasetLayout(prefix, spec), spec.seed ?? DEFAULT_SEED);
}

/**
 * Generates each object of `layout` from (key, size, seed) and uploads it, UPLOAD_CONCURRENCY
 * at a time; resolves with every object, with its sha256 and ETag, in layout order.
 */
export async function uploadLayout(s3: LocalS3, bucket: string, layout: readonly { key: string; size: number }[], seed: number): Promise<SeededObject[]> {
  const result: SeededObject[] = new Array(layout.length);
  let next = 0;
  const worker = async () => {
    while (next < layout.length) {
      const i = next++;
      const { key, size } = layout[i]!;
      const body = generateBytes(key, size, seed);
      const sha256 = createHash('sha256').update(body).digest('hex');
      const etag = await s3.putObject(bucket, key, body);
      result[i] = { key, size, sha256, etag, seed };
    }
  };
  await Promise.all(Array.from({ length: Math.min(UPLOAD_CONCURRENCY, layout.length) }, worker));
  return result;
}
