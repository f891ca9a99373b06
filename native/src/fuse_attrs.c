/*
 * The listing's attributes, answered in libfuse's worker thread (part of the memread layer:
 * fuse_memread.c owns the mounts and the read table, fuse_open.c the opens, this file the
 * getattrs of listed paths; memread.h holds the types they share).
 *
 * getattr of a listed path is answered here too. A FastFile view is fixed once
 * listed (src/fs/tree.ts), so JavaScript hands this file a copy of it (attrTableSet: every
 * path with its mode, nlink, size and mtime, as src/fuse/adapter.ts listedAttrs builds them
 * from the same answers its own getattr gives) and each LOOKUP of a listed path (a restarted
 * job's every file) is a probe of an open-addressing hash table (FNV-1a of the path, linear
 * probing, at most half full) under a read lock, with the stat filled exactly as fuse-native's
 * populate_stat() fills it from JavaScript's answer. A path not in the table (not listed, or
 * asked before the listing was handed over) goes to fuse-native's getattr as before. The
 * table is replaced (write lock) only by a new listing or dropped at unmount
 * (attrTableTake(thread, true)) and at the thread's next mount. Its size: 48 bytes per path
 * plus 8 bytes of index slots per path (two slots each) plus the path's bytes; 1 million
 * paths of 60 bytes take about 116 MB, next to what the listing itself holds in JavaScript.
 * Hits are counted (attrTableTake) into sluice_fuse_memory_getattrs_total and
 * sluice_fuse_operations_total{op="getattr"}.
 *
 * What was left per file then was two hand-offs (LOOKUP and OPEN): in a CPU profile of the
 * restarted daemon (after), the self time of the direct getattr and open handlers
 * (src/fuse/native.ts; native calls such as fuse-native's signal, which wakes the libfuse
 * thread, count there) was ~60% of the main thread's busy time; openSmall's syscalls (pread,
 * open, close, futimes) and the object name's sha256 about 15%. With the attribute table
 * (same harness, 8 rounds, BENCHMARKS.md t14-attrs) a restarted job's files/s went up 32%
 * and the daemon's CPU per file down 26% (medians); the OPEN is the one hand-off left.
 *
 * Invariants: the table is read only under m->attrs_lock held for reading and replaced or
 * dropped only under it held for writing, so a getattr never sees a freed table; a path not
 * in the table always goes to JavaScript (never a guessed stat); the stat is filled exactly
 * as fuse-native fills it from JavaScript's answer (test/fuse/memattrs.ts compares the two).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <node_api.h>

#include "sluice_fuse_fd.h"
#include "sluice_lend.h"
#include "sluice_memread.h"
#include "sluice_napi.h"
#include "sluice_tier.h"
#include "memread.h"

static uint64_t fnv1a(const char *p, size_t n) {
  uint64_t h = 14695981039346656037ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 1099511628211ULL;
  return h;
}

/* The index slot of `path` (hash h): the one naming its row, or the empty slot where probing stopped. */
static size_t attrs_slot(const struct attrs *a, const char *path, size_t len, uint64_t h) {
  for (size_t i = h & a->mask;; i = (i + 1) & a->mask) {
    uint32_t r = a->index[i];
    if (r == 0) return i;
    const struct attr_row *row = &a->rows[r - 1];
    if (row->hash == h && row->path_len == len && memcmp(a->paths + row->path_off, path, len) == 0) return i;
  }
}

/*
 * Catalog. A listing handed over as the catalog's own columns (src/fs/catalog.ts, decision
 * 0036): the typed arrays JavaScript holds anyway, read in place (a strong reference to each
 * keeps it alive until the listing is dropped, always on Node's main thread: attrTableSet,
 * attrTableTake and fuse_new), so the table costs no byte per path and its hand-over no walk.
 * A path is found as Catalog.find finds it: per segment a binary search of the folder's sorted
 * subfolders, then of its sorted files, comparing UTF-8 bytes in place. Rows are file indices
 * (the tier names, row states and hot marks are per file; a folder has no row). Anything the
 * columns do not say exactly (an empty segment, a trailing "/", a size or mtime in a sparse map
 * that is missing or negative) is "not listed here": JavaScript answers it. Every index read
 * was bounds-checked once at install (cat_check), so a bad column refuses the table, never
 * reads out of it.
 */
