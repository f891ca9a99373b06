/*
 * N-API glue for sluice_fifo.h: converts JavaScript arguments, calls the pure C
 * API, and turns a -errno result into a thrown Error shaped like Node's own
 * system errors (`code` such as 'EEXIST', `errno`, `syscall`, and `path` when
 * there is one), so the TypeScript wrapper can treat both alike.
 *
 * Exports: mkfifo(path: string, mode: number): undefined
 *          setPipeSize(fd: number, bytes: number): number   (size granted)
 *          getPipeSize(fd: number): number
 *          checkFuseFd(fd: number): number   (0, or -errno: -EBADF not open, -ENODEV not /dev/fuse)
 * The addon also defines fuse_mount/fuse_unmount for /dev/fd/N mount points (src/fuse_fd.c);
 * they take effect only when it is loaded with RTLD_GLOBAL.
 *          tryLock(fd: number, exclusive: boolean): boolean   (flock LOCK_NB; false when held elsewhere)
 *          unlock(fd: number): undefined
 *          allocPrefaulted(bytes: number): Buffer | undefined   (see js_alloc_prefaulted)
 *          reserveRegion(bytes: number): Buffer | undefined     (see js_reserve_region)
 *          populateSlab(buf: Buffer), discardPages(buf: Buffer)   (a slab's pages mapped, given back)
 *          setFuseMaxPages(pages: number): undefined   (larger FUSE reads, src/fuse_init.c)
 *          fuseInitState(): { maxPages: number, kernelMinor: number }
 *          pipeWriterOpen/Push/End/Cancel/Stats   (the paced FIFO writer, src/pipe_writer.c)
 *          memReadAdd/Remove/Drain/Clear/Mounted   (FUSE reads from memory in C, src/fuse_memread.c, src/fuse_memread_napi.c)
 *          lendSet/lendTake/lendCounts   (a sequential reader's FUSE reads from lent blocks in C, src/fuse_lend.c)
 *          setRecvLowat(fd: number, bytes: number): number   (SO_RCVLOWAT, the mark set; see js_set_recv_lowat)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <node_api.h>
#include <uv.h>

#include "sluice_fifo.h"
#include "sluice_fuse_fd.h"
#include "sluice_pipe_writer.h"
#include "sluice_lend.h"
#include "sluice_memread.h"
#include "sluice_tier.h"

/* PATH_MAX on Linux; longer paths fail in the kernel with ENAMETOOLONG anyway. */
#define SLUICE_PATH_MAX 4096

#define CHECK_NAPI(env, call)                                   \
  do {                                                          \
    if ((call) != napi_ok) {                                    \
      napi_throw_error((env), "SLUICE_NATIVE", #call " failed"); \
      return NULL;                                              \
    }                                                           \
  } while (0)

/* Throw an Error for -errno `neg_errno` from `syscall`, with Node's system-error fields. */
static napi_value throw_errno(napi_env env, int neg_errno, const char *syscall, const char *path) {
  int err = -neg_errno;
  const char *code = uv_err_name(neg_errno); /* libuv's errors are -errno on Unix */
  char message[SLUICE_PATH_MAX + 256];
  if (path != NULL) {
    snprintf(message, sizeof message, "%s: %s, %s '%s'", code, strerror(err), syscall, path);
  } else {
    snprintf(message, sizeof message, "%s: %s, %s", code, strerror(err), syscall);
  }
  napi_value js_code, js_message, js_error, js_errno, js_syscall, js_path;
  if (napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &js_code) != napi_ok ||
      napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &js_message) != napi_ok ||
      napi_create_error(env, js_code, js_message, &js_error) != napi_ok ||
      napi_create_int32(env, neg_errno, &js_errno) != napi_ok ||
      napi_create_string_utf8(env, syscall, NAPI_AUTO_LENGTH, &js_syscall) != napi_ok) {
    napi_throw_error(env, "SLUICE_NATIVE", "cannot build the error object");
    return NULL;
  }
  napi_set_named_property(env, js_error, "errno", js_errno);
  napi_set_named_property(env, js_error, "syscall", js_syscall);
  if (path != NULL && napi_create_string_utf8(env, path, NAPI_AUTO_LENGTH, &js_path) == napi_ok) {
    napi_set_named_property(env, js_error, "path", js_path);
  }
  napi_throw(env, js_error);
  return NULL;
}

