/**
 * One budget for the whole process: --cache-size, --max-inflight and --max-connections
 * bound all of a run's channels together, not each of them.
 *
 * Algorithm (a static, even split; every channel knows its share before it starts):
 *  - Channels that live while the script runs (FastFile mounts, Pipe read-ahead) each
 *    get 1/n of --max-inflight and of --max-connections, n being the number of channels
 *    of the run (File channels count too, so that adding one never grows the others).
 *  - Only FastFile keeps a block cache: --cache-size is split among the FastFile
 *    channels alone.
 *  - A File channel downloads before the script starts, when FastFile mounts have no
 *    reader yet and only Pipe channels read ahead: it gets everything the Pipe channels
 *    do not hold (the total minus their shares). File channels download one after another.
 *  - The S3 clients File and Pipe channels share (one per bucket) get a pool of
 *    --max-connections minus the FastFile channels' own pools.
 * So while the script runs, FastFile caches + in-flight bytes of every channel stay within
 * --cache-size + --max-inflight, and connections within --max-connections; during the
 * downloads, File + Pipe stay within --max-inflight.
 * An even split leaves a share unused while its channel is idle: the price of a bound
 * that holds without coordination between channels.
 */
import { ConfigError } from '../errors.js';
import type { InputMode } from './input-config.js';

export interface BudgetTotals {
  cacheSize: number;
  maxInflight: number;
  maxConnections: number;
  partSize: number;
}

export interface ChannelBudget {
  /** FastFile's block cache (0 for File and Pipe, which keep none). */
  cacheSize: number;
  maxInflight: number;
  maxConnections: number;
}

export interface BudgetPlan {
  byChannel: Map<string, ChannelBudget>;
  /** Pool size of each S3 client that File and Pipe channels share. */
  sharedPoolConnections: number;
}

export function planBudgets(channels: readonly { name: string; inputMode: InputMode }[], t: BudgetTotals): BudgetPlan {
  const n = Math.max(1, channels.length);
  const count = (m: InputMode) => channels.filter((c) => c.inputMode === m).length;
  const nFastFile = count('FastFile');
  const nPipe = count('Pipe');
  const inflightShare = Math.floor(t.maxInflight / n);
  const connShare = Math.max(1, Math.floor(t.maxConnections / n));
  const cacheShare = nFastFile > 0 ? Math.floor(t.cacheSize / nFastFile) : 0;
  if (nFastFile > 0) {
    if (inflightShare < t.partSize) {
      throw new ConfigError(`--max-inflight ${t.maxInflight} shared by ${n} channels gives each ${inflightShare} bytes, less than --part-size ${t.partSize}`, {
        hint: `Raise --max-inflight to at least ${n * t.partSize} bytes, or lower --part-size`,
      });
    }
    if (cacheShare < t.partSize) {
      throw new ConfigError(`--cache-size ${t.cacheSize} shared by ${nFastFile} FastFile channels gives each ${cacheShare} bytes, less than --part-size ${t.partSize}`, {
        hint: `Raise --cache-size to at least ${nFastFile * t.partSize} bytes, or lower --part-size`,
      });
    }
  }
  const byChannel = new Map<string, ChannelBudget>();
  for (const c of channels) {
    if (c.inputMode === 'FastFile') byChannel.set(c.name, { cacheSize: cacheShare, maxInflight: inflightShare, maxConnections: connShare });
    else if (c.inputMode === 'Pipe') byChannel.set(c.name, { cacheSize: 0, maxInflight: inflightShare, maxConnections: connShare });
    else {
      byChannel.set(c.name, {
        cacheSize: 0,
        maxInflight: Math.max(1, t.maxInflight - nPipe * inflightShare),
        maxConnections: Math.max(1, t.maxConnections - nPipe * connShare),
      });
    }
  }
  return { byChannel, sharedPoolConnections: Math.max(1, t.maxConnections - nFastFile * connShare) };
}
