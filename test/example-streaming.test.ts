/**
 * The example service serves what Triton's Python client examples call, with Triton's semantics,
 * checked here as those examples check it (src/python/examples of triton-inference-server/client),
 * through grpc-js and HTTP over real sockets: the sequence stream and sync clients (simple_sequence,
 * simple_dyna_sequence, simple_string_dyna_sequence), the decoupled repeat_int32
 * (simple_grpc_custom_repeat), simple_identity and simple_int8, streaming over shared memory as
 * perf_analyzer's `--streaming --shared-memory system` does, and add_sub_fp32 configured so that
 * perf_analyzer's `--shape` works.
 */
import { randomUUID } from 'node:crypto'
import { status } from '@grpc/grpc-js'
import type { FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
import { buildServer } from '../example/server'
import type { ModelConfigResponse } from '../types'
import type { ModelStreamInferResponse } from '../types/grpc'
import { grpcClient } from './helpers/grpc'
import { makeMappedObject } from './helpers/kserve'
import { finalFlag, int32Bytes, int32s, sequenceParameters, shmParameters, streamClient } from './helpers/stream'

async function startExample (t: Test): Promise<{ app: FastifyInstance, base: string, port: number }> {
  const app = await buildServer({ grpcPort: 0, fastify: { logger: false } })
  t.teardown(() => app.close())
  await app.listen({ host: '127.0.0.1', port: 0 })
  const address = app.server.address() as { port: number }
  return { app, base: `http://127.0.0.1:${address.port}`, port: app.tritonGrpc.port as number }
}

const VALUES = [11, 7, 5, 3, 2, 0, 1]

/** The examples' three sequences: their ids and values. */
function sequences (stringId: string, offset = 0) {
  return [
    { id: 1000 + offset * 2, values: [0, ...VALUES] },
    { id: 1001 + offset * 2, values: [100, ...VALUES.map((value) => -value)] },
    { id: stringId, values: [20, ...VALUES.map((value) => -value)] }
  ]
}

const sequenceRequest = (model: string, id: number | string, value: number, count: number, length: number) => ({
  model_name: model,
  id: `${id}_${count}`,
  parameters: sequenceParameters(id, count === 1, count === length),
  inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1] }],
  outputs: [{ name: 'OUTPUT' }],
  raw_input_contents: [int32Bytes([value])]
})

const outputOf = (response: ModelStreamInferResponse) => int32s(response.infer_response.raw_output_contents?.[0] as Uint8Array)[0]

/** The expected results, as the examples compute them. */
function expected (dyna: boolean, results: number[][], ids: Array<number | string>): number[][] {
  return results[0].map((_value, index) => {
    let int0 = index === 0 ? 1 : VALUES[index - 1]
    let int1 = index === 0 ? 101 : -VALUES[index - 1]
    let string = index === 0 ? (dyna ? 20 : 21) : -VALUES[index - 1] + (dyna ? results[2][index - 1] : 0)
    if (dyna && index !== 0 && VALUES[index - 1] === 1) {
      int0 += ids[0] as number
      int1 += ids[1] as number
      string += Number(ids[2])
    }
    return [int0, int1, string]
  })
}

for (const dyna of [false, true]) {
  t.test(`simple_grpc_sequence_stream_infer_client${dyna ? ' -d' : ''}: three sequences on one stream`, async (t) => {
    const { port } = await startExample(t)
    const stringId = dyna ? '1002' : randomUUID()
    const all = sequences(stringId)
    const models = dyna ? ['simple_dyna_sequence', 'simple_dyna_sequence', 'simple_string_dyna_sequence'] : ['simple_sequence', 'simple_sequence', 'simple_sequence']
    const stream = streamClient(t, port)
    all.forEach(({ id, values }, sequence) => values.forEach((value, index) =>
      stream.write(sequenceRequest(models[sequence], id, value, index + 1, values.length))))
    const responses = await stream.until(3 * (VALUES.length + 1))
    t.same(responses.filter(({ error_message: message }) => message !== ''), [], 'no error')
    const results = all.map(({ id }) => responses.filter(({ infer_response: response }) => response.id?.split('_')[0] === String(id)).map(outputOf))
    const rows = results[0].map((_value, index) => results.map((column) => column[index]))
    t.same(rows, expected(dyna, results, all.map(({ id }) => id)), 'the values the example expects')
    t.equal((await stream.end()).code, status.OK)
  })
}

