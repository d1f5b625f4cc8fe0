/**
 * The KServe V2 model endpoints over real HTTP, as perf_analyzer and Triton's clients call them:
 * server and model metadata, Triton's model configuration field by field, inference with inputs
 * and outputs in system shared memory (`--shared-memory system --output-shared-memory-size 64`),
 * statistics whose counts match the requests sent, and Triton's errors. Then the plugin's own
 * options: readiness, prefix, `beforeRun`, the OpenAPI document, and options refused up front.
 */
import { once } from 'node:events'
import net from 'node:net'
import swagger from '@fastify/swagger'
import Fastify, { type FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
import { buildServer } from '../example/server'
import fastifyTritonShm, { type KServeModelsOptions, kserveModels, type ModelDeclaration, ModelTable } from '../lib/index'
import { version } from '../package.json'
import type { ModelConfigResponse, ModelStatistics } from '../types'
import { bytesOfValues, makeMappedObject, shmInput, shmOutput } from './helpers/kserve'
import { Gate, whenEvent } from './helpers/sync'

async function listen (t: Test, app: FastifyInstance): Promise<string> {
  t.teardown(() => app.close())
  return app.listen({ host: '127.0.0.1', port: 0 })
}

interface Answer { status: number, type: string | null, text: string }

async function request (url: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const response = await fetch(url, body === undefined ? {} : { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body), headers })
  return { status: response.status, type: response.headers.get('content-type'), text: await response.text() }
}

async function getJson<Body = Record<string, unknown>> (t: Test, url: string): Promise<Body> {
  const answer = await request(url)
  t.equal(answer.status, 200, url, { body: answer.text })
  t.match(answer.type, /^application\/json/)
  return JSON.parse(answer.text) as Body
}

const errorOf = async (url: string, body?: unknown) => {
  const { status, text } = await request(url, body)
  return { status, body: JSON.parse(text) as unknown }
}

const zero = { count: 0, ns: 0 }

