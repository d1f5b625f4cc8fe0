/**
 * `npm run prebuild` (also run by prepack, so a packed tarball always carries them): builds the
 * addon with prebuildify for every target in prebuild-targets.ts into prebuilds/, using Debian's
 * toolchains, and fails if a glibc binary would not load on glibc 2.28. node-gyp-build loads the
 * matching one at run time; where none matches, the install script builds from source.
 */
import { execFileSync } from 'node:child_process'
import { accessSync, constants, cpSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { glibcVersionsNeeded, unmetOn } from './glibc-versions'
import { oldGlibcLink } from './old-glibc-link'
import { glibcCeiling, prebuildPath, prebuildTargets, type PrebuildTarget } from './prebuild-targets'

const root = path.resolve(__dirname, '..')

function onPath (command: string): boolean {
  return (process.env.PATH ?? '').split(path.delimiter).some((directory) => {
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

/** Stops with one message naming every missing tool and the Debian packages that bring them. */
function requireToolchains (): void {
  const tools = prebuildTargets.flatMap((target) => [
    { command: target.compiler, debianPackages: target.debianPackages, works: compiles },
    { command: target.strip, debianPackages: target.debianPackages, works: onPath }
  ]).concat(
    { command: 'readelf', debianPackages: ['binutils'], works: onPath },
    { command: 'make', debianPackages: ['make'], works: onPath }
  )
  const missing = tools.filter((tool) => !tool.works(tool.command))
  if (missing.length === 0) return
  const commands = [...new Set(missing.map((tool) => tool.command))].join(', ')
  const packages = [...new Set(missing.flatMap((tool) => tool.debianPackages))].join(' ')
  throw new Error(`prebuild: cannot build with: ${commands}. On Debian or Ubuntu: apt-get install ${packages}`)
}

/** Node-API headers of the Node running this script (a Node install always carries them). */
function nodeHeaders (): string {
  const nodedir = process.env.npm_config_nodedir || path.resolve(process.execPath, '../..')
  try {
    accessSync(path.join(nodedir, 'include/node/node_api.h'))
  } catch {
    throw new Error(`prebuild: no Node headers in ${nodedir}/include/node; set npm_config_nodedir to a Node install`)
  }
  return nodedir
}

/** A copy of what node-gyp needs, so builds for other targets never touch this checkout's build/. */
function buildTree (): string {
  const tree = mkdtempSync(path.join(tmpdir(), 'fastify-triton-shm-prebuild-'))
  cpSync(path.join(root, 'binding.gyp'), path.join(tree, 'binding.gyp'))
  cpSync(path.join(root, 'lib/native'), path.join(tree, 'lib/native'), { recursive: true })
  writeFileSync(path.join(tree, 'package.json'), JSON.stringify({ name: 'fastify-triton-shm' }))
  return tree
}

function build (target: PrebuildTarget, tree: string, nodedir: string): void {
  rmSync(path.join(tree, 'build'), { recursive: true, force: true })
  const linkDirectory = mkdtempSync(path.join(tree, 'link-'))
  const oldGlibc = target.glibcBaseVersion === undefined
    ? {}
    : oldGlibcLink(target.compiler, target.glibcBaseVersion, linkDirectory, path.join(tree, 'lib/native'))
  // node-gyp's Makefile takes the compiler and linker from these; the addon is C only.
  const env = { ...process.env, CC: target.compiler, CXX: target.compiler, LINK: target.compiler, npm_config_nodedir: nodedir, ...oldGlibc }
  execFileSync(process.execPath, [
    require.resolve('prebuildify/bin.js'), '--napi', '--strip', '--strip-bin', target.strip, '--tag-libc',
    '--platform', target.platform, '--arch', target.arch, '--libc', target.libc,
    '--target', process.versions.node, '--node-gyp', require.resolve('node-gyp/bin/node-gyp.js'),
    '--cwd', tree, '--out', tree
  ], { env, stdio: 'inherit' })
}

/** Fails if the glibc binary needs a glibc newer than the ceiling; says what it needs either way. */
function checkGlibc (target: PrebuildTarget, binary: string): void {
  if (target.libc !== 'glibc') return
  const needed = glibcVersionsNeeded(binary)
  const label = `${target.platform}-${target.arch} ${target.libc}`
  const unmet = unmetOn(glibcCeiling, needed)
  if (unmet.length > 0) {
    throw new Error(`prebuild: ${label} needs GLIBC_${unmet.join(', GLIBC_')}, which glibc ${glibcCeiling} lacks`)
  }
  console.log(`prebuild: ${label} needs glibc ${needed.at(-1)} at most (GLIBC_${needed.join(', GLIBC_')}; ceiling ${glibcCeiling})`)
}

function main (): void {
  requireToolchains()
  const nodedir = nodeHeaders()
  const tree = buildTree()
  try {
    for (const target of prebuildTargets) {
      build(target, tree, nodedir)
      checkGlibc(target, path.join(tree, prebuildPath(target)))
    }
    // Replaced whole and at once, so prebuilds/ never mixes old and new binaries.
    const staged = path.join(root, `prebuilds.${process.pid}`)
    cpSync(path.join(tree, 'prebuilds'), staged, { recursive: true })
    rmSync(path.join(root, 'prebuilds'), { recursive: true, force: true })
    renameSync(staged, path.join(root, 'prebuilds'))
    console.log(`prebuild: ${prebuildTargets.map(prebuildPath).join(', ')}`)
  } finally {
    rmSync(tree, { recursive: true, force: true })
  }
}

try {
  main()
} catch (error) {
  console.error((error as Error).message)
  process.exitCode = 1
}
