/*
 * The memread layer: requests answered in libfuse's worker thread, in five files that share
 * memread.h: fuse_mounts.c (the registry of mounts), this one (fuse_new/fuse_destroy, the
 * read table, READ and RELEASE),
 * fuse_attrs.c (GETATTR of listed paths), fuse_open.c (OPEN of the disk tier's files: into
 * memory or passed through, and checks ahead), fuse_memread_napi.c (the JavaScript face).
 *
 * Reads answered in libfuse's worker thread, for file handles whose bytes are already in
 * memory and verified (issue 14: a small file from the disk tier, read whole and CRC-checked
 * at open by src/cache/disk-cache.ts openSmall). A large file's sequential reads are answered
 * here too, from block cache buffers its reader lends (fuse_lend.c, asked first by mem_read).
 * A read that does reach JavaScript may be answered there with a view of the block cache's
 * buffer instead of a copy (fuse_lend.c "Views": mem_read_buf invites it and replies from it).
 *
 * Why: through fuse-native every FUSE operation is a hand-off from a libfuse worker to
 * Node's main thread and back (uv_async, JavaScript, a semaphore). A small file costs four
 * (LOOKUP, OPEN, READ, RELEASE; counted with sluice_fuse_operations_total), and in a
 * restarted daemon reading small files from the tier about 45% of the main thread is that
 * hand-off. The READ of such a file is a copy from a buffer JavaScript already holds, and
 * its RELEASE only returns that buffer: neither needs JavaScript at the time it happens.
 *
 * How: this file defines fuse_new() with libfuse 2's signature (version FUSE_2.6, the one
 * fuse-native links). When the addon is loaded with RTLD_GLOBAL before fuse-native (as for
 * fuse_mount, src/fuse_fd.c), fuse-native's call lands here; we copy its fuse_operations,
 * put our read and release in place of its own (keeping its pointers), and call libfuse's
 * real fuse_new with the copy. Each mount made so gets a table, found from the request's
 * fuse_get_context()->fuse:
 *  - JavaScript adds (fh -> pointer, length) after open, before it answers the OPEN, for a
 *    handle whose bytes it holds in a Buffer it keeps alive (memReadAdd).
 *  - read(fh): a hit copies min(size, length - offset) bytes into libfuse's buffer under
 *    the table's mutex and returns the count (0 past the end), adding the read, its bytes
 *    and the size asked to the entry's counts: no JavaScript. A miss calls fuse-native's
 *    read, as without this file.
 *  - release(fh): a hit removes the entry and queues (fh, reads, bytes, asked) for
 *    JavaScript, which drains the queue (memReadDrain: at each open and once a second) to
 *    release the handle in the core, give the buffer back and count the metrics. A miss,
 *    or a full queue (the entry is then kept), calls fuse-native's release: JavaScript
 *    removes the entry itself (memReadRemove) and takes its counts.
 * Ownership: JavaScript owns every buffer. It gives one back only after its entry left the
 * table (removed here at RELEASE and drained, or removed by memReadRemove/memReadClear),
 * and the copy and the removal hold the same mutex, so a copy never reads a buffer that
 * was given back. The kernel sends RELEASE only once no request on the handle is in flight
 * (the fuse_file's reference count includes pending reads), and a read that did come after
 * the removal would miss and go to JavaScript, which answers EBADF for a released handle:
 * never stale bytes.
 * The table is direct-mapped (slot = fh mod SLOTS): the core's fh values only grow, and an
 * add whose slot is taken by a live handle is refused (that handle's reads go the usual
 * way). At unmount JavaScript drains the queue and clears what is left (memReadClear).
 * A mount made before this addon was global, or by another fuse-native build, has no table:
 * memReadAdd refuses, and everything goes through fuse-native as before.
 *
 * Measured (scripts/tier-small-harness.mjs, 800 x 40 KB, 4 readers, before = main at
 * 9c72a64, after = this path; 2026-12-01 ~06:00-06:15 UTC on a machine at load 10-14, so
 * files/s are noise and daemon CPU per file is the figure to trust; BENCHMARKS.md t14-direct):
 *   ops per file, both: getattr 1, open 1, read 1, release 1; after, the read and the
 *   release are answered here (sluice_fuse_memory_reads_total: 1 per file);
 *   daemon CPU ms per file, restarted:      0.84 (0.74-0.99) -> 0.68 (0.68-0.74)  (-19%)
 *                           restarted-cold: 1.03 (0.98-1.05) -> 0.83 (0.83-0.99)  (-20%)
 *
 * Invariants: a copy from an entry and its removal hold the same m->lock, so no copy reads a
 * buffer JavaScript was given back; a mount is found by its struct fuse only while that is
 * live: fuse_destroy() forgets the address before libfuse frees it (memReadLiveMounts).
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

/* A read of a handle whose bytes this table holds (a small file), else fuse-native's read. */
static int entry_read(struct mount *m, const char *path, char *buf, size_t size, off_t offset, struct fuse_file_info *fi) {
  struct entry *e = &m->slots[fi->fh % SLOTS];
  pthread_mutex_lock(&m->lock);
  if (e->used && e->fh == fi->fh) {
    size_t n = 0;
    if (offset >= 0 && (uint64_t)offset < e->length) {
      n = e->length - (size_t)offset;
      if (n > size) n = size;
      memcpy(buf, e->bytes + offset, n);
    }
    e->reads++;
    e->served += n;
    e->asked += size;
    pthread_mutex_unlock(&m->lock);
    return (int)n;
  }
  pthread_mutex_unlock(&m->lock);
  return m->read(path, buf, size, offset, fi);
}

