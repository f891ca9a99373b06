/**
 * Reads files as a training script would, in a child process (so a read that blocks on the
 * mount never blocks the test's own event loop), and returns each file's sha256. Bounded
 * in time: the child is killed after `timeoutMs`.
 */
import { execFile } from 'node:child_process';

const READER = `
const { createHash } = require('node:crypto');
const fs = require('node:fs/promises');
(async () => {
  const out = {};
  for (const f of JSON.parse(process.argv[1])) out[f] = createHash('sha256').update(await fs.readFile(f)).digest('hex');
  process.stdout.write(JSON.stringify(out));
})().catch((e) => { process.stderr.write(String(e && e.message || e)); process.exit(1); });
`;

/** sha256 (hex) of each of `files`, read whole in one child process, in order. */
export function childRead(files: string[], timeoutMs = 120_000): Promise<Record<string, string>> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['-e', READER, JSON.stringify(files)], { maxBuffer: 16 * 1024 * 1024, timeout: timeoutMs }, (err, stdout, stderr) => {
      if (err) reject(new Error(`reader failed: ${stderr || err.message}`));
      else resolve(JSON.parse(stdout) as Record<string, string>);
    });
  });
}
