import t from 'tap';
import { parseExposition } from '../../src/metrics/exposition.js';
import { cacheFigures, channelRates, channelTotals, fmt, formatChannelLine, processFigures, s3Figures } from '../../src/metrics/figures.js';

const text = (served: number, files: number, wait: number, reads: number, noWait: number) => `
sluice_served_bytes_total{channel="train",mode="FastFile"} ${served}
sluice_channel_objects_total{channel="train",mode="FastFile"} ${files}
sluice_starved_seconds_total{channel="train",mode="FastFile"} ${wait}
sluice_read_wait_seconds_bucket{le="0",channel="train",mode="FastFile"} ${noWait}
sluice_read_wait_seconds_bucket{le="0.001",channel="train",mode="FastFile"} ${reads}
sluice_read_wait_seconds_bucket{le="+Inf",channel="train",mode="FastFile"} ${reads}
sluice_read_wait_seconds_count{channel="train",mode="FastFile"} ${reads}
sluice_served_bytes_total{channel="test",mode="Pipe"} ${10 * served}
sluice_pipe_empty_seconds_total{channel="test"} ${wait}
sluice_pipe_full_seconds_total{channel="test"} ${2 * wait}
sluice_channel_epoch{channel="test",mode="Pipe"} 2
sluice_time_to_first_byte_seconds{channel="train",mode="FastFile"} 0.25
`;

t.test('channel rates from two samples', async (t) => {
  const a = channelTotals(parseExposition(text(1e6, 10, 1, 100, 50)));
  const b = channelTotals(parseExposition(text(101e6, 30, 4, 200, 140)));
  t.same(b.map((c) => `${c.channel}/${c.mode}`), ['test/Pipe', 'train/FastFile']);
  const train = b.find((c) => c.channel === 'train')!;
  t.equal(train.firstByteSeconds, 0.25);
  t.equal(train.firstBatchSeconds, undefined);
  const r = channelRates(a, b, 10).find((c) => c.channel === 'train')!;
  t.equal(r.mbPerSec, 10);
  t.equal(r.filesPerSec, 2);
  t.equal(r.hitRatio, 0.9);
  t.equal(r.starvingPct, 30);
  const line = formatChannelLine(r, 'over the last 10 s');
  t.equal(line, 'channel train (FastFile): 10.0 MB/s, 2.0 files/s, hit ratio 90.0%, starving 30.0% over the last 10 s (total 96.3 MiB, 30 files)');
  t.equal(r.pipeFullPct, 0, 'no pipe figures for FastFile');
  const pipe = channelRates(a, b, 10).find((c) => c.channel === 'test')!;
  t.ok(Number.isNaN(pipe.hitRatio), 'no reads: n/a');
  t.equal(pipe.starvingPct, 30, 'Pipe: FIFO-empty time is starving time');
  t.equal(pipe.pipeEmptyPct, 30);
  t.ok(Math.abs(pipe.pipeFullPct - 60) < 1e-9, 'FIFO full %');
  t.equal(pipe.totals.epoch, 2);
  t.equal(pipe.mbPerSec, 100);
  t.match(formatChannelLine(pipe, ''), /hit ratio n\/a/);
  const restarted = channelRates(b, a, 10).find((c) => c.channel === 'train')!;
  t.equal(restarted.mbPerSec, 0.1, 'a counter that went down restarted from zero');
});

t.test('S3, cache and process figures', async (t) => {
  const e = parseExposition(`
sluice_s3_requests_total{operation="get",status="200"} 90
sluice_s3_requests_total{operation="get",status="206"} 5
sluice_s3_requests_total{operation="get",status="503"} 3
sluice_s3_requests_total{operation="head",status="404"} 1
sluice_s3_requests_total{operation="get",status="error"} 1
sluice_s3_retries_total{operation="get",reason="throttled"} 3
sluice_s3_retries_total{operation="get",reason="reset"} 1
sluice_s3_concurrency_limit 48
sluice_inflight_bytes 1048576
sluice_cache_hits_total 30
sluice_cache_misses_total 10
sluice_cache_bytes 512
sluice_cache_capacity_bytes 1024
sluice_prefetch_bytes_total{kind="sequential",outcome="used"} 100
sluice_prefetch_bytes_total{kind="cross_file",outcome="wasted"} 7
process_start_time_seconds 1000
process_resident_memory_bytes 2048
`);
  const s3 = s3Figures(e);
  t.equal(s3.requests, 100);
  t.equal(s3.errors, 5);
  t.equal(s3.throttled, 3);
  t.same(s3.retriesByReason, { throttled: 3, reset: 1 });
  t.equal(s3.retries, 4);
  t.equal(s3.concurrencyLimit, 48);
  t.equal(s3.inflightBytes, 1048576);
  t.ok(Number.isNaN(s3.firstByteP99));
  const c = cacheFigures(e);
  t.equal(c.hitRatio, 0.75);
  t.equal(c.prefetchUsed, 100);
  t.equal(c.prefetchWasted, 7);
  const p = processFigures(e, 1_060_000);
  t.equal(p.uptimeSeconds, 60);
  t.equal(p.rssBytes, 2048);
  t.equal(s3Figures(parseExposition('')).concurrencyLimit, undefined);
});

t.test('formatting', async (t) => {
  t.equal(fmt.bytes(512), '512 B');
  t.equal(fmt.bytes(3 * 1024 ** 3), '3.0 GiB');
  t.equal(fmt.seconds(0.042), '42 ms');
  t.equal(fmt.seconds(3.21), '3.2 s');
  t.equal(fmt.seconds(3725), '1h02m');
  t.equal(fmt.seconds(125), '2m05s');
  t.equal(fmt.seconds(undefined), '-');
  t.equal(fmt.pct(NaN), 'n/a');
});
