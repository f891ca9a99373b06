/**
 * `sluice mount --daemon`: mount, then return, leaving the mount served in the background
 * (as mount-s3, gcsfuse and s3fs do by default).
 *
 * The calling process starts the same command again as a detached child (its own session,
 * so the terminal's Ctrl-C and hang-up do not reach it) with DAEMON_CHILD_ENV set, stdin
 * closed, stdout a pipe and stderr appended to the log file. The child is an ordinary
 * foreground `sluice mount`; the parent waits for one of two things:
 *  - the child's "ready <mountpoint>" line: the parent prints it, says on stderr where the
 *    child is and how to stop it, and exits 0. The child writes nothing more on stdout.
 *  - the child's exit before that: the parent prints the child's own error line (the
 *    "sluice: ..." line cli.ts wrote to the log file) and exits with the child's status.
 * Logs go to --log-file when given, else to a new file in the temp folder, named on stderr.
 * A SIGINT/SIGTERM to the parent while it waits is passed on to the child, which then
 * unmounts (if it got that far) and exits.
 */
import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Set in the child's environment: it runs in the foreground and must not fork again. */
export const DAEMON_CHILD_ENV = 'SLUICE_DAEMON_CHILD';

/** dist/cli.js (or src/cli.ts under a TypeScript loader), next to this folder. */
const CLI = fileURLToPath(new URL(`../cli${path.extname(fileURLToPath(import.meta.url))}`, import.meta.url));

/** The last "sluice: ..." line of the log: the child's reason for stopping, as cli.ts printed it. */
function lastErrorLine(logFile: string): string | undefined {
  let text: string;
  try { text = readFileSync(logFile, 'utf8'); } catch { return undefined; }
  return text.split('\n').filter((l) => l.startsWith('sluice: ')).pop();
}

export async function mountInBackground(argv: string[], logFile: string | undefined): Promise<number> {
  const file = path.resolve(logFile ?? path.join(os.tmpdir(), `sluice-mount-${process.pid}-${Date.now()}.log`));
  const logFd = openSync(file, 'a');
  const child = spawn(process.execPath, [...process.execArgv, CLI, 'mount', ...argv], {
    detached: true,
    stdio: ['ignore', 'pipe', logFd],
    // The child logs to the file too (JSON unless --log-format says otherwise).
    env: { ...process.env, [DAEMON_CHILD_ENV]: '1', SLUICE_LOG_FILE: file },
  });
  closeSync(logFd);
  const forward = (signal: NodeJS.Signals) => { child.kill(signal); };
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  try {
    const outcome = await new Promise<{ ready: string } | { code: number }>((resolve) => {
      let out = '';
      child.stdout!.setEncoding('utf8');
      child.stdout!.on('data', (chunk: string) => {
        out += chunk;
        const line = /^ready .+$/m.exec(out)?.[0];
        if (line) resolve({ ready: line });
      });
      child.once('exit', (code, signal) => resolve({ code: code ?? (signal ? 128 + (os.constants.signals[signal] ?? 0) : 1) }));
      child.once('error', () => resolve({ code: 1 }));
    });
    if ('ready' in outcome) {
      process.stdout.write(`${outcome.ready}\n`);
      process.stderr.write(`sluice: serving in the background (pid ${child.pid}); logs in ${file}; stop with: kill ${child.pid}\n`);
      child.stdout!.destroy();
      child.unref();
      return 0;
    }
    process.stderr.write(`${lastErrorLine(file) ?? `sluice: the background mount exited with status ${outcome.code}; see ${file}`}\n`);
    return outcome.code === 0 ? 1 : outcome.code;
  } finally {
    process.off('SIGINT', forward);
    process.off('SIGTERM', forward);
  }
}
