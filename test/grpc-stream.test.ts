/**
 * ModelStreamInfer over real grpc-js connections on 127.0.0.1, as Triton's stream handler
 * behaves: requests of several models interleaved on one stream, each answered with its id, in
 * the order of the requests (a decoupled model's as it sends them); failures as `error_message`
 * with the stream going on; shared memory held by each request's own leases (deferred unregister,
 * a cancelled stream, the server closing); and back-pressure: a client that stops reading makes
 * the server stop reading its requests, not pile up their responses.
 */
import { status } from '@grpc/grpc-js'
import Fastify from 'fastify'
import t, { type Test } from 'tap'
import fastifyTritonShm, { type InferRequest, kserveModels, type ModelDeclaration, ModelTable } from '../lib/index'
import type { BytesElements } from '../types'
import type { ModelStreamInferResponse } from '../types/grpc'
import { DEFAULT_STREAM_REQUESTS_IN_FLIGHT, requestParameters } from '../lib/grpc'
import { grpcClient } from './helpers/grpc'
import { buildInferApp, makeMappedObject, registerRegion, sumModel } from './helpers/kserve'
import { bool, finalFlag, int32Bytes, int32s, shmParameters, startStreamServer, streamClient } from './helpers/stream'
import { bounded, eventually, Gate, whenEvent } from './helpers/sync'

const range = (count: number, from = 0) => Array.from({ length: count }, (_value, index) => from + index)

const simple = sumModel('simple')
const simpleDeclaration: ModelDeclaration = { ...simple.signature, run: simple.execute }

/** Counts what happened; `until(n)` resolves once it happened n times. */
class Counter {
  count = 0
  readonly #waiters: Array<{ count: number, resolve: () => void }> = []

  add (): void {
    this.count++
    for (const waiter of this.#waiters.filter(({ count }) => this.count >= count)) {
      this.#waiters.splice(this.#waiters.indexOf(waiter), 1)
      waiter.resolve()
    }
  }

  until (count: number): Promise<void> {
    if (this.count >= count) return Promise.resolve()
    return bounded(new Promise<void>((resolve) => this.#waiters.push({ count, resolve })), `${count} times (${this.count} so far)`)
  }
}

/** `simple`, counting its runs into `counter`. */
const countedSum = (counter: Counter): ModelDeclaration => ({ ...simpleDeclaration, run (infer) { simple.execute(infer); counter.add() } })

/** Waits at `gate` (when given) before adding, as `simple` does. */
const gatedSum = (name: string, gate: Gate): ModelDeclaration => ({
  ...sumModel(name).signature,
  async run (infer) {
    await gate.pass()
    infer.signal.throwIfAborted()
    await simple.execute(infer)
  }
})

const bytesEcho: ModelDeclaration = {
  name: 'echo',
  inputs: [{ name: 'IN', datatype: 'BYTES', shape: [-1] }],
  outputs: [{ name: 'OUT', datatype: 'BYTES', shape: [-1] }],
  run (infer) {
    const { data, shape } = infer.input<BytesElements>('IN')
    const out = infer.output<Buffer[]>('OUT', shape)
    for (let index = 0; index < data.length; index++) out[index] = Buffer.concat([data.at(index) as Buffer, Buffer.from('!')])
  }
}

/** Decoupled: one response per element of IN (OUT = the element), each after `gate`; the last one
 * flagged final when FINAL is 1. */
const repeat = (gate = new Gate()): ModelDeclaration => ({
  name: 'repeat',
  decoupled: true,
  inputs: [{ name: 'IN', datatype: 'INT32', shape: [-1] }, { name: 'FINAL', datatype: 'INT32', shape: [1] }],
  outputs: [{ name: 'OUT', datatype: 'INT32', shape: [1] }],
  async run (infer) {
    const values = Int32Array.from(infer.input<Int32Array>('IN').data)
    const finalOnLast = infer.input<Int32Array>('FINAL').data[0] === 1
    for (const [index, value] of values.entries()) {
      await gate.pass()
      infer.output<Int32Array>('OUT', [1])[0] = value
      await infer.send({ final: finalOnLast && index === values.length - 1 })
    }
  }
})

const tensor = (name: string, shape: number[], datatype = 'INT32', parameters: object = {}) => ({ name, datatype, shape, parameters })

const rawSum = (model: string, id: string, base: number) => ({
  model_name: model,
  id,
  inputs: [tensor('INPUT0', [1, 16]), tensor('INPUT1', [1, 16])],
  raw_input_contents: [int32Bytes(range(16, base)), int32Bytes(range(16).map(() => 1))]
})

const repeatRequest = (id: string, values: number[], { finalOnLast = false, emptyFinal }: { finalOnLast?: boolean, emptyFinal?: boolean } = {}) => ({
  model_name: 'repeat',
  id,
  ...(emptyFinal !== undefined && { parameters: { triton_enable_empty_final_response: bool(emptyFinal) } }),
  inputs: [tensor('IN', [values.length]), tensor('FINAL', [1])],
  raw_input_contents: [int32Bytes(values), int32Bytes([finalOnLast ? 1 : 0])]
})

async function setup (t: Test, declarations: ModelDeclaration[], options = {}) {
  const { app } = await buildInferApp(t, [])
  const registry = app.systemSharedMemory
  const server = await startStreamServer(t, registry, new ModelTable(declarations), options)
  return { app, registry, ...server }
}

const ok = (response: ModelStreamInferResponse) => response.error_message === ''

/** Triton's refusal once the server stops. */
const SHUTTING_DOWN = 'GRPC server is shutting down and has stopped accepting new requests.'

/** The status of a stream the stop ended before its client ended its side: Triton's refusal. */
const refusedStatus = async (stream: { status: Promise<{ code: number, details: string }> }) => {
  const { code, details } = await stream.status
  return [code, details]
}

const MiB = 1024 ** 2

/** One INT32 in, 1 MiB out (each byte the input's low byte): responses a client must read. */
const bigModel = (ran = new Counter()): ModelDeclaration => ({
  name: 'big',
  inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }],
  outputs: [{ name: 'OUT', datatype: 'UINT8', shape: [-1] }],
  run (infer) {
    ran.add()
    infer.output<Uint8Array>('OUT', [MiB]).fill(infer.input<Int32Array>('IN').data[0] % 256)
  }
})

