#include "handles.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* handle = generation << SLOT_BITS | slot: below 2^53, so a JavaScript number holds it exactly. */
#define SLOT_BITS 24
#define SLOTS (1u << SLOT_BITS)
#define GENERATIONS (1u << 28)

#define NO_SLOT UINT32_MAX

typedef struct handle_slot {
  mapping *map;        /* NULL while free */
  uint32_t generation; /* from 1; changes at each release */
  uint32_t next_free;
} handle_slot;

struct handle_table {
  handle_slot *slots;
  uint32_t used, capacity;
  uint32_t free_head; /* the slot freed last, below `used`, or NO_SLOT */
};

handle_table *handle_table_new(void) {
  handle_table *table = calloc(1, sizeof(handle_table));
  if (table != NULL) table->free_head = NO_SLOT;
  return table;
}

static int grow(handle_table *table) {
  if (table->capacity == SLOTS) return ENOMEM;
  uint32_t capacity = table->capacity == 0 ? 16 : table->capacity * 2;
  handle_slot *slots = realloc(table->slots, capacity * sizeof(handle_slot));
  if (slots == NULL) return ENOMEM;
  table->slots = slots;
  table->capacity = capacity;
  return 0;
}

int handle_add(handle_table *table, mapping *map, double *handle) {
  uint32_t index = table->free_head;
  if (index != NO_SLOT) {
    table->free_head = table->slots[index].next_free;
  } else {
    if (table->used == table->capacity && grow(table) != 0) return ENOMEM;
    index = table->used++;
    table->slots[index].generation = 1;
  }
  table->slots[index].map = map;
  *handle = (double)((uint64_t)table->slots[index].generation << SLOT_BITS | index);
  return 0;
}

/* The slot a handle names while it is live, or NULL. */
static handle_slot *live_slot(const handle_table *table, double handle) {
  if (!(handle >= 0 && handle < (double)((uint64_t)GENERATIONS << SLOT_BITS))) return NULL;
  uint64_t value = (uint64_t)handle;
  if ((double)value != handle) return NULL;
  uint32_t index = (uint32_t)(value & (SLOTS - 1));
  uint32_t generation = (uint32_t)(value >> SLOT_BITS);
  if (index >= table->used) return NULL;
  handle_slot *slot = &table->slots[index];
  return slot->map != NULL && slot->generation == generation ? slot : NULL;
}

mapping *handle_find(const handle_table *table, double handle) {
  handle_slot *slot = live_slot(table, handle);
  return slot == NULL ? NULL : slot->map;
}

mapping *handle_remove(handle_table *table, double handle) {
  handle_slot *slot = live_slot(table, handle);
  if (slot == NULL) return NULL;
  mapping *map = slot->map;
  slot->map = NULL;
  slot->generation = slot->generation % (GENERATIONS - 1) + 1;
  slot->next_free = table->free_head;
  table->free_head = (uint32_t)(slot - table->slots);
  return map;
}

void handle_table_free(handle_table *table, void (*release)(mapping *map)) {
  for (uint32_t index = 0; index < table->used; index++) {
    if (table->slots[index].map != NULL) release(table->slots[index].map);
  }
  free(table->slots);
  free(table);
}
