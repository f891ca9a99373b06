#!/usr/bin/env node
/**
 * The command line, and the only place that exits the process.
 *
 * Each subcommand lives in src/commands/<name>.ts and exports
 * `run(argv): Promise<number>` (the exit code) and `summary` (one line for --help).
 * Errors thrown by a command become exit codes through exitCodeFor(); user errors
 * (bad input, missing bucket, no /dev/fuse, ...) print as one line without a stack.
 */
import { readFileSync } from 'node:fs';
import { exitCodeFor, isUserError, SluiceError } from './errors.js';
import { enableCompileCache } from './compile-cache.js';

// Issue 15: start-up steps. Node has started and this module (with its imports) is loaded;
// `sluice mount` logs the marks at "ready" (src/commands/mount.ts).
performance.mark('sluice:cli');

interface Command {
  summary: string;
  run(argv: string[]): Promise<number>;
}

const COMMANDS: Record<string, { summary: string; load: () => Promise<Command> }> = {
  mount: { summary: 'Mount an S3 prefix read-only at a folder (SageMaker FastFile mode).', load: () => import('./commands/mount.js') },
  run: { summary: 'Give a training command the SageMaker input environment: File, FastFile and Pipe channels, then run it.', load: () => import('./commands/run.js') },
  bench: { summary: 'Benchmark the input modes and their peers against emulated S3 latency.', load: () => import('./commands/bench.js') },
  status: { summary: "Summarise a running sluice's /metrics for a person at a terminal.", load: () => import('./commands/status.js') },
  snapshot: { summary: 'Save the listing of an S3 prefix as a snapshot file, to mount or stream exactly that data later (or --diff two).', load: () => import('./commands/snapshot.js') },
  demo: { summary: 'Start a local S3 server with sample data, mount it, read it like a training loop, print the figures.', load: () => import('./commands/demo.js') },
};

// Before any command loads: every command is imported lazily below.
await enableCompileCache();

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

function usage(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((c) => c.length));
  const lines = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`);
  return [
    'sluice: feed training data from S3 to a GPU, with SageMaker input semantics anywhere.',
    '',
    'Usage: sluice <command> [options]',
    '',
    'Commands:',
    ...lines,
    '',
    'Options:',
    '  --help, -h     Show help (also: sluice <command> --help)',
    '  --version, -v  Print the version',
    '',
    'Credentials come from the standard AWS chain: environment, shared profile,',
    'container credentials, IMDS, and web identity (EKS IRSA).',
  ].join('\n');
}

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (cmd === undefined || cmd === '--help' || cmd === '-h' || cmd === 'help') {
    process.stdout.write(usage() + '\n');
    return cmd === undefined ? 2 : 0;
  }
  if (cmd === '--version' || cmd === '-v' || cmd === 'version') {
    process.stdout.write(version() + '\n');
    return 0;
  }
  const entry = COMMANDS[cmd];
  if (!entry) {
    const guess = (await import('./config/options.js')).closest(cmd, Object.keys(COMMANDS));
    process.stderr.write(`sluice: unknown command ${JSON.stringify(cmd)}.${guess ? ` Did you mean sluice ${guess}?` : ''} See sluice --help\n`);
    return 2;
  }
  const command = await entry.load();
  performance.mark('sluice:command');
  return command.run(rest);
}

main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (err: unknown) => {
    if (isUserError(err)) {
      process.stderr.write(`sluice: ${err.oneLine()}\n`);
    } else if (err instanceof SluiceError) {
      process.stderr.write(`sluice: ${err.oneLine()} [${err.code}]\n`);
      if (process.env.SLUICE_DEBUG) process.stderr.write(`${err.stack}\n`);
    } else {
      process.stderr.write(`sluice: internal error: ${err instanceof Error ? err.stack : String(err)}\n`);
    }
    process.exitCode = exitCodeFor(err);
  },
);