#define CAT_OTHER 0xffffffffu /* a Uint32 column's "see the sparse map" (catalog.ts OTHER) */
#define CAT_COLUMNS 12
struct cat_view {
  size_t dirs, files;
  const uint32_t *sub_start, *sub_count, *dir_name_end;
  const uint8_t *dir_names;
  const double *file_start; /* dirs + 1 */
  const uint8_t *names;
  const uint32_t *name_end32; /* one of these two */
  const double *name_end64;
  const uint32_t *size, *mtime;
  const double *big, *odd; /* (file, value) pairs sorted by file: sizes of 4 GiB and more, mtimes not in whole seconds */
  size_t big_n, odd_n;
  uint32_t file_mode, dir_mode;
  uint64_t dir_size, dir_mtime_ms;
  napi_env env;
  napi_ref refs[CAT_COLUMNS];
  int nrefs;
};

static void cat_free(struct cat_view *c) {
  if (c == NULL) return;
  for (int i = 0; i < c->nrefs; i++) napi_delete_reference(c->env, c->refs[i]);
  free(c);
}

static size_t cat_name_end(const struct cat_view *c, size_t f) { return c->name_end32 != NULL ? c->name_end32[f] : (size_t)c->name_end64[f]; }

static int cat_cmp(const uint8_t *a, size_t an, const char *q, size_t qn) {
  int r = memcmp(a, q, an < qn ? an : qn);
  if (r != 0) return r;
  return an < qn ? -1 : an > qn;
}

/* The value of file f in a sorted (file, value) pair list: 1 and *v when present, whole and in [0, 2^53). */
static int cat_sparse(const double *pairs, size_t n, size_t f, uint64_t *v) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    double k = pairs[2 * mid];
    if (k == (double)f) {
      double x = pairs[2 * mid + 1];
      if (!(x >= 0 && x <= 9007199254740991.0) || x != (double)(uint64_t)x) return 0;
      *v = (uint64_t)x;
      return 1;
    }
    if (k < (double)f) lo = mid + 1;
    else hi = mid;
  }
  return 0;
}

static int cat_file(const struct cat_view *c, size_t f, struct attr_val *v) {
  uint32_t s = c->size[f], t = c->mtime[f];
  if (s != CAT_OTHER) v->size = s;
  else if (!cat_sparse(c->big, c->big_n, f, &v->size)) return 0;
  if (t != CAT_OTHER) v->mtime_ms = (uint64_t)t * 1000;
  else if (!cat_sparse(c->odd, c->odd_n, f, &v->mtime_ms)) return 0;
  v->mode = c->file_mode;
  v->nlink = 1;
  return 1;
}

/* Folder d's entry called q: 1 with *dir (a subfolder) or *file, else 0. */
static int cat_child(const struct cat_view *c, size_t d, const char *q, size_t qn, size_t *dir, size_t *file) {
  size_t lo = c->sub_start[d], hi = lo + c->sub_count[d];
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    size_t a = mid == 0 ? 0 : c->dir_name_end[mid - 1];
    int r = cat_cmp(c->dir_names + a, c->dir_name_end[mid] - a, q, qn);
    if (r == 0) { *dir = mid; *file = NO_ROW; return 1; }
    if (r < 0) lo = mid + 1;
    else hi = mid;
  }
  lo = (size_t)c->file_start[d];
  hi = (size_t)c->file_start[d + 1];
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    size_t a = mid == 0 ? 0 : cat_name_end(c, mid - 1);
    int r = cat_cmp(c->names + a, cat_name_end(c, mid) - a, q, qn);
    if (r == 0) { *file = mid; *dir = NO_ROW; return 1; }
    if (r < 0) lo = mid + 1;
    else hi = mid;
  }
  return 0;
}

