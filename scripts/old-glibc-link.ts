/**
 * What a glibc prebuild needs to load on glibc 2.28 though it is built against a newer one: the
 * compiler flags that force-include lib/native/glibc-2.28.h, and a stub librt.so.1 to link
 * against (that header says why). The stub is only ever linked against, never shipped or loaded.
 */
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import path from 'node:path'

/** The functions glibc 2.34 moved from librt into libc, at a newer version. */
const movedFromLibrt = ['shm_open', 'shm_unlink']

export interface LinkFlags {
  readonly CFLAGS: string
  readonly LDFLAGS: string
}

/** Builds the stub librt in `directory` with `compiler`, and returns the flags that use it. */
export function oldGlibcLink (compiler: string, glibcBaseVersion: string, directory: string, nativeSources: string): LinkFlags {
  const source = path.join(directory, 'librt-stub.c')
  const versionScript = path.join(directory, 'librt-stub.map')
  writeFileSync(source, movedFromLibrt.map((name) => `int ${name} (void) { return -1; }\n`).join(''))
  writeFileSync(versionScript, `${glibcBaseVersion} { global: ${movedFromLibrt.join('; ')}; local: *; };\n`)
  execFileSync(compiler, [
    '-shared', '-fPIC', '-nostdlib', '-Wl,-soname,librt.so.1', `-Wl,--version-script=${versionScript}`,
    source, '-o', path.join(directory, 'librt.so')
  ], { stdio: 'inherit' })
  return {
    CFLAGS: `-include ${path.join(nativeSources, 'glibc-2.28.h')}`,
    // Searched before the system's directories, so -lrt finds the stub.
    LDFLAGS: `-L${directory}`
  }
}