/* mem_read's work, for a buffer whose first bytes say whether JavaScript may answer with a view (see mem_read_buf). */
static int read_into(const char *path, char *buf, size_t size, off_t offset, struct fuse_file_info *fi) {
  struct mount *m = mount_of_request();
  if (m == NULL) return -EIO; /* cannot happen: only our mounts have this read */
  /* A large file's blocks lent by its sequential reader (fuse_lend.c): no handle is in both tables. */
  int lent = sluice_lends_read(m->lends, fi->fh, buf, size, (int64_t)offset);
  if (lent >= 0) return lent;
  return entry_read(m, path, buf, size, offset, fi);
}

/*
 * libfuse's read, for a mount whose read_buf is not ours: never a view. The buffer is
 * libfuse's malloc'd memory, which may hold a stale invitation of an earlier read_buf of
 * another mount, so its first bytes are cleared before JavaScript may look at them.
 */
static int mem_read(const char *path, char *buf, size_t size, off_t offset, struct fuse_file_info *fi) {
  sluice_view_invite(buf, size, 0);
  int res = read_into(path, buf, size, offset, fi);
  return res == SLUICE_VIEW_CODE ? -EIO : res; /* cannot happen: nothing invited it */
}

/*
 * libfuse's read_buf, in place of its own wrapping of read (fuse_fs_read_buf: a malloc'd
 * buffer of `size`, read into it): a read wholly inside one buffer of the handle's lend is
 * answered from that buffer itself, held until its reply is written (fuse_init.c "Replies
 * from lent memory"); every other read is read into a malloc'd buffer by read_into, as libfuse
 * would. libfuse frees the vector, and the buffer's memory unless the reply cleared it.
 */
static int mem_read_buf(const char *path, struct fuse_bufvec **bufp, size_t size, off_t offset, struct fuse_file_info *fi) {
  struct mount *m = mount_of_request();
  if (m == NULL) return -EIO; /* cannot happen: only our mounts have this read */
  struct fuse_bufvec *v = malloc(sizeof *v);
  if (v == NULL) return -ENOMEM;
  *v = (struct fuse_bufvec){ 1, 0, 0, { { 0, 0, NULL, -1, 0 } } };
  int lent = -3; /* what sluice_lends_view said (-1: fh has no lend, -2: the read spans two lent buffers); -3: not asked */
  if (m->reply_from_lends && sluice_fuse_reply_can_hold()) {
    const char *at = NULL;
    void *hold = NULL;
    lent = sluice_lends_view(m->lends, fi->fh, size, (int64_t)offset, &at, &hold);
    if (lent >= 0) {
      v->buf[0].size = (size_t)lent;
      if (lent > 0) {
        v->buf[0].mem = (void *)at;
        sluice_fuse_reply_hold(&v->buf[0].mem, at, (size_t)lent, sluice_lends_unlock, hold);
      }
      *bufp = v;
      return 0;
    }
  }
  char *mem = malloc(size > 0 ? size : 1);
  if (mem == NULL) {
    free(v);
    return -ENOMEM;
  }
  /* JavaScript may answer with a view of the bytes instead of copying them (fuse_lend.c "Views"). */
  int invite = m->reply_views && sluice_fuse_reply_can_hold();
  sluice_view_invite(mem, size, invite);
  /* No lend, as the view just found: the small-file table or JavaScript. Else read_into, which copies a lent read. */
  int res = lent == -1 ? entry_read(m, path, mem, size, offset, fi) : read_into(path, mem, size, offset, fi);
  if (res == SLUICE_VIEW_CODE) {
    const char *at;
    size_t n;
    void *note;
    int took = invite ? sluice_view_take(mem, size, &at, &n, &note) : -1;
    free(mem);
    if (took < 0) { /* cannot happen: JavaScript answers so only an invited read, with a view */
      free(v);
      return -EIO;
    }
    v->buf[0].size = n;
    v->buf[0].mem = (void *)at;
    sluice_fuse_reply_hold(&v->buf[0].mem, at, n, sluice_view_release, note);
    *bufp = v;
    return 0;
  }
  if (res < 0) {
    free(mem);
    free(v);
    return res;
  }
  v->buf[0].size = (size_t)res;
  v->buf[0].mem = mem;
  *bufp = v;
  return 0;
}

