/**
 * An environment with no C compiler, python or make reachable, as in `node:22-slim`: PATH holds
 * only a folder with `node` and `sh` (npm runs install scripts with it), and no variable that
 * names a compiler or python is passed on.
 */
import { accessSync, constants, existsSync, mkdtempSync, readdirSync, realpathSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { prebuildTargets } from '../../scripts/prebuild-targets'

/** What node-gyp would need to build the addon; none may be found on the toolchain-free PATH. */
export const buildTools = ['cc', 'gcc', 'clang', 'c99', 'make', 'python3', 'python', 'g++', 'c++']

/** The full path of `command` on `searchPath`, if any. */
export function findOnPath (command: string, searchPath = process.env.PATH ?? ''): string | undefined {
  for (const directory of searchPath.split(path.delimiter).filter(Boolean)) {
    try {
      accessSync(path.join(directory, command), constants.X_OK)
      return path.join(directory, command)
    } catch {}
  }
  return undefined
}

/** npm's own script, run with `node` (the `npm` on PATH is a link to it). */
export function npmCli (): string {
  const npm = findOnPath('npm')
  if (npm === undefined) throw new Error('npm is not on PATH')
  return realpathSync(npm)
}

/** The environment: this one less PATH's tools and every variable that points at a build tool. */
export function toolchainFreeEnv (): NodeJS.ProcessEnv {
  const bin = mkdtempSync(path.join(tmpdir(), 'fastify-triton-shm-nodeonly-'))
  symlinkSync(process.execPath, path.join(bin, 'node'))
  symlinkSync('/bin/sh', path.join(bin, 'sh'))
  const env = Object.fromEntries(Object.entries(process.env)
    .filter(([name]) => !/^(CC|CXX|LINK|CPP|PYTHON|npm_config_python|npm_config_build_from_source)$/i.test(name)))
  return { ...env, PATH: bin }
}

/**
 * This environment with the cross toolchains hidden, as on a contributor's machine that has only
 * its own compiler: PATH is one folder linking every command of PATH but the cross compilers and
 * strips of scripts/prebuild-targets.ts. Remove `env.PATH` when done.
 */
export function crossToolchainFreeEnv (): NodeJS.ProcessEnv {
  const hidden = new Set(prebuildTargets.flatMap((target) => [target.compiler, target.strip]).filter((command) => !['gcc', 'strip'].includes(command)))
  const bin = mkdtempSync(path.join(tmpdir(), 'fastify-triton-shm-nocross-'))
  for (const directory of (process.env.PATH ?? '').split(path.delimiter).filter(Boolean)) {
    let names: string[]
    try {
      names = readdirSync(directory)
    } catch {
      continue
    }
    for (const name of names) {
      if (hidden.has(name) || existsSync(path.join(bin, name))) continue
      symlinkSync(path.join(directory, name), path.join(bin, name))
    }
  }
  return { ...process.env, PATH: bin }
}
