/*
 * Larger FUSE reads for libfuse 2: a channel that raises the kernel's max_pages in the
 * INIT reply.
 *
 * The kernel sends a FUSE filesystem reads of at most max_pages pages. It starts at 32
 * (128 KiB with 4 KiB pages); since Linux 4.20 (protocol 7.28) the filesystem may raise it
 * to 256 (1 MiB, the fuse_max_pages_limit sysctl) by setting FUSE_MAX_PAGES and max_pages
 * in its INIT reply. libfuse 2.9 speaks protocol 7.19 and has neither, so every 1 MiB a
 * reader asks for costs 8 requests, each a hand-off from a libfuse worker to Node's main
 * thread and back (fuse-native's uv_async + semaphore): the largest share of a sequential
 * read's CPU once the bytes are cached (BENCHMARKS.md, t11-ffcpu).
 *
 * How: fuse_mount() (ours, src/fuse_fd.c) wraps the channel libfuse made in one whose
 * receive and send are libfuse's own kernel channel's (read and writev on the /dev/fuse
 * descriptor, with the same errno handling) plus two things:
 *  - receive notes the INIT request: its unique id, the kernel's protocol minor, flags;
 *  - send, for the reply to that INIT only, when the kernel offered FUSE_MAX_PAGES (minor
 *    >= 28), writes libfuse's 24-byte fuse_init_out out to the 64-byte layout with
 *    FUSE_MAX_PAGES set and max_pages = the configured value. Everything else libfuse
 *    negotiated (protocol minor 19, max_write, max_readahead, its flags) stays as it was.
 * The kernel reads flags and max_pages from the reply whatever minor it names (minor >= 6
 * for flags; the reply may be shorter or equal to its own struct, and is zero-filled), and
 * clamps max_pages to fuse_max_pages_limit. Only reads get larger: writes stay bounded by
 * max_write (128 KiB, what libfuse's 132 KiB receive buffer holds; a read-only mount gets
 * none), and no request the kernel sends grows with max_pages except FUSE_WRITE. libfuse
 * 2's high-level read allocates the reply buffer at the size asked, so nothing else limits
 * a 1 MiB read. A kernel without FUSE_MAX_PAGES gets libfuse's reply unchanged.
 *
 * FUSE passthrough (Linux >= 6.9, CONFIG_FUSE_PASSTHROUGH; issue 14). When the kernel offers
 * FUSE_PASSTHROUGH (flags2 of an INIT with FUSE_INIT_EXT), the INIT reply also sets
 * FUSE_INIT_EXT, FUSE_PASSTHROUGH and max_stack_depth = 2 (FILESYSTEM_MAX_STACK_DEPTH: the
 * backing files may then sit on a stacked filesystem of depth 1, overlayfs in a container;
 * the price is that this mount cannot itself be a lower layer of an overlay). Then an OPEN
 * answered by fuse_open.c may name a backing file: it registers the file's descriptor
 * with the kernel (ioctl FUSE_DEV_IOC_BACKING_OPEN on /dev/fuse, which needs CAP_SYS_ADMIN;
 * refused: no passthrough, as before) and asks, for the reply to the request this thread is
 * answering, for FOPEN_PASSTHROUGH with that backing id; send() rewrites that one
 * fuse_open_out (libfuse 2 leaves its backing_id, the old padding, zero). The kernel then
 * reads that file itself for every read of the handle: no request reaches us. Requests are
 * answered in the thread that received them (libfuse 2's loop: receive, process, reply), so
 * a thread-local note of the request being answered ties the reply to the OPEN.
 * SLUICE_NO_PASSTHROUGH=1 (src/fuse/native.ts) leaves the INIT reply without it.
 *
 * Direct I/O (--direct-io, src/fuse/native.ts requestFuseDirectIo). libfuse 2 can only set
 * direct_io for a whole mount through its own option, which fuse-native does not pass, and
 * only per open from the high-level API's fuse_file_info, which fuse-native does not set.
 * So send() rewrites every successful OPEN reply of such a mount that is not passthrough:
 * FOPEN_DIRECT_IO set, FOPEN_KEEP_CACHE (libfuse's kernel_cache) cleared. The kernel then
 * keeps no page cache for the file: every read(2) becomes FUSE reads of the reader's own
 * size (up to max_pages each) copied straight into the reader's buffer. And when the
 * kernel offers FUSE_DIRECT_IO_ALLOW_MMAP (Linux >= 6.6, flags2 bit 4), the INIT reply
 * sets it, so mmap(2) of such a file still works (through the page cache, for the mapped
 * pages only); an older kernel refuses a shared mapping (MAP_SHARED) of a direct-I/O file
 * with ENODEV, and allows private ones.
 *
 * Replies from lent memory (issue 11). fuse_memread.c answers a READ that lies inside one
 * buffer of a lend (fuse_lend.c) through libfuse 2's read_buf, with a buffer vector whose one
 * memory buffer is the lent bytes themselves. libfuse sends such a vector without a copy
 * (fuse_send_data_iov's fallback: one memory buffer becomes the reply's second iovec), then
 * frees the vector and its buffer's memory. So before it returns, mem_read_buf notes here,
 * thread-locally, the bytes' address and length, where the vector keeps that address, and how
 * to end the hold (the lend slot's read lock). send() finds the note when the reply's second
 * iovec is exactly those bytes: it writes them to the kernel, clears the vector's address so
 * that libfuse frees only the vector, and ends the hold. The kernel copies the bytes into the
 * page cache during the writev, so they are no longer needed once it returns. The read lock
 * keeps lendTake (and so any reuse of the buffer) out until then. libfuse 2 answers a request
 * in the thread that received it: read_buf returns 0, fuse_reply_data sends at once, on this
 * thread. This saves one copy of every byte so answered (the copy into libfuse's buffer) and
 * libfuse's malloc of a buffer of the read's size. Only requests that came through a channel
 * of ours (tl_wrap) are answered so; any other mount keeps the copying read. The design
 * relies on that one libfuse 2.9 behaviour (checked against 2.9.9, Debian's): a reply of one
 * memory buffer is sent as it is, from its own address. A libfuse that sent it some other way
 * would copy the right bytes, then free() the lent address and abort the process: a loud
 * failure, never wrong bytes. SLUICE_LEND_COPY=1 avoids the path altogether.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sluice_fuse_fd.h"

struct fuse_chan;
struct fuse_session;
struct fuse_chan_ops {
  int (*receive)(struct fuse_chan **chp, char *buf, size_t size);
  int (*send)(struct fuse_chan *ch, const struct iovec iov[], size_t count);
  void (*destroy)(struct fuse_chan *ch);
};

/* The kernel's ABI (include/uapi/linux/fuse.h), the parts used here. */
#define FUSE_INIT_OPCODE 26
#define FUSE_OPEN_OPCODE 14
#define FUSE_READ_OPCODE 15
#define FUSE_MAX_PAGES_FLAG (1u << 22)
#define FUSE_MAX_PAGES_MINOR 28
#define FUSE_INIT_EXT_FLAG (1u << 30)
#define FUSE_PASSTHROUGH_FLAG2 (1u << 5) /* FUSE_PASSTHROUGH = 1 << 37: bit 5 of flags2 */
#define FUSE_FLAGS2_MINOR 36              /* fuse_init_in has flags2 from 7.36 */
#define FOPEN_PASSTHROUGH_FLAG (1u << 7)
#define FOPEN_DIRECT_IO_FLAG (1u << 0)
#define FOPEN_KEEP_CACHE_FLAG (1u << 1)
#define FUSE_DIRECT_IO_ALLOW_MMAP_FLAG2 (1u << 4) /* FUSE_DIRECT_IO_ALLOW_MMAP = 1 << 36: bit 4 of flags2 */
/* The open flags the kernel allows beside FOPEN_PASSTHROUGH (FOPEN_PASSTHROUGH_MASK: DIRECT_IO, NOFLUSH, PARALLEL_DIRECT_WRITES); any other is EIO at open. */
#define FOPEN_PASSTHROUGH_ALLOWED ((1u << 0) | (1u << 5) | (1u << 6))
#define PASSTHROUGH_STACK_DEPTH 2
struct in_header { uint32_t len, opcode; uint64_t unique, nodeid; uint32_t uid, gid, pid, padding; };
struct init_in { uint32_t major, minor, max_readahead, flags, flags2; };
struct open_out { uint64_t fh; uint32_t open_flags; int32_t backing_id; };
struct backing_map { int32_t fd; uint32_t flags; uint64_t padding; };
#define FUSE_DEV_IOC_BACKING_OPEN _IOW(229, 1, struct backing_map)
#define FUSE_DEV_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)
struct out_header { uint32_t len; int32_t error; uint64_t unique; };
/* fuse_init_out since 7.23: 64 bytes; libfuse 2.9 sends the first 24 (up to max_write). */
struct init_out {
  uint32_t major, minor, max_readahead, flags;
  uint16_t max_background, congestion_threshold;
  uint32_t max_write, time_gran;
  uint16_t max_pages, map_alignment;
  uint32_t flags2, max_stack_depth, unused[6];
};
_Static_assert(sizeof(struct init_out) == 64, "fuse_init_out is 64 bytes");

