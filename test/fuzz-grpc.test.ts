/**
 * Property-based fuzzing of the gRPC face with fast-check, over a real connection on 127.0.0.1:
 * malformed ModelInfer messages (wrong parameter types, huge and negative shapes, raw contents
 * counts that do not match, typed contents of any kind) and random shared memory calls; and, to
 * the plugin's own listener over raw HTTP/2, the same messages compressed (some corrupted), and
 * messages of millions of packed numbers, compressed or not. Whatever arrives: every call answers
 * a status (never UNKNOWN, never INTERNAL except where Triton answers it, or for bytes grpc-js
 * cannot inflate), the budget refuses what would pass it, and nothing is left held.
 */
import { status } from '@grpc/grpc-js'
import fc from 'fast-check'
import t from 'tap'
import { grpcClient, listenGrpcPlugin, modelTable, rawGrpcClient, startServer } from './helpers/grpc'
import { type Compression, delimited, framed, rawGrpc, varint } from './helpers/raw-grpc'
import { eventually } from './helpers/sync'
import { inferenceService, inferenceServiceHandlers } from '../lib/grpc'
import { buildApp } from './helpers/app'
import { echoModel, sumModel } from './helpers/kserve'
import { makeObject, PAGE_SIZE } from './helpers/shm'

const RUNS = 1_000

const number64 = fc.oneof(
  fc.constantFrom('0', '1', '-1', '64', '128', '4096', '9007199254740993', '9223372036854775807', '-9223372036854775808'),
  fc.integer({ min: -10, max: 2 * PAGE_SIZE }).map(String)
)

const parameter = fc.oneof(
  fc.record({ string_param: fc.oneof(fc.constantFrom('region', 'nowhere', ''), fc.string({ maxLength: 8 })) }),
  fc.record({ int64_param: number64 }),
  fc.record({ uint64_param: number64.filter((value) => !value.startsWith('-')) }),
  fc.record({ bool_param: fc.boolean() }),
  fc.record({ double_param: fc.double() }),
  fc.constant({})
)

const parameters = fc.dictionary(
  fc.constantFrom('shared_memory_region', 'shared_memory_offset', 'shared_memory_byte_size', 'binary_data', 'binary_data_size', 'other'),
  parameter, { maxKeys: 4 })

const contents = fc.oneof(
  fc.constant(undefined),
  fc.record({
    int_contents: fc.array(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), { maxLength: 40 }),
    fp32_contents: fc.array(fc.float(), { maxLength: 4 }),
    int64_contents: fc.array(number64, { maxLength: 4 }),
    bytes_contents: fc.array(fc.uint8Array({ maxLength: 8 }).map((bytes) => Buffer.from(bytes)), { maxLength: 4 })
  }, { requiredKeys: [] })
)

const shape = fc.array(fc.oneof(fc.integer({ min: -2, max: 20 }), fc.constantFrom(16, 2 ** 31, 2 ** 53, '9223372036854775807')), { maxLength: 4 })

const input = fc.record({
  name: fc.constantFrom('INPUT0', 'INPUT1', 'IN_FP32', 'IN_BYTES', 'X', ''),
  datatype: fc.constantFrom('INT32', 'FP32', 'BYTES', 'FP16', 'INT8', 'UINT64', 'INT33', ''),
  shape,
  parameters,
  contents
}, { requiredKeys: ['name', 'datatype', 'shape'] })

const request = fc.record({
  model_name: fc.constantFrom('simple', 'echo', 'nothing', ''),
  model_version: fc.constantFrom('', '1', '2', 'x'),
  inputs: fc.array(input, { maxLength: 3 }),
  outputs: fc.array(fc.record({ name: fc.constantFrom('OUTPUT0', 'OUTPUT1', 'OUT_FP32', 'Y'), parameters }), { maxLength: 3 }),
  raw_input_contents: fc.array(fc.uint8Array({ maxLength: 80 }).map((bytes) => Buffer.from(bytes)), { maxLength: 3 })
}, { requiredKeys: ['model_name', 'inputs'] })

/** Codes a refusal may take (INTERNAL only for Triton's: an output region too small, shm_open). */
const REFUSALS = [status.INVALID_ARGUMENT, status.NOT_FOUND, status.ALREADY_EXISTS, status.UNAVAILABLE, status.INTERNAL]

