/*
 * A file of the disk tier read whole and checked in libfuse's worker thread (issue 14: the
 * OPEN of a restarted job's file answered without JavaScript; see fuse_open.c "Opens"
 * and "Passthrough").
 *
 * It reads exactly what src/cache/disk-cache.ts openSmall() reads, with the same checks, and
 * the layout is that file's design note (sluice-tier-v2):
 *   objects/XX/<h>.map  header: magic "SLM2" u32 LE, block size u32, 8 reserved, h (32
 *                       bytes), 12 reserved, CRC32C of the 60 bytes before it; then entry 0:
 *                       stored length u32, CRC32C of those bytes u32
 *   objects/XX/<h>      the object's bytes at offset 0
 * Steps: open the sidecar, one pread of header and entry 0 (72 bytes), check the header
 * (magic, block size, h, CRC) and that entry 0 holds exactly `size` bytes; open the data
 * file, pread `size` bytes, check their CRC32C against the entry; touch the sidecar (its
 * mtime is the object's LRU age across processes, when due); close both. Two preads and
 * an fstat (a futimens when due) besides the two opens and closes, where JavaScript keeps
 * the files open (but pays a hop to Node's thread per open).
 * The bytes are served only if every check passed. On any failure nothing is repaired here
 * and the caller hands the OPEN to JavaScript, whose openSmall() finds the same fault,
 * zeroes the entry or discards the file, counts it, and reads the block from S3 again: one
 * place owns repairs and their metrics.
 * For passthrough (fuse_init.c), a file of any number of blocks is checked whole the same
 * way (sluice_tier_open_verified): one pread of the header and all entries (8 bytes a
 * block), every entry holding its block whole, then the bytes in 1 MiB preads, each block
 * against its CRC (on several threads for a large file, below), and the data file's
 * descriptor is returned open to be registered with the kernel. The bytes are dropped, but
 * the page cache keeps them for the kernel's reads. Measured on this 2-core VM, 128 MiB in
 * the page cache: 4.0 GB/s with pread, one thread and one CRC lane; 10.4 GB/s with three
 * lanes and two threads; 14-21 GB/s through a mapping (below; BENCHMARKS.md, t14-large).
 * Races: another process may evict (unlink) or rewrite the object meanwhile. An unlinked
 * file read through an fd still holds its bytes; a rewrite only ever writes the same bytes
 * (same ETag), entries after bytes; a sidecar paired with a recreated data file fails the
 * CRC. So a block either passes its CRC against its own entry or is not served, as in
 * JavaScript.
 * Touch: the sidecar's mtime is set to now when it is a minute old or more (fstat, then
 * futimens when due), the same staleness JavaScript allows (it keeps a table of when it
 * touched each object).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <node_api.h>

#include "sluice_tier.h"

/* Sidecar layout (src/cache/disk-cache.ts HEADER_BYTES, ENTRY_BYTES, MAGIC). */
#define HEADER_BYTES 64
#define ENTRY_BYTES 8
#define MAGIC 0x324d4c53u /* "SLM2" little-endian */

static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* ---- CRC32C: SSE 4.2's crc32 instruction where the CPU has it, else a table (slicing by 8). ---- */

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void make_table(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    table[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; i++) {
    for (int t = 1; t < 8; t++) table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
  }
}

