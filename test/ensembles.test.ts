/**
 * Ensembles (a declaration's `ensembleScheduling`, Triton's `ensemble_scheduling`) over real HTTP
 * and gRPC: Triton's configuration; a plain ensemble answered once with its steps' tensors (BYTES
 * too, and the request's parameters reaching its steps); a decoupled one answered once per
 * response of its decoupled step, through the steps that follow it, nested ensembles included;
 * each step counted in its own model's statistics; a failing step failing the request; and the
 * declarations the table refuses, naming what is wrong.
 */
import { once } from 'node:events'
import { status } from '@grpc/grpc-js'
import t from 'tap'
import { type EnsembleStep, type ModelDeclaration, ModelTable } from '../lib/index'
import type { BytesElements, ModelConfigResponse } from '../types'
import type { ModelStreamInferResponse } from '../types/grpc'
import { grpcClient, serveModelTable } from './helpers/grpc'
import { bool, finalFlag, int32Bytes, int32s, streamClient } from './helpers/stream'
import { eventually, Gate } from './helpers/sync'

const int32 = (name: string, shape = [-1]) => ({ name, datatype: 'INT32' as const, shape })

/** OUT = IN + 1. */
const increment: ModelDeclaration = {
  name: 'increment',
  inputs: [int32('IN')],
  outputs: [int32('OUT')],
  run (infer) {
    const { data, shape } = infer.input<Int32Array>('IN')
    const out = infer.output<Int32Array>('OUT', shape)
    data.forEach((value, index) => { out[index] = value + 1 })
  }
}

/** OUT = A * B, element by element. */
const product: ModelDeclaration = {
  name: 'product',
  inputs: [int32('A'), int32('B')],
  outputs: [int32('OUT')],
  run (infer) {
    const { data: a, shape } = infer.input<Int32Array>('A')
    const { data: b } = infer.input<Int32Array>('B')
    const out = infer.output<Int32Array>('OUT', shape)
    a.forEach((value, index) => { out[index] = value * b[index] })
  }
}

/** Decoupled: one response per element of IN (OUT = the element, IDX = its index), each after `gate`. */
const repeat = (gate = new Gate()): ModelDeclaration => ({
  name: 'repeat',
  decoupled: true,
  inputs: [int32('IN')],
  outputs: [int32('OUT', [1]), { name: 'IDX', datatype: 'UINT32', shape: [1] }],
  async run (infer) {
    for (const [index, value] of Int32Array.from(infer.input<Int32Array>('IN').data).entries()) {
      await gate.pass()
      infer.output<Int32Array>('OUT', [1])[0] = value
      infer.output<Uint32Array>('IDX', [1])[0] = index
      await infer.send()
    }
  }
})

/** Decoupled: for IN = n, n responses of OUT = n. */
const square: ModelDeclaration = {
  name: 'square',
  decoupled: true,
  inputs: [int32('IN', [1])],
  outputs: [int32('OUT', [1])],
  async run (infer) {
    const value = infer.input<Int32Array>('IN').data[0]
    for (let sent = 0; sent < value; sent++) {
      infer.output<Int32Array>('OUT', [1])[0] = value
      await infer.send()
    }
  }
}

/** BYTES in, each element with `!` added, and the request's parameter `suffix` if any. */
const exclaim: ModelDeclaration = {
  name: 'exclaim',
  inputs: [{ name: 'TEXT', datatype: 'BYTES', shape: [-1] }],
  outputs: [{ name: 'LOUD', datatype: 'BYTES', shape: [-1] }],
  run (infer) {
    const { data, shape } = infer.input<BytesElements>('TEXT')
    const suffix = String(infer.parameters.suffix ?? '')
    const out = infer.output<Buffer[]>('LOUD', shape)
    for (let index = 0; index < data.length; index++) out[index] = Buffer.concat([data.at(index) as Buffer, Buffer.from(`!${suffix}`)])
  }
}

