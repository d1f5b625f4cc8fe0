/*
 * POSIX shared memory for Node, over Node-API only (ABI-stable across Node versions).
 *
 *   map(key, offset, byteSize) -> ArrayBuffer over exactly [offset, offset + byteSize) of the object
 *   unmap(arrayBuffer)         -> true if it unmapped; detaches first so every view reads as empty
 *   intact(arrayBuffer)        -> false if the object shrank below the mapped range since (its owner
 *                                 truncated it), or a page past its end was touched (fault-guard.c)
 *   create(key, byteSize)      -> makes a new object (O_CREAT | O_EXCL, mode 0600) of that size
 *   unlink(key)                -> removes an object's name
 *
 * Errors thrown here carry `syscall` and `errno` (the C value), or a `code` of our own for checks
 * that are not system calls; lib/posix-shm.ts turns them into typed errors.
 */
#define NAPI_VERSION 8
#include <node_api.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fault-guard.h"
#include "mapping.h"

/* Longest key accepted (bytes, without the terminating NUL); the kernel's NAME_MAX. */
#define KEY_MAX 255
/* Largest integer a JavaScript number holds exactly. */
#define SAFE_INTEGER_MAX 9007199254740991.0

static napi_value throw_error(napi_env env, const char *code, const char *syscall, int error_number,
                              const char *message) {
  napi_value text, error, value;
  napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &text);
  napi_create_error(env, NULL, text, &error);
  if (code != NULL) {
    napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &value);
    napi_set_named_property(env, error, "code", value);
  }
  if (syscall != NULL) {
    napi_create_string_utf8(env, syscall, NAPI_AUTO_LENGTH, &value);
    napi_set_named_property(env, error, "syscall", value);
    napi_create_int32(env, error_number, &value);
    napi_set_named_property(env, error, "errno", value);
  }
  napi_throw(env, error);
  return NULL;
}

static napi_value throw_errno(napi_env env, const char *syscall, int error_number) {
  return throw_error(env, NULL, syscall, error_number, "shared memory system call failed");
}

static napi_value throw_invalid(napi_env env, const char *message) {
  return throw_error(env, "ERR_INVALID_ARG", NULL, 0, message);
}

static int get_args(napi_env env, napi_callback_info info, size_t expected, napi_value *args) {
  size_t count = expected;
  if (napi_get_cb_info(env, info, &count, args, NULL, NULL) != napi_ok || count < expected) {
    throw_invalid(env, "missing arguments");
    return 0;
  }
  return 1;
}

/* Copies a key into `key`. Refuses keys that are too long or hold a NUL byte: C would cut them
 * short and open a different object than the one validated in JavaScript. The full UTF-8 length
 * is asked for first: a copy into a short buffer stops before a character that does not fit
 * whole, so the copied length alone can look acceptable for a key that is too long. */
static int get_key(napi_env env, napi_value value, char key[KEY_MAX + 2]) {
  size_t length = 0, copied = 0;
  if (napi_get_value_string_utf8(env, value, NULL, 0, &length) != napi_ok) {
    throw_invalid(env, "key must be a string");
    return 0;
  }
  if (length > KEY_MAX || napi_get_value_string_utf8(env, value, key, KEY_MAX + 2, &copied) != napi_ok ||
      copied != length || strlen(key) != length) {
    throw_invalid(env, "key is too long or holds a NUL byte");
    return 0;
  }
  return 1;
}

static int get_size(napi_env env, napi_value value, uint64_t *size) {
  double number = -1;
  napi_get_value_double(env, value, &number);
  if (!(number >= 0 && number <= SAFE_INTEGER_MAX && floor(number) == number)) {
    throw_invalid(env, "offset and byte size must be safe unsigned integers");
    return 0;
  }
  *size = (uint64_t)number;
  return 1;
}

/* Ends a live mapping: no longer guarded, unmapped, its descriptor closed. */
static void release_mapping(mapping *map) {
  fault_guard_remove(map);
  map->mapped = 0;
  munmap(map->base, map->length);
  close(map->fd);
}

/* The ArrayBuffer's finalizer owns each mapping struct: it frees it, releasing it if still live. */
static void finalize_mapping(napi_env env, void *data, void *hint) {
  (void)env;
  (void)data;
  mapping *map = hint;
  if (map->mapped) release_mapping(map);
  free(map);
}

static napi_value fail_closing(napi_env env, int fd, const char *code, const char *syscall, int error_number) {
  close(fd);
  if (code != NULL) return throw_error(env, code, NULL, 0, code);
  return throw_errno(env, syscall, error_number);
}

/* Maps [offset, offset + byte_size) of an open object, taking ownership of `fd` (closed on
 * failure, kept with the mapping on success). mmap needs a page-aligned file offset, so the
 * mapping starts at the page at or below `offset` and the ArrayBuffer points into it. */
