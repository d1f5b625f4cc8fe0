/**
 * Which prebuild targets this machine can build, and whether it must build all of them. A
 * contributor's machine builds what its toolchains allow; CI (`CI=true`, which installs every
 * toolchain) and publishing build every target or fail.
 */
import { execFileSync } from 'node:child_process'
import { accessSync, constants } from 'node:fs'
import path from 'node:path'
import { prebuildTargets, type PrebuildTarget } from './prebuild-targets'

export function onPath (command: string, searchPath = process.env.PATH ?? ''): boolean {
  return searchPath.split(path.delimiter).some((directory) => {
    try {
      accessSync(path.join(directory, command), constants.X_OK)
      return true
    } catch {
      return false
    }
  })
}

/** Whether `compiler` runs and finds its C library's headers (a cross gcc comes without them). */
function compiles (compiler: string): boolean {
  try {
    execFileSync(compiler, ['-fsyntax-only', '-x', 'c', '-'], { input: '#include <sys/stat.h>\n', stdio: ['pipe', 'ignore', 'ignore'] })
    return true
  } catch {
    return false
  }
}

/** Why `target` cannot be built here, with the command that installs what it lacks; undefined if it can. */
export function missingToolchain (target: PrebuildTarget): string | undefined {
  const missing = [
    ...compiles(target.compiler) ? [] : [target.compiler],
    ...onPath(target.strip) ? [] : [target.strip]
  ]
  if (missing.length === 0) return undefined
  return `no ${[...new Set(missing)].join(', ')} (on Debian or Ubuntu: apt-get install ${target.debianPackages.join(' ')})`
}

/** The label a target's messages use: `linux-x64 musl`. */
export const targetLabel = (target: PrebuildTarget): string => `${target.platform}-${target.arch} ${target.libc}`

/** CI sets CI=true (GitHub Actions, GitLab, .ci/run): there a target that cannot be built is a failure. */
export const inCI = (env: NodeJS.ProcessEnv = process.env): boolean =>
  env.CI !== undefined && env.CI !== '' && env.CI !== 'false' && env.CI !== '0'

/** Every target with why it cannot be built here, if it cannot. */
export const prebuildToolchains = (): Array<{ target: PrebuildTarget, missing: string | undefined }> =>
  prebuildTargets.map((target) => ({ target, missing: missingToolchain(target) }))