t.test('simple_http_sequence_sync_infer_client and simple_grpc_sequence_sync_infer_client: one request at a time', async (t) => {
  const { base, port } = await startExample(t)
  const client = grpcClient(t, port)
  for (const transport of ['http', 'grpc']) {
    const all = sequences(randomUUID(), transport === 'grpc' ? 1 : 0)
    const results: number[][] = []
    for (const { id, values } of all) {
      const column: number[] = []
      for (const [index, value] of values.entries()) {
        const start = index === 0
        const end = index === values.length - 1
        if (transport === 'http') {
          const response = await fetch(`${base}/v2/models/simple_sequence/infer`, {
            method: 'POST',
            body: JSON.stringify({
              parameters: { sequence_id: id, sequence_start: start, sequence_end: end },
              inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], data: [value] }],
              outputs: [{ name: 'OUTPUT' }]
            })
          })
          column.push(((await response.json()) as { outputs: Array<{ data: number[] }> }).outputs[0].data[0])
        } else {
          const response = await client.call('ModelInfer', sequenceRequest('simple_sequence', id, value, index + 1, values.length))
          column.push(int32s(response.raw_output_contents[0])[0])
        }
      }
      results.push(column)
    }
    const rows = results[0].map((_value, index) => results.map((column) => column[index]))
    t.same(rows, expected(false, results, all.map(({ id }) => id)), `${transport}: the values the example expects`)
  }
})

t.test('simple_grpc_custom_repeat: repeat_int32 sends one response per element, then its final flag', async (t) => {
  const { port } = await startExample(t)
  const stream = streamClient(t, port)
  const count = 10
  stream.write({
    model_name: 'repeat_int32',
    inputs: [{ name: 'IN', datatype: 'INT32', shape: [count] }, { name: 'DELAY', datatype: 'UINT32', shape: [count] }, { name: 'WAIT', datatype: 'UINT32', shape: [1] }],
    outputs: [{ name: 'OUT' }],
    parameters: { triton_enable_empty_final_response: { bool_param: true } },
    raw_input_contents: [int32Bytes(Array.from({ length: count }, (_value, index) => 100 + index)), int32Bytes(new Array(count).fill(1)), int32Bytes([1])]
  })
  const responses = await stream.until(count + 1)
  t.same(responses.slice(0, count).map(outputOf), Array.from({ length: count }, (_value, index) => 100 + index), 'OUT: 100, 101, ... as the example expects')
  t.same(responses.slice(0, count).map(({ infer_response: response }) => response.outputs?.map(({ name }) => name)), new Array(count).fill(['OUT']), 'only the output asked for')
  t.same([responses[count].infer_response.outputs, finalFlag(responses[count])], [[], true], 'the empty final response perf_analyzer waits for')
  stream.write({
    model_name: 'repeat_int32',
    id: 'mismatch',
    inputs: [{ name: 'IN', datatype: 'INT32', shape: [2] }, { name: 'DELAY', datatype: 'UINT32', shape: [1] }, { name: 'WAIT', datatype: 'UINT32', shape: [1] }],
    raw_input_contents: [int32Bytes([1, 2]), int32Bytes([0]), int32Bytes([0])]
  })
  const [mismatch] = (await stream.until(count + 2)).slice(count + 1)
  t.equal(mismatch.error_message, 'expected IN and DELAY shape to match, got [2] and [1]', 'the repeat backend\'s words')
  stream.write({
    model_name: 'repeat_int32',
    id: 'idx',
    inputs: [{ name: 'IN', datatype: 'INT32', shape: [2] }, { name: 'DELAY', datatype: 'UINT32', shape: [2] }, { name: 'WAIT', datatype: 'UINT32', shape: [1] }],
    outputs: [{ name: 'IDX' }],
    raw_input_contents: [int32Bytes([5, 6]), int32Bytes([0, 0]), int32Bytes([0])]
  })
  const indexes = (await stream.until(count + 4)).slice(count + 2)
  t.same(indexes.map(outputOf), [0, 1], 'IDX counts the responses')
  t.equal((await stream.end()).code, status.OK)
})