/** Decoupled: `count` responses of 1 MiB, each sent once the stream can take it (counted in `sent`). */
const floodModel = (sent = new Counter(), count = 400): ModelDeclaration => ({
  ...bigModel(),
  name: 'flood',
  decoupled: true,
  async run (infer) {
    for (let index = 0; index < count; index++) {
      infer.output<Uint8Array>('OUT', [MiB]).fill(index % 256)
      await infer.send()
      sent.add()
    }
  }
})

const floodRequest = { model_name: 'flood', id: 'flood', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], parameters: {} }], raw_input_contents: [Buffer.alloc(4)] }

const bigRequest = (index: number) => ({ model_name: 'big', id: String(index), inputs: [tensor('IN', [1])], raw_input_contents: [int32Bytes([index])] })

t.test('requests of several models interleaved on one stream: each answered with its id, in the order of the requests', async (t) => {
  const gate = new Gate(false)
  const ran = new Counter()
  const { app, port } = await setup(t, [countedSum(ran), gatedSum('slow', gate), bytesEcho])
  const input = makeMappedObject(t, 128, 'in')
  const output = makeMappedObject(t, 128, 'out')
  new Int32Array(input.bytes.buffer, 0, 32).set([...range(16, 100), ...range(16).map(() => 2)])
  await registerRegion(t, app, 'in', input.key, 128)
  await registerRegion(t, app, 'out', output.key, 128)
  const stream = streamClient(t, port)
  stream.write(rawSum('slow', 'first', 0))
  stream.write({
    model_name: 'simple',
    id: 'shm',
    inputs: [tensor('INPUT0', [1, 16], 'INT32', shmParameters('in', 64)), tensor('INPUT1', [1, 16], 'INT32', shmParameters('in', 64, 64))],
    outputs: [{ name: 'OUTPUT0', parameters: shmParameters('out', 64) }, { name: 'OUTPUT1', parameters: shmParameters('out', 64, 64) }]
  })
  stream.write(rawSum('simple', 'raw', 10))
  stream.write({ model_name: 'echo', id: 'bytes', inputs: [{ ...tensor('IN', [2], 'BYTES'), contents: { bytes_contents: [Buffer.from('a'), Buffer.from('bc')] } }] })
  await gate.untilHeld(1)
  // Every later request runs while the first waits; none is answered before it.
  await ran.until(2)
  t.same(stream.received, [], 'no response overtakes the first request\'s')
  t.equal(app.systemSharedMemory.counters().liveLeases, 0, 'a request answered holds no lease while its response waits for its turn')
  gate.open()
  const responses = await stream.until(4)
  t.same(responses.map(({ infer_response: response }) => response.id), ['first', 'shm', 'raw', 'bytes'], 'in the order of the requests')
  t.ok(responses.every(ok), 'every one succeeded')
  t.same(responses.map(({ infer_response: response }) => response.model_name), ['slow', 'simple', 'simple', 'echo'])
  t.same(responses.map(finalFlag), [true, true, true, true], 'each is its request\'s final response')
  t.same(int32s(responses[0].infer_response.raw_output_contents?.[0] as Uint8Array), range(16, 1))
  t.same(responses[1].infer_response.raw_output_contents?.map((bytes) => bytes.length), [0, 0], 'shared memory outputs: no bytes in the message')
  t.same(Array.from(new Int32Array(Uint8Array.from(output.read()).buffer, 0, 32)), [...range(16, 102), ...range(16, 98)], 'written into the region')
  t.same(int32s(responses[2].infer_response.raw_output_contents?.[1] as Uint8Array), range(16, 9))
  t.same(responses[3].infer_response.outputs?.map(({ shape }) => shape), [['2']])
  t.same(Buffer.from(responses[3].infer_response.raw_output_contents?.[0] as Uint8Array), Buffer.from([2, 0, 0, 0, 0x61, 0x21, 3, 0, 0, 0, 0x62, 0x63, 0x21]))
  t.equal((await stream.end()).code, status.OK, 'the stream ends OK once the client half-closes')
})

