/*
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
 * Attributes. getattr of a listed path is answered here too. A FastFile view is fixed once
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
 * same bound as JavaScript's own small-file buffers (disk-cache.ts SMALL_BUFFER_BYTES), so
 * the two together stay within 32 MiB; past it an OPEN goes to JavaScript.
 */
#define OWN_BYTES_MAX (16u * 1024 * 1024)
static uint64_t own_bytes; /* atomic */
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
struct attrs {
  uint32_t uid, gid, blksize;
  size_t mask;      /* index slots - 1 (a power of two, at least twice the rows) */
  uint32_t *index;  /* row + 1, or 0 for an empty slot (linear probing) */
  struct attr_row *rows;
  char *paths;
  /* The disk tier, when small files may be opened here (see "Opens"); else NULL. */
  char *tier_dir;   /* its objects folder */
  uint32_t tier_block;
  uint8_t *names;   /* 32 bytes per row: the cache file name (sha256), all zero for none */
  uint32_t *hot;    /* with names: per row, when JavaScript started fetching it into memory (hot_now(); 0: never), see "Fetched into memory" */
  size_t n;         /* rows */
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

/* JavaScript's calls name a mount by its fuse-native thread buffer: found also after its loop ended (an unmount still takes its counts). */
static struct mount *mount_of_thread(const void *user_data) {
  int n = __atomic_load_n(&mount_count, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++) {
    if (mounts[i]->user_data == user_data && __atomic_load_n(&mounts[i]->wrapped, __ATOMIC_ACQUIRE)) return mounts[i];
  }
  return NULL;
}

/*
 * Ended mounts. Requests find their mount by libfuse's struct fuse (mount_of_request), an
 * address that fuse_destroy() frees when a mount's loop ends (fuse-native's thread, after
 * the unmount). A later mount of another fuse-native thread may get a struct fuse at that
 * very address, and its requests would then find the ended mount's table first: its
 * listing (dropped at unmount, so every getattr and open went to JavaScript: tests saw
 * "C counted no opens"), or, where the ended mount's listing was still installed, another
 * prefix's attributes and cache files under the same paths. So fuse_destroy() (wrapped
 * below) forgets the address before libfuse frees it, and fuse_new() forgets it in every
 * other table once libfuse hands it out again (the same, should a destroy not pass here).
 * Called with mounts_lock held.
 */
static void forget_fuse_locked(const struct fuse *f, const struct mount *keep) {
  if (f == NULL) return;
  for (int i = 0; i < mount_count; i++) {
    if (mounts[i] != keep && __atomic_load_n(&mounts[i]->fuse, __ATOMIC_ACQUIRE) == f) __atomic_store_n(&mounts[i]->fuse, NULL, __ATOMIC_RELEASE);
  }
}

/* Mounts whose struct fuse is live (not yet destroyed): for tests (memReadLiveMounts). */
static int live_mounts(void) {
  pthread_mutex_lock(&mounts_lock);
  int live = 0;
  for (int i = 0; i < mount_count; i++) live += __atomic_load_n(&mounts[i]->fuse, __ATOMIC_ACQUIRE) != NULL;
  pthread_mutex_unlock(&mounts_lock);
  return live;
}

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

static const struct attr_row *attrs_find(const struct attrs *a, const char *path, size_t len) {
  uint32_t r = a->index[attrs_slot(a, path, len, fnv1a(path, len))];
  return r == 0 ? NULL : &a->rows[r - 1];
}

static void attrs_free(struct attrs *a) {
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

static int mem_getattr(const char *path, struct stat *st) {
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
static int jo_take(struct mount *m, uint64_t fh, struct jo_slot *out) {
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

static pthread_mutex_t *row_lock(struct mount *m, size_t row) { return &m->row_locks[row % ROW_LOCKS]; }

/* One fewer non-passthrough handle of row1 - 1 (0: none). */
static void row_other_done(struct mount *m, uint32_t row1) {
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
static uint64_t pt_fh_size(uint64_t fh) { return fh & 0x3fffffffu; }
static int is_pt_fh(uint64_t fh) { return (fh & 0xc0000000u) == 0xc0000000u && (fh >> 32) != 0; }

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
  const struct attr_row *r = &a->rows[row];
  const uint8_t *nm = a->names + 32 * row;
  if (!S_ISREG(r->mode) || r->size == 0 || memcmp(nm, none, 32) == 0) return 0;
  memcpy(f->name, nm, 32);
  strcpy(f->dir, a->tier_dir); /* its length was checked when installed */
  f->block = a->tier_block;
  f->size = r->size;
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
static int ahead_env_off(void) {
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

static int mem_open(const char *path, struct fuse_file_info *fi) {
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
  const struct attr_row *row = a != NULL && a->names != NULL ? attrs_find(a, path, strlen(path)) : NULL;
  /* A named file of one block may be read into memory here; a larger one (named only when the mount can pass through) only passed through. */
  int hot = 0;
  if (row != NULL && row_tier_file(a, (size_t)(row - a->rows), &f)) {
    row_i = (size_t)(row - a->rows);
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
    m->own_counts[C_PT_BYTES] += pt_fh_size(fi->fh);
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

napi_status sluice_memread_init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    {"memReadAdd", NULL, js_add, NULL, NULL, NULL, napi_enumerable, NULL},
    {"memReadRemove", NULL, js_remove, NULL, NULL, NULL, napi_enumerable, NULL},
    {"memReadDrain", NULL, js_drain, NULL, NULL, NULL, napi_enumerable, NULL},
    {"memReadClear", NULL, js_clear, NULL, NULL, NULL, napi_enumerable, NULL},
    {"memReadMounted", NULL, js_mounted, NULL, NULL, NULL, napi_enumerable, NULL},
    {"memReadLiveMounts", NULL, js_live_mounts, NULL, NULL, NULL, napi_enumerable, NULL},
    {"attrTableSet", NULL, js_attrs_set, NULL, NULL, NULL, napi_enumerable, NULL},
    {"attrTableTake", NULL, js_attrs_take, NULL, NULL, NULL, napi_enumerable, NULL},
    {"ownOpensTake", NULL, js_own_take, NULL, NULL, NULL, napi_enumerable, NULL},
    {"tierHotMark", NULL, js_tier_hot, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  return napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
}
