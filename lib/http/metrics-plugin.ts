/**
 * Triton's metrics served from the host app: `GET /metrics` (under the plugin's `prefix`; another
 * `url`, or none), Prometheus' text format, and `app.tritonMetrics` for the host's own use (another
 * port, as Triton's 8002). Register it after fastify-triton-shm (its registry's gauges are
 * included) and with the model table the model endpoints serve.
 */
import type { FastifyInstance, FastifyPluginAsync, RegisterOptions } from 'fastify'
import fp from 'fastify-plugin'
import type { SystemSharedMemoryRegistry } from '../../types'
import * as errors from '../errors'
import { type TritonMetrics, tritonMetrics, type TritonMetricsOptions } from '../metrics/triton-metrics'
import { ModelTable } from '../models/model-table'
import { describeOptionProblem, validatorOf } from '../util/options-validator'
import { DEFAULT_DECORATOR } from './decorator'
import { HIDDEN } from './shared-memory-schemas'

export interface TritonMetricsPluginOptions extends Omit<TritonMetricsOptions, 'registry' | 'load'> {
  /** The scrape route's path; false serves none (the metrics are in `register` and
   * `app.tritonMetrics` for the host to serve). Default `/metrics`, as Triton's. */
  url?: string | false
  /** Prefix of the route. Default none. */
  prefix?: string
  /** The registry decorator whose gauges are included (`triton_shm_*`); false: none. Default
   * `systemSharedMemory`, when fastify-triton-shm was registered. */
  decorator?: string | false
}

export const METRICS_PLUGIN = 'fastify-triton-shm metrics'

const problemOf = validatorOf({
  type: 'object',
  additionalProperties: false,
  properties: {
    models: { instanceOf: ModelTable },
    register: { type: 'object' },
    latencyCounters: { type: 'boolean' },
    histograms: { type: 'boolean' },
    summaries: {
      anyOf: [
        { type: 'boolean' },
        {
          type: 'object',
          additionalProperties: false,
          properties: {
            quantiles: { type: 'array', items: { type: 'number', minimum: 0, maximum: 1 } },
            maxAgeSeconds: { type: 'number', exclusiveMinimum: 0 }
          }
        }
      ]
    },
    url: { anyOf: [{ type: 'string', pattern: '^/' }, { const: false }] },
    prefix: { type: 'string' },
    decorator: { anyOf: [{ type: 'string', minLength: 1 }, { const: false }] },
    logLevel: { type: 'string' },
    logSerializers: { type: 'object' }
  }
})

type LogOptions = Pick<RegisterOptions, 'logLevel' | 'logSerializers'>

const plugin: FastifyPluginAsync<TritonMetricsPluginOptions & LogOptions> = async (app, options) => {
  const problem = problemOf(options)
  if (problem !== undefined) throw errors.invalidOption(METRICS_PLUGIN, describeOptionProblem(problem))
  const { url = '/metrics', prefix, decorator = DEFAULT_DECORATOR, logLevel, logSerializers, ...metricsOptions } = options
  const registry = decorator !== false && app.hasDecorator(decorator)
    ? (app as unknown as Record<string, SystemSharedMemoryRegistry>)[decorator]
    : undefined
  // With a shared registry, the statistics the metrics read are the whole service's.
  if (registry !== undefined) metricsOptions.models?.serveWith(registry)
  const metrics = tritonMetrics({ ...metricsOptions, registry })
  app.decorate('tritonMetrics', metrics)
  if (url === false) return
  await app.register(async (child: FastifyInstance) => {
    child.get(url, { schema: HIDDEN }, async (_request, reply) => reply.type(metrics.contentType).send(await metrics.metrics()))
  }, { prefix, logLevel, logSerializers })
}

/**
 * Triton's Prometheus metrics of a model table (`nv_inference_*`: request success and failure by
 * reason, inference and execution counts, pending requests, cumulative durations, optional
 * summaries) and gauges of the shared memory registry (`triton_shm_*`), read from the statistics
 * at each scrape. Needs prom-client. Decorates `app.tritonMetrics`.
 */
export const tritonMetricsPlugin = fp(plugin, { fastify: '5.x', name: 'fastify-triton-shm-metrics' })

declare module 'fastify' {
  interface FastifyInstance {
    /** With the metrics plugin: its prom-client registry and the scrape's text. */
    tritonMetrics: TritonMetrics
  }
}