static uint32_t crc32c_table(uint32_t c, const uint8_t *p, size_t n) {
  pthread_once(&table_once, make_table);
  while (n >= 8) {
    uint32_t lo = c ^ le32(p), hi = le32(p + 4);
    c = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^ table[5][(lo >> 16) & 0xff] ^ table[4][lo >> 24] ^
        table[3][hi & 0xff] ^ table[2][(hi >> 8) & 0xff] ^ table[1][(hi >> 16) & 0xff] ^ table[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
  return c;
}

/*
 * Three lanes at once. The crc32 instruction takes 3 cycles but a new one can start every
 * cycle, so one chain of them runs at a third of the instruction's rate (about 8 GB/s here,
 * as fast as pread copies out of the page cache: checking a passed-through file cost twice
 * its read). Each round feeds three CRC_LANE-byte lanes as independent chains, the first from
 * the running value and the others from 0, then joins them: the raw (uninverted) CRC is
 * linear, so crc(c, A|B) = shift(crc(c, A)) ^ crc(0, B), where shift(x) is x fed CRC_LANE
 * zero bytes, a linear map on 32 bits applied with four 256-entry tables (shift_tab, built
 * once from the 32 basis values). CRC_LANE 4096: three lanes (12 KiB) stay in L1, a 256 KiB
 * block is 21 rounds and 4 KiB of one lane, and the join (8 lookups) is 0.1% of a round.
 */
#define CRC_LANE 4096

static uint32_t shift_tab[4][256];

static void make_shift(void) {
  static const uint8_t zeros[CRC_LANE];
  uint32_t basis[32];
  for (int b = 0; b < 32; b++) basis[b] = crc32c_table(1u << b, zeros, CRC_LANE);
  for (int k = 0; k < 4; k++) {
    for (uint32_t v = 0; v < 256; v++) {
      uint32_t x = 0;
      for (int j = 0; j < 8; j++) if (v >> j & 1) x ^= basis[8 * k + j];
      shift_tab[k][v] = x;
    }
  }
}

static pthread_once_t shift_once = PTHREAD_ONCE_INIT;

static inline uint32_t shift_lane(uint32_t c) {
  return shift_tab[0][c & 0xff] ^ shift_tab[1][(c >> 8) & 0xff] ^ shift_tab[2][(c >> 16) & 0xff] ^ shift_tab[3][c >> 24];
}

#if defined(__x86_64__)
static inline uint64_t load64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t c, const uint8_t *p, size_t n) {
  uint64_t c64 = c;
  if (n >= 3 * CRC_LANE) {
    pthread_once(&shift_once, make_shift);
    do {
      uint64_t a = c64, b = 0, d = 0;
      for (size_t i = 0; i < CRC_LANE; i += 8) {
        a = __builtin_ia32_crc32di(a, load64(p + i));
        b = __builtin_ia32_crc32di(b, load64(p + CRC_LANE + i));
        d = __builtin_ia32_crc32di(d, load64(p + 2 * CRC_LANE + i));
      }
      c64 = shift_lane(shift_lane((uint32_t)a) ^ (uint32_t)b) ^ (uint32_t)d;
      p += 3 * CRC_LANE;
      n -= 3 * CRC_LANE;
    } while (n >= 3 * CRC_LANE);
  }
  while (n >= 8) {
    c64 = __builtin_ia32_crc32di(c64, load64(p));
    p += 8;
    n -= 8;
  }
  c = (uint32_t)c64;
  while (n--) c = __builtin_ia32_crc32qi(c, *p++);
  return c;
}
#endif

static uint32_t crc32c_with(const void *buf, size_t n, int portable) {
  uint32_t c = 0xffffffffu;
#if defined(__x86_64__)
  if (!portable && __builtin_cpu_supports("sse4.2")) return ~crc32c_sse42(c, buf, n);
#endif
  (void)portable;
  return ~crc32c_table(c, buf, n);
}

uint32_t sluice_crc32c(const void *buf, size_t n) { return crc32c_with(buf, n, 0); }

/* ---- the read ---- */

/*
 * How stale a sidecar's mtime (the object's LRU age) may be before a hit sets it to now: a
 * minute, as disk-cache.ts TOUCH_INTERVAL_MS. Eviction frees the oldest objects first, so an
 * age a minute stale only matters for objects read in the last minute, which are never the
 * oldest. Checking (fstat) is cheaper than setting (futimens dirties the inode: a journal
 * update on ext4), and a restarted job reads each file once an epoch.
 */
#define TOUCH_INTERVAL_S 60

static void touch(int map) {
  struct stat st;
  struct timespec now;
  if (fstat(map, &st) == 0 && clock_gettime(CLOCK_REALTIME, &now) == 0 && now.tv_sec - st.st_mtim.tv_sec < TOUCH_INTERVAL_S) return;
  futimens(map, NULL); /* a read-only filesystem: the LRU age stays the write time */
}

/* Reads until n bytes or end of file; the count, or -errno. */
static ssize_t pread_full(int fd, void *buf, size_t n, off_t at) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, (char *)buf + got, n - got, at + (off_t)got);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (r == 0) break;
    got += (size_t)r;
  }
  return (ssize_t)got;
}

/* Bytes read per pread when a file of several blocks is checked whole: 1 MiB, four blocks, one buffer per thread. */
#define CHECK_CHUNK (1u << 20)

/*
 * Checking a large file on several cores. The reader waits for the OPEN, so the check's time
 * is time to first byte, and a job that restarts on a warm tier pays it for every file: a
 * file of PARALLEL_MIN or more is split, on block boundaries, into parts of at least
 * PARALLEL_MIN, checked at once by this thread and up to PARALLEL_MAX - 1 helper threads
 * (never more than the CPUs this process may run on). 32 MiB: a part then takes ~5 ms, far
 * above a thread's start (~50 us); PARALLEL_MAX 4: pread from the page cache stops scaling
 * at a few cores, and a training node's other cores feed the GPU. The total CPU is the same;
 * only the wait is shorter. A helper that cannot be started leaves its part to this thread.
 */
#define PARALLEL_MIN (32u << 20)
#define PARALLEL_MAX 4

struct check_part {
  int data;
  const uint8_t *entries; /* the sidecar's entries: stored length u32, CRC32C u32 per block */
  uint32_t block_size;
  uint64_t size, first, end; /* the object's size; blocks [first, end) */
  int *failed;               /* set by any part that fails: the others stop at their next chunk */
  int res;
};

