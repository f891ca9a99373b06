/*
 * FUSE mounts served from an already-open /dev/fuse descriptor (see src/fuse_fd.c).
 * Both functions are plain C, no Node types.
 */
#ifndef SLUICE_FUSE_FD_H
#define SLUICE_FUSE_FD_H

/* N for "/dev/fd/N" (decimal digits only), or -1 for any other string. */
int sluice_parse_fuse_fd_path(const char *mountpoint);

/* 0 when fd is an open /dev/fuse descriptor; -EBADF when it is not open, -ENODEV when it is something else. */
int sluice_check_fuse_fd(int fd);

#endif
