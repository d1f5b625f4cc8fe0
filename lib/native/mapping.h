/* One mapping of part of a shared memory object, shared by shm.c and fault-guard.c. */
#ifndef FASTIFY_TRITON_SHM_MAPPING_H
#define FASTIFY_TRITON_SHM_MAPPING_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

struct window;

typedef struct mapping {
  void *base;                     /* page-aligned start returned by mmap */
  size_t length;                  /* bytes mapped from base */
  char *start;                    /* byte 0 of the region: base plus the offset's distance from its page */
  uint64_t byte_size;             /* bytes of the region from start */
  int fd;                         /* kept open to measure the object (intact): its owner may shrink it */
  uint64_t end;                   /* offset + byte size: the object must be at least this long */
  uint64_t device, inode;         /* the object mapped, from fstat at map time */
  int mapped;                     /* cleared on unmap, so nothing unmaps an address reused since */
  int references;                 /* the handle and every window not yet collected; the last one frees */
  struct window *windows;         /* every window not yet collected, to detach them all before munmap */
  volatile sig_atomic_t poisoned; /* set when a page past the object's end was touched and replaced */
  struct mapping *next, *prev;    /* in the fault guard's list while mapped */
} mapping;

#endif
