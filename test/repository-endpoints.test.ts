/**
 * The model repository extension over real sockets, HTTP and gRPC from one app and one table:
 * Triton's routes, RPCs, bodies, parameters and texts; the extension listed in the server's
 * metadata only where it is served; the .proto's messages with Triton's field numbers.
 */
import { loadSync } from '@grpc/proto-loader'
import Fastify from 'fastify'
import t, { type Test } from 'tap'
import fastifyTritonShm, { kserveModels, type ModelDeclaration, ModelTable, type ModelTableOptions } from '../lib/index'
import { GRPC_LOADER_OPTIONS, PROTO_PATH, repositoryHandlers } from '../lib/grpc'
import { grpcClient, startServer } from './helpers/grpc'
import { rawRequest } from './helpers/http'

const tensor = (name: string) => ({ name, datatype: 'INT32' as const, shape: [2] })
const calls: string[] = []

const declarations = (): ModelDeclaration[] => [
  {
    name: 'hooked',
    versions: ['1', '3'],
    inputs: [tensor('INPUT0')],
    outputs: [tensor('OUTPUT0')],
    run (infer) { infer.output<Int32Array>('OUTPUT0', [2]).set(infer.input<Int32Array>('INPUT0').data) },
    load: (version, { config, files }) => {
      calls.push(`load ${version}${config === undefined ? '' : ` ${config}`}${Object.entries(files).map(([name, bytes]) => ` ${name}=${Buffer.from(bytes)}`).join('')}`)
    },
    unload: (version) => { calls.push(`unload ${version}`) }
  },
  { name: 'plain', inputs: [tensor('INPUT0')], outputs: [tensor('OUTPUT0')], run () {} }
]

async function serve (t: Test, options: ModelTableOptions = { repository: { allowOverrides: true } }) {
  calls.length = 0
  const table = new ModelTable(declarations(), options)
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm, { grpc: { port: 0, models: table } })
  await app.register(kserveModels, { models: table, bodyLimit: 1024 * 1024 })
  const url = await app.listen({ host: '127.0.0.1', port: 0 })
  const post = async (path: string, body?: string, headers: Record<string, string> = {}) => {
    const response = await fetch(url + path, { method: 'POST', body, headers })
    return { status: response.status, type: response.headers.get('content-type'), body: await response.text() }
  }
  return { table, post, url, port: new URL(url).port, grpc: grpcClient(t, app.tritonGrpc.port as number) }
}

const error = (message: string) => JSON.stringify({ error: message })

t.test('HTTP: index, unload, load, with Triton\'s bodies and answers', async (t) => {
  const { post, url } = await serve(t)
  const index = await post('/v2/repository/index')
  t.same(index, {
    status: 200,
    type: 'application/json; charset=utf-8',
    body: JSON.stringify([
      { name: 'hooked', version: '1', state: 'READY' }, { name: 'hooked', version: '3', state: 'READY' }, { name: 'plain', version: '1', state: 'READY' }
    ])
  }, 'no body: every model')

  t.same(await post('/v2/repository/models/hooked/unload', ''), { status: 200, type: 'application/json', body: '' }, 'an empty 200, as Triton')
  t.same(JSON.parse((await post('/v2/repository/index', '{"ready":false}', { 'content-type': 'application/json' })).body).slice(0, 2), [
    { name: 'hooked', version: '1', state: 'UNAVAILABLE', reason: 'unloaded' }, { name: 'hooked', version: '3', state: 'UNAVAILABLE', reason: 'unloaded' }
  ])
  t.same(JSON.parse((await post('/v2/repository/index', '{"ready":true}')).body), [{ name: 'plain', version: '1', state: 'READY' }], 'the ready ones')
  t.equal((await fetch(`${url}/v2/models/hooked/ready`)).status, 400, 'an unloaded model is not ready')
  t.equal((await fetch(`${url}/v2/health/ready`)).status, 200, 'the server is')
  const infer = await post('/v2/models/hooked/infer', JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [2], data: [1, 2] }] }))
  t.same([infer.status, infer.body], [404, error("Request for unknown model: 'hooked' has no available versions")])

  t.equal((await post('/v2/repository/models/hooked/load')).status, 200)
  t.same(calls, ['unload 1', 'unload 3', 'load 1', 'load 3'])
  const config = JSON.stringify({ max_batch_size: 0 })
  const overrides = JSON.stringify({ parameters: { config, 'file:1/model.onnx': Buffer.from('graph').toString('base64') } })
  t.equal((await post('/v2/repository/models/hooked/load', overrides, { 'content-type': 'text/plain' })).status, 200, 'whatever the Content-Type')
  t.same(calls.slice(4), [`load 1 ${config} file:1/model.onnx=graph`, `load 3 ${config} file:1/model.onnx=graph`])
  t.same(await post('/v2/repository/models/hooked/unload', JSON.stringify({ parameters: { unload_dependents: true } })), { status: 200, type: 'application/json', body: '' })
  t.same(await post('/v2/repository/models/nope/unload'), { status: 200, type: 'application/json', body: '' }, 'an unknown model unloads, as in Triton')
})

