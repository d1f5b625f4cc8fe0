/**
 * Triton's metrics over a real socket: every family served has Triton's name, type, help and
 * labels (test/fixtures/triton-metrics.json, copied from Triton's documentation and core), its
 * values are the statistics' (read at the scrape, counted once), summaries are Triton's when
 * asked for; the registry's gauges; the route's options; a host's own prom-client registry; and
 * prom-client as an optional peer.
 */
import { readFileSync } from 'node:fs'
import path from 'node:path'
import Fastify from 'fastify'
import { Counter, Registry as PromRegistry } from 'prom-client'
import t, { type Test } from 'tap'
import fastifyTritonShm, {
  DEFAULT_QUANTILES, kserveModels, type ModelDeclaration, ModelTable, TritonError, tritonMetrics, tritonMetricsPlugin, type TritonMetricsPluginOptions
} from '../lib/index'
import { InferenceStatistics } from '../lib/models/statistics'
import { MemoryModelStore } from '../lib/store/model-store'
import { makeObject, PAGE_SIZE } from './helpers/shm'
import { bool, int32Bytes, streamClient } from './helpers/stream'
import { storePath } from './helpers/registry-peer'

interface Family { name: string, type: string, help: string, labels: string[], latencyCounter?: true, summary?: true, histogram?: true }
const triton = JSON.parse(readFileSync(path.join(__dirname, 'fixtures', 'triton-metrics.json'), 'utf8')) as
  { failureReasons: string[], defaultQuantiles: number[], defaultBuckets: string[], perModel: Family[], notServed: Array<{ name: string }> }

interface Sample { name: string, labels: Record<string, string>, value: number }
interface Scrape { help: Map<string, string>, type: Map<string, string>, samples: Sample[] }

/** Prometheus' text format, as a scraper reads it (labels in the order printed). */
function parse (text: string): Scrape {
  const scrape: Scrape = { help: new Map(), type: new Map(), samples: [] }
  for (const line of text.split('\n')) {
    const meta = /^# (HELP|TYPE) (\S+) (.*)$/.exec(line)
    if (meta !== null) {
      scrape[meta[1] === 'HELP' ? 'help' : 'type'].set(meta[2], meta[3])
      continue
    }
    const sample = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (sample === null) continue
    const labels = Object.fromEntries([...(sample[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map(([, name, value]) => [name, value]))
    scrape.samples.push({ name: sample[1], labels, value: Number(sample[3]) })
  }
  return scrape
}

const value = (scrape: Scrape, name: string, labels: Record<string, string>) =>
  scrape.samples.find((sample) => sample.name === name && Object.entries(labels).every(([key, label]) => sample.labels[key] === label))?.value

const tensor = (name: string) => ({ name, datatype: 'INT32' as const, shape: [-1, 2] })
const declarations = (): ModelDeclaration[] => [{
  name: 'add',
  versions: ['1', '2'],
  maxBatchSize: 4,
  inputs: [tensor('INPUT0')],
  outputs: [tensor('OUTPUT0')],
  run (infer) {
    if (infer.id === 'backend') throw new TritonError('ERR_TEST', 'invalid', 'the model refused')
    const { data, shape } = infer.input<Int32Array>('INPUT0')
    infer.output<Int32Array>('OUTPUT0', shape).set(data)
  }
}, { name: 'other', inputs: [], outputs: [], run () {} }]

const body = (batch: number, id = '') => JSON.stringify({ id, inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [batch, 2], data: Array(batch * 2).fill(3) }] })

async function service (t: Test, options: Partial<TritonMetricsPluginOptions> = {}, store?: string) {
  const table = new ModelTable(declarations(), { repository: true })
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm, store === undefined ? {} : { sharedRegistry: { path: store } })
  await app.register(kserveModels, {
    models: table,
    beforeRun: (request) => { if (request.headers['x-busy'] === 'yes') throw new TritonError('ERR_TEST', 'exhausted', 'busy') }
  })
  await app.register(tritonMetricsPlugin, { models: table, ...options })
  const url = await app.listen({ host: '127.0.0.1', port: 0 })
  const infer = async (batch: number, id = '', headers: Record<string, string> = {}) =>
    (await fetch(`${url}/v2/models/add/infer`, { method: 'POST', body: body(batch, id), headers })).status
  const scrape = async (route = '/metrics') => {
    const response = await fetch(url + route)
    return { status: response.status, type: response.headers.get('content-type'), text: await response.text() }
  }
  return { app, table, url, infer, scrape }
}