/* Read `value` as an int32; throws a TypeError naming `what` and returns 0 when it is not a number. */
static int get_int32(napi_env env, napi_value value, const char *what, int32_t *out) {
  napi_valuetype type;
  if (napi_typeof(env, value, &type) != napi_ok || type != napi_number) {
    char message[128];
    snprintf(message, sizeof message, "%s must be a number", what);
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", message);
    return 0;
  }
  return napi_get_value_int32(env, value, out) == napi_ok;
}

static napi_value js_mkfifo(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 2) {
    napi_throw_type_error(env, "ERR_MISSING_ARGS", "mkfifo(path, mode) needs two arguments");
    return NULL;
  }
  napi_valuetype type;
  CHECK_NAPI(env, napi_typeof(env, argv[0], &type));
  if (type != napi_string) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "path must be a string");
    return NULL;
  }
  char path[SLUICE_PATH_MAX + 1];
  size_t length = 0;
  CHECK_NAPI(env, napi_get_value_string_utf8(env, argv[0], path, sizeof path, &length));
  if (length >= SLUICE_PATH_MAX) return throw_errno(env, -ENAMETOOLONG, "mkfifo", NULL);
  if (strlen(path) != length) { /* an embedded NUL would silently shorten the path */
    napi_throw_type_error(env, "ERR_INVALID_ARG_VALUE", "path must not contain NUL bytes");
    return NULL;
  }
  int32_t mode = 0;
  if (!get_int32(env, argv[1], "mode", &mode)) return NULL;
  int rc = sluice_mkfifo(path, (unsigned int)mode);
  if (rc < 0) return throw_errno(env, rc, "mkfifo", path);
  return NULL; /* undefined */
}

static napi_value js_set_pipe_size(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 2) {
    napi_throw_type_error(env, "ERR_MISSING_ARGS", "setPipeSize(fd, bytes) needs two arguments");
    return NULL;
  }
  int32_t fd = -1, bytes = 0;
  if (!get_int32(env, argv[0], "fd", &fd) || !get_int32(env, argv[1], "bytes", &bytes)) return NULL;
  int rc = sluice_set_pipe_size(fd, bytes);
  if (rc < 0) return throw_errno(env, rc, "fcntl(F_SETPIPE_SZ)", NULL);
  napi_value result;
  CHECK_NAPI(env, napi_create_int32(env, rc, &result));
  return result;
}

static napi_value js_get_pipe_size(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 1) {
    napi_throw_type_error(env, "ERR_MISSING_ARGS", "getPipeSize(fd) needs one argument");
    return NULL;
  }
  int32_t fd = -1;
  if (!get_int32(env, argv[0], "fd", &fd)) return NULL;
  int rc = sluice_get_pipe_size(fd);
  if (rc < 0) return throw_errno(env, rc, "fcntl(F_GETPIPE_SZ)", NULL);
  napi_value result;
  CHECK_NAPI(env, napi_create_int32(env, rc, &result));
  return result;
}

static napi_value js_check_fuse_fd(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int32_t fd;
  if (argc < 1 || !get_int32(env, argv[0], "fd", &fd)) return NULL;
  napi_value result;
  CHECK_NAPI(env, napi_create_int32(env, sluice_check_fuse_fd(fd), &result));
  return result;
}

/*
 * flock(2) without blocking, for the disk tier's lock file (src/cache/disk-lock.ts).
 * flock, not fcntl: its lock belongs to the open file description, so it is released
 * when the fd is closed or the process dies (kill -9 included), and two fds of one
 * process exclude each other like two processes do.
 */
static napi_value js_try_lock(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 2) {
    napi_throw_type_error(env, "ERR_MISSING_ARGS", "tryLock(fd, exclusive) needs two arguments");
    return NULL;
  }
  int32_t fd = -1;
  bool exclusive = true;
  if (!get_int32(env, argv[0], "fd", &fd)) return NULL;
  CHECK_NAPI(env, napi_get_value_bool(env, argv[1], &exclusive));
  int rc;
  do {
    rc = flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB);
  } while (rc < 0 && errno == EINTR);
  napi_value result;
  if (rc < 0) {
    if (errno != EWOULDBLOCK) return throw_errno(env, -errno, "flock", NULL);
    CHECK_NAPI(env, napi_get_boolean(env, false, &result));
    return result;
  }
  CHECK_NAPI(env, napi_get_boolean(env, true, &result));
  return result;
}

static napi_value js_unlock(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 1) {
    napi_throw_type_error(env, "ERR_MISSING_ARGS", "unlock(fd) needs one argument");
    return NULL;
  }
  int32_t fd = -1;
  if (!get_int32(env, argv[0], "fd", &fd)) return NULL;
  if (flock(fd, LOCK_UN) < 0) return throw_errno(env, -errno, "flock", NULL);
  return NULL;
}