t.test('simple_grpc_string_infer_client, grpc_explicit_int8_content_client, memory_growth_test: simple_identity, simple_int8, custom_identity_int32', async (t) => {
  const { base, port } = await startExample(t)
  const client = grpcClient(t, port)
  const elements = [Buffer.from('he\0llo'), Buffer.from([0, 1, 2, 3])]
  const identity = await client.call('ModelInfer', {
    model_name: 'simple_identity',
    inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 2], contents: { bytes_contents: elements } }],
    outputs: [{ name: 'OUTPUT0' }]
  })
  t.same(Buffer.from(identity.raw_output_contents[0]), Buffer.concat(elements.flatMap((element) => [Buffer.from([element.length, 0, 0, 0]), element])),
    'the same elements back, embedded NUL included')
  const input0 = Array.from({ length: 16 }, (_value, index) => index)
  const input1 = Array.from({ length: 16 }, () => 127)
  const int8 = await client.call('ModelInfer', {
    model_name: 'simple_int8',
    inputs: [{ name: 'INPUT0', datatype: 'INT8', shape: [1, 16], contents: { int_contents: input0 } },
      { name: 'INPUT1', datatype: 'INT8', shape: [1, 16], contents: { int_contents: input1 } }],
    outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT1' }]
  })
  const int8s = (bytes: Uint8Array) => Array.from(new Int8Array(Uint8Array.from(bytes).buffer))
  t.same(int8s(int8.raw_output_contents[0]), input0.map((value) => ((value + 127 + 128) % 256) - 128), 'sums wrap as INT8')
  t.same(int8s(int8.raw_output_contents[1]), input0.map((value) => value - 127))
  const config = await (await fetch(`${base}/v2/models/simple_identity/config`)).json() as ModelConfigResponse
  t.same([config.max_batch_size, config.input[0].data_type, config.input[0].dims], [8, 'TYPE_STRING', [-1]], 'Triton\'s configuration of simple_identity')
  const same = await client.call('ModelInfer', {
    model_name: 'custom_identity_int32',
    inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], contents: { int_contents: input0.map((value) => value - 8) } }],
    outputs: [{ name: 'OUTPUT0' }]
  })
  t.same([same.outputs[0].shape, Array.from(new Int32Array(Uint8Array.from(same.raw_output_contents[0]).buffer))], [['1', '16'], input0.map((value) => value - 8)],
    'memory_growth_test\'s custom_identity_int32: the same INT32 back')
})

t.test('perf_analyzer --streaming --shared-memory system -m simple: requests on a stream, tensors in shared memory', async (t) => {
  const { app, port } = await startExample(t)
  const client = grpcClient(t, port)
  const input = makeMappedObject(t, 128, 'in')
  const output = makeMappedObject(t, 128, 'out')
  new Int32Array(input.bytes.buffer, 0, 32).set([...Array.from({ length: 16 }, (_value, index) => index), ...new Array(16).fill(3)])
  await client.call('SystemSharedMemoryRegister', { name: 'input_data', key: input.key, offset: 0, byte_size: 128 })
  await client.call('SystemSharedMemoryRegister', { name: 'output_data', key: output.key, offset: 0, byte_size: 128 })
  const stream = streamClient(t, port)
  const requests = 50
  for (let index = 0; index < requests; index++) {
    stream.write({
      model_name: 'simple',
      id: String(index),
      inputs: [0, 1].map((tensor) => ({ name: `INPUT${tensor}`, datatype: 'INT32', shape: [1, 16], parameters: shmParameters('input_data', 64, tensor * 64) })),
      outputs: [0, 1].map((tensor) => ({ name: `OUTPUT${tensor}`, parameters: shmParameters('output_data', 64, tensor * 64) }))
    })
  }
  const responses = await stream.until(requests)
  t.same(responses.map(({ error_message: message, infer_response: response }) => [message, response.id]), Array.from({ length: requests }, (_value, index) => ['', String(index)]))
  t.same(Array.from(new Int32Array(Uint8Array.from(output.read()).buffer, 0, 16)), Array.from({ length: 16 }, (_value, index) => index + 3))
  t.equal((await stream.end()).code, status.OK)
  t.equal(app.systemSharedMemory.counters().liveLeases, 0)
  await client.call('SystemSharedMemoryUnregister', { name: '' })
})

t.test('add_sub_fp32 is configured as Triton configures a model of variable length: no batch dimension, dims [-1]', async (t) => {
  const { base } = await startExample(t)
  const config = await (await fetch(`${base}/v2/models/add_sub_fp32/config`)).json() as ModelConfigResponse
  t.same([config.max_batch_size, config.input.map(({ dims }) => dims), config.output.map(({ dims }) => dims)], [0, [[-1], [-1]], [[-1], [-1]]],
    'so perf_analyzer\'s --shape INPUT0:<n> sets its length')
  const send = (shapes: number[][]) => fetch(`${base}/v2/models/add_sub_fp32/infer`, {
    method: 'POST',
    body: JSON.stringify({ inputs: shapes.map((shape, index) => ({ name: `INPUT${index}`, datatype: 'FP32', shape, data: new Array(shape[0]).fill(1) })) })
  })
  const served = await send([[1048576 / 1024], [1048576 / 1024]])
  t.equal(served.status, 200)
  const mismatch = await send([[3], [1]])
  t.same([mismatch.status, await mismatch.json()], [400, { error: 'INPUT0 and INPUT1 must have one shape, got [3] and [1]' }])
})
