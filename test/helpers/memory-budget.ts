/**
 * The fixed memory overhead of the sluice process that SEMANTICS.md documents (peak RSS
 * stays under --cache-size + --max-inflight + this): Node's runtime and heap, the AWS SDK,
 * pino, prom-client, the listing, and buffers in transit to the kernel. Measured ~110 MiB
 * idle and ~165 MiB peak under test/reliability/load.ts on Node 20; the margin covers
 * allocator slack. test/reliability/semantics.ts checks the doc states this number.
 */
export const FIXED_OVERHEAD_MIB = 192;
