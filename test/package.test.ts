/**
 * The packed tarball, installed into a fresh project as a user would: proves what is published
 * works, not just the source tree. It carries prebuilt addons (scripts/prebuild.ts): on x86-64
 * glibc it installs and serves where no compiler, python or make exists; the arm64 binary runs
 * under qemu with an arm64 Node; the source build stays the fallback. A prebuild this machine has
 * no toolchain for is not packed (scripts/prebuild.ts): its checks SKIP here, naming what to
 * install, and fail in CI; publishing refuses to go without it.
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { cpSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import t, { type Test } from 'tap'
import { glibcVersionsNeeded } from '../scripts/glibc-versions'
import { prebuildPath } from '../scripts/prebuild-targets'
import { prebuildToolchains } from '../scripts/toolchains'
import { arm64Node } from './helpers/arm64-node'
import { cannotCheckHere } from './helpers/ci'
import { uniqueKey, unlinkOnTeardown } from './helpers/shm'
import { buildTools, crossToolchainFreeEnv, findOnPath, npmCli, toolchainFreeEnv } from './helpers/toolchain-free'

// Packing runs prepack (three cross builds) and two installs follow: minutes on a busy machine.
t.setTimeout(600_000)

const root = path.resolve(__dirname, '..')
const packageJson = require('../package.json') as { devDependencies: Record<string, string> }
const prebuilds = {
  x64Glibc: 'prebuilds/linux-x64/fastify-triton-shm.glibc.node',
  x64Musl: 'prebuilds/linux-x64/fastify-triton-shm.musl.node',
  arm64Glibc: 'prebuilds/linux-arm64/fastify-triton-shm.glibc.node'
}

/** Why a prebuild was not packed (no toolchain for it here), by its path; undefined if it was. */
const unbuildable = new Map(prebuildToolchains().map(({ target, missing }) => [prebuildPath(target), missing]))

/** Runs `check` if the prebuild was packed; else SKIPs it (fails in CI), saying why. */
function withPrebuild (t: Test, prebuild: string, check: string, run: () => void): void {
  const missing = unbuildable.get(prebuild)
  if (missing === undefined) run()
  else cannotCheckHere(t, check, `${prebuild} was not built: ${missing}`)
}

const run = (command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env) =>
  execFileSync(command, args, { cwd, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })

function scratch (t: Test, label: string): string {
  const directory = mkdtempSync(path.join(tmpdir(), `fastify-triton-shm-${label}-`))
  t.teardown(() => rmSync(directory, { recursive: true, force: true }))
  return directory
}

