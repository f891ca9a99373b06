/*
 * OPENs answered in libfuse's worker thread: a listed small file of the disk tier read whole
 * and checked into memory, or handed to the kernel as a FUSE passthrough backing file, and the
 * check ahead of the next large file (part of the memread layer: fuse_memread.c owns the
 * mounts and the read table, fuse_attrs.c the getattrs, memread.h the shared types).
 *
 * Opens. With the listing, JavaScript may hand over the disk tier's objects folder and, per
 * listed file of one block (at most 256 KiB, not empty, not archived), the name of its cache
 * file (src/fs/core.ts tierOpens: the same sha256 name openWhole() would use). An OPEN of such
 * a path for reading then reads the file whole and checks it here (tier_small.c: the sidecar's
 * header and entry, the bytes' CRC32C, as openSmall() does) into a buffer of ours, enters it
 * in the table under a handle number of ours, and answers: no JavaScript for the whole file
 * (LOOKUP, OPEN, READ, RELEASE). Our handle numbers have the low 32 bits at 2^31 or more, which
 * JavaScript's (int32, growing from 1) never reach, so a request on one that reached
 * JavaScript (after an unmount) is EBADF there, never another file's bytes. Any failure (no
 * cache file, a bad header or CRC, a short file, the buffer budget OWN_BYTES_MAX spent, no
 * free slot) sends the OPEN to fuse-native's open as before, and JavaScript finds the fault
 * again, counts it, repairs the tier and reads from S3: repairs live in one place. RELEASE
 * frees the buffer and adds the handle's counts to own_counts, which JavaScript takes with the
 * getattr hits (ownOpensTake) and counts as it counts its own opens. At unmount the entries
 * still open are counted but kept: a lazily detached mount answers their reads here until the
 * kernel releases them. If the kernel never does (the connection aborted), their buffers stay
 * until this fuse-native thread mounts again, within OWN_BYTES_MAX.
 * What it does not do that JavaScript's open does: pin the object against this process's
 * eviction (its bytes are already in memory) and count it in sluice_open_handles.
 *
 * Passthrough. When the mount negotiated FUSE passthrough (fuse_init.c; Linux >= 6.9), such
 * an OPEN first tries to hand the kernel the cache file itself: the file is read and checked
 * whole (tier_small.c sluice_tier_open_verified, which also fills the page cache the reads
 * will come from), registered as a backing file, and the reply names it; the kernel then
 * reads it for every read of the handle and no request comes here until RELEASE. The
 * kernel's rules for an inode (fs/fuse/iomode.c) shape the rest:
 *  - every open of an inode that has a passthrough handle must be passthrough, on the same
 *    backing file (else the open fails with EIO): per listing row, rs[] counts passthrough
 *    handles (pt) and keeps their backing id, which later opens reuse, unverified again;
 *  - a passthrough open of an inode with a caching handle fails (EIO), so rs[] also counts
 *    the row's other handles (other: read into memory here, or JavaScript's, found again at
 *    RELEASE through jo, a small hash of JavaScript's handle numbers), and while other > 0
 *    an open is read into memory instead;
 *  - an open that found no listing (before it was handed over) cannot name its row: it
 *    holds m->early until released, and no passthrough starts while early > 0;
 *  - the kernel leaves an inode's io mode before it sends RELEASE (fuse_file_put), so these
 *    counts only ever lag the kernel's in the safe direction: each is raised before the open
 *    is answered and lowered at RELEASE;
 *  - the reply may carry only DIRECT_IO, NOFLUSH and PARALLEL_DIRECT_WRITES beside
 *    FOPEN_PASSTHROUGH: libfuse's FOPEN_KEEP_CACHE (kernel_cache) is dropped from it.
 * The last RELEASE of a row gives the backing id back (the kernel keeps its own reference
 * for open files). A refused backing file (EPERM without CAP_SYS_ADMIN, ELOOP on too deep a
 * stack of filesystems) turns passthrough off for the mount. Row state lives until the
 * thread mounts again, so RELEASEs after an unmount still find it. What is known of a
 * passthrough handle's reads: nothing but its OPEN and RELEASE (the kernel reads the backing
 * file with the FUSE file's own position; FUSE sends no READ and RELEASE carries no offset).
 * So each RELEASE counts the file's whole size as served (C_PT_BYTES, the size kept in the
 * handle number): right for the whole-file reads of a training loader, too much for a handle
 * that read part of its file, too little for one that read it twice (docs/METRICS.md). With the tier, the
 * listing copy holds 36 more bytes per path (the names, and the marks of "Fetched into
 * memory") and rs 24 per path: 60 MB more per million paths, beside the 116 MB of
 * "Attributes". Files of several blocks (up to 256 MiB,
 * src/fuse/kernel-mount.ts PASSTHROUGH_MAX_BYTES) are named only on a mount that negotiated
 * passthrough, and only passed through: checked whole at open, every block's entry and CRC
 * (tier_small.c: three-lane CRC32C over a read-only mapping, several threads from 64 MiB;
 * 8-20 GB/s from the page cache).
 * Fetched into memory. In a first epoch, JavaScript's cross-file prefetch fetches the next
 * files of a folder into its memory cache, and the disk tier writes each of them moments
 * later. An OPEN of such a file that this file answered from the tier would read it from
 * disk again (and register a backing file), while its bytes sit in memory, and JavaScript
 * would not see the open: its prefetch walk would stop advancing, and the reader would wait
 * for S3 at each file past the walk's end (BENCHMARKS.md t14-hot: 263 of 800 opens so, 9 MB
 * of prefetched files evicted unread, epoch 1 at 0.78-0.82x of no tier). So JavaScript marks
 * a row "hot" when its prefetch starts fetching the file (tierHotMark: the row's stamp, a
 * coarse monotonic time in ms), and the next OPEN of the row within HOT_MS goes to
 * JavaScript, which reads it from memory when it is still there (src/fs/core.ts openNode)
 * and advances its walk. That OPEN takes the mark: later ones (the next epoch in the same
 * process) are answered here again. The row is still counted (its `other`, or passthrough when a
 * handle of it is passed through already: the kernel's rules), so the two kinds of opens
 * mix as before. A stale or missed mark only moves an open from one correct path to the
 * other: both serve verified bytes.
 * Checked ahead. A reader that works through a folder of large files waits at each OPEN for
 * the whole file's check (~10 ms per 128 MiB from the page cache, a disk read when cold),
 * while its previous file's reads never reach sluice. So when an OPEN checked its file
 * afresh (the row had no passthrough handle) and the file is AHEAD_MIN or more, the next
 * listing row, when it is a tier file of AHEAD_MIN or more, is checked right away on a thread
 * of its own (one at a time per mount) and its descriptor kept in m->ahead with the data
 * file's fstat taken before its bytes were read. An OPEN of that row while its check runs
 * waits for it (AHEAD_WAIT_S at most). The OPEN of that row, within AHEAD_MAX_S,
 * uses that descriptor instead of checking again if the file is unchanged since (size, mtime
 * and ctime equal: any write through the filesystem changes them; multigrain timestamps
 * since Linux 6.13 make even a write in the same tick as the fstat show). The guarantee is
 * the at-open check's, seconds earlier: the bytes the kernel reads were checked whole, and
 * come from the page cache that check filled. A check ahead that is not used (the reader
 * went elsewhere) cost one read of a file; a newer one replaces it, and a remount drops it.
 * A reader out of listing order (a shuffled epoch) leaves its checks ahead unused: after one
 * such check, no more are made until the reader opens two rows in order (ahead_worth).
 * The check also drops the FUSE inode's own page cache (FUSE_NOTIFY_INVAL_INODE, when no
 * handle of the row is open): an earlier caching open (epoch 1, through JavaScript) left it,
 * and the kernel would drop it at the passthrough OPEN otherwise, ~15 ms per 128 MiB there.
 * Measured (scripts/tier-small-harness.mjs, 800 x 40 KB, 4 readers, 8 rounds, medians;
 * BENCHMARKS.md t14-open): a restarted job read 1192 files/s before opens were answered
 * here, 2295 with opens into memory and 2988 with passthrough, against 4446 from a local
 * folder; the daemon's CPU per file went 0.50 -> 0.175 -> 0.125 ms.
 *
 * Invariants: every handle number made here has low 32 bits >= 2^31 (never JavaScript's);
 * a row's pt and other counts are raised before its OPEN is answered and lowered at RELEASE,
 * under the row's lock, so they never run below the kernel's; passthrough never starts
 * while m->early > 0; the last RELEASE of a row gives its backing id back; own_bytes stays
 * within OWN_BYTES_MAX.
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

/* ---- opens answered by JavaScript (jo): open addressing on fh, linear probing, under m->lock ---- */

