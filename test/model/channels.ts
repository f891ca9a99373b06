/**
 * Issue 43, deliverable 2: Pipe and File mode (`sluice run`, the built CLI) against the
 * reference model of the fault-injecting object server (test/helpers/channel-model.ts lists
 * the properties). CI runs the fixed seeds below; `npm run soak` runs them as long as asked.
 * A failure prints fast-check's report: the seed, the path, and the shrunk program.
 */
import fc from 'fast-check';
import t from 'tap';
import { channelProgramArb, channelTotals, runChannelProgram, type ChannelProgram } from '../helpers/channel-model.js';
import type { Test } from '../helpers/tap.js';

const SEEDS = { Pipe: 43_1001, File: 43_2001 } as const;
/** Programs per CI seed, and the time one mode may take (the CI budget of all model files is 3 minutes). */
const RUNS = 6;
const MODE_BUDGET_MS = 20_000;

const soakMinutes = Number(process.env.SLUICE_SOAK_MINUTES ?? '0');

async function check(t: Test, mode: 'Pipe' | 'File', seed: number, runs: number, untilMs: number): Promise<boolean> {
  let late = false;
  const d = await fc.check(fc.asyncProperty(channelProgramArb(mode), async (p: ChannelProgram) => {
    // Past the budget no program starts (one is never cut half-way): shrinking stops there.
    if (Date.now() > untilMs) { late = true; return; }
    await runChannelProgram(p);
  }), { seed, numRuns: runs });
  if (d.failed) t.fail(`${mode} seed ${seed}: ${String((d.errorInstance as Error | undefined)?.message ?? '')} | ${fc.defaultReportMessage(d) ?? 'failed'}`);
  else t.pass(`${mode} seed ${seed}: ${d.numRuns} programs hold${late ? ' (time budget reached: some not run)' : ''}`);
  return !d.failed;
}

if (soakMinutes > 0) {
  t.test(`soak: Pipe and File programs for ${soakMinutes} min`, async (t) => {
    const until = Date.now() + soakMinutes * 60_000;
    let seed = Number(process.env.SLUICE_SOAK_SEED ?? '1');
    const failed: string[] = [];
    while (Date.now() < until) {
      for (const mode of ['Pipe', 'File'] as const) if (!(await check(t, mode, seed, 5, until))) failed.push(`${mode}:${seed}`);
      seed++;
    }
    t.comment(`soak totals: ${JSON.stringify(channelTotals)}; failing seeds: ${failed.join(', ') || 'none'}`);
  });
} else {
  for (const mode of ['Pipe', 'File'] as const) {
    t.test(`${mode} model, seed ${SEEDS[mode]}`, async (t) => {
      await check(t, mode, SEEDS[mode], RUNS, Date.now() + MODE_BUDGET_MS);
      t.comment(JSON.stringify(channelTotals));
    });
  }
}
