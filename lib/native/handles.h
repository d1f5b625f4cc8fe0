/*
 * How JavaScript names a mapping: a handle, a plain number. An object with a finalizer (an external
 * value) was the addon's largest cost per registration; a number costs the collector nothing.
 *
 * A handle is a slot of the environment's table with the slot's generation above it, so a handle
 * kept after its release names nothing, even once the slot holds another mapping. Every Node-API
 * environment (the main thread, each worker) has a table of its own, used from its thread only.
 */
#ifndef FASTIFY_TRITON_SHM_HANDLES_H
#define FASTIFY_TRITON_SHM_HANDLES_H

#include "mapping.h"

typedef struct handle_table handle_table;

/* A new, empty table; NULL if out of memory. */
handle_table *handle_table_new(void);

/* Gives `map` a handle; returns 0, or ENOMEM. */
int handle_add(handle_table *table, mapping *map, double *handle);

/* The mapping a handle names, or NULL for one released (or never given). */
mapping *handle_find(const handle_table *table, double handle);

/* Frees the handle's slot and returns its mapping, or NULL if it names none. */
mapping *handle_remove(handle_table *table, double handle);

/* Frees the table, passing each mapping a handle still names to `release`. */
void handle_table_free(handle_table *table, void (*release)(mapping *map));

#endif
