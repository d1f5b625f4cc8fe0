/**
 * Triton's restricted features (`--http-restricted-api`, `--grpc-restricted-protocol`): every
 * category on the routes and RPCs Triton puts in it, over a real Fastify instance and a real gRPC
 * listener with a grpc-js client; each group with its own header; refusals in Triton's words,
 * before the request is read; unknown and repeated categories refused at registration.
 */
import Fastify, { type FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
import { inferenceServiceHandlers, sharedMemoryService } from '../lib/grpc'
import fastifyTritonShm, {
  type ApiCaller, type FastifyTritonShmOptions, type KServeModelsOptions, kserveModels, ModelTable, Registry, SharedMemoryApi
} from '../lib/index'
import type { RestrictionGroup } from '../types'
import { grpcClient, listenGrpcPlugin, startServer } from './helpers/grpc'
import { sumModel } from './helpers/kserve'
import { streamClient } from './helpers/stream'

const GROUPS: RestrictionGroup[] = [
  { categories: ['model-repository'], header: 'Admin-Key', value: 'admin-value' },
  { categories: ['inference', 'metadata'], header: 'infer-key', value: 'infer-value' },
  { categories: ['health', 'model-config', 'statistics', 'shared-memory', 'trace', 'logging'], header: 'other-key', value: 'other' }
]
const ADMIN = { 'admin-key': 'admin-value' }
const INFER = { 'infer-key': 'infer-value' }
const OTHER = { 'other-key': 'other' }

/** A table serving `simple` and the model repository extension. */
const repositoryTable = () => {
  const { signature, execute } = sumModel()
  return new ModelTable([{ ...signature, run: execute }], { repository: true })
}

async function httpApp (t: Test, options: FastifyTritonShmOptions, models: Partial<KServeModelsOptions> = {}): Promise<FastifyInstance> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm, options)
  await app.register(kserveModels, { models: repositoryTable(), ...models })
  await app.ready()
  return app
}

const ones = Array(16).fill(1)
const inferBody = JSON.stringify({
  inputs: [0, 1].map((index) => ({ name: `INPUT${index}`, datatype: 'INT32', shape: [1, 16], data: ones }))
})

/** Every HTTP route of each category, with the headers of its group. */
const HTTP_ROUTES: Array<{ method: 'GET' | 'POST', url: string, body?: string, headers: Record<string, string>, header: string }> = [
  { method: 'GET', url: '/v2/health/live', headers: OTHER, header: 'other-key' },
  { method: 'GET', url: '/v2/health/ready', headers: OTHER, header: 'other-key' },
  { method: 'GET', url: '/v2/models/simple/ready', headers: OTHER, header: 'other-key' },
  { method: 'GET', url: '/v2/models/simple/versions/1/ready', headers: OTHER, header: 'other-key' },
  { method: 'GET', url: '/v2', headers: INFER, header: 'infer-key' },
  { method: 'GET', url: '/v2/models/simple', headers: INFER, header: 'infer-key' },
  { method: 'GET', url: '/v2/models/simple/versions/1', headers: INFER, header: 'infer-key' },
  { method: 'POST', url: '/v2/models/simple/infer', body: inferBody, headers: INFER, header: 'infer-key' },
  { method: 'POST', url: '/v2/models/simple/versions/1/infer', body: inferBody, headers: INFER, header: 'infer-key' },
  { method: 'GET', url: '/v2/models/simple/config', headers: OTHER, header: 'other-key' },
  { method: 'GET', url: '/v2/models/simple/versions/1/config', headers: OTHER, header: 'other-key' },
  { method: 'GET', url: '/v2/models/stats', headers: OTHER, header: 'other-key' },
  { method: 'GET', url: '/v2/models/simple/stats', headers: OTHER, header: 'other-key' },
  { method: 'GET', url: '/v2/models/simple/versions/1/stats', headers: OTHER, header: 'other-key' },
  { method: 'POST', url: '/v2/repository/index', headers: ADMIN, header: 'Admin-Key' },
  { method: 'POST', url: '/v2/repository/models/simple/load', headers: ADMIN, header: 'Admin-Key' },
  { method: 'POST', url: '/v2/repository/models/simple/unload', headers: ADMIN, header: 'Admin-Key' },
  { method: 'GET', url: '/v2/systemsharedmemory/status', headers: OTHER, header: 'other-key' },
  { method: 'POST', url: '/v2/systemsharedmemory/unregister', headers: OTHER, header: 'other-key' },
  { method: 'GET', url: '/v2/cudasharedmemory/status', headers: OTHER, header: 'other-key' }
]

