/**
 * Issue 43, deliverable 2: FastFile's read path through a real kernel mount of the built
 * daemon, checked against the reference model of the object server under faults (random
 * programs of test/helpers/read-model.ts; the properties are listed there). CI runs the
 * fixed seeds below within a bounded time; `npm run soak -- --minutes N --seed S` runs the
 * same programs for as long as asked (SLUICE_SOAK_MINUTES, SLUICE_SOAK_SEED).
 * A failure prints fast-check's report: the seed, the path, and the shrunk program.
 */
import fc from 'fast-check';
import t from 'tap';
import '../helpers/exit-watch.js';
import { checkPrograms, programArb, totals } from '../helpers/read-model.js';
import type { Test } from '../helpers/tap.js';

/**
 * CI seeds: programs of every profile, fault and event. The second runs every program with the
 * cache bucket on (its faults, damaged objects, stale blocks under an overwrite, a second node);
 * the first draws it (and the soak).
 */
const SEEDS: Array<{ seed: number; cacheBucket?: boolean }> = [{ seed: 43_2026 }, { seed: 43_0001, cacheBucket: true }];
/** The programs of a seed: a CI seed's own, so that its failures replay. */
const arbOf = (seed: number) => programArb({ cacheBucket: SEEDS.find((s) => s.seed === seed)?.cacheBucket });
/** Programs per CI seed, and the time one seed may take, shrinking included (the CI budget of all model files is 3 minutes). */
const RUNS = 3;
const SEED_BUDGET_MS = 25_000;

const soakMinutes = Number(process.env.SLUICE_SOAK_MINUTES ?? '0');
/** Replays a failure: SLUICE_MODEL_SEED (and SLUICE_MODEL_PATH) as printed by fast-check. */
const replay = process.env.SLUICE_MODEL_SEED;

async function check(t: Test, seed: number, runs: number, untilMs: number, arb = programArb(), path?: string): Promise<boolean> {
  const { details: d, late } = await checkPrograms({ seed, numRuns: runs, arb, untilMs, path });
  if (d.failed) t.fail(`seed ${seed}: ${String((d.errorInstance as Error | undefined)?.message ?? '')} | ${fc.defaultReportMessage(d) ?? 'failed'}`);
  else t.pass(`seed ${seed}: ${d.numRuns} programs hold${late ? ' (time budget reached: some not run)' : ''}`);
  return !d.failed;
}

if (replay !== undefined) {
  t.test(`replay of seed ${replay}`, async (t) => {
    await check(t, Number(replay), process.env.SLUICE_MODEL_PATH !== undefined ? 1 : RUNS, Date.now() + 3_600_000, arbOf(Number(replay)), process.env.SLUICE_MODEL_PATH);
    t.comment(JSON.stringify(totals));
  });
} else if (soakMinutes > 0) {
  t.test(`soak: FastFile programs for ${soakMinutes} min`, async (t) => {
    const until = Date.now() + soakMinutes * 60_000;
    let seed = Number(process.env.SLUICE_SOAK_SEED ?? '1');
    const failed: number[] = [];
    while (Date.now() < until) {
      if (!(await check(t, seed, 5, until))) failed.push(seed);
      seed++;
    }
    t.comment(`soak totals: ${JSON.stringify(totals)}; failing seeds: ${failed.join(', ') || 'none'}`);
  });
} else {
  for (const { seed, cacheBucket } of SEEDS) {
    t.test(`FastFile model, seed ${seed}${cacheBucket ? ' (cache bucket on)' : ''}`, async (t) => {
      const before = totals.cachePrograms;
      await check(t, seed, RUNS, Date.now() + SEED_BUDGET_MS, arbOf(seed));
      if (cacheBucket) t.ok(totals.cachePrograms > before, `programs with the cache bucket ran (${totals.cachePrograms - before}; cache GETs ${totals.cacheGets} (${totals.cacheServed} with a body), PUTs ${totals.cachePuts}, faults ${totals.cacheFaults}, objects damaged ${totals.cacheDamaged})`);
      t.comment(JSON.stringify(totals));
    });
  }
}
