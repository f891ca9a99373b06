/**
 * The listing as compact metadata (issue 46, decision 0036): the folder view of ./tree.ts
 * (same rules: skipped keys, folder markers, shadowed files, code point order) held in typed
 * arrays and two byte tables instead of one JS object per file, so that ten million objects
 * fit in about 45 bytes each here.
 *
 * Layout, once built:
 *  - Folders are numbered breadth-first (root 0), each folder's subfolders sorted by name, so
 *    a folder's subfolders are the contiguous range [subStart[d], subStart[d] + subCount[d]).
 *    Their names live in `dirNames` (UTF-8, ends in dirNameEnd).
 *  - Files are grouped by folder in folder order and sorted by name within one: a folder's
 *    files are the range [fileStart[d], fileStart[d + 1]). Per file: the name (UTF-8 in
 *    `names`, the part after the last "/": the folder's path is stored once, in its folder),
 *    the size (Uint32; a size of 4 GiB or more in a sparse map), mtime in whole seconds
 *    (Uint32; other values in a sparse map), the ETag packed as its 16 MD5 bytes plus the
 *    multipart count ("-N") when it has S3's shape (any other ETag, e.g. s3rver's or a web
 *    server's, in a sparse map), and the storage class as an index into a small table.
 *    Version ids, archive tiers and restores are rare: a sparse map.
 *  - A name in a folder is found by binary search over the folder's sorted subfolders, then
 *    its sorted files, comparing UTF-8 bytes in place (no string made): O(log n) per path
 *    segment, 20 comparisons in a folder of a million files.
 *  - readdir hands out the folder's entries by index (entries()): no array of its names.
 * Building (CatalogBuilder): add() takes objects in any order and appends each file to
 * growable arrays (folders, fewer, are JS objects until finish()); finish() numbers the
 * folders, sorts files into folder ranges with a stable counting sort (objects that arrive in
 * S3 key order, as a listing or snapshot does, are already name-sorted within each folder, so
 * only a folder that arrived out of order is sorted by comparison), drops shadowed and repeated
 * files, and copies each array once into its final order and size (or hands out a view of it
 * when the order is already final). addBytes() takes a snapshot line's bytes without making a
 * string per object (decision 0044).
 */
import { compareBytes, copyBytes } from '../bytes.js';
import type { ObjectBytes, ObjectInfo } from '../s3/object-client.js';
import { compareCodePoints, NAME_MAX, normalizePrefix, PATH_MAX, unsafeReason, type SkippedKey } from './tree.js';

/** Sentinel of a Uint32 column: the value is in the column's sparse map (it does not fit, or is not the usual shape). */
const OTHER = 0xffffffff;
/** ETag part count that means "not MD5-shaped: see the ETag map" (a real count is at most 10,000, S3's part limit). */
const ETAG_OTHER = 0xffff;
/** An S3 ETag: 32 lowercase hex digits (MD5), optionally "-N" with N at most 10,000 (S3's part limit; no leading zero, so it prints back the same). */
const MD5_ETAG = /^"([0-9a-f]{32})(?:-([1-9][0-9]{0,3}|10000))?"$/;
/** First capacity of the growable columns: small listings stay small. */
const FIRST_CAPACITY = 1024;
/** Largest first capacity taken from a caller's guess (CatalogBuilder's `expected`): 64 M files, ~3 GiB of address space; past it the columns double. */
const MAX_FIRST_CAPACITY = 64 * 1024 * 1024;

/** A reference to an entry: a file index (>= 0), or a folder d as -(d + 1) (the root is -1). */
export type Ref = number;
export const dirRef = (d: number): Ref => -(d + 1);
export const isDirRef = (r: Ref): boolean => r < 0;
export const dirOfRef = (r: Ref): number => -r - 1;

/** The fields of a file besides key, size, ETag and mtime (rare: a sparse map). */
type Extras = Pick<ObjectInfo, 'versionId' | 'archiveStatus' | 'restored'>;

/** A typed array that doubles as it fills. */
class Column<T extends Uint32Array | Uint16Array | Uint8Array | Float64Array> {
  length = 0;
  constructor(public a: T, private readonly make: (n: number) => T) {}
  push(v: number): void {
    if (this.length === this.a.length) {
      const more = this.make(this.a.length * 2);
      more.set(this.a);
      this.a = more;
    }
    this.a[this.length++] = v;
  }
  /**
   * The first `n` values in `order`, in an array of exactly that size; without an order, the
   * first `n` as a view of the column itself: no copy, and the pages past them, never
   * written, are never resident (decision 0044).
   */
  take(order: Uint32Array | undefined, n = this.length): T {
    if (!order) return this.a.subarray(0, n) as T;
    const out = this.make(n);
    for (let i = 0; i < n; i++) out[i] = this.a[order[i]!]!;
    return out;
  }
}
const u32 = (n: number) => new Column(new Uint32Array(n), (m) => new Uint32Array(m));