t.test('perf_analyzer against the example: -m simple -i http --shared-memory system --output-shared-memory-size 64', async (t) => {
  const base = await listen(t, await buildServer({ fastify: { logger: false } }))

  // 1. Server metadata: statistics are asked for only when listed.
  const server = await getJson(t, `${base}/v2`)
  t.same(server, {
    name: 'triton',
    version,
    extensions: ['classification', 'sequence', 'model_repository', 'model_repository(unload_dependents)', 'model_configuration', 'system_shared_memory', 'binary_tensor_data', 'parameters', 'statistics', 'trace', 'logging']
  })

  // 2. Model metadata: the batch dimension is a leading -1, as max_batch_size is 8.
  const metadata = await getJson(t, `${base}/v2/models/simple`)
  const tensors = (prefix: string) => [0, 1].map((index) => ({ name: `${prefix}${index}`, datatype: 'INT32', shape: [-1, 16] }))
  t.same(metadata, { name: 'simple', versions: ['1'], platform: 'onnxruntime_onnx', inputs: tensors('INPUT'), outputs: tensors('OUTPUT') })

  // 3. The model configuration: every field perf_analyzer reads.
  const config = await getJson<ModelConfigResponse>(t, `${base}/v2/models/simple/config`)
  t.equal(config.max_batch_size, 8, 'max_batch_size: the batch dimension is dropped from the metadata shape')
  t.equal(config.model_transaction_policy.decoupled, false)
  t.equal(config.response_cache.enable, false)
  t.notOk('dynamic_batching' in config, 'no dynamic_batching: perf_analyzer would send batches expecting a batcher')
  t.notOk('sequence_batching' in config, 'no sequence_batching: perf_analyzer would send sequences')
  t.not(config.platform, 'ensemble')
  t.same(config.input.map(({ name, is_shape_tensor: shape, optional }) => [name, shape, optional]), [['INPUT0', false, false], ['INPUT1', false, false]])
  t.same(config.output.map(({ name, is_shape_tensor: shape }) => [name, shape]), [['OUTPUT0', false], ['OUTPUT1', false]])
  const metadataNames = [...metadata.inputs as Array<{ name: string }>, ...metadata.outputs as Array<{ name: string }>].map(({ name }) => name)
  t.ok([...config.input, ...config.output].every(({ name }) => metadataNames.includes(name)), 'every configured tensor is in the metadata')
  t.same(config.input[0], {
    name: 'INPUT0', data_type: 'TYPE_INT32', format: 'FORMAT_NONE', dims: [16], is_shape_tensor: false, allow_ragged_batch: false, optional: false, is_non_linear_format_io: false
  }, 'enums as strings, int64 dims as JSON numbers')
  t.same(config.output[1], { name: 'OUTPUT1', data_type: 'TYPE_INT32', dims: [16], label_filename: '', is_shape_tensor: false, is_non_linear_format_io: false })
  t.same([config.name, config.platform, config.backend, config.version_policy], ['simple', 'onnxruntime_onnx', 'onnxruntime', { specific: { versions: [1] } }])
  t.same(config.instance_group, [{ name: 'simple', kind: 'KIND_CPU', count: 1, gpus: [], secondary_devices: [], profile: [], passive: false, host_policy: '' }])
  t.same(await getJson(t, `${base}/v2/models/simple/versions/1/config`), config)

  // 4. Statistics before the run, then one region per tensor.
  const statsUrl = `${base}/v2/models/simple/stats`
  const [before] = (await getJson<{ model_stats: ModelStatistics[] }>(t, statsUrl)).model_stats
  t.same([before.name, before.version, before.inference_stats.queue, before.last_inference], ['simple', '1', zero, 0], 'never run: every count 0')
  const regions = ['INPUT0', 'INPUT1', 'OUTPUT0', 'OUTPUT1'].map((name) => ({ name, object: makeMappedObject(t, 64, name.toLowerCase()) }))
  for (const { name, object } of regions) {
    const answer = await request(`${base}/v2/systemsharedmemory/region/${name}/register`, { key: object.key, offset: 0, byte_size: 64 })
    t.equal(answer.status, 200, `registered ${name}`)
  }
  const [input0, input1, output0, output1] = regions.map(({ object }) => object.bytes)
  const body = (outputBytes = 64) => ({
    inputs: [shmInput('INPUT0', 'INT32', [1, 16], 'INPUT0', 64), shmInput('INPUT1', 'INT32', [1, 16], 'INPUT1', 64)],
    outputs: [shmOutput('OUTPUT0', 'OUTPUT0', outputBytes), shmOutput('OUTPUT1', 'OUTPUT1', outputBytes)]
  })

  // 5. Inferences: results read from the output regions.
  const REQUESTS = 5
  const ints = (bytes: Uint8Array) => Array.from(new Int32Array(bytes.buffer, bytes.byteOffset, 16))
  for (let round = 0; round < REQUESTS; round++) {
    const a = Array.from({ length: 16 }, (_, index) => index * round)
    const b = Array(16).fill(round)
    input0.set(bytesOfValues('INT32', a))
    input1.set(bytesOfValues('INT32', b))
    const json = JSON.stringify(body())
    // libcurl clients send the header length even when every tensor is in shared memory.
    const answer = await request(`${base}/v2/models/simple/infer`, json, round === 0 ? { 'inference-header-content-length': String(json.length) } : {})
    t.equal(answer.status, 200, answer.text)
    t.equal(answer.text, '{"model_name":"simple","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1,16]},' +
      '{"name":"OUTPUT1","datatype":"INT32","shape":[1,16]}]}', 'outputs in shared memory are listed without data')
    t.same(ints(output0), a.map((value, index) => value + b[index]), `round ${round}: OUTPUT0 in its region`)
    t.same(ints(output1), a.map((value, index) => value - b[index]), `round ${round}: OUTPUT1 in its region`)
  }
  // Failures of a found model count; an unknown model counts nowhere.
  const small = await errorOf(`${base}/v2/models/simple/infer`, body(32))
  t.same(small, {
    status: 400,
    body: { error: "shared memory size specified with the request for output 'OUTPUT0' (32 bytes) should be at least 64 bytes to hold the results" }
  })
  t.equal((await errorOf(`${base}/v2/models/simple/versions/1/infer`, { inputs: [] })).status, 400)
  t.equal((await errorOf(`${base}/v2/models/nope/infer`, body())).status, 404)

  // 6. Statistics after: perf_analyzer finds the version whose queue count grew.
  const [after] = (await getJson<{ model_stats: ModelStatistics[] }>(t, statsUrl)).model_stats
  const stats = after.inference_stats
  t.same([after.name, after.version], ['simple', '1'])
  t.same([stats.success.count, stats.fail.count, stats.queue.count], [REQUESTS, 2, REQUESTS], 'successes, failures, and every success in queue')
  t.same([stats.compute_input.count, stats.compute_infer.count, stats.compute_output.count], [REQUESTS, REQUESTS, REQUESTS])
  t.same([stats.cache_hit, stats.cache_miss], [zero, zero])
  t.same([after.execution_count, after.inference_count], [REQUESTS, REQUESTS], 'batches of one')
  t.ok(stats.success.ns > 0 && stats.compute_infer.ns > 0 && stats.fail.ns > 0)
  t.ok(Number.isInteger(after.last_inference) && Date.now() - after.last_inference < 60_000, 'last_inference: milliseconds since the epoch')
  t.same(after.batch_stats.map(({ batch_size: size, compute_infer: infer }) => [size, infer.count]), [[1, REQUESTS]])
  t.same([after.response_stats, after.memory_usage], [{}, []])
  t.same((await getJson<{ model_stats: ModelStatistics[] }>(t, `${base}/v2/models/simple/versions/1/stats`)).model_stats, [after])
  const all = (await getJson<{ model_stats: ModelStatistics[] }>(t, `${base}/v2/models/stats`)).model_stats
  const zeroModels = [1, 3].flatMap((count) => ['bool', 'float16', 'float32', 'object'].flatMap((type) => [`onnx_zero_${count}_${type}`, `onnx_nobatch_zero_${count}_${type}`]))
  // L0_infer_zero's libtorch identities, and its ensembles over the identity backend's nop models.
  const zeroKinds = ['1_bool', '1_float32', '3_float32']
  const libtorchZero = ['libtorch', 'libtorch_nobatch'].flatMap((prefix) => zeroKinds.map((kind) => `${prefix}_zero_${kind}`))
  const zeroEnsembles = ['fan', 'sequence', 'simple'].flatMap((prefix) => ['zero', 'zero_nobatch'].flatMap((batching) =>
    zeroKinds.map((kind) => `${prefix}_${batching}_zero_${kind}`)))
  t.same(all.map(({ name }) => name), [
    ...libtorchZero, ...zeroEnsembles, 'nop_TYPE_BOOL_-1', 'nop_TYPE_FP32_-1',
    'add_sub_fp32', 'custom_identity_int32', 'custom_zero_1_float32', 'ensemble', 'fan_repeat', 'identity', 'identity_bytes', 'identity_fp32',
    'identity_int32', 'input_all_optional', 'input_all_required', 'input_optional', 'mock_llm', 'nested_square',
    // Versions 1, 2 and 3.
    ...Array(3).fill('libtorch_nobatch_int32_int32_int32'),
    ...zeroModels, 'onnx_zero_1_object_1_element', 'parameter', 'repeat_int32', 'repeat_int32_non_decoupled', 'repeat_square', 'sequence_repeat',
    'simple', 'simple_dyna_sequence', 'simple_identity', 'simple_identity_int64', 'simple_int8', 'simple_repeat', 'simple_sequence', 'simple_string',
    'simple_string_dyna_sequence', 'square_int32', 'string_identity', 'tiny_classifier'
  ].sort(), 'every model, by name')
  t.same(all.find(({ name }) => name === 'simple'), after)
  t.same(all.find(({ name }) => name === 'simple_string')?.inference_stats.success, zero)

  t.equal((await request(`${base}/v2/systemsharedmemory/unregister`, '')).status, 200)
})