static int cat_lookup(const struct cat_view *c, const char *path, size_t len, struct attr_val *v, size_t *row) {
  if (len == 0 || path[0] != '/') return 0;
  size_t d = 0, at = 1;
  while (at < len) {
    const char *slash = memchr(path + at, '/', len - at);
    size_t end = slash != NULL ? (size_t)(slash - path) : len;
    size_t sub, file;
    if (end == at || !cat_child(c, d, path + at, end - at, &sub, &file)) return 0; /* "//", or not listed */
    if (file != NO_ROW) {
      if (end != len || !cat_file(c, file, v)) return 0; /* "/file/..." is JavaScript's to answer */
      *row = file;
      return 1;
    }
    d = sub;
    at = end + 1;
    if (at == len) return 0; /* a trailing "/" */
  }
  v->mode = c->dir_mode;
  v->nlink = 2 + c->sub_count[d];
  v->size = c->dir_size;
  v->mtime_ms = c->dir_mtime_ms;
  *row = NO_ROW;
  return 1;
}

/* Path `path`'s attributes: 1 with *v and *row (its row, or NO_ROW), or 0 (not listed here: JavaScript answers). */
int attrs_lookup(const struct attrs *a, const char *path, size_t len, struct attr_val *v, size_t *row) {
  if (a->cat != NULL) return cat_lookup(a->cat, path, len, v, row);
  uint32_t r = a->index[attrs_slot(a, path, len, fnv1a(path, len))];
  if (r == 0) return 0;
  const struct attr_row *x = &a->rows[r - 1];
  *v = (struct attr_val){ x->size, x->mtime_ms, x->mode, x->nlink };
  *row = r - 1;
  return 1;
}

/* Row `row`'s attributes: 1, or 0 (no such row, or one JavaScript answers). */
int attrs_row(const struct attrs *a, size_t row, struct attr_val *v) {
  if (row >= a->n) return 0;
  if (a->cat != NULL) return cat_file(a->cat, row, v);
  const struct attr_row *x = &a->rows[row];
  *v = (struct attr_val){ x->size, x->mtime_ms, x->mode, x->nlink };
  return 1;
}

void attrs_free(struct attrs *a) {
  if (a == NULL) return;
  cat_free(a->cat);
  free(a->index);
  free(a->rows);
  free(a->paths);
  free(a->tier_dir);
  free(a->names);
  free(a->hot);
  free(a);
}

/* The stat fuse-native's populate_stat() would make of the ints JavaScript sends for this row. */
static void fill_stat(const struct attrs *a, const struct attr_val *row, struct stat *st) {
  memset(st, 0, sizeof *st);
  st->st_mode = row->mode;
  st->st_uid = a->uid;
  st->st_gid = a->gid;
  st->st_size = (off_t)row->size;
  st->st_nlink = row->nlink;
  st->st_blksize = a->blksize;
  st->st_blocks = (blkcnt_t)((row->size + 511) / 512);
  struct timespec ts = { (time_t)(row->mtime_ms / 1000), (long)(row->mtime_ms % 1000) * 1000000L };
  st->st_atim = ts;
  st->st_mtim = ts;
  st->st_ctim = ts;
}

int mem_getattr(const char *path, struct stat *st) {
  struct mount *m = mount_of_request();
  if (m == NULL) return -EIO; /* cannot happen: only our mounts have this getattr */
  pthread_rwlock_rdlock(&m->attrs_lock);
  const struct attrs *a = m->attrs;
  struct attr_val v;
  size_t row;
  if (a != NULL && attrs_lookup(a, path, strlen(path), &v, &row)) {
    fill_stat(a, &v, st);
    pthread_rwlock_unlock(&m->attrs_lock);
    __atomic_add_fetch(&m->attr_hits, 1, __ATOMIC_RELAXED);
    return 0;
  }
  pthread_rwlock_unlock(&m->attrs_lock);
  return m->getattr(path, st);
}


/*
 * The disk tier's part of a listing of n rows (see "Opens" in fuse_open.c): with `names`, a copy
 * of them, the hot marks and (returned in *rs) the row states. 0, -EINVAL or -ENOMEM (a is then
 * left for the caller to free).
 */
