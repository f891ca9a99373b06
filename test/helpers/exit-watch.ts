/**
 * A test file whose tests all ended but whose process does not exit (something still holds
 * its event loop: a handle, a request, a child) is otherwise killed by tap's timeout minutes
 * later with nothing said but SIGALRM. Importing this module arms a watch at the end of the
 * root test: if the process is still alive EXIT_WAIT_MS later, it prints to stderr what keeps
 * it alive (the active resources, libuv's referenced handles from the diagnostic report, and
 * where each of its threads waits in the kernel) and exits with status 1, so the file fails
 * at once and says why. The timer is unref'd: a process that exits on its own never sees it.
 *
 * A file that never gets to the end of its root test (a subtest or a teardown waiting for
 * something that does not come) would be killed by tap's timeout too, and tap prints none of
 * a killed file's buffered output. So a second watch, armed at import, prints the same
 * diagnostics and the subtests still running STUCK_MS after the file started, and exits 1.
 */
import t from 'tap';
import { ourThreads } from './stuck.js';

/** Long enough for every teardown (a child's SIGTERM grace is 5 s, s3-server.ts) to have run. */
const EXIT_WAIT_MS = 30_000;
/**
 * tap's per-file timeout is 300 s (package.json); the files that import this take 3-40 s in
 * CI. 240 s leaves a minute to print before tap would kill the process.
 */
const STUCK_MS = Number(process.env.SLUICE_TEST_STUCK_MS) || 240_000;

interface ReportHandle { type?: string; is_active?: boolean; is_referenced?: boolean; address?: string; remoteEndpoint?: unknown; localEndpoint?: unknown; filename?: string }

function whatHoldsTheProcess(why: string): string {
  const lines = [`test process ${process.pid} ${why}; what holds it:`];
  lines.push(`  active resources: ${process.getActiveResourcesInfo().join(', ')}`);
  const report = process.report.getReport() as unknown as { libuv?: ReportHandle[] };
  for (const h of report.libuv ?? []) {
    if (!h.is_active || !h.is_referenced) continue;
    lines.push(`  libuv ${h.type}: ${JSON.stringify({ local: h.localEndpoint, remote: h.remoteEndpoint, file: h.filename })}`);
  }
  lines.push(...ourThreads().map((l) => `  ${l}`));
  return lines.join('\n');
}

t.teardown(() => {
  setTimeout(() => {
    process.stderr.write(`${whatHoldsTheProcess(`still alive ${EXIT_WAIT_MS / 1000} s after its last test ended`)}\n`);
    process.exit(1);
  }, EXIT_WAIT_MS).unref();
});

/** Subtests begun and not yet ended, by full name. */
const running = new Set<string>();
t.beforeEach((c) => { running.add(c.fullname); });
t.afterEach((c) => { running.delete(c.fullname); });
setTimeout(() => {
  const names = [...running].map((n) => `  running: ${n}`).join('\n');
  process.stderr.write(`${whatHoldsTheProcess(`not done ${STUCK_MS / 1000} s after it started`)}\n${names}\n`);
  process.exit(1);
}, STUCK_MS).unref();