static size_t jo_home(const struct mount *m, uint64_t fh) { return (size_t)((fh * 0x9e3779b97f4a7c15ULL) >> 20) & (m->jo_cap - 1); }

/* 0, or -1 (no memory: the caller keeps the open counted for good, which only forgoes passthrough). fh 0 is never stored. */
static int jo_put(struct mount *m, uint64_t fh, uint32_t row1, uint32_t early) {
  if (fh == 0) return -1;
  if (2 * (m->jo_count + 1) > m->jo_cap) {
    size_t cap = m->jo_cap ? 2 * m->jo_cap : 64;
    struct jo_slot *old = m->jo, *jo = calloc(cap, sizeof *jo);
    if (jo == NULL) return -1;
    size_t old_cap = m->jo_cap;
    m->jo = jo;
    m->jo_cap = cap;
    for (size_t i = 0; i < old_cap; i++) {
      if (old[i].fh == 0) continue;
      size_t j = jo_home(m, old[i].fh);
      while (jo[j].fh != 0) j = (j + 1) & (cap - 1);
      jo[j] = old[i];
    }
    free(old);
  }
  size_t j = jo_home(m, fh);
  while (m->jo[j].fh != 0) j = (j + 1) & (m->jo_cap - 1);
  m->jo[j] = (struct jo_slot){ fh, row1, early };
  m->jo_count++;
  return 0;
}

