/*
 * Serving a FUSE mount that someone else made, from its /dev/fuse descriptor, with
 * fuse-native and libfuse 2. The mount point is given as "/dev/fd/N" (libfuse 3.3+
 * and mount-s3 spell it this way): a CSI driver or a privileged init helper opened
 * /dev/fuse, called mount(2) with "fd=N", and handed descriptor N to sluice, which
 * needs no CAP_SYS_ADMIN and no /dev/fuse of its own.
 *
 * libfuse 2 cannot do this: fuse_mount() always opens /dev/fuse and mounts (directly as
 * root, or through fusermount), and a "/dev/fd/N" mount point is a character device, not
 * a folder. But everything after the mount works on any descriptor: fuse_mount() itself
 * only wraps the new descriptor in a channel (fuse_kern_chan_new), and fuse-native hands
 * that channel to fuse_new() and its loop. So this file defines fuse_mount() and
 * fuse_unmount() with libfuse's signatures. When the addon is loaded with RTLD_GLOBAL
 * before fuse-native (src/fuse/native.ts does that for a /dev/fd/N mount point), the
 * dynamic linker resolves fuse-native's calls to these definitions (the global scope is
 * searched before fuse-native's own libfuse.so.2 dependency), and:
 *  - fuse_mount("/dev/fd/N", args): checks that N is an open /dev/fuse descriptor and
 *    returns a channel around it: no mount(2). `args` must hold only libfuse options
 *    (fuse_new parses them); mount options belong to whoever mounted.
 *  - fuse_unmount("/dev/fd/N", ch): destroys the channel (closing N) and unmounts
 *    nothing: the mount belongs to whoever made it, and they unmount it.
 *  - both wrap the channel for larger reads when asked to (src/fuse_init.c).
 *  - any other mount point: both forward to libfuse's own functions (version FUSE_2.6,
 *    the one fuse-native links), looked up in libfuse.so.2 with dlvsym (src/libfuse.c).
 * libfuse is opened at run time (dlopen), never linked, so the addon still loads on a
 * host without libfuse (Pipe mode needs none).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "sluice_fuse_fd.h"

/* libfuse 2 types, opaque here (fuse_args has this layout in every libfuse 2 release). */
struct fuse_chan;
struct fuse_args {
  int argc;
  char **argv;
  int allocated;
};

/* /dev/fuse is the misc device 10:229 on every Linux. */
#define FUSE_DEV_MAJOR 10
#define FUSE_DEV_MINOR 229

static const char FD_PREFIX[] = "/dev/fd/";

int sluice_parse_fuse_fd_path(const char *mountpoint) {
  if (mountpoint == NULL || strncmp(mountpoint, FD_PREFIX, sizeof FD_PREFIX - 1) != 0) return -1;
  const char *digits = mountpoint + sizeof FD_PREFIX - 1;
  if (*digits == '\0') return -1;
  long fd = 0;
  for (const char *p = digits; *p; p++) {
    if (*p < '0' || *p > '9') return -1;
    fd = fd * 10 + (*p - '0');
    if (fd > 0x7fffffffL) return -1;
  }
  return (int) fd;
}

int sluice_check_fuse_fd(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return -errno;
  if (!S_ISCHR(st.st_mode) || major(st.st_rdev) != FUSE_DEV_MAJOR || minor(st.st_rdev) != FUSE_DEV_MINOR) return -ENODEV;
  return 0;
}

typedef struct fuse_chan *(*fuse_mount_fn)(const char *, struct fuse_args *);
typedef void (*fuse_unmount_fn)(const char *, struct fuse_chan *);
typedef struct fuse_chan *(*fuse_kern_chan_new_fn)(int);
typedef void (*fuse_chan_destroy_fn)(struct fuse_chan *);

__attribute__((visibility("default")))
struct fuse_chan *fuse_mount(const char *mountpoint, struct fuse_args *args) {
  int fd = sluice_parse_fuse_fd_path(mountpoint);
  if (fd < 0) {
    fuse_mount_fn real = (fuse_mount_fn) sluice_libfuse_sym("fuse_mount", "FUSE_2.6");
    if (real == NULL) {
      fprintf(stderr, "sluice: libfuse.so.2 cannot be loaded: %s\n", dlerror());
      return NULL;
    }
    return sluice_fuse_wrap_chan(real(mountpoint, args));
  }
  int res = sluice_check_fuse_fd(fd);
  if (res != 0) {
    fprintf(stderr, "sluice: %s is not an open /dev/fuse descriptor (%s)\n", mountpoint, strerror(-res));
    return NULL;
  }
  fuse_kern_chan_new_fn chan_new = (fuse_kern_chan_new_fn) sluice_libfuse_sym("fuse_kern_chan_new", "FUSE_2.4");
  if (chan_new == NULL) {
    fprintf(stderr, "sluice: libfuse.so.2 has no fuse_kern_chan_new\n");
    return NULL;
  }
  return sluice_fuse_wrap_chan(chan_new(fd));
}

__attribute__((visibility("default")))
void fuse_unmount(const char *mountpoint, struct fuse_chan *ch) {
  if (sluice_parse_fuse_fd_path(mountpoint) < 0) {
    fuse_unmount_fn real = (fuse_unmount_fn) sluice_libfuse_sym("fuse_unmount", "FUSE_2.6");
    if (real != NULL) real(mountpoint, ch);
    return;
  }
  fuse_chan_destroy_fn destroy = (fuse_chan_destroy_fn) sluice_libfuse_sym("fuse_chan_destroy", "FUSE_2.4");
  if (ch != NULL && destroy != NULL) destroy(ch);
}