t.test('every family has Triton\'s name, type, help and labels', async (t) => {
  const { infer, scrape } = await service(t, { summaries: true, histograms: true })
  await infer(2)
  const answer = await scrape()
  t.equal(answer.status, 200)
  t.equal(answer.type, 'text/plain; version=0.0.4; charset=utf-8', 'Prometheus\' text format')
  const { help, type, samples } = parse(answer.text)
  for (const family of triton.perModel) {
    t.equal(type.get(family.name), family.type, `${family.name}: ${family.type}`)
    t.equal(help.get(family.name), family.help, `${family.name}: Triton's help`)
    // A histogram's samples are its buckets (and its _sum and _count, below).
    const own = samples.filter((sample) => sample.name === (family.histogram === true ? `${family.name}_bucket` : family.name))
    t.ok(own.length > 0, `${family.name}: served`)
    const labels = family.summary === true ? [...family.labels, 'quantile'] : family.histogram === true ? [...family.labels, 'le'] : family.labels
    t.same([...new Set(own.map((sample) => Object.keys(sample.labels).join(',')))], [labels.join(',')], `${family.name}: labels ${labels}, in Triton's order`)
  }
  const reasons = samples.filter((sample) => sample.name === 'nv_inference_request_failure' && sample.labels.model === 'add' && sample.labels.version === '2')
  t.same(reasons.map((sample) => sample.labels.reason), triton.failureReasons, 'a failure count for each of Triton\'s reasons')
  const quantiles = samples.filter((sample) => sample.name === 'nv_inference_queue_summary_us' && sample.labels.version === '2')
  t.same(quantiles.map((sample) => Number(sample.labels.quantile)), triton.defaultQuantiles, 'Triton\'s default quantiles')
  t.same(DEFAULT_QUANTILES, triton.defaultQuantiles)
  const buckets = samples.filter((sample) => sample.name === 'nv_inference_first_response_histogram_ms_bucket' && sample.labels.version === '2')
  t.same(buckets.map((sample) => sample.labels.le), triton.defaultBuckets, 'Triton\'s default buckets')
  for (const family of triton.perModel.filter(({ summary, histogram }) => summary === true || histogram === true)) {
    t.ok(samples.some((sample) => sample.name === `${family.name}_sum`) && samples.some((sample) => sample.name === `${family.name}_count`), `${family.name}: _sum, _count`)
  }
  const names = [...type.keys()]
  t.same(names.filter((name) => !name.startsWith('triton_shm_') && !triton.perModel.some((family) => family.name === name)), [],
    'every other family is this package\'s own (triton_shm_*)')
  t.same(names.filter((name) => triton.notServed.some((family) => family.name === name)), [])
  t.same([...new Set(samples.filter((sample) => sample.name.startsWith('nv_')).map((sample) => `${sample.labels.model}/${sample.labels.version}`))],
    ['add/1', 'add/2', 'other/1'], 'every loaded version')
})

t.test('the values are the statistics\', read at each scrape', async (t) => {
  const { infer, scrape, table, app } = await service(t, { summaries: { quantiles: [0.5, 1], maxAgeSeconds: 3600 } })
  t.same([await infer(2), await infer(1), await infer(3)], [200, 200, 200])
  t.same([await infer(1, 'backend'), await infer(5), await infer(1, '', { 'x-busy': 'yes' })], [400, 400, 503])
  const { text } = await scrape()
  const metrics = parse(text)
  const labels = { model: 'add', version: '2' }
  const [stats] = table.statistics('add', '2').model_stats
  const us = (ns: number) => Math.round(ns / 1000)
  t.equal(value(metrics, 'nv_inference_request_success', labels), 3)
  t.equal(value(metrics, 'nv_inference_count', labels), 6, 'batch elements')
  t.equal(value(metrics, 'nv_inference_exec_count', labels), 3)
  t.same(triton.failureReasons.map((reason) => value(metrics, 'nv_inference_request_failure', { ...labels, reason })), [1, 0, 1, 1],
    'REJECTED (admission refused it), BACKEND (the model failed), OTHER (a batch too large)')
  t.equal(value(metrics, 'nv_inference_pending_request_count', labels), 0)
  const phases = { request: 'success', queue: 'queue', compute_input: 'compute_input', compute_infer: 'compute_infer', compute_output: 'compute_output' } as const
  for (const [phase, statistic] of Object.entries(phases)) {
    const counter = value(metrics, `nv_inference_${phase}_duration_us`, labels) as number
    t.ok(Math.abs(counter - us(stats.inference_stats[statistic].ns)) <= 1, `${phase}: the statistics' ${statistic} time, in microseconds`)
    t.equal(value(metrics, `nv_inference_${phase}_summary_us_sum`, labels), counter, 'a summary\'s sum is its counter\'s')
    t.equal(value(metrics, `nv_inference_${phase}_summary_us_count`, labels), 3)
    const [median, top] = [0.5, 1].map((quantile) => value(metrics, `nv_inference_${phase}_summary_us`, { ...labels, quantile: String(quantile) }) as number)
    t.ok(median <= top && top <= counter, `${phase}: quantiles within the requests' times`)
  }
  t.ok(Number.isNaN(value(metrics, 'nv_inference_request_summary_us', { model: 'add', version: '1', quantile: '0.5' })), 'no request yet: NaN, as Triton')

  t.equal(await infer(1), 200)
  t.equal(value(parse((await scrape()).text), 'nv_inference_request_success', labels), 4, 'the next scrape reads again')
  t.equal(value(parse(await app.tritonMetrics.metrics()), 'nv_inference_request_success', labels), 4, 'counted once, however often scraped')

  table.unload('add')
  t.equal(parse((await scrape()).text).samples.filter((sample) => sample.labels.model === 'add').length, 0, 'an unloaded model has no metrics, as in Triton')
})