/** No input: OUT = [42]. */
const constant: ModelDeclaration = {
  name: 'constant',
  inputs: [],
  outputs: [int32('OUT', [1])],
  run (infer) { infer.output<Int32Array>('OUT', [1])[0] = 42 }
}

const step = (model: string, inputMap: Record<string, string>, outputMap: Record<string, string>, version?: string): EnsembleStep =>
  ({ model, inputMap, outputMap, ...(version !== undefined && { version }) })

/** X -> increment -> Y; X, Y -> product -> Z; TEXT -> exclaim -> exclaim -> LOUD; constant -> C, as one ensemble. */
const plain: ModelDeclaration = {
  name: 'plain',
  inputs: [int32('X'), { name: 'TEXT', datatype: 'BYTES', shape: [-1] }],
  outputs: [int32('Y'), int32('Z'), { name: 'LOUD', datatype: 'BYTES', shape: [-1] }, int32('C', [1])],
  ensembleScheduling: {
    steps: [
      // Declared before the step that makes its input: the table runs it after.
      step('product', { A: 'X', B: 'Y' }, { OUT: 'Z' }),
      step('increment', { IN: 'X' }, { OUT: 'Y' }),
      step('exclaim', { TEXT: 'loud' }, { LOUD: 'LOUD' }),
      step('exclaim', { TEXT: 'TEXT' }, { LOUD: 'loud' }),
      step('constant', {}, { OUT: 'C' })
    ]
  }
}

/** IN -> repeat -> each element incremented, then squared: decoupled twice over. */
const repeatSquare: ModelDeclaration = {
  name: 'repeat_square',
  inputs: [int32('IN')],
  outputs: [int32('OUT', [1]), { name: 'IDX', datatype: 'UINT32', shape: [1] }],
  ensembleScheduling: {
    steps: [
      step('repeat', { IN: 'IN' }, { OUT: 'value', IDX: 'IDX' }),
      step('increment', { IN: 'value' }, { OUT: 'next' }),
      step('square', { IN: 'next' }, { OUT: 'OUT' })
    ]
  }
}

/** An ensemble of the ensemble above. */
const nested: ModelDeclaration = {
  name: 'nested',
  inputs: [int32('IN')],
  outputs: [int32('OUT', [1])],
  ensembleScheduling: { steps: [step('repeat_square', { IN: 'IN' }, { OUT: 'OUT' })] }
}

const MODELS = [increment, product, exclaim, constant, square, plain, repeatSquare, nested]

const tensor = (name: string, shape: number[], datatype = 'INT32') => ({ name, datatype, shape, parameters: {} })

const streamRequest = (model: string, id: string, values: number[]) => ({
  model_name: model,
  id,
  parameters: { triton_enable_empty_final_response: bool(true) },
  inputs: [tensor('IN', [values.length])],
  raw_input_contents: [int32Bytes(values)]
})

/** The bytes of output `name` of a stream's response. */
function outputBytes ({ infer_response: { outputs = [], raw_output_contents: raw = [] } }: ModelStreamInferResponse, name: string): Uint8Array {
  return raw[outputs.findIndex((output) => output.name === name)]
}

/** Each response's OUT (the final flag alone has none). */
const outs = (responses: ModelStreamInferResponse[]) =>
  responses.filter(({ infer_response: response }) => (response.outputs ?? []).length > 0).map((response) => int32s(outputBytes(response, 'OUT'))[0])

