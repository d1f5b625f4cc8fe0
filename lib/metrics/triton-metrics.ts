/**
 * Triton's Prometheus metrics (docs/user_guide/metrics.md of triton-inference-server/server, the
 * names, types, help texts and labels of its core's metrics.cc), read from the model table's
 * statistics at each scrape: every value is a sum over the processes of the service (with a
 * shared registry), so nothing is counted twice, and a request costs nothing more than its
 * statistics. Besides Triton's, gauges of the shared memory registry.
 *
 * Built on prom-client (an optional peer dependency, loaded only here): the metrics go into the
 * host's prom-client registry when it gives one, so one scrape shows the host's and these.
 */
import type * as PromClient from 'prom-client'
import type { RegistryCounters, SystemSharedMemoryRegistry } from '../../types'
import type { ModelTable, VersionMetrics } from '../models/model-table'
import { FAILURE_REASONS, FIRST_RESPONSE_BUCKETS, SAMPLED_PHASES, type SampledPhase, type StatisticsTotals } from '../models/statistics'
import { optionalPeer } from '../util/optional-peer'

/** The part of a prom-client `Registry` the metrics are registered in. */
export interface MetricsRegister {
  registerMetric(metric: never): void
  metrics(): Promise<string>
  readonly contentType: string
}

export interface SummaryOptions {
  /** Quantiles reported (Triton's defaults: 0.5, 0.9, 0.95, 0.99, 0.999). */
  quantiles?: number[]
  /** Only requests that ended this recently count in the quantiles (seconds, default 60, as
   * Triton's Prometheus library). */
  maxAgeSeconds?: number
}

export interface TritonMetricsOptions {
  /** Triton's `nv_inference_*` metrics of every loaded version of these models. */
  models?: ModelTable
  /** Gauges of this registry (`triton_shm_*`). */
  registry?: SystemSharedMemoryRegistry
  /** The prom-client registry to register the metrics in (default: a new one). */
  register?: MetricsRegister
  /** Triton's `counter_latencies`: the cumulative `nv_inference_*_duration_us` counters. Default true. */
  latencyCounters?: boolean
  /** Triton's `summary_latencies`: the `nv_inference_*_summary_us` summaries. Default false. Their
   * quantiles are over the latest requests of each process (see docs/metrics.md); their sums and
   * counts are the counters'. */
  summaries?: boolean | SummaryOptions
  /** Triton's `histogram_latencies`: the `nv_inference_first_response_histogram_ms` histogram
   * (Triton's buckets 100, 500, 2000, 5000 ms). Default false. */
  histograms?: boolean
  /** Loads prom-client (default `require`): a stand-in for tests. */
  load?: (name: string) => unknown
}

export interface TritonMetrics {
  /** The prom-client registry holding the metrics. */
  readonly register: MetricsRegister
  /** The scrape's Content-Type (Prometheus' text format). */
  readonly contentType: string
  /** The scrape's text. */
  metrics(): Promise<string>
}

/** Triton's defaults (metric_model_reporter.h). */
export const DEFAULT_QUANTILES: readonly number[] = Object.freeze([0.5, 0.9, 0.95, 0.99, 0.999])
const DEFAULT_MAX_AGE_SECONDS = 60

type Labels = Record<string, string>

const LATENCY_HELP: Record<SampledPhase, [counter: string, summary: string]> = {
  request: ['Cumulative inference request duration in microseconds (includes cached requests)',
    'Summary of inference request duration in microseconds (includes cached requests)'],
  queue: ['Cumulative inference queuing duration in microseconds (includes cached requests)',
    'Summary of inference queuing duration in microseconds (includes cached requests)'],
  compute_input: ['Cumulative compute input duration in microseconds (does not include cached requests)',
    'Cumulative compute input duration in microseconds (does not include cached requests)'],
  compute_infer: ['Cumulative compute inference duration in microseconds (does not include cached requests)',
    'Cumulative compute inference duration in microseconds (does not include cached requests)'],
  compute_output: ['Cumulative inference compute output duration in microseconds (does not include cached requests)',
    'Cumulative inference compute output duration in microseconds (does not include cached requests)']
}

/** Labels as Triton's Prometheus library prints them: sorted by name. */
const versionLabels = ({ name, version }: VersionMetrics): Labels => ({ model: name, version })

/** The value at quantile `q` of ascending `sorted` (nearest rank); NaN with no value, as Triton. */
function quantileOf (sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]
}

interface CollectedValue { labels: Labels, value: number, metricName?: string }

type CollectedType = 'summary' | 'histogram'

/** What prom-client's registry serializes: a metric whose values are computed when scraped. */
interface CollectedMetric {
  name: string
  help: string
  type: CollectedType
  labelNames: string[]
  aggregator: 'sum'
  get(): Promise<{ name: string, help: string, type: CollectedType, aggregator: 'sum', values: CollectedValue[] }>
  reset(): void
}

/** The loaded versions with their totals, summed over the service's processes now. */
const totalsOf = (models: ModelTable) => models.metricVersions().map((version) => ({ version, totals: version.totals() }))

