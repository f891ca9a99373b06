/*
 * Lent blocks: a sequential handle's reads answered in libfuse's worker thread from block
 * cache buffers JavaScript lends it (src/fuse_lend.c). A table per mount, held by
 * src/fuse_memread.c's struct mount and consulted by its read hook first.
 */
#ifndef SLUICE_LEND_H
#define SLUICE_LEND_H

#include <stddef.h>
#include <stdint.h>
#include <node_api.h>

struct sluice_lends;

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

/* The table of the mount whose fuse-native thread buffer is `thread` (src/fuse_memread.c), or NULL. */
struct sluice_lends *sluice_memread_lends(const void *thread);

/* Registers lendSet and lendTake on the addon's exports. */
napi_status sluice_lend_init(napi_env env, napi_value exports);

#endif
