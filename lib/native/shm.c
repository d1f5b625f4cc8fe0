/*
 * POSIX shared memory for Node, over Node-API only (ABI-stable across Node versions).
 *
 *   map(key, offset, byteSize)    -> a handle (an external value) to a mapping of
 *                                    [offset, offset + byteSize) of the object
 *   window(mapping, offset, size) -> an ArrayBuffer over [offset, offset + size) of that range. A
 *                                    region may be larger than one ArrayBuffer can be, so it is
 *                                    mapped once and seen through as many windows as its users need
 *   identity(mapping)             -> the mapped object as "<device>:<inode>"
 *   unmap(mapping or window)      -> true if it unmapped; detaches every window first, so every view
 *                                    reads as empty
 *   intact(mapping or window)     -> false if the object shrank below the mapped range since (its
 *                                    owner truncated it), or a page past its end was touched
 *                                    (fault-guard.c)
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
#include <stdio.h>
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

/* The mapping struct lives while its handle or any window does: the last to be collected frees it,
 * unmapping first if nobody did. */
static void drop_reference(mapping *map) {
  if (--map->references > 0) return;
  if (map->mapped) release_mapping(map);
  free(map);
}

static void finalize_handle(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  drop_reference(data);
}

/* An ArrayBuffer over part of a mapping. Each is weakly referenced from its mapping, so that
 * unmap can detach every one still alive before the pages go. */
typedef struct window {
  mapping *map;
  napi_ref buffer; /* weak: the wrap's own reference */
  struct window *next, *prev;
} window;

static void link_window(window *w) {
  w->next = w->map->windows;
  if (w->next != NULL) w->next->prev = w;
  w->map->windows = w;
}

static void unlink_window(window *w) {
  if (w->prev != NULL) w->prev->next = w->next;
  else w->map->windows = w->next;
  if (w->next != NULL) w->next->prev = w->prev;
}

/* A window struct holds one reference to its mapping. */
static void discard_window(window *w) {
  unlink_window(w);
  drop_reference(w->map);
  free(w);
}

/* The wrap's finalizer owns each window struct once its buffer exists. */
static void finalize_window(napi_env env, void *data, void *hint) {
  (void)hint;
  window *w = data;
  napi_delete_reference(env, w->buffer);
  discard_window(w);
}

static napi_value fail_closing(napi_env env, int fd, const char *code, const char *syscall, int error_number) {
  close(fd);
  if (code != NULL) return throw_error(env, code, NULL, 0, code);
  return throw_errno(env, syscall, error_number);
}

/* Maps [offset, offset + byte_size) of an open object, taking ownership of `fd` (closed on
 * failure, kept with the mapping on success). mmap needs a page-aligned file offset, so the
 * mapping starts at the page at or below `offset`. Returns the mapping's handle: an external
 * value, the cheapest thing Node-API can tie a finalizer to. Its bytes are reached through
 * windows, made when they are needed. */
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
  map->start = (char *)map->base + page_offset;
  map->byte_size = byte_size;
  map->end = offset + byte_size;
  map->device = (uint64_t)info.st_dev;
  map->inode = (uint64_t)info.st_ino;
  int guard_error = fault_guard_add(map);
  if (guard_error != 0) {
    munmap(map->base, map->length);
    free(map);
    return fail_closing(env, fd, NULL, "sigaction", guard_error);
  }
  map->mapped = 1;
  map->references = 1;
  napi_value handle;
  if (napi_create_external(env, map, finalize_handle, NULL, &handle) != napi_ok) {
    release_mapping(map);
    free(map);
    return throw_errno(env, "napi_create_external", ENOMEM);
  }
  return handle;
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

/* The mapping behind a handle or a window, or NULL for a window that was detached already (its
 * mapping may be freed: it is never touched). Any external value is taken for a handle: only
 * lib/posix-shm.ts calls this addon, and it passes no external but its own handles. */
static int mapping_of(napi_env env, napi_value value, mapping **map) {
  napi_valuetype type = napi_undefined;
  bool is_buffer = false, detached = false;
  void *wrapped = NULL;
  *map = NULL;
  napi_typeof(env, value, &type);
  if (type == napi_external) return napi_get_value_external(env, value, (void **)map) == napi_ok;
  napi_is_arraybuffer(env, value, &is_buffer);
  if (is_buffer) napi_is_detached_arraybuffer(env, value, &detached);
  if (detached) return 1;
  if (!is_buffer || napi_unwrap(env, value, &wrapped) != napi_ok || wrapped == NULL) {
    throw_invalid(env, "expected a mapping or a window returned by this addon");
    return 0;
  }
  *map = ((window *)wrapped)->map;
  return 1;
}