/* Removes fh's slot into *out: 1, or 0 when absent. Backward-shift deletion keeps every probe run unbroken. */
int jo_take(struct mount *m, uint64_t fh, struct jo_slot *out) {
  if (m->jo_cap == 0 || fh == 0) return 0;
  size_t mask = m->jo_cap - 1, i = jo_home(m, fh);
  while (m->jo[i].fh != fh) {
    if (m->jo[i].fh == 0) return 0;
    i = (i + 1) & mask;
  }
  *out = m->jo[i];
  for (size_t j = (i + 1) & mask; m->jo[j].fh != 0; j = (j + 1) & mask) {
    size_t h = jo_home(m, m->jo[j].fh);
    /* Slot j may move to the hole at i when its home is not in (i, j] (cyclically). */
    if ((j > i && (h <= i || h > j)) || (j < i && (h <= i && h > j))) {
      m->jo[i] = m->jo[j];
      i = j;
    }
  }
  m->jo[i] = (struct jo_slot){ 0, 0, 0 };
  m->jo_count--;
  return 1;
}

pthread_mutex_t *row_lock(struct mount *m, size_t row) { return &m->row_locks[row % ROW_LOCKS]; }

/* One fewer non-passthrough handle of row1 - 1 (0: none). */
void row_other_done(struct mount *m, uint32_t row1) {
  if (row1 == 0 || m->rs == NULL || row1 > m->rs_n) return;
  pthread_mutex_lock(row_lock(m, row1 - 1));
  if (m->rs[row1 - 1].other > 0) m->rs[row1 - 1].other--;
  pthread_mutex_unlock(row_lock(m, row1 - 1));
}

