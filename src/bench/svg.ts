/**
 * One hand-written SVG bar chart per scenario (no chart library).
 *
 * Layout: horizontal bars, one per target, grouped by profile and reader count;
 * sluice's modes in blue, peers in grey, the link limit (for MB/s scenarios) as a
 * green bar on top of each group, so "fraction of the limit" is visible at a glance.
 * Bars share one scale per chart; each is labelled with its value and, for peers,
 * sluice ÷ peer, and with CPU s/GB (target · reader · s3rver) next to the rate, so a
 * figure's cost is read with it. Unavailable or failed targets get a text row instead of a bar.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { BenchResults, Figure } from './runner.js';
import { fmtValue, sluiceFor } from './report.js';

/** Geometry, in px: a label column wide enough for "FastFile", bars of up to BAR_W, ~570 px left for the value labels (rate, share of the limit, CPU s/GB). */
const WIDTH = 1200;
const LABEL_W = 150;
const BAR_W = 480;
const ROW_H = 22;
const GROUP_GAP = 14;
const TOP = 56;

const COLOURS = { sluice: '#1f6fb4', peer: '#8c8c8c', limit: '#2ca02c' } as const;

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** "target / reader / s3rver" CPU s/GB, "–" where not measured. */
function cpuLabel(f: Figure): string {
  return [f.cpuSecondsPerGB, f.readerCpuSecondsPerGB, f.serverCpuSecondsPerGB].map((v) => (v === null || v === undefined ? '–' : v.toFixed(2))).join(' / ');
}

export function scenarioSvg(res: BenchResults, scenario: string): string {
  const figs = res.figures.filter((f) => f.scenario === scenario);
  if (figs.length === 0) return '';
  const f0 = figs[0]!;
  const showLimit = f0.unit === 'MB/s';
  const groups = new Map<string, Figure[]>();
  for (const f of figs) {
    const k = `${f.profile}|${f.readers}`;
    groups.set(k, [...(groups.get(k) ?? []), f]);
  }
  const values = figs.map((f) => f.value ?? 0);
  if (showLimit) values.push(...res.limits.filter((l) => figs.some((f) => f.profile === l.profile)).map((l) => l.mbps));
  const max = Math.max(1e-9, ...values);
  const scale = (v: number) => Math.max(1, (v / max) * BAR_W);
  const body: string[] = [];
  let y = TOP;
  for (const [k, gf] of groups) {
    const [profile, readers] = k.split('|');
    body.push(`<text x="10" y="${y + 12}" class="g">${esc(profile!)} · ${readers} reader${readers === '1' ? '' : 's'}</text>`);
    y += ROW_H;
    const limit = res.limits.find((l) => l.profile === profile);
    if (showLimit && limit) {
      body.push(`<text x="${LABEL_W - 8}" y="${y + 14}" class="l">link limit</text>`);
      body.push(`<rect x="${LABEL_W}" y="${y + 3}" width="${scale(limit.mbps).toFixed(1)}" height="${ROW_H - 6}" fill="${COLOURS.limit}"/>`);
      body.push(`<text x="${(LABEL_W + scale(limit.mbps) + 6).toFixed(1)}" y="${y + 15}" class="v">${esc(fmtValue(limit.mbps, 'MB/s'))}</text>`);
      y += ROW_H;
    }
    for (const f of gf) {
      body.push(`<text x="${LABEL_W - 8}" y="${y + 14}" class="l">${esc(f.target)}</text>`);
      if (f.value === null) {
        body.push(`<text x="${LABEL_W}" y="${y + 15}" class="n">${esc(f.unavailable ? 'not available here' : 'failed')}</text>`);
      } else {
        const w = scale(f.value);
        let label = fmtValue(f.value, f.unit);
        if (f.fractionOfLimit !== null) label += ` (${(f.fractionOfLimit * 100).toFixed(0)}% of limit)`;
        if (f.cpuSecondsPerGB !== null) label += ` · CPU ${cpuLabel(f)} s/GB`;
        if (f.role === 'peer') {
          const s = sluiceFor(gf, f);
          if (s?.value) label += ` · ${s.target} ÷ ${f.target} = ${(s.value / f.value).toFixed(2)}×`;
        }
        if (!f.verified) label += ' · BYTES NOT VERIFIED';
        body.push(`<rect x="${LABEL_W}" y="${y + 3}" width="${w.toFixed(1)}" height="${ROW_H - 6}" fill="${COLOURS[f.role]}"/>`);
        body.push(`<text x="${(LABEL_W + w + 6).toFixed(1)}" y="${y + 15}" class="v">${esc(label)}</text>`);
      }
      y += ROW_H;
    }
    y += GROUP_GAP;
  }
  const height = y + 30;
  const dir = f0.higherIsBetter ? 'higher is better' : 'lower is better';
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="sans-serif">`,
    '<style>.t{font-size:16px;font-weight:bold}.s{font-size:12px;fill:#555}.g{font-size:13px;font-weight:bold}.l{font-size:12px;text-anchor:end}.v{font-size:11px}.n{font-size:11px;fill:#a00}</style>',
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="10" y="22" class="t">${esc(`${scenario}: ${f0.title}`)}</text>`,
    `<text x="10" y="40" class="s">${esc(`${f0.unit}, ${dir}; median of ${res.repetitions} run${res.repetitions === 1 ? '' : 's'}; blue = sluice, grey = peers${showLimit ? ', green = link limit' : ''}; CPU s/GB: target / reader / s3rver`)}</text>`,
    ...body,
    `<text x="10" y="${height - 10}" class="s">${esc(`sluice bench, ${res.startedAt}, ${res.machine.nproc} CPUs, node ${res.machine.node}`)}</text>`,
    '</svg>',
  ].join('\n') + '\n';
}

/** Writes one SVG per scenario into `dir`; returns their paths. */
export async function writeSvgs(res: BenchResults, dir: string): Promise<string[]> {
  await mkdir(dir, { recursive: true });
  const out: string[] = [];
  for (const name of [...new Set(res.figures.map((f) => f.scenario))]) {
    const file = path.join(dir, `${name}.svg`);
    await writeFile(file, scenarioSvg(res, name));
    out.push(file);
  }
  return out;
}