t.test('the example\'s other models: configuration of a model without a batch dimension, and of BYTES tensors', async (t) => {
  const base = await listen(t, await buildServer({ fastify: { logger: false } }))
  const any = await getJson<ModelConfigResponse>(t, `${base}/v2/models/add_sub_fp32/config`)
  t.same([any.max_batch_size, any.backend, any.platform, any.input[0].dims, any.input[0].data_type], [0, '', 'node', [-1], 'TYPE_FP32'])
  const strings = await getJson<ModelConfigResponse>(t, `${base}/v2/models/simple_string/versions/1/config`)
  t.same([strings.max_batch_size, strings.input[1].data_type, strings.output[0].dims], [8, 'TYPE_STRING', [16]])
})

t.test('errors for unknown models and versions, in Triton\'s words, on every model route', async (t) => {
  const base = await listen(t, await buildServer({ fastify: { logger: false } }))
  const unknown = { status: 404, body: { error: "Request for unknown model: 'nope' is not found" } }
  for (const route of ['', '/ready', '/config', '/stats']) {
    t.same(await errorOf(`${base}/v2/models/nope${route}`), unknown, `nope${route}`)
    t.same(await errorOf(`${base}/v2/models/simple/versions/2${route}`),
      { status: 404, body: { error: "Request for unknown model: 'simple' version 2 is not found" } }, `version 2${route}`)
    t.same(await errorOf(`${base}/v2/models/simple/versions/v1${route}`),
      { status: 400, body: { error: "Invalid model version: 'v1' is not a number" } }, `version v1${route}`)
  }
  t.same(await errorOf(`${base}/v2/models/nope/infer`, { inputs: [] }), unknown)
})

