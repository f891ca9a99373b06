/*
 * The JavaScript face of the memread layer (fuse_memread.c, fuse_attrs.c, fuse_open.c) and of
 * the lend tables (fuse_lend.c), which it finds by mount:
 * argument checks and conversions only, each function a call into the C side named in its
 * comment. Registered on the addon's exports by sluice_memread_init (binding.c); the
 * TypeScript types live in src/fuse/native.ts (MemReads).
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

/* ---- N-API ---- */

static int fh_arg(napi_env env, napi_value v, uint64_t *fh) {
  double d;
  if (napi_get_value_double(env, v, &d) != napi_ok || !(d >= 0) || d > 9007199254740991.0) return 0;
  *fh = (uint64_t)d;
  return 1;
}


/* memReadAdd(thread: Buffer, fh: number, bytes: Buffer): boolean (false: no table for this mount, or the slot is taken). */
static napi_value js_add(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  void *thread, *bytes;
  size_t tl, bl;
  uint64_t fh;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 3 || !sluice_buffer_arg(env, argv[0], &thread, &tl) ||
      !fh_arg(env, argv[1], &fh) || !sluice_buffer_arg(env, argv[2], &bytes, &bl)) {
    return sluice_bad_args(env, "memReadAdd(thread: Buffer, fh: number, bytes: Buffer)");
  }
  return sluice_boolean(env, sluice_memread_add(thread, fh, bytes, bl) == 0);
}

/* memReadRemove(thread, fh, counts: Float64Array(3)): boolean; counts = reads, bytes served, bytes asked. */
static napi_value js_remove(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  void *thread;
  size_t tl, n;
  uint64_t fh, counts[3];
  double *out;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 3 || !sluice_buffer_arg(env, argv[0], &thread, &tl) ||
      !fh_arg(env, argv[1], &fh) || !sluice_f64_arg(env, argv[2], &out, &n) || n < 3) {
    return sluice_bad_args(env, "memReadRemove(thread: Buffer, fh: number, counts: Float64Array(3))");
  }
  if (!sluice_memread_remove(thread, fh, counts)) return sluice_boolean(env, 0);
  for (int i = 0; i < 3; i++) out[i] = (double)counts[i];
  return sluice_boolean(env, 1);
}

/* The (thread: Buffer, out: Float64Array of at least `min` doubles) that drain and ownOpensTake take: 1, or 0 when malformed. */
static int thread_out_args(napi_env env, napi_callback_info info, void **thread, double **out, size_t *n, size_t min) {
  size_t argc = 2, tl;
  napi_value argv[2];
  return napi_get_cb_info(env, info, &argc, argv, NULL, NULL) == napi_ok && argc >= 2 && sluice_buffer_arg(env, argv[0], thread, &tl) &&
         sluice_f64_arg(env, argv[1], out, n) && *n >= min;
}

/* Shared by memReadDrain (released handles) and memReadClear (live ones, removed): records of (fh, reads, served, asked). */
static napi_value drain(napi_env env, napi_callback_info info, int clear) {
  void *thread;
  size_t n;
  double *out;
  if (!thread_out_args(env, info, &thread, &out, &n, 4)) {
    return sluice_bad_args(env, "memReadDrain/Clear(thread: Buffer, out: Float64Array(4 * k))");
  }
  uint64_t raw[4 * 64];
  size_t max = n / 4, got = 0;
  while (got < max) {
    size_t want = max - got < 64 ? max - got : 64;
    size_t k = sluice_memread_drain(thread, raw, want, clear);
    for (size_t i = 0; i < 4 * k; i++) out[4 * got + i] = (double)raw[i];
    got += k;
    if (k < want) break;
  }
  napi_value r;
  napi_create_uint32(env, (uint32_t)got, &r);
  return r;
}
static napi_value js_drain(napi_env env, napi_callback_info info) { return drain(env, info, 0); }
static napi_value js_clear(napi_env env, napi_callback_info info) { return drain(env, info, 1); }

/* memReadMounted(thread): boolean, whether that mount's reads and releases pass through here. */
static napi_value js_mounted(napi_env env, napi_callback_info info) {
  void *thread;
  size_t tl;
  if (!sluice_only_buffer_arg(env, info, &thread, &tl)) return sluice_bad_args(env, "memReadMounted(thread: Buffer)");
  return sluice_boolean(env, sluice_memread_mounted(thread));
}