t.test('a request that fails answers error_message, and the stream goes on', async (t) => {
  const failing: ModelDeclaration = { ...sumModel('failing').signature, run () { throw Object.assign(new Error('no such luck'), { statusCode: 400 }) } }
  const { port } = await setup(t, [simpleDeclaration, failing])
  const stream = streamClient(t, port)
  stream.write({ model_name: 'nope', id: 'unknown' })
  stream.write({ ...rawSum('simple', 'short', 0), raw_input_contents: [int32Bytes([1])] })
  stream.write({ ...rawSum('simple', 'region', 0), inputs: [tensor('INPUT0', [1, 16], 'INT32', shmParameters('absent', 64)), tensor('INPUT1', [1, 16])] })
  stream.write({ ...rawSum('failing', 'throws', 0), model_version: '1' })
  stream.write(rawSum('simple', 'fine', 0))
  const responses = await stream.until(5)
  t.same(responses.slice(0, 3), [
    { error_message: "Request for unknown model: 'nope' is not found", infer_response: { id: 'unknown', model_name: '', model_version: '', outputs: [], raw_output_contents: [], parameters: {} } },
    {
      error_message: "expected 2 entries of 'raw_input_contents' (one per input not in shared memory) but got 1 for model 'simple'",
      infer_response: { id: 'short', model_name: '', model_version: '', outputs: [], raw_output_contents: [], parameters: {} }
    },
    {
      error_message: "expected 1 entries of 'raw_input_contents' (one per input not in shared memory) but got 2 for model 'simple'",
      infer_response: { id: 'region', model_name: '', model_version: '', outputs: [], raw_output_contents: [], parameters: {} }
    }
  ], 'refused before running: the request\'s id, nothing else (as Triton)')
  t.same(responses[3], {
    error_message: 'no such luck',
    infer_response: {
      id: 'throws', model_name: 'failing', model_version: '1', outputs: [], raw_output_contents: [], parameters: { triton_final_response: { parameter_choice: 'bool_param', bool_param: true } }
    }
  }, 'failed in its run: its id, model, version and final flag (as Triton)')
  t.ok(ok(responses[4]), 'the next request is served')
  t.equal((await stream.end()).code, status.OK)
})

t.test('an unregister during a stream request\'s run is deferred; its leases end with its response', async (t) => {
  const gate = new Gate(false)
  const { app, port, client } = await setup(t, [gatedSum('slow', gate)])
  const input = makeMappedObject(t, 128, 'in')
  await registerRegion(t, app, 'in', input.key, 128)
  const stream = streamClient(t, port)
  stream.write({ ...rawSum('slow', 'held', 0), inputs: [tensor('INPUT0', [1, 16], 'INT32', shmParameters('in', 64)), tensor('INPUT1', [1, 16], 'INT32', shmParameters('in', 64, 64))], raw_input_contents: [] })
  await gate.untilHeld(1)
  await client.call('SystemSharedMemoryUnregister', { name: 'in' })
  t.same(Object.keys((await client.call('SystemSharedMemoryStatus', {})).regions), ['in'], 'listed while the request holds it')
  gate.open()
  const [response] = await stream.until(1)
  t.ok(ok(response))
  await whenEvent(app.systemSharedMemory, 'unregister', () => !app.systemSharedMemory.has('in'), 'the deferred unregister')
  t.same(app.systemSharedMemory.counters().liveLeases, 0)
})

