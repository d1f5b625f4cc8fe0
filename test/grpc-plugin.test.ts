/**
 * The plugin's `grpc` option: a gRPC listener beside Fastify's, on the plugin's registry and the
 * host's model table, listening once the app is ready and closing after its calls in flight.
 */
import { credentials, status } from '@grpc/grpc-js'
import Fastify from 'fastify'
import t from 'tap'
import { inferenceService } from '../lib/grpc'
import fastifyTritonShm from '../lib/index'
import { grpcClient, modelTable } from './helpers/grpc'
import { heldSum, makeMappedObject, registerRegion, sumModel } from './helpers/kserve'

t.test('a gRPC listener on port 0, serving the registry and the models, stopped by close', async (t) => {
  const { model: slow, reached, release } = heldSum()
  const models = modelTable([sumModel(), slow])
  const app = Fastify()
  await app.register(fastifyTritonShm, { grpc: { port: 0, models, server: { name: 'plugin-test', version: '1.2.3' } } })
  let closed = false
  t.teardown(() => closed || app.close())
  t.equal(app.tritonGrpc.port, undefined, 'not listening before the app is ready')
  await app.ready()
  const port = app.tritonGrpc.port as number
  t.ok(port > 0, `bound to port ${port}`)
  const client = grpcClient(t, port)
  t.match(await client.call('ServerMetadata'), { name: 'plugin-test', version: '1.2.3' })

  const region = makeMappedObject(t, 128, 'plugin')
  new Int32Array(region.bytes.buffer, 0, 32).fill(3)
  await registerRegion(t, app, 'plugin_in', region.key, 128)
  const shm = (offset: number) => ({
    shared_memory_region: { string_param: 'plugin_in' }, shared_memory_offset: { int64_param: offset }, shared_memory_byte_size: { int64_param: 64 }
  })
  const request = (model: string) => ({
    model_name: model,
    inputs: [0, 1].map((index) => ({ name: `INPUT${index}`, datatype: 'INT32', shape: [1, 16], parameters: shm(64 * index) })),
    outputs: [{ name: 'OUTPUT0' }]
  })
  const response = await client.call('ModelInfer', request('simple'))
  t.same(Array.from(new Int32Array(Uint8Array.from(response.raw_output_contents[0]).buffer)), new Array(16).fill(6),
    'registered over HTTP, inferred over the plugin\'s gRPC listener')

  const inFlight = client.call('ModelInfer', request('slow'))
  await reached
  const closing = app.close().then(() => { closed = true })
  await new Promise((resolve) => setTimeout(resolve, 50))
  t.notOk(closed, 'close waits for the call in flight')
  t.ok(app.systemSharedMemory.has('plugin_in'), 'whose region stays registered')
  release()
  const slowResponse = await inFlight
  t.equal(slowResponse.model_name, 'slow', 'the call in flight completed')
  await closing
  t.same(app.systemSharedMemory.status(), [], 'the registry closed after it')
  const refused = await grpcClient(t, port).fail('ServerLive')
  t.equal(refused.code, status.UNAVAILABLE, 'nothing listens any more')
})

t.test('messages above 4 MiB are accepted by the listener', async (t) => {
  const echo = { ...sumModel('big', 'FP32', [-1]) }
  const app = Fastify()
  await app.register(fastifyTritonShm, { grpc: { port: 0, models: modelTable([echo]) } })
  t.teardown(() => app.close())
  await app.ready()
  const elements = 2 ** 21
  const response = await grpcClient(t, app.tritonGrpc.port as number).call('ModelInfer', {
    model_name: 'big',
    inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'FP32', shape: [elements] })),
    raw_input_contents: [Buffer.alloc(4 * elements), Buffer.alloc(4 * elements)]
  })
  t.same(response.raw_output_contents.map((bytes: Buffer) => bytes.length), [4 * elements, 4 * elements], '16 MiB in, 16 MiB out')
})

t.test('without models: health answers, and a model is not found', async (t) => {
  const app = Fastify()
  await app.register(fastifyTritonShm, { grpc: { host: '127.0.0.1', port: 0 } })
  t.teardown(() => app.close())
  await app.ready()
  const client = grpcClient(t, app.tritonGrpc.port as number)
  t.same(await client.call('ServerReady'), { ready: true })
  t.match(await client.call('ServerMetadata'), { name: 'fastify-triton-shm' })
  t.equal((await client.fail('ModelMetadata', { name: 'simple' })).code, status.NOT_FOUND)
})

t.test('an IPv6 host', async (t) => {
  const app = Fastify()
  await app.register(fastifyTritonShm, { grpc: { host: '::1', port: 0 } })
  t.teardown(() => app.close())
  await app.ready()
  const client = new (inferenceService())(`[::1]:${app.tritonGrpc.port}`, credentials.createInsecure())
  t.teardown(() => client.close())
  const live = await new Promise((resolve, reject) =>
    (client as unknown as { ServerLive: (request: object, callback: (error: Error | null, response: unknown) => void) => void })
      .ServerLive({}, (error, response) => (error === null ? resolve(response) : reject(error))))
  t.same(live, { live: true }, 'listens on [::1]')
})

t.test('a port already taken fails ready()', async (t) => {
  const first = Fastify()
  await first.register(fastifyTritonShm, { grpc: { port: 0 } })
  t.teardown(() => first.close())
  await first.ready()
  const second = Fastify()
  await second.register(fastifyTritonShm, { grpc: { port: first.tritonGrpc.port } })
  t.teardown(() => second.close())
  await t.rejects(async () => { await second.ready() }, 'the second listener cannot bind')
})

t.test('grpc options are checked at registration', async (t) => {
  for (const [grpc, message] of [
    [{ port: 70000 }, "option 'grpc.port' must be <= 65535"],
    [{ where: 1 }, "unknown option 'grpc.where'"],
    [{ server: { name: 'x' } }, "option 'grpc.server' must have required property 'version'"]
  ] as const) {
    const app = Fastify()
    t.teardown(() => app.close())
    await t.rejects(async () => { await app.register(fastifyTritonShm, { grpc } as never) }, { message: `fastify-triton-shm: ${message}` })
  }
})