/** OUTPUT0 = INPUT0 as INT32 [-1]. */
const echo = (overrides: Partial<ModelDeclaration> = {}): ModelDeclaration => ({
  name: 'echo',
  inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [-1] }],
  outputs: [{ name: 'OUTPUT0', datatype: 'INT32', shape: [-1] }],
  run (infer) {
    const input = infer.input<Int32Array>('INPUT0')
    infer.output<Int32Array>('OUTPUT0', input.shape).set(input.data)
  },
  ...overrides
})

const echoBody = { inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [2], data: [4, 5] }] }

async function modelsApp (t: Test, options: Partial<KServeModelsOptions> & { models: ModelTable }, prefix?: string) {
  const app = Fastify()
  await app.register(fastifyTritonShm)
  await app.register(kserveModels, { ...options, ...(prefix !== undefined && { prefix }) })
  return { app, base: await listen(t, app) }
}

t.test('readiness: the server, a model, a version; unready versions answer as Triton answers', async (t) => {
  const table = new ModelTable([echo({ versions: ['1', '2'] }), echo({ name: 'loading', ready: false })])
  const { base } = await modelsApp(t, { models: table })
  const status = async (path: string) => (await request(base + path)).status
  t.equal(await status('/v2/health/live'), 200)
  t.equal(await status('/v2/health/ready'), 400, 'not ready while a model has no ready version')
  t.same(await request(`${base}/v2/models/loading/ready`), { status: 400, type: null, text: '' }, 'a model not ready: 400, no body')
  t.same(await errorOf(`${base}/v2/models/loading/versions/1/infer`, echoBody),
    { status: 503, body: { error: "Request for unknown model: 'loading' version 1 is not at ready state" } })
  t.same(await errorOf(`${base}/v2/models/loading`), { status: 404, body: { error: "Request for unknown model: 'loading' has no available versions" } })

  table.setReady('loading', '1', true)
  table.setReady('echo', '2', false)
  t.equal(await status('/v2/health/ready'), 200)
  t.equal(await status('/v2/models/loading/ready'), 200)
  t.equal(await status('/v2/models/echo/versions/2/ready'), 400)
  t.equal(await status('/v2/models/echo/versions/1/ready'), 200)
  const answer = await request(`${base}/v2/models/echo/infer`, echoBody)
  t.same(JSON.parse(answer.text), { model_name: 'echo', model_version: '1', outputs: [{ name: 'OUTPUT0', datatype: 'INT32', shape: [2], data: [4, 5] }] }, 'served by version 1, and says so')
  const stats = (await getJson<{ model_stats: ModelStatistics[] }>(t, `${base}/v2/models/echo/stats`)).model_stats
  t.same(stats.map(({ version, inference_stats: { success } }) => [version, success.count]), [['1', 1]], 'only ready versions are listed')
  t.same(await getJson(t, `${base}/v2`), { name: 'fastify-triton-shm', version: '', extensions: ['classification', 'sequence', 'model_configuration', 'system_shared_memory', 'binary_tensor_data', 'parameters', 'statistics', 'trace'] },
    'the default server name; the version is the host\'s to give')
})

t.test('an HTTP response names the version that ran, as Triton\'s do', async (t) => {
  const { base } = await modelsApp(t, { models: new ModelTable([echo({ versions: ['10', '2'] })]) })
  const versionOf = async (path: string) => JSON.parse((await request(`${base}${path}`, echoBody)).text).model_version
  t.equal(await versionOf('/v2/models/echo/infer'), '10', 'the newest by number, not the last listed')
  t.equal(await versionOf('/v2/models/echo/versions/2/infer'), '2', 'the version asked for')
  t.equal(await versionOf('/v2/models/echo/versions/010/infer'), '10', 'asked for 010: named as the table names it')
})