const apiRefusal = (header: string) => ({ statusCode: 403, body: JSON.stringify({ error: `This API is restricted, expecting header '${header}'` }) })

t.test('HTTP: each route of a restricted category needs its group\'s header, with its value', async (t) => {
  const app = await httpApp(t, { restrictedApis: GROUPS }, { restrictedApis: GROUPS })
  for (const { method, url, body, headers, header } of HTTP_ROUTES) {
    const send = (sent: Record<string, string>) => app.inject({ method, url, ...(body !== undefined && { body }), headers: sent })
    const answer = (response: { statusCode: number, body: string }) => ({ statusCode: response.statusCode, body: response.body })
    t.same(answer(await send({})), apiRefusal(header), `${method} ${url}: refused without the header`)
    const [name] = Object.keys(headers)
    t.same(answer(await send({ [name]: 'wrong' })), apiRefusal(header), `${method} ${url}: refused with another value`)
    t.same(answer(await send({ ...ADMIN, ...INFER, ...OTHER, [name]: `${headers[name]}x` })), apiRefusal(header),
      `${method} ${url}: refused with a longer value, whatever the other groups' headers`)
    const served = await send({ [name.toUpperCase()]: headers[name] })
    t.equal(served.statusCode, 200, `${method} ${url}: served with its header (any case): ${served.body}`)
  }
})

t.test('HTTP: the check runs before the body is read, and open categories stay open', async (t) => {
  const app = await httpApp(t, {}, { restrictedApis: [GROUPS[1]] })
  const broken = (headers: Record<string, string>) => app.inject({ method: 'POST', url: '/v2/models/simple/infer', body: '{not json', headers })
  t.same((await broken({})).json(), { error: "This API is restricted, expecting header 'infer-key'" }, 'an unreadable body: refused first')
  t.equal((await broken(INFER)).statusCode, 400, 'with the header, the body is read and refused')
  t.equal((await app.inject({ method: 'GET', url: '/v2/health/live' })).statusCode, 200, 'health: not restricted')
  t.equal((await app.inject({ method: 'GET', url: '/v2/models/simple/stats' })).statusCode, 200, 'statistics: not restricted')
  t.equal((await app.inject({ method: 'POST', url: '/v2/repository/index' })).statusCode, 200, 'the repository: not restricted')
  t.equal((await app.inject({ method: 'GET', url: '/v2/systemsharedmemory/status' })).statusCode, 200,
    'shared memory: the models plugin\'s groups do not restrict the plugin\'s routes')
})

t.test('HTTP: restrictedApi is the shared-memory group', async (t) => {
  const app = await httpApp(t, { restrictedApi: { header: 'x-shm', value: 's' }, restrictedApis: [GROUPS[1]] })
  t.same((await app.inject({ method: 'GET', url: '/v2/systemsharedmemory/status' })).json(), { error: "This API is restricted, expecting header 'x-shm'" })
  t.equal((await app.inject({ method: 'GET', url: '/v2/systemsharedmemory/status', headers: { 'x-shm': 's' } })).statusCode, 200)
  t.equal((await app.inject({ method: 'GET', url: '/v2' })).statusCode, 200, 'the plugin\'s groups do not restrict the model endpoints')
})

