/*
 * POSIX shared memory for Node, over Node-API only (ABI-stable across Node versions).
 *
 *   map(key, offset, byteSize, peer?)
 *                                 -> a handle (a number, handles.h) to a mapping of
 *                                    [offset, offset + byteSize) of the object. With a peer
 *                                    `{ uid, gids }`, only if that user could open the object
 *                                    read-write too (peer.c), else ERR_SHM_PEER_DENIED
 *   mapFile(path, byteSize)       -> the same for [0, byteSize) of a regular file (a shared registry's
 *                                    lease table, which lives beside its store)
 *   window(mapping, offset, size) -> an ArrayBuffer over [offset, offset + size) of that range. A
 *                                    region may be larger than one ArrayBuffer can be, so it is
 *                                    mapped once and seen through as many windows as its users need
 *   identity(mapping)             -> the mapped object as "<device>:<inode>"
 *   unmap(mapping or window)      -> true if it unmapped; detaches every window first, so every view
 *                                    reads as empty. A handle is released with it
 *   release(mapping)              -> lets go of a handle without unmapping: the mapping lives on
 *                                    while a window does, and goes with the last of them
 *   intact(mapping or window[, measure])
 *                                 -> false if the object shrank below the mapped range since (its
 *                                    owner truncated it), or a page past its end was touched
 *                                    (fault-guard.c); with measure false, the object's size is
 *                                    not read (no system call): only a page touched counts
 *   reaches(mapping, offset)      -> whether byte `offset` of the range is still the object's: it
 *                                    is read, so a page the object no longer has faults (and the
 *                                    fault guard poisons the mapping); no system call
 *   create(key, byteSize)      -> makes a new object (O_CREAT | O_EXCL, mode 0600) of that size
 *   unlink(key)                -> removes an object's name
 *
 * Defined on the addon's exports by shm_init (addon.c). Errors thrown here carry `syscall` and
 * `errno` (the C value), or a `code` of our own for checks that are not system calls
 * (napi-util.h); lib/addon/addon-errors.ts turns them into typed errors.
 */
#include "shm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fault-guard.h"
#include "handles.h"
#include "mapping.h"
#include "peer.h"

/* Longest key accepted (bytes, without the terminating NUL); the kernel's NAME_MAX. */
#define KEY_MAX 255
/* Largest integer a JavaScript number holds exactly. */
#define SAFE_INTEGER_MAX 9007199254740991.0

/* Copies a string of at most `max_length` bytes into `text` (room for max_length + TEXT_SLACK).
 * Refuses strings that are too long or hold a NUL byte: C would cut them short and open a
 * different file than the one validated in JavaScript. The copy stops before a character that does
 * not fit whole, so the buffer has room for one more character (4 bytes) past `max_length`: a copy
 * no longer than `max_length` then had room to spare, and is the whole string. */
#define TEXT_SLACK 6
static int get_text(napi_env env, napi_value value, char *text, size_t max_length) {
  size_t copied = 0;
  if (napi_get_value_string_utf8(env, value, text, max_length + TEXT_SLACK, &copied) != napi_ok) {
    addon_throw_invalid(env, "key or path must be a string");
    return 0;
  }
  if (copied > max_length || strlen(text) != copied) {
    addon_throw_invalid(env, "key or path is too long or holds a NUL byte");
    return 0;
  }
  return 1;
}

static int get_key(napi_env env, napi_value value, char key[KEY_MAX + TEXT_SLACK]) {
  return get_text(env, value, key, KEY_MAX);
}

