/*
 * Reads, and getattrs of listed paths, answered in libfuse's worker thread from what
 * JavaScript gave it (src/fuse_memread.c; getattrs in src/fuse_attrs.c, opens in
 * src/fuse_open.c, the N-API functions in src/fuse_memread_napi.c).
 * The C functions take the mount's fuse-native thread buffer (`thread`) as its name.
 */
#ifndef SLUICE_MEMREAD_H
#define SLUICE_MEMREAD_H

#include <stddef.h>
#include <stdint.h>
#include <node_api.h>

/* Serve fh's reads from bytes[0..length): 0, -ENODEV (no table for this mount) or -EBUSY (slot taken). */
int sluice_memread_add(const void *thread, uint64_t fh, const char *bytes, size_t length);
/* Removes fh's entry; 1 and its counts (reads, bytes served, bytes asked) when it was there, else 0. */
int sluice_memread_remove(const void *thread, uint64_t fh, uint64_t counts[3]);
/* Up to `max` records (fh, reads, served, asked) into out: released handles, or (clear) live entries, removed. */
size_t sluice_memread_drain(const void *thread, uint64_t *out, size_t max, int clear);
/* 1 when the mount's reads and releases pass through fuse_memread.c. */
int sluice_memread_mounted(const void *thread);

/*
 * Installs the mount's listing for getattr (rows of 5 doubles: path length, mode, nlink, size, mtime ms): 0 or a
 * negative errno. With `names` (32 bytes per row, zero for none), small files are opened from the disk tier's
 * objects folder `tier_dir` (block size tier_block) in libfuse's thread.
 */
int sluice_attrs_set(const void *thread, const char *paths, size_t paths_len, const double *rows, size_t n, uint32_t uid, uint32_t gid, uint32_t blksize,
                     const char *tier_dir, uint32_t tier_block, const uint8_t *names);
/* Counts of handles opened in C since the last call (12; see own_counts in src/memread.h). */
void sluice_own_take(const void *thread, uint64_t out[12]);
/* getattrs answered from the listing since the last call; with `clear`, the listing is dropped too. */
uint64_t sluice_attrs_take(const void *thread, int clear);
/* Marks a row of the listing (with names) as being fetched into memory by JavaScript, so OPENs of it go to JavaScript for a while: 1, or 0 (no such row). */
int sluice_tier_hot(const void *thread, uint32_t row);

/* The lend table of the mount whose fuse-native thread buffer is `thread` (fuse_lend.c), or NULL. */
struct sluice_lends *sluice_memread_lends(const void *thread);

/* Registers memReadAdd/Remove/Drain/Clear/Mounted and attrTableSet/Take and tierHotMark on the addon's exports. */
napi_status sluice_memread_init(napi_env env, napi_value exports);

#endif