/*
 * Handle numbers of ours: low 32 bits >= 2^31, which JavaScript's handles (int32 > 0) never
 * have. The n-th handle read into memory: bit 30 clear, slot n mod SLOTS. A passthrough
 * handle of listing row r: bits 31 and 30 set, r + 1 in the high 32 bits, and the file's size
 * in the low 30 bits (saturated; files passed through are at most 256 MiB, kernel-mount.ts
 * PASSTHROUGH_MAX_BYTES, well below 2^30): its RELEASE counts them as served (C_PT_BYTES), the
 * kernel having read the file itself (see "Passthrough": what is known of its reads).
 */
static uint64_t own_fh(uint64_t n) { return n << 32 | 0x80000000u | (n & 0x3fffffffu); }
static uint64_t pt_fh(size_t row, uint64_t size) { return (uint64_t)(row + 1) << 32 | 0xc0000000u | (size < 0x3fffffffu ? size : 0x3fffffffu); }
uint64_t pt_fh_size(uint64_t fh) { return fh & 0x3fffffffu; }
int is_pt_fh(uint64_t fh) { return (fh & 0xc0000000u) == 0xc0000000u && (fh >> 32) != 0; }

/* A row's file in the disk tier (its cache file's name, the objects folder, block and object size), for an open or a check in C. */
struct tier_file {
  char dir[PATH_MAX];
  uint8_t name[32];
  uint32_t block;
  uint64_t size;
};

/* Now, as a row's hot stamp: coarse monotonic ms (wrapping), never 0. */
static uint32_t hot_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
  uint32_t ms = (uint32_t)((uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u);
  return ms != 0 ? ms : 1;
}

/* Whether row `row` of `a` was marked within HOT_MS (see "Fetched into memory"); takes the mark, which serves one open. Under attrs_lock. */
static int row_hot_take(const struct attrs *a, size_t row) {
  if (a->hot == NULL || row >= a->n || __atomic_load_n(&a->hot[row], __ATOMIC_RELAXED) == 0) return 0;
  uint32_t at = __atomic_exchange_n(&a->hot[row], 0, __ATOMIC_RELAXED);
  return at != 0 && (uint32_t)(hot_now() - at) < HOT_MS;
}

/* Fills *f for row `row` of the listing `a` (which has names) when it is a named, non-empty regular file: 1, else 0. Under attrs_lock. */
static int row_tier_file(const struct attrs *a, size_t row, struct tier_file *f) {
  static const uint8_t none[32];
  struct attr_val r;
  if (!attrs_row(a, row, &r)) return 0;
  const uint8_t *nm = a->names + 32 * row;
  if (!S_ISREG(r.mode) || r.size == 0 || memcmp(nm, none, 32) == 0) return 0;
  memcpy(f->name, nm, 32);
  strcpy(f->dir, a->tier_dir); /* its length was checked when installed */
  f->block = a->tier_block;
  f->size = r.size;
  return 1;
}

/*
 * The small file's verified bytes read from the tier (tier_small.c) into a buffer of ours,
 * entered in the table under a new handle: 1 and *fh, or 0 (nothing kept: JavaScript opens it).
 */
static int own_open(struct mount *m, const struct tier_file *f, uint32_t row1, uint64_t *fh) {
  uint64_t size = f->size;
  if (__atomic_add_fetch(&own_bytes, size, __ATOMIC_RELAXED) > OWN_BYTES_MAX) {
    __atomic_sub_fetch(&own_bytes, size, __ATOMIC_RELAXED);
    return 0;
  }
  char *bytes = malloc((size_t)size);
  if (bytes != NULL && sluice_tier_read_small(f->dir, f->name, f->block, size, bytes) == 0) {
    pthread_mutex_lock(&m->lock);
    for (int t = 0; t < OWN_SLOT_TRIES; t++) {
      uint64_t n = ++m->next_own;
      struct entry *e = &m->slots[n % SLOTS];
      if (e->used) continue;
      *fh = own_fh(n);
      *e = (struct entry){ *fh, bytes, (size_t)size, 0, 0, 0, 1, 1, 0, row1 };
      pthread_mutex_unlock(&m->lock);
      return 1;
    }
    pthread_mutex_unlock(&m->lock);
  }
  free(bytes);
  __atomic_sub_fetch(&own_bytes, size, __ATOMIC_RELAXED);
  return 0;
}

