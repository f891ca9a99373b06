// Smoke test of `sluice bench`: a tiny scenario file end to end through the built CLI
// (run `npm run build` first). Checks that the table, the JSON and the SVGs are produced
// and that every figure that ran had its bytes verified. Speed is never asserted.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const CLI = path.join(ROOT, 'dist', 'cli.js');

function sluice(args: string[], timeoutMs: number) {
  return spawnSync(process.execPath, [CLI, ...args], { cwd: ROOT, encoding: 'utf8', timeout: timeoutMs, env: { ...process.env, SLUICE_LOG_LEVEL: 'warn' } });
}

t.test('--help explains the command', async (t) => {
  const r = sluice(['bench', '--help'], 30_000);
  t.equal(r.status, 0);
  t.match(r.stdout, /Usage: sluice bench \[scenarios\.yaml\]/);
  t.match(r.stdout, /--quick/);
  t.match(r.stdout, /--out DIR/);
});

t.test('a missing scenario file is one line and exit 2', async (t) => {
  const r = sluice(['bench', '/nonexistent/x.yaml'], 30_000);
  t.equal(r.status, 2);
  t.equal(r.stderr.trim().split('\n').length, 1);
  t.match(r.stderr, /cannot read scenario file/);
});

t.test('a bad scenario file names the field', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sluice-bench-bad-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'bad.yaml');
  const text = readFileSync(path.join(ROOT, 'bench/scenarios/smoke.yaml'), 'utf8').replace('ttfbMs: 5', 'ttfbMs: -5');
  (await import('node:fs')).writeFileSync(file, text);
  const r = sluice(['bench', file], 30_000);
  t.equal(r.status, 2);
  t.match(r.stderr, /ttfbMs/);
});

t.test('smoke run: table, JSON and SVG, bytes verified', async (t) => {
  const out = mkdtempSync(path.join(os.tmpdir(), 'sluice-bench-smoke-'));
  t.teardown(() => rmSync(out, { recursive: true, force: true }));
  const r = sluice(['bench', 'bench/scenarios/smoke.yaml', '--out', out], 240_000);
  t.equal(r.status, 0, `exit 0 (stderr: ${r.stderr.slice(-2000)})`);
  t.match(r.stdout, /\| Scenario \| Profile \| Readers \| Target \|/);
  t.match(r.stdout, /Link limit/);
  const jsonPath = /JSON: (\S+)/.exec(r.stdout)?.[1];
  t.ok(jsonPath && existsSync(jsonPath), 'JSON written');
  const res = JSON.parse(readFileSync(jsonPath!, 'utf8')) as {
    limits: { mbps: number; runs: { verified: boolean }[] }[];
    figures: { scenario: string; target: string; value: number | null; verified: boolean; unavailable?: string; downloadValue?: number | null; warm?: boolean; runs: { bytes: number }[] }[];
  };
  t.ok(res.limits[0]!.runs.every((x) => x.verified), 'limit bytes verified');
  t.ok(res.limits[0]!.mbps > 0);
  const ran = res.figures.filter((f) => f.value !== null);
  t.ok(ran.length > 0, 'some figures ran');
  for (const f of ran) t.ok(f.verified, `${f.scenario}/${f.target}: bytes verified`);
  for (const f of res.figures.filter((x) => x.value === null)) t.ok(f.unavailable, `${f.scenario}/${f.target} is either measured or reported not available`);
  // This build has every mode: File and Pipe run in the bench's host process (dist/bench/host.js, bundled).
  for (const target of ['File', 'FastFile', 'Pipe']) t.ok(ran.some((f) => f.scenario === 'small' && f.target === target), `small/${target} measured`);
  const file = ran.find((f) => f.scenario === 'small' && f.target === 'File')!;
  t.ok(file.downloadValue! > file.value!, `File mode: the download alone (${file.downloadValue}) is faster than the download and the first read (${file.value})`);
  const svgDir = path.join(out, path.basename(jsonPath!, '.json'));
  const svgs = readdirSync(svgDir).filter((f) => f.endsWith('.svg'));
  t.same(svgs.sort(), ['random.svg', 'small.svg', 'ttfb.svg', 'warm.svg']);
  // Warm: a mount reads all but the first object (read once before), a Pipe host its second epoch of them all.
  const warm = (target: string) => ran.find((f) => f.scenario === 'warm' && f.target === target);
  const total = 24 * 40_000;
  t.ok(warm('FastFile')?.verified && warm('Pipe')?.verified, 'warm FastFile and Pipe measured, bytes verified');
  t.equal(warm('FastFile')!.warm, true, 'the figure says it is warm');
  t.same(warm('FastFile')!.runs.map((x) => x.bytes), [total - 40_000], 'a warm mount: every object but the first');
  t.same(warm('Pipe')!.runs.map((x) => x.bytes), [total], 'a warm Pipe host: one whole epoch, the second');
  for (const s of svgs) t.match(readFileSync(path.join(svgDir, s), 'utf8'), /^<svg [^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"[\s\S]*<\/svg>\n$/);
  t.notMatch(readFileSync('/proc/mounts', 'utf8'), new RegExp(os.tmpdir() + '/sluice-bench-'), 'no mount left behind');
});
