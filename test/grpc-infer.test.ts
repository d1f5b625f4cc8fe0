/**
 * ModelInfer over a real gRPC connection on 127.0.0.1: the same InferRequest as over HTTP, with
 * inputs from shared memory, raw_input_contents or typed contents, outputs into shared memory or
 * raw_output_contents, section 4's checks and texts with Triton's gRPC codes, and leases that live
 * as long as the call, across transports.
 */
import { type sendUnaryData, type ServerUnaryCall, status } from '@grpc/grpc-js'
import t, { type Test } from 'tap'
import { buildInferApp, echoModel, makeMappedObject, registerRegion, sumModel, type TestModel } from './helpers/kserve'
import { modelInferHandler, modelInferRequest, modelInferResponse, readModelInferRequest, toServiceError } from '../lib/grpc'
import type { ModelInferRequest, ModelInferResponse } from '../types/grpc'
import { grpcClient, modelTable, startHostServer, startServer } from './helpers/grpc'
import { SYSTEM } from './helpers/app'
import { eventually } from './helpers/sync'

const int32Bytes = (values: number[]) => Buffer.from(Int32Array.from(values).buffer)
const int32s = (bytes: Uint8Array) => Array.from(new Int32Array(Uint8Array.from(bytes).buffer))
const range = (count: number, from = 0) => Array.from({ length: count }, (_value, index) => from + index)

const int64 = (value: number | string) => ({ int64_param: value })
const shmParameters = (region: string, byteSize: number, offset?: number) => ({
  shared_memory_region: { string_param: region },
  shared_memory_byte_size: int64(byteSize),
  ...(offset === undefined ? {} : { shared_memory_offset: int64(offset) })
})

const tensor = (name: string, parameters: object = {}, extra: object = {}) =>
  ({ name, datatype: 'INT32', shape: [1, 16], parameters, ...extra })

async function setup (t: Test, models: TestModel[] = [sumModel()]) {
  const { app } = await buildInferApp(t, models)
  const { client } = await startHostServer(t, app.systemSharedMemory, models)
  return { app, registry: app.systemSharedMemory, client }
}

/** Inputs in one region (INPUT0 then INPUT1), outputs in another, as Triton's shm examples lay them out. */
async function simpleRegions (t: Test, app: Awaited<ReturnType<typeof setup>>['app']) {
  const input = makeMappedObject(t, 128, 'in')
  const output = makeMappedObject(t, 128, 'out')
  new Int32Array(input.bytes.buffer, 0, 32).set([...range(16), ...range(16).map(() => 1)])
  await registerRegion(t, app, 'input', input.key, 128)
  await registerRegion(t, app, 'output', output.key, 128)
  return { input, output }
}

const shmRequest = {
  model_name: 'simple',
  inputs: [tensor('INPUT0', shmParameters('input', 64)), tensor('INPUT1', shmParameters('input', 64, 64))],
  outputs: [{ name: 'OUTPUT0', parameters: shmParameters('output', 64) }, { name: 'OUTPUT1', parameters: shmParameters('output', 64, 64) }]
}

t.test('inputs and outputs in shared memory registered over HTTP: no tensor byte in the messages', async (t) => {
  const { app, registry, client } = await setup(t)
  const { output } = await simpleRegions(t, app)
  const response = await client.call('ModelInfer', { ...shmRequest, id: 'request-1' })
  t.same(response.outputs.map(({ name, datatype, shape }: { name: string, datatype: string, shape: string[] }) => ({ name, datatype, shape })), [
    { name: 'OUTPUT0', datatype: 'INT32', shape: ['1', '16'] },
    { name: 'OUTPUT1', datatype: 'INT32', shape: ['1', '16'] }
  ], 'one output entry per output')
  t.same(response.raw_output_contents.map((bytes: Buffer) => bytes.length), [0, 0], 'aligned raw contents, empty for shared memory outputs')
  t.equal(response.id, 'request-1', 'the id comes back')
  t.equal(response.model_name, 'simple')
  const results = new Int32Array(Uint8Array.from(output.read()).buffer, 0, 32)
  t.same(Array.from(results.subarray(0, 16)), range(16, 1), 'OUTPUT0 = INPUT0 + INPUT1, written into the region')
  t.same(Array.from(results.subarray(16)), range(16, -1), 'OUTPUT1 = INPUT0 - INPUT1')
  t.equal(registry.counters().liveLeases, 0, 'every lease ended with the call')
})