t.test('HTTP: Triton\'s refusals', async (t) => {
  const { post } = await serve(t)
  const refused = async (path: string, body: string | undefined, status: number, message: string | RegExp) => {
    const answer = await post(path, body)
    t.equal(answer.status, status, `${path} ${body ?? ''}: ${status}`)
    t.match(JSON.parse(answer.body), { error: message })
  }
  await refused('/v2/repository/index', '{"ready":"yes"}', 400, "Invalid value for 'ready': expected a boolean")
  await refused('/v2/repository/index', '{"ready":', 400, /^failed to parse the request JSON buffer: /)
  await refused('/v2/repository/index', '[true]', 400, 'failed to parse the request JSON buffer: the body must be a JSON object')
  await refused('/v2/repository/models/nope/load', undefined, 500, "failed to load 'nope', failed to poll from model repository")
  await refused('/v2/repository/models/hooked/load', '{"parameters":{"config":{}}}', 400, "invalid value type for load parameter 'config', expected a string.")
  await refused('/v2/repository/models/hooked/load', '{"parameters":{"file:1/m":"not base64!"}}', 400,
    "invalid value type for load parameter 'file:1/m', expected a base64 string.")
  await refused('/v2/repository/models/hooked/load', '{"parameters":{"file:1/m":7}}', 400, "invalid value type for load parameter 'file:1/m', expected a base64 string.")
  await refused('/v2/repository/models/hooked/load', '{"parameters":{"colour":"blue"}}', 400, "unrecognized load parameter 'colour'.")
  await refused('/v2/repository/models/hooked/load', '{"parameters":[]}', 400, "failed to parse the request JSON buffer: 'parameters' must be a JSON object")
  await refused('/v2/repository/models/plain/load', '{"parameters":{"config":"{}"}}', 403, "failed to load 'plain': model 'plain' has no load hook to take a configuration or files")
  await refused('/v2/repository/models/hooked/unload', '{"parameters":{"unload_dependents":"yes"}}', 400,
    "invalid value type for 'unload_dependents' parameter, expected a boolean.")
  t.equal((await post('/v2/repository/models/hooked/unload', '{"parameters":"none"}')).status, 200, 'parameters that are no object name no unload_dependents')
})

t.test('gRPC: RepositoryIndex, RepositoryModelUnload, RepositoryModelLoad, with Triton\'s checks', async (t) => {
  const { grpc } = await serve(t)
  const index = async (ready = false) => (await grpc.call('RepositoryIndex', { ready })).models
  t.same(await index(), [
    { name: 'hooked', version: '1', state: 'READY', reason: '' }, { name: 'hooked', version: '3', state: 'READY', reason: '' },
    { name: 'plain', version: '1', state: 'READY', reason: '' }
  ])
  t.same(await grpc.call('RepositoryModelUnload', { model_name: 'hooked', parameters: { unload_dependents: { bool_param: true } } }), {})
  t.same((await index()).slice(0, 1), [{ name: 'hooked', version: '1', state: 'UNAVAILABLE', reason: 'unloaded' }])
  t.same(await index(true), [{ name: 'plain', version: '1', state: 'READY', reason: '' }])
  t.same(await grpc.call('ModelReady', { name: 'hooked' }), { ready: false })
  t.match(await grpc.fail('ModelInfer', { model_name: 'hooked' }), { code: 5, details: "Request for unknown model: 'hooked' has no available versions" })

  t.same(await grpc.call('RepositoryModelLoad', {
    model_name: 'hooked',
    parameters: { config: { string_param: '{}' }, 'file:3/model.onnx': { bytes_param: Buffer.from('graph') } }
  }), {})
  t.same(calls, ['unload 1', 'unload 3', 'load 1 {} file:3/model.onnx=graph', 'load 3 {} file:3/model.onnx=graph'])
  t.same(await grpc.call('ModelReady', { name: 'hooked', version: '3' }), { ready: true })

  const refused = async (method: string, request: object, code: number, details: string) =>
    t.match(await grpc.fail(method, request), { code, details }, details)
  await refused('RepositoryIndex', { repository_name: 'models' }, 12, "'repository_name' specification is not supported")
  await refused('RepositoryModelLoad', { repository_name: 'models', model_name: 'hooked' }, 12, "'repository_name' specification is not supported")
  await refused('RepositoryModelUnload', { repository_name: 'models', model_name: 'hooked' }, 12, "'repository_name' specification is not supported")
  await refused('RepositoryModelLoad', { model_name: 'nope' }, 13, "failed to load 'nope', failed to poll from model repository")
  await refused('RepositoryModelLoad', { model_name: 'hooked', parameters: { config: { bool_param: true } } }, 3,
    "invalid value type for load parameter 'config', expected string_param.")
  await refused('RepositoryModelLoad', { model_name: 'hooked', parameters: { 'file:1/m': { string_param: 'x' } } }, 3,
    "invalid value type for load parameter 'file:1/m', expected bytes_param.")
  await refused('RepositoryModelLoad', { model_name: 'hooked', parameters: { colour: { string_param: 'blue' } } }, 3, "unrecognized load parameter 'colour'.")
  await refused('RepositoryModelUnload', { model_name: 'hooked', parameters: { unload_dependents: { string_param: 'yes' } } }, 3,
    "invalid value type for 'unload_dependents' parameter, expected bool_param.")
  t.same(await grpc.call('RepositoryModelUnload', { model_name: 'nope' }), {}, 'an unknown model unloads, as in Triton')
})

