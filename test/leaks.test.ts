/**
 * Nothing leaks: after hundreds of registrations over HTTP and programmatically, with leases,
 * deferred unregisters and every failing register path, closing the app leaves no shared memory
 * mapping in /proc/self/maps and no more file descriptors than before.
 */
import Fastify from 'fastify'
import t from 'tap'
import fastifyTritonShm from '../lib/index'
import { Registry } from '../lib/registry/registry'
import { httpStatusOf } from '../lib/http/error-handler'
import type { Lease } from '../types'
import { registerBody, SYSTEM } from './helpers/app'
import { makeObject, mappingsOf, openFdCount, PAGE_SIZE, shmMappings, uniqueKey } from './helpers/shm'
import { makeDirectory, makeFifo } from './helpers/special-objects'

const CYCLES = 300

t.test('a long workload, then close: no mapping and no descriptor left', async (t) => {
  // Objects and special files first: their cleanup is not part of what is measured.
  const size = 4 * PAGE_SIZE
  const keys = [makeObject(t, size, 'leak0'), makeObject(t, size, 'leak1'), makeObject(t, size, 'leak2')]
  const missing = uniqueKey('missing')
  const fifo = makeFifo(t)
  const directory = makeDirectory(t)

  const mappingsBefore = shmMappings()
  const fdsBefore = openFdCount()

  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm)
  await app.ready()
  const registry = app.systemSharedMemory
  const standalone = new Registry()
  t.teardown(() => standalone.close())

  const post = async (url: string, payload?: string) => app.inject({ method: 'POST', url: `${SYSTEM}${url}`, payload })
  const failures = new Map<string, number>()
  const expectFailure = async (label: string, name: string, key: string, byteSize: number, offset = 0) => {
    const response = await post(`/region/${name}/register`, registerBody(key, byteSize, offset))
    if (response.statusCode === 400) failures.set(label, (failures.get(label) ?? 0) + 1)
    let statusCode: number | undefined
    try {
      standalone.register(name, { key, offset, byteSize })
    } catch (error) {
      statusCode = httpStatusOf(error)
    }
    t.equal(statusCode, 400, label)
  }

  for (let cycle = 0; cycle < CYCLES; cycle++) {
    const key = keys[cycle % keys.length]
    const offset = (cycle * 97) % PAGE_SIZE // mostly not page-aligned
    const byteSize = 1 + (cycle * 131) % (2 * PAGE_SIZE)

    // Over HTTP: register, use, unregister.
    const registered = await post(`/region/http_${cycle % 7}/register`, registerBody(key, byteSize, offset))
    if (registered.statusCode !== 200) t.fail(`cycle ${cycle}: ${registered.body}`)
    const lease = registry.acquire(`http_${cycle % 7}`, 0, byteSize)
    lease.buffer[byteSize - 1] = cycle & 0xff
    const leased = cycle % 3 === 0
    if (!leased) lease.release()
    await post(`/region/http_${cycle % 7}/unregister`)
    if (leased) {
      if (!registry.has(`http_${cycle % 7}`)) t.fail(`cycle ${cycle}: the leased region left too early`)
      lease.release() // the deferred unregister completes here
    }
    if (registry.has(`http_${cycle % 7}`)) t.fail(`cycle ${cycle}: the region stayed`)

    // Programmatically, with a lease or two and a deferred unregister every other cycle.
    standalone.register('direct', { key, offset, byteSize })
    const leases: Lease[] = []
    for (let use = 0; use < cycle % 3; use++) leases.push(standalone.acquire('direct', 0, 1))
    standalone.unregister('direct')
    for (const each of leases) each.release()
    if (standalone.has('direct')) t.fail(`cycle ${cycle}: the direct region stayed`)

    // Every failing register path, both ways.
    if (cycle % 10 === 0) {
      await expectFailure('missing object', 'bad', missing, 1)
      await expectFailure('fifo', 'bad', fifo, 1)
      await expectFailure('directory', 'bad', directory, 1)
      await expectFailure('byte size 0', 'bad', key, 0)
      await expectFailure('beyond the object', 'bad', key, size - offset + 1, offset)
      await expectFailure('offset beyond the object', 'bad', key, 1, size + 1)
      await expectFailure('invalid key', 'bad', '/a/b', 1)
      await expectFailure('reserved key', 'bad', '/triton_python_backend_shm_region_0', 1)
      standalone.register('dup', { key, byteSize: 1 })
      await post('/region/dup/register', registerBody(key, 1))
      await expectFailure('duplicate', 'dup', key, 1)
      await post('/region/dup/unregister')
      standalone.unregister('dup')
    }
  }
  t.same(Object.fromEntries(failures), Object.fromEntries([
    'missing object', 'fifo', 'directory', 'byte size 0', 'beyond the object', 'offset beyond the object',
    'invalid key', 'reserved key', 'duplicate'
  ].map((label) => [label, CYCLES / 10])), 'every failing path failed every time over HTTP')
  t.equal(registry.status().length, 0)
  t.equal(standalone.status().length, 0)
  t.same(shmMappings(), mappingsBefore, 'the cycles left no mapping')

  // Unregister-all over HTTP with live leases, and regions left registered or leased at close.
  for (let index = 0; index < 20; index++) {
    await post(`/region/all_${index}/register`, registerBody(keys[index % 3], 64, index))
  }
  const held = [registry.acquire('all_3', 0, 8), registry.acquire('all_4', 0, 8)]
  await post('/unregister')
  t.same(registry.status().map((region) => region.name), ['all_3', 'all_4'], 'leased regions wait')
  held[0].release()
  t.same(registry.status().map((region) => region.name), ['all_4'])
  for (let index = 0; index < 5; index++) registry.register(`kept_${index}`, { key: keys[index % 3], offset: index, byteSize: 10 })
  const leftLeased = registry.acquire('kept_0', 0, 10)
  standalone.register('kept', { key: keys[0], byteSize: 100 })
  const standaloneLease = standalone.acquire('kept', 0, 100)
  t.ok(keys.every((key) => mappingsOf(key).length > 0), 'regions are mapped before close')

  await app.close()
  standalone.close()
  t.equal(held[1].buffer.length, 8, 'leases left at close still read their bytes until released')
  t.equal(leftLeased.buffer.length, 10)
  t.equal(standaloneLease.buffer.length, 100)
  held[1].release()
  leftLeased.release()
  standaloneLease.release()
  for (const lease of [held[1], leftLeased, standaloneLease]) t.equal(lease.buffer.length, 0, 'released after close: unmapped')

  t.same(shmMappings(), mappingsBefore, 'no shared memory mapping left in /proc/self/maps')
  for (const key of keys) t.same(mappingsOf(key), [], `${key}: not mapped`)
  t.equal(openFdCount(), fdsBefore, 'as many file descriptors as before')
})
