/**
 * The package's own ModelInferRequest decoder against proto-loader's (which made an object per
 * repeated element): the same message from the same bytes, for any request fast-check makes;
 * packed and unpacked repeated fields alike; what its decoded form takes known before it is
 * allocated, and refused past 8 times the message; bytes that are no message refused with a
 * TritonError, never another exception. And over a real connection: a host's server built from
 * `inferenceService()` decodes typed contents into the model's tensors with no value changed.
 */
import { isDeepStrictEqual } from 'node:util'
import { status } from '@grpc/grpc-js'
import { loadSync } from '@grpc/proto-loader'
import fc from 'fast-check'
import t from 'tap'
import { GRPC_LOADER_OPTIONS, inferenceService, inferenceServiceHandlers, modelInferRequest, type ModelInferRequest, PROTO_PATH } from '../lib/grpc'
import { allowedDecodedBytes } from '../lib/grpc/decoded-cost'
import { checkedDecodedBytes, decodedBytes, decodeModelInferRequest } from '../lib/grpc/model-infer-message'
import { type BytesElements, TritonError } from '../lib/index'
import { buildApp } from './helpers/app'
import { modelTable, rawGrpcClient, startServer } from './helpers/grpc'
import { echoModel } from './helpers/kserve'
import { delimited, varint, varintField } from './helpers/raw-grpc'

type Codec = { requestSerialize: (value: object) => Buffer, requestDeserialize: (bytes: Buffer) => unknown }

const protoLoaders = loadSync(PROTO_PATH, GRPC_LOADER_OPTIONS)['inference.GRPCInferenceService'] as unknown as Record<string, Codec>
const theirs = protoLoaders.ModelInfer

/** A decoded message in one shape, whoever decoded it: repeated elements (typed arrays or
 * arrays) as strings, bytes as hex, BYTES elements as the hex of each, shapes as numbers. */
function normalized (value: unknown, key = ''): unknown {
  if (Buffer.isBuffer(value)) return value.toString('hex')
  if (key === 'shape') return (value as unknown[]).map(Number)
  if (value !== null && typeof value === 'object' && 'serialized' in value) return [...value as unknown as Iterable<Buffer>].map((element) => element.toString('hex'))
  if (key.endsWith('_contents') && (Array.isArray(value) || ArrayBuffer.isView(value))) {
    return Array.from(value as ArrayLike<unknown>, (element) => Buffer.isBuffer(element)
      ? element.toString('hex')
      : typeof element === 'boolean' ? String(Number(element)) : String(element))
  }
  if (Array.isArray(value)) return value.map((element) => normalized(element))
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([field, inner]) => [field, normalized(inner, field)]))
  }
  return value
}

const int64 = fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map(String)
const uint64 = fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map(String)
const parameter = fc.oneof(
  fc.record({ bool_param: fc.boolean() }),
  fc.record({ int64_param: int64 }),
  fc.record({ string_param: fc.string({ maxLength: 6, unit: 'grapheme' }) }),
  fc.record({ double_param: fc.double({ noNaN: true }) }),
  fc.record({ uint64_param: uint64 })
)
const parameters = fc.dictionary(fc.string({ maxLength: 5 }), parameter, { maxKeys: 3 })
const contents = fc.record({
  bool_contents: fc.array(fc.boolean(), { maxLength: 5 }),
  int_contents: fc.array(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), { maxLength: 5 }),
  int64_contents: fc.array(int64, { maxLength: 5 }),
  uint_contents: fc.array(fc.integer({ min: 0, max: 2 ** 32 - 1 }), { maxLength: 5 }),
  uint64_contents: fc.array(uint64, { maxLength: 5 }),
  fp32_contents: fc.array(fc.float({ noNaN: true }), { maxLength: 5 }),
  fp64_contents: fc.array(fc.double({ noNaN: true }), { maxLength: 5 }),
  bytes_contents: fc.array(fc.uint8Array({ maxLength: 6 }).map((bytes) => Buffer.from(bytes)), { maxLength: 4 })
}, { requiredKeys: [] })
const request = fc.record({
  model_name: fc.string({ maxLength: 8 }),
  model_version: fc.string({ maxLength: 3 }),
  id: fc.string({ maxLength: 4 }),
  parameters,
  inputs: fc.array(fc.record({
    name: fc.string({ maxLength: 6 }),
    datatype: fc.constantFrom('INT32', 'BYTES', ''),
    // Shapes exact in JavaScript: a dimension past 2^53 arrives rounded, as it always did.
    shape: fc.array(fc.integer({ min: -(2 ** 40), max: 2 ** 40 }), { maxLength: 4 }),
    parameters,
    contents
  }, { requiredKeys: ['name'] }), { maxLength: 3 }),
  outputs: fc.array(fc.record({ name: fc.string({ maxLength: 6 }), parameters }), { maxLength: 2 }),
  raw_input_contents: fc.array(fc.uint8Array({ maxLength: 10 }).map((bytes) => Buffer.from(bytes)), { maxLength: 2 })
}, { requiredKeys: [] })

