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
// Known and not fixable in the daemon (decision 0017): a read() that spans several FUSE
// requests (pages, or --fuse-max-read chunks) when the object changes between them gets the
// bytes of the requests answered before the change, then ESTALE at the next read; Linux
// returns the partial count. Every byte returned is the old version's (checked), the file's
// size is not shrunk (test/fuse/changed-object.ts). These stay strict and marked todo.
const KNOWN: Record<string, string> = {
  'short reads after an overwrite': 'issue 43 defect 0: a partial read when the object changes between the FUSE requests of one read() (decision 0017)',
  'tier ranges after a failed run': 'issue 43 defect 0 shows first here (a partial read, decision 0017); defect 1 (wrong bytes) is fixed (test/cache/tiered-client.ts)',
};

for (const [name, prog] of Object.entries(DEFECT_PROGRAMS)) {
  t.test(name, KNOWN[name] !== undefined ? { todo: KNOWN[name] } : {}, async (t) => {
    await runProgram(prog);
    t.pass('every property held');
  });
}
t.teardown(() => { t.comment(JSON.stringify(totals)); });
