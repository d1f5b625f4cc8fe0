/* One mapping of part of a shared memory object, shared by shm.c and fault-guard.c. */
#ifndef FASTIFY_TRITON_SHM_MAPPING_H
#define FASTIFY_TRITON_SHM_MAPPING_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

typedef struct mapping {
  void *base;                     /* page-aligned start returned by mmap */
  size_t length;                  /* bytes mapped from base */
  int fd;                         /* kept open to fstat the object at each use: its owner may shrink it */
  uint64_t end;                   /* offset + byte size: the object must be at least this long */
  int mapped;                     /* cleared on unmap, so the finalizer does not unmap an address reused since */
  volatile sig_atomic_t poisoned; /* set when a page past the object's end was touched and replaced */
  struct mapping *next, *prev;    /* in the fault guard's list while mapped */
} mapping;

#endif
