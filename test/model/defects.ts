/**
 * Issue 43, deliverable 2: the model's programs written after the defects the issue lists
 * (test/helpers/read-model.ts DEFECT_PROGRAMS), each through a real kernel mount of the built
 * daemon against the fault-injecting model server. Each must hold every property of the model.
 */
import t from 'tap';
import '../helpers/exit-watch.js';
import { DEFECT_PROGRAMS, runProgram, totals } from '../helpers/read-model.js';

/**
 * Programs that fail on today's main through a defect the issue lists and another engineer is
 * fixing: marked todo (still run, still strict) until the fix is merged; remove the line then.
 */
const KNOWN: Record<string, string> = {
  'short reads after an overwrite': 'issue 43 defect 0 (short reads after an overwrite), fix under way on another branch',
  'tier ranges after a failed run': 'issue 43 defect 0 shows first here (a short read); defect 1 (tiered-client wrong data) is fixed on another branch',
};

for (const [name, prog] of Object.entries(DEFECT_PROGRAMS)) {
  t.test(name, KNOWN[name] !== undefined ? { todo: KNOWN[name] } : {}, async (t) => {
    await runProgram(prog);
    t.pass('every property held');
  });
}
t.teardown(() => { t.comment(JSON.stringify(totals)); });
