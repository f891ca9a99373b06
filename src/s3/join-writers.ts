/**
 * joinWriters: run several writers into one caller's buffer and settle only once every one
 * of them has stopped (issue 43, defect 1).
 *
 * The rule it enforces: a function that writes into a buffer its caller owns (RangeOptions.into,
 * a pooled slab) must not settle, resolve OR reject, while anything it started may still write
 * there. Promise.all rejects at the first failure and leaves the others running; the caller then
 * recycles the buffer (the block cache gives a slab back to its pool) and a late writer
 * overwrites whatever was put there next: another object's bytes.
 *
 * Algorithm: each task gets one signal, linked to the caller's. The first task that fails aborts
 * the signal, so its siblings give up (a GET closes its socket, which stops its landing at once);
 * then every task is awaited (allSettled) and the first failure is thrown: the cause (a 412),
 * not a sibling's AbortedError. When all succeed it resolves like Promise.all. One task runs with
 * the caller's signal as is: no controller and no listener.
 */

export async function joinWriters(tasks: ((signal: AbortSignal | undefined) => Promise<unknown>)[], signal?: AbortSignal): Promise<void> {
  if (tasks.length === 1) {
    await tasks[0]!(signal);
    return;
  }
  const ctrl = new AbortController();
  const onAbort = () => ctrl.abort(signal?.reason);
  if (signal?.aborted) ctrl.abort(signal.reason);
  else signal?.addEventListener('abort', onAbort, { once: true });
  let failed = false;
  let first: unknown;
  const fail = (err: unknown) => {
    if (!failed) {
      failed = true;
      first = err;
    }
    ctrl.abort(err);
  };
  try {
    await Promise.allSettled(tasks.map((task) => {
      let p: Promise<unknown>;
      try {
        p = task(ctrl.signal);
      } catch (err) {
        p = Promise.reject(err);
      }
      return p.catch(fail);
    }));
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
  if (failed) throw first;
}
