#!/usr/bin/env node
/**
 * `npm run soak -- --minutes N --seed S`: the model-based test of the read path (issue 43,
 * test/model/) for as long as asked. The minutes are split between the FastFile programs
 * (two thirds: they cover the most paths) and the Pipe and File programs, run one file after
 * the other (the machine is shared; the files run their own concurrency). Each file loops over
 * seeds S, S+1, ... and prints the programs and reads it ran and every failing seed, with
 * fast-check's report (seed, path, shrunk program).
 */
import { spawnSync } from 'node:child_process';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { minutes: { type: 'string', default: '10' }, seed: { type: 'string', default: '1' } } });
const minutes = Number(values.minutes);
const seed = Number(values.seed);
if (!(minutes > 0) || !Number.isInteger(seed)) {
  process.stderr.write('sluice soak: --minutes must be a positive number and --seed an integer, e.g. npm run soak -- --minutes 10 --seed 7\n');
  process.exit(2);
}
/** Time a file may take beyond its minutes: the last program and its shrinking, and tap's start. */
const SLACK_S = 600;
const plan = [['test/model/fastfile.ts', (minutes * 2) / 3], ['test/model/channels.ts', minutes / 3]];
let failed = false;
for (const [file, m] of plan) {
  process.stdout.write(`soak: ${file} for ${m.toFixed(1)} min from seed ${seed}\n`);
  const limitS = Math.ceil(m * 60 + SLACK_S);
  // SLUICE_TEST_STUCK_MS: test/helpers/exit-watch.ts reports a file still running after 240 s as stuck; a soak runs for longer on purpose.
  const r = spawnSync('npx', ['tap', '--timeout', String(limitS), '--reporter', 'tap', file], {
    stdio: 'inherit', env: { ...process.env, SLUICE_SOAK_MINUTES: String(m), SLUICE_SOAK_SEED: String(seed), SLUICE_TEST_STUCK_MS: String((limitS - 30) * 1000) },
  });
  if (r.status !== 0) failed = true;
}
process.exit(failed ? 1 : 0);