t.test('a plain ensemble: its steps in the order their tensors allow, answered once over HTTP and gRPC, its configuration Triton\'s', async (t) => {
  const { app, table, port } = await serveModelTable(t, [...MODELS, repeat()])
  const body = {
    parameters: { suffix: '?' },
    inputs: [{ name: 'X', datatype: 'INT32', shape: [3], data: [1, 2, 3] }, { name: 'TEXT', datatype: 'BYTES', shape: [2], data: ['a', 'bc'] }]
  }
  const answer = await app.inject({ method: 'POST', url: '/v2/models/plain/infer', payload: body })
  t.equal(answer.statusCode, 200, answer.body)
  t.same(answer.json().outputs, [
    { name: 'Y', datatype: 'INT32', shape: [3], data: [2, 3, 4] },
    { name: 'Z', datatype: 'INT32', shape: [3], data: [2, 6, 12] },
    { name: 'LOUD', datatype: 'BYTES', shape: [2], data: ['a!?!?', 'bc!?!?'] },
    { name: 'C', datatype: 'INT32', shape: [1], data: [42] }
  ], 'every output, from the steps that make it (BYTES through two steps; a step that takes nothing); the request\'s parameters reach its steps')
  const onlyZ = await app.inject({ method: 'POST', url: '/v2/models/plain/infer', payload: { ...body, outputs: [{ name: 'Z' }] } })
  t.same(onlyZ.json().outputs.map(({ name }: { name: string }) => name), ['Z'], 'the outputs asked for')

  const overGrpc = await grpcClient(t, port).call('ModelInfer', {
    model_name: 'plain',
    inputs: [tensor('X', [2]), tensor('TEXT', [1], 'BYTES')],
    raw_input_contents: [int32Bytes([5, 6]), Buffer.from([1, 0, 0, 0, 0x7a])]
  })
  t.same(overGrpc.outputs.map(({ name, shape }: { name: string, shape: string[] }) => [name, shape.map(Number)]), [['Y', [2]], ['Z', [2]], ['LOUD', [1]], ['C', [1]]])
  t.same(int32s(overGrpc.raw_output_contents[1]), [30, 42])
  t.same(Buffer.from(overGrpc.raw_output_contents[2]), Buffer.from([3, 0, 0, 0, 0x7a, 0x21, 0x21]), 'BYTES through two steps, over gRPC')

  const config = app.inject('/v2/models/plain/config')
  const { platform, ensemble_scheduling: scheduling, model_transaction_policy: policy } = (await config).json() as ModelConfigResponse
  t.equal(platform, 'ensemble')
  t.same(scheduling?.step[0], { model_name: 'product', model_version: -1, input_map: { A: 'X', B: 'Y' }, output_map: { OUT: 'Z' }, model_namespace: '' })
  t.same(policy, { decoupled: false }, 'no step is decoupled')
  t.equal((await app.inject('/v2/models/plain')).json().platform, 'ensemble')
  const runs = (name: string) => table.statistics(name).model_stats[0].inference_stats.success.count
  t.same([runs('plain'), runs('increment'), runs('product'), runs('exclaim')], [3, 3, 3, 6], 'each step counted in its own model\'s statistics')
})

t.test('a decoupled ensemble: each response of its decoupled step goes on through the steps after it, nested too', async (t) => {
  const gate = new Gate(false)
  const { app, port } = await serveModelTable(t, [...MODELS, repeat(gate)])
  const config = (await app.inject('/v2/models/nested/config')).json() as ModelConfigResponse
  t.same(config.model_transaction_policy, { decoupled: true }, 'decoupled, as a step is (an ensemble of one, here)')
  const refused = await app.inject({ method: 'POST', url: '/v2/models/repeat_square/infer', payload: { inputs: [] } })
  t.same([refused.statusCode, refused.json()], [501, { error: "HTTP end point doesn't support models with decoupled transaction policy" }])

  const stream = streamClient(t, port)
  stream.write(streamRequest('repeat_square', 'rs', [1, 2]))
  await gate.untilHeld(1)
  t.same(stream.received, [], 'nothing before the decoupled step answers')
  gate.open()
  // 1 -> 2 -> two responses of 2; 2 -> 3 -> three of 3; then the final flag alone.
  const responses = await stream.until(6)
  t.same(outs(responses), [2, 2, 3, 3, 3])
  t.same(responses.map(({ infer_response: response }) => response.id), ['rs', 'rs', 'rs', 'rs', 'rs', 'rs'])
  t.same(responses.map(finalFlag), [false, false, false, false, false, true])
  t.same(new Uint32Array(Uint8Array.from(outputBytes(responses[4], 'IDX')).buffer), [1],
    'a tensor of the decoupled step itself, beside those made from it')

  stream.write(streamRequest('nested', 'n', [0, 1]))
  t.same(outs((await stream.until(6 + 4)).slice(6)), [1, 2, 2], 'an ensemble as a step: its responses are its step\'s')
  stream.write(streamRequest('repeat_square', 'none', []))
  const [none] = (await stream.until(11)).slice(10)
  t.same([none.infer_response.outputs, finalFlag(none)], [[], true], 'no response of the decoupled step: the final flag alone')
  t.equal((await stream.end()).code, status.OK)
})

