/* Survives SIGBUS from touching a mapped page past the end of an object its owner shrank. */
#ifndef FASTIFY_TRITON_SHM_FAULT_GUARD_H
#define FASTIFY_TRITON_SHM_FAULT_GUARD_H

#include "mapping.h"

/* Guards a new mapping; installs the SIGBUS handler on first use. Returns 0, or an errno value. */
int fault_guard_add(mapping *map);
void fault_guard_remove(mapping *map);

#endif