/* 0 = leave libfuse's INIT reply alone; else max_pages to ask for (set before mounting). */
static volatile unsigned wanted_pages;
/* Whether INIT replies from now on ask for passthrough when the kernel offers it. */
static volatile int wanted_passthrough = 1;
/* Whether mounts made from now on answer OPEN with FOPEN_DIRECT_IO (see "Direct I/O"). */
static volatile int wanted_direct_io;
/* What the last INIT reply said: max_pages set there (0: unchanged), the kernel's minor, passthrough asked, mmap of direct-I/O files allowed. */
static volatile unsigned last_pages, last_kernel_minor, last_passthrough, last_direct_io_mmap;

void sluice_fuse_set_max_pages(unsigned pages) { wanted_pages = pages; }
unsigned sluice_fuse_last_max_pages(void) { return last_pages; }
unsigned sluice_fuse_last_kernel_minor(void) { return last_kernel_minor; }
void sluice_fuse_set_passthrough(int on) { wanted_passthrough = on != 0; }
unsigned sluice_fuse_last_passthrough(void) { return last_passthrough; }
void sluice_fuse_set_direct_io(int on) { wanted_direct_io = on != 0; }
unsigned sluice_fuse_last_direct_io_mmap(void) { return last_direct_io_mmap; }

struct wrap {
  uint64_t init_unique; /* the INIT request's id while its reply is due, else 0 */
  uint32_t kernel_minor, kernel_flags, kernel_flags2;
  unsigned pages;
  int passthrough; /* the INIT reply asked for it (atomic) */
  int direct_io;   /* OPEN replies get FOPEN_DIRECT_IO (fixed at mount) */
  int fd;          /* the channel's /dev/fuse descriptor */
};