t.test('random ModelInfer and shared memory calls: a status for each, nothing left held', async (t) => {
  const app = await buildApp(t)
  const registry = app.systemSharedMemory
  const key = makeObject(t, 2 * PAGE_SIZE)
  registry.register('region', { key, byteSize: 2 * PAGE_SIZE })
  const models = modelTable([sumModel(), echoModel('echo', ['FP32', 'BYTES'])])
  const port = await startServer(t, inferenceServiceHandlers({ registry, models, server: { name: 'fuzz', version: '0' } }))
  const client = grpcClient(t, port)
  const codes = new Map<number, number>()
  await fc.assert(fc.asyncProperty(request, async (message) => {
    let code = status.OK
    try {
      await client.call('ModelInfer', message)
    } catch (error) {
      code = (error as { code: number }).code
      if (!REFUSALS.includes(code)) throw new Error(`answered ${status[code]}: ${(error as Error).message}`)
      if (code === status.INTERNAL && !/should be at least/.test((error as { details: string }).details)) {
        throw new Error(`INTERNAL without cause: ${(error as { details: string }).details}`)
      }
    }
    codes.set(code, (codes.get(code) ?? 0) + 1)
    return registry.counters().liveLeases === 0
  }), { numRuns: RUNS })
  t.ok((codes.get(status.INVALID_ARGUMENT) ?? 0) > 0, `refusals seen: ${JSON.stringify(Object.fromEntries(codes))}`)
  t.same(registry.status().map(({ name }) => name), ['region'], 'the registry is as it was')

  await fc.assert(fc.asyncProperty(
    fc.constantFrom('SystemSharedMemoryRegister', 'SystemSharedMemoryStatus', 'CudaSharedMemoryRegister', 'CudaSharedMemoryStatus'),
    fc.record({ name: fc.constantFrom('', 'region', 'other'), key: fc.constantFrom('', '/', key, '/nothing_here', '/a/b'), offset: number64.filter((value) => !value.startsWith('-')), byte_size: number64.filter((value) => !value.startsWith('-')) }),
    async (method, message) => {
      try {
        await client.call(method, message)
      } catch (error) {
        const code = (error as { code: number }).code
        if (!REFUSALS.includes(code)) throw new Error(`${method} answered ${status[code]}`)
      }
      registry.unregister('other')
      return true
    }), { numRuns: 300 })
  t.ok(registry.has('region'), 'the fuzzed registers never removed a region')
})

t.test('malformed protobuf bytes to every RPC: a status for each (never UNKNOWN), and the server serves on', async (t) => {
  const app = await buildApp(t)
  const registry = app.systemSharedMemory
  const port = await startServer(t, inferenceServiceHandlers({ registry, models: modelTable([sumModel()]), server: { name: 'fuzz', version: '0' } }))
  const names = ['ModelInfer', 'SystemSharedMemoryRegister', 'SystemSharedMemoryStatus', 'SystemSharedMemoryUnregister', 'CudaSharedMemoryRegister',
    'ModelMetadata', 'ModelConfig', 'ModelStatistics', 'ModelReady', 'ServerMetadata']
  const call = rawGrpcClient(t, port, names)
  const codes = new Map<string, number>()
  await fc.assert(fc.asyncProperty(fc.constantFrom(...names), fc.uint8Array({ maxLength: 200 }), async (name, message) => {
    const error = await call(name, Buffer.from(message))
    const code = error?.code ?? status.OK
    codes.set(status[code], (codes.get(status[code]) ?? 0) + 1)
    // INTERNAL is grpc-js's answer to bytes that are no message; a handler's own bug would be 'Internal Server Error'.
    if (code === status.INTERNAL && error?.details === 'Internal Server Error') throw new Error(`${name}: a handler failed on ${Buffer.from(message).toString('hex')}`)
    return code !== status.UNKNOWN && registry.counters().liveLeases === 0
  }), { numRuns: RUNS })
  t.ok((codes.get('INTERNAL') ?? 0) + (codes.get('INVALID_ARGUMENT') ?? 0) > 0, `codes seen: ${JSON.stringify(Object.fromEntries(codes))}`)
  t.same(await grpcClient(t, port).call('ServerLive'), { live: true }, 'the server still serves')
})

/** Packed fields of many elements, the costly case of a decoder that makes an object per element:
 * a field of shape or of typed contents, `count` elements of one-byte zeros, ten-byte varints
 * (-1) or fixed-size values, in an input for a model that exists or not. */