static int get_size(napi_env env, napi_value value, uint64_t *size) {
  double number = -1;
  napi_get_value_double(env, value, &number);
  if (!(number >= 0 && number <= SAFE_INTEGER_MAX && floor(number) == number)) {
    addon_throw_invalid(env, "offset and byte size must be safe unsigned integers");
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

/* This environment's handles (napi_set_instance_data at init). */
static handle_table *handles_of(napi_env env) {
  void *table = NULL;
  napi_get_instance_data(env, &table);
  return table;
}

/* The environment ends: what its handles still hold goes. */
static void finalize_handles(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  handle_table_free(data, drop_reference);
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
  if (code != NULL) return addon_throw(env, code, NULL, 0, code);
  return addon_throw_errno(env, syscall, error_number);
}

/* Maps [offset, offset + byte_size) of an open object, taking ownership of `fd` (closed on
 * failure, kept with the mapping on success). mmap needs a page-aligned file offset, so the
 * mapping starts at the page at or below `offset`. Returns the mapping's handle, which holds one
 * reference to it. Its bytes are reached through windows, made when they are needed.
 * A `peer` (or NULL) is judged on this descriptor's fstat, after Triton's own checks (the type,
 * the bounds) and before the mapping: the object judged is the one mapped, even if its name was
 * given to another since the open. (What those checks tell a refused peer, the object's type and
 * size, anyone can read in /dev/shm.) */
static napi_value map_open_object(napi_env env, int fd, uint64_t offset, uint64_t byte_size, const peer_identity *peer) {
  struct stat info;
  if (fstat(fd, &info) != 0) return fail_closing(env, fd, NULL, "fstat", errno);
  if (!S_ISREG(info.st_mode)) return fail_closing(env, fd, "ERR_SHM_NOT_REGULAR", NULL, 0);
  uint64_t object_size = (uint64_t)info.st_size;
  if (byte_size == 0 || offset > object_size || byte_size > object_size - offset) {
    return fail_closing(env, fd, "ERR_SHM_OUT_OF_BOUNDS", NULL, 0);
  }
  if (peer != NULL && !peer_may_open_read_write(peer, &info)) return fail_closing(env, fd, "ERR_SHM_PEER_DENIED", NULL, 0);
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
  double handle;
  if (handle_add(handles_of(env), map, &handle) != 0) {
    release_mapping(map);
    free(map);
    return addon_throw_errno(env, "malloc", ENOMEM);
  }
  napi_value value;
  napi_create_double(env, handle, &value);
  return value;
}

static napi_value map_object(napi_env env, napi_callback_info info) {
  napi_value args[4];
  char key[KEY_MAX + TEXT_SLACK];
  uint64_t offset, byte_size;
  peer_identity peer;
  if (!addon_get_args(env, info, 3, 1, args) || !get_key(env, args[0], key) ||
      !get_size(env, args[1], &offset) || !get_size(env, args[2], &byte_size) || !peer_identity_get(env, args[3], &peer)) {
    return NULL;
  }
  int fd = shm_open(key, O_RDWR, 0);
  napi_value result = fd < 0 ? addon_throw_errno(env, "shm_open", errno)
                             : map_open_object(env, fd, offset, byte_size, peer.given ? &peer : NULL);
  peer_identity_free(&peer);
  return result;
}

/* Maps [0, byte_size) of the regular file at `path`, as map does an object: never through a
 * symbolic link, never creating it. */
static napi_value map_file(napi_env env, napi_callback_info info) {
  napi_value args[2];
  char path[PATH_MAX + TEXT_SLACK];
  uint64_t byte_size;
  if (!addon_get_args(env, info, 2, 0, args) || !get_text(env, args[0], path, PATH_MAX - 1) || !get_size(env, args[1], &byte_size)) {
    return NULL;
  }
  int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return addon_throw_errno(env, "open", errno);
  return map_open_object(env, fd, 0, byte_size, NULL);
}

/* Whether `value` is a handle (a number, live or not), and which. */
static bool as_handle(napi_env env, napi_value value, double *handle) {
  napi_valuetype type = napi_undefined;
  napi_typeof(env, value, &type);
  return type == napi_number && napi_get_value_double(env, value, handle) == napi_ok;
}

/* The mapping behind a handle or a window, or NULL for a handle released or a window detached
 * already (its mapping may be freed: it is never touched). */
static int mapping_of(napi_env env, napi_value value, mapping **map) {
  bool is_buffer = false, detached = false;
  void *wrapped = NULL;
  double handle = -1;
  *map = NULL;
  if (as_handle(env, value, &handle)) {
    *map = handle_find(handles_of(env), handle);
    return 1;
  }
  napi_is_arraybuffer(env, value, &is_buffer);
  if (is_buffer) napi_is_detached_arraybuffer(env, value, &detached);
  if (detached) return 1;
  if (!is_buffer || napi_unwrap(env, value, &wrapped) != napi_ok || wrapped == NULL) {
    addon_throw_invalid(env, "expected a mapping or a window returned by this addon");
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
  if (w == NULL) return addon_throw_errno(env, "malloc", ENOMEM);
  w->map = map;
  map->references++;
  link_window(w);
  napi_value buffer;
  if (napi_create_external_arraybuffer(env, map->start + offset, (size_t)byte_size, NULL, NULL, &buffer) != napi_ok) {
    discard_window(w);
    return addon_throw_errno(env, "napi_create_external_arraybuffer", ENOMEM);
  }
  if (napi_wrap(env, buffer, w, finalize_window, NULL, &w->buffer) != napi_ok) {
    /* A window unmap could not find must never point at the pages. */
    napi_detach_arraybuffer(env, buffer);
    discard_window(w);
    return addon_throw_errno(env, "napi_wrap", ENOMEM);
  }
  return buffer;
}

static napi_value window_object(napi_env env, napi_callback_info info) {
  napi_value args[3];
  mapping *map;
  uint64_t offset, byte_size;
  if (!addon_get_args(env, info, 3, 0, args) || !mapping_of(env, args[0], &map) ||
      !get_size(env, args[1], &offset) || !get_size(env, args[2], &byte_size)) {
    return NULL;
  }
  if (map == NULL || !map->mapped) return addon_throw(env, "ERR_SHM_UNMAPPED", NULL, 0, "ERR_SHM_UNMAPPED");
  if (offset > map->byte_size || byte_size > map->byte_size - offset) {
    return addon_throw(env, "ERR_SHM_OUT_OF_BOUNDS", NULL, 0, "ERR_SHM_OUT_OF_BOUNDS");
  }
  return new_window(env, map, offset, byte_size);
}

/* Writes `value` in decimal ending just before `end`; returns where its first digit is. (Not
 * snprintf: every register asks for an identity, and formatting was a tenth of its work.) */
static char *decimal_before(char *end, uint64_t value) {
  do {
    *--end = (char)('0' + value % 10);
    value /= 10;
  } while (value != 0);
  return end;
}

static napi_value identity_object(napi_env env, napi_callback_info info) {
  napi_value args[1], identity;
  mapping *map;
  char text[48];
  if (!addon_get_args(env, info, 1, 0, args) || !mapping_of(env, args[0], &map)) return NULL;
  if (map == NULL || !map->mapped) return addon_throw(env, "ERR_SHM_UNMAPPED", NULL, 0, "ERR_SHM_UNMAPPED");
  char *end = text + sizeof(text);
  char *start = decimal_before(end, map->inode);
  *--start = ':';
  start = decimal_before(start, map->device);
  napi_create_string_latin1(env, start, (size_t)(end - start), &identity);
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

/* Lets go of a handle's reference to its mapping, if the handle is still live. */
static void release_handle(napi_env env, napi_value value) {
  double handle = -1;
  mapping *map = as_handle(env, value, &handle) ? handle_remove(handles_of(env), handle) : NULL;
  if (map != NULL) drop_reference(map);
}

static napi_value unmap_object(napi_env env, napi_callback_info info) {
  napi_value args[1];
  mapping *map;
  if (!addon_get_args(env, info, 1, 0, args) || !mapping_of(env, args[0], &map)) return NULL;
  bool unmapped = map != NULL && map->mapped;
  /* Detach before munmap; a window that cannot be detached keeps the pages mapped, and its handle. */
  if (unmapped && !detach_windows(env, map)) return addon_throw_invalid(env, "a window cannot be detached");
  if (unmapped) release_mapping(map);
  release_handle(env, args[0]);
  return boolean(env, unmapped);
}

static napi_value release_object(napi_env env, napi_callback_info info) {
  napi_value args[1];
  if (!addon_get_args(env, info, 1, 0, args)) return NULL;
  release_handle(env, args[0]);
  return NULL;
}

static napi_value intact_object(napi_env env, napi_callback_info info) {
  napi_value args[2];
  mapping *map;
  bool measure = true;
  struct stat object;
  if (!addon_get_args(env, info, 1, 1, args) || !mapping_of(env, args[0], &map)) return NULL;
  /* Left true unless a boolean is given (a missing argument reads as undefined). */
  napi_get_value_bool(env, args[1], &measure);
  if (map == NULL || !map->mapped || map->poisoned) return boolean(env, false);
  return boolean(env, !measure || (fstat(map->fd, &object) == 0 && (uint64_t)object.st_size >= map->end));
}

/* A truncation cuts the object's end, so one byte answers for every byte before it. Reading it
 * costs no system call where its page is there; where it is not, the fault guard replaces it with
 * zeros and poisons the mapping before the read completes. */
static napi_value reaches_object(napi_env env, napi_callback_info info) {
  napi_value args[2];
  mapping *map;
  uint64_t offset;
  if (!addon_get_args(env, info, 2, 0, args) || !mapping_of(env, args[0], &map) || !get_size(env, args[1], &offset)) {
    return NULL;
  }
  if (map == NULL || !map->mapped || map->poisoned) return boolean(env, false);
  if (offset >= map->byte_size) return addon_throw(env, "ERR_SHM_OUT_OF_BOUNDS", NULL, 0, "ERR_SHM_OUT_OF_BOUNDS");
  (void)*(volatile const char *)(map->start + offset);
  return boolean(env, !map->poisoned);
}

static napi_value create_object(napi_env env, napi_callback_info info) {
  napi_value args[2];
  char key[KEY_MAX + TEXT_SLACK];
  uint64_t byte_size;
  if (!addon_get_args(env, info, 2, 0, args) || !get_key(env, args[0], key) ||
      !get_size(env, args[1], &byte_size)) {
    return NULL;
  }
  int fd = shm_open(key, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return addon_throw_errno(env, "shm_open", errno);
  if (ftruncate(fd, (off_t)byte_size) != 0) {
    int error_number = errno;
    shm_unlink(key);
    close(fd);
    return addon_throw_errno(env, "ftruncate", error_number);
  }
  close(fd);
  return NULL;
}

static napi_value unlink_object(napi_env env, napi_callback_info info) {
  napi_value args[1];
  char key[KEY_MAX + TEXT_SLACK];
  if (!addon_get_args(env, info, 1, 0, args) || !get_key(env, args[0], key)) return NULL;
  if (shm_unlink(key) != 0) return addon_throw_errno(env, "shm_unlink", errno);
  return NULL;
}

int shm_init(napi_env env, napi_value exports) {
  napi_property_descriptor functions[] = {
      {"map", NULL, map_object, NULL, NULL, NULL, napi_enumerable, NULL},
      {"mapFile", NULL, map_file, NULL, NULL, NULL, napi_enumerable, NULL},
      {"window", NULL, window_object, NULL, NULL, NULL, napi_enumerable, NULL},
      {"identity", NULL, identity_object, NULL, NULL, NULL, napi_enumerable, NULL},
      {"unmap", NULL, unmap_object, NULL, NULL, NULL, napi_enumerable, NULL},
      {"release", NULL, release_object, NULL, NULL, NULL, napi_enumerable, NULL},
      {"intact", NULL, intact_object, NULL, NULL, NULL, napi_enumerable, NULL},
      {"reaches", NULL, reaches_object, NULL, NULL, NULL, napi_enumerable, NULL},
      {"create", NULL, create_object, NULL, NULL, NULL, napi_enumerable, NULL},
      {"unlink", NULL, unlink_object, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  handle_table *handles = handle_table_new();
  if (handles == NULL || napi_set_instance_data(env, handles, finalize_handles, NULL) != napi_ok) {
    if (handles != NULL) handle_table_free(handles, drop_reference);
    addon_throw_errno(env, "malloc", ENOMEM);
    return 0;
  }
  napi_define_properties(env, exports, sizeof(functions) / sizeof(functions[0]), functions);
  return 1;
}