t.test('under a prefix, with beforeRun: its wait is queue time, and it sees the HTTP request', async (t) => {
  const seen: string[] = []
  const table = new ModelTable([echo()])
  const { base } = await modelsApp(t, {
    models: table,
    name: 'svc',
    version: '3.1',
    beforeRun: async (request, infer) => {
      seen.push(`${String(request.headers['x-trace'])} ${infer.model.name}`)
      await new Promise((resolve) => setTimeout(resolve, 30))
    }
  }, '/triton')
  t.same((await getJson(t, `${base}/triton/v2`)).version, '3.1')
  t.equal((await request(`${base}/v2`)).status, 404, 'nothing outside the prefix')
  const answer = await request(`${base}/triton/v2/models/echo/versions/1/infer`, echoBody, { 'x-trace': 'abc' })
  t.equal(answer.status, 200, answer.text)
  t.same(seen, ['abc echo'])
  const [stats] = table.statistics('echo').model_stats
  t.ok(stats.inference_stats.queue.ns >= 25e6, `queue holds the wait (${stats.inference_stats.queue.ns} ns)`)
})

t.test('the routes in a host\'s OpenAPI document: operationIds, tags, or hidden', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(swagger, { openapi: { info: { title: 't', version: '1' } } })
  await app.register(fastifyTritonShm, { openapi: { hide: true } })
  await app.register(kserveModels, { models: new ModelTable([echo()]) })
  await app.register(kserveModels, { models: new ModelTable([echo()]), openapi: { tags: ['Replica'], operationIdPrefix: 'replica_' }, prefix: '/replica' })
  await app.register(kserveModels, { models: new ModelTable([echo()]), openapi: { hide: true }, prefix: '/hidden' })
  await app.ready()
  const paths = (app.swagger() as unknown as { paths: Record<string, Record<string, { operationId: string, tags: string[], summary: string, description: string }>> }).paths
  const operations = Object.entries(paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, operation]) => ({ path, method, ...operation })))
  const ids = (prefix: string) => operations.filter(({ path }) => path.startsWith(`${prefix}/v2`)).map(({ method, path, operationId }) => `${method} ${path} ${operationId}`)
  t.same(ids(''), [
    'get /v2 serverMetadata', 'get /v2/health/live serverLive', 'get /v2/health/ready serverReady', 'get /v2/models/stats allModelStatistics',
    'get /v2/models/{model} modelMetadata', 'get /v2/models/{model}/ready modelReady', 'get /v2/models/{model}/config modelConfig',
    'get /v2/models/{model}/stats modelStatistics', 'post /v2/models/{model}/infer modelInfer',
    'post /v2/models/{model}/generate modelGenerate', 'post /v2/models/{model}/generate_stream modelGenerateStream',
    'get /v2/models/{model}/versions/{version} modelVersionMetadata', 'get /v2/models/{model}/versions/{version}/ready modelVersionReady',
    'get /v2/models/{model}/versions/{version}/config modelVersionConfig', 'get /v2/models/{model}/versions/{version}/stats modelVersionStatistics',
    'post /v2/models/{model}/versions/{version}/infer modelVersionInfer',
    'post /v2/models/{model}/versions/{version}/generate modelVersionGenerate',
    'post /v2/models/{model}/versions/{version}/generate_stream modelVersionGenerateStream',
    'get /v2/trace/setting traceSetting', 'post /v2/trace/setting traceSettingUpdate',
    'get /v2/models/{model}/trace/setting modelTraceSetting', 'post /v2/models/{model}/trace/setting modelTraceSettingUpdate'
  ])
  t.ok(operations.filter(({ path }) => path.startsWith('/v2')).every(({ tags, summary, description }) => tags[0] === 'KServe' && summary !== '' && description !== ''))
  t.ok(ids('/replica').every((id) => id.includes(' replica_')), 'the prefix goes before every operationId')
  t.ok(operations.filter(({ path }) => path.startsWith('/replica')).every(({ tags }) => tags[0] === 'Replica'))
  t.same(ids('/hidden'), [], 'hidden')
})