t.test('the same message as proto-loader\'s, from the same bytes, for any request', async (t) => {
  fc.assert(fc.property(request, (message) => {
    const bytes = theirs.requestSerialize(message)
    const ours = decodeModelInferRequest(bytes)
    const [mine, proto] = [normalized(ours), normalized(theirs.requestDeserialize(bytes))]
    if (!isDeepStrictEqual(mine, proto)) t.same(mine, proto, 'the decoded messages differ')
    if (!isDeepStrictEqual(mine, proto)) return false
    // What the decoded form takes, known before: its typed arrays at least.
    const typedBytes = ours.inputs.reduce((total, { contents }) => total + Object.values(contents ?? {})
      .reduce((sum: number, values) => sum + ((values as { byteLength?: number }).byteLength ?? 0), 0), 0)
    return checkedDecodedBytes(bytes) >= typedBytes && decodedBytes(bytes) <= allowedDecodedBytes(bytes.length)
  }), { numRuns: 300 })
  t.pass('300 requests')
})

t.test('repeated numbers packed or one field each: the same elements', async (t) => {
  const values = [0n, 1n, 300n, -1n, -(2n ** 63n), 2n ** 63n - 1n]
  const packed = (field: number) => delimited(field, Buffer.concat(values.map(varint)))
  const unpacked = (field: number) => Buffer.concat(values.map((value) => varintField(field, value)))
  for (const encode of [packed, unpacked]) {
    const input = Buffer.concat([delimited(1, 'X'), encode(3), delimited(5, Buffer.concat([encode(3), encode(2)]))])
    const decoded = decodeModelInferRequest(delimited(5, input))
    const [{ shape, contents }] = decoded.inputs
    t.same(shape, values.map(Number), `${encode.name}: shape`)
    t.same([...contents!.int64_contents as BigInt64Array], values, `${encode.name}: int64_contents, exact`)
    t.same([...contents!.int_contents as Int32Array], values.map((value) => Number(BigInt.asIntN(32, value))), `${encode.name}: int_contents`)
  }
  const floats = Buffer.alloc(8)
  floats.writeFloatLE(1.5, 0)
  floats.writeFloatLE(-2, 4)
  const fixed = decodeModelInferRequest(delimited(5, delimited(5, Buffer.concat([delimited(6, floats), Buffer.from([0x35]), floats.subarray(0, 4)]))))
  t.same([...fixed.inputs[0].contents!.fp32_contents as Float32Array], [1.5, -2, 1.5], 'fp32 packed, then one more unpacked')
  const fields = (message: Buffer) => decodeModelInferRequest(message).inputs[0]
  const twice = Buffer.concat([delimited(5, Buffer.concat([delimited(1, 'a'), delimited(5, delimited(6, floats))])), delimited(5, delimited(5, delimited(7, Buffer.alloc(8))))])
  t.same(fields(twice).name, 'a', 'two inputs')
  const last = delimited(5, Buffer.concat([delimited(5, delimited(6, floats)), delimited(5, delimited(7, Buffer.alloc(8)))]))
  t.same([...fields(last).contents!.fp64_contents as Float64Array], [0], 'contents sent twice: the last is read')
  t.same(decodeModelInferRequest(delimited(5, delimited(3, Buffer.alloc(0)))).inputs[0].shape, [], 'an empty packed field: no element')
  const unknown = Buffer.concat([varintField(15, 7), varint((16 << 3) | 1), Buffer.alloc(8), varint((17 << 3) | 5), Buffer.alloc(4), delimited(1, 'm')])
  t.equal(decodeModelInferRequest(unknown).model_name, 'm', 'fields it does not know are skipped')
  const choice = delimited(4, Buffer.concat([delimited(1, 'p'), delimited(2, Buffer.concat([varintField(1, 1), delimited(3, 'last')]))]))
  t.same(decodeModelInferRequest(choice).parameters, { p: { parameter_choice: 'string_param', string_param: 'last' } }, 'a oneof set twice: the last wins')
})