/*
 * Checking through a mapping. pread copies the page cache into our buffer (~8 GB/s a thread
 * here) before the CRC can read it; a read-only mapping of the cache file lets the CRC read
 * the page cache itself: 128 MiB in the page cache took 12 ms on one thread and 6.4 ms on
 * two, against 16 ms for two threads of pread (cold, from disk, both ~100 ms). Parts of
 * MAP_MIN or more are mapped (smaller ones are not worth the mapping's set-up and unmap).
 * The one hazard of a mapping: a file cut short by someone else while it is mapped raises
 * SIGBUS on the first access past its end. sluice never truncates cache files (it writes,
 * renames and unlinks them), so only an outside hand can; then the check must fail, not the
 * process. A SIGBUS handler, installed once, jumps back to the check that was reading (a
 * thread-local jump target, set only around the CRC loop) and the part fails with -EBADMSG.
 * A SIGBUS anywhere else is not ours: the previous disposition is put back and the faulting
 * access runs again under it (a sent SIGBUS is raised again). If the handler cannot be
 * installed, or the mapping fails, the part is read with pread as before (check_blocks).
 */
#define MAP_MIN (4u << 20)

/* Test hooks (test/native/tier-small.ts): tierSetMapped(false) reads every part with pread; tierShrinkAfterMap(path, size) cuts that file short right after the next mapping, to raise the SIGBUS. */
static int tier_no_map;
static char *shrink_path;
static off_t shrink_size;
static pthread_mutex_t shrink_lock = PTHREAD_MUTEX_INITIALIZER;

static void shrink_if_asked(void) {
  pthread_mutex_lock(&shrink_lock);
  char *path = shrink_path;
  shrink_path = NULL;
  pthread_mutex_unlock(&shrink_lock);
  if (path != NULL) {
    if (truncate(path, shrink_size) != 0) perror("tierShrinkAfterMap");
    free(path);
  }
}

static __thread sigjmp_buf *bus_jump;
static struct sigaction bus_previous;
static int bus_ready;
static pthread_once_t bus_once = PTHREAD_ONCE_INIT;

static void on_bus(int sig, siginfo_t *si, void *uc) {
  (void)uc;
  sigjmp_buf *j = bus_jump;
  if (j != NULL) siglongjmp(*j, 1);
  sigaction(SIGBUS, &bus_previous, NULL);
  if (si == NULL || si->si_code <= 0) raise(sig);
}

static void install_bus(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_bus;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  bus_ready = sigaction(SIGBUS, &sa, &bus_previous) == 0;
}

/* The `n` blocks of `bytes` (block `first` on, the last maybe short, `len` bytes in all) against their entries' CRCs: 0 or -EBADMSG. */
static int crc_blocks(const struct check_part *c, const uint8_t *bytes, size_t len, uint64_t first) {
  uint32_t B = c->block_size;
  for (size_t off = 0; off < len; off += B, first++) {
    size_t l = len - off < B ? len - off : B;
    if (sluice_crc32c(bytes + off, l) != le32(c->entries + ENTRY_BYTES * first + 4)) return -EBADMSG;
  }
  return 0;
}

/* Bytes [at, stop) of the data file mapped read-only, or NULL (read them with pread); *res set when the file is already short or cannot be stat'ed. */
/* noinline: kept out of check_blocks, whose sigsetjmp would otherwise make GCC warn (-Wclobbered) of its locals. */
__attribute__((noinline)) static const uint8_t *map_part(const struct check_part *c, uint64_t at, uint64_t stop, int *res) {
  pthread_once(&bus_once, install_bus);
  if (!bus_ready) return NULL;
  struct stat st;
  if (fstat(c->data, &st) != 0) {
    *res = -errno;
    return NULL;
  }
  if ((uint64_t)st.st_size < stop) {
    *res = -EBADMSG; /* short: what pread would find */
    return NULL;
  }
  const uint8_t *p = mmap(NULL, (size_t)(stop - at), PROT_READ, MAP_SHARED | MAP_POPULATE, c->data, (off_t)at);
  if (p == MAP_FAILED) return NULL;
  shrink_if_asked();
  return p;
}

/*
 * Blocks [first, end) checked in chunks of CHECK_CHUNK, each against its CRC: through a
 * read-only mapping of the part (MAP_MIN or more, unless turned off or refused), else with
 * pread into a buffer. 0, or a negative errno / -EBADMSG (-ECANCELED: another part failed).
 */
static int check_blocks(struct check_part *c) {
  uint32_t B = c->block_size;
  size_t per = CHECK_CHUNK / B ? CHECK_CHUNK / B : 1;
  uint64_t at = c->first * (uint64_t)B, stop = c->end * (uint64_t)B < c->size ? c->end * (uint64_t)B : c->size;
  size_t len = (size_t)(stop - at);
  int res0 = 0;
  const uint8_t *const mapped = len >= MAP_MIN && !tier_no_map ? map_part(c, at, stop, &res0) : NULL;
  if (res0 != 0) return res0;
  char *const chunk = mapped == NULL ? malloc(len < (size_t)per * B ? len : (size_t)per * B) : NULL;
  if (mapped == NULL && chunk == NULL) return -ENOMEM;
  volatile int res = 0;
  sigjmp_buf here;
  if (sigsetjmp(here, 1) == 0) {
    if (mapped != NULL) bus_jump = &here;
    for (uint64_t i = c->first; i < c->end && res == 0; i += per) {
      if (__atomic_load_n(c->failed, __ATOMIC_RELAXED)) {
        res = -ECANCELED;
        break;
      }
      uint64_t from = i * B, to = (i + per < c->end ? i + per : c->end) * (uint64_t)B;
      size_t len_here = (size_t)((to < c->size ? to : c->size) - from);
      if (mapped != NULL) {
        res = crc_blocks(c, mapped + (from - at), len_here, i);
        continue;
      }
      ssize_t got = pread_full(c->data, chunk, len_here, (off_t)from);
      res = got < 0 ? (int)got : (size_t)got < len_here ? -EBADMSG : crc_blocks(c, (const uint8_t *)chunk, len_here, i);
    }
  } else {
    res = -EBADMSG; /* the file shrank while mapped */
  }
  bus_jump = NULL;
  if (mapped != NULL) munmap((void *)mapped, len);
  free(chunk);
  if (res != 0 && res != -ECANCELED) __atomic_store_n(c->failed, 1, __ATOMIC_RELAXED);
  return res;
}

