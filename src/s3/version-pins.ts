/**
 * Version pins of snapshots, merged (issue 15, issue 43 defect 5).
 *
 * One S3 client serves every channel of its bucket (sluice run shares it, and its
 * connections), and each channel read from a snapshot pins its keys to their version ids.
 * Pins are added key by key into one map, so channel B's snapshot adds to channel A's
 * instead of replacing them (A's GETs went out without their versionId once B pinned).
 * A key pinned to two different versions on one client cannot be served by both: that is
 * refused, whole, before any pin of the second snapshot is taken.
 */
import { SnapshotError } from '../errors.js';

/** Adds `add` to `into`; SnapshotError, with `into` unchanged, when a key is pinned to another version already. */
export function mergeVersionPins(into: Map<string, string>, add: ReadonlyMap<string, string>, bucket: string): void {
  for (const [key, versionId] of add) {
    const had = into.get(key);
    if (had !== undefined && had !== versionId) {
      throw new SnapshotError(`s3://${bucket}/${key} is pinned to version ${JSON.stringify(had)} by one snapshot and ${JSON.stringify(versionId)} by another`, {
        hint: 'Read one version of a key per run: give the channels snapshots that agree on it, or run them apart',
      });
    }
  }
  for (const [key, versionId] of add) into.set(key, versionId);
}
