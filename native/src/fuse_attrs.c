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

const struct attr_row *attrs_find(const struct attrs *a, const char *path, size_t len) {
  uint32_t r = a->index[attrs_slot(a, path, len, fnv1a(path, len))];
  return r == 0 ? NULL : &a->rows[r - 1];
}

void attrs_free(struct attrs *a) {
  if (a == NULL) return;
  free(a->index);
  free(a->rows);
  free(a->paths);
  free(a->tier_dir);
  free(a->names);
  free(a->hot);
  free(a);
}

/* The stat fuse-native's populate_stat() would make of the ints JavaScript sends for this row. */
static void fill_stat(const struct attrs *a, const struct attr_row *row, struct stat *st) {
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
  const struct attr_row *row = a != NULL ? attrs_find(a, path, strlen(path)) : NULL;
  if (row != NULL) {
    fill_stat(a, row, st);
    pthread_rwlock_unlock(&m->attrs_lock);
    __atomic_add_fetch(&m->attr_hits, 1, __ATOMIC_RELAXED);
    return 0;
  }
  pthread_rwlock_unlock(&m->attrs_lock);
  return m->getattr(path, st);
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
  /* The folder, its two-digit subfolder, the 64-digit name and ".map" must fit a path. */
  if (names != NULL && (tier_dir == NULL || strlen(tier_dir) + 4 + 64 + 4 >= PATH_MAX || tier_block == 0)) return -EINVAL;
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
  /* Rows are numbered by this listing: passthrough state kept from an earlier one cannot be renumbered, so no tier opens then. */
  if (names != NULL && __atomic_load_n(&m->rs, __ATOMIC_ACQUIRE) != NULL) names = NULL;
  struct row_state *rs = NULL;
  if (names != NULL) {
    rs = calloc(n, sizeof *rs);
    if (rs == NULL) {
      attrs_free(a);
      return -ENOMEM;
    }
    a->tier_dir = strdup(tier_dir);
    a->names = malloc(32 * n);
    a->hot = calloc(n, sizeof *a->hot);
    if (a->tier_dir == NULL || a->names == NULL || a->hot == NULL) {
      free(rs);
      attrs_free(a);
      return -ENOMEM;
    }
    memcpy(a->names, names, 32 * n);
    a->tier_block = tier_block;
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
  if (rs != NULL) { /* before the names can be seen: an open that sees a name finds its row's state */
    m->rs_n = n;
    __atomic_store_n(&m->rs, rs, __ATOMIC_RELEASE);
  }
  pthread_rwlock_wrlock(&m->attrs_lock);
  struct attrs *old = m->attrs;
  m->attrs = a;
  pthread_rwlock_unlock(&m->attrs_lock);
  attrs_free(old);
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

