/*
 * The Node-API helpers every part of the addon uses: errors thrown in the one shape
 * lib/addon/addon-errors.ts types (`syscall` and `errno` for a failed system call, else a `code`),
 * and arguments read with a clear error when some are missing.
 */
#ifndef FASTIFY_TRITON_SHM_NAPI_UTIL_H
#define FASTIFY_TRITON_SHM_NAPI_UTIL_H

#define NAPI_VERSION 8
#include <node_api.h>

/* Throws an Error with `message` and `code` (NULL: none), or with `syscall` and `errno` (syscall
 * NULL: none). Returns NULL, for `return addon_throw(...)`. */
napi_value addon_throw(napi_env env, const char *code, const char *syscall, int error_number, const char *message);

/* Throws for a failed system call. */
napi_value addon_throw_errno(napi_env env, const char *syscall, int error_number);

/* Throws ERR_INVALID_ARG with `message`. */
napi_value addon_throw_invalid(napi_env env, const char *message);

/* Reads `expected` arguments, and up to `optional` more (undefined when not given), into `args`
 * (room for expected + optional). Returns 0 with ERR_INVALID_ARG thrown when some are missing. */
int addon_get_args(napi_env env, napi_callback_info info, size_t expected, size_t optional, napi_value *args);

#endif
