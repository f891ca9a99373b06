/*
 * FUSE mounts served from an already-open /dev/fuse descriptor (see src/fuse_fd.c).
 * Both functions are plain C, no Node types.
 */
#ifndef SLUICE_FUSE_FD_H
#define SLUICE_FUSE_FD_H

#include <stddef.h>
#include <stdint.h>

/* N for "/dev/fd/N" (decimal digits only), or -1 for any other string. */
int sluice_parse_fuse_fd_path(const char *mountpoint);

/* 0 when fd is an open /dev/fuse descriptor; -EBADF when it is not open, -ENODEV when it is something else. */
int sluice_check_fuse_fd(int fd);

/* libfuse.so.2's `name` at `version` (or any version), or NULL without libfuse (dlopen'ed once; src/libfuse.c). */
void *sluice_libfuse_sym(const char *name, const char *version);

/* Larger FUSE reads (src/fuse_init.c). */
struct fuse_chan;
/* max_pages for the INIT replies of mounts made from now on; 0 leaves libfuse's reply alone. */
void sluice_fuse_set_max_pages(unsigned pages);
/* The channel `ch`, or one wrapping its descriptor that patches the INIT reply (see fuse_init.c). */
struct fuse_chan *sluice_fuse_wrap_chan(struct fuse_chan *ch);
/* max_pages the last INIT reply set (0: left alone), and the protocol minor that kernel offered. */
unsigned sluice_fuse_last_max_pages(void);
unsigned sluice_fuse_last_kernel_minor(void);

/* FUSE passthrough (src/fuse_init.c): whether INIT replies from now on ask for it, and whether the last one did. */
void sluice_fuse_set_passthrough(int on);
unsigned sluice_fuse_last_passthrough(void);
/* --direct-io (src/fuse_init.c "Direct I/O"): whether mounts made from now on answer OPEN with FOPEN_DIRECT_IO; whether the last INIT reply allowed mmap of such files. */
void sluice_fuse_set_direct_io(int on);
unsigned sluice_fuse_last_direct_io_mmap(void);
/* In a libfuse worker answering a request: 1 when its mount negotiated passthrough. */
int sluice_fuse_passthrough_ok(void);
/* Registers `fd` as a backing file with this thread's mount: its backing id (> 0) or a negative errno. */
int sluice_fuse_backing_open(int fd);
/* Drops a backing id of this thread's mount (open files keep their own reference). */
int sluice_fuse_backing_close(int id);
/* The OPEN this thread is answering gets FOPEN_PASSTHROUGH with backing id `id` in its reply. */
void sluice_fuse_reply_backing(int id);
/*
 * Replies from lent memory (src/fuse_init.c "Replies from lent memory"): 1 when the request
 * this thread is answering is a READ received through a channel of ours, so its reply will go
 * through our send().
 */
int sluice_fuse_reply_can_hold(void);
/*
 * The reply to that READ carries the n bytes at `mem`, which stay valid until release(arg) is
 * called: our send() writes them straight from there, then sets *slot (the reply buffer's mem
 * field, which libfuse would free()) to NULL and calls release(arg). Call only when
 * sluice_fuse_reply_can_hold() said 1, and only with n > 0.
 */
void sluice_fuse_reply_hold(void **slot, const void *mem, size_t n, void (*release)(void *), void *arg);
/* The node id of the request this thread is answering (0 outside a request). */
uint64_t sluice_fuse_request_nodeid(void);
/* A descriptor of this thread's /dev/fuse connection, the caller's to close, or -1 outside a request. */
int sluice_fuse_dup_dev(void);
/* Tells the kernel to drop the page cache of node `nodeid` (FUSE_NOTIFY_INVAL_INODE) on connection `dev`: 0 or -errno. */
int sluice_fuse_inval_inode(int dev, uint64_t nodeid);

#endif