t.test('two requests of a decoupled ensemble on one stream: each response goes on through the step after it as its request\'s decoupled step sends it, whatever the other does', async (t) => {
  // The QA's sequence_repeat (repeat, then a step that is not decoupled), each request's repeat
  // held at its own gate: one request's responses and final flag pass while the other's wait.
  const gates = new Map([['a', new Gate(false)], ['b', new Gate(false)]])
  const keyedRepeat: ModelDeclaration = { ...repeat(), run: (infer) => repeat(gates.get(infer.id as string)).run?.(infer) }
  const sequence: ModelDeclaration = {
    name: 'sequence',
    inputs: [int32('IN')],
    outputs: [int32('OUT', [1]), { name: 'IDX', datatype: 'UINT32', shape: [1] }],
    ensembleScheduling: { steps: [step('repeat', { IN: 'IN' }, { OUT: 'value', IDX: 'IDX' }), step('increment', { IN: 'value' }, { OUT: 'OUT' })] }
  }
  const { port } = await serveModelTable(t, [increment, keyedRepeat, sequence])
  const [a, b] = [gates.get('a') as Gate, gates.get('b') as Gate]
  const stream = streamClient(t, port)
  stream.write(streamRequest('sequence', 'a', [100, 101, 102, 103]))
  await a.untilHeld(1)
  // One response of a through, then a held again.
  a.open()
  a.close()
  await stream.until(1)
  await a.untilHeld(1)
  stream.write(streamRequest('sequence', 'b', [100, 101, 102, 103]))
  await b.untilHeld(1)
  b.open()
  await stream.until(6)
  a.open()
  const responses = await stream.until(10)
  t.same(responses.map(({ infer_response: response }) => response.id), ['a', 'b', 'b', 'b', 'b', 'b', 'a', 'a', 'a', 'a'])
  t.same(responses.map(finalFlag), [false, false, false, false, false, true, false, false, false, true], 'each request\'s final flag after its last response')
  t.same(outs(responses), [101, 101, 102, 103, 104, 102, 103, 104])
  t.equal((await stream.end()).code, status.OK)
})

t.test('a step that fails fails the request; a request the step cannot take is refused in the step\'s words', async (t) => {
  const failing: ModelDeclaration = { ...increment, name: 'failing', run () { throw Object.assign(new Error('no increment today'), { statusCode: 400 }) } }
  const through: ModelDeclaration = {
    name: 'through',
    inputs: [int32('X')],
    outputs: [int32('Y')],
    ensembleScheduling: { steps: [step('failing', { IN: 'X' }, { OUT: 'Y' })] }
  }
  const toSquare: ModelDeclaration = {
    name: 'to_square',
    inputs: [int32('IN')],
    outputs: [int32('OUT', [1])],
    ensembleScheduling: { steps: [step('square', { IN: 'IN' }, { OUT: 'OUT' })] }
  }
  const lazy: ModelDeclaration = { ...increment, name: 'lazy', run () {} }
  const unfinished: ModelDeclaration = { ...through, name: 'unfinished', ensembleScheduling: { steps: [step('lazy', { IN: 'X' }, { OUT: 'Y' })] } }
  const { app, table, port } = await serveModelTable(t, [increment, failing, lazy, square, through, unfinished, toSquare])
  const post = (model: string) => app.inject({ method: 'POST', url: `/v2/models/${model}/infer`, payload: { inputs: [{ name: 'X', datatype: 'INT32', shape: [1], data: [1] }] } })
  const answer = await post('through')
  t.same([answer.statusCode, answer.json()], [400, { error: 'no increment today' }])
  const incomplete = await post('unfinished')
  t.same([incomplete.statusCode, incomplete.json()], [500, { error: 'Internal Server Error' }], 'a step that makes no output: the ensemble has none to answer')
  t.same([table.statistics('through').model_stats[0].inference_stats.fail.count, table.statistics('failing').model_stats[0].inference_stats.fail.count], [1, 1])

  const stream = streamClient(t, port)
  stream.write(streamRequest('to_square', 'wide', [1, 2]))
  const [wide] = await stream.until(1)
  t.equal(wide.error_message, "unexpected shape for input 'IN' for model 'square'. Expected [1], got [2]")
})

