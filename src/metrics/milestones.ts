/**
 * Delivery milestones per channel: the moments the first byte and the first whole file
 * reached the training process, as gauges of seconds since sluice started.
 *
 * Call markFirstByte() next to every `servedBytes.inc()` and markFirstFile() next to
 * every `channelObjects.inc()` (FastFile: when a file that was read is released). Each
 * is a Set lookup after the first call, so it is cheap on the read path; the Set makes
 * sure each gauge is set exactly once per (channel, mode). The training job starts about
 * when sluice does (`sluice run` starts both), so process uptime is the operator's
 * "time since start".
 */
import { timeToFirstBatch, timeToFirstByte } from './metrics.js';

/** The `mode` label values, as SageMaker spells the input modes. */
export type ServeMode = 'FastFile' | 'Pipe' | 'File';

// INVARIANT: a key is in a set iff its gauge has been set.
const firstByteSeen = new Set<string>();
const firstFileSeen = new Set<string>();

/** Record that `channel` has delivered bytes; only the first call per channel and mode counts. */
export function markFirstByte(channel: string, mode: ServeMode): void {
  const key = `${channel}\0${mode}`;
  if (firstByteSeen.has(key)) return;
  firstByteSeen.add(key);
  timeToFirstByte.set({ channel, mode }, process.uptime());
}

/** Record that `channel` has delivered a whole file; only the first call per channel and mode counts. */
export function markFirstFile(channel: string, mode: ServeMode): void {
  const key = `${channel}\0${mode}`;
  if (firstFileSeen.has(key)) return;
  firstFileSeen.add(key);
  timeToFirstBatch.set({ channel, mode }, process.uptime());
}