static void *check_thread(void *arg) {
  struct check_part *c = arg;
  c->res = check_blocks(c);
  return NULL;
}

/* How many threads check a file of `size` bytes: 1 below PARALLEL_MIN, else up to PARALLEL_MAX and the CPUs allowed. */
static int check_threads(uint64_t size) {
  uint64_t want = size / PARALLEL_MIN;
  if (want < 2) return 1;
  cpu_set_t set;
  int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
  int n = want < PARALLEL_MAX ? (int)want : PARALLEL_MAX;
  return cpus < n ? (cpus > 1 ? cpus : 1) : n;
}

/* Every block of the data file checked, on check_threads(size) threads: 0, or the first failure's errno. */
static int check_all(int data, const uint8_t *entries, uint32_t block_size, uint64_t size, uint64_t n, int one_thread) {
  int failed = 0, threads = one_thread ? 1 : check_threads(size);
  struct check_part parts[PARALLEL_MAX];
  pthread_t tids[PARALLEL_MAX];
  int started[PARALLEL_MAX] = {0};
  for (int t = 0; t < threads; t++) {
    parts[t] = (struct check_part){data, entries, block_size, size, n * (uint64_t)t / (uint64_t)threads, n * (uint64_t)(t + 1) / (uint64_t)threads, &failed, 0};
  }
  for (int t = 1; t < threads; t++) started[t] = pthread_create(&tids[t], NULL, check_thread, &parts[t]) == 0;
  parts[0].res = check_blocks(&parts[0]);
  int res = parts[0].res;
  for (int t = 1; t < threads; t++) {
    if (started[t]) pthread_join(tids[t], NULL);
    else parts[t].res = check_blocks(&parts[t]);
    if (res == 0 || res == -ECANCELED) res = parts[t].res != 0 ? parts[t].res : res;
  }
  return res;
}

/*
 * Checks the object's cache file `name` of `size` bytes as disk-cache.ts does (header, then
 * every block's entry and CRC32C). With `out` (one block only), its bytes land there; else
 * they are read in CHECK_CHUNK pieces and dropped (they stay in the page cache). With
 * `keep`, the data file's descriptor is left open in *keep on success.
 */
/*
 * The sidecar's path of cache file `name` under `objects_dir` ("<dir>/XX/<h>.map", h in hex)
 * into `file`; the data file's path is its first `len` bytes (the returned length), or
 * -ENAMETOOLONG.
 */
static int sidecar_path(const char *objects_dir, const uint8_t name[32], char file[PATH_MAX]) {
  static const char hex[] = "0123456789abcdef";
  char hname[65];
  for (int i = 0; i < 32; i++) {
    hname[2 * i] = hex[name[i] >> 4];
    hname[2 * i + 1] = hex[name[i] & 15];
  }
  hname[64] = 0;
  int len = snprintf(file, PATH_MAX - 4, "%s/%.2s/%s", objects_dir, hname, hname);
  if (len < 0 || len >= PATH_MAX - 4) return -ENAMETOOLONG;
  memcpy(file + len, ".map", 5);
  return len;
}