t.test('declarations the table refuses, naming the ensemble and what is wrong', async (t) => {
  const ensemble = (steps: EnsembleStep[], overrides: Partial<ModelDeclaration> = {}): ModelDeclaration =>
    ({ name: 'e', inputs: [int32('X')], outputs: [int32('Y')], ensembleScheduling: { steps }, ...overrides })
  const refused = (declarations: ModelDeclaration[], problem: string) => t.throws(() => new ModelTable(declarations),
    { name: 'TypeError', code: 'ERR_SHM_INVALID_MODEL_DECLARATION', message: `fastify-triton-shm: model 'e': ${problem}` }, problem)
  const fine = step('increment', { IN: 'X' }, { OUT: 'Y' })
  const stateful: ModelDeclaration = { ...increment, name: 'stateful', sequenceBatching: {} }
  refused([ensemble([fine], { run: () => {} }), increment], "an ensemble ('ensembleScheduling') has no 'run': its steps run it")
  refused([ensemble([fine], { decoupled: true }), increment], "an ensemble has no 'decoupled': it is decoupled if one of its steps is")
  refused([ensemble([fine], { sequenceBatching: {} }), increment], "an ensemble has no 'sequenceBatching'")
  refused([ensemble([fine])], "'ensembleScheduling.steps.0': model 'increment' is not declared in the table")
  refused([ensemble([step('increment', { IN: 'X' }, { OUT: 'Y' }, '2')]), increment], "'ensembleScheduling.steps.0': model 'increment' has no version 2")
  refused([ensemble([step('stateful', { IN: 'X' }, { OUT: 'Y' })]), stateful],
    "'ensembleScheduling.steps.0': model 'stateful' is stateful: ensembles of stateful models are not supported")
  refused([ensemble([step('e', { X: 'X' }, { Y: 'Y' })])], 'an ensemble that contains itself')
  refused([ensemble([step('increment', { IN: 'X', NOPE: 'X' }, { OUT: 'Y' })]), increment], "'ensembleScheduling.steps.0': 'NOPE' is not an input of model 'increment'")
  refused([ensemble([step('increment', {}, { OUT: 'Y' })]), increment], "'ensembleScheduling.steps.0': input 'IN' of model 'increment' is not mapped")
  refused([ensemble([step('increment', { IN: 'X' }, { NOPE: 'Y' })]), increment], "'ensembleScheduling.steps.0': 'NOPE' is not an output of model 'increment'")
  refused([ensemble([step('increment', { IN: 'X' }, { OUT: 'Z' })]), increment], "output 'Y' is made by no step")
  refused([ensemble([fine], { outputs: [int32('X')] }), increment], "output 'X' is made by no step")
  refused([ensemble([step('increment', { IN: 'X' }, { OUT: 'Y' })], { outputs: [{ name: 'Y', datatype: 'FP32', shape: [-1] }] }), increment],
    "output 'Y' is FP32, and its step makes INT32")
  refused([ensemble([step('increment', { IN: 'X' }, { OUT: 'Y' })], { inputs: [{ name: 'X', datatype: 'FP32', shape: [-1] }] }), increment],
    "'ensembleScheduling.steps.0': tensor 'X' is FP32, and input 'IN' of model 'increment' is INT32")
  refused([ensemble([step('increment', { IN: 'X' }, { OUT: 'X' })]), increment],
    "'ensembleScheduling.steps.0': tensor 'X' is made twice (an input of the ensemble, or another step's output)")
  refused([ensemble([step('increment', { IN: 'W' }, { OUT: 'Y' })]), increment],
    "'ensembleScheduling.steps.0': tensor 'W' is neither an input of the ensemble nor made by a step that can run before")
  refused([ensemble([step('increment', { IN: 'X' }, { OUT: 'Y' })], { maxBatchSize: 8, inputs: [int32('X', [-1, -1])], outputs: [int32('Y', [-1, -1])] }),
    { ...increment, maxBatchSize: 4, inputs: [int32('IN', [-1, -1])], outputs: [int32('OUT', [-1, -1])] }],
  'ensemble e allows maximum batch size 8, but it contains model increment which only allows maximum batch size to be 4')
  const twice = { ...repeat(), outputs: [int32('OUT', [1]), int32('IDX', [1])] }
  refused([ensemble([step('repeat', { IN: 'X' }, { OUT: 'r' }), step('product', { A: 'X', B: 'r' }, { OUT: 'Y' })]), repeat(), product],
    "in ensemble e, step of model 'product' receives inputs originated from different decoupled models")
  refused([ensemble([step('repeat', { IN: 'X' }, { OUT: 'a' }), step('other', { IN: 'X' }, { OUT: 'b' }), step('product', { A: 'a', B: 'b' }, { OUT: 'Y' })]),
    twice, { ...twice, name: 'other' }, product],
  "'ensembleScheduling.steps.1': decoupled models 'repeat' and 'other' take tensors of one origin: an ensemble runs its decoupled steps one after another only")
  t.throws(() => new ModelTable([ensemble([])]), { code: 'ERR_SHM_INVALID_MODEL_DECLARATION', message: /'ensembleScheduling.steps' must NOT have fewer than 1 items/ })
  t.throws(() => new ModelTable([{ name: 'bare', inputs: [], outputs: [] } as unknown as ModelDeclaration]),
    { message: "fastify-triton-shm: model 'bare': the declaration must have property 'run' (or 'ensembleScheduling')" })
})