/* A new ArrayBuffer over [offset, offset + byte_size) of the region. The caller keeps byte_size
 * within the largest ArrayBuffer the running Node allows. One finalizer, the wrap's, ends the
 * window; the wrap's reference is the weak one unmap detaches it through. */
static napi_value new_window(napi_env env, mapping *map, uint64_t offset, uint64_t byte_size) {
  window *w = calloc(1, sizeof(window));
  if (w == NULL) return throw_errno(env, "malloc", ENOMEM);
  w->map = map;
  map->references++;
  link_window(w);
  napi_value buffer;
  if (napi_create_external_arraybuffer(env, map->start + offset, (size_t)byte_size, NULL, NULL, &buffer) != napi_ok) {
    discard_window(w);
    return throw_errno(env, "napi_create_external_arraybuffer", ENOMEM);
  }
  if (napi_wrap(env, buffer, w, finalize_window, NULL, &w->buffer) != napi_ok) {
    /* A window unmap could not find must never point at the pages. */
    napi_detach_arraybuffer(env, buffer);
    discard_window(w);
    return throw_errno(env, "napi_wrap", ENOMEM);
  }
  return buffer;
}

static napi_value window_object(napi_env env, napi_callback_info info) {
  napi_value args[3];
  mapping *map;
  uint64_t offset, byte_size;
  if (!get_args(env, info, 3, args) || !mapping_of(env, args[0], &map) ||
      !get_size(env, args[1], &offset) || !get_size(env, args[2], &byte_size)) {
    return NULL;
  }
  if (map == NULL || !map->mapped) return throw_error(env, "ERR_SHM_UNMAPPED", NULL, 0, "ERR_SHM_UNMAPPED");
  if (offset > map->byte_size || byte_size > map->byte_size - offset) {
    return throw_error(env, "ERR_SHM_OUT_OF_BOUNDS", NULL, 0, "ERR_SHM_OUT_OF_BOUNDS");
  }
  return new_window(env, map, offset, byte_size);
}

static napi_value identity_object(napi_env env, napi_callback_info info) {
  napi_value args[1], identity;
  mapping *map;
  char text[48];
  if (!get_args(env, info, 1, args) || !mapping_of(env, args[0], &map)) return NULL;
  if (map == NULL || !map->mapped) return throw_error(env, "ERR_SHM_UNMAPPED", NULL, 0, "ERR_SHM_UNMAPPED");
  snprintf(text, sizeof(text), "%llu:%llu", (unsigned long long)map->device, (unsigned long long)map->inode);
  napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &identity);
  return identity;
}

static napi_value boolean(napi_env env, bool value) {
  napi_value result;
  napi_get_boolean(env, value, &result);
  return result;
}

/* Detaches every window still alive: afterwards each view over one has length 0 and cannot fault. */
static int detach_windows(napi_env env, mapping *map) {
  for (window *w = map->windows; w != NULL; w = w->next) {
    napi_value buffer = NULL;
    bool detached = false;
    if (w->buffer == NULL || napi_get_reference_value(env, w->buffer, &buffer) != napi_ok || buffer == NULL) continue;
    napi_is_detached_arraybuffer(env, buffer, &detached);
    if (!detached && napi_detach_arraybuffer(env, buffer) != napi_ok) return 0;
  }
  return 1;
}

static napi_value unmap_object(napi_env env, napi_callback_info info) {
  napi_value args[1];
  mapping *map;
  if (!get_args(env, info, 1, args) || !mapping_of(env, args[0], &map)) return NULL;
  if (map == NULL || !map->mapped) return boolean(env, false);
  /* Detach before munmap; a window that cannot be detached keeps the pages mapped. */
  if (!detach_windows(env, map)) return throw_invalid(env, "a window cannot be detached");
  release_mapping(map);
  return boolean(env, true);
}

static napi_value intact_object(napi_env env, napi_callback_info info) {
  napi_value args[1];
  mapping *map;
  struct stat object;
  if (!get_args(env, info, 1, args) || !mapping_of(env, args[0], &map)) return NULL;
  if (map == NULL || !map->mapped || map->poisoned) return boolean(env, false);
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
      {"window", NULL, window_object, NULL, NULL, NULL, napi_enumerable, NULL},
      {"identity", NULL, identity_object, NULL, NULL, NULL, napi_enumerable, NULL},
      {"unmap", NULL, unmap_object, NULL, NULL, NULL, napi_enumerable, NULL},
      {"intact", NULL, intact_object, NULL, NULL, NULL, napi_enumerable, NULL},
      {"create", NULL, create_object, NULL, NULL, NULL, napi_enumerable, NULL},
      {"unlink", NULL, unlink_object, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, sizeof(functions) / sizeof(functions[0]), functions);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