t.test('64-bit parameters on both sides of 2^53, and the names and datatypes it knows beside ones it does not: as proto-loader reads them', async (t) => {
  const edges = [0n, 1n, 2n ** 32n - 1n, 2n ** 32n, 2n ** 53n - 1n, 2n ** 53n, 2n ** 53n + 1n, 2n ** 63n - 1n]
  const int64 = [...edges, ...edges.map((value) => -value), -(2n ** 63n)]
  const uint64 = [...edges, 2n ** 63n, 2n ** 64n - 1n]
  const named = (values: bigint[], choice: string) => Object.fromEntries(values.map((value, index) => [`${choice}${index}`, { [choice]: String(value) }]))
  // Known names, names of a known one's length that are not it, a name in more than one byte per character.
  const texts = ['shared_memory_region', 'shared_memory_regioN', 'binary_data', 'sequence_id', 'sequence_ix', 'FP32', 'FP33', 'ÉTAT']
  const message = {
    parameters: { ...named(int64, 'int64_param'), ...named(uint64, 'uint64_param') },
    inputs: texts.map((text) => ({ name: 'x', datatype: text, parameters: { [text]: { string_param: text } } }))
  }
  const bytes = theirs.requestSerialize(message)
  const ours = decodeModelInferRequest(bytes)
  t.same(normalized(ours), normalized(theirs.requestDeserialize(bytes)), 'the same message')
  t.same(Object.values(ours.parameters).map((parameter) => parameter.int64_param ?? parameter.uint64_param), [...int64, ...uint64].map(String), 'every value exact')
  t.same(ours.inputs.map(({ datatype, parameters }) => [datatype, Object.keys(parameters)[0]]), texts.map((text) => [text, text]), 'every text as sent')
})

t.test('bytes that are no ModelInferRequest: ERR_SHM_MALFORMED_MESSAGE, never another exception', async (t) => {
  const cases: Array<[string, Buffer]> = [
    ['a tag of field 0', Buffer.from([0x00, 0x01])],
    ['a tag cut short', Buffer.from([0x80])],
    ['a length of 2^31', Buffer.concat([Buffer.from([0x0a]), varint(2 ** 31)])],
    ['a group (wire type 3)', Buffer.from([(1 << 3) | 3])],
    ['a varint of 11 bytes', Buffer.concat([Buffer.from([0x08]), Buffer.alloc(10, 0xff), Buffer.from([0x01])])],
    ['a length past the end', Buffer.from([0x0a, 0x05, 0x61])],
    ['a length past 2^31', Buffer.concat([Buffer.from([0x0a]), varint(2 ** 32)])],
    ['a string field as a varint', Buffer.from([0x08, 0x01])],
    ['a packed varint cut short', delimited(5, delimited(3, Buffer.from([0x80])))],
    ['packed floats that are no whole number of floats', delimited(5, delimited(5, delimited(6, Buffer.alloc(5))))],
    ['a fixed64 cut short', Buffer.concat([varint((20 << 3) | 1), Buffer.alloc(2)])]
  ]
  for (const [what, bytes] of cases) {
    t.throws(() => checkedDecodedBytes(bytes), { code: 'ERR_SHM_MALFORMED_MESSAGE', kind: 'invalid' }, what)
  }
  fc.assert(fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
    try {
      checkedDecodedBytes(Buffer.from(bytes))
      decodeModelInferRequest(Buffer.from(bytes))
    } catch (error) {
      if (!(error instanceof TritonError) || error.code !== 'ERR_SHM_MALFORMED_MESSAGE') throw error
    }
  }), { numRuns: 3000 })
})

t.test('a message whose decoded form would take more than 8 times its bytes is refused before it is decoded', async (t) => {
  const inputs = Buffer.concat(Array.from({ length: 20_000 }, () => delimited(5, Buffer.alloc(0))))
  const error = t.throws(() => checkedDecodedBytes(inputs), { code: 'ERR_SHM_MESSAGE_TOO_COSTLY' }) as Error
  t.match(error.message, /^the ModelInferRequest message of 40000 bytes would take \d+ bytes once decoded, more than the 1368576/)
  const zeros = delimited(5, delimited(5, delimited(3, Buffer.alloc(1024 ** 2))))
  t.ok(checkedDecodedBytes(zeros) <= allowedDecodedBytes(zeros.length), 'a million int64 zeros: 8 bytes each, within the bound')
})