static int tier_check(const char *objects_dir, const uint8_t name[32], uint32_t block_size, uint64_t size, char *out, int *keep, struct stat *before, int one_thread) {
  if (size == 0 || block_size == 0 || block_size % 4096 != 0 || (out != NULL && size > block_size)) return -EINVAL;
  uint64_t n = (size + block_size - 1) / block_size;
  if (n > (64u << 20) / ENTRY_BYTES) return -EFBIG; /* 64 MiB of entries: 2 TiB at 256 KiB blocks */
  char file[PATH_MAX];
  int len = sidecar_path(objects_dir, name, file);
  if (len < 0) return len;
  uint8_t small_hdr[HEADER_BYTES + ENTRY_BYTES];
  size_t hdr_len = HEADER_BYTES + ENTRY_BYTES * (size_t)n;
  uint8_t *hdr = n == 1 ? small_hdr : malloc(hdr_len);
  int map = -1, data = -1, res = -ENOMEM;
  if (hdr == NULL) goto done;
  map = open(file, O_RDONLY | O_CLOEXEC);
  if (map < 0) {
    res = -errno;
    goto done;
  }
  ssize_t got = pread_full(map, hdr, hdr_len, 0);
  res = got < 0 ? (int)got : -EBADMSG;
  if (got != (ssize_t)hdr_len || le32(hdr) != MAGIC || le32(hdr + 4) != block_size || memcmp(hdr + 16, name, 32) != 0 ||
      le32(hdr + 60) != sluice_crc32c(hdr, 60)) {
    goto done;
  }
  for (uint64_t i = 0; i < n; i++) { /* every block present, whole: its stored length is the object's bytes in it */
    uint64_t want = size - i * block_size < block_size ? size - i * block_size : block_size;
    if (le32(hdr + HEADER_BYTES + ENTRY_BYTES * i) != want) goto done;
  }
  file[len] = 0;
  data = open(file, O_RDONLY | O_CLOEXEC);
  if (data < 0) {
    res = -errno;
    goto done;
  }
  if (before != NULL && fstat(data, before) != 0) {
    res = -errno;
    goto done;
  }
  if (out != NULL) {
    got = pread_full(data, out, (size_t)size, 0);
    if (got < 0) res = (int)got;
    else if ((uint64_t)got == size && sluice_crc32c(out, (size_t)size) == le32(hdr + HEADER_BYTES + 4)) res = 0;
  } else {
    res = check_all(data, hdr + HEADER_BYTES, block_size, size, n, one_thread);
  }
  if (res == 0) touch(map);
done:
  if (data >= 0 && !(res == 0 && keep != NULL)) close(data);
  else if (res == 0 && keep != NULL) *keep = data;
  if (map >= 0) close(map);
  if (hdr != small_hdr) free(hdr);
  return res;
}

int sluice_tier_read_small(const char *objects_dir, const uint8_t name[32], uint32_t block_size, uint64_t size, char *out) {
  return tier_check(objects_dir, name, block_size, size, out, NULL, NULL, 0);
}

int sluice_tier_open_verified(const char *objects_dir, const uint8_t name[32], uint32_t block_size, uint64_t size, struct stat *before, int one_thread) {
  int fd = -1;
  int res = tier_check(objects_dir, name, block_size, size, NULL, &fd, before, one_thread);
  return res == 0 ? fd : res;
}

/* ---- N-API, for tests (test/native/tier-small.ts): the same functions the FUSE thread calls ---- */

/* tierCrc32c(bytes: Buffer, portable: boolean): number (portable: the table, not the CPU's instruction). */
static napi_value js_crc32c(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2], r;
  void *data;
  size_t len;
  bool is = false, portable = false;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 || napi_is_buffer(env, argv[0], &is) != napi_ok || !is ||
      napi_get_buffer_info(env, argv[0], &data, &len) != napi_ok || napi_get_value_bool(env, argv[1], &portable) != napi_ok) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "tierCrc32c(bytes: Buffer, portable: boolean)");
    return NULL;
  }
  napi_create_uint32(env, crc32c_with(data, len, portable), &r);
  return r;
}

/* The (objectsDir: string, name: Buffer(32), blockSize: number, size: number > 0) both test functions take: 1, or 0 when malformed. */
static int tier_args(napi_env env, napi_callback_info info, char dir[PATH_MAX], void **name, uint32_t *block, int64_t *size) {
  size_t argc = 4, dl, nl;
  napi_value argv[4];
  bool is = false;
  return napi_get_cb_info(env, info, &argc, argv, NULL, NULL) == napi_ok && argc >= 4 &&
         napi_get_value_string_utf8(env, argv[0], dir, PATH_MAX, &dl) == napi_ok && napi_is_buffer(env, argv[1], &is) == napi_ok && is &&
         napi_get_buffer_info(env, argv[1], name, &nl) == napi_ok && nl == 32 && napi_get_value_uint32(env, argv[2], block) == napi_ok &&
         napi_get_value_int64(env, argv[3], size) == napi_ok && *size > 0;
}

/* tierReadSmall(objectsDir, name: Buffer(32), blockSize, size (1..blockSize)): Buffer (the verified bytes) or a negative errno. */
static napi_value js_read_small(napi_env env, napi_callback_info info) {
  char dir[PATH_MAX];
  void *name, *out;
  uint32_t block;
  int64_t size;
  napi_value r;
  if (!tier_args(env, info, dir, &name, &block, &size) || size > block) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "tierReadSmall(objectsDir: string, name: Buffer(32), blockSize: number, size: number (1..blockSize))");
    return NULL;
  }
  if (napi_create_buffer(env, (size_t)size, &out, &r) != napi_ok) return NULL;
  int res = sluice_tier_read_small(dir, name, block, (uint64_t)size, out);
  if (res == 0) return r;
  napi_create_int32(env, res, &r);
  return r;
}

