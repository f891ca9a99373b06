/**
 * Entry point of the bench's stored S3 server process (`node dist/bench/stored-s3-child.js`,
 * ./stored-s3.ts). Protocol: one JSON line on stdin, `{dir, bucket, objects}`; prints one JSON
 * line `{port}` once listening; exits on SIGTERM or when stdin closes.
 */
import { loadFromS3rverDir, type StoredObject } from './stored-s3.js';
import { startSyntheticS3, type SyntheticS3 } from './synthetic-s3.js';

let input = '';
let server: SyntheticS3 | undefined;
let closing = false;
const shutdown = () => {
  if (closing) return;
  closing = true;
  void (server?.close() ?? Promise.resolve()).finally(() => process.exit(0));
  setTimeout(() => process.exit(0), 2000).unref();
};
process.on('SIGTERM', shutdown);
process.stdin.on('end', shutdown);
process.stdin.on('error', shutdown);
process.stdin.on('data', (b: Buffer) => {
  if (server || closing) return;
  input += b.toString();
  const nl = input.indexOf('\n');
  if (nl < 0) return;
  const { dir, bucket, objects } = JSON.parse(input.slice(0, nl)) as { dir: string; bucket: string; objects: StoredObject[] };
  let table;
  try {
    table = loadFromS3rverDir(dir, bucket, objects);
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
  void startSyntheticS3({ bucket, root: '', total: 0, objects: table }).then((s) => {
    server = s;
    process.stdout.write(JSON.stringify({ port: Number(new URL(s.endpoint).port) }) + '\n');
  });
});
process.stdin.resume();