/* The request this thread is answering (set by receive), and a backing id for its OPEN reply. */
static __thread struct wrap *tl_wrap;
static __thread uint64_t tl_unique;
static __thread uint32_t tl_opcode;
static __thread int32_t tl_backing;
static __thread uint64_t tl_nodeid;

int sluice_fuse_passthrough_ok(void) { return tl_wrap != NULL && __atomic_load_n(&tl_wrap->passthrough, __ATOMIC_ACQUIRE); }

int sluice_fuse_backing_open(int fd) {
  if (!sluice_fuse_passthrough_ok()) return -ENOTSUP;
  struct backing_map map = { fd, 0, 0 };
  int id = ioctl(tl_wrap->fd, FUSE_DEV_IOC_BACKING_OPEN, &map);
  return id < 0 ? -errno : id;
}

int sluice_fuse_backing_close(int id) {
  if (tl_wrap == NULL || id <= 0) return -EINVAL;
  uint32_t v = (uint32_t)id;
  return ioctl(tl_wrap->fd, FUSE_DEV_IOC_BACKING_CLOSE, &v) < 0 ? -errno : 0;
}

void sluice_fuse_reply_backing(int id) { tl_backing = id; }

/* The reply this thread is about to send from lent memory (see "Replies from lent memory"). */
static __thread struct {
  const void *mem;
  size_t n;
  void **slot;
  void (*release)(void *);
  void *arg;
} tl_hold;