static int attrs_tier(struct mount *m, struct attrs *a, size_t n, const char *tier_dir, uint32_t tier_block, const uint8_t *names, struct row_state **rs) {
  *rs = NULL;
  /* The folder, its two-digit subfolder, the 64-digit name and ".map" must fit a path. */
  if (names != NULL && (tier_dir == NULL || strlen(tier_dir) + 4 + 64 + 4 >= PATH_MAX || tier_block == 0)) return -EINVAL;
  /* Rows are numbered by this listing: passthrough state kept from an earlier one cannot be renumbered, so no tier opens then. */
  if (names == NULL || n == 0 || __atomic_load_n(&m->rs, __ATOMIC_ACQUIRE) != NULL) return 0;
  *rs = calloc(n, sizeof **rs);
  a->tier_dir = strdup(tier_dir);
  a->names = malloc(32 * n);
  a->hot = calloc(n, sizeof *a->hot);
  if (*rs == NULL || a->tier_dir == NULL || a->names == NULL || a->hot == NULL) {
    free(*rs);
    *rs = NULL;
    return -ENOMEM;
  }
  memcpy(a->names, names, 32 * n);
  a->tier_block = tier_block;
  return 0;
}

/* Makes `a` (with row states rs, or NULL) the mount's listing, freeing the one before. */
static void attrs_publish(struct mount *m, struct attrs *a, struct row_state *rs) {
  if (rs != NULL) { /* before the names can be seen: an open that sees a name finds its row's state */
    m->rs_n = a->n;
    __atomic_store_n(&m->rs, rs, __ATOMIC_RELEASE);
  }
  pthread_rwlock_wrlock(&m->attrs_lock);
  struct attrs *old = m->attrs;
  m->attrs = a;
  pthread_rwlock_unlock(&m->attrs_lock);
  attrs_free(old);
}

/*
 * Installs the listing (n rows of 5 doubles: path length, mode, nlink, size, mtime in ms;
 * the paths' bytes one after another in `paths`), replacing any earlier one. Returns 0,
 * -ENODEV (no table for this mount), -EINVAL (a row does not fit) or -ENOMEM.
 */
int sluice_attrs_set(const void *thread, const char *paths, size_t paths_len, const double *rows, size_t n, uint32_t uid, uint32_t gid, uint32_t blksize,
                     const char *tier_dir, uint32_t tier_block, const uint8_t *names) {
  struct mount *m = mount_of_thread(thread);
  if (m == NULL) return -ENODEV;
  if (n == 0 || n > UINT32_MAX / 4) return -EINVAL;
  size_t slots = 16;
  while (slots < 2 * n) slots *= 2;
  struct attrs *a = calloc(1, sizeof *a);
  if (a != NULL) {
    a->index = calloc(slots, sizeof *a->index);
    a->rows = malloc(n * sizeof *a->rows);
    a->paths = malloc(paths_len > 0 ? paths_len : 1);
  }
  if (a == NULL || a->index == NULL || a->rows == NULL || a->paths == NULL) {
    attrs_free(a);
    return -ENOMEM;
  }
  struct row_state *rs;
  int err = attrs_tier(m, a, n, tier_dir, tier_block, names, &rs);
  if (err != 0) {
    attrs_free(a);
    return err;
  }
  a->uid = uid;
  a->gid = gid;
  a->blksize = blksize;
  a->n = n;
  a->mask = slots - 1;
  memcpy(a->paths, paths, paths_len);
  size_t off = 0;
  for (size_t r = 0; r < n; r++) {
    const double *v = rows + 5 * r;
    if (!(v[0] >= 1 && v[0] <= paths_len - off) || !(v[3] >= 0 && v[3] <= 9007199254740991.0) || !(v[4] >= 0 && v[4] <= 9007199254740991.0)) {
      free(rs);
      attrs_free(a);
      return -EINVAL;
    }
    struct attr_row *row = &a->rows[r];
    row->path_len = (uint32_t)v[0];
    row->path_off = off;
    row->mode = (uint32_t)v[1];
    row->nlink = (uint32_t)v[2];
    row->size = (uint64_t)v[3];
    row->mtime_ms = (uint64_t)v[4];
    row->hash = fnv1a(a->paths + off, row->path_len);
    off += row->path_len;
    /* A path listed twice keeps its first row (the tree has none such). */
    size_t i = attrs_slot(a, a->paths + row->path_off, row->path_len, row->hash);
    if (a->index[i] == 0) a->index[i] = (uint32_t)(r + 1);
  }
  attrs_publish(m, a, rs);
  return 0;
}