/** A folder while building. */
interface DirTmp {
  name: string;
  parent: number;
  children: number[];
  /** Files added to it, the last one's index (-1: none), and whether they came in name order (else finish() sorts them). */
  files: number;
  lastFile: number;
  unsorted: boolean;
  /** The final number (breadth-first), set by finish(). */
  final: number;
}

export class CatalogBuilder {
  private readonly pre: string;
  private readonly dirs: DirTmp[] = [{ name: '', parent: -1, children: [], files: 0, lastFile: -1, unsorted: false, final: 0 }];
  private readonly dirByPath = new Map<string, number>([['', 0]]);
  private readonly skipped: SkippedKey[] = [];
  private names: Buffer;
  private namesAt = 0;
  private readonly nameEnd: Column<Float64Array>;
  private readonly dir: Column<Uint32Array>;
  private readonly size: Column<Uint32Array>;
  private readonly mtime: Column<Uint32Array>;
  /** 16 bytes per file: the MD5 of an S3-shaped ETag (zeros for another). */
  private md5: Buffer;
  private readonly parts: Column<Uint16Array>;
  private readonly cls: Column<Uint8Array>;
  private readonly classes: (string | undefined)[] = [undefined, 'STANDARD'];
  private readonly classIndex = new Map<string | undefined, number>([[undefined, 0], ['STANDARD', 1]]);
  private readonly bigSize = new Map<number, number>();
  private readonly oddMtime = new Map<number, number>();
  private readonly oddEtag = new Map<number, string>();
  private readonly extras = new Map<number, Extras>();
  private lastDirPath: string | undefined;
  private lastDir = 0;
  /** The prefix as UTF-8 (addBytes). */
  private readonly preBytes: Buffer;
  /**
   * addBytes' last folder: its path's bytes [0, bDirLen) of bDirBuf (bDirLen -1: the root, no
   * "/" in the key), why its path is unsafe (unsafeReason, asked once per folder), and its
   * number once a file of it was kept (-1 before).
   */
  private bDirBuf = Buffer.alloc(256);
  private bDirLen = -2;
  private bDirWhy: string | undefined;
  private bDir = -1;

  /**
   * `expected`: about how many files will come (src/snapshot/dataset.ts guesses it from a snapshot's size):
   * the columns start that large instead of doubling up to it (each doubling copies the column
   * and touches fresh pages: ~1 s of 10 M objects' build, decision 0044). Pages never written
   * are never resident, so a guess above the count costs address space, not memory.
   */
  constructor(prefix: string, expected = 0) {
    this.pre = normalizePrefix(prefix);
    this.preBytes = Buffer.from(this.pre);
    const n = Math.max(FIRST_CAPACITY, Math.min(Math.ceil(expected), MAX_FIRST_CAPACITY));
    this.names = Buffer.allocUnsafe(Math.max(64 * 1024, 8 * n));
    this.nameEnd = new Column(new Float64Array(n), (m) => new Float64Array(m));
    this.dir = u32(n);
    this.size = u32(n);
    this.mtime = u32(n);
    this.md5 = Buffer.alloc(16 * n);
    this.parts = new Column(new Uint16Array(n), (m) => new Uint16Array(m));
    this.cls = new Column(new Uint8Array(n), (m) => new Uint8Array(m));
  }

  /** The folder at `path` ('' is the root; 'a/b'), made with its parents when missing. */
  private ensureDir(path: string): number {
    const known = this.dirByPath.get(path);
    if (known !== undefined) return known;
    const cut = path.lastIndexOf('/');
    const parent = this.ensureDir(cut < 0 ? '' : path.slice(0, cut));
    const d = this.dirs.length;
    this.dirs.push({ name: path.slice(cut + 1), parent, children: [], files: 0, lastFile: -1, unsorted: false, final: -1 });
    this.dirs[parent]!.children.push(d);
    this.dirByPath.set(path, d);
    return d;
  }

