/**
 * What other plugins observe: the registry's counters and events, and the README's metrics example
 * (fastify-metrics / prom-client) scraped over HTTP.
 */
import Fastify from 'fastify'
import fastifyMetrics from 'fastify-metrics'
import t from 'tap'
import fastifyTritonShm, { Registry, type SharedMemoryRegionStatus } from '../lib/index'
import { exposeSharedMemoryMetrics } from '../example/metrics'
import { makeObject, PAGE_SIZE } from './helpers/shm'

t.test('counters: regions, bytes mapped, live leases, deferred unregisters, rejections by code', async (t) => {
  const registry = new Registry()
  t.teardown(() => registry.close())
  const key = makeObject(t, PAGE_SIZE)
  t.same(registry.counters(), { regions: 0, bytesMapped: 0, liveLeases: 0, deferredUnregisters: 0, rejections: {} })

  registry.register('a', { key, byteSize: 100 })
  registry.register('b', { key, byteSize: 28 })
  const lease = registry.acquire('a', 0, 10)
  registry.unregister('a')
  t.throws(() => registry.register('b', { key, byteSize: 1 }))
  t.throws(() => registry.register('c', { key: '/', byteSize: 1 }))
  t.throws(() => registry.acquire('missing', 0, 1))
  t.throws(() => registry.acquire('b', 0, 29))
  t.throws(() => registry.register('d', undefined as never), 'a programming error, not a client one')
  t.same(registry.counters(), {
    regions: 2,
    bytesMapped: 128,
    liveLeases: 1,
    deferredUnregisters: 1,
    rejections: {
      ERR_SHM_DUPLICATE_REGION: 1,
      ERR_SHM_INVALID_KEY: 1,
      ERR_SHM_REGION_NOT_FOUND: 1,
      ERR_SHM_INVALID_RANGE: 1,
      ERR_SHM: 1
    }
  })
  lease.release()
  t.match(registry.counters(), { regions: 1, bytesMapped: 28, liveLeases: 0, deferredUnregisters: 0 })
})

t.test('events: register, and unregister when a region is really unmapped', async (t) => {
  const registry = new Registry()
  t.teardown(() => registry.close())
  const key = makeObject(t, PAGE_SIZE)
  const seen: string[] = []
  const record = (event: string) => (region: SharedMemoryRegionStatus) => seen.push(`${event} ${region.name} ${region.byte_size}`)
  registry.on('register', record('register'))
  registry.on('unregister', record('unregister'))

  registry.register('a', { key, byteSize: 64 })
  t.throws(() => registry.register('a', { key, byteSize: 64 }))
  const lease = registry.acquire('a', 0, 1)
  registry.unregister('a')
  t.same(seen, ['register a 64'], 'a refused register and a deferred unregister emit nothing')
  lease.release()
  t.same(seen, ['register a 64', 'unregister a 64'], 'unregister is emitted when the last lease ends')

  registry.register('b', { key, byteSize: 32 })
  registry.close()
  t.same(seen.slice(2), ['register b 32', 'unregister b 32'], 'close unmaps, so it emits unregister too')
})

t.test('the metrics example: fastify-metrics scrapes the registry', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm)
  await app.register(fastifyMetrics, { endpoint: '/metrics', clearRegisterOnInit: true, defaultMetrics: { enabled: false } })
  exposeSharedMemoryMetrics(app)
  await app.ready()

  const key = makeObject(t, PAGE_SIZE)
  app.systemSharedMemory.register('r', { key, byteSize: 512 })
  const lease = app.systemSharedMemory.acquire('r', 0, 8)
  t.teardown(() => lease.release())
  t.throws(() => app.systemSharedMemory.register('r', { key, byteSize: 512 }))

  const scrape = (await app.inject({ method: 'GET', url: '/metrics' })).body
  t.match(scrape, /^triton_shm_regions 1$/m)
  t.match(scrape, /^triton_shm_bytes_mapped 512$/m)
  t.match(scrape, /^triton_shm_live_leases 1$/m)
  t.match(scrape, /^triton_shm_deferred_unregisters 0$/m)
  t.match(scrape, /^triton_shm_rejections\{code="ERR_SHM_DUPLICATE_REGION"\} 1$/m)
})
