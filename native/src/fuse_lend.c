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
/* Ranges per lend: SLUICE_LEND_RANGES (sluice_lend.h says why 16). */
#define LEND_RANGES SLUICE_LEND_RANGES

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

/*
 * Sets fh's lend (see sluice_lend.h): its reads inside [start, stop) are answered from the n
 * parts until sluice_lends_counts(..., end = 1). stop is first cut to the parts' bytes and
 * the file's size. 1, or 0 when the slot is held (also by fh itself: take first), n is 0 or
 * more than LEND_RANGES, or nothing is left to lend.
 */
int sluice_lends_set(struct sluice_lends *t, uint64_t fh, uint64_t start, uint64_t stop, uint64_t size, uint32_t n, const uint64_t *len, const char *const *bytes) {
  if (t == NULL || n == 0 || n > LEND_RANGES) return 0;
  uint64_t total = 0;
  for (uint32_t i = 0; i < n; i++) total += len[i];
  if (stop > start + total) stop = start + total;
  if (stop > size) stop = size;
  if (stop <= start) return 0;
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
  return ok;
}

/*
 * fh's counts into out: reads answered, bytes served, bytes the kernel asked for (each since
 * the lend was set or last counted), the furthest file offset served (0: none). With `end`
 * the lend ends: once this returns, no read copies from its parts; else the first three are
 * zeroed and the lend stays. 1, or 0 when fh has no lend.
 */
int sluice_lends_counts(struct sluice_lends *t, uint64_t fh, int end, uint64_t out[4]) {
  if (t == NULL) return 0;
  struct lend *l = &t->slots[fh % LEND_SLOTS];
  int found = 0;
  /* Exclusive for both: a take waits for every copy, and counts are zeroed together, never between one read's adds. */
  pthread_rwlock_wrlock(&l->lock);
  if (l->used && l->fh == fh) {
    out[0] = l->reads;
    out[1] = l->served;
    out[2] = l->asked;
    out[3] = l->end;
    if (end) l->used = 0;
    else l->reads = l->served = l->asked = 0;
    found = 1;
  }
  pthread_rwlock_unlock(&l->lock);
  return found;
}

/*
 * Views: a read JavaScript answers, replied from the block cache's buffer itself (issue 11).
 *
 * Why: a lend answers only the reads of bytes already resident when JavaScript lent them. A
 * reader that keeps up with the download reaches blocks still in flight, so its reads go to
 * JavaScript (in a 4-reader run, 40% of them), which copied each into libfuse's buffer: one
 * user-space copy of those bytes, the largest user-space cost left on the read path.
 *
 * How: mem_read_buf (fuse_memread.c), when this thread can reply from other memory
 * (sluice_fuse_reply_can_hold), writes an invitation at the start of the buffer it hands to
 * JavaScript (sluice_view_invite; any other such buffer gets the invitation's bytes cleared, so
 * a stale one from recycled memory is never seen). JavaScript, seeing it (viewInvited), may
 * answer without copying: viewReply writes, over the invitation, where the bytes are and a
 * note to release them by, and the read replies SLUICE_VIEW_CODE instead of a byte count. The
 * worker, woken by that reply (fuse-native's semaphore orders JavaScript's writes before its
 * reads), takes the view (sluice_view_take) and replies from those bytes as a lent read does
 * (fuse_init.c "Replies from lent memory"). Once the reply's writev has returned,
 * sluice_view_release pushes the note onto a list JavaScript empties (viewsDone) to unpin the
 * buffer: until then JavaScript keeps it referenced and its pooled slab pinned, so the bytes
 * cannot be recycled while the kernel copies them.
 *
 * The list is a lock-free stack of the notes themselves (allocated by viewReply, freed by
 * viewsDone): workers push with a compare-and-swap, JavaScript takes the whole stack with an
 * exchange, so no push is lost and no node is reused while a worker holds it (no ABA).
 * SLUICE_NO_VIEW=1 (fuse_memread.c) sends no invitations: every read is copied as before.
 */
#define VIEW_INVITE 0x3156656369756c73ULL /* "sluiceV1" in memory order (little-endian) */
#define VIEW_DONE 0x3256656369756c73ULL   /* "sluiceV2" */

struct view_note {
  struct view_note *next;
  double id;
};

/* What viewReply writes over the invitation. */
struct view_desc {
  uint64_t magic;
  const char *at;
  uint64_t n;
  struct view_note *note;
};

static struct view_note *views_done; /* atomic: notes of replies sent, not yet taken by JavaScript */