  add(info: ObjectInfo): void {
    const key = info.key;
    if (!key.startsWith(this.pre)) return;
    let rel = key.slice(this.pre.length);
    if (rel === '') return; // the prefix's own folder marker
    const marker = rel.endsWith('/');
    if (marker) rel = rel.slice(0, -1);
    const why = unsafeReason(rel);
    if (why) {
      this.skipped.push({ key, reason: why });
      return;
    }
    if (marker) {
      this.ensureDir(rel);
      return;
    }
    const cut = rel.lastIndexOf('/');
    const dirPath = cut < 0 ? '' : rel.slice(0, cut);
    const name = rel.slice(cut + 1);
    let d = this.lastDir;
    if (dirPath !== this.lastDirPath) {
      d = this.lastDir = this.ensureDir(dirPath);
      this.lastDirPath = dirPath;
    }
    const len = Buffer.byteLength(name);
    this.roomForName(len);
    this.names.write(name, this.namesAt);
    const i = this.file(d, len, info.size, info.lastModified.getTime(), info.storageClass);
    const m = MD5_ETAG.exec(info.etag);
    if (m) {
      this.md5.write(m[1]!, 16 * i, 16, 'hex');
      this.parts.push(m[2] === undefined ? 0 : Number(m[2]));
    } else {
      this.parts.push(ETAG_OTHER);
      this.oddEtag.set(i, info.etag);
    }
    if (info.versionId !== undefined || info.archiveStatus !== undefined || info.restored !== undefined) {
      const x: Extras = {};
      if (info.versionId !== undefined) x.versionId = info.versionId;
      if (info.archiveStatus !== undefined) x.archiveStatus = info.archiveStatus;
      if (info.restored !== undefined) x.restored = info.restored;
      this.extras.set(i, x);
    }
  }

  /** Room in `names` for `len` more bytes. */
  private roomForName(len: number): void {
    if (this.namesAt + len > this.names.length) {
      const more = Buffer.allocUnsafe(Math.max(2 * this.names.length, this.namesAt + len));
      this.names.copy(more, 0, 0, this.namesAt);
      this.names = more;
    }
  }

  /**
   * Appends a file of folder d whose name (`len` bytes) is already written at namesAt; returns
   * its index. The ETag's part count is the caller's to push (its 16 MD5 bytes have room).
   */
  private file(d: number, len: number, size: number, ms: number, storageClass: string | undefined): number {
    const i = this.dir.length;
    const from = this.namesAt;
    this.namesAt += len;
    this.nameEnd.push(this.namesAt);
    const dt = this.dirs[d]!;
    if (dt.lastFile >= 0 && !dt.unsorted) {
      // Names in code point order, which is UTF-8 byte order. A repeat too goes the sorted
      // way: a folder of the same name must win over every copy.
      const j = dt.lastFile;
      if (compareBytes(this.names, j === 0 ? 0 : this.nameEnd.a[j - 1]!, this.nameEnd.a[j]!, this.names, from, this.namesAt) >= 0) dt.unsorted = true;
    }
    dt.lastFile = i;
    dt.files++;
    this.dir.push(d);
    if (size < OTHER) this.size.push(size);
    else {
      this.size.push(OTHER);
      this.bigSize.set(i, size);
    }
    if (ms % 1000 === 0 && ms >= 0 && ms / 1000 < OTHER) this.mtime.push(ms / 1000);
    else {
      this.mtime.push(OTHER);
      this.oddMtime.set(i, ms);
    }
    if (16 * (i + 1) > this.md5.length) {
      const more = Buffer.alloc(2 * this.md5.length);
      this.md5.copy(more);
      this.md5 = more;
    }
    let c = this.classIndex.get(storageClass);
    if (c === undefined) {
      if (this.classes.length > 255) throw new RangeError('more than 255 storage classes in one listing');
      c = this.classes.length;
      this.classes.push(storageClass);
      this.classIndex.set(storageClass, c);
    }
    this.cls.push(c);
    return i;
  }

