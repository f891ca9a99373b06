/*
 * Lent blocks: a sequential handle's reads answered in libfuse's worker thread from block
 * cache buffers JavaScript lends it (src/fuse_lend.c). A table per mount, held by
 * src/fuse_memread.c's struct mount and consulted by its read hook first. Plain C but for
 * sluice_lend_init: the lend functions' JavaScript face is in src/fuse_memread_napi.c, which
 * finds a mount's table.
 */
#ifndef SLUICE_LEND_H
#define SLUICE_LEND_H

#include <stddef.h>
#include <stdint.h>
#include <node_api.h>

struct sluice_lends;

/*
 * Ranges per lend: 16. Blocks of one GET are slices of one buffer and lent as one range, so
 * 16 ranges cover 16 parts (128 MiB at the default 8 MiB part size, twice --max-prefetch's
 * default); blocks that each have a buffer of their own (no pool) are lent 16 at a time.
 */
#define SLUICE_LEND_RANGES 16

/* A new, empty table (NULL when out of memory: the mount then simply has none). */
struct sluice_lends *sluice_lends_new(void);
/* Forgets every lend (a new mount of the same fuse-native thread: no request of the old one is in flight). */
void sluice_lends_reset(struct sluice_lends *t);
/*
 * A read of fh answered from its lend: the bytes copied into buf (0 at or past the end of the
 * file), or -1 when fh has no lend or the read is not wholly inside it (the caller passes it on).
 */
int sluice_lends_read(struct sluice_lends *t, uint64_t fh, char *buf, size_t size, int64_t offset);
/*
 * The same read without the copy, when it lies inside one lent buffer: its byte count (> 0)
 * with *at set to its bytes and this lend's read lock held (the bytes stay valid until
 * sluice_lends_unlock(*hold); lendTake waits for it); 0 at or past the end of the file
 * (nothing held); -1 when fh has no lend or the read is not wholly inside it; -2 when it is
 * inside the lend but spans two of its buffers (sluice_lends_read copies those).
 */
int sluice_lends_view(struct sluice_lends *t, uint64_t fh, size_t size, int64_t offset, const char **at, void **hold);
void sluice_lends_unlock(void *hold);

/*
 * Views (fuse_lend.c "Views"): a read's reply from the bytes JavaScript names, without a copy.
 * SLUICE_VIEW_CODE is what a JavaScript read that did so replies instead of a byte count: below
 * every errno, so no other answer can be taken for it.
 */
#define SLUICE_VIEW_CODE (-0x5eed)
/* Before handing `mem` (size bytes) to JavaScript: the invitation when `invite`, else its bytes cleared. */
void sluice_view_invite(char *mem, size_t size, int invite);
/* After a reply of SLUICE_VIEW_CODE: the bytes and the note to release once they were sent (0), or -1 when mem holds no view. */
int sluice_view_take(const char *mem, size_t size, const char **at, size_t *n, void **note);
/* Ends a view's hold (after its reply's writev): JavaScript's viewsDone reports its id. */
void sluice_view_release(void *note);

/*
 * Sets fh's lend: reads inside [start, stop) answered from the n parts (contiguous in the file
 * from start; stop is cut to their bytes and to `size`): 1, or 0 when the slot is held, n is 0
 * or above SLUICE_LEND_RANGES, or nothing is left to lend. JavaScript's lendSet
 * (src/fuse_memread_napi.c).
 */
int sluice_lends_set(struct sluice_lends *t, uint64_t fh, uint64_t start, uint64_t stop, uint64_t size, uint32_t n, const uint64_t *len, const char *const *bytes);
/*
 * fh's counts (reads, bytes served, bytes asked, furthest offset served) into out, then zeroed
 * (not the offset); with `end` the lend ends (no copy from its parts after this returns).
 * 1, or 0 when fh has no lend. JavaScript's lendTake / lendCounts.
 */
int sluice_lends_counts(struct sluice_lends *t, uint64_t fh, int end, uint64_t out[4]);

/* Registers viewInvited, viewReply, viewsDone and viewCode on the addon's exports. */
napi_status sluice_lend_init(napi_env env, napi_value exports);

#endif