/*
 * A buffer whose pages are mapped before the first byte is written into it, for the large
 * slabs that ranged GETs land in (src/pipe/slab-alloc.ts). A fresh malloc'd slab takes one
 * page fault per 4 KiB on its first write; on the paravirtualised guests we run on a fault
 * costs more than copying the page (measured: ~0.45 daemon CPU s/GB of Pipe mode). Here the
 * mapping is populated in one call (MADV_POPULATE_WRITE, Linux 5.14; older kernels just fault
 * later, as before). Its whole 2 MiB blocks are in transparent huge pages where the kernel
 * has them (huge_inside: MADV_HUGEPAGE; the rest in 4 KiB pages, MADV_NOHUGEPAGE).
 * Why huge pages (BENCHMARKS.md "t11-huge", 2026-12-05): on these guests the kernel's own copies
 * into and out of user memory (a socket read into a slab, a FUSE reply or a Pipe write from one)
 * cost more the more 4 KiB pages they cycle through: 0.2 CPU s/GB within 8 MiB, 0.5 within
 * 128 MiB, 1.4 within 512 MiB, and 0.1-0.23 at any size in huge pages, both ways
 * (scripts/copy-working-set.c; copies by user code cost the same either way). A daemon's
 * slabs are such a working set: 4 readers at once hold ~200 MiB of them, a warm block cache all
 * of it. Measured side by side (4 KiB -> huge):
 * 4 readers through a new mount 1.43 -> 0.99 daemon CPU s/GB, re-reads from the block cache
 * 1.75 -> 0.37, Pipe 0.93 -> 0.86 (TLS: 1.73 -> 1.30).
 * What they cost: on a guest that hands free memory back to its host (virtio-balloon free page
 * reporting, as on the Firecracker VMs we run on), a free 2 MiB block has usually been handed
 * back, and each 4 KiB of it costs a host fault when first written; 4 KiB pages come from
 * smaller free blocks that were not. Populating an 8 MiB slab then takes 13-100 ms in huge
 * pages against 1.4-7.8 ms in 4 KiB pages (0.5 ms either way when a process freed huge pages a
 * moment before): once per slab per process (the pool reuses its slabs), a few tenths of a
 * second for a daemon's whole working set, against the ~0.4-1.4 CPU s saved on every GB after.
 * (From 2026-12-02 to 12-05 slabs were in 4 KiB pages for that first cost alone, "t11-slab":
 * measured one reader at a time, whose working set is small enough that the copies cost little.)
 * SLUICE_SLAB_SMALL_PAGES=1 puts every slab in 4 KiB pages, to measure one against the other.
 * Freed with munmap when V8 collects the Buffer.
 * Returns undefined when this Node forbids external buffers: the caller then allocates as usual.
 */
#define SLUICE_HUGE_PAGE ((size_t)2 << 20) /* x86-64 and arm64 (4 KiB granule) PMD size */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* linux/mman.h, 5.14 */
#endif

static size_t page_round(size_t bytes) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return (bytes + page - 1) & ~(page - 1);
}

/* hint: the mapping's length. */
static void free_mapping(napi_env env, void *data, void *hint) {
  (void)env;
  munmap(data, (size_t)(uintptr_t)hint);
}

/* A mapping of `len` bytes (page-rounded), 2 MiB aligned, in 4 KiB pages until huge_inside() says otherwise; NULL with errno set. */
static char *map_aligned(size_t len, int flags) {
  size_t span = len + SLUICE_HUGE_PAGE; /* room to align the start */
  char *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
  if (raw == MAP_FAILED) return NULL;
  char *start = (char *)(((uintptr_t)raw + SLUICE_HUGE_PAGE - 1) & ~(uintptr_t)(SLUICE_HUGE_PAGE - 1));
  size_t head = (size_t)(start - raw), tail = span - head - len;
  if (head > 0) munmap(raw, head);
  if (tail > 0) munmap(start + len, tail);
  (void)madvise(start, len, MADV_NOHUGEPAGE); /* EINVAL without THP is fine: 4 KiB pages either way */
  return start;
}

