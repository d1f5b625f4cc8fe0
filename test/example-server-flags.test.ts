/**
 * The example service started with tritonserver's options, as a real child process: model control
 * mode none (the index served, load and unload refused over HTTP and gRPC) with its other options
 * taken (the metrics' settings too); explicit with --load-model; an endpoint switched off; the
 * logging flags; a refused option (its message once,
 * exit code 1), alone and at WORKERS=2; and every worker taking the options.
 */
import { rmSync } from 'node:fs'
import path from 'node:path'
import t, { type Test } from 'tap'
import type { RepositoryIndexEntry } from '../types'
import { grpcClient } from './helpers/grpc'
import { makeObject } from './helpers/shm'
import { ServiceLog, spawnServiceGroup } from './helpers/service-log'
import { type ServiceProcess, startServiceProcess } from './helpers/service-process'
import { bounded, PATIENCE_MS, whenEvent } from './helpers/sync'

const POLLING = 'explicit model load / unload is not allowed if polling is enabled'
const MODELS_ARE_CODE = 'the example\'s models are code: the model repository is not read'

const post = async (url: string, body?: string, headers: Record<string, string> = {}) => {
  const response = await fetch(url, { method: 'POST', body, headers })
  return { status: response.status, body: await response.text() }
}

const index = async (baseUrl: string) => JSON.parse((await post(`${baseUrl}/v2/repository/index`)).body) as RepositoryIndexEntry[]

const simpleRequest = (extra: object = {}) => JSON.stringify({
  ...extra,
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: [...Array(16).keys()] },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: Array(16).fill(1) }
  ]
})

/** Resolves once the service logged a line with `msg`. */
const logged = (service: ServiceProcess, msg: string) => whenEvent(service, 'line', () => service.lines.some((line) => line.msg === msg) || !service.alive,
  `the service never logged '${msg}'\n${service.other}`, 5 * PATIENCE_MS)

