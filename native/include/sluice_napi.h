/*
 * Argument checks and replies shared by the addon's N-API functions (src/fuse_memread_napi.c,
 * src/fuse_lend.c): static inline, so each file keeps its own copy and no symbol is exported.
 */
#ifndef SLUICE_NAPI_H
#define SLUICE_NAPI_H

#include <stdbool.h>
#include <stddef.h>
#include <node_api.h>

/* The Buffer `v`'s bytes and length; 0 when `v` is not a Buffer. */
static inline int sluice_buffer_arg(napi_env env, napi_value v, void **data, size_t *length) {
  bool is;
  return napi_is_buffer(env, v, &is) == napi_ok && is && napi_get_buffer_info(env, v, data, length) == napi_ok;
}

/* The call's one argument, a Buffer: its bytes and length; 0 when the call has none or it is not a Buffer. */
static inline int sluice_only_buffer_arg(napi_env env, napi_callback_info info, void **data, size_t *length) {
  size_t argc = 1;
  napi_value argv[1];
  return napi_get_cb_info(env, info, &argc, argv, NULL, NULL) == napi_ok && argc >= 1 && sluice_buffer_arg(env, argv[0], data, length);
}

/* The Float64Array `v` as doubles (its length in *count); 0 when it is not one. */
static inline int sluice_f64_arg(napi_env env, napi_value v, double **data, size_t *count) {
  bool is;
  napi_typedarray_type type;
  napi_value ab;
  size_t off;
  if (napi_is_typedarray(env, v, &is) != napi_ok || !is) return 0;
  if (napi_get_typedarray_info(env, v, &type, count, (void **)data, &ab, &off) != napi_ok) return 0;
  return type == napi_float64_array;
}

/* Throws a TypeError naming the function's signature; returns NULL for the caller to return. */
static inline napi_value sluice_bad_args(napi_env env, const char *usage) {
  napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", usage);
  return NULL;
}

static inline napi_value sluice_boolean(napi_env env, int v) {
  napi_value r;
  napi_get_boolean(env, v != 0, &r);
  return r;
}

#endif