t.test('a step without a version runs the newest declared, one with a version that version', async (t) => {
  const times = (factor: number, version: string): ModelDeclaration => ({
    ...increment,
    name: 'times',
    versions: [version],
    run (infer) {
      const { data, shape } = infer.input<Int32Array>('IN')
      const out = infer.output<Int32Array>('OUT', shape)
      data.forEach((value, index) => { out[index] = value * factor })
    }
  })
  const both = (name: string, version?: string): ModelDeclaration =>
    ({ name, inputs: [int32('X')], outputs: [int32('Y')], ensembleScheduling: { steps: [step('times', { IN: 'X' }, { OUT: 'Y' }, version)] } })
  const { app } = await serveModelTable(t, [times(2, '9'), times(3, '10'), times(1, '8'), both('newest'), both('ninth', '9')])
  const post = async (model: string) =>
    (await app.inject({ method: 'POST', url: `/v2/models/${model}/infer`, payload: { inputs: [{ name: 'X', datatype: 'INT32', shape: [1], data: [5] }] } })).json()
  t.same((await post('newest')).outputs[0].data, [15], 'version 10, declared apart from versions 8 and 9')
  t.same((await post('ninth')).outputs[0].data, [10])
  t.equal((await app.inject('/v2/models/ninth/config')).json().ensemble_scheduling.step[0].model_version, 9)
})

