/**
 * Entry point of the latency proxy's own process (`node dist/bench/proxy-child.js`).
 *
 * The proxy copies every byte the benchmark reads; run in the benchmark's process
 * it would share one event loop with the limit client and the verifiers. In its
 * own process it gets a core of its own when one is free, like a network would.
 * Protocol: options as one JSON argument; prints one JSON line `{port}` when
 * listening; a line "stats" on stdin prints `{stats}` (counts so far); on SIGTERM or
 * when stdin closes, prints its stats and exits.
 */
import { startLatencyProxy, type LatencyProxyOptions } from './latency-proxy.js';

const opts = JSON.parse(process.argv[2] ?? '{}') as LatencyProxyOptions;
const proxy = await startLatencyProxy(opts);
process.stdout.write(JSON.stringify({ port: proxy.port }) + '\n');
let closing = false;
const shutdown = () => {
  if (closing) return;
  closing = true;
  process.stdout.write(JSON.stringify({ stats: proxy.stats }) + '\n');
  void proxy.close().finally(() => process.exit(0));
  setTimeout(() => process.exit(0), 2000).unref();
};
process.on('SIGTERM', shutdown);
process.stdin.on('end', shutdown);
process.stdin.on('error', shutdown);
let input = '';
process.stdin.on('data', (b: Buffer) => {
  input += b.toString();
  for (let nl = input.indexOf('\n'); nl >= 0; nl = input.indexOf('\n')) {
    if (input.slice(0, nl).trim() === 'stats') process.stdout.write(JSON.stringify({ stats: proxy.stats }) + '\n');
    input = input.slice(nl + 1);
  }
});
process.stdin.resume();