t.test('a stream cancelled mid-run: its requests are abandoned, their leases end, the region is unmapped', async (t) => {
  const gate = new Gate(false)
  const seen: InferRequest[] = []
  const slow: ModelDeclaration = { ...gatedSum('slow', gate), async run (infer) { seen.push(infer); await gate.pass() } }
  const quietDone = new Counter()
  // Decoupled, with no response: its end, after the cancel, sends the final flag into a stream that ended.
  const quiet: ModelDeclaration = { ...repeat(), name: 'quiet', async run () { await gate.pass(); quietDone.add() } }
  const { app, port, streams } = await setup(t, [slow, repeat(gate), quiet])
  const input = makeMappedObject(t, 128, 'in')
  await registerRegion(t, app, 'in', input.key, 128)
  const stream = streamClient(t, port)
  const shmInputs = [tensor('INPUT0', [1, 16], 'INT32', shmParameters('in', 64)), tensor('INPUT1', [1, 16], 'INT32', shmParameters('in', 64, 64))]
  stream.write({ model_name: 'slow', id: 'a', inputs: shmInputs })
  stream.write({ ...repeatRequest('b', [1, 2]), inputs: [tensor('IN', [2], 'INT32', shmParameters('in', 8)), tensor('FINAL', [1])], raw_input_contents: [int32Bytes([0])] })
  stream.write({ ...repeatRequest('c', [], { emptyFinal: true }), model_name: 'quiet' })
  await gate.untilHeld(3)
  t.equal(app.systemSharedMemory.counters().liveLeases, 3, 'each request holds its own leases')
  app.systemSharedMemory.unregister('in')
  t.ok(app.systemSharedMemory.has('in'), 'the unregister is deferred')
  stream.call.cancel()
  await whenEvent(app.systemSharedMemory, 'unregister', () => !app.systemSharedMemory.has('in'), 'the region unmapped once the cancelled requests let go')
  t.ok(seen[0].signal.aborted, 'the run was told its client went')
  t.equal((await stream.status).code, status.CANCELLED)
  await whenEvent(streams, 'change', () => streams.counters().streams === 0, 'the stream forgotten')
  gate.open()
  await quietDone.until(1)
  t.equal(streams.counters().requestsInFlight, 0)
})

t.test('a client that never reads: the server stops reading its requests; a bounded number of responses wait', async (t) => {
  const ran = new Counter()
  const sent = new Counter()
  const big = bigModel(ran)
  const flood = floodModel(sent, 100)
  const requests = 200
  const maxRequestsInFlight = 4
  const { port, streams } = await setup(t, [big, flood], { maxRequestsInFlight })

  const stream = streamClient(t, port)
  stream.call.pause()
  for (let index = 0; index < requests; index++) {
    stream.write(bigRequest(index))
  }
  await whenEvent(streams, 'change', () => streams.counters().blocked === 1, 'the stream blocked on its client')
  t.ok(ran.count < requests / 2, `the server ran ${ran.count} of ${requests} requests before it stopped reading`)
  t.ok(streams.counters().requestsInFlight <= maxRequestsInFlight, 'at most maxRequestsInFlight requests unanswered')
  stream.call.resume()
  const responses = await stream.until(requests)
  t.same(responses.map(({ infer_response: response }) => response.id), range(requests).map(String), 'every response, in order, once the client reads')
  t.ok(responses.every((response, index) => Buffer.from(response.infer_response.raw_output_contents?.[0] as Uint8Array).every((byte) => byte === index % 256)))
  t.equal((await stream.end()).code, status.OK)

  const decoupled = streamClient(t, port)
  decoupled.call.pause()
  decoupled.write(floodRequest)
  await whenEvent(streams, 'change', () => streams.counters().blocked === 1, 'the decoupled stream blocked on its client')
  t.ok(sent.count < 50, `a decoupled model waits in send(): ${sent.count} of 100 responses sent before the client read`)
  decoupled.call.resume()
  t.equal((await decoupled.until(100)).length, 100)
  t.equal((await decoupled.end()).code, status.OK)
})

