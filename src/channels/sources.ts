/**
 * What a channel holds: its objects (File mode) and its units (what Pipe mode streams,
 * and what is sharded and shuffled).
 *
 *  - S3Prefix: every object under the prefix, listed once. A unit is one object; its
 *    sort key is the object key, so key order is S3's order.
 *  - ManifestFile: the manifest object is read and parsed (manifest.ts); the entries are
 *    looked up by a HEAD each when few, or by a bounded listing of their common prefix
 *    when many (resolveEntries). A unit is one object; its sort key is its position in
 *    the manifest (zero-padded), so "key order" is the manifest's order.
 *  - AugmentedManifestFile: one unit per JSON line (sort key: its line number); its items
 *    are the line's attributes in AttributeNames order, "-ref" objects looked up the same way.
 * A unit's size is the bytes it streams. A folder-marker object (a key ending in '/',
 * as the S3 console's "Create folder" makes) is never a unit; File mode makes it a folder.
 */
import { ManifestError, NoSuchKeyError } from '../errors.js';
import type { PipeItem } from '../pipe/pipe-channel.js';
import type { ObjectClient, ObjectInfo } from '../s3/object-client.js';
import { parseS3Uri } from '../s3/uri.js';
import type { ChannelConfig } from './input-config.js';
import { parseAugmentedManifest, parseManifestFile, type ManifestEntry } from './manifest.js';
import { listOptionsFor, openDataset, refuseArchived, settle, snapshotObjectsFor } from '../snapshot/dataset.js';

/** One thing a unit streams: an object, or inline bytes (a non-"-ref" attribute). */
export type ChannelItem = PipeItem;

export interface ChannelObject extends ObjectInfo {
  /** Path below the channel folder (File mode). */
  rel: string;
  client: ObjectClient;
}

export interface ChannelUnit {
  /** Sort key: object key (S3Prefix) or zero-padded manifest position. */
  key: string;
  size: number;
  items: ChannelItem[];
}

export interface ChannelListing {
  /** Objects to download (S3Prefix, ManifestFile); empty for AugmentedManifestFile. */
  objects: ChannelObject[];
  units: ChannelUnit[];
}

export type ClientFor = (bucket: string) => ObjectClient;

/** Up to this many manifest entries (per bucket) are HEADed one by one; more are found by listing. */
const HEAD_ALL_MAX = 256;
/**
 * A listing for manifest entries stops after this many objects per entry: one LIST page
 * (1,000 keys) costs about one HEAD, so listing 4x the entries is still ~250x cheaper.
 */
const LIST_RATIO = 4;
/** HEADs in flight at once: enough to hide ~20 ms of latency each without flooding S3. */
const HEAD_CONCURRENCY = 32;
/** Zero padding of manifest positions, so that string order is numeric order (10^12 entries). */
const POSITION_DIGITS = 12;

const position = (i: number) => String(i).padStart(POSITION_DIGITS, '0');

/** A zero-byte "folder" object such as "p/" or "p/sub/": a folder, never data. */
export function isFolderMarker(key: string): boolean {
  return key.endsWith('/');
}

/** Path of `key` below an S3Prefix: what follows the prefix, or the key's name below the prefix's folder. */
export function relativePath(key: string, prefix: string): string {
  if (prefix === '' || prefix.endsWith('/')) return key.slice(prefix.length);
  if (key === prefix) return key.slice(key.lastIndexOf('/') + 1);
  if (key.startsWith(prefix + '/')) return key.slice(prefix.length + 1);
  // "s3://b/data/tr" matches data/train/x: keep "train/x", the path below the prefix's folder.
  return key.slice(prefix.lastIndexOf('/') + 1);
}

