/**
 * The sequence extension on every transport, as Triton's sequence batcher behaves: `sequence_id`
 * (integer or string), `sequence_start`, `sequence_end` over HTTP, ModelInfer and ModelStreamInfer;
 * a stateful model's state kept per sequence across requests, connections and transports; the
 * requests of a sequence run in order; Triton's errors and texts; control inputs; idle sequences
 * released after their timeout, with what they hold (leases included).
 */
import { status } from '@grpc/grpc-js'
import Fastify, { type FastifyInstance } from 'fastify'
import t from 'tap'
import fastifyTritonShm, { InferRequest, type ModelDeclaration, ModelTable, type SequenceBatching } from '../lib/index'
import type { BytesElements, ModelConfigResponse, SequenceControlInput, TensorParameters } from '../types'
import { grpcClient, serveModelTable } from './helpers/grpc'
import { assertError } from './helpers/http'
import { makeMappedObject, registerRegion, shmInput } from './helpers/kserve'
import { bool, int32Bytes, int32s, int64, sequenceParameters, streamClient } from './helpers/stream'
import { Gate, whenEvent } from './helpers/sync'

const FLAG = { datatype: 'INT32' } as const

/** An accumulator per sequence: set by the START request's INPUT, added to by the others; OUTPUT is it. */
function accumulator (name = 'acc', sequenceBatching: SequenceBatching = {}, hooks: { gate?: Gate, onRun?: (infer: InferRequest) => void } = {}): ModelDeclaration {
  return {
    name,
    maxBatchSize: 8,
    inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [-1, 1] }],
    outputs: [{ name: 'OUTPUT', datatype: 'INT32', shape: [-1, 1] }],
    sequenceBatching: { controlInputs: [{ name: 'START', kind: 'CONTROL_SEQUENCE_START', ...FLAG }], ...sequenceBatching },
    async run (infer) {
      hooks.onRun?.(infer)
      await hooks.gate?.pass()
      const sequence = infer.sequence as NonNullable<InferRequest['sequence']>
      const input = infer.input<Int32Array>('INPUT').data[0]
      const start = infer.input<Int32Array>('START').data[0] === 1
      sequence.state = start ? input : (sequence.state as number) + input
      infer.output<Int32Array>('OUTPUT', [1, 1])[0] = sequence.state as number
    }
  }
}

const httpRequest = (value: number, parameters: TensorParameters = {}) =>
  ({ parameters, inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], data: [value] }] })

const httpInfer = (app: FastifyInstance, model: string, value: number, parameters: TensorParameters = {}) =>
  app.inject({ method: 'POST', url: `/v2/models/${model}/infer`, payload: httpRequest(value, parameters) })

const httpOutput = async (app: FastifyInstance, model: string, value: number, parameters: TensorParameters) => {
  const response = await httpInfer(app, model, value, parameters)
  if (response.statusCode !== 200) throw new Error(response.body)
  return response.json().outputs[0].data[0] as number
}

const grpcRequest = (model: string, value: number, parameters: object, id = '') =>
  ({ model_name: model, id, parameters, inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1] }], raw_input_contents: [int32Bytes([value])] })

t.test('sequences interleaved on one stream, each with its own state; integer and string ids are distinct', async (t) => {
  const { port } = await serveModelTable(t, [accumulator()])
  const stream = streamClient(t, port)
  const requests: Array<[number | string, number, boolean, boolean]> = [
    [1, 1, true, false], ['x', 10, true, false], [1, 2, false, false], ['1', 100, true, false],
    ['x', 20, false, false], [1, 3, false, true], ['x', 30, false, true], ['1', 1, false, true]
  ]
  for (const [index, [id, value, start, end]] of requests.entries()) stream.write(grpcRequest('acc', value, sequenceParameters(id, start, end), String(index)))
  const responses = await stream.until(requests.length)
  t.same(responses.map(({ error_message: message }) => message), requests.map(() => ''))
  t.same(responses.map(({ infer_response: response }) => int32s(response.raw_output_contents?.[0] as Uint8Array)[0]), [1, 10, 3, 100, 30, 6, 60, 101],
    'each sequence accumulates its own values; 1 and "1" are two sequences')
  t.equal((await stream.end()).code, status.OK)
})