t.test('overrides are refused unless the table allows them, over both transports', async (t) => {
  const { post, grpc } = await serve(t, { repository: true })
  const answer = await post('/v2/repository/models/hooked/load', '{"parameters":{"config":"{}"}}')
  t.equal(answer.status, 403)
  t.match(JSON.parse(answer.body).error, /^failed to load 'hooked': this server takes no model configuration or files with a load request/)
  t.match(await grpc.fail('RepositoryModelLoad', { model_name: 'hooked', parameters: { config: { string_param: '{}' } } }), { code: 7 })
  t.same(calls, [], 'no hook ran')
})

t.test('the extension is listed, and served, only by a table that serves it', async (t) => {
  const served = await serve(t)
  const extensions = async (url: string) => (await (await fetch(`${url}/v2`)).json() as { extensions: string[] }).extensions
  t.same(await extensions(served.url), [
    'classification', 'sequence', 'model_repository', 'model_repository(unload_dependents)', 'model_configuration', 'system_shared_memory', 'binary_tensor_data', 'parameters', 'statistics', 'trace'
  ], 'where Triton lists it')
  t.same((await served.grpc.call('ServerMetadata')).extensions, await extensions(served.url))

  const plain = await serve(t, {})
  t.notOk((await extensions(plain.url)).includes('model_repository'))
  t.notOk((await plain.grpc.call('ServerMetadata')).extensions.includes('model_repository'))
  t.equal((await plain.post('/v2/repository/index')).status, 404)
  t.match(await plain.grpc.fail('RepositoryIndex', {}), { code: 12 }, 'UNIMPLEMENTED')
})

t.test('the .proto carries Triton\'s messages and field numbers', async (t) => {
  type Field = { name: string, number: number }
  type MessageType = { type: { field: Field[], nestedType: Array<{ name: string, field: Field[] }>, oneofDecl?: Array<{ name: string }> } }
  const definition = loadSync(PROTO_PATH, GRPC_LOADER_OPTIONS) as unknown as Record<string, MessageType>
  const numbers = (message: string, nested?: string) => {
    const type = definition[`inference.${message}`].type
    const fields = nested === undefined ? type.field : (type.nestedType.find(({ name }) => name === nested) as { field: Field[] }).field
    return Object.fromEntries(fields.map(({ name, number }) => [name, number]))
  }
  t.same(numbers('ModelRepositoryParameter'), { bool_param: 1, int64_param: 2, string_param: 3, bytes_param: 4 })
  t.same(numbers('RepositoryIndexRequest'), { repository_name: 1, ready: 2 })
  t.same(numbers('RepositoryIndexResponse'), { models: 1 })
  t.same(numbers('RepositoryIndexResponse', 'ModelIndex'), { name: 1, version: 2, state: 3, reason: 4 })
  t.same(numbers('RepositoryModelLoadRequest'), { repository_name: 1, model_name: 2, parameters: 3 })
  t.same(numbers('RepositoryModelUnloadRequest'), { repository_name: 1, model_name: 2, parameters: 3 })
  t.same(numbers('RepositoryModelLoadResponse'), {})
  t.same(numbers('RepositoryModelUnloadResponse'), {})
})