t.test('the first-response histogram, with `histograms`: each successful request\'s time to its response', async (t) => {
  const { infer, scrape } = await service(t, { histograms: true })
  t.same([await infer(2), await infer(1), await infer(1, 'backend')], [200, 200, 400])
  const metrics = parse((await scrape()).text)
  const labels = { model: 'add', version: '2' }
  const name = 'nv_inference_first_response_histogram_ms'
  t.equal(value(metrics, `${name}_count`, labels), 2, 'the successful requests (a failed one has no response)')
  const buckets = triton.defaultBuckets.map((le) => value(metrics, `${name}_bucket`, { ...labels, le }) as number)
  t.equal(buckets.at(-1), 2, '+Inf: every one')
  t.same(buckets, [...buckets].sort((a, b) => a - b), 'cumulative')
  const requestMs = (value(metrics, 'nv_inference_request_duration_us', labels) as number) / 1000
  const sum = value(metrics, `${name}_sum`, labels) as number
  t.ok(Number.isInteger(sum) && sum <= requestMs + 1, 'whole milliseconds, within the requests\' time')
  t.same(triton.defaultBuckets.map((le) => value(metrics, `${name}_bucket`, { model: 'add', version: '1', le })), [0, 0, 0, 0, 0], 'no request yet')

  const { scrape: scrapeDefault } = await service(t)
  t.notMatch((await scrapeDefault()).text, name, 'off by default, as Triton\'s histogram_latencies')
})

t.test('a decoupled request\'s first response is observed once; one that sends none, not at all', async (t) => {
  const table = new ModelTable([{
    name: 'countdown',
    decoupled: true,
    inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }],
    outputs: [{ name: 'OUT', datatype: 'INT32', shape: [1] }],
    async run (infer) {
      for (let left = infer.input<Int32Array>('IN').data[0]; left > 0; left--) {
        infer.output<Int32Array>('OUT', [1])[0] = left
        await infer.send()
      }
    }
  }])
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm, { grpc: { port: 0, models: table } })
  await app.register(tritonMetricsPlugin, { models: table, histograms: true })
  await app.ready()
  const stream = streamClient(t, app.tritonGrpc.port as number)
  const request = (id: string, count: number) => ({
    model_name: 'countdown',
    id,
    parameters: { triton_enable_empty_final_response: bool(true) },
    inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], parameters: {} }],
    raw_input_contents: [int32Bytes([count])]
  })
  stream.write(request('three', 3))
  stream.write(request('none', 0))
  // Three responses, then the final flag alone of each request.
  await stream.until(5)
  const metrics = parse(await app.tritonMetrics.metrics())
  const labels = { model: 'countdown', version: '1' }
  t.equal(value(metrics, 'nv_inference_request_success', labels), 2)
  t.equal(value(metrics, 'nv_inference_first_response_histogram_ms_count', labels), 1, 'the request that answered, once for its three responses')
})

t.test('a first response is counted in every bucket that holds its whole milliseconds', async (t) => {
  const statistics = new InferenceStatistics(new MemoryModelStore().cells('m', '1'))
  const times = (firstResponse?: number) => ({ start: 1000, read: 1000, runStart: 1000, ran: 1000, end: firstResponse ?? 1000, firstResponse })
  // 100.9 ms is 100 whole milliseconds (Triton divides nanoseconds by a million); 5001 is past every bound.
  for (const elapsed of [0.5, 100.9, 101, 2000, 5001]) statistics.succeeded(times(1000 + elapsed), 1)
  statistics.succeeded(times(), 1)
  t.same(statistics.totals().firstResponse, { count: 5, sumMs: 0 + 100 + 101 + 2000 + 5001, buckets: [2, 3, 4, 4] },
    'le 100: 0 and 100; le 500: and 101; le 2000 and 5000: and 2000; 5001 in +Inf (the count) alone; a request without a response in none')
})

