/*
 * A small file read whole from the disk tier, in C (src/tier_small.c): what
 * src/cache/disk-cache.ts openSmall() does, for OPENs answered in libfuse's worker thread.
 */
#ifndef SLUICE_TIER_H
#define SLUICE_TIER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <node_api.h>

/*
 * Fills out[0..size) with the verified bytes of the one-block object whose cache file is
 * `name` (the 32 bytes of its sha256 name) under `objects_dir`, and makes it recent (touches
 * its sidecar). 0 on success; a negative errno, or -EBADMSG for any check that failed
 * (header, entry length, checksum, short file). Never changes the cache files otherwise:
 * on any failure the caller leaves the file to src/cache/disk-cache.ts, which owns repairs.
 */
int sluice_tier_read_small(const char *objects_dir, const uint8_t name[32], uint32_t block_size, uint64_t size, char *out);

/*
 * The same checks for a file of any size, to pass through (fuse_init.c): every block's entry
 * and every byte read and verified (which also brings the file into the page cache), then
 * the data file's descriptor (O_RDONLY) returned open, or a negative errno as above. With
 * `before`, the data file's fstat taken before its bytes were read (so a later fstat that
 * differs in size, mtime or ctime shows a write since). `one_thread`: checked on the calling
 * thread alone (a check ahead, beside a reader), else on several for a large file.
 */
int sluice_tier_open_verified(const char *objects_dir, const uint8_t name[32], uint32_t block_size, uint64_t size, struct stat *before, int one_thread);

/* CRC32C (Castagnoli) of buf[0..n), as @node-rs/crc32's crc32c(buf) computes it. */
uint32_t sluice_crc32c(const void *buf, size_t n);

/* Registers tierCrc32c and tierReadSmall (for tests) on the addon's exports. */
napi_status sluice_tier_init(napi_env env, napi_value exports);

#endif
