// Issue 44: Mountpoint's fio read jobs as a bench scenario. Checks the job-file parsing, the
// run's overrides, fio's JSON output and the scenario's validation; no fio and no mount here.
import t from 'tap';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../../src/errors.js';
import { applyFioOverrides, fioOverrides, parseFioJob, parseFioOutput, parseFioSize } from '../../src/bench/fio-job.js';
import { spotOffsets } from '../../src/bench/fio-run.js';
import { fioTables, targetChecks } from '../../src/bench/report.js';
import { fig, results } from '../helpers/bench-results.js';
import { loadBenchConfig, parseBenchConfig } from '../../src/bench/scenarios.js';
import { generateBytes, generateChunks, sourceBytes } from '../../src/local/dataset.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const FIO = path.join(ROOT, 'bench/fio');
const job = (rel: string) => readFileSync(path.join(FIO, rel), 'utf8');
const GiB = 1024 ** 3;

t.test('fio sizes are base 2, as fio reads them', async (t) => {
  t.equal(parseFioSize('100G'), 100 * GiB);
  t.equal(parseFioSize('5m'), 5 * 1024 * 1024);
  t.equal(parseFioSize('1B'), 1);
  t.equal(parseFioSize('256k'), 262144);
  t.equal(parseFioSize('17m'), 17 * 1024 * 1024);
  t.throws(() => parseFioSize('lots'), ConfigError);
});

t.test("Mountpoint's job files parse: the job section over [global]", async (t) => {
  const seq = parseFioJob(job('read/seq_read_4t.fio'));
  t.equal(seq.section, 'sequential_read_four_threads');
  t.equal(seq.sizeBytes, 100 * GiB);
  t.equal(seq.options.numjobs, '4');
  t.equal(seq.options.bs, '256k');
  t.ok(seq.timeBased);
  t.notOk(seq.latency);
  const skip = parseFioJob(job('read/seq_read_skip_17m.fio'));
  t.equal(skip.options.rw, 'read:17m');
  t.equal(skip.options.bs, '256m');
  const ttfb = parseFioJob(job('read_latency/ttfb.fio'));
  t.equal(ttfb.sizeBytes, GiB);
  t.notOk(ttfb.timeBased);
  t.ok(ttfb.latency, 'a read_latency job reports latency');
  t.equal(ttfb.options.bs, '1B,1M', 'a comment line is skipped');
  t.ok(parseFioJob(job('read_latency/ttfb_small.fio')).latency);
  t.throws(() => parseFioJob('[global]\nbs=1m\n[w]\nrw=write\nsize=1m\n'), /not a read job/);
  t.throws(() => parseFioJob('[a]\nrw=read\nsize=1m\n[b]\nrw=read\nsize=1m\n'), /2 job sections/);
  t.throws(() => parseFioJob('[a]\nrw=read\n'), /no size/);
});

t.test('a run rewrites size and runtime only, and keeps the rest byte for byte', async (t) => {
  const text = job('read/seq_read.fio');
  const j = parseFioJob(text);
  const o = fioOverrides(j, 4 * GiB, 12);
  t.same(o, { size: String(4 * GiB), runtime: '12s' });
  const out = applyFioOverrides(text, o);
  t.equal(out, text.replace('size=100G', `size=${4 * GiB}`).replace('runtime=30s', 'runtime=12s'));
  t.same(parseFioJob(out).options, { ...j.options, size: String(4 * GiB), runtime: '12s' });
  // A job no larger than the object, not time-based: nothing changes.
  const ttfb = job('read_latency/ttfb.fio');
  t.same(fioOverrides(parseFioJob(ttfb), 4 * GiB, 12), {});
  t.equal(applyFioOverrides(ttfb, {}), ttfb);
  t.same(fioOverrides(parseFioJob(ttfb), 512 * 1024 * 1024, 12), { size: String(512 * 1024 * 1024) });
  // A key set nowhere is added at the end of the job.
  t.equal(applyFioOverrides('[a]\nrw=read\n', { runtime: '5s' }), '[a]\nrw=read\nruntime=5s\n');
});

/** The shape of fio 3.33's --output-format=json, trimmed to what the parser reads and a little more. */
function fioJson(jobs: { bw: number; bytes: number; ios: number; clatNs: number; runtimeMs: number; error?: number }[]): string {
  return JSON.stringify({
    'fio version': 'fio-3.33',
    jobs: jobs.map((j, i) => ({
      jobname: `job${i}`, error: j.error ?? 0,
      read: { io_bytes: j.bytes, io_kbytes: j.bytes / 1024, bw_bytes: j.bw, bw: Math.floor(j.bw / 1024), iops: j.ios / (j.runtimeMs / 1000), runtime: j.runtimeMs, total_ios: j.ios, clat_ns: { min: 1, max: 2, mean: j.clatNs } },
      write: { io_bytes: 0, bw_bytes: 0, total_ios: 0, clat_ns: { mean: 0 } },
    })),
  });
}

