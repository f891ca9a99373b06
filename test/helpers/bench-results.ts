// A synthetic BenchResults for tests of the report and the charts.
import type { BenchResults, Figure } from '../../src/bench/runner.js';

export function fig(p: Partial<Figure> & Pick<Figure, 'target' | 'value'>): Figure {
  const role = ['File', 'FastFile', 'Pipe'].includes(p.target) ? 'sluice' : 'peer';
  return {
    scenario: 'B', title: 'large files', kind: 'sequential', profile: 's3-like', role, readers: 1, unit: 'MB/s', higherIsBetter: true,
    mbps: p.value, fractionOfLimit: p.value === null ? null : p.value / 200, peakRssBytes: 300 * 1024 * 1024, cpuSecondsPerGB: 2.5, readerCpuSecondsPerGB: 0.4, serverCpuSecondsPerGB: 1.25,
    verified: p.value !== null, runs: [], ...p,
  } as Figure;
}

export function results(figures: Figure[]): BenchResults {
  return {
    startedAt: '2026-11-30T09:00:00.000Z', finishedAt: '2026-11-30T09:10:00.000Z', config: 'x.yaml',
    machine: { nproc: 2, memoryBytes: 8e9, kernel: '6.1', node: 'v20', openssl: '3.0.19', cpu: 'cpu' },
    profiles: [{ name: 's3-like', ttfbMs: 25, bytesPerSec: 80e6, description: 's3-like: +25 ms to first byte per request, 80 MB/s per connection' }],
    repetitions: 3, cacheBudgetBytes: 1 << 30, datasets: {}, commands: {},
    limits: [{ profile: 's3-like', client: 'curl', mbps: 200, runs: [{ retries: 0, bytes: 1, seconds: 1, mbps: 200, requests: 1, verified: true, mismatches: [] }], connections: 16, partSize: 8 * 1024 * 1024 }],
    figures, notes: [],
  };
}