const numericHeavy = fc.record({
  model: fc.constantFrom('simple', 'echo', 'nothing'),
  field: fc.constantFrom('shape', 'bool', 'int', 'int64', 'uint', 'uint64', 'fp32', 'fp64', 'bytes'),
  element: fc.constantFrom('zero', 'minus one', 'fixed'),
  count: fc.oneof(fc.integer({ min: 0, max: 1000 }), fc.constantFrom(2 ** 16, 2 ** 20, 3 * 2 ** 20)),
  compression: fc.constantFrom<Compression>('identity', 'gzip', 'deflate')
})

const CONTENTS_FIELD: Record<string, number> = { bool: 1, int: 2, int64: 3, uint: 4, uint64: 5, fp32: 6, fp64: 7, bytes: 8 }

function heavyMessage ({ model, field, element, count }: { model: string, field: string, element: string, count: number }): Buffer {
  const one = element === 'zero' ? Buffer.from([0]) : element === 'minus one' ? varint(-1) : Buffer.alloc(field === 'fp32' ? 4 : 8, 0x3f)
  const elements = field === 'bytes'
    ? Buffer.concat(Array.from({ length: Math.min(count, 2 ** 16) }, () => delimited(8, one)))
    : Buffer.alloc(count * one.length).fill(one)
  const input = field === 'shape'
    ? Buffer.concat([delimited(1, 'INPUT0'), delimited(2, 'INT32'), delimited(3, elements)])
    : Buffer.concat([delimited(1, 'INPUT0'), delimited(2, 'INT32'), delimited(3, varint(count)),
      delimited(5, field === 'bytes' ? elements : delimited(CONTENTS_FIELD[field], elements))])
  return Buffer.concat([delimited(1, model), delimited(5, input)])
}

/** Codes a hostile message may take at the listener: refused as the client's mistake, for the
 * server's capacity (too large, budget held), or by grpc-js for bytes it cannot inflate. */
const HOSTILE_ANSWERS = [status.INVALID_ARGUMENT, status.NOT_FOUND, status.RESOURCE_EXHAUSTED, status.INTERNAL, status.OK]

t.test('compressed and numeric-heavy messages to the plugin\'s listener: each answered within the budget, nothing held', async (t) => {
  const maxInFlightBytes = 48 * 1024 ** 2
  const { app, port } = await listenGrpcPlugin(t, [sumModel(), echoModel('echo', ['FP32', 'BYTES'])], { maxInFlightBytes })
  const grpc = rawGrpc(t, port)
  const encode = inferenceService().service.ModelInfer.requestSerialize as (value: object) => Buffer
  const seen = new Map<string, number>()
  const check = async (body: Buffer, compression: Compression, what: () => string) => {
    const answer = await grpc.call('ModelInfer', body, { compression })
    if (answer.status === undefined || !HOSTILE_ANSWERS.includes(answer.status)) throw new Error(`${what()}: answered ${JSON.stringify(answer)}`)
    if (answer.status === status.INTERNAL && !/^(Failed to decompress message|shared memory size specified)/.test(answer.details ?? '')) {
      throw new Error(`${what()}: INTERNAL ${answer.details}`)
    }
    seen.set(status[answer.status], (seen.get(status[answer.status]) ?? 0) + 1)
  }
  await fc.assert(fc.asyncProperty(request, fc.constantFrom<Compression>('gzip', 'deflate'), fc.boolean(), async (message, compression, corrupt) => {
    const body = framed(encode(message), compression)
    if (corrupt && body.length > 8) body[body.length >> 1] ^= 0xff
    await check(body, compression, () => `${compression}${corrupt ? ', corrupted' : ''} ${JSON.stringify(message)}`)
  }), { numRuns: 300 })
  await fc.assert(fc.asyncProperty(numericHeavy, async (heavy) => {
    await check(framed(heavyMessage(heavy), heavy.compression), heavy.compression, () => JSON.stringify(heavy))
  }), { numRuns: 60 })
  t.ok((seen.get('RESOURCE_EXHAUSTED') ?? 0) > 0 && (seen.get('INVALID_ARGUMENT') ?? 0) > 0, `answers: ${JSON.stringify(Object.fromEntries(seen))}`)
  // What the process's memory does is measured in a service of its own, with a bounded heap
  // (grpc-hostile-messages): here client and server share one heap, collected when V8 likes.
  await eventually(() => app.systemSharedMemory.inFlight.heldBytes === 0, 'still held after every call was answered')
  t.same(await grpcClient(t, port).call('ServerLive'), { live: true }, 'the listener serves on')
})
