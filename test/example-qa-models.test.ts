/**
 * The example's models for Triton's own QA suites, over real HTTP and gRPC, with the configurations
 * and answers the suites check: the zero-sized identities of L0_infer_zero and L0_http, the
 * identity backend's one-instance model, repeat_int32 configured without the decoupled policy,
 * L0_decoupled's ensembles, L0_parameters' parameter model and ensemble, the classification of
 * identity_fp32, L0_input_validation's optional inputs, string_identity's bytes, and L0_infer_zero's
 * libtorch identities and zero ensembles (zero-sized tensors over HTTP JSON and binary, gRPC, and
 * system shared memory).
 */
import { status } from '@grpc/grpc-js'
import type { FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
import { buildServer } from '../example/server'
import type { ModelConfigResponse } from '../types'
import { grpcClient, type GrpcClient } from './helpers/grpc'
import { inferBinary, parseInferResponse } from './helpers/kserve'
import { makeObject } from './helpers/shm'
import { bool, finalFlag, int32Bytes, int32s, int64, streamClient } from './helpers/stream'

interface Example { app: FastifyInstance, grpc: GrpcClient, port: number }

async function startExample (t: Test): Promise<Example> {
  const app = await buildServer({ grpcPort: 0, fastify: { logger: false } })
  t.teardown(() => app.close())
  await app.ready()
  const port = app.tritonGrpc.port as number
  return { app, grpc: grpcClient(t, port), port }
}

const post = (app: FastifyInstance, model: string, body: object, headers: Record<string, string> = {}) =>
  app.inject({ method: 'POST', url: `/v2/models/${model}/infer`, payload: body, headers })

const config = async (app: FastifyInstance, model: string) => (await app.inject(`/v2/models/${model}/config`)).json() as ModelConfigResponse

t.test('zero-sized tensors through the QA identities, over HTTP and gRPC; their configurations', async (t) => {
  const { app, grpc } = await startExample(t)
  const fp16 = parseInferResponse(await inferBinary(app, 'onnx_zero_1_float16', {
    inputs: [{ name: 'INPUT0', datatype: 'FP16', shape: [8, 0, 2], parameters: { binary_data_size: 0 } }]
  }, []))
  t.same(fp16.header.outputs, [{ name: 'OUTPUT0', datatype: 'FP16', shape: [8, 0, 2], parameters: { binary_data_size: 0 } }], 'FP16, as binary data')
  const bytes = await post(app, 'onnx_nobatch_zero_1_object', { inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [0], data: [] }] })
  t.same(bytes.json().outputs, [{ name: 'OUTPUT0', datatype: 'BYTES', shape: [0], data: [] }], 'no element')
  const bools = await post(app, 'onnx_zero_1_bool', { inputs: [{ name: 'INPUT0', datatype: 'BOOL', shape: [8, 0], data: [] }] })
  t.same(bools.json().outputs, [{ name: 'OUTPUT0', datatype: 'BOOL', shape: [8, 0], data: [] }], 'a batch of 8 empty entries')
  const three = await grpc.call('ModelInfer', {
    model_name: 'onnx_zero_3_float16',
    inputs: [[1, 0, 2], [1, 2, 2], [1, 1, 0]].map((shape, index) => ({ name: `INPUT${index}`, datatype: 'FP16', shape })),
    raw_input_contents: [Buffer.alloc(0), Buffer.from([1, 2, 3, 4, 5, 6, 7, 8]), Buffer.alloc(0)]
  })
  t.same(three.outputs.map(({ shape }: { shape: string[] }) => shape.map(Number)), [[1, 0, 2], [1, 2, 2], [1, 1, 0]])
  t.same(three.raw_output_contents.map((content: Uint8Array) => [...content]), [[], [1, 2, 3, 4, 5, 6, 7, 8], []], 'FP16 bytes as they came')
  const int64 = await post(app, 'simple_identity_int64', { inputs: [{ name: 'INPUT0', datatype: 'INT64', shape: [1, 1], data: [[123]] }] })
  t.same(int64.json().outputs[0].data, [123])

  for (const [model, batch, datatype, dims] of [
    ['onnx_zero_1_float32', 8, 'TYPE_FP32', [-1]], ['onnx_nobatch_zero_3_object', 0, 'TYPE_STRING', [-1, -1]], ['onnx_zero_1_float16', 8, 'TYPE_FP16', [-1, -1]],
    ['onnx_zero_1_object_1_element', 8, 'TYPE_STRING', [1]], ['custom_zero_1_float32', 1, 'TYPE_FP32', [1]], ['string_identity', 0, 'TYPE_STRING', [-1]],
    ['identity_bytes', 64, 'TYPE_STRING', [-1]], ['identity_fp32', 64, 'TYPE_FP32', [-1]]
  ] as const) {
    const { max_batch_size: maxBatch, input: [input] } = await config(app, model)
    t.same([maxBatch, input.data_type, input.dims], [batch, datatype, dims], `${model}: Triton's configuration`)
  }
  t.equal((await config(app, 'custom_zero_1_float32')).instance_group[0].count, 1, 'custom_zero_1_float32: one instance, as the identity backend')
  const element = await app.inject({ method: 'POST', url: '/v2/models/onnx_zero_1_object_1_element/infer', headers: { 'inference-header-content-length': '0' }, payload: '427' })
  const length = Number(element.headers['inference-header-content-length'])
  t.equal(element.rawPayload.subarray(length + 4).toString(), '427', 'a raw BYTES request of one element, as L0_http\'s test_byte sends it')
})

