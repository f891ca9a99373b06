/*
 * The TLS receiving end of scripts/pipe-floor.mjs: the least work a process can do to move
 * a TLS stream into a FIFO, written in C against the system's OpenSSL, so that the floor
 * under an HTTPS Pipe is known apart from Node's TLS layer.
 *
 *   pipe-floor-tls PORT BYTES FIFO CAFILE
 *
 * Connects to 127.0.0.1:PORT, verifies the server's certificate against CAFILE and the name
 * "localhost" (as sluice's data path verifies S3's), finishes the handshake before the clock
 * starts, then SSL_read()s into one reused 8 MiB buffer and writes to the FIFO whenever 1 MiB
 * (the FIFO's size) has gathered, or at the end. read_ahead lets OpenSSL take several records
 * per read(2). Prints one line of JSON like pipe-floor.c, plus the negotiated cipher.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* 8 MiB: sluice's part size, as in pipe-floor.c. */
#define BUF_BYTES (8u << 20)
/* 1 MiB: the FIFO buffer sluice asks for; also the batch written to it at once. */
#define PIPE_BYTES (1 << 20)
/*
 * 64 KiB: OpenSSL's read buffer with read_ahead, so one read(2) takes up to 4 records. The
 * cheapest here of 0 (a record per read), 64 KiB, 256 KiB and 1 MiB (3 rounds each, sha256sum
 * reader: 1.10, 0.86, 0.86, 1.15 CPU s/GB): a buffer past the L2 cache is decrypted and then
 * copied out from memory, not from cache.
 */
#define READ_AHEAD_BYTES (64 << 10)

static double secs(struct timeval tv) { return tv.tv_sec + tv.tv_usec / 1e6; }

static int write_all(int fd, const char *p, size_t n) {
  for (size_t w = 0; w < n;) {
    ssize_t k = write(fd, p + w, n - w);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) { perror("write fifo"); return -1; }
    w += (size_t)k;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: pipe-floor-tls PORT BYTES FIFO CAFILE\n");
    return 2;
  }
  long long total = atoll(argv[2]);
  int out = open(argv[3], O_WRONLY);
  if (out < 0) { perror("open fifo"); return 1; }
  fcntl(out, F_SETPIPE_SZ, PIPE_BYTES);

  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  if (!ctx || SSL_CTX_load_verify_locations(ctx, argv[4], NULL) != 1) { ERR_print_errors_fp(stderr); return 1; }
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  /* PIPE_FLOOR_READ_AHEAD=BYTES sets the read buffer (0: no read_ahead, one record per read). */
  const char *ra = getenv("PIPE_FLOOR_READ_AHEAD");
  long ra_bytes = ra ? atol(ra) : READ_AHEAD_BYTES;
  if (ra_bytes > 0) {
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_default_read_buffer_len(ctx, (size_t)ra_bytes);
  }

  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)atoi(argv[1]));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) { perror("connect"); return 1; }
  SSL *ssl = SSL_new(ctx);
  SSL_set_fd(ssl, s);
  SSL_set_tlsext_host_name(ssl, "localhost");
  SSL_set1_host(ssl, "localhost");
  if (SSL_connect(ssl) != 1) { ERR_print_errors_fp(stderr); return 1; }

  char *buf = malloc(BUF_BYTES);
  if (!buf) return 1;
  memset(buf, 0, BUF_BYTES); /* touched once before the clock, as a reused slab is */

  struct rusage r0, r1;
  struct timespec t0, t1;
  getrusage(RUSAGE_SELF, &r0);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  long long got = 0;
  size_t held = 0;
  while (got < total) {
    size_t n = 0;
    if (SSL_read_ex(ssl, buf + held, BUF_BYTES - held, &n) != 1) break;
    held += n;
    got += (long long)n;
    if (held >= PIPE_BYTES || got >= total) {
      if (write_all(out, buf, held) != 0) return 1;
      held = 0;
    }
  }
  if (held && write_all(out, buf, held) != 0) return 1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  getrusage(RUSAGE_SELF, &r1);
  close(out);
  printf("{\"bytes\":%lld,\"seconds\":%.6f,\"user\":%.6f,\"sys\":%.6f,\"cipher\":\"%s\"}\n", got,
         (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
         secs(r1.ru_utime) - secs(r0.ru_utime), secs(r1.ru_stime) - secs(r0.ru_stime),
         SSL_get_cipher_name(ssl));
  return got == total ? 0 : 1;
}
