/**
 * S3DistributionType: which objects each host of a job reads.
 *
 * FullyReplicated: every host gets every object.
 *
 * ShardedByS3Key: whole objects are split into `hostCount` disjoint shards whose
 * union is every object, near-equal by bytes. Every host runs this same pure function
 * on the same listing and keeps its own shard, so no coordination is needed.
 *
 * Algorithm (greedy least-loaded):
 *  1. Order the objects deterministically:
 *     - no seed: largest first, ties by key (byte order of UTF-16 code units, the same
 *       on every host). Largest-first ("LPT") keeps shards within a few percent even
 *       with mixed sizes.
 *     - with a seed: by key, then shuffled(seed, epoch) (see shuffle.ts). Membership then
 *       changes every epoch, as SageMaker does with ShuffleConfig and ShardedByS3Key,
 *       while each epoch's shards stay disjoint and complete.
 *  2. Give each object, in that order, to the host with the fewest bytes so far; ties go
 *     to the host with fewer objects, then to the lower host index (a binary heap keeps
 *     this O(n log hosts)).
 * Guarantee: the largest and smallest shard differ by at most the largest object
 * (when the fullest host last received an object, it was the emptiest).
 *
 * The returned shard is in key order; callers shuffle it for the epoch if they want.
 */
import { InvalidArgumentError } from '../errors.js';
import { shuffled } from './shuffle.js';

export type Distribution = 'FullyReplicated' | 'ShardedByS3Key';

export interface ShardOptions {
  distribution: Distribution;
  /** This host's position in the host list, 0-based. */
  hostIndex: number;
  hostCount: number;
  /** ShuffleConfig.Seed: reshuffle shard membership every epoch. */
  seed?: number;
  epoch: number;
}

export function byKey<T extends { key: string }>(a: T, b: T): number {
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}

export function shardObjects<T extends { key: string; size: number }>(objects: T[], o: ShardOptions): T[] {
  if (!Number.isInteger(o.hostCount) || o.hostCount < 1) throw new InvalidArgumentError(`host count ${o.hostCount} must be a positive integer`);
  if (!Number.isInteger(o.hostIndex) || o.hostIndex < 0 || o.hostIndex >= o.hostCount) {
    throw new InvalidArgumentError(`host index ${o.hostIndex} must be between 0 and ${o.hostCount - 1}`);
  }
  const sorted = objects.slice().sort(byKey);
  if (o.distribution === 'FullyReplicated' || o.hostCount === 1) return sorted;
  const assignment = assignShards(sorted, o.hostCount, o.seed, o.epoch);
  return sorted.filter((_, i) => assignment[i] === o.hostIndex);
}

/** For each object of `sortedByKey`, the index of the host that reads it. */
export function assignShards(sortedByKey: readonly { key: string; size: number }[], hostCount: number, seed: number | undefined, epoch: number): Int32Array {
  const idx = sortedByKey.map((_, i) => i);
  const order = seed === undefined
    ? idx.sort((a, b) => sortedByKey[b]!.size - sortedByKey[a]!.size || a - b)
    : shuffled(idx, seed, epoch);
  const heap = new LoadHeap(hostCount);
  const out = new Int32Array(sortedByKey.length);
  for (const i of order) out[i] = heap.take(sortedByKey[i]!.size);
  return out;
}

/** Min-heap of hosts by (bytes, objects, index). INVARIANT: heap[k] <= heap[2k+1], heap[2k+2]. */
class LoadHeap {
  private readonly bytes: Float64Array;
  private readonly count: Float64Array;
  private readonly heap: number[];

  constructor(n: number) {
    this.bytes = new Float64Array(n);
    this.count = new Float64Array(n);
    this.heap = Array.from({ length: n }, (_, i) => i);
  }

  /** Adds `size` to the least-loaded host and returns its index. */
  take(size: number): number {
    const h = this.heap[0]!;
    this.bytes[h]! += size;
    this.count[h]! += 1;
    this.siftDown(0);
    return h;
  }

  private less(a: number, b: number): boolean {
    const { bytes, count } = this;
    if (bytes[a] !== bytes[b]) return bytes[a]! < bytes[b]!;
    if (count[a] !== count[b]) return count[a]! < count[b]!;
    return a < b;
  }

  private siftDown(k: number): void {
    const heap = this.heap;
    const n = heap.length;
    for (;;) {
      const l = 2 * k + 1;
      const r = l + 1;
      let m = k;
      if (l < n && this.less(heap[l]!, heap[m]!)) m = l;
      if (r < n && this.less(heap[r]!, heap[m]!)) m = r;
      if (m === k) return;
      [heap[k], heap[m]] = [heap[m]!, heap[k]!];
      k = m;
    }
  }
}