t.test('options are checked at registration', async (t) => {
  const refused = async (options: unknown, message: string) => {
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(fastifyTritonShm)
    await t.rejects(async () => { await app.register(kserveModels, options as KServeModelsOptions) }, { name: 'TypeError', message }, message)
  }
  const models = new ModelTable([echo()])
  await refused({}, "fastify-triton-shm models: option 'models' is required")
  await refused({ models: [echo()] }, "fastify-triton-shm models: option 'models' must be a ModelTable")
  await refused({ models, beforeRun: 'soon' }, "fastify-triton-shm models: option 'beforeRun' must be a function")
  await refused({ models, bodyLimit: 0 }, "fastify-triton-shm models: option 'bodyLimit' must be >= 1")
  await refused({ models, colour: 'red' }, "fastify-triton-shm models: unknown option 'colour'")
  await refused({ models, limits: { maxBytes: 1 } }, "fastify-triton-shm models: unknown option 'limits.maxBytes'")
  await refused({ models, decorator: 'elsewhere' },
    "fastify-triton-shm models: no registry at 'elsewhere': register fastify-triton-shm first (option 'decorator')")
})

t.test('the registry of another decorator, and the infer limits, are the ones given', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm, { decorator: 'shm' })
  await app.register(kserveModels, {
    models: new ModelTable([echo({ outputs: [{ name: 'OUTPUT0', datatype: 'BYTES', shape: [-1] }], run: (infer) => { infer.output('OUTPUT0', [3]) } })]),
    decorator: 'shm',
    limits: { maxBytesElements: 2, maxOutputBytes: 1024, sendTimeoutMs: 5000 },
    jsonLimit: 200
  })
  const object = makeMappedObject(t, 64, 'decorated')
  ;(app as unknown as { shm: { register (name: string, source: object): void } }).shm.register('r', { key: object.key, byteSize: 64 })
  const viaRegion = await app.inject({ method: 'POST', url: '/v2/models/echo/infer', payload: { inputs: [shmInput('INPUT0', 'INT32', [2], 'r', 8)] } })
  t.same(viaRegion.json(), { error: "tensor 'OUTPUT0' has 3 BYTES elements, more than the server's limit of 2" }, 'the region resolved; the limit applied')
  const long = await app.inject({ method: 'POST', url: '/v2/models/echo/infer', payload: { ...echoBody, id: 'x'.repeat(200) } })
  t.equal(long.statusCode, 400)
  t.match(long.json(), { error: /^request JSON size of \d+ bytes exceeds the maximum allowed input size of 200 bytes\. Use --http-max-input-size/ })
})

t.test('pipelined requests whose connection closes while they wait release their regions, and count as failed', async (t) => {
  const gate = new Gate(false)
  const table = new ModelTable([echo()])
  const { app, base } = await modelsApp(t, { models: table, beforeRun: gate.pass })
  const registry = app.systemSharedMemory
  const object = makeMappedObject(t, 64, 'pipelined')
  registry.register('r', { key: object.key, byteSize: 64 })
  const body = JSON.stringify({ inputs: [shmInput('INPUT0', 'INT32', [2], 'r', 8)] })
  const socket = net.connect(Number(new URL(base).port), '127.0.0.1')
  t.teardown(() => { socket.destroy() })
  await once(socket, 'connect')
  const PIPELINED = 3
  socket.write(`POST /v2/models/echo/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ${body.length}\r\n\r\n${body}`.repeat(PIPELINED))
  await gate.untilHeld(PIPELINED, 'the pipelined requests never reached their model')
  t.equal(registry.counters().liveLeases, PIPELINED, 'each holds its region')

  registry.unregister('r')
  t.ok(registry.has('r'), 'deferred while they hold it')
  const unmapped = whenEvent(registry, 'unregister', () => !registry.has('r'), 'a pipelined request kept its region after its connection closed')
  socket.destroy()
  await unmapped
  t.equal(registry.counters().liveLeases, 0, 'the responses waiting behind the first released theirs too')

  gate.open()
  // From the gate to the failure is promise jobs only, all run before the next turn of the loop.
  await new Promise((resolve) => setImmediate(resolve))
  t.equal(table.statistics('echo').model_stats[0].inference_stats.fail.count, PIPELINED, 'none ran: their client had gone')
  t.equal(table.statistics('echo').model_stats[0].execution_count, 0)
})
