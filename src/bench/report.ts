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
import { describeMemoryProbe } from './memory-probe.js';
import { TARGET_STYLE } from './targets.js';
import type { TargetName } from './scenarios.js';

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

/** True when a run of the figure read bytes that differ from the source. */
export function hasWrongBytes(f: Figure): boolean {
  return f.runs.some((r) => r.mismatches > 0);
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

/** CPU s/GB with two decimals: the daemons compared are within 0.1-3 s/GB of each other. */
function cpuCell(v: number | null | undefined): string {
  return v === null || v === undefined ? '–' : v.toFixed(2);
}

/**
 * Cores' worth of CPU the whole machine used over the timed spans (./machine-busy.ts), out of
 * its `nproc`: a figure taken with every core busy was bound by this machine's CPU.
 */
export function busyCell(v: number | null | undefined, nproc: number): string {
  return v === null || v === undefined ? '–' : `${v.toFixed(2)} of ${nproc}`;
}

/** A mount's or Pipe host's start-up CPU, paid once (not in its CPU s/GB), when known. */
function startupCell(f: Figure): string {
  const s = f.startupCpuSeconds;
  return s === null || s === undefined || f.cpuSecondsPerGB === null ? '' : ` (+${s.toFixed(2)} s start-up)`;
}

/** The readers' CPU s/GB: over the timed span, then "+ hash" (sha256, inline or after the span) when known. */
function readerCpuCell(f: Figure): string {
  const h = f.readerHashCpuSecondsPerGB;
  return h === null || h === undefined ? cpuCell(f.readerCpuSecondsPerGB) : `${cpuCell(f.readerCpuSecondsPerGB)} + ${cpuCell(h)} hash`;
}

/** Said after "verified" when the readers hashed inside the timed span (src/bench/reader.ts). */
export function inlineHashNote(f: Figure): string {
  if (f.readerHash === 'inline') return ' (hashed inside the timed span)';
  const x = f.inlineHashedFraction;
  return x !== null && x !== undefined && x > 0 ? ` (${(x * 100).toFixed(0)}% hashed inside the timed span: over the keep budget)` : '';
}

export function markdownTable(res: BenchResults): string {
  const lines: string[] = [];
  const m = res.machine;
  // The runtime first: over HTTPS, sluice's CPU per GB depends on the OpenSSL its Node carries.
  lines.push(`Run on Node ${m.node}${m.openssl ? ` (OpenSSL ${m.openssl})` : ''}, Linux ${m.kernel}, ${m.nproc} × ${m.cpu}.`, '');
  lines.push('**Link limit** (raw parallel ranged GETs through the proxy, no filesystem; median of runs):', '');
  const nproc = m.nproc;
  lines.push('| Profile | Settings | Limit | Client: connections × part | Machine busy (cores) | Bytes |');
  lines.push('|---|---|---:|---|---:|---|');
  for (const l of res.limits) {
    const p = res.profiles.find((x) => x.name === l.profile)!;
    lines.push(`| ${l.profile} | ${p.description.replace(/^[^:]*: /, '')} | ${l.mbps.toFixed(1)} MB/s | ${l.client ?? 'undici'}: ${l.connections} × ${l.partSize / MiB} MiB | ${busyCell(l.machineBusyCores, nproc)} | ${l.runs.every((r) => r.verified) ? 'verified' : 'WRONG'} |`);
  }
  lines.push('');
  lines.push(`| Scenario | Profile | Readers | Target | Figure (median) | × limit | Machine busy (cores) | sluice ÷ peer | Peak RSS | CPU s/GB | reader CPU s/GB | ${res.server === 'stored' ? 'stored server' : 's3rver'} CPU s/GB | Bytes |`);
  lines.push('|---|---|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---|');
  for (const f of res.figures) {
    const g = group(res.figures, f);
    let vs = '';
    if (f.role === 'peer') {
      const s = sluiceFor(g, f);
      vs = s ? `${s.target} ÷ ${f.target} = ${ratio(s.value, f.value)}` : '–';
    } else {
      // A download is compared with downloads and a mount with mounts; Pipe, which no peer
      // does, with the best peer of any kind.
      const style = TARGET_STYLE[f.target as TargetName];
      const alike = g.filter((p) => style === 'pipe' || TARGET_STYLE[p.target as TargetName] === style);
      const b = bestPeer(alike);
      vs = b ? `÷ best peer (${b.target}) = ${ratio(f.value, b.value)}` : '–';
    }
    const fig = f.unavailable ? `not available: ${f.unavailable}` : f.value === null ? `failed: ${f.runs.find((r) => r.error)?.error ?? 'no result'}` : fmtValue(f.value, f.unit) + (f.downloadValue !== undefined && f.downloadValue !== null ? ` (download alone: ${fmtValue(f.downloadValue, f.unit)})` : '');
    const ok = f.unavailable || f.value === null ? '–' : hasWrongBytes(f) ? '**WRONG**' : f.verified ? `verified${f.runs.some((r) => r.truncated) ? ' (partial: time limit)' : ''}${inlineHashNote(f)}` : 'not verified: no object completed within the time limit';
    const gets = f.s3Gets !== undefined && f.s3Gets !== null ? ` (S3 GETs: ${f.s3Gets})` : '';
    lines.push(`| ${f.scenario}: ${f.title}${gets} | ${f.profile} | ${f.readers} | ${f.target} | ${fig.replace(/\|/g, '/')} | ${f.fractionOfLimit === null ? '–' : `${(f.fractionOfLimit * 100).toFixed(0)}%`} | ${busyCell(f.machineBusyCores, nproc)} | ${vs} | ${f.peakRssBytes === null ? '–' : `${(f.peakRssBytes / MiB).toFixed(0)} MiB`} | ${cpuCell(f.cpuSecondsPerGB)}${startupCell(f)} | ${readerCpuCell(f)} | ${cpuCell(f.serverCpuSecondsPerGB)} | ${ok} |`);
  }
  if (res.machine.memory) lines.push('', describeMemoryProbe(res.machine.memory));
  // Issue 44: time to first byte broken down, each target beside the others, so a regression shows where.
  const ttfb = res.figures.filter((f) => f.ttfbBreakdown !== undefined && f.value !== null);
  if (ttfb.length > 0) {
    const s = (v: number | null) => (v === null ? '–' : v.toFixed(3));
    lines.push('', '**Time to first byte, broken down** (medians, seconds from the mount command\'s start; requests: what the proxy saw by the first byte; CPU: the target\'s process by the first byte):', '');
    lines.push('| Scenario | Profile | Target | Mount answered | First byte | After the mount | Requests | CPU s |');
    lines.push('|---|---|---|---:|---:|---:|---:|---:|');
    for (const f of ttfb) {
      const b = f.ttfbBreakdown!;
      lines.push(`| ${f.scenario} | ${f.profile} | ${f.target} | ${s(b.mountedSeconds)} | ${s(f.value)} | ${b.mountedSeconds === null ? '–' : s(f.value! - b.mountedSeconds)} | ${b.requests ?? '–'} | ${b.cpuSeconds === null ? '–' : b.cpuSeconds.toFixed(2)} |`);
    }
  }
  lines.push('', 'Times (s) are better lower, so there a sluice ÷ peer below 1 favours sluice; for rates, above 1 does. "× limit" is the figure\'s MB/s over the link limit of its profile. CPU s/GB is utime + stime per GB read (decimal) of the target\'s process (sluice\'s daemon, or the peer), of the reader processes, and of the local S3 server, in the same runs (the JSON also has the target\'s user CPU alone and its minor page faults per GB: on a VM whose host takes back free memory, first writes to new memory land in system time). A mount\'s or a Pipe host\'s CPU counts from the moment it is ready; what it spent starting (process start, listing, mount or FIFOs), paid once and not per GB, is in parentheses. A download\'s start-up is inside its figure, which runs until the readers have read every downloaded file once; "download alone" is the same run up to the download\'s end (File mode\'s host done, aws exited), without that first read, which costs every download the same (the files are in the page cache); the File mode ÷ aws target compares downloads alone. "Machine busy" is the CPU the whole machine used during the timed spans (every process and the kernel, in cores, median of runs), beside the link limit\'s own: a figure with every core busy was bound by this machine\'s CPU, not by the link, and its "× limit" says little about the link. The readers\' figure is their reading, then "+ hash" their sha256 work: by default they keep the bytes and hash them after the span stops (as the link limit does), so the span measures the data source alone; "hashed inside the timed span" marks figures where they did not.');
  return lines.join('\n');
}

/**
 * kind fio (issue 44): a table per fio scenario (one per file size), a row per job: each
 * target's figure (MiB/s; the latency jobs' mean completion latency in ms, lower is better),
 * sluice ÷ the best peer, and each target's CPU s/GB and peak RSS.
 */
export function fioTables(res: BenchResults): string {
  const out: string[] = [];
  const profile = res.profiles[0]?.name;
  const figs = res.figures.filter((f) => f.kind === 'fio' && f.profile === profile);
  const scenarios = [...new Set(figs.map((f) => f.scenario.slice(0, f.scenario.indexOf('.'))))];
  const cell = (f: Figure | undefined) => (!f ? '–' : f.unavailable ? 'n/a' : f.value === null ? 'failed' : `${fmtValue(f.value, f.unit)}${hasWrongBytes(f) ? ' **WRONG**' : ''}`);
  for (const sc of scenarios) {
    const rows = figs.filter((f) => f.scenario.startsWith(`${sc}.`));
    const jobs = [...new Set(rows.map((f) => f.scenario))];
    out.push(`**${sc}** (${profile}; ${rows[0]!.title.split(':')[0]}):`, '');
    out.push('| Job | sluice (FastFile) | s3fs | rclone | sluice ÷ best peer | CPU s/GB sluice / s3fs / rclone | Peak RSS sluice / s3fs / rclone |');
    out.push('|---|---:|---:|---:|---:|---|---|');
    for (const j of jobs) {
      const g = rows.filter((f) => f.scenario === j);
      const by = (t: string) => g.find((f) => f.target === t);
      const ff = by('FastFile');
      const best = bestPeer(g);
      const ratioCell = ff?.value !== null && ff?.value !== undefined && best ? `${ratio(ff.value, best.value)} (${best.target})` : '–';
      const rss = (f: Figure | undefined) => (f?.peakRssBytes === null || f?.peakRssBytes === undefined ? '–' : `${(f.peakRssBytes / MiB).toFixed(0)} MiB`);
      out.push(`| ${j.slice(sc.length + 1)}${ff?.unit === 'ms' ? ' (mean clat, lower is better)' : ''} | ${cell(ff)} | ${cell(by('s3fs'))} | ${cell(by('rclone'))} | ${ratioCell} | ${['FastFile', 's3fs', 'rclone'].map((t) => cpuCell(by(t)?.cpuSecondsPerGB)).join(' / ')} | ${['FastFile', 's3fs', 'rclone'].map((t) => rss(by(t))).join(' / ')} |`);
    }
    out.push('');
  }
  return out.join('\n');
}

/** Writes `<outDir>/<timestamp>.json` and returns its path. */
export async function writeJson(res: BenchResults, outDir: string): Promise<string> {
  await mkdir(outDir, { recursive: true });
  const file = path.join(outDir, `${res.startedAt.replace(/[:.]/g, '-')}.json`);
  await writeFile(file, JSON.stringify(res, null, 2) + '\n');
  return file;
}

interface Check { target: string; where: string; measured: string; required: string; met: boolean | null }

/**
 * The issue's targets, checked against the figures: one row per target and
 * scenario. "met" is null when a figure it needs is missing (not available,
 * failed). Profiles other than the first (the S3-like one) are not targets, except
 * issue 11's large sequential FastFile targets, which hold under every profile.
 */
export function targetChecks(res: BenchResults): Check[] {
  const out: Check[] = [];
  const profile = res.profiles[0]?.name;
  const get = (scenario: string, target: string, readers: number, prof = profile) =>
    res.figures.find((f) => f.scenario === scenario && f.profile === prof && f.target === target && f.readers === readers && f.value !== null);
  const pct = (x: number) => `${(x * 100).toFixed(0)}%`;
  const x = (v: number) => `${v.toFixed(2)}×`;
  // Beside a share of the link: how busy the machine was, and during the limit's own runs.
  const busyNote = (f: Figure | undefined, prof: string | undefined) => {
    const lb = res.limits.find((l) => l.profile === prof)?.machineBusyCores;
    const fb = f?.machineBusyCores;
    return fb === null || fb === undefined ? '' : ` (machine: ${fb.toFixed(2)} of ${res.machine.nproc} cores busy${lb === null || lb === undefined ? '' : `; ${lb.toFixed(2)} for the limit`})`;
  };
  const add = (target: string, where: string, measured: number | null | undefined, fmt: (v: number) => string, required: string, ok: (v: number) => boolean) => {
    out.push({ target, where, measured: measured === null || measured === undefined ? '–' : fmt(measured), required, met: measured === null || measured === undefined ? null : ok(measured) });
  };
  const scenarios = [...new Set(res.figures.filter((f) => f.profile === profile).map((f) => f.scenario))];
  for (const sc of scenarios) {
    const figs = res.figures.filter((f) => f.scenario === sc && f.profile === profile);
    const f0 = figs[0]!;
    const readers = [...new Set(figs.map((f) => f.readers))].sort((a, b) => a - b);
    const many = readers[readers.length - 1]!;
    const where = (r: number) => `${sc} (${r} reader${r === 1 ? '' : 's'})`;
    // Issue 11's targets hold under every profile the scenario ran (s3-like and no latency,
    // HTTP and HTTPS): a row per profile, named after it unless it is the first.
    const profs = res.profiles.map((p) => p.name).filter((p) => res.figures.some((f) => f.scenario === sc && f.profile === p));
    const whereIn = (r: number, prof: string) => (prof === profile ? where(r) : `${where(r)}, ${prof}`);
    if (f0.kind === 'sequential' && f0.unit === 'MB/s') {
      // FastFile's targets hold for 1 reader and 4 readers: a row per reader count and
      // profile. A scenario run only with several readers (bulk-4) gets no 1-reader rows.
      for (const prof of profs) {
        for (const n of readers) {
          const ff = get(sc, 'FastFile', n, prof);
          const s3fs = get(sc, 's3fs', n, prof);
          const at = whereIn(n, prof);
          add('Large sequential reads: FastFile ≥ 95% of the link limit', at, ff?.fractionOfLimit, (v) => pct(v) + busyNote(ff, prof), '≥ 95%', (v) => v >= 0.95);
          add('Large sequential reads: FastFile ÷ s3fs', at, ff && s3fs ? ff.value! / s3fs.value! : null, x, '≥ 1×', (v) => v >= 1);
          if (n === 1 && prof === profile) add('Large sequential reads: FastFile ÷ rclone', where(1), ff && get(sc, 'rclone', 1) ? ff.value! / get(sc, 'rclone', 1)!.value! : null, x, '≥ 2.5×', (v) => v >= 2.5);
          add('Large sequential reads: CPU s/GB, FastFile ÷ s3fs', at, ff?.cpuSecondsPerGB && s3fs?.cpuSecondsPerGB ? ff.cpuSecondsPerGB / s3fs.cpuSecondsPerGB : null, x, '< 1×', (v) => v < 1);
        }
      }
      if (readers.includes(1)) {
        for (const prof of profs) {
          const pipe = get(sc, 'Pipe', 1, prof);
          if (!pipe && prof !== profile) continue;
          add('Pipe mode ≥ 90% of the link limit', whereIn(1, prof), pipe?.fractionOfLimit, (v) => pct(v) + busyNote(pipe, prof), '≥ 90%', (v) => v >= 0.9);
          // Issue 11: "at ≤ 0.6 CPU s/GB". In a scenario with warm: true, the figure is the
          // host's second epoch (Scenario.warm); otherwise a new process's first.
          add('Pipe mode CPU s/GB', whereIn(1, prof), pipe?.cpuSecondsPerGB, (v) => `${v.toFixed(2)}${f0.warm ? ' (epoch 2 of the same process)' : ' (a new process\'s first epoch)'}`, '≤ 0.6', (v) => v <= 0.6);
        }
      }
    }
    if (f0.kind === 'sequential' && f0.unit === 'files/s') {
      const ff1 = get(sc, 'FastFile', 1);
      const best1 = bestPeer(figs.filter((f) => f.readers === 1 && TARGET_STYLE[f.target] === 'mount'));
      add('Small files, 1 reader: FastFile ÷ better mount peer', where(1), ff1 && best1 ? ff1.value! / best1.value! : null, x, '≥ 5×', (v) => v >= 5);
      if (many > 1) {
        const ffn = get(sc, 'FastFile', many);
        const bestn = bestPeer(figs.filter((f) => f.readers === many && TARGET_STYLE[f.target] === 'mount'));
        add(`Small files, ${many} readers: FastFile ÷ better mount peer`, where(many), ffn && bestn ? ffn.value! / bestn.value! : null, x, '≥ 1.5×', (v) => v >= 1.5);
      }
    }
    if (f0.kind === 'sequential' && readers.includes(1)) {
      for (const prof of profs) {
        const file = get(sc, 'File', 1, prof);
        const aws = get(sc, 'aws', 1, prof);
        if (prof !== profile && !(file && aws)) continue;
        // The download alone (RunResult.downloadValue): `aws s3 cp` is a download, and the
        // readers' first read of the files, inside `value`, is the same for both. Both shown;
        // results written before downloadValue existed have only the ratio with the read.
        const alone = file?.downloadValue && aws?.downloadValue ? file.downloadValue / aws.downloadValue : null;
        const withRead = file && aws && file.value !== null && aws.value !== null ? file.value / aws.value : null;
        const said = alone !== null ? (withRead === null ? '' : ` (with the first read of the files: ${x(withRead)})`) : ' (download and the first read of the files)';
        add('File mode download ÷ aws s3 cp --recursive', whereIn(1, prof), alone ?? withRead, (v) => `${x(v)}${said}`, '≥ 1.5×', (v) => v >= 1.5);
      }
    }
    if (f0.kind === 'random') {
      const ff = get(sc, 'FastFile', 1);
      const best = bestPeer(figs);
      add('Random 64 KiB reads, 8 threads: FastFile ÷ better peer', sc, ff && best ? ff.value! / best.value! : null, x, '≥ 2×', (v) => v >= 2);
    }
    if (f0.kind === 'ttfb') {
      const ff = get(sc, 'FastFile', 1);
      const best = bestPeer(figs);
      add(`Time to first byte: FastFile (s) vs better peer (${best ? `${best.target} ${best.value!.toFixed(3)} s` : '–'})`, sc, ff?.value, (v) => `${v.toFixed(3)} s`, 'lower', (v) => best !== undefined && v < best.value!);
    }
    if (f0.kind === 'tier' && sc.endsWith('.local')) {
      // Issue 14: epoch 2 and a restarted job against the local folder, with no GET for cached blocks.
      const base = sc.slice(0, -'.local'.length);
      const small = f0.unit === 'files/s';
      const need = small ? 0.5 : 0.7;
      const local = get(sc, 'File', f0.readers);
      const ph = (name: string) => get(`${base}.${name}`, 'FastFile', f0.readers);
      // Warm against warm (every byte in the page cache), cold against cold (both evicted): see src/bench/tier.ts.
      const localCold = get(`${base}.local-cold`, 'File', f0.readers);
      for (const name of ['epoch2', 'restarted', 'restarted-cold']) {
        const f = ph(name);
        const cold = name.endsWith('-cold');
        const ref = cold ? localCold : local;
        add(`Disk tier, ${small ? 'small' : 'large'} files: ${name} ÷ local folder${cold ? ' (both cold)' : ''}`, base, f && ref ? f.value! / ref.value! : null, pct, `≥ ${need * 100}%`, (v) => v >= need);
        add(`Disk tier: S3 GETs in ${name}`, base, f?.s3Gets, (v) => String(v), '0', (v) => v === 0);
      }
      const e1 = ph('epoch1');
      const nt = ph('no-tier');
      add('Disk tier: epoch 1 with the tier ÷ without', base, e1 && nt ? e1.value! / nt.value! : null, x, '≥ 0.9× (noise)', (v) => v >= 0.9);
      const direct = ph('direct');
      const rs = ph('restarted');
      add('Disk tier: what FUSE costs, restarted (through the mount) ÷ direct (same tier, no FUSE)', base, rs && direct ? rs.value! / direct.value! : null, pct, 'measured, no target', () => true);
      out[out.length - 1]!.met = null; // a measurement, not a target
    }
    if (f0.kind === 'fio') {
      // Issue 44: every job at least the best peer's MiB/s; the latency jobs at most its latency.
      const ff = get(sc, 'FastFile', f0.readers);
      const best = bestPeer(figs);
      const said = (v: number) => `${fmtValue(v, f0.unit)} vs ${best ? `${best.target} ${fmtValue(best.value, f0.unit)}` : '–'}`;
      if (f0.higherIsBetter) add(`fio ${sc.slice(sc.indexOf('.') + 1)}: FastFile ≥ best peer (MiB/s)`, sc, ff?.value, said, '≥ best peer', (v) => best !== undefined && v >= best.value!);
      else add(`fio ${sc.slice(sc.indexOf('.') + 1)}: FastFile mean clat ≤ best peer's`, sc, ff?.value, said, '≤ best peer', (v) => best !== undefined && v <= best.value!);
    }
    if (f0.kind === 'list') {
      const ff = get(sc, 'FastFile', 1);
      const rc = get(sc, 'rclone', 1);
      add(`Listing: FastFile (s) vs rclone (${rc ? `${rc.value!.toFixed(3)} s` : '–'})`, sc, ff?.value, (v) => `${v.toFixed(3)} s`, 'lower', (v) => rc !== undefined && v < rc.value!);
    }
  }
  const rss = res.figures.filter((f) => f.target === 'FastFile' && f.peakRssBytes !== null).map((f) => f.peakRssBytes!);
  add('Memory: FastFile peak RSS ≤ cache budget + 256 MiB', 'all scenarios', rss.length ? Math.max(...rss) : null, (v) => `${(v / MiB).toFixed(0)} MiB`, `≤ ${((res.cacheBudgetBytes + 256 * MiB) / MiB).toFixed(0)} MiB`, (v) => v <= res.cacheBudgetBytes + 256 * MiB);
  return out;
}

export function targetsTable(res: BenchResults): string {
  const rows = targetChecks(res).map((c) => `| ${c.target} | ${c.where} | ${c.measured} | ${c.required} | ${c.met === null ? (c.measured === '–' ? 'not measured' : '') : c.met ? 'met' : '**missed**'} |`);
  return [`**Targets** (issue 5; profile ${res.profiles[0]?.name ?? '–'} unless "Where" names another, medians):`, '', '| Target | Where | Measured | Required | |', '|---|---|---:|---|---|', ...rows].join('\n');
}