t.test('a host\'s own grpc-js server serves the RPCs with repositoryHandlers', async (t) => {
  const table = new ModelTable(declarations(), { repository: true })
  const client = grpcClient(t, await startServer(t, repositoryHandlers(table)))
  t.same(await client.call('RepositoryModelUnload', { model_name: 'plain' }), {})
  t.same((await client.call('RepositoryIndex', { ready: true })).models.map(({ name }: { name: string }) => name), ['hooked', 'hooked'])
})

const TRAVERSAL = 'model name must not contain path traversal characters'
const EMPTY = 'Model name cannot be empty. Please enter a valid name to deploy.'

t.test('a name to load is checked as Triton checks it, over HTTP and gRPC: INVALID_ARG, an unload checks none', async (t) => {
  const { port, grpc } = await serve(t)
  // Sent as they are: a URL parser would resolve `..`, which Triton's clients send percent-encoded or not.
  const http = async (path: string) => {
    const { statusCode, body } = await rawRequest(Number(port), 'POST', path)
    return { statusCode, body: JSON.parse(body || '{}') }
  }
  for (const [segment, name] of [['..%2Fetc', '../etc'], ['%2Fetc%2Fpasswd', '/etc/passwd'], ['..', '..'], ['model%2F..', 'model/..'], ['%20..', ' ..']]) {
    t.same(await http(`/v2/repository/models/${segment}/load`), { statusCode: 400, body: { error: `invalid model name '${name}', ${TRAVERSAL}` } }, `HTTP load ${segment}`)
    t.same(await http(`/v2/repository/models/${segment}/unload`), { statusCode: 200, body: {} }, `HTTP unload ${segment}: no check, an unknown model`)
  }
  for (const segment of ['%20', '%09%0A%20']) {
    t.same(await http(`/v2/repository/models/${segment}/load`), { statusCode: 400, body: { error: EMPTY } }, `HTTP load ${segment}`)
  }
  t.same(await http('/v2/repository/models/..my_model/load'), { statusCode: 500, body: { error: "failed to load '..my_model', failed to poll from model repository" } },
    'a name with dots that traverses nothing is looked up')

  for (const name of ['../etc', 'a/../b', '..', '/etc/passwd', 'model/', '.. ']) {
    t.match(await grpc.fail('RepositoryModelLoad', { model_name: name }), { code: 3, details: `invalid model name '${name}', ${TRAVERSAL}` }, `gRPC load ${JSON.stringify(name)}`)
    t.same(await grpc.call('RepositoryModelUnload', { model_name: name }), {}, `gRPC unload ${JSON.stringify(name)}`)
  }
  for (const name of ['', ' ', '\t', ' \t \n ']) {
    t.match(await grpc.fail('RepositoryModelLoad', { model_name: name }), { code: 3, details: EMPTY }, `gRPC load ${JSON.stringify(name)}`)
  }
  t.match(await grpc.fail('RepositoryModelLoad', { model_name: 'model..1' }), { code: 13, details: "failed to load 'model..1', failed to poll from model repository" })
  t.same(calls, [], 'no hook ran')
})

t.test('control mode none, over HTTP and gRPC: the index served, load and unload refused with Triton\'s UNAVAILABLE', async (t) => {
  const { post, grpc, url } = await serve(t, { repository: { controlMode: 'none' } })
  const index = await post('/v2/repository/index')
  t.equal(index.status, 200)
  t.same(JSON.parse(index.body).map(({ name }: { name: string }) => name), ['hooked', 'hooked', 'plain'])
  t.same((await grpc.call('RepositoryIndex', { ready: true })).models.map(({ name }: { name: string }) => name), ['hooked', 'hooked', 'plain'])
  const refused = { status: 503, type: 'application/json', body: error('explicit model load / unload is not allowed if polling is enabled') }
  for (const name of ['hooked', 'nope', '..%2Fetc']) {
    for (const action of ['load', 'unload']) t.same(await post(`/v2/repository/models/${name}/${action}`), refused, `HTTP ${action} ${name}`)
  }
  for (const name of ['hooked', 'nope', '', '../etc']) {
    for (const method of ['RepositoryModelLoad', 'RepositoryModelUnload']) {
      t.match(await grpc.fail(method, { model_name: name }), { code: 14, details: 'explicit model load / unload is not allowed if polling is enabled' }, `${method} ${JSON.stringify(name)}`)
    }
  }
  t.same(calls, [], 'no hook ran')
  t.equal((await fetch(`${url}/v2/models/hooked/ready`)).status, 200, 'every model still served')
  const extensions = (await (await fetch(`${url}/v2`)).json() as { extensions: string[] }).extensions
  t.ok(extensions.includes('model_repository'), 'the extension is listed, as Triton lists it in every mode')
})
