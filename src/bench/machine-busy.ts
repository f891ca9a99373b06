/**
 * How busy the whole machine was during a timed span: cores' worth of CPU, from
 * /proc/stat, whoever used it (the target, the readers, s3rver, the latency proxy,
 * the kernel's softirqs and workers, other tenants' processes in this VM).
 *
 * Why. "× limit" compares a target with raw curl GETs through the same proxy. On a
 * machine where the target, its readers, s3rver and the proxy share few cores, a
 * target can miss the link because the machine ran out of CPU, not because it left the
 * link idle; every client then misses it, peers too. A figure taken with the machine
 * saturated (busy close to `nproc`) says so beside it, and the limit's own runs show how
 * much CPU the link itself needed.
 *
 * How. A sampler reads the aggregate "cpu" line of /proc/stat every SAMPLE_MS and keeps
 * (time, busy jiffies) pairs; `coresBusy(start, end)` interpolates the busy count at
 * both ends of the span linearly between the samples around them, so the figure does
 * not depend on where the span falls between samples. Busy = user + nice + system + irq
 * + softirq (guest time is inside user); idle, iowait and steal (time the hypervisor
 * gave to another guest) are not busy.
 *
 * Constants. SAMPLE_MS = 50: the kernel counts in jiffies of 10 ms (USER_HZ 100), so a
 * sample is good to ~0.01 s per core; with spans of 1-10 s, the interpolation error at
 * the two ends is under 1% of a core. A read of /proc/stat costs ~20-40 us, i.e. ~0.1% of
 * a core at 20 reads a second. MAX_SAMPLES bounds the memory: a day at 20 a second is
 * 1.7 M samples; 2^20 keeps the last ~14 hours (older spans are not asked for). Past
 * the bound the oldest quarter goes at once, so the array is shifted once per ~3.6 hours
 * rather than on every sample.
 */
import { readFileSync } from 'node:fs';
import { epochMs } from './read-plan.js';

const SAMPLE_MS = 50;
const MAX_SAMPLES = 1 << 20;
/** USER_HZ: the unit of /proc/stat on Linux, whatever the kernel's HZ. */
const JIFFIES_PER_S = 100;

/** Busy jiffies of all CPUs so far, from the text of /proc/stat; undefined if it has no "cpu" line. */
export function busyJiffies(procStat: string): number | undefined {
  const line = procStat.split('\n').find((l) => l.startsWith('cpu '));
  if (line === undefined) return undefined;
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal guest guest_nice
  const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0] = f;
  return user + nice + system + irq + softirq;
}

export interface BusySample { ms: number; jiffies: number }

/** Cores busy over [startMs, endMs], from samples in time order; undefined when they do not cover the span. */
export function coresBusyFrom(samples: readonly BusySample[], startMs: number, endMs: number): number | undefined {
  if (!(endMs > startMs) || samples.length < 2) return undefined;
  const at = (ms: number): number | undefined => {
    // Last sample at or before ms (binary search), then interpolate to the next one.
    let lo = 0;
    let hi = samples.length - 1;
    if (ms < samples[0]!.ms || ms > samples[hi]!.ms) return undefined;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (samples[mid]!.ms <= ms) lo = mid; else hi = mid - 1;
    }
    const a = samples[lo]!;
    const b = samples[Math.min(lo + 1, samples.length - 1)]!;
    return b.ms === a.ms ? a.jiffies : a.jiffies + ((b.jiffies - a.jiffies) * (ms - a.ms)) / (b.ms - a.ms);
  };
  const j0 = at(startMs);
  const j1 = at(endMs);
  if (j0 === undefined || j1 === undefined) return undefined;
  return (j1 - j0) / JIFFIES_PER_S / ((endMs - startMs) / 1000);
}

/** Samples /proc/stat while started; answers how busy the machine was over a past span. */
export class BusyMeter {
  private readonly samples: BusySample[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly read: () => string = () => readFileSync('/proc/stat', 'utf8')) {}

  /** Starts sampling; false where /proc/stat cannot be read (then every span answers undefined). */
  start(): boolean {
    if (this.timer) return true;
    if (!this.sample()) return false;
    this.timer = setInterval(() => this.sample(), SAMPLE_MS);
    this.timer.unref();
    return true;
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Takes a sample now (also called at the end of a span, so that the span is covered). */
  sample(): boolean {
    let j: number | undefined;
    try { j = busyJiffies(this.read()); } catch { j = undefined; }
    if (j === undefined) return false;
    this.samples.push({ ms: epochMs(), jiffies: j });
    if (this.samples.length > MAX_SAMPLES) this.samples.splice(0, MAX_SAMPLES / 4);
    return true;
  }

  /** Cores busy on the whole machine over [startMs, endMs] (epoch ms), if sampled. */
  coresBusy(startMs: number, endMs: number): number | undefined {
    this.sample();
    return coresBusyFrom(this.samples, startMs, endMs);
  }
}