t.test('decoupled models: zero, one or many responses, the final flag, and the empty final response when asked for', async (t) => {
  const gate = new Gate(false)
  const { port } = await setup(t, [repeat(gate), simpleDeclaration])
  const stream = streamClient(t, port)
  const values = (response: ModelStreamInferResponse) => int32s(response.infer_response.raw_output_contents?.[0] as Uint8Array)

  stream.write(repeatRequest('three', [7, 8, 9]))
  await gate.untilHeld(1)
  gate.open()
  const three = await stream.until(3)
  t.same(three.map(values), [[7], [8], [9]], 'one response per element')
  t.same(three.map(finalFlag), [false, false, false], 'none final: the run\'s end sends the flag alone, which no one asked to see')
  t.same(three.map(({ infer_response: response }) => [response.id, response.model_name, response.model_version]), [['three', 'repeat', '1'], ['three', 'repeat', '1'], ['three', 'repeat', '1']])

  stream.write(repeatRequest('asked', [1], { emptyFinal: true }))
  const [one, empty] = (await stream.until(5)).slice(3)
  t.same([values(one), finalFlag(one)], [[1], false])
  t.same(empty, {
    error_message: '',
    infer_response: { id: 'asked', model_name: 'repeat', model_version: '', outputs: [], raw_output_contents: [], parameters: { triton_final_response: { parameter_choice: 'bool_param', bool_param: true } } }
  }, 'the empty final response (Triton\'s: the request\'s id, model and version as sent)')

  stream.write(repeatRequest('none', [], { emptyFinal: true }))
  const [nothing] = (await stream.until(6)).slice(5)
  t.same([nothing.infer_response.id, nothing.infer_response.outputs, finalFlag(nothing)], ['none', [], true], 'no response but the final one')

  stream.write(repeatRequest('silent', []))
  stream.write(repeatRequest('flagged', [4, 5], { finalOnLast: true, emptyFinal: true }))
  const flagged = (await stream.until(8)).slice(6)
  t.same(flagged.map((response) => [response.infer_response.id, values(response), finalFlag(response)]), [['flagged', [4], false], ['flagged', [5], true]],
    'a request with no response and no empty final one sends nothing; a last response flagged final needs no empty one')

  // Two decoupled requests at once: their responses interleave as the model sends them.
  gate.close()
  stream.write(repeatRequest('x', [1, 2]))
  stream.write(repeatRequest('y', [3, 4]))
  stream.write(rawSum('simple', 'plain', 0))
  await gate.untilHeld(2)
  const [plain] = (await stream.until(9)).slice(8)
  t.same([plain.infer_response.id, finalFlag(plain)], ['plain', true], 'a request after them is answered at once: decoupled responses keep no order with the others')
  gate.open()
  const mixed = (await stream.until(13)).slice(9)
  t.same(mixed.map(({ infer_response: response }) => response.id).sort(), ['x', 'x', 'y', 'y'])
  t.same(mixed.filter(({ infer_response: response }) => response.id === 'x').map(values), [[1], [2]], 'each request\'s responses in order')
  t.equal((await stream.end()).code, status.OK, 'the stream ends once every request sent its final flag')
})

t.test('a decoupled model that fails after some responses: an error response, final; send() misused is a server error', async (t) => {
  const breaking: ModelDeclaration = {
    ...repeat(),
    name: 'breaking',
    async run (infer) {
      infer.output<Int32Array>('OUT', [1])[0] = 1
      await infer.send()
      throw Object.assign(new Error('broke after one'), { statusCode: 400 })
    }
  }
  const twice: ModelDeclaration = {
    ...repeat(),
    name: 'twice',
    async run (infer) {
      infer.output<Int32Array>('OUT', [1])[0] = 1
      await infer.send({ final: true })
      await infer.send()
    }
  }
  const eager: ModelDeclaration = { ...sumModel('eager').signature, async run (infer) { await infer.send() } }
  const messages: string[] = []
  const log = { error: (object: { err: Error }) => { messages.push(object.err.message) } }
  const { port } = await setup(t, [breaking, twice, eager], { log })
  const stream = streamClient(t, port)
  stream.write({ ...repeatRequest('b', [1]), model_name: 'breaking' })
  const [first, failure] = await stream.until(2)
  t.same([ok(first), finalFlag(first)], [true, false])
  t.same([failure.error_message, failure.infer_response.id, finalFlag(failure)], ['broke after one', 'b', true])
  stream.write({ ...repeatRequest('t', [1]), model_name: 'twice' })
  stream.write(rawSum('eager', 'e', 0))
  const [final, afterFinal, notDecoupled] = (await stream.until(5)).slice(2)
  t.same([ok(final), finalFlag(final)], [true, true])
  t.same([afterFinal.error_message, notDecoupled.error_message], ['Internal Server Error', 'Internal Server Error'], 'a bug of the model\'s is not the client\'s to read')
  t.same(messages, [
    "model 'twice' sent a response after its final one, or after its run ended",
    "model 'eager' is not decoupled: its run fills the outputs of its one response, and infer.send() is for decoupled models"
  ], 'and is logged')
})

t.test('a decoupled model over HTTP and ModelInfer: Triton\'s UNSUPPORTED', async (t) => {
  const table = new ModelTable([repeat()])
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm, { grpc: { port: 0, models: table } })
  await app.register(kserveModels, { models: table })
  await app.ready()
  const response = await app.inject({ method: 'POST', url: '/v2/models/repeat/infer', payload: { inputs: [] } })
  t.same([response.statusCode, response.json()], [501, { error: "HTTP end point doesn't support models with decoupled transaction policy" }])
  const error = await grpcClient(t, app.tritonGrpc.port as number).fail('ModelInfer', repeatRequest('r', [1]))
  t.same([error.code, error.details], [status.UNIMPLEMENTED, "ModelInfer RPC doesn't support models with decoupled transaction policy"])
  const config = (await app.inject('/v2/models/repeat/config')).json()
  t.same(config.model_transaction_policy, { decoupled: true }, 'its configuration says so')
})