  /**
   * add() for an object read as the bytes of a snapshot line (decision 0044): the same result,
   * without a string per object. The key is ASCII (ObjectBytes), so its bytes are its UTF-8 and
   * unsafeReason() can only object to lengths and to empty, "." and ".." segments: the folder's
   * path is checked once per folder (keys come grouped by folder), the name and the length per
   * file, and a key that fails goes through unsafeReason() itself for the reason. The name is
   * copied into the name table, the ETag's hex decoded into the MD5 column.
   */
  addBytes(o: ObjectBytes): void {
    const buf = o.buf;
    const ks = o.keyStart;
    const pl = this.preBytes.length;
    if (o.keyEnd - ks < pl || compareBytes(buf, ks, ks + pl, this.preBytes, 0, pl) !== 0) return;
    const rs = ks + pl;
    let re = o.keyEnd;
    if (re === rs) return; // the prefix's own folder marker
    if (buf[re - 1] === SLASH) {
      // A folder marker (rare): as add() does.
      const rel = buf.toString('latin1', rs, re - 1);
      const why = unsafeReason(rel);
      if (why) this.skipped.push({ key: buf.toString('latin1', ks, o.keyEnd), reason: why });
      else this.ensureDir(rel);
      return;
    }
    let cut = re - 1;
    while (cut >= rs && buf[cut] !== SLASH) cut--;
    const dirLen = cut < rs ? -1 : cut - rs;
    if (dirLen !== this.bDirLen || (dirLen > 0 && compareBytes(buf, rs, cut, this.bDirBuf, 0, dirLen) !== 0)) {
      if (dirLen > this.bDirBuf.length) this.bDirBuf = Buffer.alloc(2 * dirLen);
      if (dirLen > 0) buf.copy(this.bDirBuf, 0, rs, cut);
      this.bDirLen = dirLen;
      this.bDirWhy = dirLen < 0 ? undefined : unsafeReason(buf.toString('latin1', rs, cut));
      this.bDir = -1;
    }
    const ns = cut + 1;
    const len = re - ns;
    if (this.bDirWhy !== undefined || re - rs > PATH_MAX || len === 0 || len > NAME_MAX || (buf[ns] === DOT && (len === 1 || (len === 2 && buf[ns + 1] === DOT)))) {
      const why = unsafeReason(buf.toString('latin1', rs, re));
      if (why) {
        this.skipped.push({ key: buf.toString('latin1', ks, o.keyEnd), reason: why });
        return;
      }
    }
    if (this.bDir < 0) this.bDir = this.ensureDir(dirLen < 0 ? '' : this.bDirBuf.toString('latin1', 0, dirLen));
    this.roomForName(len);
    copyBytes(buf, ns, re, this.names, this.namesAt);
    const i = this.file(this.bDir, len, o.size, o.mtimeMs, o.storageClass);
    const parts = md5Etag(buf, o.etagStart, o.etagEnd, this.md5, 16 * i);
    this.parts.push(parts);
    if (parts === ETAG_OTHER) this.oddEtag.set(i, JSON.parse(`"${buf.toString('latin1', o.etagStart, o.etagEnd)}"`) as string);
  }

