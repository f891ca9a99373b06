/**
 * Peak memory and CPU time of a process, from /proc (Linux only).
 *
 * Peak RSS is VmHWM from /proc/<pid>/status (the kernel's high-water mark of
 * resident memory, so a sample taken at the end still sees the peak). CPU time is
 * utime + stime from /proc/<pid>/stat, in clock ticks (USER_HZ), with utime and the minor
 * page faults (minflt) beside it: on a VM whose host takes back free memory, the first
 * write to such memory costs a host fault that lands in stime (BENCHMARKS.md t14-folio), so
 * user time is the steadier figure of a process's own work and the faults say how much new
 * memory it touched. A process that
 * exits on its own (aws s3 cp) is sampled every SAMPLE_MS while it runs; its
 * figures then miss at most that much CPU time.
 */
import type { ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';

/** USER_HZ is 100 on every Linux architecture Node runs on (the kernel ABI fixes it for /proc). */
const CLOCK_TICKS_PER_SEC = 100;
/** 100 ms: small against runs of seconds, cheap (two small file reads). */
const SAMPLE_MS = 100;

export interface ProcStats {
  /** Peak resident set size, bytes. */
  peakRssBytes: number;
  /** User + system CPU seconds. */
  cpuSeconds: number;
  /** Of them, user CPU seconds. */
  userCpuSeconds: number;
  /** Minor page faults (first touches of memory, among others). */
  minorFaults: number;
}

/** Stats of one live process, or undefined when it has gone. */
export function readProcStats(pid: number): ProcStats | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const hwm = /^VmHWM:\s+(\d+)\s+kB/m.exec(status);
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which is in parentheses and may hold spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    return { peakRssBytes: hwm ? Number(hwm[1]) * 1024 : 0, cpuSeconds: (utime + stime) / CLOCK_TICKS_PER_SEC, userCpuSeconds: utime / CLOCK_TICKS_PER_SEC, minorFaults: Number(fields[7]) };
  } catch {
    return undefined;
  }
}

/** Sum over several processes (a peer and its helpers): RSS peaks add up as an upper bound. */
export function addStats(a: ProcStats | undefined, b: ProcStats | undefined): ProcStats | undefined {
  if (!a) return b;
  if (!b) return a;
  return { peakRssBytes: a.peakRssBytes + b.peakRssBytes, cpuSeconds: a.cpuSeconds + b.cpuSeconds, userCpuSeconds: a.userCpuSeconds + b.userCpuSeconds, minorFaults: a.minorFaults + b.minorFaults };
}

/** Direct children of a process. */
export function childPids(pid: number): number[] {
  const out: number[] = [];
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const text = readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim();
      if (text) out.push(...text.split(/\s+/).map(Number));
    }
  } catch { /* gone */ }
  return out;
}

export function cmdlineOf(pid: number): string {
  try { return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim(); } catch { return ''; }
}

/** Samples a process until stopped; keeps the last good reading. */
export class ProcSampler {
  private last: ProcStats | undefined;
  private readonly timer: NodeJS.Timeout;
  constructor(private readonly pid: number) {
    this.sample();
    this.timer = setInterval(() => this.sample(), SAMPLE_MS);
  }

  sample(): ProcStats | undefined {
    const s = readProcStats(this.pid);
    if (s) this.last = { ...s, peakRssBytes: Math.max(s.peakRssBytes, this.last?.peakRssBytes ?? 0) };
    return this.last;
  }

  /** Takes a final sample (if the process still lives) and stops. */
  stop(): ProcStats | undefined {
    this.sample();
    clearInterval(this.timer);
    return this.last;
  }
}

/** A child that ignores SIGTERM this long is SIGKILLed: 3 s, far more than a clean exit takes. */
const STOP_GRACE_MS = 3000;

/** Stops a helper child of the bench (a proxy, a server) that reads commands on stdin: stdin closed, SIGTERM, SIGKILL after STOP_GRACE_MS; resolves at its exit. */
export function stopChild(child: ChildProcess): Promise<void> {
  return new Promise<void>((res) => {
    if (child.exitCode !== null || child.signalCode !== null) return res();
    child.once('exit', () => res());
    child.stdin?.end();
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS).unref();
  });
}