t.test('each response of a decoupled step goes on with its own tensors: one that lacks an output has none from the response before', async (t) => {
  const pairs: ModelDeclaration = {
    name: 'pairs',
    decoupled: true,
    inputs: [int32('IN')],
    outputs: [int32('A', [1]), int32('B', [1])],
    async run (infer) {
      infer.output<Int32Array>('A', [1])[0] = 1
      infer.output<Int32Array>('B', [1])[0] = 10
      await infer.send()
      infer.output<Int32Array>('A', [1])[0] = 2
      await infer.send()
    }
  }
  const both: ModelDeclaration = {
    name: 'both',
    inputs: [int32('IN')],
    outputs: [int32('OUT_A', [1]), int32('OUT_B', [1])],
    ensembleScheduling: { steps: [step('pairs', { IN: 'IN' }, { A: 'OUT_A', B: 'OUT_B' })] }
  }
  const { port } = await serveModelTable(t, [pairs, both])
  const stream = streamClient(t, port)
  stream.write(streamRequest('both', 'p', [0]))
  const [first, second] = await stream.until(2)
  t.same([int32s(outputBytes(first, 'OUT_A')), int32s(outputBytes(first, 'OUT_B'))], [[1], [10]])
  t.not(second.error_message, '', 'the second response has no OUT_B: the request fails, never answered with the first response\'s')
})

t.test('a client that leaves abandons the step running for it: the step sees its request\'s signal, and the ensemble fails', async (t) => {
  const running = new Gate(false)
  let stepSignal: AbortSignal | undefined
  const waitsForItsClient: ModelDeclaration = {
    ...increment,
    name: 'waits',
    async run (infer) {
      stepSignal = infer.signal
      await running.pass()
      if (!infer.signal.aborted) await once(infer.signal, 'abort')
      throw infer.signal.reason
    }
  }
  const through: ModelDeclaration = {
    name: 'through',
    inputs: [int32('X')],
    outputs: [int32('Y')],
    ensembleScheduling: { steps: [step('waits', { IN: 'X' }, { OUT: 'Y' })] }
  }
  const { table, port } = await serveModelTable(t, [waitsForItsClient, through])
  const call = grpcClient(t, port).start('ModelInfer', { model_name: 'through', inputs: [tensor('X', [1])], raw_input_contents: [int32Bytes([1])] })
  await running.untilHeld(1)
  t.equal(stepSignal?.aborted, false, 'the step runs, its client still there')
  call.cancel()
  await t.rejects(call.outcome, { code: status.CANCELLED })
  running.open()
  await eventually(() => table.statistics('through').model_stats[0].inference_stats.fail.count === 1, 'the ensemble to fail')
  t.equal(stepSignal?.aborted, true, 'the step\'s request was abandoned with the ensemble\'s')
  t.equal(table.statistics('waits').model_stats[0].inference_stats.fail.count, 1, 'the step failed, in its own statistics')
})

