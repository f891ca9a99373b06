/*
 * sluice_fifo: the small pure-C API behind sluice's Pipe mode, with no Node.js
 * types, so it can be tested and reused on its own. binding.c wraps it for N-API.
 *
 * Every function returns a value >= 0 on success and -errno on failure; none
 * touches the global errno of the caller's thread after returning.
 */
#ifndef SLUICE_FIFO_H
#define SLUICE_FIFO_H

#ifdef __cplusplus
extern "C" {
#endif

/* Create a FIFO (named pipe) at `path` with permission bits `mode` (masked by the umask). 0 or -errno. */
int sluice_mkfifo(const char *path, unsigned int mode);

/*
 * Ask the kernel for a pipe buffer of `bytes` on the pipe or FIFO open as `fd`
 * (Linux F_SETPIPE_SZ). Returns the size the kernel actually granted (it rounds
 * up to a power-of-two number of pages), or -errno: -EPERM above
 * /proc/sys/fs/pipe-max-size for an unprivileged process, -EBUSY when the pipe
 * holds more data than the new size, -ENOTSUP where the platform has no such call.
 */
int sluice_set_pipe_size(int fd, int bytes);

/* The current pipe buffer size of `fd` (Linux F_GETPIPE_SZ), or -errno. */
int sluice_get_pipe_size(int fd);

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_FIFO_H */