/*
 * madvise(advice) over the whole 2 MiB blocks inside [p, p+len), MADV_HUGEPAGE before a slab's
 * pages are mapped and MADV_NOHUGEPAGE after they are given back; nothing when the slab holds
 * no whole block, or when SLUICE_SLAB_SMALL_PAGES=1 (every slab in 4 KiB pages, as before
 * 2026-12-05: kept to measure one against the other). Only whole blocks, because a huge page
 * fault maps the whole aligned block: advice over a slab's partial head or tail would map
 * memory that belongs to no slab (or to a neighbour). The advice splits the mapping's VMA
 * around the slab; taking it back lets the kernel merge them again, so a region holds about
 * one VMA per live slab at most (a 1 GiB pool of 8 MiB slabs: ~260, far below
 * vm.max_map_count's 65,530).
 */
static void huge_inside(char *p, size_t len, int advice) {
  const char *off = getenv("SLUICE_SLAB_SMALL_PAGES");
  if (off != NULL && off[0] == '1') return;
  uintptr_t from = ((uintptr_t)p + SLUICE_HUGE_PAGE - 1) & ~(uintptr_t)(SLUICE_HUGE_PAGE - 1);
  uintptr_t to = ((uintptr_t)p + len) & ~(uintptr_t)(SLUICE_HUGE_PAGE - 1);
  if (to > from) (void)madvise((void *)from, (size_t)(to - from), advice); /* EINVAL without THP: 4 KiB pages */
}

/* The mapping as an external Buffer freed by munmap, or undefined (and the mapping gone) when this Node forbids external buffers. */
static napi_value mapping_buffer(napi_env env, char *start, size_t bytes, size_t len) {
  napi_value result;
  if (napi_create_external_buffer(env, bytes, start, free_mapping, (void *)(uintptr_t)len, &result) != napi_ok) {
    munmap(start, len);
    const napi_extended_error_info *e = NULL;
    napi_get_last_error_info(env, &e); /* clears the pending status; nothing is thrown */
    return NULL; /* undefined: external buffers not allowed here */
  }
  return result;
}

static napi_value js_alloc_prefaulted(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int32_t bytes = 0;
  if (argc < 1 || !get_int32(env, argv[0], "bytes", &bytes)) return NULL;
  if (bytes <= 0) {
    napi_throw_range_error(env, "ERR_OUT_OF_RANGE", "bytes must be > 0");
    return NULL;
  }
  size_t len = page_round((size_t)bytes);
  char *start = map_aligned(len, 0);
  if (start == NULL) return throw_errno(env, -errno, "mmap", NULL);
  huge_inside(start, len, MADV_HUGEPAGE);
  (void)madvise(start, len, MADV_POPULATE_WRITE);  /* EINVAL before 5.14: pages fault in later */
  /*
   * No napi_adjust_external_memory here: V8 counts an external buffer's bytes itself, as it
   * counts Buffer.allocUnsafe's (its array buffer accounting), and schedules collections by
   * them. Adding the mapping again counted every slab twice: 60 slabs of 8 MiB made 15 full
   * collections in a test process, against 8 without it (t11-zerocopy). Taking the bytes out
   * of the count instead (tried in t11-arena) ends a Node 24 process with a V8 fatal error: it
   * checks that the count never goes below zero as it detaches buffers at exit. Pools reserve
   * a region up front instead (reserveRegion below).
   */
  return mapping_buffer(env, start, (size_t)bytes, len);
}

/*
 * reserveRegion(bytes): a mapping of `bytes` (at most 2 GiB) with no page in it yet
 * (MAP_NORESERVE), as a Buffer, for a pool's slabs to be carved from (src/cache/slab-arena.ts):
 * populateSlab maps a slab's pages when the arena hands it out, discardPages gives them back
 * when it takes it back. Why: V8 starts a collection each time its count of external memory
 * has grown by 64 MiB or so since the last one, as if the growth were garbage that collecting
 * could give back. A pool's slabs are not: it keeps them. A region is counted once, at its
 * pool's creation (a daemon's start), where a slab of its own was counted as it came, in the
 * middle of the reads: a new daemon reading 4 objects of 128 MiB at once made 6-7 full
 * collections and ~20 scavenges for "external memory pressure" in its first GB
 * (BENCHMARKS.md t11-arena). Undefined when this Node forbids external buffers.
 */
static napi_value js_reserve_region(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int32_t bytes = 0;
  if (argc < 1 || !get_int32(env, argv[0], "bytes", &bytes)) return NULL;
  if (bytes <= 0) {
    napi_throw_range_error(env, "ERR_OUT_OF_RANGE", "bytes must be > 0");
    return NULL;
  }
  size_t len = page_round((size_t)bytes);
  char *start = map_aligned(len, MAP_NORESERVE);
  if (start == NULL) return throw_errno(env, -errno, "mmap", NULL);
  return mapping_buffer(env, start, (size_t)bytes, len);
}

