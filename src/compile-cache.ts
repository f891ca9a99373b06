/**
 * Node's on-disk compile cache (Node >= 22.1, issue 15) saves most of the parse/compile time
 * of the modules a process loads (the AWS SDK above all) on every start after the first. It
 * must be on before those modules load, so each entry point (src/cli.ts, src/bench/host.ts)
 * calls this first and imports its commands lazily after it. Node 20 has no such API; there
 * this is a no-op. NODE_DISABLE_COMPILE_CACHE=1 turns it off.
 */
export async function enableCompileCache(): Promise<void> {
  try {
    // Looked up at run time: a named import Node 20 lacks would fail when the module links.
    const mod = await import('node:module');
    (mod as unknown as { enableCompileCache?: () => unknown }).enableCompileCache?.();
  } catch {
    // a cache that cannot be enabled (read-only temp folder, ...) only costs start-up time
  }
}