t.test('one sequence across transports and connections: HTTP, ModelInfer, two streams', async (t) => {
  const { app, port } = await serveModelTable(t, [accumulator()])
  t.equal(await httpOutput(app, 'acc', 5, { sequence_id: 7, sequence_start: true }), 5, 'started over HTTP')
  const unary = await grpcClient(t, port).call('ModelInfer', grpcRequest('acc', 6, sequenceParameters(7)))
  t.equal(int32s(unary.raw_output_contents[0])[0], 11, 'continued over ModelInfer')
  const stream = streamClient(t, port)
  stream.write(grpcRequest('acc', 7, { sequence_id: int64(7) }))
  const [streamed] = await stream.until(1)
  t.equal(int32s(streamed.infer_response.raw_output_contents?.[0] as Uint8Array)[0], 18, 'and over a stream')
  const other = streamClient(t, port)
  other.write(grpcRequest('acc', 1, sequenceParameters(7, false, true)))
  const [ended] = await other.until(1)
  t.equal(int32s(ended.infer_response.raw_output_contents?.[0] as Uint8Array)[0], 19, 'ended on another stream')
  assertError(t, await httpInfer(app, 'acc', 1, { sequence_id: 7 }), 400,
    "inference request for sequence 7 to model 'acc' must specify the START flag on the first request of the sequence")
  assertError(t, await httpInfer(app, 'acc', 1, { sequence_id: '7' }), 400,
    "inference request for sequence 7 to model 'acc' must specify the START flag on the first request of the sequence")
})

t.test('the requests of one sequence run one after another, in the order they came', async (t) => {
  const gate = new Gate(false)
  const running = new Map<string, number>()
  let most = 0
  const model = accumulator('acc', {}, {
    gate,
    onRun (infer) {
      const id = String(infer.sequence?.correlationId)
      running.set(id, (running.get(id) ?? 0) + 1)
      most = Math.max(most, running.get(id) as number)
    }
  })
  const run = model.run as NonNullable<typeof model.run>
  model.run = async (infer) => {
    await run(infer)
    const id = String(infer.sequence?.correlationId)
    running.set(id, (running.get(id) as number) - 1)
  }
  const { port } = await serveModelTable(t, [model])
  const stream = streamClient(t, port)
  stream.write(grpcRequest('acc', 1, sequenceParameters(1, true)))
  stream.write(grpcRequest('acc', 2, sequenceParameters(1)))
  stream.write(grpcRequest('acc', 3, sequenceParameters(1, false, true)))
  stream.write(grpcRequest('acc', 100, sequenceParameters(2, true, true)))
  await gate.untilHeld(2)
  t.same([gate.held, [...running.values()]], [2, [1, 1]], 'one run of each sequence at a time: the others wait for their turn')
  gate.open()
  const responses = await stream.until(4)
  t.same(responses.map(({ infer_response: response }) => int32s(response.raw_output_contents?.[0] as Uint8Array)[0]), [1, 3, 6, 100])
  t.equal(most, 1)
})

const dynaControls: SequenceControlInput[] = [
  { name: 'START', kind: 'CONTROL_SEQUENCE_START', datatype: 'INT32' },
  { name: 'CORRID', kind: 'CONTROL_SEQUENCE_CORRID', datatype: 'UINT64' }
]