/* SLUICE_NO_CHECK_AHEAD=1 (tests, comparisons), read at each mount: every passthrough file is checked at its own OPEN. */
int ahead_env_off(void) {
  const char *v = getenv("SLUICE_NO_CHECK_AHEAD");
  return v != NULL && v[0] != 0 && strcmp(v, "0") != 0;
}

struct ahead_job {
  struct mount *m;
  int dev;           /* a descriptor of the mount's /dev/fuse connection, for the notice (or -1) */
  uint64_t gen;
  size_t row;
  struct tier_file f;
};

static void *ahead_run(void *arg) {
  struct ahead_job *j = arg;
  struct stat before;
  int fd = sluice_tier_open_verified(j->f.dir, j->f.name, j->f.block, j->f.size, &before, 1); /* one thread: the reader has the other cores */
  struct mount *m = j->m;
  pthread_mutex_lock(&m->ahead_lock);
  m->ahead.busy = 0;
  pthread_cond_broadcast(&m->ahead.done);
  int published = fd >= 0 && m->gen == j->gen;
  if (published) {
    if (m->ahead.fd >= 0) {
      close(m->ahead.fd);
      m->ahead.wasted = 1;
    }
    m->ahead.fd = fd;
    m->ahead.row = j->row;
    m->ahead.gen = j->gen;
    m->ahead.before = before;
    clock_gettime(CLOCK_MONOTONIC, &m->ahead.at);
    fd = -1;
  }
  /*
   * The file is whole and checked, so its next OPEN will be passed through, and the kernel
   * then drops the page cache its earlier, caching opens left on the FUSE inode (epoch 1's
   * copy of the bytes): ~15 ms per 128 MiB, measured as the whole of an epoch-2 OPEN that
   * had its check ahead. Drop it now, here, when no handle of the row is open (read without
   * the row's lock, which an OPEN waiting for this check holds: a handle opened meanwhile
   * only reads its pages again; dropping cached pages is always safe).
   */
  uint64_t nodeid = 0;
  if (published && j->dev >= 0 && m->rs != NULL && j->row < m->rs_n &&
      __atomic_load_n(&m->rs[j->row].pt, __ATOMIC_RELAXED) == 0 && __atomic_load_n(&m->rs[j->row].other, __ATOMIC_RELAXED) == 0) {
    nodeid = __atomic_load_n(&m->rs[j->row].nodeid, __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&m->ahead_lock);
  if (nodeid != 0) (void)sluice_fuse_inval_inode(j->dev, nodeid);
  if (j->dev >= 0) close(j->dev);
  if (fd >= 0) close(fd);
  free(j);
  return NULL;
}

/* After row `row` was checked afresh: check the next row ahead, when it is a large tier file (see "Checked ahead"). */
static void ahead_start(struct mount *m, size_t row) {
  struct ahead_job *j = calloc(1, sizeof *j);
  if (j == NULL) return;
  int ok = 0;
  pthread_rwlock_rdlock(&m->attrs_lock);
  const struct attrs *a = m->attrs;
  size_t next = row + 1;
  if (a != NULL && a->names != NULL && next < m->rs_n) ok = row_tier_file(a, next, &j->f) && j->f.size >= AHEAD_MIN;
  pthread_rwlock_unlock(&m->attrs_lock);
  if (ok) {
    pthread_mutex_lock(&m->ahead_lock);
    /* One at a time, and not again for a row already checked ahead. */
    ok = !m->ahead.busy && !(m->ahead.fd >= 0 && m->ahead.row == next && m->ahead.gen == m->gen);
    if (ok) {
      m->ahead.busy = 1;
      m->ahead.busy_row = next;
      j->dev = sluice_fuse_dup_dev();
      j->m = m;
      j->gen = m->gen;
      j->row = next;
    }
    pthread_mutex_unlock(&m->ahead_lock);
  }
  pthread_t t;
  pthread_attr_t attr;
  if (ok && pthread_attr_init(&attr) == 0) {
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int started = pthread_create(&t, &attr, ahead_run, j) == 0;
    pthread_attr_destroy(&attr);
    if (started) {
      pthread_mutex_lock(&m->lock);
      m->own_counts[C_PT_AHEAD_STARTED]++;
      pthread_mutex_unlock(&m->lock);
      return;
    }
  }
  if (ok) {
    if (j->dev >= 0) close(j->dev);
    pthread_mutex_lock(&m->ahead_lock);
    m->ahead.busy = 0;
    pthread_cond_broadcast(&m->ahead.done);
    pthread_mutex_unlock(&m->ahead_lock);
  }
  free(j);
}

/* Row `row`'s descriptor checked ahead, when there is one, recent, and its file unchanged since: the fd (the caller's now), or -1. */
static int ahead_take(struct mount *m, size_t row) {
  int fd = -1;
  struct stat before;
  struct timespec at, now;
  pthread_mutex_lock(&m->ahead_lock);
  /* This row's check is running (the reader came to it sooner than the check ended): wait for it rather than check twice. */
  if (m->ahead.busy && m->ahead.busy_row == row) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += AHEAD_WAIT_S;
    while (m->ahead.busy && m->ahead.busy_row == row && pthread_cond_timedwait(&m->ahead.done, &m->ahead_lock, &until) == 0) {
    }
  }
  if (!m->ahead.busy && m->ahead.fd >= 0 && m->ahead.row == row && m->ahead.gen == m->gen) {
    fd = m->ahead.fd;
    before = m->ahead.before;
    at = m->ahead.at;
    m->ahead.fd = -1;
  }
  pthread_mutex_unlock(&m->ahead_lock);
  if (fd < 0) return -1;
  struct stat st;
  clock_gettime(CLOCK_MONOTONIC, &now);
  int stale = now.tv_sec - at.tv_sec > AHEAD_MAX_S;
  if (stale || fstat(fd, &st) != 0 || st.st_size != before.st_size || st.st_mtim.tv_sec != before.st_mtim.tv_sec ||
      st.st_mtim.tv_nsec != before.st_mtim.tv_nsec || st.st_ctim.tv_sec != before.st_ctim.tv_sec || st.st_ctim.tv_nsec != before.st_ctim.tv_nsec) {
    close(fd);
    if (stale) {
      pthread_mutex_lock(&m->ahead_lock);
      m->ahead.wasted = 1; /* too late to be of use: the reader is not going in order */
      pthread_mutex_unlock(&m->ahead_lock);
    }
    return -1;
  }
  return fd;
}