/* Adds an entry opened here to own_counts, once (under m->lock). */
static void own_count(struct mount *m, struct entry *e) {
  if (e->counted) return;
  e->counted = 1;
  m->own_counts[0]++;
  m->own_counts[1] += e->reads;
  m->own_counts[2] += e->served;
  m->own_counts[3] += e->asked;
  m->own_counts[4] += e->length;
  m->own_counts[5] += e->served > 0;
}

/* Takes out an entry opened here (under m->lock), counted; returns its bytes for the caller to free. */
static char *own_remove(struct mount *m, struct entry *e) {
  char *bytes = (char *)e->bytes;
  own_count(m, e);
  row_other_done(m, e->row1);
  __atomic_sub_fetch(&own_bytes, e->length, __ATOMIC_RELAXED);
  memset(e, 0, sizeof *e);
  return bytes;
}

static int mem_release(const char *path, struct fuse_file_info *fi) {
  struct mount *m = mount_of_request();
  if (m == NULL) return 0;
  if (is_pt_fh(fi->fh)) {
    /* The kernel left passthrough for this handle before sending RELEASE (fuse_file_put): the last one gives the backing id back. */
    size_t row = (size_t)(fi->fh >> 32) - 1;
    int id = 0;
    if (m->rs != NULL && row < m->rs_n) {
      pthread_mutex_lock(row_lock(m, row));
      if (m->rs[row].pt > 0 && --m->rs[row].pt == 0) {
        id = m->rs[row].backing;
        m->rs[row].backing = 0;
      }
      pthread_mutex_unlock(row_lock(m, row));
    }
    if (id > 0) sluice_fuse_backing_close(id);
    pthread_mutex_lock(&m->lock);
    m->own_counts[C_PT_RELEASES]++;
    pthread_mutex_unlock(&m->lock);
    return 0;
  }
  struct entry *e = &m->slots[fi->fh % SLOTS];
  pthread_mutex_lock(&m->lock);
  struct jo_slot j;
  if (!(e->used && e->owned && e->fh == fi->fh) && jo_take(m, fi->fh, &j)) {
    /* One of JavaScript's that passthrough knew of: it is over in the kernel already. */
    if (j.early) __atomic_sub_fetch(&m->early, 1, __ATOMIC_ACQ_REL);
    row_other_done(m, j.row1);
  }
  if (e->used && e->owned && e->fh == fi->fh) {
    char *bytes = own_remove(m, e);
    pthread_mutex_unlock(&m->lock);
    free(bytes);
    return 0;
  }
  if (e->used && e->fh == fi->fh && m->count < QUEUE) {
    m->queue[(m->head + m->count) % QUEUE] = (struct released){ e->fh, e->reads, e->served, e->asked };
    m->count++;
    memset(e, 0, sizeof *e);
    pthread_mutex_unlock(&m->lock);
    return 0;
  }
  pthread_mutex_unlock(&m->lock);
  return m->release != NULL ? m->release(path, fi) : 0;
}

typedef struct fuse *(*fuse_new_fn)(struct fuse_chan *, struct fuse_args *, const void *, size_t, void *);