/* memReadLiveMounts(): how many mounts of this process have a live struct fuse (tests: an ended mount's is forgotten, see "Ended mounts"). */
static napi_value js_live_mounts(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value r;
  napi_create_int32(env, live_mounts(), &r);
  return r;
}

static int u32_arg(napi_env env, napi_value v, uint32_t *out) {
  return napi_get_value_uint32(env, v, out) == napi_ok;
}

/*
 * attrTableSet(thread, paths: Buffer, rows: Float64Array(5 * n), uid, gid, blksize[, tierDir: string, tierBlock: number,
 * names: Buffer(32 * n)]): boolean (false: no table for this mount, a bad row or argument, or no memory). With the
 * last three, small files with a name are opened here from the tier (see "Opens").
 */
static napi_value js_attrs_set(napi_env env, napi_callback_info info) {
  size_t argc = 9;
  napi_value argv[9];
  void *thread, *paths, *names = NULL;
  size_t tl, pl, n, nl = 0;
  double *rows;
  uint32_t uid, gid, blksize, tier_block = 0;
  char tier_dir[PATH_MAX];
  size_t dl = 0;
  static const char *usage = "attrTableSet(thread: Buffer, paths: Buffer, rows: Float64Array(5 * n), uid: number, gid: number, blksize: number[, tierDir: string, tierBlock: number, names: Buffer])";
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 6 || !sluice_buffer_arg(env, argv[0], &thread, &tl) ||
      !sluice_buffer_arg(env, argv[1], &paths, &pl) || !sluice_f64_arg(env, argv[2], &rows, &n) || n % 5 != 0 ||
      !u32_arg(env, argv[3], &uid) || !u32_arg(env, argv[4], &gid) || !u32_arg(env, argv[5], &blksize)) {
    return sluice_bad_args(env, usage);
  }
  if (argc >= 9) {
    if (napi_get_value_string_utf8(env, argv[6], tier_dir, sizeof tier_dir, &dl) != napi_ok || !u32_arg(env, argv[7], &tier_block) ||
        !sluice_buffer_arg(env, argv[8], &names, &nl)) {
      return sluice_bad_args(env, usage);
    }
    /* A folder that filled the buffer was cut: refuse rather than open the wrong files. */
    if (dl + 1 >= sizeof tier_dir || nl != 32 * (n / 5)) return sluice_boolean(env, 0);
  }
  return sluice_boolean(env, sluice_attrs_set(thread, paths, pl, rows, n / 5, uid, gid, blksize, names != NULL ? tier_dir : NULL, tier_block, names) == 0);
}


/*
 * attrTableSetCatalog(thread, cat: object, uid, gid, blksize[, tierDir: string, tierBlock: number, names: Buffer]):
 * boolean. The listing as the catalog's columns (fuse_attrs.c "Catalog"; cat as src/fs/catalog.ts
 * Catalog.columns() plus fileMode, dirMode, dirSize, dirMtimeMs); false when refused.
 */
static napi_value js_attrs_set_catalog(napi_env env, napi_callback_info info) {
  size_t argc = 8;
  napi_value argv[8];
  void *thread, *names = NULL;
  size_t tl, nl = 0, dl = 0;
  uint32_t uid, gid, blksize, tier_block = 0;
  char tier_dir[PATH_MAX];
  napi_valuetype t;
  static const char *usage = "attrTableSetCatalog(thread: Buffer, cat: object, uid: number, gid: number, blksize: number[, tierDir: string, tierBlock: number, names: Buffer])";
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 5 || !sluice_buffer_arg(env, argv[0], &thread, &tl) ||
      napi_typeof(env, argv[1], &t) != napi_ok || t != napi_object || !u32_arg(env, argv[2], &uid) || !u32_arg(env, argv[3], &gid) ||
      !u32_arg(env, argv[4], &blksize)) {
    return sluice_bad_args(env, usage);
  }
  if (argc >= 8) {
    if (napi_get_value_string_utf8(env, argv[5], tier_dir, sizeof tier_dir, &dl) != napi_ok || !u32_arg(env, argv[6], &tier_block) ||
        !sluice_buffer_arg(env, argv[7], &names, &nl)) {
      return sluice_bad_args(env, usage);
    }
    if (dl + 1 >= sizeof tier_dir) return sluice_boolean(env, 0);
  }
  return sluice_boolean(env, sluice_attrs_set_catalog(env, thread, argv[1], uid, gid, blksize, names != NULL ? tier_dir : NULL, tier_block, names, nl) == 0);
}

