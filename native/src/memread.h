/*
 * memread.h: the types and helpers shared by the memread layer's C files (fuse_mounts.c,
 * fuse_attrs.c, fuse_open.c, fuse_memread.c, fuse_memread_napi.c), lowest first: each calls
 * only the ones before it. Private to them: the addon's other files
 * use include/sluice_memread.h. Every function declared here has hidden visibility, so the
 * addon, loaded RTLD_GLOBAL (fuse_fd.c), exports none of them into the process's symbol scope.
 */
#ifndef SLUICE_MEMREAD_PRIVATE_H
#define SLUICE_MEMREAD_PRIVATE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include <node_api.h>

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
typedef int (*getattr_fn)(const char *, struct stat *);
typedef int (*read_fn)(const char *, char *, size_t, off_t, struct fuse_file_info *);
/* libfuse 2.9's buffer vector (fuse_common.h), with one buffer: what read_buf answers with. */
struct fuse_buf {
  size_t size;
  int flags; /* enum fuse_buf_flags; 0: memory */
  void *mem;
  int fd;
  off_t pos;
};
struct fuse_bufvec {
  size_t count;
  size_t idx;
  size_t off;
  struct fuse_buf buf[1];
};
typedef int (*read_buf_fn)(const char *, struct fuse_bufvec **, size_t, off_t, struct fuse_file_info *);
typedef int (*release_fn)(const char *, struct fuse_file_info *);
typedef int (*open_fn)(const char *, struct fuse_file_info *);
/* Indices among fuse_operations' leading function pointers (libfuse 2.x). */
#define OP_GETATTR 0
#define OP_OPEN 14
#define OP_READ 15
#define OP_RELEASE 19
/*
 * read_buf's index: libfuse 2.9's fuse_operations has 38 function pointers (getattr .. bmap),
 * then one unsigned int of flag bits (padded to a pointer's size), then ioctl, poll,
 * write_buf, read_buf: byte offset 336 on LP64 (offsetof with libfuse-dev's fuse.h:
 * read 120, release 152, bmap 296, ioctl 312, read_buf 336, sizeof 360).
 */
#define OP_READ_BUF 42

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
  int owned; /* opened here (see "Opens"): bytes were malloc'd here and are freed at release */
  int counted; /* owned, and already counted (at unmount): its release only frees it */
  uint32_t row1; /* owned: its listing row + 1 (see "Passthrough"), or 0 */
};
/*
 * Bytes of small files opened here and not yet released, for the whole process: 16 MiB, the
 * same bound as JavaScript's own small-file buffers (src/cache/tier-readers.ts SMALL_BUFFER_BYTES), so
 * the two together stay within 32 MiB; past it an OPEN goes to JavaScript.
 */
#define OWN_BYTES_MAX (16u * 1024 * 1024)
/* Tries for a free slot for a handle opened here (each a new fh, so a new slot); then JavaScript opens it. */
#define OWN_SLOT_TRIES 8
/* Row state locks: striped, so that a passthrough open verifying one file does not hold up the others. */
#define ROW_LOCKS 64
#define OWN_COUNTS 13
enum { C_PT_OPENS = 6, C_PT_RELEASES, C_PT_DISK_BYTES, C_PT_DISK_FILES, C_PT_AHEAD, C_PT_AHEAD_STARTED, C_PT_BYTES };
/*
 * Checked ahead (see "Checked ahead"): files of AHEAD_MIN or more, 8 MiB, whose check (~1 ms
 * and up) is worth a thread; a check is used within AHEAD_MAX_S, 10 s, beyond which the
 * reader has gone elsewhere (and the page cache may have let the bytes go).
 */
#define AHEAD_MIN (8u << 20)
#define AHEAD_MAX_S 10
/* How long an OPEN waits for its row's check ahead to end before checking itself: 5 s, far above a check of 256 MiB from disk (~0.3 s here). */
#define AHEAD_WAIT_S 5
/*
 * How long a row's mark lasts when no OPEN takes it (see "Fetched into memory"): 10 s, far
 * beyond the time a prefetched file waits for its reader (--cross-file-prefetch 32 files
 * ahead of a reader of 10 files/s is 3.2 s). A file fetched ahead but never opened then goes
 * back to being opened here.
 */