__attribute__((visibility("default")))
struct fuse *fuse_new(struct fuse_chan *ch, struct fuse_args *args, const void *op, size_t op_size, void *user_data) {
  fuse_new_fn real = (fuse_new_fn)sluice_libfuse_sym("fuse_new", "FUSE_2.6");
  if (real == NULL) {
    fprintf(stderr, "sluice: libfuse.so.2 has no fuse_new\n");
    return NULL;
  }
  if (get_context == NULL) get_context = (struct fuse_context *(*)(void))sluice_libfuse_sym("fuse_get_context", "FUSE_2.2");
  void *const *ops = op;
  if (op == NULL || op_size < (OP_RELEASE + 1) * sizeof(void *) || ops[OP_READ] == NULL || get_context == NULL) {
    return real(ch, args, op, op_size, user_data);
  }
  /* A mount of the same fuse-native thread (a buffer reused) takes over its old table. */
  pthread_mutex_lock(&mounts_lock);
  struct mount *m = NULL;
  for (int i = 0; i < mount_count; i++) {
    if (mounts[i]->user_data == user_data) m = mounts[i];
  }
  if (m == NULL && mount_count < MAX_MOUNTS) {
    m = calloc(1, sizeof *m);
    if (m != NULL) {
      pthread_mutex_init(&m->lock, NULL);
      pthread_rwlock_init(&m->attrs_lock, NULL);
      for (int i = 0; i < ROW_LOCKS; i++) pthread_mutex_init(&m->row_locks[i], NULL);
      m->user_data = user_data;
      m->ahead.fd = -1;
      pthread_cond_init(&m->ahead.done, NULL);
      pthread_mutex_init(&m->ahead_lock, NULL);
      m->lends = sluice_lends_new();
      mounts[mount_count] = m;
      __atomic_store_n(&mount_count, mount_count + 1, __ATOMIC_RELEASE);
    }
  }
  if (m == NULL) {
    pthread_mutex_unlock(&mounts_lock);
    return real(ch, args, op, op_size, user_data);
  }
  __atomic_store_n(&m->fuse, NULL, __ATOMIC_RELEASE);
  __atomic_store_n(&m->wrapped, 0, __ATOMIC_RELEASE);
  pthread_mutex_lock(&m->lock);
  for (size_t i = 0; i < SLOTS; i++) {
    if (m->slots[i].used && m->slots[i].owned) free(own_remove(m, &m->slots[i]));
  }
  memset(m->slots, 0, sizeof m->slots);
  memset(m->own_counts, 0, sizeof m->own_counts);
  sluice_lends_reset(m->lends);
  m->head = m->count = 0;
  /* Before rs is freed below: a check ahead reads rs only under ahead_lock, with its generation current. */
  pthread_mutex_lock(&m->ahead_lock);
  m->gen++;
  m->ahead_off = ahead_env_off();
  if (m->ahead.fd >= 0) close(m->ahead.fd);
  m->ahead.fd = -1; /* a running check finds the generation changed and closes its own */
  m->ahead.last_valid = 0;
  m->ahead.wasted = 0;
  pthread_mutex_unlock(&m->ahead_lock);
  /* The previous mount's connection is gone, and its handles with it (passthrough ones too). */
  free(m->rs);
  __atomic_store_n(&m->rs, NULL, __ATOMIC_RELEASE);
  m->rs_n = 0;
  free(m->jo);
  m->jo = NULL;
  m->jo_cap = m->jo_count = 0;
  __atomic_store_n(&m->early, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&m->pt_off, 0, __ATOMIC_RELAXED);
  m->open = (open_fn)ops[OP_OPEN];
  m->getattr = (getattr_fn)ops[OP_GETATTR];
  m->read = (read_fn)ops[OP_READ];
  m->release = (release_fn)ops[OP_RELEASE];
  pthread_mutex_unlock(&m->lock);
  /* The previous mount of this thread is over: its listing goes. */
  pthread_rwlock_wrlock(&m->attrs_lock);
  attrs_free(m->attrs);
  m->attrs = NULL;
  __atomic_store_n(&m->attr_hits, 0, __ATOMIC_RELAXED);
  pthread_rwlock_unlock(&m->attrs_lock);
  /* libfuse copies the operations into its own struct fuse, so this copy may go after. It reaches
   * read_buf: libfuse zero-fills what lies past the size it is given, so padding fuse-native's
   * operations with zeros up to there changes nothing else. */
  size_t mine_size = op_size > (OP_READ_BUF + 1) * sizeof(void *) ? op_size : (OP_READ_BUF + 1) * sizeof(void *);
  void **mine = calloc(1, mine_size);
  if (mine == NULL) {
    pthread_mutex_unlock(&mounts_lock);
    return real(ch, args, op, op_size, user_data);
  }
  memcpy(mine, op, op_size);
  if (mine[OP_GETATTR] != NULL) mine[OP_GETATTR] = (void *)mem_getattr;
  mine[OP_READ] = (void *)mem_read;
  /* Replies from lent memory (fuse_init.c), unless SLUICE_LEND_COPY=1 (comparisons: lent reads copied, as before) or
   * fuse-native brought a read_buf of its own (it does not). */
  const char *copy = getenv("SLUICE_LEND_COPY");
  m->reply_from_lends = mine[OP_READ_BUF] == NULL && !(copy != NULL && strcmp(copy, "1") == 0);
  if (m->reply_from_lends) mine[OP_READ_BUF] = (void *)mem_read_buf;
  const char *no_view = getenv("SLUICE_NO_VIEW");
  m->reply_views = m->reply_from_lends && !(no_view != NULL && strcmp(no_view, "1") == 0);
  mine[OP_RELEASE] = (void *)mem_release;
  if (mine[OP_OPEN] != NULL) mine[OP_OPEN] = (void *)mem_open;
  struct fuse *f = real(ch, args, mine, mine_size, user_data);
  free(mine);
  forget_fuse_locked(f, m);
  __atomic_store_n(&m->fuse, f, __ATOMIC_RELEASE);
  __atomic_store_n(&m->wrapped, f != NULL, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&mounts_lock);
  return f;
}

