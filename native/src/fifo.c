/*
 * Linux implementation of sluice_fifo.h: thin wrappers over mkfifo(3) and
 * fcntl(2) F_SETPIPE_SZ / F_GETPIPE_SZ that report errors as -errno.
 * On platforms without F_SETPIPE_SZ the pipe-size calls return -ENOTSUP.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* F_SETPIPE_SZ and F_GETPIPE_SZ are Linux extensions */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "sluice_fifo.h"

int sluice_mkfifo(const char *path, unsigned int mode) {
  if (path == NULL) return -EINVAL;
  if (mkfifo(path, (mode_t)mode) == 0) return 0;
  return -errno;
}

int sluice_set_pipe_size(int fd, int bytes) {
#ifdef F_SETPIPE_SZ
  if (fd < 0 || bytes <= 0) return -EINVAL;
  int granted = fcntl(fd, F_SETPIPE_SZ, bytes);
  return granted < 0 ? -errno : granted;
#else
  (void)fd;
  (void)bytes;
  return -ENOTSUP;
#endif
}

int sluice_get_pipe_size(int fd) {
#ifdef F_GETPIPE_SZ
  if (fd < 0) return -EINVAL;
  int size = fcntl(fd, F_GETPIPE_SZ);
  return size < 0 ? -errno : size;
#else
  (void)fd;
  return -ENOTSUP;
#endif
}