#define HOT_MS 10000u
struct ahead {
  int busy;          /* a check is running, of row busy_row */
  size_t busy_row;
  pthread_cond_t done; /* signalled when a check ends */
  uint64_t gen;      /* the mount's generation it belongs to (m->gen) */
  size_t row;        /* the listing row it checked */
  int fd;            /* its verified data file, or -1 */
  struct stat before;/* that file's fstat before its bytes were read */
  struct timespec at;/* when the check ended (CLOCK_MONOTONIC) */
  size_t last_row;   /* the row of the last OPEN checked afresh or from a check ahead, when last_valid */
  int last_valid;
  int wasted;        /* the reader left a check ahead unused: no more until it reads in order again */
};
/* A listing row's open handles, for passthrough (see "Passthrough"). */
struct row_state {
  uint64_t nodeid; /* the kernel's node id of the row's file, once an OPEN of it was seen (atomic), for FUSE_NOTIFY_INVAL_INODE */
  int32_t backing; /* the backing id passthrough handles of this row use, while pt > 0 */
  uint32_t pt;     /* passthrough handles open */
  uint32_t other;  /* handles open that are not passthrough: read into memory here, or JavaScript's */
};
/* An open answered by JavaScript: its handle, and the row + 1 it counts in (other), or early. */
struct jo_slot { uint64_t fh; uint32_t row1; uint32_t early; };
struct released {
  uint64_t fh, reads, served, asked;
};
/* One listed path's attributes (getattr answered here; see "Attributes" above). */
struct attr_row {
  uint64_t hash;     /* FNV-1a of the path's bytes */
  uint64_t path_off; /* in attrs.paths */
  uint64_t size;
  uint64_t mtime_ms; /* also atime and ctime, as the JavaScript answer has them */
  uint32_t path_len;
  uint32_t mode;
  uint32_t nlink;
};
/* One path's attributes as getattr answers them. */
struct attr_val {
  uint64_t size;
  uint64_t mtime_ms;
  uint32_t mode;
  uint32_t nlink;
};
/* A listing read in place from the catalog's own columns (fuse_attrs.c "Catalog"); private to fuse_attrs.c. */
struct cat_view;
/* No row: a folder of a catalog listing (rows are files there). */
#define NO_ROW SIZE_MAX
struct attrs {
  uint32_t uid, gid, blksize;
  struct cat_view *cat; /* set: the listing is the catalog's columns (index, rows and paths unused); else the path table below */
  size_t mask;      /* index slots - 1 (a power of two, at least twice the rows) */
  uint32_t *index;  /* row + 1, or 0 for an empty slot (linear probing) */
  struct attr_row *rows;
  char *paths;
  /* The disk tier, when small files may be opened here (see "Opens"); else NULL. */
  char *tier_dir;   /* its objects folder */
  uint32_t tier_block;
  uint8_t *names;   /* 32 bytes per row: the cache file name (sha256), all zero for none */
  uint32_t *hot;    /* with names: per row, when JavaScript started fetching it into memory (hot_now(); 0: never), see "Fetched into memory" */
  size_t n;         /* rows (of a catalog listing: its files) */
};
struct mount {
  struct fuse *fuse;     /* libfuse's, as requests' contexts name it; NULL once fuse_destroy() freed it (see "Ended mounts") */
  int wrapped;           /* fuse_new() made this thread's mount with our operations (atomic): JavaScript's calls find it by user_data */
  int reply_from_lends;  /* read_buf is ours: reads inside one lent buffer are replied from it (fuse_init.c "Replies from lent memory") */
  int reply_views;       /* with reply_from_lends: JavaScript may answer a read with a view of its bytes (fuse_lend.c "Views"); not with SLUICE_NO_VIEW=1 */
  void *user_data;       /* fuse-native's fuse_thread_t (its JavaScript _thread Buffer) */
  getattr_fn getattr;    /* fuse-native's */
  read_fn read;
  release_fn release;
  open_fn open;
  pthread_rwlock_t attrs_lock; /* read-held by a getattr using attrs, write-held to replace it */
  struct attrs *attrs;         /* NULL until JavaScript installs the listing */
  uint64_t attr_hits;          /* getattrs answered from attrs, not yet taken by JavaScript (atomic) */
  pthread_mutex_t lock;  /* guards slots and the queue */
  struct entry slots[SLOTS];
  struct released queue[QUEUE];
  size_t head, count;
  uint64_t next_own;      /* handles opened here so far (under lock) */
  /* Passthrough (see "Passthrough"): per listing row, under row_locks[row % ROW_LOCKS]. */
  struct row_state *rs;   /* NULL until a listing with names is installed on a mount that negotiated passthrough */
  size_t rs_n;
  pthread_mutex_t row_locks[ROW_LOCKS];
  /* Opens answered by JavaScript that passthrough must know of (under lock). */
  struct jo_slot *jo;
  size_t jo_cap, jo_count;
  uint64_t early; /* opens that found no listing with names, in flight or open (atomic): no passthrough while > 0 */
  int pt_off;     /* the kernel refused a backing file (no CAP_SYS_ADMIN, too deep a stack...): no more tries (atomic) */
  /*
   * Not yet taken by JavaScript (under lock): of handles read into memory and released:
   * opens, reads, bytes served, bytes asked, bytes read from disk, handles that served a
   * byte; then passthrough opens, passthrough releases, bytes read from disk to verify
   * passthrough files, and those files, passthrough opens that used a check made ahead,
   * checks ahead started, and the sizes of the passthrough handles released (C_PT_BYTES).
   */
  uint64_t own_counts[OWN_COUNTS];
  struct ahead ahead; /* under ahead_lock (see "Checked ahead") */
  pthread_mutex_t ahead_lock; /* taken last: after a row's lock (OPEN) or lock (a remount), never before either */
  int ahead_off;      /* SLUICE_NO_CHECK_AHEAD at this mount */
  uint64_t gen;       /* mounts of this thread so far (under ahead_lock): an ahead check of an older one is dropped */
  struct sluice_lends *lends; /* sequential handles' lent blocks (fuse_lend.c), or NULL (no memory): asked first by mem_read */
};