t.test('Triton\'s errors, with its texts, over HTTP, ModelInfer and a stream', async (t) => {
  const { app, port } = await serveModelTable(t, [accumulator(), accumulator('dyna', { controlInputs: dynaControls })])
  const client = grpcClient(t, port)
  const stream = streamClient(t, port)
  const cases: Array<[string, string, number, TensorParameters, object, string]> = [
    ['acc', 'no id', 1, {}, {}, "inference request to model 'acc' must specify a non-zero or non-empty correlation ID"],
    ['acc', 'id 0', 1, { sequence_id: 0, sequence_start: true }, { sequence_id: int64(0), sequence_start: bool(true) },
      "inference request to model 'acc' must specify a non-zero or non-empty correlation ID"],
    ['acc', 'empty id', 1, { sequence_id: '', sequence_start: true }, { sequence_id: { string_param: '' }, sequence_start: bool(true) },
      "inference request to model 'acc' must specify a non-zero or non-empty correlation ID"],
    ['acc', 'not started', 1, { sequence_id: 42 }, { sequence_id: int64(42) },
      "inference request for sequence 42 to model 'acc' must specify the START flag on the first request of the sequence"],
    ['dyna', 'a string id for a UINT64 CORRID', 1, { sequence_id: 'abc', sequence_start: true }, { sequence_id: { string_param: 'abc' }, sequence_start: bool(true) },
      "[request id: <id_unknown>] sequence batching control 'CORRID' data-type is 'BYTES', but model 'dyna' expects 'UINT64'"]
  ]
  for (const [model, what, value, json, grpc, message] of cases) {
    assertError(t, await httpInfer(app, model, value, json), 400, message)
    const error = await client.fail('ModelInfer', grpcRequest(model, value, grpc))
    t.same([error.code, error.details], [status.INVALID_ARGUMENT, message], `${what} over ModelInfer`)
    stream.write(grpcRequest(model, value, grpc, what))
  }
  const responses = await stream.until(cases.length)
  t.same(responses.map(({ error_message: message, infer_response: response }) => [response.id, message]),
    cases.map(([, what, , , , message]) => [what, message.replace('<id_unknown>', what)]),
    'on a stream: error_message, and the stream goes on')
  const named = await client.fail('ModelInfer', grpcRequest('dyna', 1, { sequence_id: { string_param: 'abc' } }, 'mine'))
  t.match(named.details, /^\[request id: mine\] /, 'Triton names the request when it has an id')
  const batch = await app.inject({
    method: 'POST',
    url: '/v2/models/acc/infer',
    payload: { parameters: { sequence_id: 3, sequence_start: true }, inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [2, 1], data: [1, 2] }] }
  })
  assertError(t, batch, 400, "inference request to model 'acc' must specify batch-size 1 due to requirements of sequence batcher")
  t.equal(await httpOutput(app, 'acc', 1, { sequence_id: 5, sequence_start: true, sequence_end: true }), 1, 'a sequence of one request')
  assertError(t, await httpInfer(app, 'acc', 1, { sequence_id: 5 }), 400,
    "inference request for sequence 5 to model 'acc' must specify the START flag on the first request of the sequence")
  t.equal(await httpOutput(app, 'dyna', 1, { sequence_id: 9, sequence_start: true }), 1, 'an integer id for a UINT64 CORRID')
})

t.test('HTTP request parameters of the wrong type, as Triton\'s HTTP server reads them', async (t) => {
  const { app } = await serveModelTable(t, [accumulator()])
  const cases: Array<[TensorParameters, number, string]> = [
    [{ sequence_id: true }, 400, "Unable to parse 'sequence_id': attempt to access JSON non-string as string"],
    [{ sequence_id: -1 }, 400, "Unable to parse 'sequence_id': attempt to access JSON non-string as string"],
    [{ sequence_id: 1.5 }, 400, "Unable to parse 'sequence_id': attempt to access JSON non-string as string"],
    [{ sequence_id: 2 ** 60 }, 400, `Unable to parse 'sequence_id': ${2 ** 60} is above 2^53-1 and cannot be read exactly from JSON here: send it as a string`],
    [{ sequence_start: 'yes' }, 400, "Unable to parse 'sequence_start': attempt to access JSON non-boolean as boolean"],
    [{ sequence_end: 1 }, 400, "Unable to parse 'sequence_end': attempt to access JSON non-boolean as boolean"],
    [{ triton_enable_empty_final_response: true }, 400, "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified."],
    [{ sequence_id: 'x'.repeat(129) }, 501, 'string correlation ID cannot be longer than 128 characters'],
    // Triton counts bytes: 65 two-byte characters are 130.
    [{ sequence_id: 'é'.repeat(65) }, 501, 'string correlation ID cannot be longer than 128 characters']
  ]
  for (const [parameters, statusCode, message] of cases) assertError(t, await httpInfer(app, 'acc', 1, parameters), statusCode, message)
  t.equal(await httpOutput(app, 'acc', 4, { sequence_id: 'x'.repeat(128), sequence_start: true, priority: 1 }), 4, 'a 128-character id; other parameters are the model\'s')
  t.equal(await httpOutput(app, 'acc', 5, { sequence_id: 'é'.repeat(64), sequence_start: true }), 5, '64 two-byte characters: 128 bytes')
})