t.test('raw_input_contents in, raw_output_contents out, aligned with the outputs asked for', async (t) => {
  const { client } = await setup(t)
  const response = await client.call('ModelInfer', {
    model_name: 'simple',
    inputs: [tensor('INPUT0'), tensor('INPUT1')],
    outputs: [{ name: 'OUTPUT1' }, { name: 'OUTPUT0' }],
    raw_input_contents: [int32Bytes(range(16, 10)), int32Bytes(range(16))]
  })
  t.same(response.outputs.map(({ name }: { name: string }) => name), ['OUTPUT1', 'OUTPUT0'], 'in the order asked')
  t.same(int32s(response.raw_output_contents[0]), range(16).map(() => 10), 'OUTPUT1')
  t.same(int32s(response.raw_output_contents[1]), range(16).map((index) => 10 + 2 * index), 'OUTPUT0')
})

t.test('no outputs named: every output of the model, raw', async (t) => {
  const { client } = await setup(t)
  const response = await client.call('ModelInfer', {
    model_name: 'simple', inputs: [tensor('INPUT0'), tensor('INPUT1')], raw_input_contents: [int32Bytes(range(16)), int32Bytes(range(16))]
  })
  t.same(response.outputs.map(({ name }: { name: string }) => name), ['OUTPUT0', 'OUTPUT1'])
  t.same(int32s(response.raw_output_contents[1]), range(16).map(() => 0))
})

t.test('typed contents, of every datatype that has a field', async (t) => {
  const datatypes = ['BOOL', 'UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64', 'FP32', 'FP64', 'BYTES'] as const
  const { client } = await setup(t, [echoModel('echo', [...datatypes])])
  const contents: Record<string, object> = {
    BOOL: { bool_contents: [true, false] },
    UINT8: { uint_contents: [0, 255] },
    UINT16: { uint_contents: [1, 65535] },
    UINT32: { uint_contents: [2, 4294967295] },
    UINT64: { uint64_contents: ['3', '18446744073709551615'] },
    INT8: { int_contents: [-128, 127] },
    INT16: { int_contents: [-32768, 5] },
    INT32: { int_contents: [-2147483648, 6] },
    INT64: { int64_contents: ['-9223372036854775808', '9223372036854775807'] },
    FP32: { fp32_contents: [0.5, -2] },
    FP64: { fp64_contents: [0.1, 1e300] },
    BYTES: { bytes_contents: [Buffer.from('one'), Buffer.from('')] }
  }
  const response = await client.call('ModelInfer', {
    model_name: 'echo',
    inputs: datatypes.map((datatype) => ({ name: `IN_${datatype}`, datatype, shape: [2], contents: contents[datatype] }))
  })
  const raw = (datatype: string) => response.raw_output_contents[response.outputs.findIndex(({ name }: { name: string }) => name === `OUT_${datatype}`)] as Buffer
  t.same([...raw('BOOL')], [1, 0])
  t.same([...raw('UINT8')], [0, 255])
  t.same([raw('UINT16').readUInt16LE(2), raw('UINT32').readUInt32LE(4)], [65535, 4294967295])
  t.equal(raw('UINT64').readBigUInt64LE(8), 2n ** 64n - 1n, 'UINT64 exact')
  t.same([raw('INT8').readInt8(0), raw('INT16').readInt16LE(0), raw('INT32').readInt32LE(0)], [-128, -32768, -2147483648])
  t.same([raw('INT64').readBigInt64LE(0), raw('INT64').readBigInt64LE(8)], [-(2n ** 63n), 2n ** 63n - 1n], 'INT64 exact')
  t.same([raw('FP32').readFloatLE(0), raw('FP64').readDoubleLE(8)], [0.5, 1e300])
  t.same([...raw('BYTES')], [3, 0, 0, 0, ...Buffer.from('one'), 0, 0, 0, 0], 'BYTES serialized with their lengths')
})