  /** The catalog; the builder must not be used after. */
  finish(): Catalog {
    const dirs = this.dirs;
    const byName = (a: number, b: number) => compareCodePoints(dirs[a]!.name, dirs[b]!.name);
    // Folders breadth-first, subfolders by name: each folder's subfolders get consecutive numbers.
    const order: number[] = [0];
    dirs[0]!.final = 0;
    for (let k = 0; k < order.length; k++) {
      const ch = dirs[order[k]!]!.children.sort(byName);
      for (const c of ch) {
        dirs[c]!.final = order.length;
        order.push(c);
      }
    }
    const D = order.length;
    const dirParent = new Int32Array(D);
    const subStart = new Uint32Array(D);
    const subCount = new Uint32Array(D);
    const dirNameEnd = new Uint32Array(D);
    const dirNameParts: Buffer[] = [];
    let dirNameAt = 0;
    for (let k = 0; k < D; k++) {
      const t = dirs[order[k]!]!;
      dirParent[k] = t.parent < 0 ? -1 : dirs[t.parent]!.final;
      subCount[k] = t.children.length;
      subStart[k] = t.children.length > 0 ? dirs[t.children[0]!]!.final : 0;
      const b = Buffer.from(t.name);
      dirNameParts.push(b);
      dirNameAt += b.length;
      dirNameEnd[k] = dirNameAt;
    }
    // Files into folder ranges: a stable counting sort by final folder number.
    const n = this.dir.length;
    const dirOf = this.dir.a;
    const finalOf = new Uint32Array(dirs.length);
    for (let d = 0; d < dirs.length; d++) finalOf[d] = dirs[d]!.final;
    const counts = new Float64Array(D + 1);
    // Files that came grouped by folder in folder order (a snapshot's, a listing's) sort to themselves.
    let inOrder = true;
    let last = 0;
    for (let i = 0; i < n; i++) {
      const f = finalOf[dirOf[i]!]!;
      counts[f + 1]!++;
      if (f < last) inOrder = false;
      last = f;
    }
    for (let k = 0; k < D; k++) counts[k + 1]! += counts[k]!;
    const perm = new Uint32Array(n);
    let identity = inOrder;
    if (inOrder) for (let i = 0; i < n; i++) perm[i] = i;
    else {
      const at = counts.slice(0, D);
      for (let i = 0; i < n; i++) {
        const p = at[finalOf[dirOf[i]!]!]!++;
        perm[p] = i;
        if (p !== i) identity = false;
      }
    }
    const nameOf = (i: number) => this.names.toString('utf8', i === 0 ? 0 : this.nameEnd.a[i - 1]!, this.nameEnd.a[i]!);
    const keyOf = (i: number) => `${this.pre}${dirPathOf(dirs, dirOf[i]!)}${nameOf(i)}`;
    // Out of order folders sorted by name; repeated and shadowed files dropped.
    const drop = new Uint8Array(n);
    let dropped = 0;
    for (let k = 0; k < D; k++) {
      const t = dirs[order[k]!]!;
      const from = counts[k]!;
      const to = counts[k + 1]!;
      if (to - from === 0) continue;
      if (t.unsorted) {
        const seg = Array.from(perm.subarray(from, to));
        const key = new Map(seg.map((i) => [i, nameOf(i)]));
        seg.sort((a, b) => compareCodePoints(key.get(a)!, key.get(b)!) || a - b);
        perm.set(seg, from);
        identity = false;
      }
      if (t.children.length > 0) {
        const sub = new Set(t.children.map((c) => dirs[c]!.name));
        for (let p = from; p < to; p++) {
          const i = perm[p]!;
          if (drop[i] === 0 && sub.has(nameOf(i))) {
            drop[i] = 1;
            dropped++;
            this.skipped.push({ key: keyOf(i), reason: 'shadowed by a folder of the same name' });
          }
        }
      }
      // Repeats (only in a folder that came out of order): the first listed stays.
      if (t.unsorted) {
        let last: string | undefined;
        for (let p = from; p < to; p++) {
          const i = perm[p]!;
          if (drop[i] !== 0) continue;
          const name = nameOf(i);
          if (name === last) {
            drop[i] = 1;
            dropped++;
            this.skipped.push({ key: keyOf(i), reason: 'listed twice' });
          }
          last = name;
        }
      }
    }
    // The final order: perm without dropped files; folder ranges recounted.
    let final: Uint32Array | undefined;
    const fileStart = new Float64Array(D + 1);
    if (identity && dropped === 0) fileStart.set(counts);
    else {
      final = new Uint32Array(n - dropped);
      let w = 0;
      for (let k = 0; k < D; k++) {
        fileStart[k] = w;
        for (let p = counts[k]!; p < counts[k + 1]!; p++) if (drop[perm[p]!] === 0) final[w++] = perm[p]!;
      }
      fileStart[D] = w;
    }
    const N = n - dropped;
    const src = (i: number) => (final ? final[i]! : i);
    // Names in the final order, ends as Uint32 unless the table passes 4 GiB.
    let names: Buffer;
    let ends: Uint32Array | Float64Array;
    if (!final) {
      names = this.names.subarray(0, this.namesAt); // a view, as take() gives
      if (this.namesAt < OTHER) {
        ends = new Uint32Array(n);
        ends.set(this.nameEnd.a.subarray(0, n));
      } else ends = this.nameEnd.take(undefined);
    } else {
      let total = 0;
      for (let i = 0; i < N; i++) {
        const j = final[i]!;
        total += this.nameEnd.a[j]! - (j === 0 ? 0 : this.nameEnd.a[j - 1]!);
      }
      names = Buffer.allocUnsafe(total);
      ends = total < OTHER ? new Uint32Array(N) : new Float64Array(N);
      let w = 0;
      for (let i = 0; i < N; i++) {
        const j = final[i]!;
        w += this.names.copy(names, w, j === 0 ? 0 : this.nameEnd.a[j - 1]!, this.nameEnd.a[j]!);
        ends[i] = w;
      }
    }
    let md5 = this.md5.subarray(0, 16 * N);
    if (final) {
      md5 = Buffer.allocUnsafe(16 * N);
      for (let i = 0; i < N; i++) this.md5.copy(md5, 16 * i, 16 * src(i), 16 * src(i) + 16);
    }
    const remap = <V>(m: Map<number, V>): Map<number, V> => {
      if (!final || m.size === 0) return m;
      const back = new Map<number, number>();
      for (let i = 0; i < N; i++) if (m.has(final[i]!)) back.set(final[i]!, i);
      const out = new Map<number, V>();
      for (const [j, v] of m) if (back.has(j)) out.set(back.get(j)!, v);
      return out;
    };
    let totalBytes = 0;
    const size = this.size.take(final, N);
    const bigSize = remap(this.bigSize);
    for (let i = 0; i < N; i++) totalBytes += size[i] === OTHER ? bigSize.get(i)! : size[i]!;
    return new Catalog({
      prefix: this.pre, dirParent, subStart, subCount, dirNames: Buffer.concat(dirNameParts), dirNameEnd, fileStart,
      names, nameEnd: ends, size, bigSize, mtime: this.mtime.take(final, N), oddMtime: remap(this.oddMtime),
      md5, parts: this.parts.take(final, N), oddEtag: remap(this.oddEtag), cls: this.cls.take(final, N), classes: this.classes,
      extras: remap(this.extras), skipped: this.skipped, totalBytes,
    });
  }
}