t.test('requestParameters reads what a request says of its sequence and its final response', async (t) => {
  t.same(requestParameters({}), { sequence: { start: false, end: false }, emptyFinalResponse: false })
  t.same(requestParameters({ sequence_id: { parameter_choice: 'int64_param', int64_param: '-1' }, sequence_end: { parameter_choice: 'bool_param', bool_param: true } }),
    { sequence: { correlationId: 2n ** 64n - 1n, start: false, end: true }, emptyFinalResponse: false }, 'an int64 id is the unsigned id of its bits, as Triton takes it')
  t.same(requestParameters({ triton_enable_empty_final_response: { parameter_choice: 'bool_param', bool_param: true }, mine: { parameter_choice: 'bool_param', bool_param: true } }),
    { sequence: { start: false, end: false }, emptyFinalResponse: true })
  t.equal(DEFAULT_STREAM_REQUESTS_IN_FLIGHT, 64)
})

t.test('request parameters of the wrong type: Triton\'s texts, on the stream and over ModelInfer', async (t) => {
  const { port, client } = await setup(t, [simpleDeclaration])
  const stream = streamClient(t, port)
  const cases: Array<[object, string]> = [
    [{ sequence_id: bool(true) }, "invalid value type for 'sequence_id' parameter, expected int64_param or string_param."],
    [{ sequence_start: { int64_param: 1 } }, "invalid value type for 'sequence_start' parameter, expected bool_param."],
    [{ sequence_end: { string_param: 'yes' } }, "invalid value type for 'sequence_end' parameter, expected bool_param."],
    [{ triton_enable_empty_final_response: { int64_param: 1 } }, "invalid value type for 'triton_enable_empty_final_response' parameter, expected bool_param."],
    [{ triton_other: bool(true) }, "parameter keys starting with 'triton_' are reserved for Triton usage. Only the following keys starting with 'triton_' are allowed: triton_enable_empty_final_response"]
  ]
  for (const [parameters] of cases) stream.write({ ...rawSum('simple', 'p', 0), parameters })
  const responses = await stream.until(cases.length)
  t.same(responses.map(({ error_message: message }) => message), cases.map(([, message]) => message))
  for (const [parameters, message] of cases) {
    const error = await client.fail('ModelInfer', { ...rawSum('simple', 'p', 0), parameters })
    t.same([error.code, error.details], [status.INVALID_ARGUMENT, message])
  }
  const long = await client.fail('ModelInfer', { ...rawSum('simple', 'p', 0), parameters: { sequence_id: { string_param: 'x'.repeat(129) } } })
  t.same([long.code, long.details], [status.UNIMPLEMENTED, 'string correlation ID cannot be longer than 128 characters'])
  const wide = await client.fail('ModelInfer', { ...rawSum('simple', 'p', 0), parameters: { sequence_id: { string_param: 'é'.repeat(65) } } })
  t.same([wide.code, wide.details], [status.UNIMPLEMENTED, 'string correlation ID cannot be longer than 128 characters'], '130 bytes in 65 characters')
  const served = await client.call('ModelInfer', { ...rawSum('simple', 'p', 0), parameters: { sequence_id: { string_param: 'x'.repeat(128) }, other: bool(true) } })
  t.equal(served.id, 'p', 'a 128-character id and parameters of the model\'s own are fine')
})

t.test('triton_grpc_error: the first failure ends the stream with its status, as Triton\'s header asks', async (t) => {
  const gate = new Gate(false)
  const { port, streams } = await setup(t, [simpleDeclaration, gatedSum('slow', gate)])
  const stream = streamClient(t, port, { triton_grpc_error: 'true' })
  stream.write(rawSum('simple', 'fine', 0))
  await stream.until(1)
  stream.write(rawSum('slow', 'held', 0))
  await gate.untilHeld(1)
  stream.write({ model_name: 'nope', id: 'x' })
  const ended = await stream.status
  t.same([ended.code, ended.details], [status.NOT_FOUND, "Request for unknown model: 'nope' is not found"])
  t.equal(stream.received.length, 1, 'no error_message response')
  await whenEvent(streams, 'change', () => streams.counters().streams === 0, 'the stream forgotten')
  gate.open()
})