t.test('a START of a sequence in progress starts it again: state dropped, what it held let go', async (t) => {
  const released: number[] = []
  const model = accumulator('acc', {}, {
    onRun (infer) { if (infer.sequence?.start === true) infer.sequence.hold(() => released.push(infer.input<Int32Array>('INPUT').data[0])) }
  })
  const { app } = await serveModelTable(t, [model])
  t.equal(await httpOutput(app, 'acc', 10, { sequence_id: 1, sequence_start: true }), 10)
  t.equal(await httpOutput(app, 'acc', 1, { sequence_id: 1 }), 11)
  t.equal(await httpOutput(app, 'acc', 20, { sequence_id: 1, sequence_start: true }), 20, 'the accumulator set again')
  t.same(released, [10], 'the first start\'s hold let go')
  t.equal(await httpOutput(app, 'acc', 2, { sequence_id: 1, sequence_end: true }), 22)
  t.same(released, [10, 20], 'the end lets go of the rest')
})

t.test('an idle sequence is released after its timeout, with the leases its state held', async (t) => {
  const model = accumulator('acc', { maxSequenceIdleMicroseconds: 20_000 }, {
    // The model keeps the region of the sequence's first request: held until the sequence is released.
    onRun (infer) { if (infer.sequence?.start === true) infer.sequence.hold(infer.retain()) }
  })
  const { app } = await serveModelTable(t, [model])
  const object = makeMappedObject(t, 64, 'state')
  new Int32Array(object.bytes.buffer, 0, 1)[0] = 40
  await registerRegion(t, app, 'state', object.key, 64)
  const response = await app.inject({
    method: 'POST',
    url: '/v2/models/acc/infer',
    payload: { parameters: { sequence_id: 'idle', sequence_start: true }, inputs: [shmInput('INPUT', 'INT32', [1, 1], 'state', 4)] }
  })
  t.equal(response.json().outputs[0].data[0], 40)
  app.systemSharedMemory.unregister('state')
  t.ok(app.systemSharedMemory.has('state'), 'the unregister waits: the sequence holds the region')
  await whenEvent(app.systemSharedMemory, 'unregister', () => !app.systemSharedMemory.has('state'), 'the idle sequence released, and its lease with it')
  assertError(t, await httpInfer(app, 'acc', 1, { sequence_id: 'idle' }), 400,
    "inference request for sequence idle to model 'acc' must specify the START flag on the first request of the sequence")
  t.equal(await httpOutput(app, 'acc', 1, { sequence_id: 'idle', sequence_start: true }), 1, 'it may start again')

  // The server's close lets go of what sequences hold, whatever their timeout.
  const holding = accumulator('long', { maxSequenceIdleMicroseconds: 3_600_000_000 }, {
    onRun (infer) { if (infer.sequence?.start === true) infer.sequence.hold(infer.retain()) }
  })
  const other = await serveModelTable(t, [holding])
  await registerRegion(t, other.app, 'state', object.key, 64)
  const held = await other.app.inject({
    method: 'POST',
    url: '/v2/models/long/infer',
    payload: { parameters: { sequence_id: 3, sequence_start: true }, inputs: [shmInput('INPUT', 'INT32', [1, 1], 'state', 4)] }
  })
  t.equal(held.statusCode, 200)
  t.equal(other.app.systemSharedMemory.counters().liveLeases, 1, 'the sequence holds its lease')
  const registry = other.app.systemSharedMemory
  await other.app.close()
  t.equal(registry.counters().liveLeases, 0, 'released with the server')
})

