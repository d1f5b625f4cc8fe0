/**
 * What all requests in flight hold, in sum: bodies, decoded messages, output storage and answers,
 * over HTTP and gRPC, are charged to one budget per registry (`maxInFlightBytes`) before they are
 * allocated. A request that would pass it is told to come back (503 with Retry-After, gRPC
 * RESOURCE_EXHAUSTED) and allocates nothing; what only a slow reader keeps is given back at the
 * send timeout. Over real sockets, against the plugin's model endpoints and gRPC listener.
 */
import { once } from 'node:events'
import { status } from '@grpc/grpc-js'
import Fastify, { type FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
import fastifyTritonShm, { DEFAULT_MAX_IN_FLIGHT_BYTES, type FastifyTritonShmOptions, kserveModels, Registry } from '../lib/index'
import { reservationOf } from '../lib/http/in-flight'
import { grpcClient, modelTable } from './helpers/grpc'
import { rawRequest } from './helpers/http'
import { buildInferApp, echoModel, makeMappedObject, registerRegion, shmInput, type TestModel } from './helpers/kserve'
import { drain, listenLocally, stalledInfer, untilNoConnections } from './helpers/slow-client'
import { eventually } from './helpers/sync'

const MiB = 1024 ** 2

async function serving (t: Test, options: FastifyTritonShmOptions, sendTimeoutMs: number, bodyLimit = 256 * MiB,
  models: TestModel[] = [echoModel('echo', ['UINT8'])]): Promise<{ app: FastifyInstance, port: number }> {
  const app = Fastify()
  await app.register(fastifyTritonShm, options)
  await app.register(kserveModels, { models: modelTable(models), bodyLimit, limits: { sendTimeoutMs } })
  return { app, port: await listenLocally(t, app) }
}

/** A binary infer body for echo: a JSON header, then `byteSize` bytes of input. */
function binaryEcho (byteSize: number): { headers: Record<string, string>, body: string } {
  const header = JSON.stringify({
    inputs: [{ name: 'IN_UINT8', datatype: 'UINT8', shape: [byteSize], parameters: { binary_data_size: byteSize } }],
    outputs: [{ name: 'OUT_UINT8', parameters: { binary_data: true } }]
  })
  return { headers: { 'inference-header-content-length': String(header.length) }, body: header + 'a'.repeat(byteSize) }
}

/** A 300-byte request for an answer of `byteSize` binary bytes, echoed from region `in`. */
const echoRequest = (byteSize: number) => ({
  inputs: [shmInput('IN_UINT8', 'UINT8', [byteSize], 'in', byteSize)],
  outputs: [{ name: 'OUT_UINT8', parameters: { binary_data: true } }]
})

const statusOf = (head: string) => Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1])

