/*
 * Force-included (-include) in the glibc prebuilds only (scripts/prebuild.ts), so that a binary
 * built against Debian's newer glibc still loads on glibc 2.28 (RHEL 8, Debian 10, Ubuntu 20.04).
 * Of the functions the addon calls, seven got a newer symbol version since 2.28:
 *
 * - fstat is a real function only since glibc 2.33 (fstat@GLIBC_2.33). Older <sys/stat.h> turned
 *   it into __fxstat64(_STAT_VER, ...), which every glibc since still exports at its first
 *   version: call that, as a build on 2.28 does.
 * - shm_open and shm_unlink moved from librt to libc in 2.34 (@GLIBC_2.34), and so did dlopen,
 *   dlsym, dlerror and dlclose from libdl. Nothing here can fix that in C: the script links against
 *   stub librt.so.1 and libdl.so.2 defining them at the architecture's first glibc version, so the
 *   binary asks those libraries for them there, exactly as a build on 2.28 does. Newer glibc still
 *   answers that request, from libc.
 */
#ifndef FASTIFY_TRITON_SHM_GLIBC_2_28_H
#define FASTIFY_TRITON_SHM_GLIBC_2_28_H

#include <sys/stat.h>

/* _STAT_VER as glibc 2.28 defined it: the layout of struct stat the caller passes. */
#if defined(__x86_64__)
#define GLIBC_2_28_STAT_VER 1
#elif defined(__aarch64__)
#define GLIBC_2_28_STAT_VER 0
#else
#error "glibc-2.28.h knows _STAT_VER on x86-64 and arm64 only"
#endif

/* On 64-bit Linux struct stat and struct stat64 are one layout. */
int __fxstat64(int stat_version, int fd, struct stat64 *buf);
#define fstat(fd, buf) __fxstat64(GLIBC_2_28_STAT_VER, (fd), (struct stat64 *)(buf))

#endif
