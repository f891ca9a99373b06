/**
 * The benchmark's outputs: a Markdown table (stdout and BENCHMARKS.md) and the
 * JSON file of every figure.
 *
 * Ratios: every peer row shows sluice ÷ peer, where "sluice" is the mode that
 * plays the peer's part: FastFile for a mount (s3fs, rclone), File mode for a
 * download (aws s3 cp). Every sluice row shows its ratio to the best peer of the
 * same scenario, profile and reader count. For times (unit "s") lower is better,
 * so a ratio below 1 favours sluice there; elsewhere above 1 does.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { BenchResults, Figure } from './runner.js';
import { TARGET_STYLE } from './targets.js';

const MiB = 1024 * 1024;

export function fmtValue(v: number | null, unit: string): string {
  if (v === null) return '–';
  if (unit === 's') return `${v.toFixed(v < 10 ? 3 : 1)} s`;
  return `${v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)} ${unit}`;
}

function ratio(a: number | null, b: number | null): string {
  if (a === null || b === null || b === 0) return '–';
  return `${(a / b).toFixed(2)}×`;
}

/** Figures of the same scenario, profile and reader count as `f`. */
function group(all: Figure[], f: Figure): Figure[] {
  return all.filter((g) => g.scenario === f.scenario && g.profile === f.profile && g.readers === f.readers);
}

/** The best peer figure of a group, or undefined. */
export function bestPeer(groupFigs: Figure[]): Figure | undefined {
  const peers = groupFigs.filter((g) => g.role === 'peer' && g.value !== null);
  if (peers.length === 0) return undefined;
  return peers.reduce((a, b) => ((a.higherIsBetter ? b.value! > a.value! : b.value! < a.value!) ? b : a));
}

/** sluice's figure that plays a peer's part. */
export function sluiceFor(groupFigs: Figure[], peer: Figure): Figure | undefined {
  const want = TARGET_STYLE[peer.target] === 'download' ? 'File' : 'FastFile';
  return groupFigs.find((g) => g.target === want && g.value !== null);
}

export function markdownTable(res: BenchResults): string {
  const lines: string[] = [];
  lines.push('**Link limit** (raw parallel ranged GETs through the proxy, no filesystem; median of runs):', '');
  lines.push('| Profile | Settings | Limit | Connections × part | Bytes |');
  lines.push('|---|---|---:|---|---|');
  for (const l of res.limits) {
    const p = res.profiles.find((x) => x.name === l.profile)!;
    lines.push(`| ${l.profile} | ${p.description.replace(/^[^:]*: /, '')} | ${l.mbps.toFixed(1)} MB/s | ${l.connections} × ${l.partSize / MiB} MiB | ${l.runs.every((r) => r.verified) ? 'verified' : 'WRONG'} |`);
  }
  lines.push('');
  lines.push('| Scenario | Profile | Readers | Target | Figure (median) | × limit | sluice ÷ peer | Peak RSS | CPU s/GB | Bytes |');
  lines.push('|---|---|---:|---|---:|---:|---|---:|---:|---|');
  for (const f of res.figures) {
    const g = group(res.figures, f);
    let vs = '';
    if (f.role === 'peer') {
      const s = sluiceFor(g, f);
      vs = s ? `${s.target} ÷ ${f.target} = ${ratio(s.value, f.value)}` : '–';
    } else {
      const b = bestPeer(g);
      vs = b ? `÷ best peer (${b.target}) = ${ratio(f.value, b.value)}` : '–';
    }
    const fig = f.unavailable ? `not available: ${f.unavailable}` : f.value === null ? `failed: ${f.runs.find((r) => r.error)?.error ?? 'no result'}` : fmtValue(f.value, f.unit);
    const ok = f.unavailable ? '–' : f.verified ? `verified${f.runs.some((r) => r.truncated) ? ' (partial: time limit)' : ''}` : f.value === null ? '–' : '**WRONG**';
    lines.push(`| ${f.scenario}: ${f.title} | ${f.profile} | ${f.readers} | ${f.target} | ${fig.replace(/\|/g, '/')} | ${f.fractionOfLimit === null ? '–' : `${(f.fractionOfLimit * 100).toFixed(0)}%`} | ${vs} | ${f.peakRssBytes === null ? '–' : `${(f.peakRssBytes / MiB).toFixed(0)} MiB`} | ${f.cpuSecondsPerGB === null ? '–' : f.cpuSecondsPerGB.toFixed(1)} | ${ok} |`);
  }
  lines.push('', 'Times (s) are better lower, so there a sluice ÷ peer below 1 favours sluice; for rates, above 1 does. "× limit" is the figure\'s MB/s over the link limit of its profile.');
  return lines.join('\n');
}

/** Writes `<outDir>/<timestamp>.json` and returns its path. */
export async function writeJson(res: BenchResults, outDir: string): Promise<string> {
  await mkdir(outDir, { recursive: true });
  const file = path.join(outDir, `${res.startedAt.replace(/[:.]/g, '-')}.json`);
  await writeFile(file, JSON.stringify(res, null, 2) + '\n');
  return file;
}