t.test('--model-control-mode=none: the index served, load and unload refused over HTTP and gRPC; the other options taken', async (t) => {
  const service = startServiceProcess(t, 256, { ALLOW_CLIENT_SHM: 'true' }, [
    '--model-control-mode=none', '--http-max-input-size', '2000', '--allow-client-shm=false',
    '--http-restricted-api=shared-memory:x-shm-key=s3cret', '--http-restricted-api=statistics,health:x-stats=1',
    '--grpc-restricted-protocol=health:k=v', '--grpc-max-response-pool-size=1', '--model-repository=/models', '--metrics-config=histogram_latencies=true',
    '--metrics-config', 'counter_latencies=false', '--metrics-config=summary_latencies=true', '--metrics-config=summary_quantiles=0.1:0.0.1,0.75:0.01'
  ])
  const baseUrl = await service.baseUrl()
  const grpc = grpcClient(t, await service.grpcPort())
  t.match(service.lines.find((line) => line.msg === MODELS_ARE_CODE), { modelRepository: ['/models'] }, '--model-repository taken, and logged as not read')

  const entries = await index(baseUrl)
  t.ok(entries.length > 5 && entries.every((entry) => entry.state === 'READY'), 'the index: every model, loaded')
  for (const action of ['load', 'unload']) {
    t.same(await post(`${baseUrl}/v2/repository/models/simple/${action}`), { status: 503, body: JSON.stringify({ error: POLLING }) }, `HTTP ${action}`)
  }
  for (const method of ['RepositoryModelLoad', 'RepositoryModelUnload']) {
    t.match(await grpc.fail(method, { model_name: 'simple' }), { code: 14, details: POLLING }, `gRPC ${method}: UNAVAILABLE`)
  }
  t.equal((await grpc.call('RepositoryIndex', {})).models.length, entries.length, 'the index over gRPC')

  // --http-max-input-size: the JSON of an infer body.
  const served = await post(`${baseUrl}/v2/models/simple/infer`, simpleRequest())
  t.equal(served.status, 200, served.body)
  const refused = await post(`${baseUrl}/v2/models/simple/infer`, simpleRequest({ id: 'x'.repeat(2000) }))
  t.equal(refused.status, 400)
  t.match(JSON.parse(refused.body).error, /2000/, 'a JSON part over the limit is refused, naming it')

  // --metrics-config: Triton's histogram, no latency counters, summaries of the quantiles named.
  const metrics = await (await fetch(`${baseUrl}/metrics`)).text()
  t.match(metrics, 'nv_inference_first_response_histogram_ms_count{model="simple",version="1"} 1', 'histogram_latencies=true: the request that answered')
  t.notMatch(metrics, '_duration_us', 'counter_latencies=false')
  const quantiles = new Set([...metrics.matchAll(/^nv_inference_request_summary_us\{model="simple",version="1",quantile="([^"]+)"\}/gm)].map(([, quantile]) => quantile))
  t.same([...quantiles], ['0.1', '0.75'], 'summary_latencies=true, summary_quantiles')

  // --http-restricted-api=shared-memory:..., and --allow-client-shm=false over ALLOW_CLIENT_SHM=true.
  t.equal((await fetch(`${baseUrl}/v2/systemsharedmemory/status`)).status, 403, 'restricted: refused without its header')
  t.equal((await fetch(`${baseUrl}/v2/systemsharedmemory/status`, { headers: { 'x-shm-key': 's3cret' } })).status, 200, 'served with it')
  const key = makeObject(t, 64, 'flags')
  const register = await post(`${baseUrl}/v2/systemsharedmemory/region/r/register`, JSON.stringify({ key, byte_size: 64 }), { 'x-shm-key': 's3cret' })
  t.equal(register.status, 501, 'the option wins over its variable: client shared memory is off')

  // Several --http-restricted-api groups, each with its header; --grpc-restricted-protocol restricts gRPC only.
  const stats = await fetch(`${baseUrl}/v2/models/stats`)
  t.same({ status: stats.status, body: await stats.text() }, { status: 403, body: JSON.stringify({ error: "This API is restricted, expecting header 'x-stats'" }) })
  t.equal((await fetch(`${baseUrl}/v2/health/live`, { headers: { 'x-stats': '1' } })).status, 200, 'served with its group\'s header')
  t.equal((await fetch(`${baseUrl}/v2/health/live`, { headers: { 'x-shm-key': 's3cret' } })).status, 403, 'not with another group\'s')
  t.match(await grpc.fail('ServerLive'), { code: 14, details: "This protocol is restricted, expecting header 'triton-grpc-protocol-k'" })
  t.same(await grpc.call('ServerLive', {}, { 'triton-grpc-protocol-k': 'v' }), { live: true }, 'gRPC health with its key')
  t.ok(await grpc.call('ModelStatistics', { name: 'simple' }), 'gRPC statistics: the HTTP option restricts HTTP only')
  t.same(await grpc.call('SystemSharedMemoryStatus', {}), { regions: {} }, 'gRPC shared memory: the HTTP option restricts HTTP only')
})

t.test('--model-control-mode=explicit --load-model=simple: only simple loaded at startup, the others on request; endpoints switched off', async (t) => {
  // PORT cannot be listened on: the option wins over its variable.
  const service = startServiceProcess(t, 256, { PORT: 'not-a-port' }, [
    '--model-control-mode', 'explicit', '--load-model=simple', '--http-port=0', '--allow-grpc=false', '--allow-metrics=false'
  ])
  const baseUrl = await service.baseUrl()
  const entries = await index(baseUrl)
  t.same(entries.filter((entry) => entry.state === 'READY').map(({ name }) => name), ['simple'], 'only the model --load-model names is loaded')
  t.match(entries.find((entry) => entry.name === 'simple_string'), { state: 'UNAVAILABLE', reason: 'unloaded' })
  t.equal((await fetch(`${baseUrl}/v2/health/ready`)).status, 200, 'the server is ready')
  t.same(await post(`${baseUrl}/v2/repository/models/simple_string/load`), { status: 200, body: '' }, 'explicit: a load is served')
  t.match((await index(baseUrl)).find((entry) => entry.name === 'simple_string'), { state: 'READY' })
  t.same(await post(`${baseUrl}/v2/repository/models/..%2Fetc/load`),
    { status: 400, body: JSON.stringify({ error: "invalid model name '../etc', model name must not contain path traversal characters" }) })

  t.notOk(service.lines.some((line) => line.msg === 'KServe gRPC listening'), '--allow-grpc=false: no gRPC listener (it binds before HTTP listens)')
  t.equal((await fetch(`${baseUrl}/metrics`)).status, 404, '--allow-metrics=false: no metrics')
})

t.test('--allow-http=false: gRPC and the metrics port served, HTTP not', async (t) => {
  const service = startServiceProcess(t, 256, {}, ['--allow-http=false', '--grpc-port=0', '--metrics-port=0'])
  const grpc = grpcClient(t, await service.grpcPort())
  await logged(service, 'HTTP not served (--allow-http=false)')
  t.notOk(service.lines.some((line) => /^Server listening at/.test(line.msg)), 'no HTTP listener')
  t.same(await grpc.call('ServerLive', {}), { live: true })
  const metricsPort = service.lines.find((line) => line.msg === 'Triton metrics listening')?.port
  const metrics = await fetch(`http://127.0.0.1:${metricsPort}/metrics`)
  t.equal(metrics.status, 200)
  t.match(await metrics.text(), /nv_inference_request_success/)
})

/** Starts the service with `args` and resolves once it exited and its output was read whole, with what it printed. */
async function refusedStart (t: Test, args: string[], env: Record<string, string> = {}) {
  const service = new ServiceLog(spawnServiceGroup(t, env, args))
  const code = await bounded(new Promise<number | null>((resolve) => service.child.once('close', resolve)), `the service started with ${args.join(' ')}`)
  return { code, printed: service.other, lines: service.lines }
}

const occurrences = (text: string, part: string) => text.split(part).length - 1

t.test('--log-*: the logging extension starts from them, and the logger writes as they say', async (t) => {
  const service = startServiceProcess(t, 256, {}, ['--log-verbose=2', '--log-warning=false', '--log-format=ISO8601'])
  const baseUrl = await service.baseUrl()
  t.same(await (await fetch(`${baseUrl}/v2/logging`)).json(),
    { log_file: '', log_info: true, log_warning: false, log_error: true, log_verbose_level: 2, log_format: 'ISO8601' })
  const times = service.lines.map((line) => (line as { time?: unknown }).time)
  t.ok(times.length > 0 && times.every((time) => typeof time === 'string' && !Number.isNaN(Date.parse(time))),
    'every line\'s time is an ISO 8601 date')
  const grpc = grpcClient(t, await service.grpcPort())
  const changed = await grpc.call('LogSettings', { settings: { log_verbose_level: { uint32_param: 0 } } })
  t.match(changed.settings.log_verbose_level, { uint32_param: 0 }, 'changed over gRPC')
  t.equal((await (await fetch(`${baseUrl}/v2/logging`)).json()).log_verbose_level, 0, 'and answered over HTTP')
})

t.test('an option the example does not take, or a bad value: refused at startup, said once, exit code 1', async (t) => {
  const unknown = await refusedStart(t, ['--model-control-mode=explicit', '--cache-config=local,size=1048576'])
  t.equal(unknown.code, 1)
  t.equal(occurrences(unknown.printed, "unrecognized option '--cache-config=local,size=1048576': the example service does not take it"), 1, unknown.printed)
  t.equal(occurrences(unknown.printed, '--model-control-mode'), 0, 'the options it takes are not named')

  const zero = await refusedStart(t, ['--http-max-input-size=0'], { WORKERS: '2' })
  t.equal(zero.code, 1)
  t.equal(occurrences(zero.printed, 'Error: --http-max-input-size must be greater than 0.'), 1, `once, as Triton's QA checks: ${zero.printed}`)
  t.same(zero.lines, [], 'WORKERS=2: the primary refused it before starting any worker')
})

t.test('WORKERS=2: every worker takes the options', async (t) => {
  const service = new ServiceLog(spawnServiceGroup(t, { WORKERS: '2' }, ['--model-control-mode=none', '--model-repository=/models']))
  const [start] = await service.until((line) => line.msg === 'starting workers that share one registry', 'the primary never started')
  t.teardown(() => rmSync(path.dirname(start.store!), { recursive: true, force: true }))
  const noted = await service.until((line) => line.msg === MODELS_ARE_CODE, 'the workers never read the options', 2, 5 * PATIENCE_MS)
  t.equal(new Set(noted.map((line) => line.pid)).size, 2, 'each worker read them')
  const [listening] = await service.until((line) => /^Server listening at/.test(line.msg), 'no worker listened', 1, 5 * PATIENCE_MS)
  const baseUrl = listening.msg.slice('Server listening at '.length)
  t.same(await post(`${baseUrl}/v2/repository/models/simple/unload`, undefined, { connection: 'close' }), { status: 503, body: JSON.stringify({ error: POLLING }) })
})
