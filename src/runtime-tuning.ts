/**
 * V8 tuning for sluice's long-lived data-plane processes (`sluice mount`, `sluice run`),
 * applied once they are ready to serve data.
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
 * When: at "ready" (mount.ts) and just before the training command starts (run.ts), with
 * v8.setFlagsFromString(). V8 reads the flag when it first compiles a function, so every
 * function compiled afterwards gets it (checked by test/runtime-tuning.ts), and functions
 * are compiled lazily, at their first call: the per-read path first runs at the first
 * read, after ready. Set at process start instead, the flag also baseline-compiled all of
 * start-up's run-once code (the SDK, listing, options): measured +0.1-0.2 CPU s before
 * ready (0.45-0.55 -> 0.54-0.76 s), as much as it saved on the first 512 MiB.
 * A user who names the flag in NODE_OPTIONS or on the node command line
 * (`--no-always-sparkplug`) keeps their choice.
 */
import v8 from 'node:v8';

/** The flag (see the module comment). */
export const EAGER_BASELINE_FLAG = '--always-sparkplug';

/**
 * Applies the tuning (call once the process is ready to serve data); returns whether the
 * flag was set (false when the user's NODE_OPTIONS / node flags already name it).
 */
export function applyRuntimeTuning(execArgv: readonly string[] = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? ''): boolean {
  if ([...execArgv, nodeOptions].some((a) => /always[-_]sparkplug/.test(a))) return false;
  v8.setFlagsFromString(EAGER_BASELINE_FLAG);
  return true;
}