t.test('L0_infer_zero\'s libtorch identities and zero ensembles: zero-sized tensors over HTTP, gRPC and system shared memory', async (t) => {
  const { app, grpc } = await startExample(t)
  const libtorch = await post(app, 'libtorch_zero_1_bool', { inputs: [{ name: 'INPUT__0', datatype: 'BOOL', shape: [8, 0], data: [] }] })
  t.same(libtorch.json().outputs, [{ name: 'OUTPUT__0', datatype: 'BOOL', shape: [8, 0], data: [] }], 'PyTorch\'s tensor names')
  t.equal((await app.inject('/v2/models/libtorch_nobatch_zero_3_float32')).json().platform, 'pytorch_libtorch', 'the platform the QA\'s clients name the tensors by')

  for (const kind of ['simple', 'sequence', 'fan']) {
    const batched = await post(app, `${kind}_zero_zero_3_float32`, {
      inputs: [[8, 0], [8, 1], [8, 0]].map((shape, index) => ({ name: `INPUT${index}`, datatype: 'FP32', shape, data: Array(shape[0] * shape[1]).fill(index) }))
    })
    t.same(batched.json().outputs.map(({ shape, data }: { shape: number[], data: number[] }) => ({ shape, data })),
      [{ shape: [8, 0], data: [] }, { shape: [8, 1], data: Array(8).fill(1) }, { shape: [8, 0], data: [] }], `${kind}_zero_zero_3_float32: a batch of 8`)
    const alone = parseInferResponse(await inferBinary(app, `${kind}_zero_nobatch_zero_1_bool`, {
      inputs: [{ name: 'INPUT0', datatype: 'BOOL', shape: [0], parameters: { binary_data_size: 0 } }],
      outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }]
    }, []))
    t.same(alone.header.outputs, [{ name: 'OUTPUT0', datatype: 'BOOL', shape: [0], parameters: { binary_data_size: 0 } }],
      `${kind}_zero_nobatch_zero_1_bool: [0] through a model that batches, as binary data`)
  }
  const three = await grpc.call('ModelInfer', {
    model_name: 'fan_zero_nobatch_zero_3_float32',
    inputs: [[0], [2], [0]].map((shape, index) => ({ name: `INPUT${index}`, datatype: 'FP32', shape })),
    raw_input_contents: [Buffer.alloc(0), Buffer.from(Float32Array.from([1.5, -2]).buffer), Buffer.alloc(0)]
  })
  t.same(three.outputs.map(({ shape }: { shape: string[] }) => shape.map(Number)), [[0], [2], [0]], 'over gRPC')
  t.same(three.raw_output_contents.map((content: Uint8Array) => [...new Float32Array(Uint8Array.from(content).buffer)]), [[], [1.5, -2], []])

  // System shared memory: an empty input read from a region, an empty output written to one.
  const key = makeObject(t, 64, 'zero')
  const registered = await app.inject({ method: 'POST', url: '/v2/systemsharedmemory/region/zero/register', payload: { key, byte_size: 64 } })
  t.equal(registered.statusCode, 200, registered.body)
  const region = (byteSize: number) => ({ shared_memory_region: 'zero', shared_memory_byte_size: byteSize, shared_memory_offset: 0 })
  const shm = await post(app, 'sequence_zero_zero_1_float32', {
    inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 0], parameters: region(0) }],
    outputs: [{ name: 'OUTPUT0', parameters: region(0) }]
  })
  t.equal(shm.statusCode, 200, shm.body)
  t.same(shm.json().outputs, [{ name: 'OUTPUT0', datatype: 'FP32', shape: [1, 0] }], 'written to the region: zero bytes, no data in the body')
})