void sluice_view_invite(char *mem, size_t size, int invite) {
  if (size < sizeof(struct view_desc)) return;
  uint64_t m = invite ? VIEW_INVITE : 0;
  memcpy(mem, &m, sizeof m);
}

int sluice_view_take(const char *mem, size_t size, const char **at, size_t *n, void **note) {
  struct view_desc d;
  if (size < sizeof d) return -1;
  memcpy(&d, mem, sizeof d);
  if (d.magic != VIEW_DONE || d.n > size || d.note == NULL) return -1;
  *at = d.at;
  *n = (size_t)d.n;
  *note = d.note;
  return 0;
}

void sluice_view_release(void *arg) {
  struct view_note *note = arg;
  struct view_note *head = __atomic_load_n(&views_done, __ATOMIC_RELAXED);
  do note->next = head;
  while (!__atomic_compare_exchange_n(&views_done, &head, note, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

/* viewInvited(buf: Buffer): boolean. Whether buf (a read's buffer from fuse-native) carries an invitation. */
static napi_value js_view_invited(napi_env env, napi_callback_info info) {
  void *data;
  size_t len;
  if (!sluice_only_buffer_arg(env, info, &data, &len)) return sluice_bad_args(env, "viewInvited(buf: Buffer)");
  uint64_t m = 0;
  if (len >= sizeof(struct view_desc)) memcpy(&m, data, sizeof m);
  return sluice_boolean(env, m == VIEW_INVITE);
}

/*
 * viewReply(buf: Buffer, bytes: Buffer, id: number): boolean. Answers the invited read whose
 * buffer is `buf` with `bytes` (1 to buf.length of them): the read must then reply
 * SLUICE_VIEW_CODE (viewCode), and `id` comes back from viewsDone once the reply is sent.
 * False (nothing written) when buf has no invitation, bytes do not fit, or out of memory.
 */
static napi_value js_view_reply(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  void *data, *bytes;
  size_t len, n;
  double id;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 3 || !sluice_buffer_arg(env, argv[0], &data, &len) ||
      !sluice_buffer_arg(env, argv[1], &bytes, &n) || napi_get_value_double(env, argv[2], &id) != napi_ok) {
    return sluice_bad_args(env, "viewReply(buf: Buffer, bytes: Buffer, id: number)");
  }
  uint64_t m = 0;
  if (len >= sizeof(struct view_desc)) memcpy(&m, data, sizeof m);
  if (m != VIEW_INVITE || n == 0 || n > len) return sluice_boolean(env, 0);
  struct view_note *note = malloc(sizeof *note);
  if (note == NULL) return sluice_boolean(env, 0);
  note->next = NULL;
  note->id = id;
  struct view_desc d = { VIEW_DONE, bytes, n, note };
  memcpy(data, &d, sizeof d);
  return sluice_boolean(env, 1);
}

/* viewsDone(out: Float64Array): number. The ids of views whose replies were sent since the last call, up to out.length (the rest stay for the next). */
static napi_value js_views_done(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  double *out = NULL;
  size_t cap = 0;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 || !sluice_f64_arg(env, argv[0], &out, &cap)) {
    return sluice_bad_args(env, "viewsDone(out: Float64Array)");
  }
  size_t k = 0;
  if (__atomic_load_n(&views_done, __ATOMIC_RELAXED) != NULL) {
    struct view_note *list = __atomic_exchange_n(&views_done, NULL, __ATOMIC_ACQUIRE);
    while (list != NULL && k < cap) {
      struct view_note *next = list->next;
      out[k++] = list->id;
      free(list);
      list = next;
    }
    while (list != NULL) { /* more than out holds: back on the stack for the next call */
      struct view_note *next = list->next;
      sluice_view_release(list);
      list = next;
    }
  }
  napi_value r;
  napi_create_uint32(env, (uint32_t)k, &r);
  return r;
}

napi_status sluice_lend_init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    {"viewInvited", NULL, js_view_invited, NULL, NULL, NULL, napi_enumerable, NULL},
    {"viewReply", NULL, js_view_reply, NULL, NULL, NULL, napi_enumerable, NULL},
    {"viewsDone", NULL, js_views_done, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_status st = napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  if (st != napi_ok) return st;
  napi_value code;
  st = napi_create_int32(env, SLUICE_VIEW_CODE, &code);
  if (st != napi_ok) return st;
  return napi_set_named_property(env, exports, "viewCode", code);
}