/*
 * tierOpenPair(objectsDir, name: Buffer(32), fds: Int32Array(2), header: Buffer(>= 64)):
 * opens cache file `name`'s data file and sidecar (O_RDWR | O_CLOEXEC, as Node's openSync)
 * into fds[0] and fds[1] and reads up to 64 bytes of the sidecar's header into `header`;
 * returns the header bytes read (0..64; the caller checks them and owns both fds), or a
 * negative errno with nothing left open. Why: DiskCache.acquire looks every object up, and in
 * a first epoch nearly every lookup misses (twice per small file: openWhole, then the read);
 * Node's openSync makes an Error with a stack for each ENOENT, ~0.14 ms of Node's thread per
 * file together with the path's join (t14-batch). A miss here is one failed open(2).
 */
static napi_value js_open_pair(napi_env env, napi_callback_info info) {
  size_t argc = 4, dl, nl, hl, fl;
  napi_value argv[4], r;
  char dir[PATH_MAX], file[PATH_MAX];
  void *name, *hdr, *fds;
  bool is_name = false, is_hdr = false, is_typed = false;
  napi_typedarray_type ft;
  napi_value ab;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 4 || napi_get_value_string_utf8(env, argv[0], dir, sizeof dir, &dl) != napi_ok ||
      napi_is_buffer(env, argv[1], &is_name) != napi_ok || !is_name || napi_get_buffer_info(env, argv[1], &name, &nl) != napi_ok || nl != 32 ||
      napi_is_typedarray(env, argv[2], &is_typed) != napi_ok || !is_typed || napi_get_typedarray_info(env, argv[2], &ft, &fl, &fds, &ab, NULL) != napi_ok ||
      ft != napi_int32_array || fl < 2 || napi_is_buffer(env, argv[3], &is_hdr) != napi_ok || !is_hdr || napi_get_buffer_info(env, argv[3], &hdr, &hl) != napi_ok ||
      hl < HEADER_BYTES) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "tierOpenPair(objectsDir: string, name: Buffer(32), fds: Int32Array(2), header: Buffer(>= 64))");
    return NULL;
  }
  int res, len = sidecar_path(dir, name, file); /* a dir cut short at PATH_MAX - 1 is too long here too */
  int data = -1, map = -1;
  if (len < 0) {
    res = len;
    goto out;
  }
  file[len] = 0; /* the data file's path; ".map" put back below */
  data = open(file, O_RDWR | O_CLOEXEC);
  if (data < 0) {
    res = -errno;
    goto out;
  }
  file[len] = '.';
  map = open(file, O_RDWR | O_CLOEXEC);
  if (map < 0) {
    res = -errno;
    close(data);
    goto out;
  }
  ssize_t got = pread_full(map, hdr, HEADER_BYTES, 0);
  if (got < 0) {
    res = (int)got;
    close(data);
    close(map);
    goto out;
  }
  ((int32_t *)fds)[0] = data;
  ((int32_t *)fds)[1] = map;
  res = (int)got;
out:
  napi_create_int32(env, res, &r);
  return r;
}

/* tierOpenVerified(objectsDir, name: Buffer(32), blockSize, size > 0): the data file's descriptor once every block checked, or a negative errno (the caller closes it). */
static napi_value js_open_verified(napi_env env, napi_callback_info info) {
  char dir[PATH_MAX];
  void *name;
  uint32_t block;
  int64_t size;
  napi_value r;
  if (!tier_args(env, info, dir, &name, &block, &size)) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "tierOpenVerified(objectsDir: string, name: Buffer(32), blockSize: number, size: number > 0)");
    return NULL;
  }
  napi_create_int32(env, sluice_tier_open_verified(dir, name, block, (uint64_t)size, NULL, 0), &r);
  return r;
}

/* tierSetMapped(on: boolean): whether large parts are checked through a mapping (the default) or with pread. */
static napi_value js_set_mapped(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  bool on = true;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 || napi_get_value_bool(env, argv[0], &on) != napi_ok) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "tierSetMapped(on: boolean)");
    return NULL;
  }
  tier_no_map = !on;
  return NULL;
}

/* tierShrinkAfterMap(path: string, size: number): the next mapped check truncates `path` to `size` bytes once it has mapped its part. */
static napi_value js_shrink_after_map(napi_env env, napi_callback_info info) {
  size_t argc = 2, pl;
  napi_value argv[2];
  char path[PATH_MAX];
  int64_t size;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 || napi_get_value_string_utf8(env, argv[0], path, sizeof path, &pl) != napi_ok ||
      napi_get_value_int64(env, argv[1], &size) != napi_ok || size < 0) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "tierShrinkAfterMap(path: string, size: number)");
    return NULL;
  }
  pthread_mutex_lock(&shrink_lock);
  free(shrink_path);
  shrink_path = strdup(path);
  shrink_size = (off_t)size;
  pthread_mutex_unlock(&shrink_lock);
  return NULL;
}

/* ---- writing small objects, a batch in one pool hop (disk-cache.ts writeSmallBatch) ---- */