/** Registration with `register` fails with `code` and `message`. */
async function refusedAtStartup (t: Test, register: (app: FastifyInstance) => PromiseLike<unknown>, code: string, message: string) {
  const app = Fastify()
  t.teardown(() => app.close())
  await t.rejects(async () => {
    await register(app)
    await app.ready()
  }, { code, message }, message)
}

t.test('unknown and repeated categories are refused at registration, in Triton\'s words', async (t) => {
  const group = (categories: string[], header = 'k') => ({ categories, header, value: 'v' }) as RestrictionGroup
  const registry = new Registry()
  t.teardown(() => registry.close())
  await refusedAtStartup(t, (app) => app.register(fastifyTritonShm, { restrictedApis: [group(['health']), group(['model-reposit', 'health'])] }),
    'ERR_SHM_UNKNOWN_RESTRICTED_CATEGORY', "fastify-triton-shm: unknown restricted api 'model-reposit'")
  await refusedAtStartup(t, (app) => app.register(fastifyTritonShm, { restrictedApis: [group(['model-repository', 'health']), group(['metadata', 'health'])] }),
    'ERR_SHM_REPEATED_RESTRICTED_CATEGORY', "fastify-triton-shm: restricted api 'health' can not be specified in multiple config groups")
  await refusedAtStartup(t, (app) => app.register(fastifyTritonShm, { restrictedApi: { header: 'a', value: 'b' }, restrictedApis: [group(['shared-memory'])] }),
    'ERR_SHM_REPEATED_RESTRICTED_CATEGORY', "fastify-triton-shm: restricted api 'shared-memory' can not be specified in multiple config groups")
  await refusedAtStartup(t, (app) => app.register(fastifyTritonShm, { grpc: { port: 0, restrictedProtocols: [group(['inference', 'inference'])] } }),
    'ERR_SHM_REPEATED_RESTRICTED_CATEGORY', "fastify-triton-shm grpc: restricted protocol 'inference' can not be specified in multiple config groups")
  await refusedAtStartup(t, (app) => app.register(fastifyTritonShm, { grpc: { port: 0, restrictedProtocols: [group(['Health'])] } }),
    'ERR_SHM_UNKNOWN_RESTRICTED_CATEGORY', "fastify-triton-shm grpc: unknown restricted protocol 'Health'")
  await refusedAtStartup(t, async (app) => {
    await app.register(fastifyTritonShm)
    await app.register(kserveModels, { models: repositoryTable(), restrictedApis: [group(['statistic'])] })
  }, 'ERR_SHM_UNKNOWN_RESTRICTED_CATEGORY', "fastify-triton-shm models: unknown restricted api 'statistic'")
  await refusedAtStartup(t, (app) => app.register(fastifyTritonShm, { restrictedApis: [group([])] }),
    'ERR_SHM_INVALID_OPTION', "fastify-triton-shm: option 'restrictedApis.0.categories' must NOT have fewer than 1 items")
  t.throws(() => inferenceServiceHandlers({
    registry,
    models: repositoryTable(),
    server: { name: 'n', version: '' },
    restrictedApi: { header: 'a', value: 'b' },
    restrictedProtocols: [group(['shared-memory'])]
  }), { code: 'ERR_SHM_REPEATED_RESTRICTED_CATEGORY', message: "inferenceServiceHandlers: restricted protocol 'shared-memory' can not be specified in multiple config groups" })
  t.throws(() => sharedMemoryService(registry, { restrictedProtocols: [group(['memory'])] }),
    { code: 'ERR_SHM_UNKNOWN_RESTRICTED_CATEGORY', message: "sharedMemoryService: unknown restricted protocol 'memory'" })
})

const PREFIX = 'triton-grpc-protocol-'
const GRPC_GROUPS: RestrictionGroup[] = GROUPS.map((group) => ({ ...group, header: PREFIX + group.header }))
const grpcHeaders = (headers: Record<string, string>) =>
  Object.fromEntries(Object.entries(headers).map(([name, value]) => [PREFIX + name, value]))

