/* POSIX shared memory for Node (shm.c): map, mapFile, window, identity, unmap, release, intact,
 * create and unlink, defined on the addon's exports by shm_init. */
#ifndef FASTIFY_TRITON_SHM_SHM_H
#define FASTIFY_TRITON_SHM_SHM_H

#include "napi-util.h"

/* Defines the functions and gives this Node environment its handle table; returns 0 with an
 * error thrown if that table cannot be made. */
int shm_init(napi_env env, napi_value exports);

#endif
