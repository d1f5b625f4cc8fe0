/*
 * The baseline of bench/register.ts: what one register + unregister costs when it is nothing but
 * the system calls a registration makes (shm_open, fstat, mmap, close, then munmap), in C.
 *
 *   syscalls <key> <byte_size> <iterations> <batches>
 *
 * The object must exist and be at least <byte_size> bytes. Prints one line of JSON:
 * {"nsPerCycle":[...one value per batch...]}.
 */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void) {
  struct timespec time;
  clock_gettime(CLOCK_MONOTONIC, &time);
  return (double)time.tv_sec * 1e9 + (double)time.tv_nsec;
}

/* One register + unregister, as the addon does it: open, check, map, close; later unmap. */
static int cycle(const char *key, size_t byte_size) {
  int fd = shm_open(key, O_RDWR, 0);
  if (fd < 0) return -1;
  struct stat info;
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode) || (size_t)info.st_size < byte_size) {
    close(fd);
    return -1;
  }
  void *base = mmap(NULL, byte_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) return -1;
  return munmap(base, byte_size);
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s <key> <byte_size> <iterations> <batches>\n", argv[0]);
    return 2;
  }
  const char *key = argv[1];
  size_t byte_size = (size_t)strtoull(argv[2], NULL, 10);
  long iterations = strtol(argv[3], NULL, 10);
  long batches = strtol(argv[4], NULL, 10);
  if (byte_size == 0 || iterations <= 0 || batches <= 0) return 2;
  printf("{\"nsPerCycle\":[");
  for (long batch = 0; batch < batches; batch++) {
    double started = now_ns();
    for (long iteration = 0; iteration < iterations; iteration++) {
      if (cycle(key, byte_size) != 0) {
        perror("cycle");
        return 1;
      }
    }
    printf("%s%.1f", batch == 0 ? "" : ",", (now_ns() - started) / (double)iterations);
  }
  printf("]}\n");
  return 0;
}