const int32 = (values: number[]) => Buffer.from(Int32Array.from(values).buffer)
const inferRequest = {
  model_name: 'simple',
  inputs: [0, 1].map((index) => ({ name: `INPUT${index}`, datatype: 'INT32', shape: [1, 16] })),
  raw_input_contents: [int32(ones), int32(ones)]
}

/** Every unary RPC of each category, with the metadata of its group. */
const RPCS: Array<{ method: string, request: object, headers: Record<string, string>, header: string }> = [
  { method: 'ServerLive', request: {}, headers: OTHER, header: 'other-key' },
  { method: 'ServerReady', request: {}, headers: OTHER, header: 'other-key' },
  { method: 'ModelReady', request: { name: 'simple' }, headers: OTHER, header: 'other-key' },
  { method: 'ServerMetadata', request: {}, headers: INFER, header: 'infer-key' },
  { method: 'ModelMetadata', request: { name: 'simple' }, headers: INFER, header: 'infer-key' },
  { method: 'ModelInfer', request: inferRequest, headers: INFER, header: 'infer-key' },
  { method: 'ModelConfig', request: { name: 'simple' }, headers: OTHER, header: 'other-key' },
  { method: 'ModelStatistics', request: { name: 'simple' }, headers: OTHER, header: 'other-key' },
  { method: 'SystemSharedMemoryStatus', request: {}, headers: OTHER, header: 'other-key' },
  { method: 'SystemSharedMemoryUnregister', request: {}, headers: OTHER, header: 'other-key' },
  { method: 'CudaSharedMemoryStatus', request: {}, headers: OTHER, header: 'other-key' },
  { method: 'CudaSharedMemoryUnregister', request: {}, headers: OTHER, header: 'other-key' },
  { method: 'RepositoryIndex', request: {}, headers: ADMIN, header: 'Admin-Key' },
  { method: 'RepositoryModelLoad', request: { model_name: 'simple' }, headers: ADMIN, header: 'Admin-Key' },
  { method: 'RepositoryModelUnload', request: { model_name: 'simple' }, headers: ADMIN, header: 'Admin-Key' }
]

const protocolRefusal = (header: string) => ({ code: 14, details: `This protocol is restricted, expecting header '${PREFIX}${header}'` })

t.test('gRPC: each RPC of a restricted category needs its group\'s metadata key, with its value', async (t) => {
  const { port } = await listenGrpcPlugin(t, [], { grpc: { models: repositoryTable(), restrictedProtocols: GRPC_GROUPS } })
  const client = grpcClient(t, port)
  for (const { method, request, headers, header } of RPCS) {
    const [name] = Object.keys(headers)
    t.match(await client.fail(method, request), protocolRefusal(header), `${method}: UNAVAILABLE without the key`)
    t.match(await client.fail(method, request, grpcHeaders({ ...ADMIN, ...INFER, ...OTHER, [name]: 'wrong' })), protocolRefusal(header),
      `${method}: UNAVAILABLE with another value, whatever the other groups' keys`)
    t.ok(await client.call(method, request, grpcHeaders(headers)), `${method}: served with its key`)
  }
})

t.test('gRPC: a stream of a restricted category is refused as it opens; with its key it is served', async (t) => {
  const { app, port } = await listenGrpcPlugin(t, [], { grpc: { models: repositoryTable(), restrictedProtocols: GRPC_GROUPS } })
  const refused = streamClient(t, port)
  refused.write({ ...inferRequest, id: 'never' })
  t.match(await refused.status, protocolRefusal('infer-key'), 'UNAVAILABLE, Triton\'s text')
  t.same(refused.received, [], 'no request of it answered')

  const served = streamClient(t, port, grpcHeaders(INFER))
  served.write({ ...inferRequest, id: 'one' })
  const [response] = await served.until(1)
  t.equal(response.infer_response?.id, 'one')
  t.equal((await served.end()).code, 0, 'the stream ends OK')
  t.equal(app.systemSharedMemory.inFlight.heldBytes, 0, 'neither stream holds anything of the in-flight budget')
})

