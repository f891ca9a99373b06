/**
 * V8 tuning for sluice's long-lived data-plane processes (`sluice mount`, `sluice run`).
 *
 * Why (issue 11, "a fresh daemon pays more per GB than a warm one"): a profile of a fresh
 * daemon's first 512 MiB (perf, cpu-clock, HTTP, no latency; BENCHMARKS.md "t11-fresh")
 * put about 0.75 CPU s more on it than on the same daemon's second 512 MiB. Most of the
 * difference is V8 warming up on the per-read path: the main thread runs the FUSE read,
 * cache and receive code in Ignition, V8's bytecode interpreter (about 390 of ~3000
 * samples sat under InterpreterEntryTrampoline, ~4 in the warm read), until each function
 * has spent its interrupt budget and is baseline- then TurboFan-compiled. The rest is
 * first touch of memory (slab prefault, libfuse's read buffers) and TurboFan itself.
 *
 * What: `--always-sparkplug` makes V8 compile every function with Sparkplug, its
 * non-optimising baseline compiler, the first time it runs, instead of interpreting it
 * first. Sparkplug translates bytecode to machine code in one linear pass (it is built to
 * be cheap enough to do eagerly), so the interpreted phase of the hot path disappears;
 * TurboFan still optimises hot functions as before. The cost is machine code for every
 * function that runs once (start-up, listing): a few MB at most, within the memory slack.
 *
 * Set with v8.setFlagsFromString() before the command's modules load: V8 reads the flag
 * when it first compiles a function, so every function compiled afterwards gets it
 * (checked by test/runtime-tuning.ts). A user who names the flag in NODE_OPTIONS or on the
 * node command line (`--no-always-sparkplug`) keeps their choice.
 */
import v8 from 'node:v8';

/** The flag (see the module comment). */
export const EAGER_BASELINE_FLAG = '--always-sparkplug';

/** Commands that run the data plane for the length of a job (the others are short-lived or are peers' harnesses). */
const DATA_PLANE_COMMANDS = new Set(['mount', 'run']);

/**
 * Applies the tuning for `command`; returns whether the flag was set (false for other
 * commands, or when the user's NODE_OPTIONS / node flags already name it).
 */
export function applyRuntimeTuning(command: string, execArgv: readonly string[] = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? ''): boolean {
  if (!DATA_PLANE_COMMANDS.has(command)) return false;
  if ([...execArgv, nodeOptions].some((a) => /always[-_]sparkplug/.test(a))) return false;
  v8.setFlagsFromString(EAGER_BASELINE_FLAG);
  return true;
}
