/*
 * Reads answered in libfuse's worker thread, for file handles whose bytes are already in
 * memory and verified (issue 14: a small file from the disk tier, read whole and CRC-checked
 * at open by src/cache/disk-cache.ts openSmall).
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
 * What is left per file is two hand-offs (LOOKUP and OPEN): in a CPU profile of the
 * restarted daemon (after), the self time of the direct getattr and open handlers
 * (src/fuse/native.ts; native calls such as fuse-native's signal, which wakes the libfuse
 * thread, count there) is ~60% of the main thread's busy time; openSmall's syscalls (pread,
 * open, close, futimes) and the object name's sha256 about 15%.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <node_api.h>

#include "sluice_fuse_fd.h"
#include "sluice_memread.h"

/* libfuse 2 types: opaque, or the leading part of their stable layout (fuse.h, fuse_common.h). */
struct fuse;
struct fuse_chan;
struct fuse_args;
struct fuse_file_info {
  int flags;
  unsigned long fh_old;
  int writepage;
  unsigned int bits; /* direct_io, keep_cache, flush, nonseekable, flock_release, padding */
  uint64_t fh;
  uint64_t lock_owner;
};
struct fuse_context {
  struct fuse *fuse;
  uid_t uid;
  gid_t gid;
  pid_t pid;
  void *private_data;
  mode_t umask;
};
typedef int (*read_fn)(const char *, char *, size_t, off_t, struct fuse_file_info *);
typedef int (*release_fn)(const char *, struct fuse_file_info *);
/* Indices of read and release among fuse_operations' leading function pointers (libfuse 2.x). */
#define OP_READ 15
#define OP_RELEASE 19

/*
 * Slots per mount: the disk tier holds at most 16 MiB of small-file buffers (4,096 of a
 * page at the least), so 4,096 handles open at once with their bytes in memory is the most
 * there can be; a direct-mapped table of that many rarely refuses a growing fh.
 */
#define SLOTS 4096
/* Releases queued for JavaScript; when it is full, releases go through fuse-native. */
#define QUEUE 4096
/* Mounts of one process (one per channel); past it a mount simply has no table. */
#define MAX_MOUNTS 64

struct entry {
  uint64_t fh;
  const char *bytes;
  size_t length;
  uint64_t reads, served, asked;
  int used;
};
struct released {
  uint64_t fh, reads, served, asked;
};
struct mount {
  struct fuse *fuse;     /* libfuse's, as requests' contexts name it */
  void *user_data;       /* fuse-native's fuse_thread_t (its JavaScript _thread Buffer) */
  read_fn read;          /* fuse-native's */
  release_fn release;
  pthread_mutex_t lock;  /* guards slots and the queue */
  struct entry slots[SLOTS];
  struct released queue[QUEUE];
  size_t head, count;
};

static struct mount *mounts[MAX_MOUNTS];
static int mount_count; /* published with release order after the slot is filled */
static pthread_mutex_t mounts_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fuse_context *(*get_context)(void);

static struct mount *mount_of_request(void) {
  struct fuse_context *ctx = get_context != NULL ? get_context() : NULL;
  if (ctx == NULL) return NULL;
  int n = __atomic_load_n(&mount_count, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++) {
    struct mount *m = mounts[i];
    if (__atomic_load_n(&m->fuse, __ATOMIC_ACQUIRE) == ctx->fuse) return m;
  }
  return NULL;
}

static struct mount *mount_of_thread(const void *user_data) {
  int n = __atomic_load_n(&mount_count, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++) {
    if (mounts[i]->user_data == user_data && __atomic_load_n(&mounts[i]->fuse, __ATOMIC_ACQUIRE) != NULL) return mounts[i];
  }
  return NULL;
}

static int mem_read(const char *path, char *buf, size_t size, off_t offset, struct fuse_file_info *fi) {
  struct mount *m = mount_of_request();
  if (m == NULL) return -EIO; /* cannot happen: only our mounts have this read */
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

static int mem_release(const char *path, struct fuse_file_info *fi) {
  struct mount *m = mount_of_request();
  if (m == NULL) return 0;
  struct entry *e = &m->slots[fi->fh % SLOTS];
  pthread_mutex_lock(&m->lock);
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
      m->user_data = user_data;
      mounts[mount_count] = m;
      __atomic_store_n(&mount_count, mount_count + 1, __ATOMIC_RELEASE);
    }
  }
  if (m == NULL) {
    pthread_mutex_unlock(&mounts_lock);
    return real(ch, args, op, op_size, user_data);
  }
  __atomic_store_n(&m->fuse, NULL, __ATOMIC_RELEASE);
  pthread_mutex_lock(&m->lock);
  memset(m->slots, 0, sizeof m->slots);
  m->head = m->count = 0;
  m->read = (read_fn)ops[OP_READ];
  m->release = (release_fn)ops[OP_RELEASE];
  pthread_mutex_unlock(&m->lock);
  /* libfuse copies the operations into its own struct fuse, so this copy may go after. */
  void **mine = malloc(op_size);
  if (mine == NULL) {
    pthread_mutex_unlock(&mounts_lock);
    return real(ch, args, op, op_size, user_data);
  }
  memcpy(mine, op, op_size);
  mine[OP_READ] = (void *)mem_read;
  mine[OP_RELEASE] = (void *)mem_release;
  struct fuse *f = real(ch, args, mine, op_size, user_data);
  free(mine);
  __atomic_store_n(&m->fuse, f, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&mounts_lock);
  return f;
}