#pragma GCC visibility push(hidden)
/* fuse_mounts.c: the registry (mounts_lock guards appends; readers scan up to mount_count) */
extern uint64_t own_bytes; /* bytes of small files opened here and not yet released, process-wide (atomic) */
extern struct mount *mounts[MAX_MOUNTS];
extern int mount_count;
extern pthread_mutex_t mounts_lock;
extern struct fuse_context *(*get_context)(void); /* libfuse's fuse_get_context, looked up by fuse_new() */
struct mount *mount_of_request(void);
struct mount *mount_of_thread(const void *user_data);
void forget_fuse_locked(const struct fuse *f, const struct mount *keep);
int live_mounts(void);
/* fuse_attrs.c */
void attrs_free(struct attrs *a);
int attrs_lookup(const struct attrs *a, const char *path, size_t len, struct attr_val *v, size_t *row);
int attrs_row(const struct attrs *a, size_t row, struct attr_val *v);
int mem_getattr(const char *path, struct stat *st);
/* Installs the listing as the catalog's columns (fuse_attrs.c "Catalog"); Node's main thread only. */
int sluice_attrs_set_catalog(napi_env env, const void *thread, napi_value cat, uint32_t uid, uint32_t gid, uint32_t blksize,
                             const char *tier_dir, uint32_t tier_block, const uint8_t *names, size_t names_len);
/* fuse_open.c */
int ahead_env_off(void);
int is_pt_fh(uint64_t fh);
uint64_t pt_fh_size(uint64_t fh);
int jo_take(struct mount *m, uint64_t fh, struct jo_slot *out);
pthread_mutex_t *row_lock(struct mount *m, size_t row);
void row_other_done(struct mount *m, uint32_t row1);
int mem_open(const char *path, struct fuse_file_info *fi);
#pragma GCC visibility pop

#endif
