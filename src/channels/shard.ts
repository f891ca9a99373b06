/**
 * S3DistributionType: which objects each host of a job reads.
 *
 * FullyReplicated: every host gets every object.
 *
 * ShardedByS3Key: whole objects are split into `hostCount` disjoint shards whose
 * union is every object, with equal object counts (within one), as SageMaker gives each
 * instance about 1/n of the objects (S3DataSource.S3DataDistributionType): data-parallel
 * jobs then run the same number of steps per host. Within that, bytes are balanced too.
 * Every host runs this same pure function on the same listing and keeps its own shard,
 * so no coordination is needed.
 *
 * Algorithm (greedy least-loaded under a count quota):
 *  1. Quotas: with n objects and h hosts, every host takes floor(n/h) objects and
 *     n mod h of them one more. Which hosts take the extra one is not fixed up front:
 *     the first n mod h hosts to reach floor(n/h) + 1 do; after that, a host that has
 *     floor(n/h) is full.
 *  2. Order the objects deterministically:
 *     - no seed: largest first, ties by key (byte order of UTF-16 code units, the same
 *       on every host). Largest-first ("LPT") keeps bytes within a few percent with
 *       mixed sizes, while the quota keeps the counts equal.
 *     - with a seed: by key, then shuffled(seed, epoch) (see shuffle.ts), then stably by
 *       size class (floor(log2 size)), largest class first: objects within a factor of
 *       two of each other are shuffled among themselves, so membership changes every
 *       epoch, as SageMaker does with ShuffleConfig and ShardedByS3Key, while bytes stay
 *       about as balanced as largest-first makes them. Each epoch's shards stay
 *       disjoint, complete and equal in count.
 *  3. Give each object, in that order, to the host with the fewest bytes so far among
 *     those not full; ties go to the host with fewer objects, then to the lower host
 *     index (a binary heap keeps this O(n log hosts); full hosts leave the heap).
 * Guarantees: shard sizes differ by at most one object; every shard is non-empty when
 * n >= h. Bytes are balanced only as far as equal counts allow (one 1000-byte object and
 * nine 100-byte ones on two hosts: 5 objects each, 1400 and 500 bytes).
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
    : bySizeClass(shuffled(idx, seed, epoch), sortedByKey);
  const heap = new LoadHeap(hostCount, sortedByKey.length);
  const out = new Int32Array(sortedByKey.length);
  for (const i of order) out[i] = heap.take(sortedByKey[i]!.size);
  return out;
}

/** log2 size classes: sizes within a factor of two are interchangeable for balance. */
const sizeClass = (size: number): number => (size <= 0 ? -1 : Math.floor(Math.log2(size)));

/** `order` stably sorted by size class, largest first: order within a class is kept. */
function bySizeClass(order: number[], objects: readonly { size: number }[]): number[] {
  const rank = new Int32Array(objects.length);
  order.forEach((i, r) => { rank[i] = r; });
  return order.slice().sort((a, b) => sizeClass(objects[b]!.size) - sizeClass(objects[a]!.size) || rank[a]! - rank[b]!);
}

/**
 * Min-heap of the hosts that are not full, by (bytes, objects, index).
 * INVARIANT: heap[k] <= heap[2k+1], heap[2k+2]; a host in the heap may have become full
 * (when the last extra slot went), and is dropped when it reaches the top.
 */
class LoadHeap {
  private readonly bytes: Float64Array;
  private readonly count: Float64Array;
  private readonly heap: number[];
  /** Every host takes `base` objects; `extra` of them take one more. */
  private readonly base: number;
  private extra: number;

  constructor(n: number, objects: number) {
    this.bytes = new Float64Array(n);
    this.count = new Float64Array(n);
    this.heap = Array.from({ length: n }, (_, i) => i);
    this.base = Math.floor(objects / n);
    this.extra = objects % n;
  }

  private full(h: number): boolean {
    const c = this.count[h]!;
    return c > this.base || (c === this.base && this.extra === 0);
  }

  /** Adds `size` to the least-loaded host that is not full and returns its index. */
  take(size: number): number {
    for (;;) {
      const h = this.heap[0];
      if (h === undefined) throw new Error('internal: more objects than the shard quotas hold');
      if (this.full(h)) {
        const last = this.heap.pop()!;
        if (this.heap.length > 0) {
          this.heap[0] = last;
          this.siftDown(0);
        }
        continue;
      }
      if (this.count[h] === this.base) this.extra--; // this host takes one of the extra slots
      this.bytes[h]! += size;
      this.count[h]! += 1;
      this.siftDown(0);
      return h;
    }
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