t.test('closing: open streams refuse new requests, answer those they read, then end; a stream that cannot write is cancelled', async (t) => {
  const gate = new Gate(false)
  const { port, streams } = await setup(t, [gatedSum('slow', gate), simpleDeclaration])
  const stream = streamClient(t, port)
  stream.write(rawSum('slow', 'held', 0))
  await gate.untilHeld(1)
  const idle = streamClient(t, port)
  idle.write(rawSum('simple', 'answered', 0))
  t.ok(ok((await idle.until(1))[0]))
  const closed = streams.close(60_000)
  t.ok(streams.closing)
  t.same(await refusedStatus(idle), [status.UNAVAILABLE, SHUTTING_DOWN],
    'a stream with nothing in flight is ended at once, its client told why: what it sends now is not read')
  stream.write(rawSum('simple', 'late', 0))
  await whenEvent(streams, 'change', () => streams.counters().requestsInFlight === 2, 'the late request read')
  gate.open()
  const responses = await stream.until(2)
  t.same(responses.map(({ infer_response: response }) => response.id), ['held', 'late'])
  t.ok(ok(responses[0]), 'the request read before the close is answered')
  t.equal(responses[1].error_message, 'GRPC server is shutting down and has stopped accepting new requests.')
  t.same(await refusedStatus(stream), [status.UNAVAILABLE, SHUTTING_DOWN], 'then the stream ends, its client told why (it had not ended its side)')
  t.equal(await closed, true)

  const late = streamClient(t, port)
  late.write(rawSum('simple', 'after', 0))
  const refused = await late.status
  t.same([refused.code, refused.details], [status.UNAVAILABLE, 'GRPC server is shutting down and has stopped accepting new requests.'],
    'a stream opened while closing is refused at once, with Triton\'s text')
  t.same(late.received.map(({ error_message: message }) => message), [])
  t.equal(streams.counters().streams, 0, 'and forgotten')

  const { port: otherPort, streams: others } = await setup(t, [floodModel()])
  const stalled = streamClient(t, otherPort)
  stalled.call.pause()
  stalled.write(floodRequest)
  await whenEvent(others, 'change', () => others.counters().blocked === 1, 'the stream blocked on its client')
  t.equal(await others.close(1), false, 'false while a stream cannot end: the server then cancels it')
})

t.test('closing: a request read and still queued for a model instance is refused, as one read after; the one running finishes', async (t) => {
  const gate = new Gate(false)
  const runs = new Counter()
  const slow: ModelDeclaration = { ...gatedSum('slow', gate), instanceCount: 1 }
  const table = new ModelTable([{ ...slow, run: async (infer) => { runs.add(); await slow.run?.(infer) } }, simpleDeclaration])
  const { app } = await buildInferApp(t, [])
  const { port, streams } = await startStreamServer(t, app.systemSharedMemory, table)
  const stream = streamClient(t, port)
  stream.write(rawSum('slow', 'running', 0))
  await gate.untilHeld(1)
  stream.write(rawSum('slow', 'queued', 0))
  // Pending in the model's statistics: read, and waiting for the one instance.
  const pending = () => table.metricVersions().find(({ name }) => name === 'slow')?.totals().pending
  await eventually(() => pending() === 1, 'the second request queued')
  const closed = streams.close(60_000)
  stream.write(rawSum('simple', 'late', 0))
  await whenEvent(streams, 'change', () => streams.counters().requestsInFlight === 3, 'the late request read')
  gate.open()
  const responses = await stream.until(3)
  t.same(responses.map(({ infer_response: response }) => response.id), ['running', 'queued', 'late'], 'in the order they came')
  t.ok(ok(responses[0]), 'the request running when the server stopped is answered')
  t.same(responses.slice(1).map(({ error_message: message }) => message), Array(2).fill('GRPC server is shutting down and has stopped accepting new requests.'))
  t.equal(runs.count, 1, 'the queued request never ran')
  t.same(await refusedStatus(stream), [status.UNAVAILABLE, SHUTTING_DOWN], 'then the stream ends, its client told why (it had not ended its side)')
  t.equal(await closed, true)
  t.equal(pending(), 0)
})

t.test('app.close() with a stream open: its request in flight is answered, the stream ends, leases end; a client that reads nothing is cancelled', async (t) => {
  const gate = new Gate(false)
  const table = new ModelTable([gatedSum('slow', gate), simpleDeclaration])
  const app = Fastify()
  await app.register(fastifyTritonShm, { grpc: { port: 0, models: table, limits: { sendTimeoutMs: 1000 } } })
  await app.register(kserveModels, { models: table })
  await app.ready()
  const input = makeMappedObject(t, 128, 'in')
  await registerRegion(t, app, 'in', input.key, 128)
  const stream = streamClient(t, app.tritonGrpc.port as number)
  stream.write({ ...rawSum('slow', 'held', 0), inputs: [tensor('INPUT0', [1, 16], 'INT32', shmParameters('in', 64)), tensor('INPUT1', [1, 16], 'INT32', shmParameters('in', 64, 64))], raw_input_contents: [] })
  await gate.untilHeld(1)
  const closed = app.close()
  gate.open()
  const [response] = await stream.until(1)
  t.ok(ok(response), 'answered')
  t.same(await refusedStatus(stream), [status.UNAVAILABLE, SHUTTING_DOWN], 'the stream ended by the server, its client told why')
  await closed
  t.equal(app.systemSharedMemory.counters().liveLeases, 0)

  const sent = new Counter()
  const stalledApp = Fastify()
  await stalledApp.register(fastifyTritonShm, { grpc: { port: 0, models: new ModelTable([floodModel(sent)]), limits: { sendTimeoutMs: 200 } } })
  await stalledApp.ready()
  const stalled = streamClient(t, stalledApp.tritonGrpc.port as number)
  stalled.call.pause()
  stalled.write(floodRequest)
  // Its run sends 400 MiB, more than any socket holds: it cannot end while the client reads nothing.
  await sent.until(1)
  await stalledApp.close()
  t.not((await stalled.status).code, status.OK, 'the stalled stream was cancelled, and the app closed')
})