/*
 * madvise(advice) over the whole pages inside the Buffer argument; undefined. `huge` (when
 * not 0) is given first to the whole 2 MiB blocks inside it (huge_inside). A slab given back
 * loses its huge advice before its pages go, so khugepaged never sees a free range it may fill.
 */
static napi_value advise_pages(napi_env env, napi_callback_info info, int advice, int huge) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  void *data = NULL;
  size_t length = 0;
  if (argc < 1 || napi_get_buffer_info(env, argv[0], &data, &length) != napi_ok) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "expected a Buffer");
    return NULL;
  }
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  uintptr_t from = ((uintptr_t)data + page - 1) & ~(uintptr_t)(page - 1);
  uintptr_t to = ((uintptr_t)data + length) & ~(uintptr_t)(page - 1);
  if (huge != 0) huge_inside((char *)data, length, huge);
  if (to > from) (void)madvise((void *)from, (size_t)(to - from), advice);
  return NULL;
}

/* populateSlab(buf): maps the whole pages inside buf (a slab of a reserved region) before its first write, in one call, its whole 2 MiB blocks in huge pages (as allocPrefaulted does). */
static napi_value js_populate_slab(napi_env env, napi_callback_info info) {
  return advise_pages(env, info, MADV_POPULATE_WRITE, MADV_HUGEPAGE);
}

/*
 * discardPages(buf): gives the whole pages inside buf back to the kernel (MADV_DONTNEED), for a
 * slab that its pool drops: a slab of a region, or one of allocPrefaulted, whose mapping stays
 * until V8 collects its Buffer (free_mapping). It reads zeros meanwhile, so a stale view could
 * never show other bytes. The caller must hold no reference to its bytes (a pool drops only
 * slabs no one holds).
 */
static napi_value js_discard_pages(napi_env env, napi_callback_info info) {
  return advise_pages(env, info, MADV_DONTNEED, MADV_NOHUGEPAGE);
}

/*
 * setFuseMaxPages(pages): max_pages the INIT reply of later mounts asks the kernel for
 * (src/fuse_init.c); 0 leaves libfuse's reply alone. Returns undefined.
 */
static napi_value js_set_fuse_max_pages(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int32_t pages;
  if (argc < 1 || !get_int32(env, argv[0], "pages", &pages)) return NULL;
  if (pages < 0 || pages > 65535) {
    napi_throw_range_error(env, "ERR_OUT_OF_RANGE", "pages must be between 0 and 65535");
    return NULL;
  }
  sluice_fuse_set_max_pages((unsigned)pages);
  return NULL;
}

/* fuseInitState(): { maxPages, kernelMinor, passthrough, directIoMmap } of the last INIT reply (maxPages 0: left alone; passthrough: asked for; directIoMmap: mmap of direct-I/O files allowed). */
static napi_value js_fuse_init_state(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value result, pages, minor, pass, dio_mmap;
  CHECK_NAPI(env, napi_create_object(env, &result));
  CHECK_NAPI(env, napi_create_uint32(env, sluice_fuse_last_max_pages(), &pages));
  CHECK_NAPI(env, napi_create_uint32(env, sluice_fuse_last_kernel_minor(), &minor));
  CHECK_NAPI(env, napi_get_boolean(env, sluice_fuse_last_passthrough() != 0, &pass));
  CHECK_NAPI(env, napi_set_named_property(env, result, "maxPages", pages));
  CHECK_NAPI(env, napi_set_named_property(env, result, "kernelMinor", minor));
  CHECK_NAPI(env, napi_set_named_property(env, result, "passthrough", pass));
  CHECK_NAPI(env, napi_get_boolean(env, sluice_fuse_last_direct_io_mmap() != 0, &dio_mmap));
  CHECK_NAPI(env, napi_set_named_property(env, result, "directIoMmap", dio_mmap));
  return result;
}

/* setFusePassthrough(on: boolean): whether the INIT replies of mounts made from now on ask for FUSE passthrough (src/fuse_init.c). */
static napi_value js_set_fuse_passthrough(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  bool on = false;
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 1 || napi_get_value_bool(env, argv[0], &on) != napi_ok) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "setFusePassthrough(on: boolean)");
    return NULL;
  }
  sluice_fuse_set_passthrough(on);
  return NULL;
}