t.test("fio's JSON: bandwidth summed over threads, clat weighted by I/Os", async (t) => {
  const one = parseFioOutput(fioJson([{ bw: 100 * 1024 * 1024, bytes: 1200 * 1024 * 1024, ios: 4800, clatNs: 2.5e6, runtimeMs: 12000 }]));
  t.equal(one.readBytesPerSec, 100 * 1024 * 1024);
  t.equal(one.ioBytes, 1200 * 1024 * 1024);
  t.equal(one.clatMeanMs, 2.5);
  t.equal(one.seconds, 12);
  const two = parseFioOutput('note: a notice before the JSON\n' + fioJson([
    { bw: 10, bytes: 100, ios: 1, clatNs: 4e6, runtimeMs: 1000 },
    { bw: 30, bytes: 300, ios: 3, clatNs: 8e6, runtimeMs: 1500 },
  ]));
  t.equal(two.readBytesPerSec, 40);
  t.equal(two.ioBytes, 400);
  t.equal(two.clatMeanMs, 7, '(4 × 1 + 8 × 3) / 4');
  t.equal(two.seconds, 1.5);
  // Older fio without bw_bytes: bw is KiB/s.
  const old = JSON.parse(fioJson([{ bw: 2048, bytes: 1, ios: 1, clatNs: 1, runtimeMs: 1 }])) as { jobs: { read: Record<string, unknown> }[] };
  delete old.jobs[0]!.read.bw_bytes;
  t.equal(parseFioOutput(JSON.stringify(old)).readBytesPerSec, 2048);
  t.throws(() => parseFioOutput('fio: refusing extend of file due to read-only'), /not JSON/);
  t.throws(() => parseFioOutput(fioJson([{ bw: 1, bytes: 1, ios: 1, clatNs: 1, runtimeMs: 1, error: 5 }])), /error 5/);
  t.throws(() => parseFioOutput(fioJson([{ bw: 0, bytes: 0, ios: 0, clatNs: 0, runtimeMs: 0 }])), /read nothing/);
});

t.test('bench/scenarios/fio.yaml: two file sizes, every job on its object', async (t) => {
  const c = loadBenchConfig(path.join(ROOT, 'bench/scenarios/fio.yaml'));
  t.same(c.scenarios.map((s) => s.name), ['fio-4gib', 'fio-1gib']);
  for (const s of c.scenarios) {
    t.equal(s.kind, 'fio');
    t.same([...s.modes, ...s.peers], ['FastFile', 's3fs', 'rclone']);
    t.equal(s.fio!.runtimeSeconds, 12);
    const by = Object.fromEntries(s.fio!.jobs.map((j) => [j.name, j.dataset]));
    t.same(by, {
      seq_read: s.dataset, seq_read_4t: s.dataset, seq_read_small: 'fio-5mib', seq_read_skip_17m: s.dataset,
      rand_read: s.dataset, rand_read_4t: s.dataset, rand_read_4t_small: 'fio-5mib', ttfb: s.dataset, ttfb_small: 'fio-1b',
    });
  }
  t.equal(c.datasets['fio-4gib']!.largeFiles!.size, 4 * GiB);
  t.ok(c.sluice.cacheSize > GiB && c.sluice.cacheSize < 4 * GiB, 'the 1 GiB file fits the cache, the 4 GiB one does not');
  t.same(c.peerArgs.rclone.filter((a) => a.startsWith('--vfs-cache-mode')), ['--vfs-cache-mode=off']);
  t.equal(loadBenchConfig(path.join(ROOT, 'bench/scenarios/fio.yaml'), { quick: true }).scenarios[0]!.fio!.runtimeSeconds, 6);
});