t.test('the registry\'s gauges', async (t) => {
  const { app, scrape } = await service(t, { latencyCounters: false })
  const key = makeObject(t, PAGE_SIZE)
  app.systemSharedMemory.register('r', { key, byteSize: 100 })
  const lease = app.systemSharedMemory.acquire('r', 0, 10)
  t.teardown(() => lease.release())
  app.systemSharedMemory.unregister('r')
  t.throws(() => app.systemSharedMemory.acquire('missing', 0, 1))
  const metrics = parse((await scrape()).text)
  t.same(['regions', 'bytes_mapped', 'live_leases', 'deferred_unregisters'].map((name) => value(metrics, `triton_shm_${name}`, {})), [1, 100, 1, 1])
  t.equal(value(metrics, 'triton_shm_rejections', { code: 'ERR_SHM_REGION_NOT_FOUND' }), 1)
  t.equal(metrics.type.get('triton_shm_rejections'), 'counter')
  t.notOk(metrics.type.has('nv_inference_request_duration_us'), 'latency counters off, as Triton\'s counter_latencies=false')
  t.ok(metrics.type.has('nv_inference_request_success'))
})

t.test('with a shared registry: the metrics of every process, from whichever answers', async (t) => {
  const store = storePath(t)
  const [one, two] = [await service(t, {}, store), await service(t, {}, store)]
  await one.infer(1)
  await two.infer(2)
  await two.infer(2)
  for (const { scrape } of [one, two]) {
    const metrics = parse((await scrape()).text)
    t.equal(value(metrics, 'nv_inference_request_success', { model: 'add', version: '2' }), 3)
    t.equal(value(metrics, 'nv_inference_count', { model: 'add', version: '2' }), 5)
  }
})

t.test('the route: its path, a prefix, or none; a host\'s own prom-client registry', async (t) => {
  const prefixed = await service(t, { prefix: '/triton', url: '/prom' })
  t.equal((await prefixed.scrape('/triton/prom')).status, 200)
  t.equal((await prefixed.scrape()).status, 404)

  const register = new PromRegistry()
  const hosts = new Counter({ name: 'host_requests', help: 'The host\'s own', registers: [register] })
  hosts.inc(7)
  const none = await service(t, { url: false, register, decorator: false, summaries: true, histograms: true })
  t.equal((await none.scrape()).status, 404, 'no route: the host serves the registry')
  const text = await register.metrics()
  t.match(text, /^host_requests 7$/m, 'the host\'s metrics')
  t.match(text, /^nv_inference_request_success\{model="add",version="1"\} 0$/m, 'and these, in its registry')
  t.notMatch(text, /triton_shm_/, 'decorator false: no registry gauges')
  t.equal(none.app.tritonMetrics.register, register)
  register.resetMetrics()
  const afterReset = await register.metrics()
  t.match(afterReset, /^nv_inference_request_success\{model="add",version="1"\} 0$/m, 'a reset changes nothing: the values are read at each scrape')
  t.match(afterReset, /^nv_inference_first_response_histogram_ms_count\{model="add",version="1"\} 0$/m, 'the histogram\'s too')

  // Without fastify-triton-shm, the registry's gauges are left out.
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(tritonMetricsPlugin)
  t.equal(parse((await app.inject({ url: '/metrics' })).body).samples.length, 0, 'no models, no registry: nothing yet')
})

t.test('options are checked; prom-client is an optional peer', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await t.rejects(async () => { await app.register(tritonMetricsPlugin, { url: 'metrics' } as never).ready() }, { code: 'ERR_SHM_INVALID_OPTION', message: /^fastify-triton-shm metrics: option 'url'/ })
  const other = Fastify()
  t.teardown(() => other.close())
  await t.rejects(async () => { await other.register(tritonMetricsPlugin, { summaries: { quantiles: [2] } } as never).ready() }, { code: 'ERR_SHM_INVALID_OPTION' })
  const third = Fastify()
  t.teardown(() => third.close())
  await t.rejects(async () => { await third.register(tritonMetricsPlugin, { histograms: 'yes' } as never).ready() }, { code: 'ERR_SHM_INVALID_OPTION', message: /option 'histograms'/ })

  const missing = (name: string) => { throw Object.assign(new Error(`Cannot find module '${name}'`), { code: 'MODULE_NOT_FOUND' }) }
  t.throws(() => tritonMetrics({ load: missing }), {
    code: 'ERR_SHM_MISSING_PEER_DEPENDENCY',
    message: "fastify-triton-shm: Triton metrics needs the package 'prom-client': npm install prom-client"
  })
  const metrics = tritonMetrics()
  t.equal(await metrics.metrics(), '\n', 'nothing to report, in a registry of its own')
})
