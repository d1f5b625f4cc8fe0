/**
 * The packed tarball, installed into a fresh project as a user would, used from CommonJS, ESM and
 * strict TypeScript: proves what is published works, not just the source tree.
 */
import { execFileSync } from 'node:child_process'
import { cpSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import t from 'tap'
import { uniqueKey, unlinkOnTeardown } from './helpers/shm'

const root = path.resolve(__dirname, '..')
const packageJson = require('../package.json') as { devDependencies: Record<string, string> }

// Packing, installing with a native build, compiling and running five consumers take minutes on a
// shared, loaded machine: more than the suite's per-file default.
t.setTimeout(600_000)

const run = (command: string, args: string[], cwd: string) =>
  execFileSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })

t.test('the packed tarball installs and works from CommonJS, Node ESM and strict TypeScript (nodenext ESM and CJS, bundler)', async (t) => {
  const project = mkdtempSync(path.join(tmpdir(), 'fastify-triton-shm-consumer-'))
  t.teardown(() => rmSync(project, { recursive: true, force: true }))

  const tarball = run('npm', ['pack', '--silent', '--pack-destination', project], root).trim().split('\n').pop() as string
  const contents = run('tar', ['-tzf', path.join(project, tarball)], project).split('\n').filter(Boolean)
  t.ok(contents.includes('package/lib/native/shm.c') && contents.includes('package/binding.gyp'), 'ships the addon source')
  t.ok(contents.includes('package/docs/openapi.yaml'), 'ships the OpenAPI document the README links to')
  t.ok(['index.js', 'index.d.ts', 'index.mjs', 'index.d.mts'].every((file) => contents.includes(`package/dist/lib/${file}`)),
    'ships the build, CommonJS and its ESM entry')
  t.notOk(contents.some((file) => /^package\/(test|bench|example|build)\//.test(file)), 'ships no tests, benchmarks or build leftovers')

  cpSync(path.join(__dirname, 'fixtures/consumer'), project, { recursive: true })
  writeFileSync(path.join(project, 'package.json'), JSON.stringify({
    name: 'consumer',
    private: true,
    dependencies: {
      'fastify-triton-shm': `file:./${tarball}`,
      fastify: packageJson.devDependencies.fastify,
      '@types/node': packageJson.devDependencies['@types/node']
    }
  }))
  run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], project)
  t.ok(readdirSync(path.join(project, 'node_modules/fastify-triton-shm/build/Release')).includes('shm.node'),
    'the addon was built at install')

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
    const result = JSON.parse(run(process.execPath, [file, key], project))
    t.match(result, expected, style)
    if (file !== 'use.mjs') continue
    t.same(result.notImportable, [], 'every name require() gives is an ESM named import too')
    t.equal(result.sameClasses, true, 'ESM and CommonJS share one copy of each class')
  }

  // onnxruntime-node is an optional peer dependency, not installed here: the package works without
  // it, and its adapter loads, and says what to install once it is used.
  t.throws(() => run(process.execPath, ['-e', "require.resolve('onnxruntime-node')"], project), 'onnxruntime-node is not installed')
  const adapter = run(process.execPath, ['--input-type=module', '-e',
    "import { onnxSignature, runSession } from 'fastify-triton-shm/onnxruntime'\n" +
    'const cjs = (await import("node:module")).createRequire(import.meta.url)("fastify-triton-shm/onnxruntime")\n' +
    'const error = await runSession({}, {}).catch((error) => error.message)\n' +
    'console.log(JSON.stringify({ functions: [typeof onnxSignature, typeof cjs.runSession], error }))'], project)
  t.same(JSON.parse(adapter), {
    functions: ['function', 'function'],
    error: "fastify-triton-shm/onnxruntime needs the package 'onnxruntime-node': npm install onnxruntime-node"
  }, 'fastify-triton-shm/onnxruntime from ESM and CommonJS, without the runtime')
})