/* Property `name` of `obj`: a typed array of `type` (its elements and count, or a Buffer's bytes). */
static int cat_column(napi_env env, napi_value obj, const char *name, napi_typedarray_type type, const void **data, size_t *count, struct cat_view *c) {
  napi_value v;
  bool is;
  napi_typedarray_type t;
  napi_value ab;
  size_t off;
  void *p;
  if (napi_get_named_property(env, obj, name, &v) != napi_ok || napi_is_typedarray(env, v, &is) != napi_ok || !is) return 0;
  if (napi_get_typedarray_info(env, v, &t, count, &p, &ab, &off) != napi_ok || t != type) return 0;
  if (c->nrefs >= CAT_COLUMNS || napi_create_reference(env, v, 1, &c->refs[c->nrefs]) != napi_ok) return 0;
  c->nrefs++;
  *data = p != NULL ? p : (const void *)"";
  return 1;
}

static int cat_number(napi_env env, napi_value obj, const char *name, double *out) {
  napi_value v;
  return napi_get_named_property(env, obj, name, &v) == napi_ok && napi_get_value_double(env, v, out) == napi_ok;
}

/* Sorted (file, value) pairs of whole numbers, files below `files`. */
static int cat_pairs_ok(const double *p, size_t n, size_t files) {
  for (size_t i = 0; i < n; i++) {
    if (!(p[2 * i] >= 0 && p[2 * i] < (double)files) || p[2 * i] != (double)(uint64_t)p[2 * i]) return 0;
    if (i > 0 && !(p[2 * i] > p[2 * i - 2])) return 0;
  }
  return 1;
}

/* Every index a lookup reads lies inside its column: ranges within their tables, ends in order. */
static int cat_check(const struct cat_view *c, size_t dir_names_len, size_t names_len) {
  size_t prev = 0;
  for (size_t d = 0; d < c->dirs; d++) {
    if ((uint64_t)c->sub_start[d] + c->sub_count[d] > c->dirs || c->dir_name_end[d] < prev || c->dir_name_end[d] > dir_names_len) return 0;
    prev = c->dir_name_end[d];
  }
  double fprev = 0;
  for (size_t d = 0; d <= c->dirs; d++) {
    double x = c->file_start[d];
    if (!(x >= fprev && x <= (double)c->files) || x != (double)(uint64_t)x) return 0;
    fprev = x;
  }
  if (c->file_start[0] != 0 || c->file_start[c->dirs] != (double)c->files) return 0;
  prev = 0;
  for (size_t f = 0; f < c->files; f++) {
    if (c->name_end64 != NULL && !(c->name_end64[f] >= 0 && c->name_end64[f] <= (double)names_len)) return 0;
    size_t e = cat_name_end(c, f);
    if (e < prev || e > names_len) return 0;
    prev = e;
  }
  return cat_pairs_ok(c->big, c->big_n, c->files) && cat_pairs_ok(c->odd, c->odd_n, c->files);
}

/*
 * Installs the listing as the catalog's columns (see "Catalog"; `cat` as src/fs/catalog.ts
 * Catalog.columns() gives them, with fileMode, dirMode, dirSize and dirMtimeMs), replacing any
 * earlier one. With `names` (32 bytes per file), small files are opened from the tier. Returns 0,
 * -ENODEV, -EINVAL (a column missing, of another type, or inconsistent) or -ENOMEM. Main thread.
 */
