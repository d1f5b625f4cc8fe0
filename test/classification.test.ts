/**
 * Triton's classification extension (an output's `classification` parameter) over HTTP and gRPC:
 * the top classes of each batch entry as "<value>:<index>[:<label>]" BYTES, as JSON or binary
 * data; values written as Triton writes them; the datatypes and sizes it refuses, and the
 * parameters it refuses, in its words.
 */
import { status } from '@grpc/grpc-js'
import t, { type Test } from 'tap'
import type { ModelDeclaration } from '../lib/index'
import { classify } from '../lib/kserve/classification'
import { copyTensorData } from '../lib/kserve/tensor-data'
import { grpcClient, serveModelTable } from './helpers/grpc'
import { makeMappedObject, parseInferResponse, registerRegion, shmOutput } from './helpers/kserve'
import { int64, string } from './helpers/stream'

/** OUTPUT0 = INPUT0, of any datatype; with a batch dimension (`batched`) or not. */
const identity = (name: string, datatype: ModelDeclaration['inputs'][number]['datatype'], batched: boolean, labels?: string[]): ModelDeclaration => ({
  name,
  maxBatchSize: batched ? 8 : 0,
  inputs: [{ name: 'INPUT0', datatype, shape: batched ? [-1, -1] : [-1] }],
  outputs: [{ name: 'OUTPUT0', datatype, shape: batched ? [-1, -1] : [-1], ...(labels !== undefined && { labels }) }],
  run (infer) {
    const { data, shape } = infer.input('INPUT0')
    copyTensorData(data, infer.output('OUTPUT0', shape))
  }
})

const MODELS = [
  identity('fp32', 'FP32', true, ['zero', 'one', 'two']),
  identity('int32', 'INT32', false),
  identity('uint64', 'UINT64', false),
  identity('bytes', 'BYTES', true),
  identity('fp16', 'FP16', false),
  identity('bool', 'BOOL', false)
]

const serve = (t: Test) => serveModelTable(t, MODELS)

const classified = (datatype: string, shape: number[], data: unknown[], parameters: object = { classification: 2 }) => ({
  inputs: [{ name: 'INPUT0', datatype, shape, data }],
  outputs: [{ name: 'OUTPUT0', parameters }]
})

t.test('the top classes of each batch entry, as JSON and as binary data, with labels', async (t) => {
  const { app } = await serve(t)
  const infer = (model: string, body: object) => app.inject({ method: 'POST', url: `/v2/models/${model}/infer`, payload: body })
  const batch = await infer('fp32', classified('FP32', [2, 3], [0.5, 2.25, -1, 3, 3, 7]))
  t.same(batch.json().outputs, [{ name: 'OUTPUT0', datatype: 'BYTES', shape: [2, 2], data: ['2.250000:1:one', '0.500000:0:zero', '7.000000:2:two', '3.000000:0:zero'] }],
    'each entry on its own, highest first, equal values in index order, each named by its label')
  const binary = parseInferResponse(await infer('fp32', classified('FP32', [1, 3], [1, 2, 3], { classification: 5, binary_data: true })))
  const elements = ['3.000000:2:two', '2.000000:1:one', '1.000000:0:zero']
  t.same(binary.header.outputs[0], { name: 'OUTPUT0', datatype: 'BYTES', shape: [1, 3], parameters: { binary_data_size: 12 + 14 + 14 + 15 } }, 'no more classes than elements')
  t.same(binary.binary.get('OUTPUT0'), Buffer.concat(elements.flatMap((element) => [Buffer.from([element.length, 0, 0, 0]), Buffer.from(element)])))
  const single = await infer('int32', classified('INT32', [4], [1, 5, 10, 4]))
  t.same(single.json().outputs[0], { name: 'OUTPUT0', datatype: 'BYTES', shape: [2], data: ['10:2', '5:1'] }, 'Triton\'s own example, without a batch dimension')
  const plain = await infer('int32', classified('INT32', [2], [1, 2], { classification: 0 }))
  t.same(plain.json().outputs[0].data, [1, 2], 'a count of 0: the output as it is, as Triton\'s HTTP server reads it')
})

