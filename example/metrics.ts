/**
 * Prometheus metrics of the shared memory registry with fastify-metrics (prom-client): gauges read
 * the registry's counters at each scrape, so they cost nothing between scrapes.
 */
import type { FastifyInstance } from 'fastify'
import type { SystemSharedMemoryRegistry } from '../lib/index'

type PromClient = typeof import('prom-client')

/** Adds `triton_shm_*` gauges to the app's fastify-metrics registry, and returns them. */
export function exposeSharedMemoryMetrics (app: FastifyInstance & { metrics: { client: PromClient } },
  registry: SystemSharedMemoryRegistry = app.systemSharedMemory) {
  const { Gauge } = app.metrics.client
  const gauge = (name: string, help: string, read: (counters: ReturnType<typeof registry.counters>) => number) =>
    new Gauge({ name: `triton_shm_${name}`, help, collect () { this.set(read(registry.counters())) } })
  return [
    gauge('regions', 'System shared memory regions registered', (counters) => counters.regions),
    gauge('bytes_mapped', 'Bytes of all registered regions', (counters) => counters.bytesMapped),
    gauge('live_leases', 'Leases held by requests in flight', (counters) => counters.liveLeases),
    gauge('deferred_unregisters', 'Regions waiting for their last lease to be unmapped', (counters) => counters.deferredUnregisters),
    new Gauge({
      name: 'triton_shm_rejections',
      help: 'Refused registrations and uses of regions, by error code',
      labelNames: ['code'],
      collect () {
        for (const [code, count] of Object.entries(registry.counters().rejections)) this.set({ code }, count)
      }
    })
  ]
}