int sluice_attrs_set_catalog(napi_env env, const void *thread, napi_value cat, uint32_t uid, uint32_t gid, uint32_t blksize,
                             const char *tier_dir, uint32_t tier_block, const uint8_t *names, size_t names_len) {
  struct mount *m = mount_of_thread(thread);
  if (m == NULL) return -ENODEV;
  struct attrs *a = calloc(1, sizeof *a);
  struct cat_view *c = calloc(1, sizeof *c);
  if (a == NULL || c == NULL) {
    free(a);
    free(c);
    return -ENOMEM;
  }
  a->cat = c;
  c->env = env;
  size_t n_sub, n_end, n_fs, n_dn, n_names, n_ne, n_mtime, n_big, n_odd;
  const void *ne;
  double fm, dm, ds, dt;
  int ok = cat_column(env, cat, "subStart", napi_uint32_array, (const void **)&c->sub_start, &c->dirs, c) &&
           cat_column(env, cat, "subCount", napi_uint32_array, (const void **)&c->sub_count, &n_sub, c) &&
           cat_column(env, cat, "dirNameEnd", napi_uint32_array, (const void **)&c->dir_name_end, &n_end, c) &&
           cat_column(env, cat, "dirNames", napi_uint8_array, (const void **)&c->dir_names, &n_dn, c) &&
           cat_column(env, cat, "fileStart", napi_float64_array, (const void **)&c->file_start, &n_fs, c) &&
           cat_column(env, cat, "names", napi_uint8_array, (const void **)&c->names, &n_names, c) &&
           cat_column(env, cat, "size", napi_uint32_array, (const void **)&c->size, &c->files, c) &&
           cat_column(env, cat, "mtime", napi_uint32_array, (const void **)&c->mtime, &n_mtime, c) &&
           cat_column(env, cat, "bigSize", napi_float64_array, (const void **)&c->big, &n_big, c) &&
           cat_column(env, cat, "oddMtime", napi_float64_array, (const void **)&c->odd, &n_odd, c) &&
           cat_number(env, cat, "fileMode", &fm) && cat_number(env, cat, "dirMode", &dm) && cat_number(env, cat, "dirSize", &ds) &&
           cat_number(env, cat, "dirMtimeMs", &dt);
  if (ok) { /* nameEnd: Uint32Array, or Float64Array once the names pass 4 GiB */
    ok = cat_column(env, cat, "nameEnd", napi_uint32_array, &ne, &n_ne, c);
    if (ok) c->name_end32 = ne;
    else if ((ok = cat_column(env, cat, "nameEnd", napi_float64_array, &ne, &n_ne, c))) c->name_end64 = ne;
  }
  ok = ok && c->dirs >= 1 && n_sub == c->dirs && n_end == c->dirs && n_fs == c->dirs + 1 && n_mtime == c->files && n_ne == c->files &&
       n_big % 2 == 0 && n_odd % 2 == 0 && c->files < UINT32_MAX &&
       fm >= 0 && fm <= 0xffff && dm >= 0 && dm <= 0xffff && ds >= 0 && ds <= 9007199254740991.0 && dt >= 0 && dt <= 9007199254740991.0;
  if (ok) {
    c->big_n = n_big / 2;
    c->odd_n = n_odd / 2;
    c->file_mode = (uint32_t)fm;
    c->dir_mode = (uint32_t)dm;
    c->dir_size = (uint64_t)ds;
    c->dir_mtime_ms = (uint64_t)dt;
    ok = cat_check(c, n_dn, n_names) && (names == NULL || names_len == 32 * c->files);
  }
  if (!ok) {
    attrs_free(a);
    return -EINVAL;
  }
  struct row_state *rs;
  int err = attrs_tier(m, a, c->files, tier_dir, tier_block, names, &rs);
  if (err != 0) {
    attrs_free(a);
    return err;
  }
  a->uid = uid;
  a->gid = gid;
  a->blksize = blksize;
  a->n = c->files;
  attrs_publish(m, a, rs);
  return 0;
}

/* getattrs answered from the listing since the last call; with `clear`, the listing goes too. */
uint64_t sluice_attrs_take(const void *thread, int clear) {
  struct mount *m = mount_of_thread(thread);
  if (m == NULL) return 0;
  if (clear) {
    pthread_rwlock_wrlock(&m->attrs_lock);
    struct attrs *old = m->attrs;
    m->attrs = NULL;
    pthread_rwlock_unlock(&m->attrs_lock);
    attrs_free(old);
  }
  return __atomic_exchange_n(&m->attr_hits, 0, __ATOMIC_RELAXED);
}