t.test('a tensor passes between batching and non-batching models as one batch, as Triton reshapes it, zero-sized too', async (t) => {
  /** Batches of up to 4 of `[-1]`: OUT = IN, and BATCH = the batch size it was given. */
  const batchingCopy: ModelDeclaration = {
    name: 'batching_copy',
    maxBatchSize: 4,
    inputs: [int32('IN', [-1, -1])],
    outputs: [int32('OUT', [-1, -1]), int32('BATCH', [-1, 1])],
    run (infer) {
      const { data, shape } = infer.input<Int32Array>('IN')
      infer.output<Int32Array>('OUT', shape).set(data)
      infer.output<Int32Array>('BATCH', [shape[0], 1]).fill(shape[0])
    }
  }
  const noBatchCopy: ModelDeclaration = { ...increment, name: 'no_batch_increment', inputs: [int32('IN', [-1])], outputs: [int32('OUT', [-1])] }
  const inner: ModelDeclaration = {
    // Made without batching, into a batching model, then out of a batch of 1 again.
    name: 'no_batch_over_batching',
    inputs: [int32('X', [-1])],
    outputs: [int32('Y', [-1]), int32('N', [1])],
    ensembleScheduling: { steps: [step('batching_copy', { IN: 'X' }, { OUT: 'copied', BATCH: 'N' }), step('batching_copy', { IN: 'copied' }, { OUT: 'Y' })] }
  }
  const outer: ModelDeclaration = {
    // A batch of 1 into a model that does not batch, and back into the batching ensemble's answer.
    name: 'batching_over_no_batch',
    maxBatchSize: 4,
    inputs: [int32('X', [-1, -1])],
    outputs: [int32('Y', [-1, -1])],
    ensembleScheduling: { steps: [step('no_batch_increment', { IN: 'X' }, { OUT: 'Y' })] }
  }
  // A batch of 1 that fits the model's fixed shape as it is keeps its dimension.
  const fixedIncrement: ModelDeclaration = { ...increment, name: 'fixed_increment', inputs: [int32('IN', [1, 2])], outputs: [int32('OUT', [1, 2])] }
  const fixed: ModelDeclaration = {
    name: 'batching_over_fixed',
    maxBatchSize: 4,
    inputs: [int32('X', [-1, 2])],
    outputs: [int32('Y', [-1, 2])],
    ensembleScheduling: { steps: [step('fixed_increment', { IN: 'X' }, { OUT: 'Y' })] }
  }
  const { app, port } = await serveModelTable(t, [batchingCopy, noBatchCopy, inner, outer, fixedIncrement, fixed])
  const infer = async (model: string, name: string, shape: number[], data: number[]) =>
    await app.inject({ method: 'POST', url: `/v2/models/${model}/infer`, payload: { inputs: [{ name, datatype: 'INT32', shape, data }] } })

  const three = await infer('no_batch_over_batching', 'X', [3], [7, 8, 9])
  t.equal(three.statusCode, 200, three.body)
  t.same(three.json().outputs, [
    { name: 'Y', datatype: 'INT32', shape: [3], data: [7, 8, 9] },
    { name: 'N', datatype: 'INT32', shape: [1], data: [1] }
  ], 'the step ran a batch of 1 of [3]; its outputs lost the batch dimension again')
  const empty = await infer('no_batch_over_batching', 'X', [0], [])
  t.same(empty.json().outputs, [
    { name: 'Y', datatype: 'INT32', shape: [0], data: [] },
    { name: 'N', datatype: 'INT32', shape: [1], data: [1] }
  ], 'zero-sized: a batch of 1 of [0]')

  const one = await infer('batching_over_no_batch', 'X', [1, 2], [1, 2])
  t.same(one.json().outputs, [{ name: 'Y', datatype: 'INT32', shape: [1, 2], data: [2, 3] }], 'a batch of 1 runs as [2], answered as [1, 2]')
  const two = await infer('batching_over_no_batch', 'X', [2, 1], [1, 2])
  t.equal(two.statusCode, 400, 'a batch of 2 is no tensor the model takes: refused in its words')
  t.match(two.json().error, /unexpected shape for input 'IN' for model 'no_batch_increment'/)

  const kept = await infer('batching_over_fixed', 'X', [1, 2], [5, 6])
  t.same(kept.json().outputs, [{ name: 'Y', datatype: 'INT32', shape: [1, 2], data: [6, 7] }], 'a batch of 1 that fits [1, 2] as it is')

  const grpc = grpcClient(t, port)
  const response = await grpc.call('ModelInfer', {
    model_name: 'no_batch_over_batching', inputs: [tensor('X', [0])], raw_input_contents: [Buffer.alloc(0)]
  })
  t.same(response.outputs.map(({ name, shape }: { name: string, shape: string[] }) => ({ name, shape: shape.map(Number) })),
    [{ name: 'Y', shape: [0] }, { name: 'N', shape: [1] }], 'over gRPC, zero-sized')
})
