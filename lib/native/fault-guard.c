/*
 * A client may ftruncate its object after registering it. Touching a mapped page past the new end
 * raises SIGBUS, whose default action ends the process. For a fault inside one of our mappings the
 * handler maps anonymous zero pages over the rest of the mapping (MAP_FIXED) and marks it poisoned:
 * the access completes (reading zeros), the process survives, and the next use of the region is
 * refused. Any other SIGBUS goes to the handler that was there before, or kills as it would have.
 *
 * The list of mappings is one for the process, and worker threads map and unmap at once: every
 * change and every walk of it holds a spin lock. A lock-free atomic flag, not a mutex, because the
 * handler takes it too; the faulting thread never holds it already, as the list's own code touches
 * no mapped page.
 */
#include "fault-guard.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static mapping *guarded = NULL; /* every live mapping, of every thread */
static struct sigaction previous;
static int installed = 0;
static uintptr_t page_size = 0; /* read once: sysconf is not async-signal-safe */
static atomic_flag list_lock = ATOMIC_FLAG_INIT; /* held to change or walk `guarded`, and to install */

static void lock_list(void) {
  while (atomic_flag_test_and_set_explicit(&list_lock, memory_order_acquire)) {
  }
}

static void unlock_list(void) {
  atomic_flag_clear_explicit(&list_lock, memory_order_release);
}

static void chain(int signal_number, siginfo_t *info, void *context) {
  if (previous.sa_flags & SA_SIGINFO) {
    previous.sa_sigaction(signal_number, info, context);
  } else if (previous.sa_handler != SIG_IGN && previous.sa_handler != SIG_DFL) {
    previous.sa_handler(signal_number);
  } else if (previous.sa_handler == SIG_DFL) {
    /* Blocked while this handler runs: delivered, with its default action, on return. */
    sigaction(signal_number, &previous, NULL);
    raise(signal_number);
  }
}

/* Replaces the pages of `map` from the one holding `address` to its end with zero pages. */
static int replace_with_zero_pages(mapping *map, char *address) {
  char *start = map->base;
  char *page = start + ((uintptr_t)(address - start) / page_size) * page_size;
  void *replaced = mmap(page, (size_t)(start + map->length - page), PROT_READ | PROT_WRITE,
                        MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return replaced != MAP_FAILED;
}

/* Replaces the rest of the mapping that holds `address`, if one does; returns whether it did. */
static int guard(char *address) {
  int replaced = 0;
  lock_list();
  for (mapping *map = guarded; map != NULL; map = map->next) {
    char *start = map->base;
    if (address >= start && address < start + map->length) {
      replaced = replace_with_zero_pages(map, address);
      if (replaced) map->poisoned = 1;
      break;
    }
  }
  unlock_list();
  return replaced;
}

static void on_sigbus(int signal_number, siginfo_t *info, void *context) {
  /* si_code <= 0: sent by a process (kill, raise), not raised by a memory access. */
  if (info->si_code > 0 && guard(info->si_addr)) return;
  chain(signal_number, info, context);
}

static int install(void) {
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_sigaction = on_sigbus;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
  if (sigaction(SIGBUS, &action, &previous) != 0) return errno;
  installed = 1;
  return 0;
}

int fault_guard_add(mapping *map) {
  lock_list();
  /* Installed once: a second install would save this handler as the one to chain to. */
  int error_number = installed ? 0 : install();
  if (error_number == 0) {
    map->prev = NULL;
    map->next = guarded;
    if (guarded != NULL) guarded->prev = map;
    guarded = map;
  }
  unlock_list();
  return error_number;
}

void fault_guard_remove(mapping *map) {
  lock_list();
  if (map->prev != NULL) map->prev->next = map->next;
  else guarded = map->next;
  if (map->next != NULL) map->next->prev = map->prev;
  map->next = map->prev = NULL;
  unlock_list();
}