/** A fresh project depending on the tarball, with the consumer fixtures, installed with `env`. */
function installedProject (t: Test, tarball: string, env: NodeJS.ProcessEnv): string {
  const project = scratch(t, 'consumer')
  cpSync(tarball, path.join(project, path.basename(tarball)))
  cpSync(path.join(__dirname, 'fixtures/consumer'), project, { recursive: true })
  writeFileSync(path.join(project, 'package.json'), JSON.stringify({
    name: 'consumer',
    private: true,
    dependencies: {
      'fastify-triton-shm': `file:./${path.basename(tarball)}`,
      fastify: packageJson.devDependencies.fastify,
      '@types/node': packageJson.devDependencies['@types/node']
    }
  }))
  run(process.execPath, [npmCli(), 'install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], project, env)
  return project
}

const packDirectory = scratch(t, 'pack')
const tarball = path.join(packDirectory, run('npm', ['pack', '--silent', '--pack-destination', packDirectory], root).trim().split('\n').pop() as string)
const installed = (project: string) => path.join(project, 'node_modules/fastify-triton-shm')

t.test('the tarball carries the addon source, the build and a prebuild per platform', async (t) => {
  const contents = run('tar', ['-tzf', tarball], packDirectory).split('\n').filter(Boolean)
  t.ok(contents.includes('package/lib/native/shm.c') && contents.includes('package/binding.gyp'), 'ships the addon source')
  t.ok(contents.includes('package/docs/openapi.yaml'), 'ships the OpenAPI document the README links to')
  t.ok(contents.includes('package/docs/errors.md') && !contents.includes('package/docs/swagger-ui.png'),
    'ships the docs pages the README links to, not the screenshot')
  t.ok(contents.includes('package/proto/grpc_service.proto'), 'ships the gRPC protocol it serves')
  t.ok(['index.js', 'index.d.ts', 'index.mjs', 'index.d.mts'].every((file) => contents.includes(`package/dist/lib/${file}`)),
    'ships the build, CommonJS and its ESM entry')
  for (const prebuild of Object.values(prebuilds)) {
    withPrebuild(t, prebuild, `ships ${prebuild}`, () => t.ok(contents.includes(`package/${prebuild}`), `ships ${prebuild}`))
  }
  t.notOk(contents.some((file) => /^package\/(test|bench|example|build|scripts)\//.test(file)), 'ships no tests, benchmarks, scripts or build leftovers')
})

t.test('without a compiler, python or make: installs from the prebuild and serves the API', async (t) => {
  if (unbuildable.get(prebuilds.x64Glibc) !== undefined) return withPrebuild(t, prebuilds.x64Glibc, 'an install from the prebuild', () => {})
  const env = toolchainFreeEnv()
  t.teardown(() => rmSync(env.PATH as string, { recursive: true, force: true }))
  t.same(buildTools.filter((tool) => findOnPath(tool, env.PATH)), [], 'no build tool is reachable')
  const project = installedProject(t, tarball, env)
  t.notOk(existsSync(path.join(installed(project), 'build')), 'nothing was compiled at install')

  const key = uniqueKey('served')
  unlinkOnTeardown(t, key)
  const served = JSON.parse(run(process.execPath, ['serve.cjs', key], project, env))
  t.match(served, { register: 200, status: [{ name: 'served', key, offset: 0, byte_size: 64 }], unregister: 200 }, 'registers, reports and unregisters over HTTP')
  t.equal(served.addon, 'linux-x64/fastify-triton-shm.glibc.node', 'the x64 glibc prebuild served it')

  const tsc = (config: string) => run(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', config], project)
  t.doesNotThrow(() => tsc('tsconfig.json'), 'strict TypeScript, nodenext ESM and CommonJS, type-checks (and emits)')
  t.doesNotThrow(() => tsc('tsconfig.bundler.json'), 'strict TypeScript with bundler resolution type-checks')

  // Each style imports the plugin and the inference helpers its own way and runs one flow with them.
  const expected = {
    registered: 200,
    inferred: 200,
    doubled: [2, 4, 6, 8],
    missing: [404, { error: "Unable to find shared memory region: 'nowhere'" }],
    sharedRegistryClass: true,
    defaultIsNamed: true
  }
  const styles = {
    'CommonJS require': 'use.cjs',
    'Node ESM, .mjs': 'use.mjs',
    'Node ESM, "type": "module"': 'esm-package/use.js',
    'TypeScript nodenext ESM, as compiled': 'typed-esm.mjs',
    'TypeScript nodenext CommonJS, as compiled': 'typed-cjs.cjs'
  }
  for (const [style, file] of Object.entries(styles)) {
    const key = uniqueKey('consumer')
    unlinkOnTeardown(t, key)
    const result = JSON.parse(run(process.execPath, [file, key], project, env))
    t.match(result, expected, style)
    if (file !== 'use.mjs') continue
    t.same(result.notImportable, [], 'every name require() gives is an ESM named import too')
    t.equal(result.sameClasses, true, 'ESM and CommonJS share one copy of each class')
  }

  // onnxruntime-node is an optional peer dependency, not installed here: the package works without
  // it, and its adapter loads, and says what to install once it is used.
  t.throws(() => run(process.execPath, ['-e', "require.resolve('onnxruntime-node')"], project, env), 'onnxruntime-node is not installed')
  const adapter = run(process.execPath, ['--input-type=module', '-e',
    "import { OnnxRunner, onnxSignature, runSession } from 'fastify-triton-shm/onnxruntime'\n" +
    'const cjs = (await import("node:module")).createRequire(import.meta.url)("fastify-triton-shm/onnxruntime")\n' +
    'const error = await runSession({}, {}).catch((error) => error.message)\n' +
    "const runnerError = await new OnnxRunner().load('model.onnx').catch((error) => error.message)\n" +
    'console.log(JSON.stringify({ functions: [typeof onnxSignature, typeof cjs.runSession, typeof cjs.OnnxRunner], error, runnerError }))'], project, env)
  const install = "fastify-triton-shm/onnxruntime needs the package 'onnxruntime-node': npm install onnxruntime-node"
  t.same(JSON.parse(adapter), {
    functions: ['function', 'function', 'function'],
    error: install,
    runnerError: install
  }, 'fastify-triton-shm/onnxruntime from ESM and CommonJS, without the runtime: the runner too says what to install')

  // So are @grpc/grpc-js and @grpc/proto-loader: the plugin works without them, and the gRPC subpath says what to install.
  t.throws(() => run(process.execPath, ['-e', "require.resolve('@grpc/grpc-js')"], project, env), '@grpc/grpc-js is not installed')
  const grpc = run(process.execPath, ['-e',
    "const { inferenceService } = require('fastify-triton-shm/grpc')\n" +
    "console.log(require.resolve('fastify-triton-shm/grpc_service.proto').endsWith('proto/grpc_service.proto'))\n" +
    'try { inferenceService() } catch (error) { console.log(error.message) }'], project, env)
  t.same(grpc.trim().split('\n'), ['true', "fastify-triton-shm/grpc needs the package '@grpc/proto-loader': npm install @grpc/proto-loader"],
    'fastify-triton-shm/grpc without its optional peers')

  // So is better-sqlite3: a registry without sharedRegistry never loads it; with it, the error says what to install.
  t.throws(() => run(process.execPath, ['-e', "require.resolve('better-sqlite3')"], project, env), 'better-sqlite3 is not installed')
  const shared = run(process.execPath, ['-e',
    "const { Registry } = require('fastify-triton-shm')\n" +
    'new Registry().close()\n' +
    "try { new Registry({ sharedRegistry: { path: 'never-created.db' } }) } catch (error) { console.log(error.message) }"], project, env)
  t.equal(shared.trim(), "fastify-triton-shm: the sharedRegistry option needs the package 'better-sqlite3': npm install better-sqlite3",
    'sharedRegistry without better-sqlite3')

  // So is prom-client: only the metrics load it, and say what to install.
  t.throws(() => run(process.execPath, ['-e', "require.resolve('prom-client')"], project, env), 'prom-client is not installed')
  const metrics = run(process.execPath, ['-e',
    "const { ModelTable, tritonMetrics } = require('fastify-triton-shm')\n" +
    'new ModelTable([], { repository: true })\n' +
    'try { tritonMetrics() } catch (error) { console.log(error.message) }'], project, env)
  t.equal(metrics.trim(), "fastify-triton-shm: Triton metrics needs the package 'prom-client': npm install prom-client", 'the metrics without prom-client')

  t.test('the arm64 prebuild, under qemu with an arm64 Node: loads, maps, registers, leases, unregisters', async (t) => {
    if (unbuildable.get(prebuilds.arm64Glibc) !== undefined) return withPrebuild(t, prebuilds.arm64Glibc, 'the arm64 prebuild', () => {})
    const node = arm64Node()
    if ('missing' in node) return cannotCheckHere(t, 'the arm64 prebuild', node.missing)
    const key = uniqueKey('arm64')
    unlinkOnTeardown(t, key)
    const result = JSON.parse(node.run(['use-registry.cjs', key], project))
    t.same(result, { arch: 'arm64', seen: 7, regions: 0, addon: 'linux-arm64/fastify-triton-shm.glibc.node' })
  })
})

t.test('the glibc prebuilds load on glibc 2.28; the musl one needs no glibc', async (t) => {
  const project = scratch(t, 'unpacked')
  run('tar', ['-xzf', tarball, '-C', project], project)
  const needs = (prebuild: string) => glibcVersionsNeeded(path.join(project, 'package', prebuild))
  withPrebuild(t, prebuilds.x64Glibc, 'x64: nothing newer than glibc 2.2.5',
    () => t.same(needs(prebuilds.x64Glibc), ['2.2.5'], 'x64: nothing newer than glibc 2.2.5'))
  withPrebuild(t, prebuilds.arm64Glibc, 'arm64: nothing newer than glibc 2.17',
    () => t.same(needs(prebuilds.arm64Glibc), ['2.17'], 'arm64: nothing newer than glibc 2.17'))
  withPrebuild(t, prebuilds.x64Musl, 'x64 musl: links musl libc only, no glibc version', () => {
    t.same(needs(prebuilds.x64Musl), [], 'x64 musl: no glibc version')
    const libraries = run('readelf', ['--dynamic', path.join(project, 'package', prebuilds.x64Musl)], project)
    t.same([...libraries.matchAll(/\(NEEDED\).*\[(.+)\]/g)].map((match) => match[1]), ['libc.so'], 'x64 musl: links musl libc only')
  })
  t.pass('the musl prebuild loads', { skip: 'not loaded here: no Node built for musl can be had on this glibc machine' })
})

t.test('npm_config_build_from_source: the addon is built at install and used', async (t) => {
  const project = installedProject(t, tarball, { ...process.env, npm_config_build_from_source: 'true' })
  t.ok(existsSync(path.join(installed(project), 'build/Release/shm.node')), 'node-gyp built it')
  const key = uniqueKey('source')
  unlinkOnTeardown(t, key)
  const served = JSON.parse(run(process.execPath, ['serve.cjs', key], project))
  t.match(served, { register: 200, unregister: 200, addon: 'Release/shm.node' }, 'the source build served the API')
})

t.test('publishing refuses to go without every prebuild', async (t) => {
  // As on a machine with its own compiler only: prepublishOnly stops before anything is built.
  const env = crossToolchainFreeEnv()
  t.teardown(() => rmSync(env.PATH as string, { recursive: true, force: true }))
  const publish = spawnSync(process.execPath, [npmCli(), 'publish', '--dry-run', '--loglevel=error'], { cwd: root, env, encoding: 'utf8' })
  t.not(publish.status, 0, 'npm publish fails')
  t.match(publish.stdout + publish.stderr, /prebuild: every prebuild is required.*linux-x64 musl: no musl-gcc \(on Debian or Ubuntu: apt-get install musl-tools\).*linux-arm64 glibc: no aarch64-linux-gnu-gcc/,
    'naming each prebuild it cannot build, and what to install')
})