const SLASH = 0x2f;
const DOT = 0x2e;
const BACKSLASH = 0x5c;
const QUOTE = 0x22;
/** Value of an ASCII byte as a lowercase hex digit, or -1. */
const HEX = new Int8Array(256).fill(-1);
for (let c = 0; c < 16; c++) HEX['0123456789abcdef'.charCodeAt(c)] = c;

/**
 * An ETag's JSON text at bytes [s, e) of buf that MD5_ETAG would accept once unescaped
 * (\"32 lowercase hex\" or \"hex-N\" with N of 1..10,000, no leading zero): its 16 bytes
 * written at md5[at..at+16), and its part count (0 for none) returned; ETAG_OTHER for any other
 * text (its 16 bytes then zeros, as add() leaves them: the sparse map holds the ETag).
 */
function md5Etag(buf: Buffer, s: number, e: number, md5: Buffer, at: number): number {
  const parts = md5Parts(buf, s, e, md5, at);
  if (parts === ETAG_OTHER) md5.fill(0, at, at + 16);
  return parts;
}

function md5Parts(buf: Buffer, s: number, e: number, md5: Buffer, at: number): number {
  const n = e - s;
  if (n < 36 || buf[s] !== BACKSLASH || buf[s + 1] !== QUOTE || buf[e - 2] !== BACKSLASH || buf[e - 1] !== QUOTE) return ETAG_OTHER;
  for (let k = 0; k < 16; k++) {
    const hi = HEX[buf[s + 2 + 2 * k]!]!;
    const lo = HEX[buf[s + 3 + 2 * k]!]!;
    if (hi < 0 || lo < 0) return ETAG_OTHER;
    md5[at + k] = (hi << 4) | lo;
  }
  if (n === 36) return 0;
  // "-N": 1 to 5 digits, the first not 0, at most 10,000.
  const ds = s + 35;
  const de = e - 2;
  if (buf[s + 34] !== 0x2d || de - ds < 1 || de - ds > 5 || buf[ds] === 0x30) return ETAG_OTHER;
  let parts = 0;
  for (let p = ds; p < de; p++) {
    const c = buf[p]! - 0x30;
    if (c < 0 || c > 9) return ETAG_OTHER;
    parts = parts * 10 + c;
  }
  return parts <= 10000 ? parts : ETAG_OTHER;
}

/** A folder's path below the prefix while building, with a trailing "/" ('' for the root). */
function dirPathOf(dirs: DirTmp[], d: number): string {
  let p = '';
  for (let x = d; x > 0; x = dirs[x]!.parent) p = `${dirs[x]!.name}/${p}`;
  return p;
}

interface CatalogParts {
  prefix: string;
  dirParent: Int32Array;
  subStart: Uint32Array;
  subCount: Uint32Array;
  dirNames: Buffer;
  dirNameEnd: Uint32Array;
  fileStart: Float64Array;
  names: Buffer;
  nameEnd: Uint32Array | Float64Array;
  size: Uint32Array;
  bigSize: Map<number, number>;
  mtime: Uint32Array;
  oddMtime: Map<number, number>;
  md5: Buffer;
  parts: Uint16Array;
  oddEtag: Map<number, string>;
  cls: Uint8Array;
  classes: (string | undefined)[];
  extras: Map<number, Extras>;
  skipped: SkippedKey[];
  totalBytes: number;
}

/** A folder's entries by index, in listing order (code point order, folders and files merged). */
export interface CatalogEntries {
  readonly length: number;
  name(i: number): string;
  isDir(i: number): boolean;
}

/**
 * The columns a lookup needs (Catalog.columns()), as the FUSE thread reads them in place
 * (native/src/fuse_attrs.c "Catalog"): the sparse maps as (file, value) pairs sorted by file.
 */
export interface CatalogColumns extends Pick<CatalogParts, 'subStart' | 'subCount' | 'dirNames' | 'dirNameEnd' | 'fileStart' | 'names' | 'nameEnd' | 'size' | 'mtime'> {
  bigSize: Float64Array;
  oddMtime: Float64Array;
}