typedef void (*fuse_destroy_fn)(struct fuse *);

/* libfuse's fuse_destroy(), which fuse-native calls once a mount's loop ended: first no request can find this mount's table by `f` (see "Ended mounts"). */
__attribute__((visibility("default")))
void fuse_destroy(struct fuse *f) {
  fuse_destroy_fn real = (fuse_destroy_fn)sluice_libfuse_sym("fuse_destroy", "FUSE_2.2");
  pthread_mutex_lock(&mounts_lock);
  forget_fuse_locked(f, NULL);
  pthread_mutex_unlock(&mounts_lock);
  if (real == NULL) {
    fprintf(stderr, "sluice: libfuse.so.2 has no fuse_destroy\n");
    return;
  }
  real(f);
}

int sluice_memread_add(const void *thread, uint64_t fh, const char *bytes, size_t length) {
  struct mount *m = mount_of_thread(thread);
  if (m == NULL) return -ENODEV;
  struct entry *e = &m->slots[fh % SLOTS];
  int res = 0;
  pthread_mutex_lock(&m->lock);
  if (e->used) res = -EBUSY;
  else *e = (struct entry){ fh, bytes, length, 0, 0, 0, 1, 0, 0, 0 };
  pthread_mutex_unlock(&m->lock);
  return res;
}

int sluice_memread_remove(const void *thread, uint64_t fh, uint64_t counts[3]) {
  struct mount *m = mount_of_thread(thread);
  if (m == NULL) return 0;
  struct entry *e = &m->slots[fh % SLOTS];
  int found = 0;
  pthread_mutex_lock(&m->lock);
  if (e->used && !e->owned && e->fh == fh) {
    counts[0] = e->reads;
    counts[1] = e->served;
    counts[2] = e->asked;
    memset(e, 0, sizeof *e);
    found = 1;
  }
  pthread_mutex_unlock(&m->lock);
  return found;
}

size_t sluice_memread_drain(const void *thread, uint64_t *out, size_t max, int clear) {
  struct mount *m = mount_of_thread(thread);
  if (m == NULL) return 0;
  size_t n = 0;
  pthread_mutex_lock(&m->lock);
  if (!clear) {
    for (; n < max && m->count > 0; n++) {
      struct released *r = &m->queue[m->head];
      memcpy(out + 4 * n, r, sizeof *r);
      m->head = (m->head + 1) % QUEUE;
      m->count--;
    }
  } else {
    for (size_t i = 0; i < SLOTS && n < max; i++) {
      struct entry *e = &m->slots[i];
      if (!e->used) continue;
      if (e->owned) {
        /* Not JavaScript's: counted now (JavaScript takes no counts after the unmount), but kept:
           a lazily detached mount still answers its reads from it here until the kernel releases it. */
        own_count(m, e);
        continue;
      }
      uint64_t r[4] = { e->fh, e->reads, e->served, e->asked };
      memcpy(out + 4 * n, r, sizeof r);
      memset(e, 0, sizeof *e);
      n++;
    }
  }
  pthread_mutex_unlock(&m->lock);
  return n;
}

int sluice_memread_mounted(const void *thread) { return mount_of_thread(thread) != NULL; }

struct sluice_lends *sluice_memread_lends(const void *thread) {
  struct mount *m = mount_of_thread(thread);
  return m != NULL ? m->lends : NULL;
}

