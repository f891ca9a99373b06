/**
 * The value of a core call that answers synchronously when it can (FsCore's getattr,
 * readdir and statfs of a listed path return the value, not a promise). A test that relies
 * on the synchronous answer fails here, naming `what`, when it gets a promise instead.
 */
export function now<T>(v: T | Promise<T>, what = 'the call'): T {
  if (v instanceof Promise) throw new Error(`${what} returned a promise: a synchronous answer was expected`);
  return v;
}