/** A sparse map as (key, value) pairs sorted by key. */
function sortedPairs(m: Map<number, number>): Float64Array {
  const keys = [...m.keys()].sort((a, b) => a - b);
  const out = new Float64Array(2 * keys.length);
  keys.forEach((k, i) => { out[2 * i] = k; out[2 * i + 1] = m.get(k)!; });
  return out;
}

/** The fixed folder view of a listing (see the module comment). Build it with CatalogBuilder or catalogOf(). */
export class Catalog {
  readonly prefix: string;
  readonly fileCount: number;
  /** Folders shown, the root excluded. */
  readonly dirCount: number;
  readonly totalBytes: number;
  readonly skipped: readonly SkippedKey[];
  private readonly p: CatalogParts;
  /** A folder's path below the prefix with a trailing "/", for the few folders whose files were asked for a key. */
  private readonly dirPaths = new Map<number, string>();

  constructor(p: CatalogParts) {
    this.p = p;
    this.prefix = p.prefix;
    this.fileCount = p.size.length;
    this.dirCount = p.dirParent.length - 1;
    this.totalBytes = p.totalBytes;
    this.skipped = p.skipped;
  }

  /** The columns a lookup reads, shared, not copied (the catalog never changes them); the sparse maps as sorted pairs. */
  columns(): CatalogColumns {
    const p = this.p;
    return {
      subStart: p.subStart, subCount: p.subCount, dirNames: p.dirNames, dirNameEnd: p.dirNameEnd, fileStart: p.fileStart,
      names: p.names, nameEnd: p.nameEnd, size: p.size, mtime: p.mtime, bigSize: sortedPairs(p.bigSize), oddMtime: sortedPairs(p.oddMtime),
    };
  }

  /** The entry at an absolute path ('/', '/a/b'), or undefined. */
  find(path: string): Ref | undefined {
    let d = 0;
    let at = 0;
    const n = path.length;
    while (at < n) {
      let end = path.indexOf('/', at);
      if (end < 0) end = n;
      if (end > at) {
        const r = this.child(d, path.slice(at, end));
        if (r === undefined) return undefined;
        if (end === n) return r;
        if (!isDirRef(r)) {
          // "/file/" is the file; "/file/x" is nothing.
          return path.slice(end).replace(/\/+/g, '') === '' ? r : undefined;
        }
        d = dirOfRef(r);
      }
      at = end + 1;
    }
    return dirRef(d);
  }