/*
 * Small objects (one block at most, block 0) written into the tier as one piece of work on
 * Node's thread pool, a batch of up to MAX_BATCH at once. Each object: the data file opened
 * (O_CREAT) and its bytes written at 0, then the sidecar's header and entry 0 in one pwrite,
 * after the bytes (the order disk-cache.ts keeps: a block is marked present only once its
 * bytes are in the file). Why here: through Node's fs each of the ~7 syscalls of an object
 * is its own pool hop (a futex wake, a worker, an eventfd write, an epoll wake), and on this
 * VM, where a cross-CPU wake is an exit to the host, the tier's write of one 40 KB file cost
 * 1.4-2.4 ms of CPU against ~0.08 ms for the same syscalls made in a row (BENCHMARKS.md,
 * t14-small-write); one hop per object still woke a pool thread and Node's thread once per
 * file, so objects come in batches (t14-batch). The sidecar:
 *  - made here (O_EXCL): written whole (header, entry 0);
 *  - found empty (another writer made it and has not written yet, or was killed): the same;
 *  - found with a valid header and entry 0 holding the object whole: nothing is written;
 *  - found with a valid header otherwise: header and entry rewritten (the same header bytes);
 *  - found damaged (a short or bad header): nothing is written, -EBADMSG, and JavaScript
 *    discards the object as its own check does (headerOk).
 * Result per object: [status, old entry length]: 1 written with a sidecar made here, 2
 * written into a sidecar that was there, 0 already present, or a negative errno. Objects are
 * written in order and independently: one's failure does not stop the next.
 */

/* A batch's bound: 64 objects of at most one block each hold at most 64 blocks of the caller's memory (the write queue's bytes, which bound them first), and keep a batch's result small. */
#define MAX_BATCH 64

struct small_item {
  uint8_t name[32];
  uint8_t side[HEADER_BYTES + ENTRY_BYTES]; /* header and entry 0, built on Node's thread */
  const uint8_t *bytes;
  size_t len;
  int status;
  uint32_t old_len;
};

struct small_batch {
  napi_async_work work;
  napi_deferred deferred;
  napi_ref bytes_ref; /* the array of buffers, held until the batch settles */
  char dir[PATH_MAX];
  uint32_t n;
  struct small_item items[];
};

static void put_le32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

static ssize_t pwrite_full(int fd, const void *buf, size_t n, off_t at) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = pwrite(fd, (const char *)buf + done, n - done, at + (off_t)done);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (w == 0) return -EIO;
    done += (size_t)w;
  }
  return (ssize_t)done;
}