/* The arguments (thread: Buffer, x) of a call: 1 with the thread's bytes and x, else 0. */
static int thread_and_arg(napi_env env, napi_callback_info info, void **thread, napi_value *x) {
  size_t argc = 2;
  napi_value argv[2];
  size_t tl;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 || !sluice_buffer_arg(env, argv[0], thread, &tl)) return 0;
  *x = argv[1];
  return 1;
}

/* tierHotMark(thread, row: number): boolean (see sluice_tier_hot). */
static napi_value js_tier_hot(napi_env env, napi_callback_info info) {
  void *thread;
  napi_value x;
  uint32_t row;
  if (!thread_and_arg(env, info, &thread, &x) || !u32_arg(env, x, &row)) return sluice_bad_args(env, "tierHotMark(thread: Buffer, row: number)");
  return sluice_boolean(env, sluice_tier_hot(thread, row));
}

/* ownOpensTake(thread, out: Float64Array(OWN_COUNTS)): the counts of own_counts (see there) since the last take. */
static napi_value js_own_take(napi_env env, napi_callback_info info) {
  void *thread;
  size_t n;
  double *out;
  if (!thread_out_args(env, info, &thread, &out, &n, OWN_COUNTS)) {
    return sluice_bad_args(env, "ownOpensTake(thread: Buffer, out: Float64Array(13))");
  }
  uint64_t c[OWN_COUNTS];
  sluice_own_take(thread, c);
  for (int i = 0; i < OWN_COUNTS; i++) out[i] = (double)c[i];
  return NULL;
}

/* attrTableTake(thread, clear: boolean): number of getattrs answered from the table since the last take. */
static napi_value js_attrs_take(napi_env env, napi_callback_info info) {
  void *thread;
  napi_value x;
  bool clear = false;
  if (!thread_and_arg(env, info, &thread, &x) || napi_get_value_bool(env, x, &clear) != napi_ok) {
    return sluice_bad_args(env, "attrTableTake(thread: Buffer, clear: boolean)");
  }
  napi_value r;
  napi_create_double(env, (double)sluice_attrs_take(thread, clear), &r);
  return r;
}

/* ---- lends (fuse_lend.c): the table is this mount's ---- */

/* A whole number in [0, 2^53). */
static int u53_arg(napi_env env, napi_value v, uint64_t *out) {
  double d;
  if (napi_get_value_double(env, v, &d) != napi_ok || !(d >= 0) || d > 9007199254740991.0 || d != (double)(uint64_t)d) return 0;
  *out = (uint64_t)d;
  return 1;
}

/*
 * lendSet(thread: Buffer, fh: number, start: number, stop: number, size: number, parts: Buffer[]): boolean.
 * Answers fh's reads inside [start, stop] from parts (contiguous in the file from start) until
 * lendTake. False: no table for this mount, the slot is held (also by fh itself: take first),
 * or more than SLUICE_LEND_RANGES parts (sluice_lends_set).
 */