  /** The entry called `name` in folder d, or undefined: binary search of its subfolders, then of its files. */
  child(d: number, name: string): Ref | undefined {
    const q = Buffer.from(name);
    const p = this.p;
    let lo = p.subStart[d]!;
    let hi = lo + p.subCount[d]!;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const c = p.dirNames.compare(q, 0, q.length, mid === 0 ? 0 : p.dirNameEnd[mid - 1]!, p.dirNameEnd[mid]!);
      if (c === 0) return dirRef(mid);
      if (c < 0) lo = mid + 1;
      else hi = mid;
    }
    lo = p.fileStart[d]!;
    hi = p.fileStart[d + 1]!;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const c = p.names.compare(q, 0, q.length, mid === 0 ? 0 : p.nameEnd[mid - 1]!, p.nameEnd[mid]!);
      if (c === 0) return mid;
      if (c < 0) lo = mid + 1;
      else hi = mid;
    }
    return undefined;
  }

  /** Subfolders of folder d (for st_nlink). */
  subdirs(d: number): number {
    return this.p.subCount[d]!;
  }

  /** Files of folder d: the range [first, end). */
  filesOf(d: number): { first: number; end: number } {
    return { first: this.p.fileStart[d]!, end: this.p.fileStart[d + 1]! };
  }

  /** The folder that holds file f (binary search of the folder ranges). */
  dirOfFile(f: number): number {
    const s = this.p.fileStart;
    let lo = 0;
    let hi = s.length - 2;
    while (lo < hi) {
      const mid = (lo + hi + 1) >>> 1;
      if (s[mid]! <= f) lo = mid;
      else hi = mid - 1;
    }
    // Empty folders share their start with the next: the holder is the last with start <= f and end > f.
    while (s[lo + 1]! <= f) lo++;
    return lo;
  }

  fileName(f: number): string {
    return this.p.names.toString('utf8', f === 0 ? 0 : this.p.nameEnd[f - 1]!, this.p.nameEnd[f]!);
  }

  dirName(d: number): string {
    return this.p.dirNames.toString('utf8', d === 0 ? 0 : this.p.dirNameEnd[d - 1]!, this.p.dirNameEnd[d]!);
  }

  /** Folder d's path below the prefix, with a trailing "/" ('' for the root); remembered (folders opened from are few). */
  dirPath(d: number): string {
    let p = this.dirPaths.get(d);
    if (p === undefined) {
      p = d === 0 ? '' : `${this.dirPath(this.p.dirParent[d]!)}${this.dirName(d)}/`;
      this.dirPaths.set(d, p);
    }
    return p;
  }

  size(f: number): number {
    const s = this.p.size[f]!;
    return s === OTHER ? this.p.bigSize.get(f)! : s;
  }

  mtimeMs(f: number): number {
    const s = this.p.mtime[f]!;
    return s === OTHER ? this.p.oddMtime.get(f)! : s * 1000;
  }

  etag(f: number): string {
    const parts = this.p.parts[f]!;
    if (parts === ETAG_OTHER) return this.p.oddEtag.get(f)!;
    const hex = this.p.md5.toString('hex', 16 * f, 16 * f + 16);
    return parts === 0 ? `"${hex}"` : `"${hex}-${parts}"`;
  }

  key(f: number, d = this.dirOfFile(f)): string {
    return `${this.prefix}${this.dirPath(d)}${this.fileName(f)}`;
  }

  /** File f as the listing gave it (made on demand: an open, a HEAD-free archive check). */
  info(f: number, d?: number): ObjectInfo {
    const o: ObjectInfo = { key: this.key(f, d), size: this.size(f), etag: this.etag(f), lastModified: new Date(this.mtimeMs(f)) };
    const c = this.p.classes[this.p.cls[f]!];
    if (c !== undefined) o.storageClass = c;
    const x = this.p.extras.get(f);
    if (x) Object.assign(o, x);
    return o;
  }

  /** Folder d's entries in listing order: its subfolders merged into its files by name, without copying either. */
  entries(d: number): CatalogEntries {
    const p = this.p;
    const first = p.fileStart[d]!;
    const files = p.fileStart[d + 1]! - first;
    const s0 = p.subStart[d]!;
    const subs = p.subCount[d]!;
    // Place of each subfolder in the merged order (subfolders are few; files may be millions).
    const at = new Float64Array(subs);
    let f = 0;
    for (let k = 0; k < subs; k++) {
      const dn = s0 + k;
      const a = dn === 0 ? 0 : p.dirNameEnd[dn - 1]!;
      const b = p.dirNameEnd[dn]!;
      // Files before subfolder k: binary search from the last place.
      let lo = f;
      let hi = files;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        const i = first + mid;
        const c = p.names.compare(p.dirNames, a, b, i === 0 ? 0 : p.nameEnd[i - 1]!, p.nameEnd[i]!);
        if (c < 0) lo = mid + 1;
        else hi = mid;
      }
      f = lo;
      at[k] = f + k;
    }
    /** Subfolders placed before merged index i. */
    const before = (i: number) => {
      let lo = 0;
      let hi = subs;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (at[mid]! < i) lo = mid + 1;
        else hi = mid;
      }
      return lo;
    };
    const self = this;
    return {
      length: files + subs,
      isDir(i: number): boolean {
        const k = before(i);
        return k < subs && at[k] === i;
      },
      name(i: number): string {
        const k = before(i);
        return k < subs && at[k] === i ? self.dirName(s0 + k) : self.fileName(first + i - k);
      },
    };
  }
}

/** The catalog of `objects` (all under `prefix`, in any order). */
export function catalogOf(objects: Iterable<ObjectInfo>, prefix: string): Catalog {
  const b = new CatalogBuilder(prefix);
  for (const o of objects) b.add(o);
  return b.finish();
}

/** A listed file as reads and cross-file prefetch name it, with its row in the listing handed to the FUSE thread (-1: none). */
export interface CatalogFile {
  key: string;
  etag: string;
  size: number;
  row: number;
}

/** Folder d's files by index (cross-file prefetch's FolderFileList), each made on demand. */
export class FolderFiles {
  readonly length: number;
  readonly first: number;
  constructor(private readonly cat: Catalog, readonly dir: number, private readonly rows: Int32Array | undefined) {
    const r = cat.filesOf(dir);
    this.first = r.first;
    this.length = r.end - r.first;
  }

  at(i: number): CatalogFile | undefined {
    if (!(i >= 0 && i < this.length)) return undefined;
    const f = this.first + i;
    return { key: this.cat.key(f, this.dir), etag: this.cat.etag(f), size: this.cat.size(f), row: this.rows ? this.rows[f]! : -1 };
  }
}