t.test('control inputs: each kind, in each datatype, as Triton\'s sequence batcher sets them', async (t) => {
  const seen: InferRequest[] = []
  const controls: SequenceControlInput[] = [
    { name: 'S', kind: 'CONTROL_SEQUENCE_START', datatype: 'FP32', falseTrue: [-1, 2.5] },
    { name: 'E', kind: 'CONTROL_SEQUENCE_END', datatype: 'BOOL' },
    { name: 'R', kind: 'CONTROL_SEQUENCE_READY', datatype: 'INT32', falseTrue: [7, 9] }
  ]
  const model = (name: string, corrid: SequenceControlInput['datatype'], maxBatchSize = 0): ModelDeclaration => ({
    name,
    maxBatchSize,
    inputs: [{ name: 'INPUT', datatype: 'INT32', shape: maxBatchSize > 0 ? [-1, 1] : [1] }],
    outputs: [],
    sequenceBatching: { controlInputs: [...controls, { name: 'C', kind: 'CONTROL_SEQUENCE_CORRID', datatype: corrid }] },
    run (infer) { seen.push(infer) }
  })
  const { app } = await serveModelTable(t, [model('u64', 'UINT64'), model('i64', 'INT64'), model('u32', 'UINT32'), model('i32', 'INT32', 8), model('bytes', 'BYTES')])
  const send = (name: string, parameters: object) => app.inject({
    method: 'POST',
    url: `/v2/models/${name}/infer`,
    payload: { parameters, inputs: [{ name: 'INPUT', datatype: 'INT32', shape: name === 'i32' ? [1, 1] : [1], data: [0] }] }
  })
  const big = 2 ** 53 - 1
  for (const name of ['u64', 'i64', 'u32', 'i32']) {
    t.equal((await send(name, { sequence_id: big, sequence_start: true })).statusCode, 200, name)
    t.equal((await send(name, { sequence_id: big, sequence_end: true })).statusCode, 200, name)
  }
  t.equal((await send('bytes', { sequence_id: 'seq', sequence_start: true, sequence_end: true })).statusCode, 200)
  const values = (infer: InferRequest) => infer.inputs.slice(1).map(({ name, datatype, shape, data }) => [name, datatype, shape,
    datatype === 'BYTES' ? String((data as BytesElements).at(0)) : Array.from(data as ArrayLike<number | bigint>)])
  const flags = (start: boolean, end: boolean, shape: number[]) => [
    ['S', 'FP32', shape, [start ? 2.5 : -1]], ['E', 'BOOL', shape, [end ? 1 : 0]], ['R', 'INT32', shape, [9]]
  ]
  t.same(values(seen[0]), [...flags(true, false, [1]), ['C', 'UINT64', [1], [BigInt(big)]]], 'START, END (BOOL), READY with its values, CORRID UINT64')
  t.same(values(seen[1]), [...flags(false, true, [1]), ['C', 'UINT64', [1], [BigInt(big)]]])
  t.same(values(seen[2]).at(-1), ['C', 'INT64', [1], [BigInt(big)]])
  t.same(values(seen[4]).at(-1), ['C', 'UINT32', [1], [2 ** 32 - 1]], 'a 32-bit CORRID gets the id\'s low bits')
  t.same(values(seen[6]), [...flags(true, false, [1, 1]), ['C', 'INT32', [1, 1], [-1]]], 'in a batch of one for a model with a batch dimension')
  t.same(values(seen[8]), [...flags(true, true, [1]), ['C', 'BYTES', [1], 'seq']], 'a string id as a BYTES CORRID')
  t.same(seen[8].sequence && [seen[8].sequence.correlationId, seen[8].sequence.start, seen[8].sequence.end], ['seq', true, true])
  const uint = await send('bytes', { sequence_id: 4, sequence_start: true })
  assertError(t, uint, 400, "[request id: <id_unknown>] sequence batching control 'C' data-type is 'UINT64', but model 'bytes' expects 'BYTES'")
})