t.test('typed contents of FP16 and BF16, which no field holds: refused, saying how to send them', async (t) => {
  const { client } = await setup(t, [echoModel('half', ['FP16']), echoModel('brain', ['BF16'])])
  for (const [model, datatype] of [['half', 'FP16'], ['brain', 'BF16']]) {
    const error = await client.fail('ModelInfer', {
      model_name: model, inputs: [{ name: `IN_${datatype}`, datatype, shape: [2], contents: { fp32_contents: [0.5, 1] } }]
    })
    t.equal(error.code, status.INVALID_ARGUMENT, datatype)
    t.equal(error.details, `contents of input 'IN_${datatype}' do not match its datatype ${datatype}: send it as raw_input_contents or in shared memory`)
  }
})

t.test('one input from shared memory, the other raw', async (t) => {
  const { app, client } = await setup(t)
  await simpleRegions(t, app)
  const response = await client.call('ModelInfer', {
    model_name: 'simple',
    inputs: [tensor('INPUT0', shmParameters('input', 64)), tensor('INPUT1')],
    outputs: [{ name: 'OUTPUT0' }],
    raw_input_contents: [int32Bytes(range(16, 100))]
  })
  t.same(int32s(response.raw_output_contents[0]), range(16).map((index) => 100 + 2 * index))
})

