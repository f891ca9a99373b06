/*
 * The receiving end of scripts/pipe-floor.mjs: the least work a process can do to move a
 * TCP stream into a FIFO, as a floor for Pipe mode's daemon CPU per GB.
 *
 *   pipe-floor copy   PORT BYTES FIFO   read(2) into one reused 8 MiB buffer, then blocking
 *                                       write(2) of what came into the FIFO (two kernel copies,
 *                                       as any design that holds the bytes in user memory pays)
 *   pipe-floor splice PORT BYTES FIFO   splice(2) from the socket into the FIFO: no copy in or
 *                                       out of user memory (plain TCP only; TLS must decrypt)
 *
 * Prints one line of JSON: bytes, wall seconds, and this process's user and system CPU
 * seconds over the transfer (getrusage, so connect and start-up are not counted apart from
 * the few microseconds before the first byte).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* 8 MiB: sluice's part size, so a read may take as much as a part's slab could hold. */
#define BUF_BYTES (8u << 20)
/* 1 MiB: the FIFO buffer sluice asks for (the default pipe-max-size). */
#define PIPE_BYTES (1 << 20)

static double secs(struct timeval tv) { return tv.tv_sec + tv.tv_usec / 1e6; }

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: pipe-floor copy|splice PORT BYTES FIFO\n");
    return 2;
  }
  int splicing = strcmp(argv[1], "splice") == 0;
  long long total = atoll(argv[3]);
  int out = open(argv[4], O_WRONLY);
  if (out < 0) { perror("open fifo"); return 1; }
  fcntl(out, F_SETPIPE_SZ, PIPE_BYTES);
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)atoi(argv[2]));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) { perror("connect"); return 1; }

  struct rusage r0, r1;
  struct timespec t0, t1;
  getrusage(RUSAGE_SELF, &r0);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  long long got = 0;
  if (splicing) {
    while (got < total) {
      ssize_t n = splice(s, NULL, out, NULL, PIPE_BYTES, SPLICE_F_MOVE | SPLICE_F_MORE);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += n;
    }
  } else {
    char *buf = malloc(BUF_BYTES);
    if (!buf) return 1;
    memset(buf, 0, BUF_BYTES); /* touched once before the clock, as a reused slab is */
    while (got < total) {
      ssize_t n = read(s, buf, BUF_BYTES);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      for (ssize_t w = 0; w < n;) {
        ssize_t k = write(out, buf + w, (size_t)(n - w));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) { perror("write fifo"); return 1; }
        w += k;
      }
      got += n;
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  getrusage(RUSAGE_SELF, &r1);
  close(out);
  printf("{\"bytes\":%lld,\"seconds\":%.6f,\"user\":%.6f,\"sys\":%.6f}\n", got,
         (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
         secs(r1.ru_utime) - secs(r0.ru_utime), secs(r1.ru_stime) - secs(r0.ru_stime));
  return got == total ? 0 : 1;
}