/* setFuseDirectIo(on: boolean): whether mounts made from now on answer every OPEN with FOPEN_DIRECT_IO (src/fuse_init.c "Direct I/O"). */
static napi_value js_set_fuse_direct_io(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  bool on = false;
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 1 || napi_get_value_bool(env, argv[0], &on) != napi_ok) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "setFuseDirectIo(on: boolean)");
    return NULL;
  }
  sluice_fuse_set_direct_io(on);
  return NULL;
}

/*
 * setRecvLowat(fd, bytes): SO_RCVLOWAT on a connected socket; returns the mark set. A TCP
 * socket is then reported readable (epoll) only once that many bytes are queued, or at FIN,
 * an error or receive-memory pressure, so a body read from a fast sender wakes the event loop
 * once per mark instead of once per segment burst (src/s3/wire.ts sets it while a long
 * Content-Length body is read and lowers it to what is left of the body, so the last bytes
 * are never held back). The mark is capped at a quarter of the socket's current receive
 * buffer (SO_RCVBUF, which autotuning grows): a larger one would make Linux raise the buffer
 * and clamp the TCP window to the mark (tcp_set_rcvlowat), and the window is what carries
 * a long-latency link; a quarter stays well inside the window the sender may fill.
 */
static napi_value js_set_recv_lowat(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 2) {
    napi_throw_type_error(env, "ERR_MISSING_ARGS", "setRecvLowat(fd, bytes) needs two arguments");
    return NULL;
  }
  int32_t fd = -1, bytes = 0;
  if (!get_int32(env, argv[0], "fd", &fd) || !get_int32(env, argv[1], "bytes", &bytes)) return NULL;
  if (bytes < 1) {
    napi_throw_range_error(env, "ERR_OUT_OF_RANGE", "bytes must be >= 1");
    return NULL;
  }
  int rcvbuf = 0;
  socklen_t len = sizeof rcvbuf;
  if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len) < 0) return throw_errno(env, -errno, "getsockopt", NULL);
  int v = bytes < rcvbuf / 4 ? bytes : rcvbuf / 4;
  if (v < 1) v = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof v) < 0) return throw_errno(env, -errno, "setsockopt", NULL);
  napi_value result;
  CHECK_NAPI(env, napi_create_int32(env, v, &result));
  return result;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    {"mkfifo", NULL, js_mkfifo, NULL, NULL, NULL, napi_enumerable, NULL},
    {"setPipeSize", NULL, js_set_pipe_size, NULL, NULL, NULL, napi_enumerable, NULL},
    {"getPipeSize", NULL, js_get_pipe_size, NULL, NULL, NULL, napi_enumerable, NULL},
    {"checkFuseFd", NULL, js_check_fuse_fd, NULL, NULL, NULL, napi_enumerable, NULL},
    {"tryLock", NULL, js_try_lock, NULL, NULL, NULL, napi_enumerable, NULL},
    {"unlock", NULL, js_unlock, NULL, NULL, NULL, napi_enumerable, NULL},
    {"allocPrefaulted", NULL, js_alloc_prefaulted, NULL, NULL, NULL, napi_enumerable, NULL},
    {"discardPages", NULL, js_discard_pages, NULL, NULL, NULL, napi_enumerable, NULL},
    {"reserveRegion", NULL, js_reserve_region, NULL, NULL, NULL, napi_enumerable, NULL},
    {"populateSlab", NULL, js_populate_slab, NULL, NULL, NULL, napi_enumerable, NULL},
    {"setFuseMaxPages", NULL, js_set_fuse_max_pages, NULL, NULL, NULL, napi_enumerable, NULL},
    {"fuseInitState", NULL, js_fuse_init_state, NULL, NULL, NULL, napi_enumerable, NULL},
    {"setFusePassthrough", NULL, js_set_fuse_passthrough, NULL, NULL, NULL, napi_enumerable, NULL},
    {"setFuseDirectIo", NULL, js_set_fuse_direct_io, NULL, NULL, NULL, napi_enumerable, NULL},
    {"setRecvLowat", NULL, js_set_recv_lowat, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  CHECK_NAPI(env, napi_define_properties(env, exports, sizeof props / sizeof props[0], props));
  CHECK_NAPI(env, sluice_pipe_writer_init(env, exports));
  CHECK_NAPI(env, sluice_memread_init(env, exports));
  CHECK_NAPI(env, sluice_lend_init(env, exports));
  CHECK_NAPI(env, sluice_tier_init(env, exports));
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