/*
 * Whether to check ahead after an OPEN of `row` that was checked (afresh, or `used` a check
 * ahead): not while the reader is out of order. A reader in listing order opens row + 1 next
 * (or used the check ahead); one in another order (a shuffled epoch) leaves the check ahead
 * unused, which marks the mount `wasted` until it opens two rows in a row again: such a
 * reader pays one check ahead for nothing, not one per file.
 */
static int ahead_worth(struct mount *m, size_t row, int used) {
  pthread_mutex_lock(&m->ahead_lock);
  int in_order = m->ahead.last_valid && row == m->ahead.last_row + 1;
  m->ahead.last_row = row;
  m->ahead.last_valid = 1;
  if (used || in_order) m->ahead.wasted = 0;
  else if ((m->ahead.fd >= 0 && m->ahead.row != row) || (m->ahead.busy && m->ahead.busy_row != row)) m->ahead.wasted = 1; /* it went elsewhere */
  int worth = !m->ahead.wasted;
  pthread_mutex_unlock(&m->ahead_lock);
  return worth;
}

/*
 * Passthrough for row `row` of a file of `size` bytes: 1 when this open was answered as
 * passthrough (fi->fh set and the reply's backing id noted), else 0, and this open is
 * counted in the row's `other` (in the same hold of the row's lock as the decision, so no
 * passthrough open of the row can start between the two), for the caller to open it
 * another way.
 */