t.test('section 4\'s checks, with their texts and Triton\'s gRPC codes', async (t) => {
  const { app, registry, client } = await setup(t)
  const { output } = await simpleRegions(t, app)
  const raw = [int32Bytes(range(16)), int32Bytes(range(16))]
  const rawInputs = [tensor('INPUT0'), tensor('INPUT1')]
  const withInputs = (inputs: object[], extra: object = {}) => ({ model_name: 'simple', inputs, ...extra })
  const cases: Array<[string, object, number, string | RegExp]> = [
    ['an unknown region', withInputs([tensor('INPUT0', shmParameters('nowhere', 64)), tensor('INPUT1', shmParameters('input', 64))]),
      status.NOT_FOUND, "Unable to find shared memory region: 'nowhere'"],
    ['an offset past the region', withInputs([tensor('INPUT0', shmParameters('input', 64, 128)), tensor('INPUT1', shmParameters('input', 64))]),
      status.INVALID_ARGUMENT, "Invalid offset for shared memory region: 'input'"],
    ['offset + byte size past the region', withInputs([tensor('INPUT0', shmParameters('input', 64, 100)), tensor('INPUT1', shmParameters('input', 64))]),
      status.INVALID_ARGUMENT, "Invalid offset + byte size for shared memory region: 'input'"],
    ['the largest int64 byte size', withInputs([tensor('INPUT0', shmParameters('input', 0)), tensor('INPUT1', shmParameters('input', 64))].map((input, index) =>
      index === 0 ? { ...input, parameters: { ...input.parameters, shared_memory_byte_size: int64('9223372036854775807') } } : input)),
    status.INVALID_ARGUMENT, "Invalid offset + byte size for shared memory region: 'input'"],
    ['a byte size that is not the tensor\'s', withInputs([tensor('INPUT0', shmParameters('input', 60)), tensor('INPUT1', shmParameters('input', 64))]),
      status.INVALID_ARGUMENT, "input byte size mismatch for input 'INPUT0' for model 'simple'. Expected 64, got 60"],
    ['a region as an int64_param', withInputs([tensor('INPUT0', { shared_memory_region: int64(1), shared_memory_byte_size: int64(64) }), tensor('INPUT1')]),
      status.INVALID_ARGUMENT, "invalid value type for 'shared_memory_region' parameter for tensor 'INPUT0', expected string_param."],
    ['a byte size as a string_param', withInputs([tensor('INPUT0', { shared_memory_region: { string_param: 'input' }, shared_memory_byte_size: { string_param: '64' } }), tensor('INPUT1')]),
      status.INVALID_ARGUMENT, "invalid value type for 'shared_memory_byte_size' parameter for tensor 'INPUT0', expected int64_param."],
    ['an offset as a uint64_param', withInputs([tensor('INPUT0', { ...shmParameters('input', 64), shared_memory_offset: { uint64_param: 0 } }), tensor('INPUT1')]),
      status.INVALID_ARGUMENT, "invalid value type for 'shared_memory_offset' parameter for tensor 'INPUT0', expected int64_param."],
    ['an unset parameter', withInputs([tensor('INPUT0', { shared_memory_region: {} }), tensor('INPUT1')]),
      status.INVALID_ARGUMENT, "invalid value type for 'shared_memory_region' parameter for tensor 'INPUT0', expected string_param."],
    ['a negative offset', withInputs([tensor('INPUT0', shmParameters('input', 64, -1)), tensor('INPUT1')]),
      status.INVALID_ARGUMENT, "parameter 'shared_memory_offset' of tensor 'INPUT0' must be an unsigned integer"],
    ['a byte size without a region', withInputs([tensor('INPUT0', { shared_memory_byte_size: int64(64) }), tensor('INPUT1')], { raw_input_contents: raw }),
      status.INVALID_ARGUMENT, "'shared_memory_byte_size' can not be specified without 'shared_memory_region' parameter for tensor 'INPUT0'"],
    ['an offset without a region', withInputs(rawInputs, { outputs: [{ name: 'OUTPUT0', parameters: { shared_memory_offset: int64(0) } }], raw_input_contents: raw }),
      status.INVALID_ARGUMENT, "'shared_memory_offset' can not be specified without 'shared_memory_region' parameter for tensor 'OUTPUT0'"],
    ['a region without a byte size', withInputs([tensor('INPUT0', { shared_memory_region: { string_param: 'input' } }), tensor('INPUT1')]),
      status.INVALID_ARGUMENT, "'shared_memory_byte_size' must be set with 'shared_memory_region' for tensor 'INPUT0'"],
    ['an output region too small', withInputs(rawInputs, { outputs: [{ name: 'OUTPUT0', parameters: shmParameters('output', 32) }], raw_input_contents: raw }),
      status.INTERNAL, "shared memory size specified with the request for output 'OUTPUT0' (32 bytes) should be at least 64 bytes to hold the results"],
    ['one raw entry too few', withInputs(rawInputs, { raw_input_contents: raw.slice(1) }),
      status.INVALID_ARGUMENT, "expected 2 entries of 'raw_input_contents' (one per input not in shared memory) but got 1 for model 'simple'"],
    ['one raw entry too many', withInputs(rawInputs, { raw_input_contents: [...raw, raw[0]] }),
      status.INVALID_ARGUMENT, "expected 2 entries of 'raw_input_contents' (one per input not in shared memory) but got 3 for model 'simple'"],
    ['raw and typed contents at once', withInputs([tensor('INPUT0', {}, { contents: { int_contents: range(16) } }), tensor('INPUT1')], { raw_input_contents: raw }),
      status.INVALID_ARGUMENT, "contents field must not be specified when using raw_input_contents for 'INPUT0'"],
    ['typed contents and shared memory at once', withInputs([tensor('INPUT0', shmParameters('input', 64), { contents: { int_contents: range(16) } }), tensor('INPUT1')]),
      status.INVALID_ARGUMENT, "input 'INPUT0' sets both 'contents' and 'shared_memory_region': send its data one way only"],
    ['contents of another datatype', withInputs([tensor('INPUT0', {}, { contents: { fp32_contents: range(16) } }), tensor('INPUT1', {}, { contents: { int_contents: range(16) } })]),
      status.INVALID_ARGUMENT, "contents of input 'INPUT0' do not match its datatype INT32: set 'int_contents' only"],
    ['contents out of range', withInputs([tensor('INPUT0', {}, { contents: { int_contents: range(16) } }), tensor('INPUT1', {}, { contents: { int_contents: range(16) } })].map((input) => ({ ...input, datatype: 'INT8' }))),
      status.INVALID_ARGUMENT, /^inference input data-type is 'INT8'|holds a value that is not/],
    ['too few typed elements', withInputs([tensor('INPUT0', {}, { contents: { int_contents: range(15) } }), tensor('INPUT1', {}, { contents: { int_contents: range(16) } })]),
      status.INVALID_ARGUMENT, "input byte size mismatch for input 'INPUT0' for model 'simple'. Expected 64, got 60"],
    ['no data at all', withInputs(rawInputs),
      status.INVALID_ARGUMENT, "input byte size mismatch for input 'INPUT0' for model 'simple'. Expected 64, got 0"],
    ['a raw entry of the wrong size', withInputs(rawInputs, { raw_input_contents: [raw[0], int32Bytes(range(15))] }),
      status.INVALID_ARGUMENT, "input byte size mismatch for input 'INPUT1' for model 'simple'. Expected 64, got 60"],
    ['a duplicate input', withInputs([tensor('INPUT0'), tensor('INPUT0')], { raw_input_contents: raw }),
      status.INVALID_ARGUMENT, "input 'INPUT0' already exists in request"],
    ['a duplicate output', withInputs(rawInputs, { outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT0' }], raw_input_contents: raw }),
      status.INVALID_ARGUMENT, "output 'OUTPUT0' already exists in request"],
    ['an unknown output', withInputs(rawInputs, { outputs: [{ name: 'OUTPUT9' }], raw_input_contents: raw }),
      status.INVALID_ARGUMENT, "unexpected inference output 'OUTPUT9' for model 'simple'"],
    ['a wrong datatype', withInputs([tensor('INPUT0'), { ...tensor('INPUT1'), datatype: 'FP32' }], { raw_input_contents: raw }),
      status.INVALID_ARGUMENT, "inference input data-type is 'FP32', model expects 'INT32' for 'simple'"],
    ['not a datatype', withInputs([tensor('INPUT0'), { ...tensor('INPUT1'), datatype: 'INT33' }], { raw_input_contents: raw }),
      status.INVALID_ARGUMENT, "Unable to parse inference request: 'datatype' of input 'INPUT1' is not a KServe datatype"],
    ['a negative dimension', withInputs([tensor('INPUT0'), { ...tensor('INPUT1'), shape: [-1, 16] }], { raw_input_contents: raw }),
      status.INVALID_ARGUMENT, "Unable to parse inference request: 'shape' of input 'INPUT1' must be an array of unsigned integers"],
    ['a huge dimension', withInputs([tensor('INPUT0'), { ...tensor('INPUT1'), shape: ['9223372036854775807', 16] }], { raw_input_contents: raw }),
      status.INVALID_ARGUMENT, "Unable to parse inference request: 'shape' of input 'INPUT1' must be an array of unsigned integers"],
    ['a missing input', withInputs([tensor('INPUT0')], { raw_input_contents: raw.slice(1) }),
      status.INVALID_ARGUMENT, "expected 2 inputs but got 1 inputs for model 'simple'. Got input(s) ['INPUT0'], but missing required input(s) ['INPUT1']. Please provide all required input(s)."],
    ['an unknown model', { model_name: 'nothing' }, status.NOT_FOUND, "Request for unknown model: 'nothing' is not found"]
  ]
  for (const [what, request, code, message] of cases) {
    const error = await client.fail('ModelInfer', request)
    t.equal(error.code, code, `${what}: ${status[code]}`)
    t.match(error.details, message, `${what}: its text`)
  }
  t.same([...output.read()], new Array(128).fill(0), 'no refused request wrote a byte')
  t.equal(registry.counters().liveLeases, 0, 'no refused request kept a lease')
})

t.test('all or nothing: a second output region too small, and the first output is not written', async (t) => {
  const { app, client } = await setup(t)
  const { output } = await simpleRegions(t, app)
  const error = await client.fail('ModelInfer', {
    ...shmRequest,
    outputs: [{ name: 'OUTPUT0', parameters: shmParameters('output', 64) }, { name: 'OUTPUT1', parameters: shmParameters('output', 60, 64) }]
  })
  t.equal(error.code, status.INTERNAL)
  t.same([...output.read()], new Array(128).fill(0), 'nothing written')
})

t.test('an output overlapping its input is computed from the input as it was', async (t) => {
  const { app, client } = await setup(t)
  const { input } = await simpleRegions(t, app)
  await client.call('ModelInfer', { ...shmRequest, outputs: [{ name: 'OUTPUT0', parameters: shmParameters('input', 64, 64) }, { name: 'OUTPUT1', parameters: shmParameters('input', 64) }] })
  const results = new Int32Array(Uint8Array.from(input.read()).buffer, 0, 32)
  t.same(Array.from(results.subarray(16)), range(16, 1), 'OUTPUT0 over INPUT1: the sum of the inputs as sent')
  t.same(Array.from(results.subarray(0, 16)), range(16, -1), 'OUTPUT1 over INPUT0: the difference of the inputs as sent')
})

t.test('messages far above gRPC\'s 4 MiB default, both ways', async (t) => {
  const { client } = await setup(t, [echoModel('echo', ['FP32'])])
  const elements = 3 * 1024 * 1024
  const values = Float32Array.from({ length: elements }, (_value, index) => index)
  const response = await client.call('ModelInfer', {
    model_name: 'echo', inputs: [{ name: 'IN_FP32', datatype: 'FP32', shape: [elements] }], raw_input_contents: [Buffer.from(values.buffer)]
  })
  const echoed = new Float32Array(Uint8Array.from(response.raw_output_contents[0]).buffer)
  t.equal(echoed.length, elements, '12 MiB in, 12 MiB out')
  t.equal(echoed[elements - 1], elements - 1)
})

/** A model that waits for `release()` before it runs. */
function slowModel () {
  let arrived: () => void = () => {}
  let release: () => void = () => {}
  const reached = new Promise<void>((resolve) => { arrived = resolve })
  const gate = new Promise<void>((resolve) => { release = resolve })
  const model = sumModel()
  const slow: TestModel = {
    signature: model.signature,
    async execute (infer) {
      arrived()
      await gate
      infer.signal.throwIfAborted()
      return model.execute(infer)
    }
  }
  return { slow, reached, release }
}

t.test('unregister over HTTP during a slow gRPC inference is deferred until the call ends', async (t) => {
  const { slow, reached, release } = slowModel()
  const { app, registry, client } = await setup(t, [slow])
  const { output } = await simpleRegions(t, app)
  const call = client.call('ModelInfer', shmRequest)
  await reached
  const unregistered = await app.inject({ method: 'POST', url: `${SYSTEM}/unregister` })
  t.equal(unregistered.statusCode, 200, 'unregister answers at once')
  t.same(registry.status().map(({ name }) => name), ['input', 'output'], 'the regions stay listed while the call holds them')
  release()
  await call
  t.same(int32s(output.read()).slice(0, 16), range(16, 1), 'the call completed into its region')
  t.same(registry.status(), [], 'then the regions are gone')
})

t.test('a cancelled call releases its leases, and a deferred unregister completes', async (t) => {
  const { slow, reached } = slowModel()
  const { app, registry, client } = await setup(t, [slow])
  await simpleRegions(t, app)
  const { cancel, outcome } = client.start('ModelInfer', shmRequest)
  await reached
  await client.call('SystemSharedMemoryUnregister', { name: 'input' })
  t.ok(registry.has('input'), 'deferred while the call runs')
  cancel()
  await t.rejects(outcome, { code: status.CANCELLED }, 'the client sees its cancel')
  await eventually(() => !registry.has('input'), 'the server never saw the cancel: the region stayed')
  t.pass('the server saw the cancel: the leases ended and the region went')
  t.equal(registry.counters().liveLeases, 0)
})

t.test('registered over gRPC, used by an HTTP inference', async (t) => {
  const { app, client } = await setup(t)
  const input = makeMappedObject(t, 128, 'in')
  new Int32Array(input.bytes.buffer, 0, 32).set([...range(16), ...range(16)])
  await client.call('SystemSharedMemoryRegister', { name: 'grpc_input', key: input.key, byte_size: 128 })
  const response = await app.inject({
    method: 'POST',
    url: '/v2/models/simple/infer',
    payload: {
      inputs: [0, 1].map((index) => ({ name: `INPUT${index}`, datatype: 'INT32', shape: [1, 16], parameters: { shared_memory_region: 'grpc_input', shared_memory_offset: 64 * index, shared_memory_byte_size: 64 } })),
      outputs: [{ name: 'OUTPUT0' }]
    }
  })
  t.same(response.json().outputs[0].data, range(16).map((index) => 2 * index))
})

t.test('a host\'s own ModelInfer handler, with the low-level helpers', async (t) => {
  const { app } = await buildInferApp(t, [])
  const registry = app.systemSharedMemory
  const model = { ...sumModel(), signature: { ...sumModel().signature, versions: ['1', '2'] } }
  let cancelledSeen: () => void = () => {}
  const cancelled = new Promise<void>((resolve) => { cancelledSeen = resolve })
  const port = await startServer(t, {
    ModelInfer: async (call: ServerUnaryCall<ModelInferRequest, ModelInferResponse>, callback: sendUnaryData<ModelInferResponse>) => {
      if (call.request.id === 'late') {
        // Read only once the client has gone: the request comes back abandoned, holding nothing.
        await new Promise((resolve) => call.once('cancelled', resolve))
        const infer = readModelInferRequest(call, { registry, model: model.signature })
        t.ok(infer.signal.aborted, 'a call cancelled before it was read is abandoned at once')
        cancelledSeen()
        return callback(toServiceError(infer.signal.reason))
      }
      // A handler that knows the version it ran names it; one that does not leaves it empty, as proto3's default.
      const version = call.request.id === 'unversioned' ? {} : { modelVersion: '2' }
      const infer = readModelInferRequest(call, { registry, model: model.signature, ...version })
      await model.execute(infer)
      callback(null, modelInferResponse(infer))
    }
  })
  const client = grpcClient(t, port)
  const request = { model_name: 'simple', inputs: [tensor('INPUT0'), tensor('INPUT1')], raw_input_contents: [int32Bytes(range(16)), int32Bytes(range(16))] }
  const response = await client.call('ModelInfer', request)
  t.equal(response.model_version, '2')
  t.equal((await client.call('ModelInfer', { ...request, id: 'unversioned' })).model_version, '', 'no version known: none named')
  t.same(int32s(response.raw_output_contents[0]), range(16).map((index) => 2 * index))
  const late = client.start('ModelInfer', { ...request, id: 'late' })
  setTimeout(() => late.cancel(), 50)
  await t.rejects(late.outcome, { code: status.CANCELLED })
  await cancelled
  t.equal(registry.counters().liveLeases, 0)
  // As grpc-js hands it to a handler: every field present.
  const decoded = { ...request, model_version: '', id: '', parameters: {}, outputs: [], inputs: request.inputs.map((input) => ({ ...input, contents: null })) }
  t.same(modelInferRequest(decoded as unknown as ModelInferRequest, { registry, model: model.signature }).inputs.map(({ name }) => name),
    ['INPUT0', 'INPUT1'], 'modelInferRequest reads a message without a call')
})

t.test('ModelInfer served by modelInferHandler names the model\'s latest version when the request names none', async (t) => {
  const model = { ...sumModel(), signature: { ...sumModel().signature, versions: ['1', '3'] } }
  const { client } = await setup(t, [model])
  const request = { model_name: 'simple', inputs: [tensor('INPUT0'), tensor('INPUT1')], raw_input_contents: [int32Bytes(range(16)), int32Bytes(range(16))] }
  t.equal((await client.call('ModelInfer', request)).model_version, '3')
  t.equal((await client.call('ModelInfer', { ...request, model_version: '1' })).model_version, '1')
})

t.test('cost limits hold over gRPC: too many BYTES elements are refused before any work', async (t) => {
  const { app } = await buildInferApp(t, [])
  const registry = app.systemSharedMemory
  const models = modelTable([echoModel('echo', ['BYTES', 'FP32'])])
  const port = await startServer(t, { ModelInfer: modelInferHandler({ registry, models, limits: { maxBytesElements: 4, maxOutputBytes: 64 } }) })
  const client = grpcClient(t, port)
  const strings = (count: number) => ({ bytes_contents: Array.from({ length: count }, (_value, index) => Buffer.from(String(index))) })
  const fp32 = (count: number) => ({ name: 'IN_FP32', datatype: 'FP32', shape: [count], contents: { fp32_contents: new Array(count).fill(1) } })
  const many = await client.fail('ModelInfer', { model_name: 'echo', inputs: [{ name: 'IN_BYTES', datatype: 'BYTES', shape: [5], contents: strings(5) }, fp32(1)] })
  t.equal(many.code, status.INVALID_ARGUMENT)
  t.equal(many.details, "tensor 'IN_BYTES' has 5 BYTES elements, more than the server's limit of 4")
  const within = await client.call('ModelInfer', { model_name: 'echo', inputs: [{ name: 'IN_BYTES', datatype: 'BYTES', shape: [4], contents: strings(4) }, fp32(64)] })
  t.equal(within.raw_output_contents[1].length, 256, 'outputs as large as the request\'s own bytes pass maxOutputBytes')
  t.equal(registry.counters().liveLeases, 0)
})