t.test('repeat_int32 configured without the decoupled policy, square_int32, and L0_decoupled\'s ensembles', async (t) => {
  const { app, grpc, port } = await startExample(t)
  t.same((await config(app, 'repeat_int32_non_decoupled')).model_transaction_policy, { decoupled: false })
  const repeatInputs = (values: number[]) => ({
    inputs: [{ name: 'IN', datatype: 'INT32', shape: [values.length] }, { name: 'DELAY', datatype: 'UINT32', shape: [values.length] },
      { name: 'WAIT', datatype: 'UINT32', shape: [1] }],
    raw_input_contents: [int32Bytes(values), Buffer.alloc(4 * values.length), Buffer.alloc(4)]
  })
  const first = await grpc.call('ModelInfer', { model_name: 'repeat_int32_non_decoupled', ...repeatInputs([100, 101, 102]) })
  t.same([int32s(first.raw_output_contents[0]), int32s(first.raw_output_contents[1])], [[100], [0]], 'the first response only')

  const stream = streamClient(t, port)
  const request = (model: string, id: string, values: number[]) => stream.write({
    model_name: model, id, parameters: { triton_enable_empty_final_response: bool(true) }, outputs: [{ name: 'OUT' }], ...repeatInputs(values)
  })
  let seen = 0
  /** OUT of the next `count` responses (the last of them the final flag alone). */
  const outs = async (count: number) => {
    const responses = (await stream.until(seen + count)).slice(seen)
    seen += count
    return responses.filter((response) => (response.infer_response.outputs ?? []).length > 0)
      .map((response) => int32s((response.infer_response.raw_output_contents ?? [])[0])[0])
  }
  request('simple_repeat', 's', [7, 8])
  t.same(await outs(3), [7, 8])
  request('sequence_repeat', 'q', [7, 8])
  t.same(await outs(3), [7, 8])
  request('fan_repeat', 'f', [7, 8])
  t.same(await outs(3), [14, 16], 'repeat_out + its identity, by the add/sub model\'s newest version')
  request('repeat_square', 'r', [2, 3])
  t.same(await outs(6), [2, 2, 3, 3, 3])
  request('nested_square', 'n', [1, 2])
  t.same(await outs(4), [1, 2, 2])
  t.same(stream.received.map(finalFlag).filter(Boolean).length, 5, 'each request ends with its final flag')
  for (const model of ['simple_repeat', 'sequence_repeat', 'fan_repeat', 'repeat_square', 'nested_square']) {
    t.same((await config(app, model)).model_transaction_policy, { decoupled: true }, `${model}: decoupled, as its repeat_int32 step is`)
  }
  const addSub = (version: string) => grpc.call('ModelInfer', {
    model_name: 'libtorch_nobatch_int32_int32_int32',
    model_version: version,
    inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1] }, { name: 'INPUT1', datatype: 'INT32', shape: [1] }],
    raw_input_contents: [int32Bytes([5]), int32Bytes([3])]
  }).then((answer) => answer.raw_output_contents.map((content: Uint8Array) => int32s(content)[0]))
  t.same([await addSub('1'), await addSub('3')], [[8, 2], [2, 8]], 'version 1 adds then subtracts, versions 2 and 3 the other way round')
})

