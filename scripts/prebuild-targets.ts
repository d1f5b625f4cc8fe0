/**
 * The platforms the tarball carries a prebuilt addon for, and the Debian toolchain that builds each.
 * Node-API makes one binary per platform serve every Node version.
 */

export interface PrebuildTarget {
  /** As node-gyp-build names it: `<platform>-<arch>`, then the libc tag. */
  readonly platform: 'linux'
  readonly arch: 'x64' | 'arm64'
  readonly libc: 'glibc' | 'musl'
  readonly compiler: string
  readonly strip: string
  /** The Debian packages that bring `compiler`, `strip` and the C library's headers. */
  readonly debianPackages: readonly string[]
  /**
   * glibc only: the version glibc gave its first symbols on this architecture, where the symbols
   * that moved into libc since 2.28 are asked for (see lib/native/glibc-2.28.h).
   */
  readonly glibcBaseVersion?: string
}

export const prebuildTargets: readonly PrebuildTarget[] = [
  { platform: 'linux', arch: 'x64', libc: 'glibc', compiler: 'gcc', strip: 'strip', debianPackages: ['gcc', 'libc6-dev'], glibcBaseVersion: 'GLIBC_2.2.5' },
  { platform: 'linux', arch: 'x64', libc: 'musl', compiler: 'musl-gcc', strip: 'strip', debianPackages: ['musl-tools'] },
  {
    platform: 'linux',
    arch: 'arm64',
    libc: 'glibc',
    compiler: 'aarch64-linux-gnu-gcc',
    strip: 'aarch64-linux-gnu-strip',
    debianPackages: ['gcc-aarch64-linux-gnu', 'libc6-dev-arm64-cross'],
    glibcBaseVersion: 'GLIBC_2.17'
  }
]

/** Where node-gyp-build looks for the target's binary, relative to the package root. */
export function prebuildPath (target: PrebuildTarget): string {
  return `prebuilds/${target.platform}-${target.arch}/fastify-triton-shm.${target.libc}.node`
}

/** The oldest glibc the glibc prebuilds must load on: RHEL 8, Debian 10, Ubuntu 20.04. */
export const glibcCeiling = '2.28'