t.test('a stateful model\'s configuration: Triton\'s sequence_batching, over HTTP and gRPC', async (t) => {
  const controlInputs: SequenceControlInput[] = [
    { name: 'START', kind: 'CONTROL_SEQUENCE_START', datatype: 'INT32' },
    { name: 'READY', kind: 'CONTROL_SEQUENCE_READY', datatype: 'BOOL' },
    { name: 'F', kind: 'CONTROL_SEQUENCE_END', datatype: 'FP32', falseTrue: [0, 1] },
    { name: 'CORRID', kind: 'CONTROL_SEQUENCE_CORRID', datatype: 'BYTES' }
  ]
  const { app, port } = await serveModelTable(t, [accumulator('acc', { maxSequenceIdleMicroseconds: 5_000_000, controlInputs })])
  const config = (await app.inject('/v2/models/acc/config')).json() as ModelConfigResponse
  const control = (kind: string, int32: number[], fp32: number[], bools: boolean[], dataType = 'TYPE_INVALID') =>
    ({ kind, int32_false_true: int32, fp32_false_true: fp32, bool_false_true: bools, data_type: dataType })
  t.same(config.sequence_batching, {
    direct: { max_queue_delay_microseconds: 0, minimum_slot_utilization: 0 },
    max_sequence_idle_microseconds: 5_000_000,
    control_input: [
      { name: 'START', control: [control('CONTROL_SEQUENCE_START', [0, 1], [], [])] },
      { name: 'READY', control: [control('CONTROL_SEQUENCE_READY', [], [], [false, true])] },
      { name: 'F', control: [control('CONTROL_SEQUENCE_END', [], [0, 1], [])] },
      { name: 'CORRID', control: [control('CONTROL_SEQUENCE_CORRID', [], [], [], 'TYPE_STRING')] }
    ],
    state: [],
    iterative_sequence: false
  })
  const { config: grpcConfig } = await grpcClient(t, port).call('ModelConfig', { name: 'acc' })
  t.same([grpcConfig.sequence_batching.max_sequence_idle_microseconds, grpcConfig.sequence_batching.control_input.map(({ name }: { name: string }) => name),
    grpcConfig.sequence_batching.control_input[3].control[0].data_type, grpcConfig.sequence_batching.strategy_choice],
  ['5000000', ['START', 'READY', 'F', 'CORRID'], 'TYPE_STRING', 'direct'], 'over gRPC, in Triton\'s fields')
  t.same((await app.inject('/v2/models/acc')).json().inputs, [{ name: 'INPUT', datatype: 'INT32', shape: [-1, 1] }], 'the metadata lists no control input')
  const defaults = await serveModelTable(t, [{ ...accumulator('plain'), sequenceBatching: {} }])
  t.same(((await defaults.app.inject('/v2/models/plain/config')).json() as ModelConfigResponse).sequence_batching?.max_sequence_idle_microseconds, 1_000_000,
    'Triton\'s default idle timeout: one second')
  t.same(((await defaults.app.inject('/v2/models/plain/config')).json() as ModelConfigResponse).sequence_batching?.control_input, [])
})

t.test('a declaration\'s sequence batching and transaction policy are checked when the table is made', async (t) => {
  const base = accumulator()
  const cases: Array<[Partial<ModelDeclaration>, string]> = [
    [{ sequenceBatching: { controlInputs: [{ name: 'INPUT', kind: 'CONTROL_SEQUENCE_START', datatype: 'INT32' }] } },
      "'sequenceBatching.controlInputs.0': 'INPUT' is the name of an input or of another control input"],
    [{ sequenceBatching: { controlInputs: [{ name: 'A', kind: 'CONTROL_SEQUENCE_START', datatype: 'INT32' }, { name: 'B', kind: 'CONTROL_SEQUENCE_START', datatype: 'INT32' }] } },
      "'sequenceBatching.controlInputs.1': a second CONTROL_SEQUENCE_START control"],
    [{ sequenceBatching: { controlInputs: [{ name: 'A', kind: 'CONTROL_SEQUENCE_READY', datatype: 'UINT64' }] } },
      "'sequenceBatching.controlInputs.0': a CONTROL_SEQUENCE_READY control must be one of INT32, FP32, BOOL"],
    [{ sequenceBatching: { controlInputs: [{ name: 'A', kind: 'CONTROL_SEQUENCE_CORRID', datatype: 'FP32' }] } },
      "'sequenceBatching.controlInputs.0': a CONTROL_SEQUENCE_CORRID control must be one of UINT64, INT64, UINT32, INT32, BYTES"],
    [{ sequenceBatching: { controlInputs: [{ name: 'A', kind: 'CONTROL_SEQUENCE_CORRID', datatype: 'UINT64', falseTrue: [0, 1] }] } },
      "'sequenceBatching.controlInputs.0': a CONTROL_SEQUENCE_CORRID control has no 'falseTrue'"],
    [{ sequenceBatching: { maxSequenceIdleMicroseconds: 0 } }, "'sequenceBatching.maxSequenceIdleMicroseconds' must be >= 1"],
    [{ decoupled: 'yes' as unknown as boolean }, "'decoupled' must be boolean"]
  ]
  for (const [change, problem] of cases) {
    t.throws(() => new ModelTable([{ ...base, ...change }]), { code: 'ERR_SHM_INVALID_MODEL_DECLARATION', message: `fastify-triton-shm: model 'acc': ${problem}` })
  }
})