int sluice_fuse_reply_can_hold(void) { return tl_wrap != NULL && tl_opcode == FUSE_READ_OPCODE && tl_hold.mem == NULL; }

void sluice_fuse_reply_hold(void **slot, const void *mem, size_t n, void (*release)(void *), void *arg) {
  tl_hold.mem = mem;
  tl_hold.n = n;
  tl_hold.slot = slot;
  tl_hold.release = release;
  tl_hold.arg = arg;
}

uint64_t sluice_fuse_request_nodeid(void) { return tl_wrap != NULL ? tl_nodeid : 0; }

int sluice_fuse_dup_dev(void) { return tl_wrap != NULL ? fcntl(tl_wrap->fd, F_DUPFD_CLOEXEC, 0) : -1; }

/* FUSE_NOTIFY_INVAL_INODE (include/uapi/linux/fuse.h: notify code 2; offset 0 and length 0 drop every cached page). */
#define FUSE_NOTIFY_INVAL_INODE_CODE 2
int sluice_fuse_inval_inode(int dev, uint64_t nodeid) {
  struct out_header head = { sizeof head + 24, FUSE_NOTIFY_INVAL_INODE_CODE, 0 };
  struct { uint64_t ino; int64_t off, len; } arg = { nodeid, 0, 0 };
  struct iovec iov[2] = { { &head, sizeof head }, { &arg, sizeof arg } };
  return writev(dev, iov, 2) < 0 ? -errno : 0;
}

/* libfuse 2 functions, looked up once (every libfuse 2.6+ exports them). */
static struct fuse_chan *(*chan_new)(struct fuse_chan_ops *, int, size_t, void *);
static int (*chan_fd)(struct fuse_chan *);
static size_t (*chan_bufsize)(struct fuse_chan *);
static void *(*chan_data)(struct fuse_chan *);
static struct fuse_session *(*chan_session)(struct fuse_chan *);
static void (*chan_destroy)(struct fuse_chan *);
static int (*session_exited)(struct fuse_session *);
static void (*session_exit)(struct fuse_session *);

/* libfuse's fuse_kern_chan_receive, plus noting the INIT request. */
static int wrap_receive(struct fuse_chan **chp, char *buf, size_t size) {
  struct fuse_chan *ch = *chp;
  struct fuse_session *se = chan_session(ch);
  ssize_t res;
  int err;
  do {
    res = read(chan_fd(ch), buf, size);
    err = errno;
    if (se != NULL && session_exited(se)) return 0;
  } while (res == -1 && err == ENOENT); /* an interrupted request: safe to read again */
  if (res == -1) {
    if (err == ENODEV) { /* unmounted */
      if (se != NULL) session_exit(se);
      return 0;
    }
    if (err != EINTR && err != EAGAIN) perror("fuse: reading device");
    return -err;
  }
  if ((size_t)res < sizeof(struct in_header)) {
    fprintf(stderr, "short read on fuse device\n");
    return -EIO;
  }
  const struct in_header *in = (const struct in_header *)buf;
  struct wrap *w = chan_data(ch);
  tl_wrap = w;
  tl_unique = in->unique;
  tl_opcode = in->opcode;
  tl_nodeid = in->nodeid;
  tl_backing = 0;
  if (in->opcode == FUSE_INIT_OPCODE && (size_t)res >= sizeof *in + offsetof(struct init_in, flags2)) {
    const struct init_in *arg = (const struct init_in *)(buf + sizeof *in);
    w->kernel_minor = arg->minor;
    w->kernel_flags = arg->flags;
    w->kernel_flags2 = arg->minor >= FUSE_FLAGS2_MINOR && (arg->flags & FUSE_INIT_EXT_FLAG) && (size_t)res >= sizeof *in + sizeof *arg ? arg->flags2 : 0;
    __atomic_store_n(&w->init_unique, in->unique, __ATOMIC_RELEASE);
  }
  return (int)res;
}

