/**
 * Running the built CLI (`node dist/cli.js ...`) from tests: to completion, or as a
 * long-running `sluice mount` that is ready once it printed its `ready` line.
 * Every wait is bounded.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));

export interface CliResult { code: number | null; stdout: string; stderr: string }

export function runCli(args: string[], env: NodeJS.ProcessEnv = process.env, timeoutMs = 120_000): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : null) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

export interface RunningCli { child: ChildProcess; stdout: () => string; stderr: () => string; exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }> }

/**
 * Starts the CLI and resolves once stdout has a line matching `ready` (rejects if it exits first).
 * `fds` are passed on as the child's descriptors 3, 4, ...
 */
export function startCli(args: string[], env: NodeJS.ProcessEnv, ready = /^ready .+$/m, timeoutMs = 90_000, fds: number[] = []): Promise<RunningCli> {
  const child = spawn(process.execPath, [CLI, ...args], { env, stdio: ['ignore', 'pipe', 'pipe', ...fds] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (b: Buffer) => { out += b.toString(); });
  child.stderr!.on('data', (b: Buffer) => { if (err.length < 100_000) err += b.toString(); });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const running: RunningCli = { child, stdout: () => out, stderr: () => err, exited };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`not ready within ${timeoutMs} ms: ${err}`)); }, timeoutMs);
    const onData = () => {
      if (ready.test(out)) { clearTimeout(timer); child.stdout!.off('data', onData); resolve(running); }
    };
    child.stdout!.on('data', onData);
    void exited.then(({ code, signal }) => { clearTimeout(timer); reject(new Error(`exited (${code ?? signal}) before ready: ${err}`)); });
  });
}

/** Waits for the child's exit, SIGKILLing it after `ms`. */
export async function waitExit(r: RunningCli, ms = 30_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  const timer = setTimeout(() => r.child.kill('SIGKILL'), ms);
  try { return await r.exited; } finally { clearTimeout(timer); }
}