static napi_value map_open_object(napi_env env, int fd, uint64_t offset, uint64_t byte_size) {
  struct stat info;
  if (fstat(fd, &info) != 0) return fail_closing(env, fd, NULL, "fstat", errno);
  if (!S_ISREG(info.st_mode)) return fail_closing(env, fd, "ERR_SHM_NOT_REGULAR", NULL, 0);
  uint64_t object_size = (uint64_t)info.st_size;
  if (byte_size == 0 || offset > object_size || byte_size > object_size - offset) {
    return fail_closing(env, fd, "ERR_SHM_OUT_OF_BOUNDS", NULL, 0);
  }
  uint64_t page_offset = offset % (uint64_t)sysconf(_SC_PAGESIZE);
  mapping *map = calloc(1, sizeof(mapping));
  if (map == NULL) return fail_closing(env, fd, NULL, "malloc", ENOMEM);
  map->length = (size_t)(page_offset + byte_size);
  map->base = mmap(NULL, map->length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)(offset - page_offset));
  if (map->base == MAP_FAILED) {
    free(map);
    return fail_closing(env, fd, NULL, "mmap", errno);
  }
  map->fd = fd;
  map->end = offset + byte_size;
  int guard_error = fault_guard_add(map);
  if (guard_error != 0) {
    munmap(map->base, map->length);
    free(map);
    return fail_closing(env, fd, NULL, "sigaction", guard_error);
  }
  map->mapped = 1;
  napi_value buffer;
  if (napi_create_external_arraybuffer(env, (char *)map->base + page_offset, (size_t)byte_size,
                                       finalize_mapping, map, &buffer) != napi_ok) {
    release_mapping(map);
    free(map);
    return throw_errno(env, "napi_create_external_arraybuffer", ENOMEM);
  }
  /* From here the finalizer owns `map`; unmap() and intact() find it through the wrap. */
  if (napi_wrap(env, buffer, map, NULL, NULL, NULL) != napi_ok) {
    return throw_errno(env, "napi_wrap", ENOMEM);
  }
  return buffer;
}

static napi_value map_object(napi_env env, napi_callback_info info) {
  napi_value args[3];
  char key[KEY_MAX + 2];
  uint64_t offset, byte_size;
  if (!get_args(env, info, 3, args) || !get_key(env, args[0], key) ||
      !get_size(env, args[1], &offset) || !get_size(env, args[2], &byte_size)) {
    return NULL;
  }
  int fd = shm_open(key, O_RDWR, 0);
  if (fd < 0) return throw_errno(env, "shm_open", errno);
  return map_open_object(env, fd, offset, byte_size);
}

/* The live mapping behind a buffer from map(), or NULL if it was unmapped (detached) already.
 * A detached buffer's mapping struct may be freed: it is never touched. */
static int live_mapping(napi_env env, napi_value buffer, mapping **map) {
  bool is_buffer = false, detached = false;
  *map = NULL;
  napi_is_arraybuffer(env, buffer, &is_buffer);
  if (!is_buffer) {
    throw_invalid(env, "expected an ArrayBuffer returned by map()");
    return 0;
  }
  napi_is_detached_arraybuffer(env, buffer, &detached);
  if (detached) return 1;
  if (napi_unwrap(env, buffer, (void **)map) != napi_ok || *map == NULL) {
    throw_invalid(env, "expected an ArrayBuffer returned by map()");
    return 0;
  }
  return 1;
}

static napi_value boolean(napi_env env, bool value) {
  napi_value result;
  napi_get_boolean(env, value, &result);
  return result;
}

static napi_value unmap_object(napi_env env, napi_callback_info info) {
  napi_value args[1];
  mapping *map;
  if (!get_args(env, info, 1, args) || !live_mapping(env, args[0], &map)) return NULL;
  if (map == NULL) return boolean(env, false);
  /* Detach before munmap: afterwards every view over the buffer has length 0 and cannot fault. */
  if (napi_detach_arraybuffer(env, args[0]) != napi_ok) return throw_invalid(env, "the buffer cannot be detached");
  release_mapping(map);
  return boolean(env, true);
}

static napi_value intact_object(napi_env env, napi_callback_info info) {
  napi_value args[1];
  mapping *map;
  struct stat object;
  if (!get_args(env, info, 1, args) || !live_mapping(env, args[0], &map)) return NULL;
  if (map == NULL || map->poisoned) return boolean(env, false);
  return boolean(env, fstat(map->fd, &object) == 0 && (uint64_t)object.st_size >= map->end);
}

static napi_value create_object(napi_env env, napi_callback_info info) {
  napi_value args[2];
  char key[KEY_MAX + 2];
  uint64_t byte_size;
  if (!get_args(env, info, 2, args) || !get_key(env, args[0], key) ||
      !get_size(env, args[1], &byte_size)) {
    return NULL;
  }
  int fd = shm_open(key, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return throw_errno(env, "shm_open", errno);
  if (ftruncate(fd, (off_t)byte_size) != 0) {
    int error_number = errno;
    shm_unlink(key);
    close(fd);
    return throw_errno(env, "ftruncate", error_number);
  }
  close(fd);
  return NULL;
}

static napi_value unlink_object(napi_env env, napi_callback_info info) {
  napi_value args[1];
  char key[KEY_MAX + 2];
  if (!get_args(env, info, 1, args) || !get_key(env, args[0], key)) return NULL;
  if (shm_unlink(key) != 0) return throw_errno(env, "shm_unlink", errno);
  return NULL;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor functions[] = {
      {"map", NULL, map_object, NULL, NULL, NULL, napi_enumerable, NULL},
      {"unmap", NULL, unmap_object, NULL, NULL, NULL, napi_enumerable, NULL},
      {"intact", NULL, intact_object, NULL, NULL, NULL, napi_enumerable, NULL},
      {"create", NULL, create_object, NULL, NULL, NULL, napi_enumerable, NULL},
      {"unlink", NULL, unlink_object, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, sizeof(functions) / sizeof(functions[0]), functions);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
