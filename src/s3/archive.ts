/**
 * Which listed objects cannot be read without a restore (issue 15).
 *
 * S3 refuses a GET of an object in GLACIER (Flexible Retrieval) or DEEP_ARCHIVE with 403
 * InvalidObjectState unless a restore has completed; so it does for an INTELLIGENT_TIERING
 * object that has moved to the Archive Access or Deep Archive Access tier. The listing
 * gives the storage class; only HEAD tells an Intelligent-Tiering object's archive tier
 * (x-amz-archive-status) and whether a GLACIER object's restore has completed
 * (x-amz-restore: ongoing-request="false"). So: classes from the listing, plus one HEAD per
 * GLACIER, DEEP_ARCHIVE or INTELLIGENT_TIERING object (HEAD_CONCURRENCY at a time), at most
 * PROBE_MAX per listing: past that, an archive-class object is taken as archived (a
 * restored one is then reported as archived, never the other way round). A STANDARD
 * listing costs no HEAD. GLACIER_IR (Instant Retrieval) is readable like STANDARD.
 * (ListObjectsV2's OptionalObjectAttributes=RestoreStatus would save the GLACIER HEADs on
 * AWS, but S3-compatible stores differ on it; HEAD works everywhere.)
 */
import type { ObjectClient, ObjectInfo } from './object-client.js';

/** Storage classes whose objects need a restore before a GET. */
export const ARCHIVED_CLASSES = new Set(['GLACIER', 'DEEP_ARCHIVE']);
/** Intelligent-Tiering tiers (x-amz-archive-status) that need a restore. */
export const ARCHIVED_TIERS = new Set(['ARCHIVE_ACCESS', 'DEEP_ARCHIVE_ACCESS']);
/** HEADs in flight: hides ~20 ms each without flooding S3. */
const HEAD_CONCURRENCY = 32;
/** At most this many HEADs per listing: ~10 s at 32 in flight and 30 ms each. */
export const PROBE_MAX = 10_000;

/** The reason `o` cannot be read now (its class or tier), or undefined when it can. */
export function archivedAs(o: ObjectInfo): string | undefined {
  if (o.restored) return undefined;
  if (o.storageClass !== undefined && ARCHIVED_CLASSES.has(o.storageClass)) return o.storageClass;
  if (o.archiveStatus !== undefined && ARCHIVED_TIERS.has(o.archiveStatus)) return `INTELLIGENT_TIERING ${o.archiveStatus}`;
  return undefined;
}

/** Whether probeArchived() would HEAD `o`. */
export const needsProbe = (o: ObjectInfo) => o.archiveStatus === undefined && !o.restored
  && o.storageClass !== undefined && (ARCHIVED_CLASSES.has(o.storageClass) || o.storageClass === 'INTELLIGENT_TIERING');

/**
 * Fills `archiveStatus` and `restored` of the objects whose class may need a restore, by
 * HEAD, in place (the first PROBE_MAX of them). Returns the number of HEADs sent.
 */
export async function probeArchived(objects: ObjectInfo[], client: Pick<ObjectClient, 'head'>, signal?: AbortSignal): Promise<number> {
  const todo = objects.filter(needsProbe).slice(0, PROBE_MAX);
  let next = 0;
  const worker = async () => {
    while (next < todo.length) {
      const o = todo[next++]!;
      const h = await client.head(o.key, signal ? { signal } : {});
      if (h.archiveStatus !== undefined) o.archiveStatus = h.archiveStatus;
      if (h.restored) o.restored = true;
    }
  };
  await Promise.all(Array.from({ length: Math.min(HEAD_CONCURRENCY, todo.length) }, worker));
  return todo.length;
}

/** Splits `objects` into the readable and the archived (with the class or tier of each). */
export function partitionArchived<T extends ObjectInfo>(objects: readonly T[]): { readable: T[]; archived: T[]; classes: string[] } {
  const readable: T[] = [];
  const archived: T[] = [];
  const classes: string[] = [];
  for (const o of objects) {
    const why = archivedAs(o);
    if (why === undefined) readable.push(o);
    else { archived.push(o); classes.push(why); }
  }
  return { readable, archived, classes };
}
