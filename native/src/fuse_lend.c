/*
 * Lent blocks: a sequential reader's FUSE reads answered in libfuse's worker thread from
 * block cache buffers that JavaScript lends for them (issue 11).
 *
 * Why: through fuse-native every FUSE read is a hand-off from a libfuse worker to Node's
 * main thread and back (uv_async wake, a JavaScript call that makes a path string and an
 * external Buffer, the read cursor, a semaphore post). A 512 MiB file read with 1 MiB FUSE
 * reads costs 512 of them, although almost all are copies out of blocks the daemon already
 * holds: the read cursor only has work to do when a read is due to start its next
 * read-ahead batch. So JavaScript, after it answered a sequential read, lends this file the
 * blocks it holds from just behind that read onward, and says up to where the cursor can
 * do without seeing reads (src/prefetch/read-cursor.ts lendSpan: the point where its next
 * batch is due). Reads wholly inside that span are copied here; the first read past it goes
 * to JavaScript, which takes the lend back (with its counts and the furthest end read, so
 * the cursor's frontier moves as if it had seen every read), answers, and lends again.
 * Meanwhile JavaScript takes each lend's counts once a second (lendCounts) for its metrics.
 *
 * Table: per mount, LEND_SLOTS slots, direct-mapped by fh (the core's fh values only grow;
 * a lend whose slot is held by another handle is refused and its reads go to JavaScript).
 * A lend is: the file's size, the span [start, stop] (a read [off, off + size) is answered
 * when start <= off and min(off + size, file size) <= stop; a read at or past the end of
 * the file is answered 0), and up to LEND_RANGES memory ranges, contiguous in the file,
 * covering [start, start + total) (the caller clips stop to that).
 *
 * Safety: each slot has a rwlock. Reads hold it shared while they copy, so two workers copy
 * at once; lendSet and lendTake hold it exclusive (writer-preferring, so JavaScript is not
 * starved by a stream of reads). JavaScript keeps every lent buffer referenced and its
 * pooled slab pinned (src/cache/buffer-pool.ts recycles a slab only at zero references)
 * until lendTake has returned: after that no worker holds the lock with the old ranges, so
 * the bytes a copy reads can never be recycled under it. A read answered without a copy
 * (sluice_lends_view: the reply is written from the lent buffer itself, fuse_init.c "Replies
 * from lent memory") holds the shared lock until its reply's writev has returned, so the same
 * holds for it. The blocks are of the one ETag the
 * handle was opened with (the block cache's key), so a lend never mixes versions. RELEASE
 * of a lent handle goes to JavaScript as before (fuse_memread.c finds no entry of its own),
 * which takes the lend before the core releases the handle; at unmount JavaScript takes
 * every lend it still has.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <node_api.h>

#include "sluice_lend.h"
#include "sluice_napi.h"

/*
 * Slots per mount: 256. A lend is held only by a handle reading sequentially between two of
 * its JavaScript reads, and a training job has tens of such handles open at once, not
 * hundreds; a refused lend only costs the hand-offs it would have saved. 256 slots of
 * ~350 bytes are 90 KB per mount.
 */
#define LEND_SLOTS 256
/*
 * Ranges per lend: 16. Blocks of one GET are slices of one buffer and lent as one range, so
 * 16 ranges cover 16 parts (128 MiB at the default 8 MiB part size, twice --max-prefetch's
 * default); blocks that each have a buffer of their own (no pool) are lent 16 at a time.
 */
#define LEND_RANGES 16

struct lend {
  pthread_rwlock_t lock;
  int used;
  uint64_t fh, size, start, stop;
  uint32_t n;
  uint64_t len[LEND_RANGES];
  const char *bytes[LEND_RANGES];
  /* Since lendSet (atomic; read by lendTake under the exclusive lock): reads, bytes served, bytes asked, furthest end served. */
  uint64_t reads, served, asked, end;
};

struct sluice_lends {
  struct lend slots[LEND_SLOTS];
};

struct sluice_lends *sluice_lends_new(void) {
  struct sluice_lends *t = calloc(1, sizeof *t);
  if (t == NULL) return NULL;
  pthread_rwlockattr_t a;
  pthread_rwlockattr_init(&a);
  pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  for (int i = 0; i < LEND_SLOTS; i++) pthread_rwlock_init(&t->slots[i].lock, &a);
  pthread_rwlockattr_destroy(&a);
  return t;
}

void sluice_lends_reset(struct sluice_lends *t) {
  if (t == NULL) return;
  for (int i = 0; i < LEND_SLOTS; i++) {
    pthread_rwlock_wrlock(&t->slots[i].lock);
    t->slots[i].used = 0;
    pthread_rwlock_unlock(&t->slots[i].lock);
  }
}