static napi_value js_lend_set(napi_env env, napi_callback_info info) {
  size_t argc = 6;
  napi_value argv[6];
  void *thread;
  size_t tl;
  uint64_t fh, start, stop, size;
  uint32_t n = 0;
  bool is_array = false;
  static const char usage[] = "lendSet(thread: Buffer, fh: number, start: number, stop: number, size: number, parts: Buffer[])";
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 6 || !sluice_buffer_arg(env, argv[0], &thread, &tl) ||
      !u53_arg(env, argv[1], &fh) || !u53_arg(env, argv[2], &start) || !u53_arg(env, argv[3], &stop) || !u53_arg(env, argv[4], &size) ||
      napi_is_array(env, argv[5], &is_array) != napi_ok || !is_array || napi_get_array_length(env, argv[5], &n) != napi_ok) {
    return sluice_bad_args(env, usage);
  }
  if (n == 0 || n > SLUICE_LEND_RANGES) return sluice_boolean(env, 0);
  uint64_t len[SLUICE_LEND_RANGES];
  const char *bytes[SLUICE_LEND_RANGES];
  for (uint32_t i = 0; i < n; i++) {
    napi_value part;
    void *data;
    size_t length;
    if (napi_get_element(env, argv[5], i, &part) != napi_ok || !sluice_buffer_arg(env, part, &data, &length)) return sluice_bad_args(env, usage);
    len[i] = length;
    bytes[i] = data;
  }
  return sluice_boolean(env, sluice_lends_set(sluice_memread_lends(thread), fh, start, stop, size, n, len, bytes));
}

/*
 * lendTake(thread: Buffer, fh: number, out: Float64Array(4)): boolean. Ends fh's lend: once it
 * returns, no read copies from its parts. out = reads answered, bytes served, bytes the kernel
 * asked for (each since lendSet or the last lendCounts), the furthest file offset served (0:
 * none). False when fh had no lend.
 *
 * lendCounts(thread, fh, out): the same counts, then zeroed (the furthest offset is not); the
 * lend stays. So the metrics of a long lend lag by at most the caller's period.
 */
static napi_value lend_counts(napi_env env, napi_callback_info info, int end, const char *usage) {
  size_t argc = 3;
  napi_value argv[3];
  void *thread;
  size_t tl, count = 0;
  uint64_t fh;
  double *out = NULL;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 3 || !sluice_buffer_arg(env, argv[0], &thread, &tl) ||
      !u53_arg(env, argv[1], &fh) || !sluice_f64_arg(env, argv[2], &out, &count) || count < 4) {
    return sluice_bad_args(env, usage);
  }
  uint64_t c[4];
  if (!sluice_lends_counts(sluice_memread_lends(thread), fh, end, c)) return sluice_boolean(env, 0);
  for (int i = 0; i < 4; i++) out[i] = (double)c[i];
  return sluice_boolean(env, 1);
}

static napi_value js_lend_take(napi_env env, napi_callback_info info) {
  return lend_counts(env, info, 1, "lendTake(thread: Buffer, fh: number, out: Float64Array(4))");
}

static napi_value js_lend_counts(napi_env env, napi_callback_info info) {
  return lend_counts(env, info, 0, "lendCounts(thread: Buffer, fh: number, out: Float64Array(4))");
}

napi_status sluice_memread_init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    {"memReadAdd", NULL, js_add, NULL, NULL, NULL, napi_enumerable, NULL},
    {"memReadRemove", NULL, js_remove, NULL, NULL, NULL, napi_enumerable, NULL},
    {"memReadDrain", NULL, js_drain, NULL, NULL, NULL, napi_enumerable, NULL},
    {"memReadClear", NULL, js_clear, NULL, NULL, NULL, napi_enumerable, NULL},
    {"memReadMounted", NULL, js_mounted, NULL, NULL, NULL, napi_enumerable, NULL},
    {"memReadLiveMounts", NULL, js_live_mounts, NULL, NULL, NULL, napi_enumerable, NULL},
    {"attrTableSet", NULL, js_attrs_set, NULL, NULL, NULL, napi_enumerable, NULL},
    {"attrTableSetCatalog", NULL, js_attrs_set_catalog, NULL, NULL, NULL, napi_enumerable, NULL},
    {"attrTableTake", NULL, js_attrs_take, NULL, NULL, NULL, napi_enumerable, NULL},
    {"ownOpensTake", NULL, js_own_take, NULL, NULL, NULL, napi_enumerable, NULL},
    {"tierHotMark", NULL, js_tier_hot, NULL, NULL, NULL, napi_enumerable, NULL},
    {"lendSet", NULL, js_lend_set, NULL, NULL, NULL, napi_enumerable, NULL},
    {"lendTake", NULL, js_lend_take, NULL, NULL, NULL, napi_enumerable, NULL},
    {"lendCounts", NULL, js_lend_counts, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  return napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
}

