/*
 * What Pipe mode's copy into the FIFO costs against vmsplice(2), and what vmsplice costs once it
 * is made safe (issue 11, BENCHMARKS.md "t11-growth"). The writer sends 1 GiB through a 1 MiB
 * pipe out of a ring of RING MiB in huge pages, refilling each 2 MiB of the ring before it sends
 * it (as a receive slab is refilled by its next GET); a child reads 128 KiB at a time and
 * checks one word per 4 KiB against what the writer put there. Both print their CPU per GB.
 *
 *   MODE 0: write(2), the kernel copies into pages of the pipe's own.
 *   MODE 1: vmsplice(2) without SPLICE_F_GIFT: the pipe references the ring's pages. Before a
 *           region is refilled the writer waits until the reader has consumed it (bytes sent -
 *           FIONREAD). That is enough for a reader that read(2)s, but not for one that splices
 *           the pipe onward (pv, tee, a socket): the references move on out of FIONREAD's sight.
 *   MODE 2: vmsplice, and each region is dropped (MADV_DONTNEED) before it is refilled, so the
 *           refill lands in new pages whatever still holds the old ones: safe for any reader.
 *   MODE 3: vmsplice, and the bytes are overwritten as soon as the call returns (a buffer reused
 *           once reported written, as write(2) allows): the reader sees the new bytes, i.e.
 *           the check can fail.
 *
 * Build and run: cc -O2 -o /tmp/pipe-splice scripts/pipe-splice.c
 *   for m in 0 1 2 3; do /tmp/pipe-splice $m 16; done
 * Measured on the project's 2-core VM (writer / reader CPU s/GB): write 0.23-0.39 / 0.23-0.36,
 * vmsplice 0.08-0.11 / 0.06-0.07, vmsplice + drop 0.14-0.16 / 0.07-0.08 (dropping 1 MiB at a
 * time instead, which splits the huge pages: 2.8-3.1 / 0.19-0.20). In the daemon the drop cost
 * about what the copy saves (its refills come tens of ms later, in new huge pages the host had
 * taken back), so Pipe mode keeps write(2): native/src/pipe_writer.c.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)
#define TOTAL (1024 * MIB)
#define HUGE_BLOCK (2 * MIB)
#define READ_BYTES ((size_t)128 << 10) /* a reader's read size, as Python's buffered reads */
/* Refilled (and dropped) 2 MiB at a time: a drop of part of a huge page splits it, and the refill then faults 4 KiB pages (~3 s/GB here). */
#define CHUNK HUGE_BLOCK

static double cpu_seconds(void) {
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  return (double)r.ru_utime.tv_sec + (double)r.ru_utime.tv_usec / 1e6 + (double)r.ru_stime.tv_sec + (double)r.ru_stime.tv_usec / 1e6;
}

/* Reads fd to its end; each 4 KiB page of MiB k must start with the word k. Exits 1 on a wrong word. */
static void read_and_check(int fd) {
  char *buf = malloc(READ_BYTES);
  size_t got = 0;
  long bad = 0;
  for (;;) {
    ssize_t n = read(fd, buf, READ_BYTES);
    if (n <= 0) break;
    for (ssize_t i = 0; i + 8 <= n; i += 4096) {
      if ((got + (size_t)i) % 4096 != 0) continue;
      uint64_t word;
      memcpy(&word, buf + i, 8);
      if (word != (got + (size_t)i) / MIB) bad++;
    }
    got += (size_t)n;
  }
  fprintf(stderr, "reader: %.2f CPU s/GB, %zu bytes, %ld wrong pages\n", cpu_seconds() / ((double)got / 1e9), got, bad);
  _exit(bad > 0 || got != TOTAL);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODE(0 write|1 vmsplice|2 vmsplice+drop|3 vmsplice, reused at once) RING_MIB\n", argv[0]);
    return 2;
  }
  int mode = atoi(argv[1]);
  size_t ring = (size_t)atoi(argv[2]) * MIB;
  int p[2];
  if (pipe(p) < 0) return 1;
  fcntl(p[1], F_SETPIPE_SZ, (int)MIB);
  pid_t child = fork();
  if (child == 0) {
    close(p[1]);
    read_and_check(p[0]);
  }
  close(p[0]);
  char *raw = mmap(NULL, ring + HUGE_BLOCK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  char *r = (char *)(((uintptr_t)raw + HUGE_BLOCK - 1) & ~(uintptr_t)(HUGE_BLOCK - 1));
  madvise(r, ring, MADV_HUGEPAGE);
  memset(r, 0, ring); /* mapped before the clock starts */
  fcntl(p[1], F_SETFL, O_NONBLOCK);
  double c0 = cpu_seconds();
  size_t sent = 0;
  long waits = 0;
  while (sent < TOTAL) {
    char *region = r + (sent % ring) - (sent % CHUNK);
    if (sent % CHUNK == 0) {
      /* Refill this chunk; with vmsplice, only once the reader consumed what it held last time. */
      while ((mode == 1 || mode == 2) && sent >= ring) {
        int queued = 0;
        ioctl(p[1], FIONREAD, &queued);
        if (sent - (size_t)queued >= sent + CHUNK - ring) break;
        usleep(200);
        waits++;
      }
      if (mode == 2 && sent >= ring) madvise(region, CHUNK, MADV_DONTNEED);
      for (size_t i = 0; i < CHUNK; i += 8) *(uint64_t *)(region + i) = (sent + i) / MIB;
    }
    size_t off = sent % CHUNK;
    struct iovec v = {region + off, CHUNK - off};
    ssize_t n = mode == 0 ? write(p[1], region + off, CHUNK - off) : vmsplice(p[1], &v, 1, SPLICE_F_NONBLOCK);
    if (n < 0) {
      struct pollfd f = {p[1], POLLOUT, 0};
      poll(&f, 1, -1);
      continue;
    }
    if (mode == 3) /* reuse the bytes at once, as a slab given back the moment it was "written" */
      for (size_t i = 0; i < (size_t)n; i += 4096) *(uint64_t *)(region + off + i) = UINT64_MAX;
    sent += (size_t)n;
  }
  /* vmsplice: the last bytes are the ring's own pages until the reader has them. */
  for (int queued = 1; mode != 0 && queued > 0;) {
    ioctl(p[1], FIONREAD, &queued);
    if (queued > 0) usleep(200);
  }
  close(p[1]);
  double c1 = cpu_seconds();
  int status = 0;
  waitpid(child, &status, 0);
  const char *names[] = {"write", "vmsplice", "vmsplice+drop", "vmsplice, reused at once"};
  printf("%s, ring %zu MiB: writer %.2f CPU s/GB, %ld waits, reader %s\n", names[mode & 3], ring / MIB, (c1 - c0) / ((double)TOTAL / 1e9), waits,
         WEXITSTATUS(status) == 0 ? "exact" : "SAW WRONG BYTES");
  return 0;
}