export function tritonMetrics (options: TritonMetricsOptions = {}): TritonMetrics {
  const client = optionalPeer<typeof PromClient>('prom-client', 'fastify-triton-shm: Triton metrics', options.load)
  const register = (options.register ?? new client.Registry()) as unknown as PromClient.Registry
  const { models, registry, latencyCounters = true, summaries = false, histograms = false } = options
  const registers = [register]
  const counter = (name: string, help: string, labelNames: string[], fill: (counter: PromClient.Counter) => void) =>
    new client.Counter({ name, help, labelNames, registers, collect () { this.reset(); fill(this) } })
  const gauge = (name: string, help: string, labelNames: string[], fill: (gauge: PromClient.Gauge) => void) =>
    new client.Gauge({ name, help, labelNames, registers, collect () { this.reset(); fill(this) } })
  /** A counter of one value per loaded model version. */
  const perVersion = (name: string, help: string, value: (totals: StatisticsTotals) => number) =>
    counter(name, help, ['model', 'version'], (metric) => {
      for (const { version, totals } of totalsOf(models as ModelTable)) metric.inc(versionLabels(version), value(totals))
    })

  // In the order Triton's core registers them.
  if (models !== undefined) {
    perVersion('nv_inference_request_success', 'Number of successful inference requests, all batch sizes', (totals) => totals.success)
    counter('nv_inference_request_failure', 'Number of failed inference requests, all batch sizes', ['model', 'reason', 'version'], (metric) => {
      for (const { version, totals } of totalsOf(models)) {
        for (const reason of FAILURE_REASONS) metric.inc({ model: version.name, reason, version: version.version }, totals.failures[reason])
      }
    })
    perVersion('nv_inference_count', 'Number of inferences performed (does not include cached requests)', (totals) => totals.inferenceCount)
    perVersion('nv_inference_exec_count', 'Number of model executions performed (does not include cached requests)', (totals) => totals.executionCount)
    if (latencyCounters) {
      for (const phase of SAMPLED_PHASES) perVersion(`nv_inference_${phase}_duration_us`, LATENCY_HELP[phase][0], (totals) => totals.microseconds[phase])
    }
    gauge('nv_inference_pending_request_count', 'Instantaneous number of pending requests awaiting execution per-model.', ['model', 'version'], (metric) => {
      for (const { version, totals } of totalsOf(models)) metric.set(versionLabels(version), totals.pending)
    })
    if (histograms) register.registerMetric(firstResponseHistogram(models) as unknown as PromClient.Metric)
    if (summaries !== false) {
      const { quantiles = DEFAULT_QUANTILES, maxAgeSeconds = DEFAULT_MAX_AGE_SECONDS } = summaries === true ? {} : summaries
      for (const phase of SAMPLED_PHASES) register.registerMetric(summary(models, phase, quantiles, maxAgeSeconds) as unknown as PromClient.Metric)
    }
  }

  if (registry !== undefined) {
    const registryGauge = (name: string, help: string, value: (counters: RegistryCounters) => number) =>
      gauge(`triton_shm_${name}`, help, [], (metric) => { metric.set(value(registry.counters())) })
    registryGauge('regions', 'System shared memory regions registered (of the whole registry)', (counters) => counters.regions)
    registryGauge('bytes_mapped', 'Bytes of all registered regions (of the whole registry)', (counters) => counters.bytesMapped)
    registryGauge('live_leases', 'Leases held by requests in flight in this process', (counters) => counters.liveLeases)
    registryGauge('deferred_unregisters', 'Regions unregistered while leased, waiting for their last lease (of the whole registry)',
      (counters) => counters.deferredUnregisters)
    counter('triton_shm_rejections', 'Refused registrations and uses of regions in this process, by error code', ['code'], (metric) => {
      for (const [code, count] of Object.entries(registry.counters().rejections)) metric.inc({ code }, count)
    })
  }

  return {
    register: register as unknown as MetricsRegister,
    contentType: register.contentType,
    metrics: () => register.metrics()
  }
}

/** Triton's first-response histogram of every loaded version: its buckets, cumulative, then `+Inf`, sum and count. */
function firstResponseHistogram (models: ModelTable): CollectedMetric {
  const name = 'nv_inference_first_response_histogram_ms'
  const help = 'Duration from request to first response in milliseconds'
  return {
    name,
    help,
    type: 'histogram',
    labelNames: ['model', 'version'],
    aggregator: 'sum',
    reset () {},
    async get () {
      const values: CollectedValue[] = []
      for (const { version, totals: { firstResponse } } of totalsOf(models)) {
        const labels = versionLabels(version)
        FIRST_RESPONSE_BUCKETS.forEach((bound, index) =>
          values.push({ metricName: `${name}_bucket`, labels: { ...labels, le: String(bound) }, value: firstResponse.buckets[index] }))
        values.push({ metricName: `${name}_bucket`, labels: { ...labels, le: '+Inf' }, value: firstResponse.count })
        values.push({ metricName: `${name}_sum`, labels, value: firstResponse.sumMs })
        values.push({ metricName: `${name}_count`, labels, value: firstResponse.count })
      }
      return { name, help, type: 'histogram', aggregator: 'sum', values }
    }
  }
}

/** A summary of one phase of every loaded version: quantiles of the requests that ended within
 * `maxAgeSeconds` (their latest in each process), sum and count of all of them (the counters'). */
function summary (models: ModelTable, phase: SampledPhase, quantiles: readonly number[], maxAgeSeconds: number): CollectedMetric {
  const name = `nv_inference_${phase}_summary_us`
  const help = LATENCY_HELP[phase][1]
  return {
    name,
    help,
    type: 'summary',
    labelNames: ['model', 'version'],
    aggregator: 'sum',
    reset () {},
    async get () {
      const since = Date.now() - maxAgeSeconds * 1000
      const values: CollectedValue[] = []
      for (const { version, totals } of totalsOf(models)) {
        const labels = versionLabels(version)
        const sorted = version.samples(since)[phase].sort((a, b) => a - b)
        // Microseconds, whole, as Triton observes them.
        for (const q of quantiles) values.push({ labels: { ...labels, quantile: String(q) }, value: Math.round(quantileOf(sorted, q)) })
        values.push({ metricName: `${name}_sum`, labels, value: totals.microseconds[phase] })
        values.push({ metricName: `${name}_count`, labels, value: totals.success })
      }
      return { name, help, type: 'summary', aggregator: 'sum', values }
    }
  }
}