t.test('a fio scenario with a bad field is one line naming it', async (t) => {
  const file = path.join(ROOT, 'bench/scenarios/x.yaml');
  const base = (fio: string, ds = '{ largeFiles: { count: 1, size: 64MiB } }') => `profiles: [{ name: p, ttfbMs: 0 }]\ndatasets: { big: ${ds}, five: { largeFiles: { count: 1, size: 5MiB } } }\nlimit: { dataset: big }\nscenarios:\n  - { name: f, kind: fio, dataset: big, fio: ${fio} }\n`;
  const ok = parseBenchConfig(base('{ jobs: [read/seq_read_small.fio, read/seq_read.fio], smallFiles: [five] }'), file);
  t.same(ok.scenarios[0]!.fio!.jobs.map((j) => j.dataset), ['five', 'big']);
  t.same(parseBenchConfig(base('{ jobs: [read/seq_read_small.fio] }'), file).scenarios[0]!.fio!.jobs[0]!.dataset, 'big', 'without a 5 MiB object: the first 5 MiB of the large one');
  const bad: [string, RegExp, string?][] = [
    ['{ runtime: 12 }', /fio\.jobs must be a non-empty list/],
    ['{ jobs: [read/nope.fio] }', /cannot read .*nope\.fio \(ENOENT\)/],
    ['{ jobs: [read/seq_read.fio], smallFiles: [nope] }', /smallFiles: unknown dataset "nope"/],
    ['{ jobs: [read/seq_read.fio], runtime: 0 }', /fio\.runtime must be a number/],
    ['{ jobs: [read/seq_read.fio, read/seq_read.fio] }', /two job files of one name/],
    ['{ jobs: [read/seq_read.fio] }', /must hold exactly one object/, '{ largeFiles: { count: 2, size: 64MiB } }'],
    ['{ jobs: [seq.fio], dir: /dev/null }', /cannot read/],
  ];
  for (const [fio, re, ds] of bad) {
    const err = (() => { try { parseBenchConfig(base(fio, ds), file); return undefined; } catch (e) { return e; } })();
    t.ok(err instanceof ConfigError, `${fio}: a ConfigError`);
    t.match((err as Error).message, re, fio);
    t.notMatch((err as Error).message, /\n/, 'one line');
  }
});

t.test('streamed seeding and prefix regeneration give the same bytes', async (t) => {
  const key = 'fio-4gib/large/large-0.bin';
  const whole = generateBytes(key, 10 * 1024 * 1024 + 3, 1);
  t.ok(Buffer.concat([...generateChunks(key, whole.length, 1, 1024 * 1024)]).equals(whole), 'chunks of 1 MiB');
  t.ok(Buffer.concat([...generateChunks(key, 4099, 1, 4)]).equals(whole.subarray(0, 4099)), 'chunks of 4 bytes, a shorter object: its prefix');
  t.ok(sourceBytes({ key, size: 4 * GiB, seed: 1 }, 1000, 5000).equals(whole.subarray(1000, 5000)), 'a range of a 4 GiB object, from its prefix');
  const offs = spotOffsets(4 * GiB, 0);
  t.equal(offs[0], 0);
  t.ok(offs.every((o) => o % 4096 === 0 && o + 256 * 1024 <= 64 * 1024 * 1024), 'spot blocks within the first 64 MiB');
  t.same(spotOffsets(5 * 1024 * 1024, 0), [0], 'a small object is checked whole');
});

t.test('the report: a table per file size and the issue\'s targets per job', async (t) => {
  const f = (scenario: string, target: 'FastFile' | 's3fs' | 'rclone', value: number | null, unit: 'MiB/s' | 'ms') =>
    fig({ scenario, title: 'x', kind: 'fio', target, value, unit, higherIsBetter: unit === 'MiB/s', cpuSecondsPerGB: unit === 'ms' ? null : 1 });
  const res = results([
    f('fio-4gib.seq_read', 'FastFile', 120, 'MiB/s'), f('fio-4gib.seq_read', 's3fs', 100, 'MiB/s'), f('fio-4gib.seq_read', 'rclone', 60, 'MiB/s'),
    f('fio-4gib.ttfb', 'FastFile', 30, 'ms'), f('fio-4gib.ttfb', 's3fs', 40, 'ms'), f('fio-4gib.ttfb', 'rclone', 20, 'ms'),
    f('fio-1gib.seq_read', 'FastFile', 50, 'MiB/s'), f('fio-1gib.seq_read', 's3fs', 100, 'MiB/s'), f('fio-1gib.seq_read', 'rclone', null, 'MiB/s'),
  ]);
  const md = fioTables(res);
  t.match(md, /\*\*fio-4gib\*\*/);
  t.match(md, /\*\*fio-1gib\*\*/);
  t.match(md, /\| seq_read \| 120 MiB\/s \| 100 MiB\/s \| 60\.0 MiB\/s \| 1\.20× \(s3fs\) \| 1\.00 \/ 1\.00 \/ 1\.00 \|/);
  t.match(md, /\| ttfb \(mean clat, lower is better\) \| 30\.0 ms \| 40\.0 ms \| 20\.0 ms \| 1\.50× \(rclone\) \| – \/ – \/ – \|/);
  t.match(md, /\| seq_read \| 50\.0 MiB\/s \| 100 MiB\/s \| failed \| 0\.50× \(s3fs\) \|/);
  const checks = targetChecks(res).filter((c) => c.target.startsWith('fio'));
  t.same(checks.map((c) => [c.where, c.met]), [['fio-4gib.seq_read', true], ['fio-4gib.ttfb', false], ['fio-1gib.seq_read', false]]);
  t.equal(fioTables(results([fig({ target: 'FastFile', value: 1 })])), '', 'no fio figures, no table');
});