static int pt_open(struct mount *m, size_t row, const struct tier_file *f, struct fuse_file_info *fi, int hot) {
  uint64_t size = f->size;
  struct row_state *st = &m->rs[row];
  pthread_mutex_t *lock = row_lock(m, row);
  uint64_t checked = 0; /* bytes read from disk to check the file (0: the row's backing file is reused) */
  int ahead_used = 0;
  pthread_mutex_lock(lock);
  if (st->pt == 0) {
    /* Any handle not in passthrough (ours in memory, JavaScript's, or given to JavaScript before the listing came) rules it out. */
    int id = -1;
    /* A hot row (see "Fetched into memory") starts no passthrough: JavaScript opens it, counted in `other`. */
    if (!hot && st->other == 0 && __atomic_load_n(&m->early, __ATOMIC_SEQ_CST) == 0 && !__atomic_load_n(&m->pt_off, __ATOMIC_RELAXED)) {
      /* Checked while holding the row (its other opens wait; other rows do not), so no open of it can start meanwhile. */
      int fd = size >= AHEAD_MIN && !m->ahead_off ? ahead_take(m, row) : -1;
      ahead_used = fd >= 0;
      if (fd < 0) fd = sluice_tier_open_verified(f->dir, f->name, f->block, size, NULL, 0);
      id = fd >= 0 ? sluice_fuse_backing_open(fd) : fd;
      if (fd >= 0) close(fd); /* the kernel holds the file once registered */
      if (fd >= 0 && id < 0 && id != -ENOMEM && id != -EMFILE && id != -ENFILE) {
        /* Not a passing shortage: every backing file would be refused the same way. */
        __atomic_store_n(&m->pt_off, 1, __ATOMIC_RELAXED);
      }
    }
    if (id <= 0) {
      st->other++;
      pthread_mutex_unlock(lock);
      return 0;
    }
    st->backing = id;
    checked = size;
  }
  /* The kernel wants every open of an inode in passthrough on the same backing file: a later open reuses it. */
  st->pt++;
  int id = st->backing;
  pthread_mutex_unlock(lock);
  sluice_fuse_reply_backing(id);
  fi->fh = pt_fh(row, size);
  pthread_mutex_lock(&m->lock);
  m->own_counts[C_PT_OPENS]++;
  m->own_counts[C_PT_DISK_BYTES] += checked;
  m->own_counts[C_PT_DISK_FILES] += checked > 0;
  m->own_counts[C_PT_AHEAD] += ahead_used;
  pthread_mutex_unlock(&m->lock);
  if (checked >= AHEAD_MIN && !m->ahead_off && ahead_worth(m, row, ahead_used)) ahead_start(m, row);
  return 1;
}

/*
 * JavaScript's open (fuse-native's), recorded in jo when passthrough must know of it: a
 * row's (row1 > 0, counted in its `other` already) or an early one (`early`: counted in
 * m->early already).
 */
static int js_open(struct mount *m, const char *path, struct fuse_file_info *fi, uint32_t row1, int early) {
  int res = m->open(path, fi);
  if (row1 == 0 && !early) return res;
  if (res != 0) {
    if (early) __atomic_sub_fetch(&m->early, 1, __ATOMIC_ACQ_REL);
    row_other_done(m, row1);
    return res;
  }
  pthread_mutex_lock(&m->lock);
  /* Not kept (no memory): the count stays, and this row (or, early, the mount) simply goes without passthrough. */
  (void)jo_put(m, fi->fh, row1, (uint32_t)early);
  pthread_mutex_unlock(&m->lock);
  return res;
}