/* Adds a read of `size` bytes at `off` that served n bytes to the lend's counts (under its read lock). */
static void count_read(struct lend *l, uint64_t off, uint64_t n, size_t size) {
  __atomic_add_fetch(&l->reads, 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&l->served, n, __ATOMIC_RELAXED);
  __atomic_add_fetch(&l->asked, (uint64_t)size, __ATOMIC_RELAXED);
  uint64_t seen = __atomic_load_n(&l->end, __ATOMIC_RELAXED), reached = off + n;
  while (seen < reached && !__atomic_compare_exchange_n(&l->end, &seen, reached, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

/* fh's lend with its read lock held, or NULL when fh has none (nothing held). */
static struct lend *lend_of(struct sluice_lends *t, uint64_t fh) {
  struct lend *l = &t->slots[fh % LEND_SLOTS];
  pthread_rwlock_rdlock(&l->lock);
  if (l->used && l->fh == fh) return l;
  pthread_rwlock_unlock(&l->lock);
  return NULL;
}

int sluice_lends_read(struct sluice_lends *t, uint64_t fh, char *buf, size_t size, int64_t offset) {
  if (t == NULL || offset < 0) return -1;
  struct lend *l = lend_of(t, fh);
  if (l == NULL) return -1;
  uint64_t off = (uint64_t)offset, end = off + size;
  if (end > l->size) end = l->size;
  int n;
  if (off >= l->size) {
    n = 0;
  } else if (off < l->start || end > l->stop) {
    n = -1;
  } else {
    uint64_t at = l->start;
    for (uint32_t i = 0; i < l->n && at < end; i++) {
      uint64_t next = at + l->len[i];
      if (next > off) {
        uint64_t from = off > at ? off : at, to = end < next ? end : next;
        memcpy(buf + (from - off), l->bytes[i] + (from - at), (size_t)(to - from));
      }
      at = next;
    }
    n = (int)(end - off);
  }
  if (n >= 0) count_read(l, off, (uint64_t)n, size);
  pthread_rwlock_unlock(&l->lock);
  return n;
}

int sluice_lends_view(struct sluice_lends *t, uint64_t fh, size_t size, int64_t offset, const char **at, void **hold) {
  if (t == NULL || offset < 0 || size == 0) return -1;
  struct lend *l = lend_of(t, fh);
  if (l == NULL) return -1;
  uint64_t off = (uint64_t)offset, end = off + size;
  if (end > l->size) end = l->size;
  if (off >= l->size) {
    count_read(l, off, 0, size);
    pthread_rwlock_unlock(&l->lock);
    return 0;
  }
  if (off < l->start || end > l->stop) {
    pthread_rwlock_unlock(&l->lock);
    return -1;
  }
  uint64_t from = l->start;
  for (uint32_t i = 0; i < l->n; i++) {
    uint64_t next = from + l->len[i];
    if (off >= from && end <= next) {
      /* Wholly inside buffer i: the caller replies from it, this slot's read lock held until sluice_lends_unlock(). */
      count_read(l, off, end - off, size);
      *at = l->bytes[i] + (off - from);
      *hold = l;
      return (int)(end - off);
    }
    if (next > off) break; /* it starts in buffer i and goes on into the next */
    from = next;
  }
  pthread_rwlock_unlock(&l->lock);
  return -2;
}

void sluice_lends_unlock(void *hold) {
  pthread_rwlock_unlock(&((struct lend *)hold)->lock);
}

/* ---- N-API ---- */

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
 * or more than LEND_RANGES parts.
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
  if (n == 0 || n > LEND_RANGES) return sluice_boolean(env, 0);
  uint64_t len[LEND_RANGES], total = 0;
  const char *bytes[LEND_RANGES];
  for (uint32_t i = 0; i < n; i++) {
    napi_value part;
    void *data;
    size_t length;
    if (napi_get_element(env, argv[5], i, &part) != napi_ok || !sluice_buffer_arg(env, part, &data, &length)) return sluice_bad_args(env, usage);
    len[i] = length;
    bytes[i] = data;
    total += length;
  }
  if (stop > start + total) stop = start + total;
  if (stop > size) stop = size;
  struct sluice_lends *t = sluice_memread_lends(thread);
  if (t == NULL || stop <= start) return sluice_boolean(env, 0);
  struct lend *l = &t->slots[fh % LEND_SLOTS];
  int ok = 0;
  pthread_rwlock_wrlock(&l->lock);
  if (!l->used) {
    l->fh = fh;
    l->size = size;
    l->start = start;
    l->stop = stop;
    l->n = n;
    memcpy(l->len, len, n * sizeof len[0]);
    memcpy(l->bytes, bytes, n * sizeof bytes[0]);
    l->reads = l->served = l->asked = l->end = 0;
    l->used = 1;
    ok = 1;
  }
  pthread_rwlock_unlock(&l->lock);
  return sluice_boolean(env, ok);
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
  struct sluice_lends *t = sluice_memread_lends(thread);
  if (t == NULL) return sluice_boolean(env, 0);
  struct lend *l = &t->slots[fh % LEND_SLOTS];
  int found = 0;
  /* Exclusive for both: a take waits for every copy, and counts are zeroed together, never between one read's adds. */
  pthread_rwlock_wrlock(&l->lock);
  if (l->used && l->fh == fh) {
    out[0] = (double)l->reads;
    out[1] = (double)l->served;
    out[2] = (double)l->asked;
    out[3] = (double)l->end;
    if (end) l->used = 0;
    else l->reads = l->served = l->asked = 0;
    found = 1;
  }
  pthread_rwlock_unlock(&l->lock);
  return sluice_boolean(env, found);
}

static napi_value js_lend_take(napi_env env, napi_callback_info info) {
  return lend_counts(env, info, 1, "lendTake(thread: Buffer, fh: number, out: Float64Array(4))");
}

static napi_value js_lend_counts(napi_env env, napi_callback_info info) {
  return lend_counts(env, info, 0, "lendCounts(thread: Buffer, fh: number, out: Float64Array(4))");
}

napi_status sluice_lend_init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    {"lendSet", NULL, js_lend_set, NULL, NULL, NULL, napi_enumerable, NULL},
    {"lendTake", NULL, js_lend_take, NULL, NULL, NULL, napi_enumerable, NULL},
    {"lendCounts", NULL, js_lend_counts, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  return napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
}