t.test('12 clients that never read their 16 MiB answers hold at most the budget; the others are told to come back', async (t) => {
  const maxInFlightBytes = 100 * MiB
  const { app, port } = await serving(t, { maxInFlightBytes }, 3000)
  const object = makeMappedObject(t, 16 * MiB, 'in_flight')
  await registerRegion(t, app, 'in', object.key, 16 * MiB)
  const arrayBuffers = process.memoryUsage().arrayBuffers
  const clients = await Promise.all(Array.from({ length: 12 }, () => stalledInfer(t, port, 'echo', echoRequest(16 * MiB))))
  const statuses = clients.map(({ head }) => statusOf(head))
  const refused = clients.filter(({ head }) => statusOf(head) === 503)
  t.ok(refused.length > 0 && refused.length < 12, `${12 - refused.length} answered, ${refused.length} refused: ${statuses.join(' ')}`)
  t.ok(refused.every(({ head }) => /\r\nretry-after: 1\r\n/i.test(head)), 'each refusal says when to come back (Retry-After)')
  t.match(refused[0]?.head, /"error":"the server holds \d+ bytes for requests in flight/, 'and why')
  const held = app.systemSharedMemory.inFlight.heldBytes
  t.ok(held <= maxInFlightBytes, `${held} bytes held, within the budget`)
  const grown = process.memoryUsage().arrayBuffers - arrayBuffers
  t.ok(grown < maxInFlightBytes + 32 * MiB, `${Math.round(grown / MiB)} MiB of buffers taken by the answers`)

  await untilNoConnections(app)
  // A reply's close, which gives its bytes back, may come a turn after its socket's.
  await eventually(() => app.systemSharedMemory.inFlight.heldBytes === 0, 'the dropped clients kept what they held')
  t.pass('the send timeout dropped the stalled clients, and gave back what they held')
  const reading = await stalledInfer(t, port, 'echo', echoRequest(16 * MiB))
  t.equal(statusOf(reading.head), 200, 'a new request is served')
  t.ok(reading.received + await drain(reading.socket) > 16 * MiB, 'whole')
})

t.test('one budget for both faces: answers a slow HTTP reader holds are charged to gRPC calls too', async (t) => {
  // The HTTP answer holds its output twice (storage, body); a gRPC answer three times (storage,
  // encoding, grpc-js's framed copy): each fits alone, not both.
  const maxInFlightBytes = 100 * MiB
  const app = Fastify()
  const models = modelTable([echoModel('echo', ['UINT8'])])
  await app.register(fastifyTritonShm, { maxInFlightBytes, grpc: { port: 0, models } })
  await app.register(kserveModels, { models, limits: { sendTimeoutMs: 60_000 } })
  const port = await listenLocally(t, app)
  const object = makeMappedObject(t, 24 * MiB, 'both_faces')
  await registerRegion(t, app, 'in', object.key, 24 * MiB)
  const stalled = await stalledInfer(t, port, 'echo', echoRequest(24 * MiB))
  t.equal(statusOf(stalled.head), 200, 'an HTTP client holds its 24 MiB answer')
  const client = grpcClient(t, app.tritonGrpc.port as number)
  const request = {
    model_name: 'echo',
    inputs: [{
      name: 'IN_UINT8',
      datatype: 'UINT8',
      shape: [24 * MiB],
      parameters: { shared_memory_region: { string_param: 'in' }, shared_memory_byte_size: { int64_param: 24 * MiB } }
    }]
  }
  const refused = await client.fail('ModelInfer', request)
  t.equal(refused.code, status.RESOURCE_EXHAUSTED, `the gRPC call is refused: ${refused.details}`)
  stalled.socket.destroy()
  await once(stalled.socket, 'close')
  await untilNoConnections(app)
  const served = await client.call('ModelInfer', request)
  t.equal(served.raw_output_contents[0].length, 24 * MiB, 'once the HTTP client left, the gRPC call is served')
})

t.test('a body is charged before it is read: declared or chunked, refused with 503 while the budget is held', async (t) => {
  let runs = 0
  const echo = echoModel('echo', ['UINT8'])
  // The request holds its 4 MiB body, then its 4 MiB output twice (storage, body): it fits alone.
  const { app, port } = await serving(t, { maxInFlightBytes: 16 * MiB }, 3000, 256 * MiB, [{ ...echo, execute: (infer) => { runs++; return echo.execute(infer) } }])
  const { inFlight } = app.systemSharedMemory
  const elsewhere = inFlight.open()
  elsewhere.charge(14 * MiB)
  const { headers, body } = binaryEcho(4 * MiB)
  for (const framing of [{ 'content-length': String(body.length) }, { 'transfer-encoding': 'chunked' }] as Array<Record<string, string>>) {
    const answer = await rawRequest(port, 'POST', '/v2/models/echo/infer', { ...headers, ...framing }, body)
    t.equal(answer.statusCode, 503, `${Object.keys(framing)[0]}: 503`)
    t.equal(answer.headers['retry-after'], '1', 'come back in a second')
    t.match(JSON.parse(answer.body).error, /^the server holds \d+ bytes for requests in flight, of its limit of 16777216: this request needs \d+ more/)
  }
  await eventually(() => inFlight.heldBytes === 14 * MiB, 'the refused requests kept what they were charged')
  t.equal(runs, 0, 'no model ran')
  elsewhere.release()
  const served = await rawRequest(port, 'POST', '/v2/models/echo/infer', { ...headers, 'content-length': String(body.length) }, body)
  t.equal(served.statusCode, 200, 'once the budget is free, the same request is served')
  await eventually(() => inFlight.heldBytes === 0, 'a request served kept what it was charged')
  t.pass('and gives it all back')
})

t.test('a request needing more than the whole budget is 400, never "come back later"; one over bodyLimit stays 413', async (t) => {
  const { port } = await serving(t, { maxInFlightBytes: 4 * MiB }, 3000, 6 * MiB)
  const { headers, body } = binaryEcho(5 * MiB)
  const answer = await rawRequest(port, 'POST', '/v2/models/echo/infer', { ...headers, 'content-length': String(body.length) }, body)
  t.equal(answer.statusCode, 400)
  t.match(JSON.parse(answer.body).error,
    /^this request needs \d+ bytes in flight, more than the server holds for all requests together \(4194304\): send tensors in shared memory$/)
  const over = binaryEcho(7 * MiB)
  const tooLarge = await rawRequest(port, 'POST', '/v2/models/echo/infer', { ...over.headers, 'content-length': String(over.body.length) }, over.body)
  t.equal(tooLarge.statusCode, 413, 'a body past bodyLimit is Fastify\'s to refuse')
})

t.test('parsed JSON is charged 12 times its text before it is parsed', async (t) => {
  const { port } = await serving(t, { maxInFlightBytes: 16 * MiB }, 3000)
  const json = (bytes: number) => {
    const request = JSON.stringify({ inputs: [{ name: 'IN_UINT8', datatype: 'UINT8', shape: [3], data: [1, 2, 3] }] })
    return request.slice(0, -1) + ' '.repeat(bytes - request.length) + '}'
  }
  const fits = await rawRequest(port, 'POST', '/v2/models/echo/infer', {}, json(MiB))
  t.equal(fits.statusCode, 200, '1 MiB of JSON: 13 MiB in flight')
  const over = await rawRequest(port, 'POST', '/v2/models/echo/infer', {}, json(1.5 * MiB))
  t.equal(over.statusCode, 400, '1.5 MiB of JSON would take 19.5 MiB')
})

t.test('a host\'s own route: readInferRequest charges the body it is given, and the reply\'s close gives it back', async (t) => {
  let held = 0
  const echo = echoModel('m', ['UINT8'])
  const { app } = await buildInferApp(t, [{ ...echo, execute: (infer) => { held = app.systemSharedMemory.inFlight.heldBytes; return echo.execute(infer) } }])
  const port = await listenLocally(t, app)
  const { headers, body } = binaryEcho(MiB / 2)
  const answer = await rawRequest(port, 'POST', '/v2/models/m/infer', { ...headers, 'content-length': String(body.length) }, body)
  t.equal(answer.statusCode, 200, 'served')
  t.ok(held >= MiB / 2, `${held} bytes held while the model ran`)
  await eventually(() => app.systemSharedMemory.inFlight.heldBytes === 0, 'the reply closed, and kept its bytes')
  t.pass('nothing held once it is answered')
})

t.test('a reservation follows its reply: what it holds is counted while the reply is open, nothing once it is gone', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm)
  const { inFlight } = app.systemSharedMemory
  const seen: Record<string, number[]> = {}
  app.get('/:how', async (request, reply) => {
    const { how } = request.params as { how: string }
    if (how === 'gone') reply.raw.destroy()
    const reservation = reservationOf(request, reply, inFlight)
    reservation.charge(1000)
    t.equal(reservationOf(request, reply, inFlight), reservation, 'one reservation per request')
    seen[how] = [reservation.bytes, inFlight.heldBytes]
    return 'ok'
  })
  await app.inject('/open')
  t.same(seen.open, [1000, 1000], 'an open reply: its charges held')
  await eventually(() => inFlight.heldBytes === 0, 'the reply closed, and kept its bytes')
  await app.inject('/gone').catch(() => {})
  t.same(seen.gone, [0, 0], 'a reply already gone: released at once, later charges hold nothing')
})

t.test('the default budget: 1 GiB, or half the V8 heap where that is less; the option is checked', async (t) => {
  const { getHeapStatistics } = await import('node:v8')
  t.equal(DEFAULT_MAX_IN_FLIGHT_BYTES, Math.min(1024 ** 3, Math.floor(getHeapStatistics().heap_size_limit / 2)))
  t.equal(new Registry().inFlight.maxBytes, DEFAULT_MAX_IN_FLIGHT_BYTES)
  t.equal(new Registry({ maxInFlightBytes: 1234 }).inFlight.maxBytes, 1234)
  for (const maxInFlightBytes of [0, 1.5, -1]) {
    const app = Fastify()
    t.teardown(() => app.close())
    await t.rejects(async () => { await app.register(fastifyTritonShm, { maxInFlightBytes }) }, { code: 'ERR_SHM_INVALID_OPTION' }, String(maxInFlightBytes))
  }
})