t.test('values written as std::to_string writes them', async (t) => {
  t.same(classify('UINT64', [2], BigUint64Array.of(18446744073709551615n, 1n), 2, false).elements.map(String), ['18446744073709551615:0', '1:1'])
  t.same(classify('FP64', [4], Float64Array.of(NaN, Infinity, -Infinity, 1e22), 4, false).elements.map(String).sort(),
    ['-inf:2', '10000000000000000000000.000000:3', 'inf:1', 'nan:0'])
  t.same(classify('INT8', [3], Int8Array.of(-3, 5, 0), 1, true), { shape: [3, 1], elements: [-3, 5, 0].map((value) => Buffer.from(`${value}:0`)) },
    'a batch of entries of one element each')
})

t.test('what Triton refuses, in its words, over HTTP and gRPC', async (t) => {
  const { app, port } = await serve(t)
  const refused = async (model: string, body: object, message: string) => {
    const answer = await app.inject({ method: 'POST', url: `/v2/models/${model}/infer`, payload: body })
    t.same([answer.statusCode, answer.json()], [400, { error: message }], message)
  }
  const unsupported = (datatype: string) => `class result not available for output due to unsupported type '${datatype}'`
  await refused('bytes', classified('BYTES', [1, 1], ['a']), unsupported('BYTES'))
  await refused('bool', classified('BOOL', [1], [true]), unsupported('BOOL'))
  const object = makeMappedObject(t, 64, 'class')
  await registerRegion(t, app, 'out', object.key, 64)
  await refused('int32', { inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1], data: [1] }], outputs: [shmOutput('OUTPUT0', 'out', 64, 0, { classification: 1 })] },
    "Output can't set both 'shared_memory_region' and 'classification'")

  const grpc = grpcClient(t, port)
  const fp16 = Buffer.alloc(4)
  const call = (model: string, datatype: string, shape: number[], raw: Buffer, classification: object, more: object = {}) => ({
    model_name: model,
    inputs: [{ name: 'INPUT0', datatype, shape }],
    outputs: [{ name: 'OUTPUT0', parameters: { classification, ...more } }],
    raw_input_contents: [raw]
  })
  const answer = await grpc.call('ModelInfer', call('fp32', 'FP32', [1, 3], Buffer.from(Float32Array.of(1, 3, 2).buffer), int64(2)))
  t.same([answer.outputs[0].datatype, answer.outputs[0].shape.map(Number)], ['BYTES', [1, 2]])
  t.same(Buffer.from(answer.raw_output_contents[0]), Buffer.concat([Buffer.from([14, 0, 0, 0]), Buffer.from('3.000000:1:one'), Buffer.from([14, 0, 0, 0]), Buffer.from('2.000000:2:two')]))
  const failure = async (request: object, message: string) => {
    const error = await grpc.fail('ModelInfer', request)
    t.same([error.code, error.details], [status.INVALID_ARGUMENT, message], message)
  }
  await failure(call('fp16', 'FP16', [2], fp16, int64(1)), unsupported('FP16'))
  await failure(call('int32', 'INT32', [1], Buffer.alloc(4), string('2')), "invalid value type for 'classification' parameter, expected int64_param")
  await failure(call('int32', 'INT32', [1], Buffer.alloc(4), int64(0)), "invalid value for 'classification' parameter, expected >= 0")
  await failure(call('int32', 'INT32', [1], Buffer.alloc(4), int64(1), { shared_memory_region: string('out'), shared_memory_byte_size: int64(64) }),
    "output can't set both 'shared_memory_region' and 'classification'")
  await failure(call('int32', 'INT32', [1_000_001], Buffer.alloc(4_000_004), int64(1)), 'classification output tensor too large')
  await failure(call('fp32', 'FP32', [2, 1_000_001], Buffer.alloc(8_000_008), int64(1)), 'classification output tensor too large')
  const entries = await grpc.call('ModelInfer', call('fp32', 'FP32', [2, 1_000_000], Buffer.alloc(8_000_000), int64(1)))
  t.same(entries.outputs[0].shape.map(Number), [2, 1], 'a million elements in each entry: classified')
})
