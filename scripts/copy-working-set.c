/*
 * What a kernel copy into or out of user memory costs as a function of how much memory the
 * copies cycle through, in 4 KiB pages and in transparent huge pages (issue 11, BENCHMARKS.md
 * "t11-huge"). This is the daemon's situation: ranged GET bodies land in receive slabs
 * (a socket read into user memory), FUSE replies and Pipe writes are copied out of them (write from
 * user memory), and a pool of slabs is a working set of tens to hundreds of MiB.
 *
 * Two processes and a pipe of 1 MiB between them: 512 MiB go through it, the parent's side
 * through a ring of RING MiB (1 MiB per call, wrapping), and the parent prints its own user and
 * system CPU per GB.
 *   read:  the child writes into the pipe; the parent read()s into the ring (the kernel copies
 *          into user memory, as a socket read into a slab does).
 *   write: the parent write()s from the ring into the pipe; the child drains it (the kernel
 *          copies out of user memory, as a FUSE reply or a Pipe write from a slab does).
 * A pipe, not a loopback TCP connection: over TCP the reader's system time also carries part of
 * the sender's (its ACKs let the sender transmit from the reader's context), which made the
 * figures swing by 3x between runs.
 * HUGE 1 advises the ring MADV_HUGEPAGE (0: MADV_NOHUGEPAGE); STAGE 1 goes through a 256 KiB
 * buffer and memcpy instead of letting the kernel touch the ring itself.
 * The ring is written once before the clock starts, so no page fault is in the figure.
 *
 * Build and run: cc -O2 -o /tmp/cws scripts/copy-working-set.c
 *   for r in 8 64 256 512; do /tmp/cws read $r 0 0; /tmp/cws read $r 1 0; done
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)
#define TOTAL (512 * MIB)
#define HUGE_BLOCK (2 * MIB)
#define STAGE_BYTES ((size_t)256 << 10) /* fits the L2 cache: the kernel copies into memory it has just seen */

static void cpu(double *user, double *sys) {
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  *user = (double)r.ru_utime.tv_sec + (double)r.ru_utime.tv_usec / 1e6;
  *sys = (double)r.ru_stime.tv_sec + (double)r.ru_stime.tv_usec / 1e6;
}

/* Writes `total` bytes of a 1 MiB buffer to fd, then exits. */
static void send_all(int fd, size_t total) {
  char *buf = malloc(MIB);
  memset(buf, 'x', MIB);
  for (size_t sent = 0; sent < total;) {
    ssize_t n = write(fd, buf, total - sent < MIB ? total - sent : MIB);
    if (n <= 0) _exit(1);
    sent += (size_t)n;
  }
  _exit(0);
}

/* Reads fd to its end, then exits. */
static void drain(int fd) {
  char *buf = malloc(MIB);
  while (read(fd, buf, MIB) > 0) {}
  _exit(0);
}

int main(int argc, char **argv) {
  if (argc < 5 || (strcmp(argv[1], "read") != 0 && strcmp(argv[1], "write") != 0)) {
    fprintf(stderr, "usage: %s read|write RING_MIB HUGE(0|1) STAGE(0|1)\n", argv[0]);
    return 2;
  }
  const int read_side = strcmp(argv[1], "read") == 0;
  const size_t ring = (size_t)atol(argv[2]) * MIB;
  const int huge = atoi(argv[3]), stage = atoi(argv[4]);
  if (ring < MIB) { fprintf(stderr, "RING_MIB must be >= 1\n"); return 2; }
  /* A pipe of 1 MiB between the two sides: the child writes into it (read mode) or drains it (write mode).
   * Forked before the ring is mapped: a ring forked with its pages would be copy-on-write in the parent. */
  int pp[2];
  if (pipe(pp) != 0) { perror("pipe"); return 1; }
  (void)fcntl(pp[1], F_SETPIPE_SZ, (int)MIB);
  pid_t child = fork();
  if (child == 0) {
    if (read_side) { close(pp[0]); send_all(pp[1], TOTAL); }
    close(pp[1]);
    drain(pp[0]);
  }
  int fd = read_side ? pp[0] : pp[1];
  close(read_side ? pp[1] : pp[0]);
  char *raw = mmap(NULL, ring + HUGE_BLOCK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) { perror("mmap"); return 1; }
  char *p = (char *)(((uintptr_t)raw + HUGE_BLOCK - 1) & ~(uintptr_t)(HUGE_BLOCK - 1));
  (void)madvise(p, ring, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  memset(p, 1, ring);
  static char st[STAGE_BYTES];
  memset(st, 0, sizeof st);

  double u0, s0, u1, s1;
  size_t moved = 0, off = 0;
  long calls = 0;
  cpu(&u0, &s0);
  while (moved < TOTAL) {
    if (off + MIB > ring) off = 0;
    const size_t want = stage ? STAGE_BYTES : MIB;
    ssize_t n;
    if (read_side) {
      n = read(fd, stage ? st : p + off, want);
      if (n > 0 && stage) memcpy(p + off, st, (size_t)n);
    } else {
      if (stage) memcpy(st, p + off, want);
      n = write(fd, stage ? st : p + off, want);
    }
    if (n <= 0) break;
    moved += (size_t)n;
    off += (size_t)n;
    calls++;
  }
  cpu(&u1, &s1);
  close(fd);
  waitpid(child, NULL, 0);
  const double gb = (double)moved / 1e9;
  printf("%-5s ring %4zu MiB %s%s: user %.2f sys %.2f CPU s/GB (%ld calls)\n", argv[1], ring / MIB, huge ? "huge pages" : "4 KiB pages",
         stage ? ", staged" : "", (u1 - u0) / gb, (s1 - s0) / gb, calls);
  return moved == TOTAL ? 0 : 1;
}