t.test('gRPC: categories not restricted stay open; HTTP groups do not restrict gRPC, nor the reverse', async (t) => {
  const { app, port } = await listenGrpcPlugin(t, [], {
    restrictedApis: [GROUPS[2]],
    grpc: { models: repositoryTable(), restrictedProtocols: [{ categories: ['metadata'], header: `${PREFIX}infer-key`, value: 'infer-value' }] }
  })
  const client = grpcClient(t, port)
  t.same(await client.call('ServerLive'), { live: true }, 'health: open over gRPC')
  t.ok(await client.call('ModelStatistics', { name: 'simple' }), 'statistics: open over gRPC')
  t.same(await client.call('SystemSharedMemoryStatus'), { regions: {} }, 'shared memory: restricted over HTTP only')
  t.match(await client.fail('ServerMetadata'), protocolRefusal('infer-key'))
  const stream = streamClient(t, port)
  stream.write({ ...inferRequest, id: 'open' })
  t.equal((await stream.until(1))[0].infer_response?.id, 'open', 'inference: a stream without a key is served')
  t.equal((await stream.end()).code, 0)
  t.equal((await app.inject({ method: 'GET', url: '/v2/systemsharedmemory/status' })).statusCode, 403, 'HTTP shared memory: restricted')
})

t.test('gRPC in a host\'s own server: inferenceServiceHandlers and sharedMemoryService take restrictedProtocols', async (t) => {
  const registry = new Registry()
  t.teardown(() => registry.close())
  const handlers = inferenceServiceHandlers({ registry, models: repositoryTable(), server: { name: 'n', version: '' }, restrictedProtocols: GRPC_GROUPS })
  const client = grpcClient(t, await startServer(t, handlers))
  t.match(await client.fail('ServerLive'), protocolRefusal('other-key'))
  t.same(await client.call('ServerLive', {}, grpcHeaders(OTHER)), { live: true })
  t.match(await client.fail('RepositoryIndex'), protocolRefusal('Admin-Key'))

  const shm = grpcClient(t, await startServer(t, sharedMemoryService(registry, { restrictedProtocols: [GRPC_GROUPS[2]] })))
  t.match(await shm.fail('SystemSharedMemoryStatus'), protocolRefusal('other-key'))
  t.same(await shm.call('SystemSharedMemoryStatus', {}, grpcHeaders(OTHER)), { regions: {} })
  t.match(await shm.fail('SystemSharedMemoryRegister', { name: 'r', key: 'k', byte_size: 8 }), protocolRefusal('other-key'),
    'register: refused before its fields are read')
})

t.test('a transport of the host\'s own: SharedMemoryApi\'s restrictedApi answers in the caller\'s transport\'s words', async (t) => {
  const registry = new Registry()
  t.teardown(() => registry.close())
  const api = new SharedMemoryApi(registry, { restrictedApi: { header: 'X-Shm', value: 'yes' } })
  const caller = (transport: 'http' | 'grpc', headers: Record<string, string>): ApiCaller =>
    ({ transport, header: (name) => headers[name], connection: () => undefined })
  t.throws(() => api.checkAccess(caller('http', {})), { code: 'ERR_SHM_RESTRICTED_API', message: "This API is restricted, expecting header 'X-Shm'" })
  t.throws(() => api.checkAccess(caller('grpc', { 'x-shm': 'no' })),
    { code: 'ERR_SHM_RESTRICTED_PROTOCOL', message: "This protocol is restricted, expecting header 'X-Shm'" })
  t.doesNotThrow(() => api.checkAccess(caller('http', { 'x-shm': 'yes' })), 'the header, asked for in lower case')
  t.doesNotThrow(() => new SharedMemoryApi(registry).checkAccess(caller('grpc', {})), 'without restrictedApi: open')
  t.throws(() => api.checkAccess({ transport: 'http', connection: () => undefined }), { code: 'ERR_SHM_RESTRICTED_API' },
    'a caller with no headers to show is refused')
})