t.test('from the moment app.close() is called, a stream refuses new requests with Triton\'s text, while an HTTP request still runs', async (t) => {
  const gate = new Gate(false)
  const table = new ModelTable([gatedSum('slow', gate), simpleDeclaration])
  const app = Fastify()
  await app.register(fastifyTritonShm, { grpc: { port: 0, models: table } })
  await app.register(kserveModels, { models: table })
  await app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = app.server.address() as { port: number }
  // A stream request in flight keeps the stream open; an HTTP one keeps the app's close from
  // reaching its onClose hooks.
  const stream = streamClient(t, app.tritonGrpc.port as number)
  stream.write(rawSum('slow', 'before', 0))
  const held = fetch(`http://127.0.0.1:${port}/v2/models/slow/infer`, {
    method: 'POST',
    headers: { connection: 'close' },
    body: JSON.stringify({ inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16], data: range(16) })) })
  })
  await gate.untilHeld(2)
  const closed = app.close()
  const holding = app.systemSharedMemory.inFlight.heldBytes
  stream.write(rawSum('simple', 'after', 0))
  // Read (each message is charged as it arrives) before anything is let go; its answer waits for the
  // one before it, as a stream answers in order.
  await eventually(() => app.systemSharedMemory.inFlight.heldBytes > holding, 'the second request read')
  gate.open()
  const [before, refused] = await stream.until(2)
  t.ok(ok(before), 'the request in flight answered')
  t.same([refused.infer_response.id, refused.error_message], ['after', 'GRPC server is shutting down and has stopped accepting new requests.'])
  t.equal((await held).status, 200, 'the HTTP request in flight finished')
  t.same(await refusedStatus(stream), [status.UNAVAILABLE, SHUTTING_DOWN], 'the stream ended by the server, its client told why')
  await closed
})

t.test('over the plugin\'s listener each request is charged to the in-flight budget: a costly message or a busy server answers error_message, the stream goes on, a flood holds one response at a time', async (t) => {
  const sent = new Counter()
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm, { maxInFlightBytes: 64 * MiB, grpc: { port: 0, models: new ModelTable([simpleDeclaration, floodModel(sent, 20)]) } })
  await app.ready()
  const { inFlight } = app.systemSharedMemory
  const stream = streamClient(t, app.tritonGrpc.port as number)
  stream.write({ model_name: 'simple', id: 'costly', inputs: range(20_000).map(() => ({})) })
  stream.write(rawSum('simple', 'after', 0))
  const [costly, after] = await stream.until(2)
  t.match(costly.error_message, /^the ModelInferRequest message of \d+ bytes would take \d+ bytes once decoded, more than/, 'refused before it is decoded')
  t.ok(ok(after), 'the next request on the stream is answered')

  const elsewhere = inFlight.open()
  elsewhere.charge(64 * MiB - 1024)
  stream.write(rawSum('simple', 'busy', 0))
  const [busy] = (await stream.until(3)).slice(2)
  t.equal(busy.infer_response.id, '', 'its message not decoded: no id to name')
  t.match(busy.error_message, /^the server holds \d+ bytes for requests in flight, of its limit of 67108864/, 'the budget held elsewhere: refused')
  elsewhere.release()

  let peak = 0
  const watch = setInterval(() => { peak = Math.max(peak, inFlight.heldBytes) }, 1)
  stream.write(floodRequest)
  const responses = await stream.until(3 + 20)
  clearInterval(watch)
  t.ok(responses.slice(3).every(ok), '20 responses of 1 MiB')
  t.ok(peak < 8 * MiB, `a decoupled model's responses given back one by one (at most ${peak} bytes held at once, for 20 MiB sent)`)
  t.equal((await stream.end()).code, status.OK)
  await eventually(() => inFlight.heldBytes === 0, 'something was still held')
  t.pass('nothing held once the stream is over')
})