export async function listChannel(channel: ChannelConfig, clientFor: ClientFor, signal?: AbortSignal, skipArchived = false): Promise<ChannelListing> {
  const { bucket, prefix } = parseS3Uri(channel.s3Uri);
  const client = clientFor(bucket);
  if (channel.s3DataType === 'S3Prefix') {
    // Issue 15: a snapshot instead of a listing, filters, archived objects (src/snapshot/dataset.ts).
    const ds = await openDataset(channel.s3Uri, { snapshot: channel.snapshot, snapshotOut: channel.snapshotOut, filter: channel.filters, skipArchived }, channel.name);
    let listed: ObjectInfo[];
    if (ds.snapshot) listed = snapshotObjectsFor(ds, client);
    else {
      listed = [];
      for await (const o of client.list(prefix, { ...(signal ? { signal } : {}), ...listOptionsFor(ds) })) {
        if (!ds.filter || ds.filter.matches(o.key)) listed.push(o);
      }
    }
    const settled = await settle(ds, listed, client, signal);
    refuseArchived(ds, settled); // Pipe and File cannot serve them: say so before the script starts
    const objects: ChannelObject[] = settled.objects.map((o) => ({ ...o, rel: relativePath(o.key, prefix), client }));
    objects.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    // Folder markers ("p/", "p/sub/") are folders, not data: no unit, so Pipe never
    // streams them and ShardedByS3Key never counts them.
    const data = objects.filter((o) => !isFolderMarker(o.key));
    return { objects, units: data.map((o) => ({ key: o.key, size: o.size, items: [{ kind: 'object', info: infoOf(o), client }] })) };
  }
  const text = (await readObject(client, prefix, signal)).toString('utf8');
  if (channel.s3DataType === 'ManifestFile') {
    const entries = parseManifestFile(text);
    const objects = await resolveEntries(entries, clientFor, signal);
    return { objects, units: objects.map((o, i) => ({ key: position(i), size: o.size, items: [{ kind: 'object', info: infoOf(o), client: o.client }] })) };
  }
  const records = parseAugmentedManifest(text, channel.attributeNames ?? []);
  const refs = records.flatMap((r) => r.attributes.flatMap((a) => (a.kind === 'ref' ? [{ bucket: a.bucket, key: a.key, rel: a.key, line: r.line }] : [])));
  const found = await resolveEntries(refs, clientFor, signal);
  let next = 0;
  const units = records.map((r): ChannelUnit => {
    const items: ChannelItem[] = r.attributes.map((a) => {
      if (a.kind === 'inline') return { kind: 'inline', data: a.data };
      const o = found[next++]!;
      return { kind: 'object', info: infoOf(o), client: o.client };
    });
    const size = items.reduce((s, it) => s + (it.kind === 'inline' ? it.data.length : it.info.size), 0);
    return { key: position(r.line), size, items };
  });
  return { objects: [], units };
}

function infoOf(o: ChannelObject): ObjectInfo {
  return { key: o.key, size: o.size, etag: o.etag, lastModified: o.lastModified };
}

/**
 * The whole body of one object (a manifest), as one ranged GET pinned to the ETag its HEAD
 * gave: the data path's own sockets, so a manifest channel does not load undici for it.
 */
export async function readObject(client: ObjectClient, key: string, signal?: AbortSignal): Promise<Buffer> {
  const info = await client.head(key, signal ? { signal } : {});
  if (info.size === 0) return Buffer.alloc(0);
  return client.getRange(key, 0, info.size, info.etag, signal ? { signal } : {});
}

/**
 * Size and ETag of every entry. Per bucket: few entries are HEADed one by one; many are
 * looked up in one listing of their longest common prefix, which stops once it has seen
 * LIST_RATIO times more objects than entries (a prefix far larger than the manifest would
 * cost more than the HEADs); whatever the listing did not find is HEADed.
 * A key that does not exist is a ManifestError with its line.
 */
async function resolveEntries(entries: readonly ManifestEntry[], clientFor: ClientFor, signal?: AbortSignal): Promise<ChannelObject[]> {
  const out: ChannelObject[] = new Array(entries.length);
  const byBucket = new Map<string, number[]>();
  entries.forEach((e, i) => {
    const list = byBucket.get(e.bucket);
    if (list) list.push(i); else byBucket.set(e.bucket, [i]);
  });
  for (const [bucket, idx] of byBucket) {
    const client = clientFor(bucket);
    let unresolved = idx;
    if (idx.length > HEAD_ALL_MAX) {
      const wanted = new Map<string, number[]>();
      for (const i of idx) {
        const list = wanted.get(entries[i]!.key);
        if (list) list.push(i); else wanted.set(entries[i]!.key, [i]);
      }
      const prefix = commonPrefix([...wanted.keys()]);
      const limit = LIST_RATIO * idx.length;
      let seen = 0;
      for await (const o of client.list(prefix, signal ? { signal } : {})) {
        for (const i of wanted.get(o.key) ?? []) out[i] = { ...o, rel: entries[i]!.rel, client };
        if (++seen >= limit) break;
      }
      unresolved = idx.filter((i) => out[i] === undefined);
    }
    const found = await headAll(unresolved.map((i) => entries[i]!), clientFor, signal);
    unresolved.forEach((i, k) => { out[i] = found[k]!; });
  }
  return out;
}

function commonPrefix(keys: readonly string[]): string {
  let p = keys[0] ?? '';
  for (const k of keys) {
    let n = 0;
    while (n < p.length && n < k.length && p.charCodeAt(n) === k.charCodeAt(n)) n++;
    p = p.slice(0, n);
    if (p === '') break;
  }
  return p;
}

async function headAll(entries: readonly ManifestEntry[], clientFor: ClientFor, signal?: AbortSignal): Promise<ChannelObject[]> {
  const out: ChannelObject[] = new Array(entries.length);
  let next = 0;
  let failed = false;
  const worker = async () => {
    while (!failed && next < entries.length) {
      const i = next++;
      const e = entries[i]!;
      const client = clientFor(e.bucket);
      try {
        out[i] = { ...(await client.head(e.key, signal ? { signal } : {})), rel: e.rel, client };
      } catch (err) {
        failed = true;
        if (err instanceof NoSuchKeyError) throw new ManifestError(`s3://${e.bucket}/${e.key} does not exist`, e.line);
        throw err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(HEAD_CONCURRENCY, entries.length) }, worker));
  return out;
}
