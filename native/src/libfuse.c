/*
 * The one place the addon opens libfuse.so.2. libfuse is opened at run time (dlopen), never
 * linked, so the addon still loads on a host without libfuse (Pipe mode needs none); every C
 * file that calls into libfuse (fuse_fd.c, fuse_init.c, fuse_memread.c) looks its functions
 * up here, at the symbol version fuse-native links (FUSE_2.x), so that a libfuse with newer
 * versions of a symbol still hands back the one whose struct layouts this code assumes.
 *
 * Invariant: the handle is opened once per process and never closed (RTLD_LOCAL: libfuse's
 * symbols do not enter the global scope through us; fuse-native links its own reference).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

#include "sluice_fuse_fd.h"

/* libfuse.so.2, opened once; NULL when it is not installed. */
static void *libfuse(void) {
  static void *handle;
  if (handle == NULL) handle = dlopen("libfuse.so.2", RTLD_NOW | RTLD_LOCAL);
  return handle;
}

void *sluice_libfuse_sym(const char *name, const char *version) {
  void *h = libfuse();
  if (h == NULL) return NULL;
  void *sym = dlvsym(h, name, version);
  return sym != NULL ? sym : dlsym(h, name);
}
