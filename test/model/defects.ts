/**
 * Issue 43, deliverable 2: the model's programs written after the defects the issue lists
 * (test/helpers/read-model.ts DEFECT_PROGRAMS), each through a real kernel mount of the built
 * daemon against the fault-injecting model server. Each must hold every property of the model.
 */
import t from 'tap';
import '../helpers/exit-watch.js';
import { DEFECT_PROGRAMS, runProgram, totals } from '../helpers/read-model.js';

for (const [name, prog] of Object.entries(DEFECT_PROGRAMS)) {
  t.test(name, async (t) => {
    await runProgram(prog);
    t.pass('every property held');
  });
}
t.teardown(() => { t.comment(JSON.stringify(totals)); });
