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

/* The table of the mount whose fuse-native thread buffer is `thread` (src/fuse_memread.c), or NULL. */
struct sluice_lends *sluice_memread_lends(const void *thread);

/* Registers lendSet and lendTake on the addon's exports. */
napi_status sluice_lend_init(napi_env env, napi_value exports);

#endif