int mem_open(const char *path, struct fuse_file_info *fi) {
  struct mount *m = mount_of_request();
  if (m == NULL) return -EIO; /* cannot happen: only our mounts have this open */
  /* Only what JavaScript would open read-only with no other effect: else it answers (EROFS...). */
  if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC) != 0) return m->open(path, fi);
  struct tier_file f;
  f.size = 0;
  size_t row_i = 0;
  /*
   * Early opens: an open that finds no listing with names cannot say which row it is, so it
   * holds m->early until released, and no passthrough starts meanwhile. It is counted while
   * the read lock is held: the listing is installed under the write lock, so a passthrough
   * open that sees the listing sees the count too.
   */
  int pt_ok = sluice_fuse_passthrough_ok();
  pthread_rwlock_rdlock(&m->attrs_lock);
  const struct attrs *a = m->attrs;
  int tabled = a != NULL && a->names != NULL;
  int early = pt_ok && !tabled;
  if (early) __atomic_add_fetch(&m->early, 1, __ATOMIC_SEQ_CST);
  struct attr_val v;
  size_t row = NO_ROW;
  if (a != NULL && a->names != NULL && !attrs_lookup(a, path, strlen(path), &v, &row)) row = NO_ROW;
  /* A named file of one block may be read into memory here; a larger one (named only when the mount can pass through) only passed through. */
  int hot = 0;
  if (row != NO_ROW && row_tier_file(a, row, &f)) {
    row_i = row;
    hot = row_hot_take(a, row_i);
  }
  pthread_rwlock_unlock(&m->attrs_lock);
  if (f.size == 0) return js_open(m, path, fi, 0, early);
  /* Rows are tracked for passthrough only on a mount that negotiated it (rs is set before names are seen). */
  uint32_t row1 = 0;
  if (pt_ok && __atomic_load_n(&m->rs, __ATOMIC_ACQUIRE) != NULL && row_i < m->rs_n) {
    __atomic_store_n(&m->rs[row_i].nodeid, sluice_fuse_request_nodeid(), __ATOMIC_RELAXED);
    if (pt_open(m, row_i, &f, fi, hot)) return 0;
    row1 = (uint32_t)row_i + 1; /* counted in the row's `other` by pt_open, until released */
  }
  uint64_t fh;
  if (!hot && f.size <= f.block && own_open(m, &f, row1, &fh)) {
    fi->fh = fh;
    return 0;
  }
  return js_open(m, path, fi, row1, 0);
}


/* Counts of the handles opened here and released since the last call (see own_counts). */
void sluice_own_take(const void *thread, uint64_t out[OWN_COUNTS]) {
  memset(out, 0, OWN_COUNTS * sizeof *out);
  struct mount *m = mount_of_thread(thread);
  if (m == NULL) return;
  pthread_mutex_lock(&m->lock);
  memcpy(out, m->own_counts, sizeof m->own_counts);
  memset(m->own_counts, 0, sizeof m->own_counts);
  pthread_mutex_unlock(&m->lock);
}


/*
 * Marks row `row` of the installed listing hot (see "Fetched into memory"): 1, or 0 when this
 * mount has no listing with names or no such row.
 */
int sluice_tier_hot(const void *thread, uint32_t row) {
  struct mount *m = mount_of_thread(thread);
  if (m == NULL) return 0;
  int ok = 0;
  pthread_rwlock_rdlock(&m->attrs_lock);
  struct attrs *a = m->attrs;
  if (a != NULL && a->hot != NULL && row < a->n) {
    __atomic_store_n(&a->hot[row], hot_now(), __ATOMIC_RELAXED);
    ok = 1;
  }
  pthread_rwlock_unlock(&m->attrs_lock);
  return ok;
}

