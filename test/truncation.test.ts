/**
 * A client that shrinks (ftruncate) its object after registering it must not crash the server:
 * a lease that reaches past the object's end is refused, and the region with it from then on, and
 * a view that touches a page past the object's end reads zeros instead of killing the process with
 * SIGBUS.
 */
import { spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { truncateSync } from 'node:fs'
import path from 'node:path'
import t, { type Test } from 'tap'
import { Registry } from '../lib/index'
import { buildApp, SYSTEM } from './helpers/app'
import { assertEmptySuccess } from './helpers/http'
import { makeObject, mappingsOf, objectPath, PAGE_SIZE, uniqueKey, unlinkOnTeardown } from './helpers/shm'
import { PATIENCE_MS } from './helpers/sync'

const REGION_BYTES = 16 * PAGE_SIZE
const truncated = (name: string) => `shared memory region '${name}' is no longer usable: its object was truncated ` +
  'below the region. Unregister it, and register it again once the object is restored'

/** `byteSize` from the region's start: its first byte by default (refused only in a poisoned region). */
function refusedAsTruncated (t: Test, registry: Registry, name: string, byteSize = 1) {
  t.throws(() => registry.acquire(name, 0, byteSize), { code: 'ERR_SHM_REGION_TRUNCATED', kind: 'invalid', message: truncated(name) }, `${name}: refused as truncated`)
}

t.test('a lease past a shrunk object\'s end is refused, and the region from then on; status and unregister still work', async (t) => {
  const app = await buildApp(t)
  const key = makeObject(t, REGION_BYTES)
  app.systemSharedMemory.register('r', { key, byteSize: REGION_BYTES })
  app.systemSharedMemory.acquire('r', 0, REGION_BYTES).release()

  truncateSync(objectPath(key), REGION_BYTES - PAGE_SIZE)
  const head = app.systemSharedMemory.acquire('r', 0, REGION_BYTES - PAGE_SIZE)
  t.equal(head.buffer.length, REGION_BYTES - PAGE_SIZE, 'a lease inside what is left is served')
  head.release()
  refusedAsTruncated(t, app.systemSharedMemory as Registry, 'r', REGION_BYTES)
  refusedAsTruncated(t, app.systemSharedMemory as Registry, 'r')
  const status = await app.inject({ method: 'GET', url: `${SYSTEM}/region/r/status` })
  t.equal(status.statusCode, 200, 'status still answers')
  assertEmptySuccess(t, await app.inject({ method: 'POST', url: `${SYSTEM}/region/r/unregister` }))
  t.same(mappingsOf(key), [], 'unmapped')
})

t.test('a region inside what is left of the object stays usable', async (t) => {
  const registry = new Registry()
  t.teardown(() => registry.close())
  const key = makeObject(t, REGION_BYTES)
  registry.register('head', { key, byteSize: PAGE_SIZE })
  registry.register('tail', { key, offset: PAGE_SIZE, byteSize: PAGE_SIZE })
  truncateSync(objectPath(key), PAGE_SIZE)
  const lease = registry.acquire('head', 0, PAGE_SIZE)
  t.equal(lease.buffer.length, PAGE_SIZE, 'the region that still fits is leased')
  lease.release()
  refusedAsTruncated(t, registry, 'tail')
})

t.test('touching a page past the end reads zeros instead of SIGBUS, and poisons the region', async (t) => {
  const registry = new Registry()
  t.teardown(() => registry.close())
  const key = makeObject(t, REGION_BYTES)
  registry.register('r', { key, byteSize: REGION_BYTES })
  const lease = registry.acquire('r', 0, REGION_BYTES)
  lease.buffer.fill(7)

  truncateSync(objectPath(key), 2 * PAGE_SIZE)
  t.equal(lease.buffer[PAGE_SIZE], 7, 'a page still inside the object keeps its bytes')
  t.equal(lease.buffer[5 * PAGE_SIZE], 0, 'a page past the end reads zero: the process survived SIGBUS')
  lease.buffer[10 * PAGE_SIZE] = 9
  t.equal(lease.buffer[10 * PAGE_SIZE], 9, 'writes past the end land in private zero pages')

  truncateSync(objectPath(key), REGION_BYTES)
  refusedAsTruncated(t, registry, 'r')
  t.pass('restoring the size does not make a poisoned region usable again')
  lease.release()
  registry.unregister('r')
  t.same(mappingsOf(key), [], 'a poisoned region unmaps whole')
})

t.test('every lease is checked, beside live ones too, and a region no view ever touched past the end', async (t) => {
  const registry = new Registry()
  t.teardown(() => registry.close())
  const key = makeObject(t, REGION_BYTES)
  registry.register('r', { key, byteSize: REGION_BYTES })
  const first = registry.acquire('r', 0, PAGE_SIZE)
  first.buffer[0] = 7
  truncateSync(objectPath(key), 2 * PAGE_SIZE)
  t.throws(() => registry.acquire('r', 5 * PAGE_SIZE, PAGE_SIZE), { code: 'ERR_SHM_REGION_TRUNCATED' }, 'a lease past the end, beside a live one, is refused')
  refusedAsTruncated(t, registry, 'r')
  t.equal(first.buffer[0], 7, 'the live lease reads on: its page lies inside what is left')
  first.release()

  const other = makeObject(t, REGION_BYTES)
  registry.register('s', { key: other, byteSize: REGION_BYTES })
  registry.acquire('s', 0, PAGE_SIZE).release()
  truncateSync(objectPath(other), 2 * PAGE_SIZE)
  refusedAsTruncated(t, registry, 's', 3 * PAGE_SIZE)
})

t.test('a truncation within a lease\'s last page is not seen: the bytes past the object\'s end read zero', async (t) => {
  const registry = new Registry()
  t.teardown(() => registry.close())
  const key = makeObject(t, 2 * PAGE_SIZE)
  registry.register('r', { key, byteSize: 2 * PAGE_SIZE })
  const before = registry.acquire('r', 0, 2 * PAGE_SIZE)
  before.buffer[2 * PAGE_SIZE - 1] = 9
  before.release()
  truncateSync(objectPath(key), 2 * PAGE_SIZE - 1)
  const lease = registry.acquire('r', 0, 2 * PAGE_SIZE)
  t.equal(lease.buffer[2 * PAGE_SIZE - 1], 0, 'served; its last byte, past the end within the last page, reads zero')
  lease.release()
})

t.test('a child process truncates while the server reads and writes in a loop', async (t) => {
  const registry = new Registry()
  t.teardown(() => registry.close())
  const key = makeObject(t, REGION_BYTES)
  registry.register('r', { key, byteSize: REGION_BYTES })

  // The child truncates when told, once the loop has run a while; the loop goes on meanwhile.
  const child = spawn(process.execPath, ['-e', `
    const fs = require('node:fs')
    process.stdin.once('data', () => { fs.truncateSync(${JSON.stringify(objectPath(key))}, 0); process.exit(0) })
  `], { stdio: ['pipe', 'ignore', 'inherit'] })
  t.teardown(() => { if (child.exitCode === null) child.kill() })
  let childExited = false
  const exited = once(child, 'exit').finally(() => { childExited = true })
  const patience = setTimeout(() => child.kill(), PATIENCE_MS) // a child that never truncates ends the loop
  t.teardown(() => clearTimeout(patience))

  const TOLD_AFTER = 256
  let rounds = 0
  let refusal: unknown
  let roundsAfterExit = 0
  while (refusal === undefined && roundsAfterExit === 0) {
    // Once the child has exited, the object is truncated: this acquire must be refused.
    const exitedBefore = childExited
    try {
      const lease = registry.acquire('r', 0, REGION_BYTES)
      for (let index = 0; index < lease.buffer.length; index += 512) lease.buffer[index] = (lease.buffer[index] + 1) & 0xff
      lease.release()
      rounds++
      if (exitedBefore) roundsAfterExit++
      if (rounds === TOLD_AFTER) child.stdin.end('truncate\n')
      if (rounds % 64 === 0) await new Promise((resolve) => setImmediate(resolve))
    } catch (error) {
      refusal = error
    }
  }
  t.equal(roundsAfterExit, 0, 'no acquire succeeded once the child had truncated the object')
  t.same(await exited, [0, null], 'the child truncated the object and exited')
  t.ok(rounds >= TOLD_AFTER, `the server read and wrote the region ${rounds} times before the truncation`)
  t.match(refusal, { code: 'ERR_SHM_REGION_TRUNCATED', kind: 'invalid', message: truncated('r') }, 'then refused it as truncated')
  t.equal(registry.status().length, 1, 'the region is still listed, to be unregistered')
})

t.test('a SIGBUS that is not ours still reaches the handler that was there before', async (t) => {
  // Maps an object, which installs the guard, then removes the object's name (the mapping stays).
  const addonUser = `
    const shm = require(${JSON.stringify(path.join(__dirname, '../lib/addon/posix-shm'))})
    shm.createObject(process.argv[1], 4096)
    shm.mapObject(process.argv[1], 0, 4096)
    shm.unlinkObject(process.argv[1])
  `
  const run = (script: string) => {
    const key = uniqueKey('sigbus')
    unlinkOnTeardown(t, key)
    // The child compiles the module with tsx: its coverage would be merged under other line maps.
    const env = { ...process.env, _TAPJS_PROCESSINFO_COVERAGE_: '0' }
    return spawnSync(process.execPath, ['--import', 'tsx', '-e', script, key], { encoding: 'utf8', env })
  }

  const withListener = run(`process.on('SIGBUS', () => { console.log('previous handler ran'); process.exit(0) })
    ${addonUser}
    process.kill(process.pid, 'SIGBUS')
    setTimeout(() => process.exit(3), ${PATIENCE_MS})`) // only a child whose SIGBUS went nowhere waits this long
  t.equal(withListener.stdout.trim(), 'previous handler ran', 'a listener installed before is called')
  t.equal(withListener.status, 0)

  const withDefault = run(`${addonUser}
    process.kill(process.pid, 'SIGBUS')
    setTimeout(() => process.exit(3), ${PATIENCE_MS})`) // only a child whose SIGBUS went nowhere waits this long
  t.equal(withDefault.signal, 'SIGBUS', 'with no handler before, the default action still ends the process')
})
