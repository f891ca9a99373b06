/**
 * The memory sluice may plan for: the container's limit when there is one, else the host's.
 *
 * process.constrainedMemory() reads the cgroup's limit (memory.max in cgroup v2,
 * memory.limit_in_bytes in v1, via libuv). It answers 0 when it cannot tell, and a huge
 * number (2^64, or v1's "no limit" 2^63 rounded to a page) when the cgroup has no limit; so
 * the limit counts only when it is positive and below os.totalmem(). A pod with a 16 GiB
 * limit on a 1 TiB host then sizes its defaults from 16 GiB, not from the host.
 *
 * Defaults derive from it (src/config/options.ts): --cache-size 1/8 of it in [256 MiB, 8 GiB],
 * --max-inflight 1/8 of it in [64 MiB, 512 MiB]. memoryWarning() is the one-line warning for
 * a --cache-size plus --max-inflight above SAFE_SHARE of it.
 */
import os from 'node:os';
import { log } from '../log.js';

const MiB = 1024 * 1024;

/**
 * Share of the memory limit sluice's own bounded buffers may take before a warning: the other
 * half is the training job's (the trainer runs in the same pod) and sluice's fixed overhead
 * (Node, the SDK, the listing; 100-200 MiB, docs/CONFIGURATION.md "Memory").
 */
export const SAFE_SHARE = 1 / 2;

export interface MemoryLimit {
  bytes: number;
  /** 'cgroup': the container's limit; 'host': the machine's memory (no lower limit found). */
  source: 'cgroup' | 'host';
}

export function memoryLimit(constrained: number = process.constrainedMemory?.() ?? 0, total: number = os.totalmem()): MemoryLimit {
  if (constrained > 0 && constrained < total) return { bytes: constrained, source: 'cgroup' };
  return { bytes: total, source: 'host' };
}

const mib = (n: number) => `${Math.round(n / MiB)} MiB`;

/** One line when --cache-size + --max-inflight exceed SAFE_SHARE of the limit, else undefined. */
export function memoryWarning(cacheSize: number, maxInflight: number, limit: MemoryLimit = memoryLimit()): string | undefined {
  const safe = Math.floor(limit.bytes * SAFE_SHARE);
  if (cacheSize + maxInflight <= safe) return undefined;
  const of = limit.source === 'cgroup' ? "the container's memory limit" : "the machine's memory";
  return `--cache-size ${mib(cacheSize)} plus --max-inflight ${mib(maxInflight)} is more than half of ${of} (${mib(limit.bytes)}): the training job may be killed for memory (OOM); lower --cache-size (the default is 1/8 of the limit)`;
}

/** Logs the limit the defaults came from (info) and memoryWarning()'s line (warn), at start-up. */
export function logMemoryPlan(o: { cacheSize: number; maxInflight: number }, limit: MemoryLimit = memoryLimit()): void {
  log.info({ memoryLimit: limit.bytes, memoryLimitSource: limit.source, cacheSize: o.cacheSize, maxInflight: o.maxInflight },
    `memory: limit ${mib(limit.bytes)} (${limit.source === 'cgroup' ? 'container' : 'machine'}), cache ${mib(o.cacheSize)}, in flight ${mib(o.maxInflight)}`);
  const warning = memoryWarning(o.cacheSize, o.maxInflight, limit);
  if (warning !== undefined) log.warn({ memoryLimit: limit.bytes }, warning);
}
