/**
 * What a glibc prebuild needs to load on glibc 2.28 though it is built against a newer one: the
 * compiler flags that force-include lib/native/glibc-2.28.h, and stub librt.so.1 and libdl.so.2 to
 * link against (that header says why). The stubs are only ever linked against, never shipped or loaded.
 */
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import path from 'node:path'

/** The functions glibc 2.34 moved from librt and libdl into libc, at a newer version, by library. */
const movedIntoLibc = {
  rt: { soname: 'librt.so.1', functions: ['shm_open', 'shm_unlink'] },
  dl: { soname: 'libdl.so.2', functions: ['dlopen', 'dlsym', 'dlerror', 'dlclose'] }
}

export interface LinkFlags {
  readonly CFLAGS: string
  readonly LDFLAGS: string
}

/** Builds the stub libraries in `directory` with `compiler`, and returns the flags that use them. */
export function oldGlibcLink (compiler: string, glibcBaseVersion: string, directory: string, nativeSources: string): LinkFlags {
  for (const [library, { soname, functions }] of Object.entries(movedIntoLibc)) {
    const source = path.join(directory, `lib${library}-stub.c`)
    const versionScript = path.join(directory, `lib${library}-stub.map`)
    writeFileSync(source, functions.map((name) => `int ${name} (void) { return -1; }\n`).join(''))
    writeFileSync(versionScript, `${glibcBaseVersion} { global: ${functions.join('; ')}; local: *; };\n`)
    execFileSync(compiler, [
      '-shared', '-fPIC', '-nostdlib', `-Wl,-soname,${soname}`, `-Wl,--version-script=${versionScript}`,
      source, '-o', path.join(directory, `lib${library}.so`)
    ], { stdio: 'inherit' })
  }
  return {
    CFLAGS: `-include ${path.join(nativeSources, 'glibc-2.28.h')}`,
    // Searched before the system's directories, so -lrt and -ldl find the stubs.
    LDFLAGS: `-L${directory}`
  }
}