int sluice_memread_add(const void *thread, uint64_t fh, const char *bytes, size_t length) {
  struct mount *m = mount_of_thread(thread);
  if (m == NULL) return -ENODEV;
  struct entry *e = &m->slots[fh % SLOTS];
  int res = 0;
  pthread_mutex_lock(&m->lock);
  if (e->used) res = -EBUSY;
  else *e = (struct entry){ fh, bytes, length, 0, 0, 0, 1 };
  pthread_mutex_unlock(&m->lock);
  return res;
}

int sluice_memread_remove(const void *thread, uint64_t fh, uint64_t counts[3]) {
  struct mount *m = mount_of_thread(thread);
  if (m == NULL) return 0;
  struct entry *e = &m->slots[fh % SLOTS];
  int found = 0;
  pthread_mutex_lock(&m->lock);
  if (e->used && e->fh == fh) {
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

/* ---- N-API ---- */

static int buffer_arg(napi_env env, napi_value v, void **data, size_t *length) {
  bool is;
  return napi_is_buffer(env, v, &is) == napi_ok && is && napi_get_buffer_info(env, v, data, length) == napi_ok;
}

static int fh_arg(napi_env env, napi_value v, uint64_t *fh) {
  double d;
  if (napi_get_value_double(env, v, &d) != napi_ok || !(d >= 0) || d > 9007199254740991.0) return 0;
  *fh = (uint64_t)d;
  return 1;
}

/* The Float64Array `v` as doubles (its length in *count). */
static int f64_arg(napi_env env, napi_value v, double **data, size_t *count) {
  bool is;
  napi_typedarray_type type;
  napi_value ab;
  size_t off;
  if (napi_is_typedarray(env, v, &is) != napi_ok || !is) return 0;
  if (napi_get_typedarray_info(env, v, &type, count, (void **)data, &ab, &off) != napi_ok) return 0;
  return type == napi_float64_array;
}

static napi_value bad_args(napi_env env, const char *usage) {
  napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", usage);
  return NULL;
}

static napi_value boolean(napi_env env, int v) {
  napi_value r;
  napi_get_boolean(env, v != 0, &r);
  return r;
}

/* memReadAdd(thread: Buffer, fh: number, bytes: Buffer): boolean (false: no table for this mount, or the slot is taken). */
static napi_value js_add(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  void *thread, *bytes;
  size_t tl, bl;
  uint64_t fh;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 3 || !buffer_arg(env, argv[0], &thread, &tl) ||
      !fh_arg(env, argv[1], &fh) || !buffer_arg(env, argv[2], &bytes, &bl)) {
    return bad_args(env, "memReadAdd(thread: Buffer, fh: number, bytes: Buffer)");
  }
  return boolean(env, sluice_memread_add(thread, fh, bytes, bl) == 0);
}

/* memReadRemove(thread, fh, counts: Float64Array(3)): boolean; counts = reads, bytes served, bytes asked. */
static napi_value js_remove(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  void *thread;
  size_t tl, n;
  uint64_t fh, counts[3];
  double *out;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 3 || !buffer_arg(env, argv[0], &thread, &tl) ||
      !fh_arg(env, argv[1], &fh) || !f64_arg(env, argv[2], &out, &n) || n < 3) {
    return bad_args(env, "memReadRemove(thread: Buffer, fh: number, counts: Float64Array(3))");
  }
  if (!sluice_memread_remove(thread, fh, counts)) return boolean(env, 0);
  for (int i = 0; i < 3; i++) out[i] = (double)counts[i];
  return boolean(env, 1);
}

/* Shared by memReadDrain (released handles) and memReadClear (live ones, removed): records of (fh, reads, served, asked). */
static napi_value drain(napi_env env, napi_callback_info info, int clear) {
  size_t argc = 2;
  napi_value argv[2];
  void *thread;
  size_t tl, n;
  double *out;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 || !buffer_arg(env, argv[0], &thread, &tl) ||
      !f64_arg(env, argv[1], &out, &n) || n < 4) {
    return bad_args(env, "memReadDrain/Clear(thread: Buffer, out: Float64Array(4 * k))");
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
  size_t argc = 1;
  napi_value argv[1];
  void *thread;
  size_t tl;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 || !buffer_arg(env, argv[0], &thread, &tl)) {
    return bad_args(env, "memReadMounted(thread: Buffer)");
  }
  return boolean(env, sluice_memread_mounted(thread));
}

napi_status sluice_memread_init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    {"memReadAdd", NULL, js_add, NULL, NULL, NULL, napi_enumerable, NULL},
    {"memReadRemove", NULL, js_remove, NULL, NULL, NULL, napi_enumerable, NULL},
    {"memReadDrain", NULL, js_drain, NULL, NULL, NULL, napi_enumerable, NULL},
    {"memReadClear", NULL, js_clear, NULL, NULL, NULL, napi_enumerable, NULL},
    {"memReadMounted", NULL, js_mounted, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  return napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
}