/* writev of a reply, as libfuse's fuse_kern_chan_send does it: 0 or -errno. */
static int send_reply(struct fuse_chan *ch, const struct iovec iov[], size_t count) {
  if (writev(chan_fd(ch), iov, (int)count) == -1) {
    int err = errno;
    struct fuse_session *se = chan_session(ch);
    if (err != ENOENT && !(se != NULL && session_exited(se))) perror("fuse: writing device");
    return -err;
  }
  return 0;
}

/* libfuse's fuse_kern_chan_send, with the INIT reply rewritten (see the top). */
static int wrap_send(struct fuse_chan *ch, const struct iovec iov[], size_t count) {
  if (iov == NULL) return 0;
  if (tl_hold.mem != NULL && count == 2 && iov[1].iov_base == tl_hold.mem && iov[1].iov_len == tl_hold.n) {
    /* A READ answered from lent memory (see "Replies from lent memory"): the bytes go from there, then the hold ends. */
    int res = send_reply(ch, iov, count);
    *tl_hold.slot = NULL;
    void (*release)(void *) = tl_hold.release;
    void *arg = tl_hold.arg;
    memset(&tl_hold, 0, sizeof tl_hold);
    release(arg);
    return res;
  }
  struct wrap *w = chan_data(ch);
  struct out_header head;
  struct init_out out;
  struct open_out open_reply;
  struct iovec patched[2];
  uint64_t init = __atomic_load_n(&w->init_unique, __ATOMIC_ACQUIRE);
  if ((tl_backing > 0 || w->direct_io) && tl_wrap == w && tl_opcode == FUSE_OPEN_OPCODE && count == 2 && iov[0].iov_len == sizeof head &&
      iov[1].iov_len == sizeof open_reply && ((const struct out_header *)iov[0].iov_base)->unique == tl_unique &&
      ((const struct out_header *)iov[0].iov_base)->error == 0) {
    memcpy(&open_reply, iov[1].iov_base, sizeof open_reply);
    if (tl_backing > 0) {
      /* The OPEN this thread answered with a backing file (fuse_open.c): FOPEN_PASSTHROUGH and its id.
       * libfuse's kernel_cache sets FOPEN_KEEP_CACHE, which passthrough refuses (the page cache is the backing file's). */
      open_reply.open_flags = (open_reply.open_flags & FOPEN_PASSTHROUGH_ALLOWED) | FOPEN_PASSTHROUGH_FLAG;
      open_reply.backing_id = tl_backing;
    } else {
      /* --direct-io: no page cache for this handle (see "Direct I/O"). */
      open_reply.open_flags = (open_reply.open_flags & ~FOPEN_KEEP_CACHE_FLAG) | FOPEN_DIRECT_IO_FLAG;
    }
    patched[0] = iov[0];
    patched[1] = (struct iovec){ &open_reply, sizeof open_reply };
    iov = patched;
  }
  tl_backing = 0;
  if (init != 0 && count == 2 && iov[0].iov_len == sizeof head && ((const struct out_header *)iov[0].iov_base)->unique == init) {
    __atomic_store_n(&w->init_unique, 0, __ATOMIC_RELEASE);
    memcpy(&head, iov[0].iov_base, sizeof head);
    last_kernel_minor = w->kernel_minor;
    last_pages = 0;
    last_passthrough = 0;
    last_direct_io_mmap = 0;
    int pages = w->pages > 0 && w->kernel_minor >= FUSE_MAX_PAGES_MINOR && (w->kernel_flags & FUSE_MAX_PAGES_FLAG);
    int pass = wanted_passthrough && (w->kernel_flags2 & FUSE_PASSTHROUGH_FLAG2);
    int dio_mmap = w->direct_io && (w->kernel_flags2 & FUSE_DIRECT_IO_ALLOW_MMAP_FLAG2);
    if (head.error == 0 && (pages || pass || dio_mmap) && iov[1].iov_len <= sizeof out) {
      memset(&out, 0, sizeof out);
      memcpy(&out, iov[1].iov_base, iov[1].iov_len);
      if (pages) {
        out.flags |= FUSE_MAX_PAGES_FLAG;
        out.max_pages = (uint16_t)w->pages;
        last_pages = w->pages;
      }
      if (pass) {
        out.flags |= FUSE_INIT_EXT_FLAG;
        out.flags2 |= FUSE_PASSTHROUGH_FLAG2;
        out.max_stack_depth = PASSTHROUGH_STACK_DEPTH;
        __atomic_store_n(&w->passthrough, 1, __ATOMIC_RELEASE);
        last_passthrough = 1;
      }
      if (dio_mmap) {
        out.flags |= FUSE_INIT_EXT_FLAG;
        out.flags2 |= FUSE_DIRECT_IO_ALLOW_MMAP_FLAG2;
        last_direct_io_mmap = 1;
      }
      head.len = sizeof head + sizeof out;
      patched[0] = (struct iovec){ &head, sizeof head };
      patched[1] = (struct iovec){ &out, sizeof out };
      iov = patched;
    }
  }
  return send_reply(ch, iov, count);
}