t.test('over a connection, a host\'s server from inferenceService(): typed contents reach the model exact, bad bytes are refused', async (t) => {
  const app = await buildApp(t)
  const datatypes = ['BOOL', 'INT64', 'UINT64', 'INT8', 'FP32', 'BYTES'] as const
  const port = await startServer(t, inferenceServiceHandlers({
    registry: app.systemSharedMemory, models: modelTable([echoModel('echo', [...datatypes])]), server: { name: 'host', version: '1' }
  }))
  const Client = inferenceService()
  const client = new Client(`127.0.0.1:${port}`, (await import('@grpc/grpc-js')).credentials.createInsecure())
  t.teardown(() => client.close())
  const contents: Record<string, object> = {
    BOOL: { bool_contents: [true, false] },
    INT64: { int64_contents: ['-9223372036854775808', '9223372036854775807'] },
    UINT64: { uint64_contents: ['0', '18446744073709551615'] },
    INT8: { int_contents: [-128, 127] },
    FP32: { fp32_contents: [0.5, -2] },
    BYTES: { bytes_contents: [Buffer.from('one'), Buffer.from('')] }
  }
  const response = await new Promise<{ outputs: Array<{ name: string }>, raw_output_contents: Buffer[] }>((resolve, reject) =>
    (client as unknown as Record<string, (request: object, callback: (error: Error | null, response: never) => void) => void>).ModelInfer({
      model_name: 'echo',
      inputs: datatypes.map((datatype) => ({ name: `IN_${datatype}`, datatype, shape: [2], contents: contents[datatype] }))
    }, (error, answer) => error === null ? resolve(answer) : reject(error)))
  const raw = (datatype: string) => response.raw_output_contents[response.outputs.findIndex(({ name }) => name === `OUT_${datatype}`)]
  t.same([...raw('BOOL')], [1, 0])
  t.same([raw('INT64').readBigInt64LE(0), raw('INT64').readBigInt64LE(8)], [-(2n ** 63n), 2n ** 63n - 1n])
  t.equal(raw('UINT64').readBigUInt64LE(8), 2n ** 64n - 1n)
  t.same([raw('INT8').readInt8(0), raw('INT8').readInt8(1)], [-128, 127])
  t.same([raw('FP32').readFloatLE(0), raw('FP32').readFloatLE(4)], [0.5, -2])
  t.same([...raw('BYTES')], [3, 0, 0, 0, ...Buffer.from('one'), 0, 0, 0, 0])
  const refused = await rawGrpcClient(t, port, ['ModelInfer'])('ModelInfer', Buffer.from([0x0a, 0x05, 0x61]))
  t.equal(refused?.code, status.INTERNAL, 'bytes that are no message: grpc-js\'s INTERNAL, as before')
})

t.test('modelInferRequest still reads a message as proto-loader decodes it, for a host with a definition of its own', async (t) => {
  const app = await buildApp(t)
  const datatypes = ['INT64', 'UINT64', 'INT8', 'FP32', 'BYTES'] as const
  const model = echoModel('echo', [...datatypes])
  const message = theirs.requestDeserialize(theirs.requestSerialize({
    model_name: 'echo',
    inputs: [
      { name: 'IN_INT64', datatype: 'INT64', shape: [2], contents: { int64_contents: ['-9223372036854775808', '5'] } },
      { name: 'IN_UINT64', datatype: 'UINT64', shape: [1], contents: { uint64_contents: ['18446744073709551615'] } },
      { name: 'IN_INT8', datatype: 'INT8', shape: [2], contents: { int_contents: [-128, 127] } },
      { name: 'IN_FP32', datatype: 'FP32', shape: [1], contents: { fp32_contents: [0.5] } },
      { name: 'IN_BYTES', datatype: 'BYTES', shape: [2], contents: { bytes_contents: [Buffer.from('ab'), Buffer.alloc(0)] } }
    ]
  })) as ModelInferRequest
  t.same(message.inputs[0].contents?.int64_contents, ['-9223372036854775808', '5'], 'proto-loader\'s strings')
  const infer = modelInferRequest(message, { registry: app.systemSharedMemory, model: model.signature })
  t.same([...infer.input<BigInt64Array>('IN_INT64').data], [-(2n ** 63n), 5n])
  t.same([...infer.input<BigUint64Array>('IN_UINT64').data], [2n ** 64n - 1n])
  t.same([...infer.input<Int8Array>('IN_INT8').data], [-128, 127])
  t.same([...infer.input<Float32Array>('IN_FP32').data], [0.5])
  t.same([...infer.input<BytesElements>('IN_BYTES').data].map(String), ['ab', ''])
  infer.release()
  t.equal(decodeModelInferRequest(new Uint8Array(theirs.requestSerialize({ model_name: 'from a Uint8Array' }))).model_name,
    'from a Uint8Array', 'bytes need not be a Buffer')
})
