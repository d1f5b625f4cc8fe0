/**
 * The packed tarball, installed into a fresh project as a user would, used from CommonJS, ESM and
 * strict TypeScript: proves what is published works, not just the source tree.
 */
import { execFileSync } from 'node:child_process'
import { cpSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import t from 'tap'
import { uniqueKey } from './helpers/shm'

const root = path.resolve(__dirname, '..')
const packageJson = require('../package.json') as { devDependencies: Record<string, string> }

const run = (command: string, args: string[], cwd: string) =>
  execFileSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })

t.test('the packed tarball installs and works from CJS, ESM and strict TypeScript', async (t) => {
  const project = mkdtempSync(path.join(tmpdir(), 'fastify-triton-shm-consumer-'))
  t.teardown(() => rmSync(project, { recursive: true, force: true }))

  const tarball = run('npm', ['pack', '--silent', '--pack-destination', project], root).trim().split('\n').pop() as string
  const contents = run('tar', ['-tzf', path.join(project, tarball)], project).split('\n').filter(Boolean)
  t.ok(contents.includes('package/lib/native/shm.c') && contents.includes('package/binding.gyp'), 'ships the addon source')
  t.ok(contents.includes('package/dist/lib/index.js') && contents.includes('package/dist/lib/index.d.ts'), 'ships the build')
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

  const cjs = JSON.parse(run(process.execPath, ['use.cjs', uniqueKey('cjs')], project))
  t.same(cjs, { status: 200, seen: 42, sameExport: true }, 'CommonJS')
  const esm = JSON.parse(run(process.execPath, ['use.mjs', uniqueKey('esm')], project))
  t.same(esm, { status: 200, regions: 1, sameExport: true }, 'ESM')
  t.doesNotThrow(() => run(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], project),
    'strict TypeScript type-checks')
})
