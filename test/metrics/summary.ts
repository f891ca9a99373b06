import t from 'tap';
import { startSummary, summarizeDownload } from '../../src/metrics/summary.js';
import { channelObjects, readWait, readWaitSeconds, servedBytes } from '../../src/metrics/metrics.js';

t.test('one line per channel per tick, deltas between ticks, whole run at stop', async (t) => {
  const lines: string[] = [];
  const s = startSummary({ intervalMs: 3_600_000, sink: (line) => lines.push(line) });
  t.teardown(() => s.stop());
  servedBytes.inc({ channel: 'sum-a', mode: 'FastFile' }, 5_000_000);
  channelObjects.inc({ channel: 'sum-a', mode: 'FastFile' });
  readWait.observe({ channel: 'sum-a', mode: 'FastFile' }, 0);
  readWait.observe({ channel: 'sum-a', mode: 'FastFile' }, 0);
  readWait.observe({ channel: 'sum-a', mode: 'FastFile' }, 0.2);
  readWait.observe({ channel: 'sum-a', mode: 'FastFile' }, 0);
  readWaitSeconds.inc({ channel: 'sum-a', mode: 'FastFile' }, 0.2);
  const first = (await s.tick()).filter((l) => l.includes('sum-a'));
  t.equal(first.length, 1);
  t.match(first[0]!, /^channel sum-a \(FastFile\): [\d.]+ MB\/s, [\d.]+ files\/s, hit ratio 75\.0%, starving [\d.]+% over the last \d+ s \(total 4\.8 MiB, 1 files\)$/);
  servedBytes.inc({ channel: 'sum-a', mode: 'FastFile' }, 1_000_000);
  readWait.observe({ channel: 'sum-a', mode: 'FastFile' }, 0);
  const second = (await s.tick()).filter((l) => l.includes('sum-a'));
  t.match(second[0]!, /hit ratio 100\.0%, starving 0\.0%/, 'second window sees only its own reads');
  t.match(second[0]!, /total 5\.7 MiB, 1 files/);
  const last = (await s.stop()).filter((l) => l.includes('sum-a'));
  t.match(last[0]!, /hit ratio 80\.0%, .* over the whole run \(\d+ s\)/);
  t.same(await s.stop(), [], 'stop is idempotent');
  t.same(await s.tick(), [], 'no ticks after stop');
  t.ok(lines.length >= 3);
});

t.test('the default sink logs through pino; invalid intervals are refused', async (t) => {
  t.throws(() => startSummary({ intervalMs: 0 }), RangeError);
  const s = startSummary();
  const out = await s.stop();
  t.ok(Array.isArray(out));
});

t.test('File mode: the line reports the download itself, and the periodic lines leave File channels out', async (t) => {
  const periodic = startSummary({ intervalMs: 3_600_000, sink: () => undefined });
  const lines: string[] = [];
  const result = await summarizeDownload('sum-file', async () => {
    servedBytes.inc({ channel: 'sum-file', mode: 'File' }, 8_000_000);
    channelObjects.inc({ channel: 'sum-file', mode: 'File' }, 4);
    // 250 ms, for a span of at least 0.2 s: a Node timer may fire up to ~1 ms before its delay
    // by performance.now() (it counts from the event loop's cached, whole-millisecond clock).
    await new Promise((r) => setTimeout(r, 250));
    return 'downloaded';
  }, (line) => lines.push(line));
  t.equal(result, 'downloaded');
  t.equal(lines.length, 1);
  const mbs = Number(/: ([\d.]+) MB\/s/.exec(lines[0]!)?.[1]);
  t.ok(mbs > 0 && mbs <= 40, `8 MB in >= 0.2 s: ${mbs} MB/s, not 0.0`);
  t.match(lines[0]!, /^channel sum-file \(File\): [\d.]+ MB\/s, [\d.]+ files\/s, .* for the download \(\d+\.\d s\) \(total 7\.6 MiB, 4 files\)$/);
  const atStop = await periodic.stop();
  t.notOk(atStop.some((l) => l.includes('sum-file')), 'no 0.0 MB/s line for the File channel at exit');
});