/* libfuse's fuse_kern_chan_destroy, plus our state. */
static void wrap_destroy(struct fuse_chan *ch) {
  int fd = chan_fd(ch);
  if (fd != -1) close(fd);
  free(chan_data(ch));
}

static int resolve(void) {
  static int done;
  if (done) return done > 0;
  chan_new = sluice_libfuse_sym("fuse_chan_new", "FUSE_2.6");
  chan_fd = sluice_libfuse_sym("fuse_chan_fd", "FUSE_2.4");
  chan_bufsize = sluice_libfuse_sym("fuse_chan_bufsize", "FUSE_2.4");
  chan_data = sluice_libfuse_sym("fuse_chan_data", "FUSE_2.4");
  chan_session = sluice_libfuse_sym("fuse_chan_session", "FUSE_2.4");
  chan_destroy = sluice_libfuse_sym("fuse_chan_destroy", "FUSE_2.4");
  session_exited = sluice_libfuse_sym("fuse_session_exited", "FUSE_2.4");
  session_exit = sluice_libfuse_sym("fuse_session_exit", "FUSE_2.4");
  done = chan_new && chan_fd && chan_bufsize && chan_data && chan_session && chan_destroy && session_exited && session_exit ? 1 : -1;
  return done > 0;
}

struct fuse_chan *sluice_fuse_wrap_chan(struct fuse_chan *ch) {
  unsigned pages = wanted_pages;
  last_pages = 0; /* until this mount's INIT reply says otherwise */
  last_passthrough = 0;
  last_direct_io_mmap = 0;
  if (ch == NULL || (pages == 0 && !wanted_passthrough && !wanted_direct_io) || !resolve()) return ch;
  struct wrap *w = calloc(1, sizeof *w);
  if (w == NULL) return ch;
  w->pages = pages;
  w->direct_io = wanted_direct_io;
  static struct fuse_chan_ops ops = { wrap_receive, wrap_send, wrap_destroy };
  /*
   * The new channel gets its own descriptor for the same open /dev/fuse (libfuse exports
   * no way to take the old channel's): destroying the old channel closes only the old
   * number, and the kernel connection lives on until the last descriptor is closed.
   */
  int fd = fcntl(chan_fd(ch), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) {
    free(w);
    return ch;
  }
  w->fd = fd;
  struct fuse_chan *wrapped = chan_new(&ops, fd, chan_bufsize(ch), w);
  if (wrapped == NULL) {
    close(fd);
    free(w);
    return ch;
  }
  chan_destroy(ch);
  return wrapped;
}
