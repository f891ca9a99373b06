/**
 * joinWriters (issue 43): settles only once every task has stopped; the first failure aborts the
 * others and is the one thrown.
 */
import t from 'tap';
import { joinWriters } from '../../src/s3/join-writers.js';
import { AbortedError } from '../../src/errors.js';

/** A task that runs until aborted (then rejects AbortedError after `lagMs`), recording when it stopped. */
function untilAborted(stopped: string[], name: string, lagMs: number) {
  return (signal: AbortSignal | undefined) => new Promise<void>((_resolve, reject) => {
    signal!.addEventListener('abort', () => setTimeout(() => { stopped.push(name); reject(new AbortedError()); }, lagMs), { once: true });
  });
}

t.test('a failure aborts the siblings, waits for them, and throws the cause', async (t) => {
  const stopped: string[] = [];
  const cause = new Error('412');
  const p = joinWriters([
    untilAborted(stopped, 'slow', 50),
    async () => { await new Promise((r) => setTimeout(r, 10)); stopped.push('failed'); throw cause; },
    untilAborted(stopped, 'slower', 100),
  ]);
  await t.rejects(p, cause);
  t.same(stopped, ['failed', 'slow', 'slower'], 'settled after every task had stopped');
});

t.test('all succeed: resolves; the caller\'s abort reaches every task', async (t) => {
  await joinWriters([async () => 1, async () => 2]);
  const ctrl = new AbortController();
  const stopped: string[] = [];
  const p = joinWriters([untilAborted(stopped, 'a', 5), untilAborted(stopped, 'b', 20)], ctrl.signal);
  ctrl.abort();
  await t.rejects(p, AbortedError);
  t.same(stopped, ['a', 'b']);
});

t.test('a task that throws synchronously counts as a failure, and the others are still awaited', async (t) => {
  const stopped: string[] = [];
  await t.rejects(joinWriters([untilAborted(stopped, 'a', 20), () => { throw new Error('sync'); }]), /sync/);
  t.same(stopped, ['a']);
});
