/**
 * What first-touched memory costs on the bench's machine, recorded with every run so that
 * per-process figures can be read across machines (BENCHMARKS.md "t14-folio").
 *
 * On a VM that hands free memory back to its host (virtio-balloon free page reporting, e.g.
 * Firecracker), a page the host took back costs a host fault when first written: an 8 MiB
 * receive slab took 22-56 ms on the machine this was written on, against ~2 ms when recycled
 * and ~2-4 ms on machines that keep their memory. A fresh daemon's or File-mode process's
 * slabs (100-230 MiB) and the disk tier's new page cache then weigh seconds per GB on a short
 * read. The probe: a child node process (memory no earlier test of ours touched) maps and
 * populates PROBE_SLABS slabs with the addon's allocPrefaulted, as the receive path does
 * (Buffer.alloc when the addon is absent), and prints the ms of each; the median is kept.
 * Whether the kernel reports free pages is read from /sys/module/page_reporting.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

export interface MemoryProbe {
  /** Median ms to map and first-write one 8 MiB slab in a new process. */
  msPer8MiB: number;
  /** page_reporting's order (free blocks of 2^order pages go back to the host), or null when the kernel does not report free pages. */
  freePageReportingOrder: number | null;
}

/** 4 slabs (32 MiB): enough for a median, small and quick (~0.1-0.2 s) where memory is slow. */
const PROBE_SLABS = 4;

/** The probe's child: allocates PROBE_SLABS slabs of 8 MiB, keeps them, prints their ms as JSON. */
const CHILD = `
const n = Number(process.argv[1]); const url = process.argv[2];
import(url).then((m) => m.prefaultedAlloc?.()).catch(() => undefined).then((alloc) => {
  const a = alloc ?? ((b) => Buffer.alloc(b, 1));
  const keep = []; const ms = [];
  for (let i = 0; i < n; i++) { const t = performance.now(); keep.push(a(8 << 20)); ms.push(performance.now() - t); }
  process.stdout.write(JSON.stringify(ms));
});`;

/** Runs the probe; undefined when the child fails (the figure is informative, never required). */
export function probeMemory(): MemoryProbe | undefined {
  const url = new URL('../native/addon.js', import.meta.url).href;
  const r = spawnSync(process.execPath, ['-e', CHILD, String(PROBE_SLABS), url], { encoding: 'utf8', timeout: 30_000 });
  let ms: unknown;
  try {
    ms = JSON.parse(r.stdout);
  } catch {
    return undefined;
  }
  if (!Array.isArray(ms) || ms.length !== PROBE_SLABS || !ms.every((x) => typeof x === 'number' && x >= 0)) return undefined;
  const sorted = [...(ms as number[])].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return { msPer8MiB: (sorted[mid - 1]! + sorted[mid]!) / 2, freePageReportingOrder: reportingOrder() };
}

function reportingOrder(): number | null {
  try {
    const v = Number(readFileSync('/sys/module/page_reporting/parameters/page_reporting_order', 'utf8').trim());
    return Number.isInteger(v) && v >= 0 ? v : null;
  } catch {
    return null;
  }
}

/** One line for the report: what new memory costs here, and what that means for the figures. */
export function describeMemoryProbe(p: MemoryProbe): string {
  const reporting = p.freePageReportingOrder === null
    ? 'the kernel does not hand free memory back to a host'
    : `the kernel hands free blocks of ${blockSize(p.freePageReportingOrder)} and more back to the host (free page reporting), so memory it has not used lately costs a host fault per page when first written`;
  return `New memory on this machine: ${p.msPer8MiB.toFixed(1)} ms to map and first write 8 MiB in a new process; ${reporting}. Inside the figures, a new process's receive slabs and new page cache (the disk tier's epoch 1, File mode's files) cost about that per 8 MiB (BENCHMARKS.md "t14-folio").`;
}

/** 4 KiB pages << order, in KiB or MiB. */
function blockSize(order: number): string {
  const kib = 4 * 2 ** order;
  return kib >= 1024 ? `${kib / 1024} MiB` : `${kib} KiB`;
}
