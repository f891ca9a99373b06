/*
 * The memread layer's registry of mounts: one struct mount per fuse-native thread that
 * mounted through our fuse_new() (fuse_memread.c), found by a request from libfuse's
 * fuse_get_context()->fuse (mount_of_request) or by JavaScript from its thread buffer
 * (mount_of_thread). It sits below the layer's other files (fuse_attrs.c, fuse_open.c,
 * fuse_memread.c, fuse_memread_napi.c) and calls none of them.
 *
 * Algorithm: a fixed array of MAX_MOUNTS pointers, appended to under mounts_lock and never
 * shrunk (a thread's mount is reused by its next mount), so readers scan it without a lock:
 * mount_count is published with release order after its slot is filled.
 *
 * Invariants: a struct mount, once published, is never freed (requests and JavaScript may
 * hold it at any time); a mount's fuse address is cleared before libfuse frees it ("Ended
 * mounts" below), so a request never finds a mount by an address another mount now has.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "memread.h"

uint64_t own_bytes; /* atomic; see memread.h */
struct mount *mounts[MAX_MOUNTS];
int mount_count; /* published with release order after the slot is filled */
pthread_mutex_t mounts_lock = PTHREAD_MUTEX_INITIALIZER;
struct fuse_context *(*get_context)(void);

struct mount *mount_of_request(void) {
  struct fuse_context *ctx = get_context != NULL ? get_context() : NULL;
  if (ctx == NULL) return NULL;
  int n = __atomic_load_n(&mount_count, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++) {
    struct mount *m = mounts[i];
    if (__atomic_load_n(&m->fuse, __ATOMIC_ACQUIRE) == ctx->fuse) return m;
  }
  return NULL;
}

/* JavaScript's calls name a mount by its fuse-native thread buffer: found also after its loop ended (an unmount still takes its counts). */
struct mount *mount_of_thread(const void *user_data) {
  int n = __atomic_load_n(&mount_count, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++) {
    if (mounts[i]->user_data == user_data && __atomic_load_n(&mounts[i]->wrapped, __ATOMIC_ACQUIRE)) return mounts[i];
  }
  return NULL;
}

/*
 * Ended mounts. Requests find their mount by libfuse's struct fuse (mount_of_request), an
 * address that fuse_destroy() frees when a mount's loop ends (fuse-native's thread, after
 * the unmount). A later mount of another fuse-native thread may get a struct fuse at that
 * very address, and its requests would then find the ended mount's table first: its
 * listing (dropped at unmount, so every getattr and open went to JavaScript: tests saw
 * "C counted no opens"), or, where the ended mount's listing was still installed, another
 * prefix's attributes and cache files under the same paths. So fuse_destroy() (wrapped
 * below) forgets the address before libfuse frees it, and fuse_new() forgets it in every
 * other table once libfuse hands it out again (the same, should a destroy not pass here).
 * Called with mounts_lock held.
 */
void forget_fuse_locked(const struct fuse *f, const struct mount *keep) {
  if (f == NULL) return;
  for (int i = 0; i < mount_count; i++) {
    if (mounts[i] != keep && __atomic_load_n(&mounts[i]->fuse, __ATOMIC_ACQUIRE) == f) __atomic_store_n(&mounts[i]->fuse, NULL, __ATOMIC_RELEASE);
  }
}

/* Mounts whose struct fuse is live (not yet destroyed): for tests (memReadLiveMounts). */
int live_mounts(void) {
  pthread_mutex_lock(&mounts_lock);
  int live = 0;
  for (int i = 0; i < mount_count; i++) live += __atomic_load_n(&mounts[i]->fuse, __ATOMIC_ACQUIRE) != NULL;
  pthread_mutex_unlock(&mounts_lock);
  return live;
}
