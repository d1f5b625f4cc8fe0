/**
 * `npm run prebuild` (also run by prepack, so a packed tarball carries them): builds the addon
 * with prebuildify for the targets in prebuild-targets.ts into prebuilds/, using Debian's
 * toolchains, and fails if a glibc binary would not load on glibc 2.28. Which targets: see
 * targetsToBuild (`--all`, and CI, need every one). node-gyp-build loads the
 * matching one at run time; where none matches, the install script builds from source.
 */
import { execFileSync } from 'node:child_process'
import { accessSync, cpSync, existsSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { glibcVersionsNeeded, unmetOn } from './glibc-versions'
import { oldGlibcLink } from './old-glibc-link'
import { glibcCeiling, prebuildPath, type PrebuildTarget } from './prebuild-targets'
import { inCI, onPath, prebuildToolchains, targetLabel } from './toolchains'

const root = path.resolve(__dirname, '..')

/** Which targets to build. Every one, or a failure naming what is missing, with `--all` (the
 * prepublishOnly script: a published tarball carries every prebuild) and in CI; elsewhere those
 * this machine has the toolchains for, and a SKIP line for each of the others. */
function targetsToBuild (every: boolean): PrebuildTarget[] {
  const common = ['readelf', 'make'].filter((command) => !onPath(command))
  if (common.length > 0) throw new Error(`prebuild: cannot build without ${common.join(', ')}. On Debian or Ubuntu: apt-get install binutils make`)
  const toolchains = prebuildToolchains()
  const missing = toolchains.filter((toolchain) => toolchain.missing !== undefined)
  if (every && missing.length > 0) {
    throw new Error(`prebuild: every prebuild is required${inCI() ? ' in CI' : ''}, and these cannot be built here: ` +
      missing.map(({ target, missing }) => `${targetLabel(target)}: ${missing}`).join('; '))
  }
  for (const { target, missing: why } of missing) console.log(`prebuild: SKIP ${targetLabel(target)}: ${why}`)
  return toolchains.filter((toolchain) => toolchain.missing === undefined).map((toolchain) => toolchain.target)
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
  const label = targetLabel(target)
  const unmet = unmetOn(glibcCeiling, needed)
  if (unmet.length > 0) {
    throw new Error(`prebuild: ${label} needs GLIBC_${unmet.join(', GLIBC_')}, which glibc ${glibcCeiling} lacks`)
  }
  console.log(`prebuild: ${label} needs glibc ${needed.at(-1)} at most (GLIBC_${needed.join(', GLIBC_')}; ceiling ${glibcCeiling})`)
}

function main (): void {
  const targets = targetsToBuild(inCI() || process.argv.includes('--all'))
  const nodedir = nodeHeaders()
  const tree = buildTree()
  try {
    for (const target of targets) {
      build(target, tree, nodedir)
      checkGlibc(target, path.join(tree, prebuildPath(target)))
    }
    // Replaced whole and at once, so prebuilds/ never mixes old and new binaries.
    const staged = path.join(root, `prebuilds.${process.pid}`)
    if (existsSync(path.join(tree, 'prebuilds'))) cpSync(path.join(tree, 'prebuilds'), staged, { recursive: true })
    rmSync(path.join(root, 'prebuilds'), { recursive: true, force: true })
    if (existsSync(staged)) renameSync(staged, path.join(root, 'prebuilds'))
    console.log(`prebuild: ${targets.map(prebuildPath).join(', ') || 'none'}`)
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