t.test('a sequence model\'s requests over the model table directly: the turn of a request that fails still passes', async (t) => {
  const table = new ModelTable([accumulator()])
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm)
  await app.ready()
  const registry = app.systemSharedMemory
  const signature = table.signature('acc')
  const read = (value: number, sequence: { correlationId?: bigint | string, start: boolean, end: boolean }) => () =>
    new InferRequest(httpRequest(value), Buffer.alloc(0), { registry, model: signature, sequence })
  const refused = table.infer('acc', undefined, {
    read: read(1, { correlationId: 8n, start: true, end: false }),
    beforeRun: () => { throw new Error('admission refused') },
    respond: () => 0
  })
  await t.rejects(refused, { message: 'admission refused' })
  const answer = await table.infer('acc', undefined, { read: read(3, { correlationId: 8n, start: false, end: false }), respond: () => 'ran' })
  t.equal(answer, 'ran', 'the sequence exists (its START was admitted), and the next request got its turn')
  const readFor = (other: ModelTable, model: string, correlationId: string) => () =>
    new InferRequest(httpRequest(1), Buffer.alloc(0), { registry, model: other.signature(model), sequence: { correlationId, start: true, end: false } })

  // A request still running when its sequence is released: what it holds then is let go at once.
  const gate = new Gate(false)
  const released: string[] = []
  const late = new ModelTable([{ ...accumulator('late'), async run (infer) { await gate.pass(); infer.sequence?.hold(() => released.push('late')) } }])
  const running = late.infer('late', undefined, { read: readFor(late, 'late', 'busy'), respond: () => 0 })
  await gate.untilHeld(1)
  late.endSequences()
  gate.open()
  await running
  t.same(released, ['late'], 'held after its sequence was released: let go')

  // The reaper passes over a sequence whose request waits, and releases the idle one.
  const idleReleased = new Gate(false)
  const waitGate = new Gate(false)
  const idler = new ModelTable([accumulator('acc', { maxSequenceIdleMicroseconds: 1000 }, { onRun (infer) { infer.sequence?.hold(() => idleReleased.open()) } })])
  const waiting = idler.infer('acc', undefined, { read: readFor(idler, 'acc', 'waits'), beforeRun: () => waitGate.pass(), respond: () => 0 })
  await idler.infer('acc', undefined, { read: readFor(idler, 'acc', 'quick'), respond: () => 0 })
  // The reaper's timer keeps no process alive (a server's listener does): this test's interval does.
  const alive = setInterval(() => {}, 1000)
  await idleReleased.pass()
  clearInterval(alive)
  t.pass('the idle sequence was released while another waited for its run')
  waitGate.open()
  await waiting
  idler.endSequences()

  table.endSequences()
  await t.rejects(table.infer('acc', undefined, { read: read(1, { correlationId: 8n, start: false, end: false }), respond: () => 0 }),
    { code: 'ERR_SHM_SEQUENCE_NOT_STARTED' }, 'endSequences forgets every sequence')
})

t.test('a request abandoned while it waits for its turn fails at once; the requests after it still wait for those before it', async (t) => {
  const gate = new Gate(false)
  const ran: number[] = []
  const table = new ModelTable([accumulator('acc', {}, { gate, onRun (infer) { ran.push(infer.input<Int32Array>('INPUT').data[0]) } })])
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm)
  await app.ready()
  const registry = app.systemSharedMemory
  const call = (value: number, start = false, beforeRun?: (infer: InferRequest) => void) => table.infer('acc', undefined, {
    read: () => new InferRequest(httpRequest(value), Buffer.alloc(0), { registry, model: table.signature('acc'), sequence: { correlationId: 5n, start, end: false } }),
    beforeRun,
    respond: (infer) => infer.encode().header
  })
  const first = call(1, true)
  await gate.untilHeld(1)
  let leave!: () => void
  const gone = call(2, false, (infer) => { leave = () => infer.abandon() })
  const third = call(3)
  await new Promise((resolve) => setImmediate(resolve))
  leave()
  await t.rejects(gone, { name: 'TritonError', kind: 'cancelled' }, 'the request whose client left while it waited failed at once')
  // Abandoned before it even waits: at once too.
  await t.rejects(call(5, false, (infer) => infer.abandon()), { name: 'TritonError', kind: 'cancelled' })
  await new Promise((resolve) => setImmediate(resolve))
  t.same(ran, [1], 'and the request after it did not run: the one before it still runs')
  gate.open()
  await Promise.all([first, third])
  t.same(ran, [1, 3], 'in the order they came')
  const stats = table.statistics('acc').model_stats[0].inference_stats
  t.same([stats.success.count, stats.fail.count], [2, 2])
})