t.test('parameter and its ensemble see the request\'s parameters; the optional input models; classification; bytes that are not UTF-8', async (t) => {
  const { app, grpc } = await startExample(t)
  const input = { name: 'INPUT0', datatype: 'FP32', shape: [1], data: [1] }
  for (const model of ['parameter', 'ensemble']) {
    const answer = (await post(app, model, { parameters: { key1: 'value1', key2: 2, key3: true }, inputs: [input] })).json()
    t.same(answer.outputs.map(({ data }: { data: string[] }) => data), [['key1', 'key2', 'key3'], ['value1', '2', 'True']], `${model}: keys and values`)
  }
  const overGrpc = await grpc.call('ModelInfer', {
    model_name: 'parameter', parameters: { count: int64(-4) }, inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }], raw_input_contents: [Buffer.alloc(4)]
  })
  t.same(overGrpc.raw_output_contents.map((content: Uint8Array) => Buffer.from(content).subarray(4).toString()), ['count', '-4'])

  const missing = await grpc.fail('ModelInfer', { model_name: 'input_all_required', inputs: [] })
  t.same([missing.code, missing.details], [status.INVALID_ARGUMENT, "expected 3 inputs but got 0 inputs for model 'input_all_required'. " +
    "Got input(s) [], but missing required input(s) ['INPUT0','INPUT1','INPUT2']. Please provide all required input(s)."])
  const optional = await grpc.fail('ModelInfer', { model_name: 'input_optional', inputs: [] })
  t.match(optional.details, /^expected number of inputs between 3 and 4 but got 0 inputs for model 'input_optional'/)
  const none = await grpc.call('ModelInfer', { model_name: 'input_all_optional' })
  t.same([none.outputs[0].name, Array.from(new Float32Array(Uint8Array.from(none.raw_output_contents[0]).buffer))], ['OUTPUT0', [1]])

  const classes = await post(app, 'identity_fp32', {
    inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 8], data: [1, 1, 1, 1, 1, 1, 1, 1] }],
    outputs: [{ name: 'OUTPUT0', parameters: { classification: 5 } }]
  })
  t.same(classes.json().outputs[0], { name: 'OUTPUT0', datatype: 'BYTES', shape: [1, 5], data: [0, 1, 2, 3, 4].map((index) => `1.000000:${index}`) },
    'identity_fp32 (ONNX, batches of 64) classified')
  const bytes = await post(app, 'identity_bytes', {
    inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 1], data: ['test'] }],
    outputs: [{ name: 'OUTPUT0', parameters: { classification: 5 } }]
  })
  t.same(bytes.json(), { error: "class result not available for output due to unsupported type 'BYTES'" })

  const invalid = Buffer.from([0xff, 0xfe, 0x41])
  const elements = Buffer.concat(Array.from({ length: 8 }, () => Buffer.concat([Buffer.from([3, 0, 0, 0]), invalid])))
  const header = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [8], parameters: { binary_data_size: elements.length } }], outputs: [{ name: 'OUTPUT0' }] })
  const asJson = await app.inject({
    method: 'POST', url: '/v2/models/string_identity/infer', headers: { 'inference-header-content-length': String(header.length) }, payload: Buffer.concat([Buffer.from(header), elements])
  })
  t.same([asJson.statusCode, asJson.json()], [400, { error: "output 'OUTPUT0' holds an element that is not UTF-8, which JSON cannot carry: ask for it as binary data" }])
  const asBinary = await grpc.call('ModelInfer', {
    model_name: 'string_identity', inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [8] }], raw_input_contents: [elements]
  })
  t.same(Buffer.from(asBinary.raw_output_contents[0]), elements, 'as binary data, the bytes as they came')
})