static int small_write_run(const char *dir, struct small_item *w) {
  char map_path[PATH_MAX], data_path[PATH_MAX];
  int len = sidecar_path(dir, w->name, map_path);
  if (len < 0) return len;
  memcpy(data_path, map_path, (size_t)len);
  data_path[len] = 0;
  int created = 1;
  int map = open(map_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (map < 0 && errno == EEXIST) {
    created = 0;
    map = open(map_path, O_RDWR | O_CLOEXEC);
  }
  if (map < 0) return -errno;
  int res = 0, data = -1;
  if (!created) {
    uint8_t had[HEADER_BYTES + ENTRY_BYTES];
    ssize_t got = pread_full(map, had, sizeof had, 0);
    if (got < 0) {
      res = (int)got;
      goto done;
    }
    if (got > 0) {
      /* The header must be exactly the one this object's would be (magic, block size, h, CRC). */
      if (got < HEADER_BYTES || memcmp(had, w->side, HEADER_BYTES) != 0) {
        res = -EBADMSG;
        goto done;
      }
      if (got == (ssize_t)sizeof had) {
        w->old_len = le32(had + HEADER_BYTES);
        if (w->old_len >= w->len && w->old_len <= le32(w->side + 4)) {
          res = 0; /* present whole already */
          w->old_len = 0;
          goto done;
        }
      }
    }
  }
  data = open(data_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (data < 0) {
    res = -errno;
    goto done;
  }
  ssize_t n = pwrite_full(data, w->bytes, w->len, 0);
  if (n < 0) {
    res = (int)n;
    goto done;
  }
  /* The bytes are in the file: only now is the block marked present. */
  n = pwrite_full(map, w->side, sizeof w->side, 0);
  res = n < 0 ? (int)n : created ? 1 : 2;
done:
  if (data >= 0) close(data);
  close(map);
  return res;
}

static void small_write_execute(napi_env env, void *arg) {
  (void)env;
  struct small_batch *b = arg;
  for (uint32_t i = 0; i < b->n; i++) b->items[i].status = small_write_run(b->dir, &b->items[i]);
}

static void small_write_complete(napi_env env, napi_status status, void *arg) {
  struct small_batch *b = arg;
  napi_value ab, out;
  void *data;
  if (napi_create_arraybuffer(env, (size_t)b->n * 8, &data, &ab) == napi_ok && napi_create_typedarray(env, napi_int32_array, (size_t)b->n * 2, ab, 0, &out) == napi_ok) {
    int32_t *r = data;
    for (uint32_t i = 0; i < b->n; i++) {
      r[2 * i] = status == napi_ok ? b->items[i].status : -ECANCELED;
      r[2 * i + 1] = (int32_t)b->items[i].old_len;
    }
    napi_resolve_deferred(env, b->deferred, out);
  } else {
    napi_value msg, err;
    napi_create_string_utf8(env, "tierWriteSmall: could not build the result", NAPI_AUTO_LENGTH, &msg);
    napi_create_error(env, NULL, msg, &err);
    napi_reject_deferred(env, b->deferred, err);
  }
  napi_delete_reference(env, b->bytes_ref);
  napi_delete_async_work(env, b->work);
  free(b);
}

#define WRITE_SMALL_USAGE "tierWriteSmall(objectsDir: string, blockSize: number, names: Buffer (32 bytes each), bytes: Buffer[] (1..blockSize each), crcs: Uint32Array), 1 to 64 objects"

/* tierWriteSmall(objectsDir, blockSize, names, bytes, crcs): Promise<Int32Array> of [status, oldLength] per object (see above); the buffers are held until then. */
static napi_value js_write_small(napi_env env, napi_callback_info info) {
  size_t argc = 5, dl, nl, cl;
  napi_value argv[5], promise, ab;
  char dir[PATH_MAX];
  void *names, *crcs;
  uint32_t block, n = 0;
  bool is_names = false, is_array = false, is_typed = false;
  napi_typedarray_type ct;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 5 || napi_get_value_string_utf8(env, argv[0], dir, sizeof dir, &dl) != napi_ok ||
      napi_get_value_uint32(env, argv[1], &block) != napi_ok || block == 0 || napi_is_buffer(env, argv[2], &is_names) != napi_ok || !is_names ||
      napi_get_buffer_info(env, argv[2], &names, &nl) != napi_ok || napi_is_array(env, argv[3], &is_array) != napi_ok || !is_array ||
      napi_get_array_length(env, argv[3], &n) != napi_ok || n == 0 || n > MAX_BATCH || nl != (size_t)n * 32 ||
      napi_is_typedarray(env, argv[4], &is_typed) != napi_ok || !is_typed || napi_get_typedarray_info(env, argv[4], &ct, &cl, &crcs, &ab, NULL) != napi_ok ||
      ct != napi_uint32_array || cl != n) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", WRITE_SMALL_USAGE);
    return NULL;
  }
  if (dl >= sizeof dir - 1) { /* possibly cut short; sidecar_path refuses what is merely long */
    napi_throw_range_error(env, "ENAMETOOLONG", "tierWriteSmall: objectsDir is too long");
    return NULL;
  }
  struct small_batch *b = calloc(1, sizeof *b + (size_t)n * sizeof(struct small_item));
  if (b == NULL) {
    napi_throw_error(env, "ENOMEM", "tierWriteSmall: out of memory");
    return NULL;
  }
  memcpy(b->dir, dir, dl + 1);
  b->n = n;
  for (uint32_t i = 0; i < n; i++) {
    struct small_item *w = &b->items[i];
    napi_value el;
    bool is_bytes = false;
    void *bytes;
    size_t bl;
    if (napi_get_element(env, argv[3], i, &el) != napi_ok || napi_is_buffer(env, el, &is_bytes) != napi_ok || !is_bytes ||
        napi_get_buffer_info(env, el, &bytes, &bl) != napi_ok || bl == 0 || bl > block) {
      free(b);
      napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", WRITE_SMALL_USAGE);
      return NULL;
    }
    memcpy(w->name, (const uint8_t *)names + 32 * i, 32);
    put_le32(w->side, MAGIC);
    put_le32(w->side + 4, block);
    memcpy(w->side + 16, w->name, 32);
    put_le32(w->side + 60, sluice_crc32c(w->side, 60));
    put_le32(w->side + HEADER_BYTES, (uint32_t)bl);
    put_le32(w->side + HEADER_BYTES + 4, ((const uint32_t *)crcs)[i]);
    w->bytes = bytes;
    w->len = bl;
  }
  napi_value resource;
  napi_create_string_utf8(env, "sluice:tierWriteSmall", NAPI_AUTO_LENGTH, &resource);
  if (napi_create_reference(env, argv[3], 1, &b->bytes_ref) != napi_ok || napi_create_promise(env, &b->deferred, &promise) != napi_ok ||
      napi_create_async_work(env, NULL, resource, small_write_execute, small_write_complete, b, &b->work) != napi_ok || napi_queue_async_work(env, b->work) != napi_ok) {
    free(b);
    napi_throw_error(env, "EIO", "tierWriteSmall: could not queue the write");
    return NULL;
  }
  return promise;
}

napi_status sluice_tier_init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    {"tierSetMapped", NULL, js_set_mapped, NULL, NULL, NULL, napi_enumerable, NULL},
    {"tierShrinkAfterMap", NULL, js_shrink_after_map, NULL, NULL, NULL, napi_enumerable, NULL},
    {"tierOpenVerified", NULL, js_open_verified, NULL, NULL, NULL, napi_enumerable, NULL},
    {"tierCrc32c", NULL, js_crc32c, NULL, NULL, NULL, napi_enumerable, NULL},
    {"tierReadSmall", NULL, js_read_small, NULL, NULL, NULL, napi_enumerable, NULL},
    {"tierWriteSmall", NULL, js_write_small, NULL, NULL, NULL, napi_enumerable, NULL},
    {"tierOpenPair", NULL, js_open_pair, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  return napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
}
