/**
 * The inode tree: a "/"-delimited folder view of the objects under a prefix,
 * built once from the listing (FastFile semantics: the view does not change
 * while mounted).
 *
 * Rules (SEMANTICS.md states them for users):
 *  - The prefix is a folder prefix: "data" means "data/", so "data/x" is shown as
 *    /x and "database/x" is not shown. `normalizePrefix()` does that.
 *  - A key ending in "/" (a folder marker, as the S3 console creates) makes a folder
 *    and no file. The key equal to the prefix itself is ignored.
 *  - A key that is unsafe to show is skipped, with its reason, in `skipped`: an empty
 *    segment ("a//b", a leading "/"), a "." or ".." segment, a NUL byte, a lone surrogate (not valid Unicode), a segment
 *    longer than NAME_MAX bytes, or a path longer than PATH_MAX bytes.
 *  - A key that is both a file and a folder prefix ("a" and "a/b"): the folder wins,
 *    since hiding a whole folder would hide many objects to show one; the file is
 *    skipped with reason 'shadowed by a folder'.
 *  - Names in a folder are sorted by Unicode code point, which is S3's listing order
 *    (UTF-8 byte order) and Python's sorted() order: a data loader that walks
 *    `sorted(os.listdir())` walks the order cross-file prefetch follows.
 */
import type { ObjectInfo } from '../s3/object-client.js';
import { compareKeys } from '../s3/lister.js';

/** Longest name of one path segment, in bytes (Linux NAME_MAX). */
export const NAME_MAX = 255;
/** Longest path below the mount point, in bytes (Linux PATH_MAX, less room for the mount point itself). */
export const PATH_MAX = 4096 - 256;

export interface FileNode {
  kind: 'file';
  name: string;
  info: ObjectInfo;
  parent: DirNode;
  /** Place of this file in parent.files (listing order). */
  index: number;
}

export interface DirNode {
  kind: 'dir';
  name: string;
  parent: DirNode | undefined;
  children: Map<string, Node>;
  /** Child names in listing order (filled by finish()). */
  names: string[];
  /**
   * Child files in listing order, as pinned versions (key, etag, size), with `row`: the file's
   * row in the listing handed to the FUSE thread (src/fuse/adapter.ts listedAttrs) when that
   * thread may open it from the disk tier, else -1 (see src/fs/core.ts tierOpens).
   */
  files: Array<{ key: string; etag: string; size: number; row: number }>;
  /** Number of child folders (for st_nlink), filled by finish(). */
  subdirs: number;
  /** Found by a lookup before the listing completed: its children are not known here (see core.ts). */
  provisional?: true;
  /** Read-ahead window carried to the next file opened here, and when it was set (performance.now()); see core.ts CARRY_MS. */
  carry?: { window: number; atMs: number };
}

export type Node = FileNode | DirNode;

export interface SkippedKey {
  key: string;
  reason: string;
}

export interface Tree {
  root: DirNode;
  fileCount: number;
  dirCount: number;
  totalBytes: number;
  skipped: SkippedKey[];
}

/** "data" -> "data/", "data/" -> "data/", "" -> "" (the whole bucket); leading "/" removed. */
export function normalizePrefix(prefix: string): string {
  const p = prefix.replace(/^\/+/, '');
  return p === '' || p.endsWith('/') ? p : `${p}/`;
}

/** Compares by Unicode code point (= UTF-8 byte order, S3's listing order), unlike `<` on UTF-16 units. */
export { compareKeys as compareCodePoints };

/** A lone surrogate: a UTF-16 half with no partner (the u flag makes pairs one code point). */
const LONE_SURROGATE = /\p{Cs}/u;

/** Why a relative key cannot be shown, or undefined when it is safe. */
export function unsafeReason(rel: string): string | undefined {
  if (rel.includes('\0')) return 'contains NUL';
  // A lone surrogate (from a key that was not valid UTF-8) has no UTF-8 form, so the
  // kernel could never name it back to us.
  if (LONE_SURROGATE.test(rel)) return 'not valid Unicode';
  if (Buffer.byteLength(rel) > PATH_MAX) return `path longer than ${PATH_MAX} bytes`;
  const segs = rel.split('/');
  for (const s of segs) {
    if (s === '') return 'empty path segment';
    if (s === '.' || s === '..') return `"${s}" path segment`;
    if (Buffer.byteLength(s) > NAME_MAX) return `name longer than ${NAME_MAX} bytes`;
  }
  return undefined;
}

export function newDir(name: string, parent: DirNode | undefined): DirNode {
  return { kind: 'dir', name, parent, children: new Map(), names: [], files: [], subdirs: 0 };
}

/** Builds the folder view of `objects` (all under `prefix`, in any order). */
export function buildTree(objects: Iterable<ObjectInfo>, prefix: string): Tree {
  const pre = normalizePrefix(prefix);
  const root = newDir('', undefined);
  const skipped: SkippedKey[] = [];
  const fileKeys: Array<{ rel: string; info: ObjectInfo }> = [];
  let dirCount = 0;

  const ensureDir = (segs: string[]): DirNode => {
    let d = root;
    for (const s of segs) {
      let c = d.children.get(s);
      if (!c || c.kind === 'file') {
        // A folder replaces a file of the same name (it is re-checked when files are placed).
        c = newDir(s, d);
        d.children.set(s, c);
        dirCount++;
      }
      d = c;
    }
    return d;
  };

  // Pass 1: every folder (from folder markers and from the parents of files).
  for (const info of objects) {
    if (!info.key.startsWith(pre)) continue;
    let rel = info.key.slice(pre.length);
    if (rel === '') continue; // the prefix's own folder marker
    const marker = rel.endsWith('/');
    if (marker) rel = rel.slice(0, -1);
    const why = unsafeReason(rel);
    if (why) {
      skipped.push({ key: info.key, reason: why });
      continue;
    }
    const segs = rel.split('/');
    if (marker) ensureDir(segs);
    else {
      ensureDir(segs.slice(0, -1));
      fileKeys.push({ rel, info });
    }
  }

  // Pass 2: files, unless a folder took the name.
  let fileCount = 0;
  let totalBytes = 0;
  for (const { rel, info } of fileKeys) {
    const segs = rel.split('/');
    const name = segs.pop()!;
    const dir = ensureDir(segs);
    const existing = dir.children.get(name);
    if (existing?.kind === 'dir') {
      skipped.push({ key: info.key, reason: 'shadowed by a folder of the same name' });
      continue;
    }
    if (existing) {
      skipped.push({ key: info.key, reason: 'listed twice' });
      continue;
    }
    dir.children.set(name, { kind: 'file', name, info, parent: dir, index: -1 });
    fileCount++;
    totalBytes += info.size;
  }

  finish(root);
  return { root, fileCount, dirCount, totalBytes, skipped };
}

function finish(d: DirNode): void {
  d.names = [...d.children.keys()].sort(compareKeys);
  for (const name of d.names) {
    const c = d.children.get(name)!;
    if (c.kind === 'dir') {
      d.subdirs++;
      finish(c);
    } else {
      c.index = d.files.length;
      d.files.push({ key: c.info.key, etag: c.info.etag, size: c.info.size, row: -1 });
    }
  }
}

/** The node at an absolute path ('/', '/a/b'), or undefined. */
export function lookupPath(root: DirNode, path: string): Node | undefined {
  let node: Node = root;
  for (const seg of path.split('/')) {
    if (seg === '') continue;
    if (node.kind !== 'dir') return undefined;
    const next: Node | undefined = node.children.get(seg);
    if (!next) return undefined;
    node = next;
  }
  return node;
}
