/**
 * Inputs of an infer request (SPEC section 4): from JSON `data`, from the binary tensor data
 * extension, from registered shared memory (zero-copy views of the client's memory), and every
 * error a client can cause on the way, with Triton's message and HTTP status.
 */
import { once } from 'node:events'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { parseInferBody } from '../lib/index'
import type { BytesElements, Datatype, ModelSignature, TensorData } from '../types'
import { assertError } from './helpers/http'
import {
  binaryInput, buildInferApp, bytesOfValues, echoModel, infer, inferBinary, inferUrl, jsonInput, makeMappedObject,
  parseInferResponse, registerRegion, serializeStrings, shmInput, sumModel, type TestModel, unregisterIsImmediate
} from './helpers/kserve'

const EXACT_NOTE = '(larger 64-bit integers are not exact in JSON: send them as binary data or in shared memory)'
const INT64_JSON_RANGE = `an integer from -9007199254740991 to 9007199254740991 ${EXACT_NOTE}`
const UINT64_JSON_RANGE = `an integer from 0 to 9007199254740991 ${EXACT_NOTE}`

const FIXED: Array<Exclude<Datatype, 'BYTES'>> =
  ['BOOL', 'UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64', 'FP16', 'BF16', 'FP32', 'FP64']

/** The typed array each fixed-size datatype must arrive as. */
const ARRAY_OF: Record<Exclude<Datatype, 'BYTES'>, Function> = {
  BOOL: Uint8Array,
  UINT8: Uint8Array,
  UINT16: Uint16Array,
  UINT32: Uint32Array,
  UINT64: BigUint64Array,
  INT8: Int8Array,
  INT16: Int16Array,
  INT32: Int32Array,
  INT64: BigInt64Array,
  FP16: Uint8Array,
  BF16: Uint8Array,
  FP32: Float32Array,
  FP64: Float64Array
}

/** Values at the edges of each datatype's range, exactly representable in it. */
const EDGE_VALUES: Record<Exclude<Datatype, 'BYTES'>, Array<number | bigint | boolean>> = {
  BOOL: [true, false, true],
  UINT8: [0, 255, 7],
  UINT16: [0, 65535, 258],
  UINT32: [0, 4294967295, 65536],
  UINT64: [0n, 18446744073709551615n, 9007199254740993n],
  INT8: [-128, 127, -1],
  INT16: [-32768, 32767, -2],
  INT32: [-2147483648, 2147483647, -3],
  INT64: [-9223372036854775808n, 9223372036854775807n, -9007199254740993n],
  FP16: [0x3c00, 0xc000, 0x7bff], // 1.0, -2.0, 65504 as raw half-precision bits
  BF16: [0x3f80, 0xc000, 0x7f7f],
  FP32: [1.5, -0.25, 3.4028234663852886e38],
  FP64: [0.1, -1e300, Number.MIN_VALUE]
}

/** What a model reads from a typed array of `datatype` holding `values` (FP16/BF16: raw bytes). */
function expectedElements (datatype: Exclude<Datatype, 'BYTES'>, values: Array<number | bigint | boolean>): unknown[] {
  if (datatype === 'BOOL') return values.map((value) => (value === true ? 1 : 0))
  if (datatype === 'FP16' || datatype === 'BF16') return [...bytesOfValues(datatype, values)]
  if (datatype === 'FP32') return values.map((value) => Math.fround(value as number))
  return values
}

const elementsOf = (data: TensorData): unknown[] => (Array.isArray(data) ? data.map(String) : Array.from(data as Uint8Array))

t.test('JSON data', async (t) => {
  t.test('flat and nested data give the same tensor', async (t) => {
    const { app, seen } = await buildInferApp(t, [echoModel('m', ['INT32'], [-1, -1])])
    for (const data of [[1, 2, 3, 4, 5, 6], [[1, 2, 3], [4, 5, 6]], [[[1], [2], [3]], [[4], [5], [6]]]]) {
      const response = await infer(app, 'm', { inputs: [jsonInput('IN_INT32', 'INT32', [2, 3], data)] })
      t.equal(response.statusCode, 200, response.body)
      const tensor = seen[seen.length - 1].input('IN_INT32')
      t.ok(tensor.data instanceof Int32Array, 'an Int32Array')
      t.same(Array.from(tensor.data as Int32Array), [1, 2, 3, 4, 5, 6], JSON.stringify(data))
      t.same(tensor.shape, [2, 3])
      t.same(JSON.parse(response.body).outputs[0].data, [1, 2, 3, 4, 5, 6])
    }
  })

  t.test('every datatype JSON can carry arrives as its typed array', async (t) => {
    const datatypes = FIXED.filter((datatype) => datatype !== 'FP16' && datatype !== 'BF16')
    const { app, seen } = await buildInferApp(t, [echoModel('m', [...datatypes, 'BYTES'])])
    // 64-bit values beyond 2^53 cannot travel as JSON numbers: the largest exact ones do.
    const jsonValues = (datatype: Exclude<Datatype, 'BYTES'>) => datatype === 'UINT64'
      ? [0, Number.MAX_SAFE_INTEGER, 1]
      : datatype === 'INT64' ? [-Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER, -1] : EDGE_VALUES[datatype]
    const inputs = [
      ...datatypes.map((datatype) => jsonInput(`IN_${datatype}`, datatype, [3], jsonValues(datatype))),
      jsonInput('IN_BYTES', 'BYTES', [3], ['a', '', 'héllo wörld'])
    ]
    const response = await infer(app, 'm', { inputs })
    t.equal(response.statusCode, 200, response.body)
    const [request] = seen
    for (const datatype of datatypes) {
      const { data, datatype: seenType, shape } = request.input(`IN_${datatype}`)
      t.ok(data instanceof ARRAY_OF[datatype], `${datatype} is a ${ARRAY_OF[datatype].name}`)
      t.equal(seenType, datatype)
      t.same(shape, [3])
      const expected = expectedElements(datatype, jsonValues(datatype))
      t.same(elementsOf(data), datatype.endsWith('INT64') ? expected.map((value) => BigInt(value as number)) : expected, datatype)
    }
    const bytes = [...request.input<BytesElements>('IN_BYTES').data]
    t.ok(bytes.every((element) => Buffer.isBuffer(element)), 'BYTES elements are Buffers')
    t.same(bytes.map(String), ['a', '', 'héllo wörld'])
  })

  t.test('an element count that does not match the shape is 400, in Triton\'s words for too few and too many', async (t) => {
    const { app } = await buildInferApp(t, [sumModel(), echoModel('m', ['BYTES'])])
    const values = (count: number) => Array.from({ length: count }, (_, index) => index + 1)
    const send = (inputs: unknown[]) => infer(app, 'simple', { inputs })
    const tooFew = "Failed to parse 'data' field: shape does not match true shape"
    const tooMany = "Unable to parse 'data': Shape does not match true shape of 'data' field"
    assertError(t, await send([jsonInput('INPUT0', 'INT32', [1, 16], values(15)), jsonInput('INPUT1', 'INT32', [1, 16], values(16))]), 400, tooFew)
    assertError(t, await send([jsonInput('INPUT0', 'INT32', [1, 16], values(16)), jsonInput('INPUT1', 'INT32', [1, 16], values(17))]), 400, tooMany)
    // As Triton's HTTP server: each input's data is read against its own shape before the request
    // is checked against the model (qa/L0_http sends one input of two).
    assertError(t, await send([jsonInput('INPUT0', 'INT32', [1, 16], values(15))]), 400, tooFew)
    assertError(t, await send([jsonInput('INPUT0', 'INT32', [1, 16], values(18))]), 400, tooMany)
    assertError(t, await send([jsonInput('INPUT0', 'INT32', [1, 16], [values(8), values(7)])]), 400, tooFew)
    assertError(t, await send([jsonInput('INPUT9', 'FP32', [4], values(5))]), 400, tooMany)
    // BYTES data is counted against the model's input, once the request matches it.
    assertError(t, await infer(app, 'm', { inputs: [jsonInput('IN_BYTES', 'BYTES', [2], ['a'])] }), 400,
      "unexpected number of elements in 'data' for input 'IN_BYTES' for model 'm'. Expected 2, got 1")
  })

  t.test('data nests up to Triton\'s 100 levels: an element inside 100 arrays is refused in Triton\'s words', async (t) => {
    const { app, seen } = await buildInferApp(t, [echoModel('m', ['INT32']), echoModel('s', ['BYTES'])])
    /** `value` inside `levels` arrays, `data` itself counted. */
    const nested = (levels: number, value: string) => JSON.parse('['.repeat(levels) + value + ']'.repeat(levels)) as unknown[]
    const send = (model: string, datatype: string, shape: number[], data: unknown[]) =>
      infer(app, model, { inputs: [jsonInput(`IN_${datatype}`, datatype, shape, data)] })
    t.equal((await send('m', 'INT32', [1], nested(99, '7'))).statusCode, 200, 'a value inside 99 arrays')
    t.same(Array.from(seen[0].input<Int32Array>('IN_INT32').data), [7])
    assertError(t, await send('m', 'INT32', [1], nested(100, '7')), 400, "Unable to parse 'data': JSON nesting depth exceeds maximum allowed limit (100)")
    t.equal((await send('m', 'INT32', [0], nested(100, ''))).statusCode, 200, '100 arrays around nothing: no element is that deep')
    assertError(t, await send('m', 'INT32', [0], nested(101, '')), 400, "Unable to parse 'data': JSON nesting depth exceeds maximum allowed limit (100)")
    // Triton measures BYTES data before it reads it: its words have no "Unable to parse 'data'".
    t.equal((await send('s', 'BYTES', [1], nested(99, '"x"'))).statusCode, 200, 'a BYTES element inside 99 arrays')
    assertError(t, await send('s', 'BYTES', [1], nested(100, '"x"')), 400, 'JSON nesting depth exceeds maximum allowed limit (100)')
  })

  t.test('a value the datatype cannot hold is 400, never wrapped or truncated', async (t) => {
    const datatypes: Datatype[] = ['BOOL', 'UINT8', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64', 'FP32', 'BYTES']
    const { app, seen } = await buildInferApp(t, [echoModel('m', datatypes)])
    const send = (datatype: Datatype, data: unknown[]) => infer(app, 'm', {
      inputs: datatypes.map((type) => type === datatype
        ? jsonInput(`IN_${type}`, type, [data.length], data)
        : jsonInput(`IN_${type}`, type, [1], [type === 'BOOL' ? true : type === 'BYTES' ? 'x' : 1]))
    })
    const cases: Array<[Datatype, unknown[], string]> = [
      ['BOOL', [1], 'a boolean'],
      ['INT32', ['1'], 'a number'],
      ['INT32', [true], 'a number'],
      ['INT32', [null], 'a number'],
      ['FP32', ['1.5'], 'a number'],
      ['INT32', [1.5], 'an integer from -2147483648 to 2147483647'],
      ['INT32', [2147483648], 'an integer from -2147483648 to 2147483647'],
      ['UINT8', [256], 'an integer from 0 to 255'],
      ['UINT8', [-1], 'an integer from 0 to 255'],
      ['UINT32', [-1], 'an integer from 0 to 4294967295'],
      ['INT8', [-129], 'an integer from -128 to 127'],
      ['INT16', [32768], 'an integer from -32768 to 32767'],
      ['INT64', [0.5], INT64_JSON_RANGE],
      ['INT64', [2 ** 63], INT64_JSON_RANGE], // as 9223372036854775807 arrives
      ['INT64', [-(2 ** 63)], INT64_JSON_RANGE], // what -9223372036854775807 arrives as, too
      ['INT64', [2 ** 53], INT64_JSON_RANGE], // what 9007199254740993 arrives as
      ['UINT64', [-1], UINT64_JSON_RANGE],
      ['UINT64', [2 ** 53], UINT64_JSON_RANGE],
      ['BYTES', [5], 'a string']
    ]
    for (const [datatype, data, expected] of cases) {
      const response = await send(datatype, data)
      assertError(t, response, 400, `'data' of input 'IN_${datatype}' holds a value that is not ${expected}, as ${datatype} requires`)
    }
    t.equal(seen.length, 0, 'no request reached the model')
    // The limits themselves are accepted.
    t.equal((await send('INT64', [-(2 ** 53 - 1), 2 ** 53 - 1])).statusCode, 200, '±(2^53-1) are exact')
    t.same(elementsOf(seen[0].input('IN_INT64').data), [-9007199254740991n, 9007199254740991n])
    t.equal((await send('UINT8', [255, 0])).statusCode, 200)
  })

  t.test('a 64-bit integer JSON would round is 400, never a different number', async (t) => {
    const { app, seen } = await buildInferApp(t, [echoModel('m', ['INT64']), echoModel('u', ['UINT64'])])
    // As a client's JSON encoder writes them: digits JSON.parse cannot keep.
    for (const [model, datatype, digits, range] of [
      ['m', 'INT64', '9007199254740993', INT64_JSON_RANGE],
      ['m', 'INT64', '-9223372036854775807', INT64_JSON_RANGE],
      ['u', 'UINT64', '9223372036854775809', UINT64_JSON_RANGE]
    ]) {
      const payload = `{"inputs":[{"name":"IN_${datatype}","datatype":"${datatype}","shape":[1],"data":[${digits}]}]}`
      const response = await app.inject({ method: 'POST', url: `/v2/models/${model}/infer`, payload, headers: { 'content-type': 'application/json' } })
      assertError(t, response, 400, `'data' of input 'IN_${datatype}' holds a value that is not ${range}, as ${datatype} requires`)
    }
    t.equal(seen.length, 0, 'no request reached a model')
  })

  t.test('FP16 and BF16 cannot be JSON data', async (t) => {
    const { app } = await buildInferApp(t, [echoModel('m', ['FP16']), echoModel('b', ['BF16'])])
    for (const [model, datatype] of [['m', 'FP16'], ['b', 'BF16']]) {
      const response = await infer(app, model, { inputs: [jsonInput(`IN_${datatype}`, datatype, [1], [1])] })
      assertError(t, response, 400, `input 'IN_${datatype}' has datatype ${datatype}, which cannot be sent as JSON 'data': ` +
        'use the binary data extension or shared memory')
    }
  })
})

t.test('binary tensor data extension', async (t) => {
  t.test('every datatype arrives as its typed array, with or without a Content-Type', async (t) => {
    const { app, seen } = await buildInferApp(t, [echoModel('m', [...FIXED, 'BYTES'])])
    const chunks = FIXED.map((datatype) => bytesOfValues(datatype, EDGE_VALUES[datatype]))
    const strings = serializeStrings(['ab', '', 'ünïcode'])
    const header = {
      inputs: [
        ...FIXED.map((datatype, index) => binaryInput(`IN_${datatype}`, datatype, [3], chunks[index].length)),
        binaryInput('IN_BYTES', 'BYTES', [3], strings.length)
      ],
      parameters: { binary_data_output: true }
    }
    for (const contentType of [undefined, 'application/octet-stream', 'application/json']) {
      const response = await inferBinary(app, 'm', header, [...chunks, strings], contentType)
      t.equal(response.statusCode, 200, `${contentType}: ${response.body}`)
      const request = seen[seen.length - 1]
      for (const datatype of FIXED) {
        const { data } = request.input(`IN_${datatype}`)
        t.ok(data instanceof ARRAY_OF[datatype], `${datatype} is a ${ARRAY_OF[datatype].name}`)
        t.same(elementsOf(data), expectedElements(datatype, EDGE_VALUES[datatype]), `${contentType}: ${datatype}`)
      }
      t.same([...request.input<BytesElements>('IN_BYTES').data].map(String), ['ab', '', 'ünïcode'])
      // The echo gives every input back as binary output: the bytes went through unchanged.
      const { binary } = parseInferResponse(response)
      FIXED.forEach((datatype, index) => t.same(binary.get(`OUT_${datatype}`), chunks[index], `OUT_${datatype} bytes`))
      t.same(binary.get('OUT_BYTES'), strings)
    }
  })

  t.test('binary and JSON inputs mix in one request', async (t) => {
    const { app, seen } = await buildInferApp(t, [sumModel('add', 'FP32', [-1])])
    const input1 = bytesOfValues('FP32', [0.5, 1.5, 2.5])
    const response = await inferBinary(app, 'add', {
      inputs: [jsonInput('INPUT0', 'FP32', [3], [1, 2, 3]), binaryInput('INPUT1', 'FP32', [3], input1.length)]
    }, [input1], 'application/octet-stream')
    t.equal(response.statusCode, 200, response.body)
    t.same(Array.from(seen[0].input<Float32Array>('INPUT1').data), [0.5, 1.5, 2.5])
    t.same(JSON.parse(response.body).outputs.map((output: { data: number[] }) => output.data), [[1.5, 3.5, 5.5], [0.5, 0.5, 0.5]])
  })

  t.test('a malformed Inference-Header-Content-Length is 400', async (t) => {
    const { app, seen } = await buildInferApp(t, [echoModel('m', ['INT32'])])
    const header = Buffer.from(JSON.stringify({ inputs: [binaryInput('IN_INT32', 'INT32', [1], 4)] }))
    const payload = Buffer.concat([header, bytesOfValues('INT32', [7])])
    for (const value of ['abc', '-1', '1.5', '1e2', '0x10', `${header.length}x`, String(payload.length + 1), '99999999999999999999']) {
      const response = await app.inject({ method: 'POST', url: inferUrl('m'), payload, headers: { 'inference-header-content-length': value } })
      assertError(t, response, 400,
        `Unable to parse inference request: 'Inference-Header-Content-Length' must be an integer from 0 to ${payload.length}`)
    }
    // A length that cuts the JSON short leaves a header that is not JSON (0 is Triton's raw request).
    for (const value of [String(header.length - 1), String(header.length + 1)]) {
      const response = await app.inject({ method: 'POST', url: inferUrl('m'), payload, headers: { 'inference-header-content-length': value } })
      assertError(t, response, 400, 'Unable to parse inference request: the JSON is not valid')
    }
    t.equal(seen.length, 0)
  })

  t.test('a body that is not JSON (binary data without the header length) is 400', async (t) => {
    const { app } = await buildInferApp(t, [echoModel('m', ['INT32'])])
    const payload = Buffer.concat([Buffer.from(JSON.stringify({ inputs: [binaryInput('IN_INT32', 'INT32', [1], 4)] })), Buffer.from([1, 0, 0, 0])])
    assertError(t, await app.inject({ method: 'POST', url: inferUrl('m'), payload }), 400,
      'Unable to parse inference request: the JSON is not valid')
  })

  t.test('binary data running past the end of the body is 400', async (t) => {
    const { app, seen } = await buildInferApp(t, [sumModel('add', 'FP32', [-1])])
    const inputs = [binaryInput('INPUT0', 'FP32', [2], 8), binaryInput('INPUT1', 'FP32', [2], 8)]
    const response = await inferBinary(app, 'add', { inputs }, [bytesOfValues('FP32', [1, 2, 3])])
    assertError(t, response, 400, "Unable to parse inference request: the binary data of input 'INPUT1' runs past the end of the body")
    // A plain JSON body that declares binary data has none at all.
    const json = await infer(app, 'add', { inputs })
    assertError(t, json, 400, "Unable to parse inference request: the binary data of input 'INPUT0' runs past the end of the body")
    t.equal(seen.length, 0)
  })

  t.test('binary data left over after the inputs is 400', async (t) => {
    const { app, seen } = await buildInferApp(t, [echoModel('m', ['INT32'])])
    const response = await inferBinary(app, 'm', { inputs: [binaryInput('IN_INT32', 'INT32', [2], 8)] },
      [bytesOfValues('INT32', [1, 2, 3])])
    assertError(t, response, 400, 'Unable to parse inference request: the body holds more binary data than the inputs declare')
    // Binary data after a body whose inputs are all JSON is left over too.
    const json = await inferBinary(app, 'm', { inputs: [jsonInput('IN_INT32', 'INT32', [1], [1])] }, [Buffer.from([0])])
    assertError(t, json, 400, 'Unable to parse inference request: the body holds more binary data than the inputs declare')
    t.equal(seen.length, 0)
  })

  t.test('binary_data_size that does not match the tensor is the byte size mismatch', async (t) => {
    const { app } = await buildInferApp(t, [echoModel('m', ['INT64'])])
    const response = await inferBinary(app, 'm', { inputs: [binaryInput('IN_INT64', 'INT64', [2], 12)] }, [Buffer.alloc(12)])
    assertError(t, response, 400, "input byte size mismatch for input 'IN_INT64' for model 'm'. Expected 16, got 12")
  })

  t.test('binary_data_size must be an unsigned integer', async (t) => {
    const { app } = await buildInferApp(t, [echoModel('m', ['INT8'])])
    for (const size of [-1, 1.5, '1', true]) {
      const response = await inferBinary(app, 'm', { inputs: [{ name: 'IN_INT8', datatype: 'INT8', shape: [1], parameters: { binary_data_size: size } }] }, [Buffer.alloc(1)])
      assertError(t, response, 400, "parameter 'binary_data_size' of tensor 'IN_INT8' must be an unsigned integer")
    }
  })

  t.test('BYTES in the binary body: 4-byte little-endian lengths filling the input exactly', async (t) => {
    const { app, seen } = await buildInferApp(t, [echoModel('m', ['BYTES'])])
    const good = serializeStrings(['one', 'two'])
    t.equal((await inferBinary(app, 'm', { inputs: [binaryInput('IN_BYTES', 'BYTES', [2], good.length)] }, [good])).statusCode, 200)
    t.same([...seen[0].input<BytesElements>('IN_BYTES').data].map(String), ['one', 'two'])
    const malformed = 'BYTES data of tensor \'IN_BYTES\' is malformed: each element must be a 4-byte little-endian length ' +
      'followed by that many bytes, filling the tensor exactly'
    const bigEndian = Buffer.from([0, 0, 0, 3, ...Buffer.from('one'), 0, 0, 0, 3, ...Buffer.from('two')])
    for (const bytes of [bigEndian, good.subarray(0, good.length - 1), Buffer.concat([good, Buffer.from([0])]), good.subarray(0, 9)]) {
      const response = await inferBinary(app, 'm', { inputs: [binaryInput('IN_BYTES', 'BYTES', [2], bytes.length)] }, [bytes])
      assertError(t, response, 400, malformed)
    }
  })

  t.test('parseInferBody: header length values a Node server never hands over are refused too', async (t) => {
    const body = Buffer.from('{"inputs":[]}')
    t.throws(() => parseInferBody(['13'], body), { kind: 'invalid', message: /must be an integer from 0 to 13/ })
    const parsed = parseInferBody('13', body)
    t.same(parsed.header, { inputs: [] })
    t.equal(parsed.binary.length, 0)
    t.same(parseInferBody(undefined, body).header, { inputs: [] })
  })
})

t.test('shared memory', async (t) => {
  t.test('an input is a zero-copy view of the client\'s memory: each side sees the other\'s writes', async (t) => {
    const scribble: TestModel = {
      signature: { name: 'scribble', inputs: [{ name: 'X', datatype: 'INT32', shape: [-1] }], outputs: [{ name: 'Y', datatype: 'INT32', shape: [-1] }] },
      execute (infer) {
        const { data, shape } = infer.input<Int32Array>('X')
        infer.output<Int32Array>('Y', shape).set(data.map((value) => value * 2))
        data[3] = 1234 // the model writes into its input: the client must see it
      }
    }
    const { app, seen } = await buildInferApp(t, [scribble])
    const object = makeMappedObject(t, 4096, 'zero_copy')
    new Int32Array(object.bytes.buffer, 0, 4).set([1, 2, 3, 4])
    await registerRegion(t, app, 'in', object.key, 64)
    const response = await infer(app, 'scribble', { inputs: [shmInput('X', 'INT32', [4], 'in', 16)] })
    t.equal(response.statusCode, 200, response.body)
    t.same(JSON.parse(response.body).outputs[0].data, [2, 4, 6, 8], 'the model read the client\'s values')
    t.equal(object.read().readInt32LE(12), 1234, 'the model\'s write landed in the object')
    const { data } = seen[0].input<Int32Array>('X')
    new Int32Array(object.bytes.buffer, 0, 1)[0] = -99
    t.equal(data[0], -99, 'the client\'s later write shows through the tensor the model was given')
  })

  t.test('every fixed-size datatype from shared memory, at aligned and unaligned offsets', async (t) => {
    const { app, seen } = await buildInferApp(t, [echoModel('m', FIXED)])
    const object = makeMappedObject(t, 8192, 'datatypes')
    await registerRegion(t, app, 'r', object.key, 8192)
    for (const misalign of [0, 1, 3]) {
      // Each tensor starts on a multiple of 16, plus `misalign`.
      let offset = 0
      const inputs = FIXED.map((datatype) => {
        const bytes = bytesOfValues(datatype, EDGE_VALUES[datatype])
        object.bytes.set(bytes, offset + misalign)
        const input = shmInput(`IN_${datatype}`, datatype, [3], 'r', bytes.length, offset + misalign)
        offset += 32
        return input
      })
      const response = await infer(app, 'm', { inputs, parameters: { binary_data_output: true } })
      t.equal(response.statusCode, 200, response.body)
      const request = seen[seen.length - 1]
      for (const datatype of FIXED) {
        const { data } = request.input(`IN_${datatype}`)
        t.ok(data instanceof ARRAY_OF[datatype], `${datatype} at +${misalign} is a ${ARRAY_OF[datatype].name}`)
        t.same(elementsOf(data), expectedElements(datatype, EDGE_VALUES[datatype]), `${datatype} at +${misalign}`)
      }
    }
  })

  t.test('an offset not aligned to the element size gives a correct copy', async (t) => {
    const { app, seen } = await buildInferApp(t, [echoModel('m', ['INT32', 'INT64'])])
    const object = makeMappedObject(t, 4096, 'unaligned')
    object.bytes.set(bytesOfValues('INT32', [10, 20, 30, 40]), 2)
    object.bytes.set(bytesOfValues('INT64', [-5n, 2n ** 62n]), 100)
    await registerRegion(t, app, 'r', object.key, 4096)
    const response = await infer(app, 'm', {
      inputs: [shmInput('IN_INT32', 'INT32', [4], 'r', 16, 2), shmInput('IN_INT64', 'INT64', [2], 'r', 16, 100)]
    })
    t.equal(response.statusCode, 200, response.body)
    const int32 = seen[0].input<Int32Array>('IN_INT32').data
    const int64 = seen[0].input<BigInt64Array>('IN_INT64').data
    t.same(Array.from(int32), [10, 20, 30, 40])
    t.same(Array.from(int64), [-5n, 2n ** 62n])
    object.bytes.fill(0)
    t.same(Array.from(int32), [10, 20, 30, 40], 'a copy: the client\'s later write does not show')
    t.same(Array.from(int64), [-5n, 2n ** 62n])
    t.equal(response.body, '{"model_name":"m","outputs":[' +
      '{"name":"OUT_INT32","datatype":"INT32","shape":[4],"data":[10,20,30,40]},' +
      '{"name":"OUT_INT64","datatype":"INT64","shape":[2],"data":[-5,4611686018427387904]}]}')
  })

  t.test('a region registered at an unaligned offset of its object still gives views over the right bytes', async (t) => {
    const { app, seen } = await buildInferApp(t, [echoModel('m', ['INT64', 'FP64'])])
    const object = makeMappedObject(t, 4096, 'registered_unaligned')
    object.bytes.set(bytesOfValues('INT64', [123456789012345n, -1n]), 5)
    object.bytes.set(bytesOfValues('FP64', [Math.PI, -0]), 5 + 16)
    await registerRegion(t, app, 'r', object.key, 100, 5)
    const response = await infer(app, 'm', {
      inputs: [shmInput('IN_INT64', 'INT64', [2], 'r', 16), shmInput('IN_FP64', 'FP64', [2], 'r', 16, 16)]
    })
    t.equal(response.statusCode, 200, response.body)
    const int64 = seen[0].input<BigInt64Array>('IN_INT64').data
    t.same(Array.from(int64), [123456789012345n, -1n])
    t.same(Array.from(seen[0].input<Float64Array>('IN_FP64').data), [Math.PI, -0])
    object.bytes.set(bytesOfValues('INT64', [42n]), 5)
    t.equal(int64[0], 42n, 'offset 0 of the region is a view (zero-copy), whatever the object offset')
  })

  t.test('one input from JSON and one from shared memory', async (t) => {
    const { app } = await buildInferApp(t, [sumModel()])
    const object = makeMappedObject(t, 4096, 'mixed')
    object.bytes.set(bytesOfValues('INT32', Array.from({ length: 16 }, (_, index) => index * 10)), 64)
    await registerRegion(t, app, 'r', object.key, 128)
    const response = await infer(app, 'simple', {
      inputs: [jsonInput('INPUT0', 'INT32', [1, 16], Array(16).fill(1)), shmInput('INPUT1', 'INT32', [1, 16], 'r', 64, 64)]
    })
    t.equal(response.statusCode, 200, response.body)
    const [sum, difference] = JSON.parse(response.body).outputs
    t.same(sum.data, Array.from({ length: 16 }, (_, index) => 1 + index * 10))
    t.same(difference.data, Array.from({ length: 16 }, (_, index) => 1 - index * 10))
  })

  t.test('BYTES in shared memory: 4-byte little-endian length, then the bytes, per element', async (t) => {
    const { app, seen } = await buildInferApp(t, [echoModel('m', ['BYTES'])])
    const object = makeMappedObject(t, 4096, 'bytes')
    const strings = serializeStrings(['ab', '', 'héllo'])
    object.bytes.set(strings, 8)
    await registerRegion(t, app, 'r', object.key, 4096)
    const response = await infer(app, 'm', { inputs: [shmInput('IN_BYTES', 'BYTES', [3], 'r', strings.length, 8)] })
    t.equal(response.statusCode, 200, response.body)
    t.equal(response.body, '{"model_name":"m","outputs":[{"name":"OUT_BYTES","datatype":"BYTES","shape":[3],"data":["ab","","héllo"]}]}')
    const elements = [...seen[0].input<BytesElements>('IN_BYTES').data]
    object.bytes[8 + 4] = 'X'.charCodeAt(0)
    t.equal(elements[0].toString(), 'Xb', 'the elements are views of the client\'s memory')

    const malformed = "BYTES data of tensor 'IN_BYTES' is malformed: each element must be a 4-byte little-endian length " +
      'followed by that many bytes, filling the tensor exactly'
    const cases: Array<[string, Buffer]> = [
      ['big-endian lengths', Buffer.from([0, 0, 0, 2, 0x61, 0x62])],
      ['a length past the end', Buffer.from([100, 0, 0, 0, 0x61, 0x62])],
      ['a length prefix cut short', Buffer.concat([serializeStrings(['ab']), Buffer.from([1, 0])])],
      ['bytes after the last element', Buffer.concat([serializeStrings(['ab', 'c']), Buffer.from([0])])]
    ]
    for (const [what, bytes] of cases) {
      object.bytes.set(bytes, 1024)
      const response = await infer(app, 'm', { inputs: [shmInput('IN_BYTES', 'BYTES', [2], 'r', bytes.length, 1024)] })
      t.equal(response.statusCode, 400, what)
      assertError(t, response, 400, malformed)
    }
    t.ok(unregisterIsImmediate(app, 'r'), 'the failed requests hold no lease')
  })

  t.test('the four checks of a region reference, in order, with Triton\'s messages', async (t) => {
    const { app, seen } = await buildInferApp(t, [echoModel('m', ['UINT8'])])
    const object = makeMappedObject(t, 4096, 'checks')
    await registerRegion(t, app, 'r', object.key, 64)
    const send = (parameters: string) => infer(app, 'm',
      `{"inputs":[{"name":"IN_UINT8","datatype":"UINT8","shape":[1],"parameters":${parameters}}]}`)

    assertError(t, await send('{"shared_memory_region":"nope","shared_memory_byte_size":1}'), 404,
      "Unable to find shared memory region: 'nope'")
    // The unknown region wins over every other problem of the reference.
    assertError(t, await send('{"shared_memory_region":"nope","shared_memory_offset":100000,"shared_memory_byte_size":18446744073709551615}'), 404,
      "Unable to find shared memory region: 'nope'")

    for (const offset of ['64', '65', '18446744073709551615']) {
      assertError(t, await send(`{"shared_memory_region":"r","shared_memory_offset":${offset},"shared_memory_byte_size":1}`), 400,
        "Invalid offset for shared memory region: 'r'")
    }
    // An invalid offset is reported before an overflow.
    assertError(t, await send('{"shared_memory_region":"r","shared_memory_offset":64,"shared_memory_byte_size":18446744073709551615}'), 400,
      "Invalid offset for shared memory region: 'r'")

    // 2^64 - 1 arrives in JavaScript as the double 2^64: the check must still fire.
    for (const [offset, byteSize] of [['8', '18446744073709551615'], ['32', '18446744073709551584'], ['1', '18446744073709551615']]) {
      const message = assertError(t, await send(`{"shared_memory_region":"r","shared_memory_offset":${offset},"shared_memory_byte_size":${byteSize}}`), 400)
      const match = /^Integer overflow detected: byte_size \((\d+)\) \+ offset \((\d+)\) exceeds maximum value \(18446744073709551615\) for region 'r'$/.exec(message)
      t.ok(match, message)
      t.equal(match?.[2], offset, 'the offset as sent')
      t.ok(BigInt(match?.[1] ?? 0) + BigInt(offset) > 18446744073709551615n, 'a byte size that really overflows')
    }

    for (const [offset, byteSize] of [[8, 57], [0, 65], [63, 2], [1, 1152921504606846976]]) {
      assertError(t, await send(`{"shared_memory_region":"r","shared_memory_offset":${offset},"shared_memory_byte_size":${byteSize}}`), 400,
        "Invalid offset + byte size for shared memory region: 'r'")
    }
    // The region's last byte is in bounds; the offset defaults to 0.
    object.bytes[63] = 200
    t.equal((await send('{"shared_memory_region":"r","shared_memory_offset":63,"shared_memory_byte_size":1}')).statusCode, 200)
    t.same(elementsOf(seen[0].input('IN_UINT8').data), [200])
    object.bytes[0] = 17
    t.equal((await send('{"shared_memory_region":"r","shared_memory_byte_size":1}')).statusCode, 200)
    t.same(elementsOf(seen[1].input('IN_UINT8').data), [17])
    t.ok(unregisterIsImmediate(app, 'r'), 'no request left a lease behind')
  })

  t.test('a region reference in a bad shape is 400', async (t) => {
    const { app } = await buildInferApp(t, [echoModel('m', ['UINT8'])])
    const object = makeMappedObject(t, 4096, 'shape')
    await registerRegion(t, app, 'r', object.key, 64)
    const send = (parameters: Record<string, unknown>) =>
      infer(app, 'm', { inputs: [{ name: 'IN_UINT8', datatype: 'UINT8', shape: [1], parameters }] })
    assertError(t, await send({ shared_memory_region: 'r' }), 400,
      "'shared_memory_byte_size' must be set with 'shared_memory_region' for tensor 'IN_UINT8'")
    assertError(t, await send({ shared_memory_region: 5, shared_memory_byte_size: 1 }), 400,
      "parameter 'shared_memory_region' of tensor 'IN_UINT8' must be a string")
    for (const value of [-1, 0.5, '0', false]) {
      assertError(t, await send({ shared_memory_region: 'r', shared_memory_offset: value, shared_memory_byte_size: 1 }), 400,
        "parameter 'shared_memory_offset' of tensor 'IN_UINT8' must be an unsigned integer")
      assertError(t, await send({ shared_memory_region: 'r', shared_memory_byte_size: value }), 400,
        "parameter 'shared_memory_byte_size' of tensor 'IN_UINT8' must be an unsigned integer")
    }
  })

  t.test('a shared memory input whose byte size does not match the tensor is 400', async (t) => {
    const { app } = await buildInferApp(t, [sumModel()])
    const object = makeMappedObject(t, 4096, 'mismatch')
    await registerRegion(t, app, 'r', object.key, 4096)
    for (const byteSize of [60, 68, 128]) {
      const response = await infer(app, 'simple', {
        inputs: [shmInput('INPUT0', 'INT32', [1, 16], 'r', 64), shmInput('INPUT1', 'INT32', [1, 16], 'r', byteSize, 64)]
      })
      assertError(t, response, 400, `input byte size mismatch for input 'INPUT1' for model 'simple'. Expected 64, got ${byteSize}`)
    }
    t.ok(unregisterIsImmediate(app, 'r'), 'INPUT0\'s lease was released when INPUT1 failed')
  })
})

t.test('an input must set exactly one source', async (t) => {
  const { app, seen } = await buildInferApp(t, [echoModel('m', ['INT32'])])
  const object = makeMappedObject(t, 4096, 'sources')
  await registerRegion(t, app, 'r', object.key, 64)
  const prefix = "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', " +
    "'shared_memory_region' in 'parameters'. But "
  const shm = { shared_memory_region: 'r', shared_memory_byte_size: 4 }
  const cases: Array<[Record<string, unknown>, string]> = [
    [{}, 'no field is set'],
    [{ parameters: {} }, 'no field is set'],
    [{ parameters: { shared_memory_byte_size: 4, shared_memory_offset: 0 } }, 'no field is set'],
    [{ data: [1], parameters: shm }, "set 'data' 'shared_memory_region'"],
    [{ data: [1], parameters: { binary_data_size: 4 } }, "set 'data' 'binary_data_size'"],
    [{ parameters: { ...shm, binary_data_size: 4 } }, "set 'binary_data_size' 'shared_memory_region'"],
    [{ data: [1], parameters: { ...shm, binary_data_size: 4 } }, "set 'data' 'binary_data_size' 'shared_memory_region'"]
  ]
  for (const [fields, but] of cases) {
    const response = await inferBinary(app, 'm', { inputs: [{ name: 'IN_INT32', datatype: 'INT32', shape: [1], ...fields }] }, [Buffer.alloc(4)])
    assertError(t, response, 400, prefix + but)
  }
  t.equal(seen.length, 0)
  t.ok(unregisterIsImmediate(app, 'r'), 'no lease was taken')
})

t.test('inputs are checked against the model', async (t) => {
  const { app, seen } = await buildInferApp(t, [sumModel()])
  const ones = Array(16).fill(1)
  const input = (name: string, datatype = 'INT32', shape = [1, 16]) => jsonInput(name, datatype, shape, datatype === 'FP32' ? ones.map(() => 0.5) : ones)
  const cases: Array<[unknown[], string]> = [
    [[input('INPUT0')], "expected 2 inputs but got 1 inputs for model 'simple'. Got input(s) ['INPUT0'], but missing required input(s) ['INPUT1']. Please provide all required input(s)."],
    [[], "expected 2 inputs but got 0 inputs for model 'simple'. Got input(s) [], but missing required input(s) ['INPUT0','INPUT1']. Please provide all required input(s)."],
    [[input('INPUT2'), input('INPUT1'), input('INPUT0')], "expected 2 inputs but got 3 inputs for model 'simple'. Got input(s) ['INPUT0','INPUT1','INPUT2'], but missing required input(s) ]. Please provide all required input(s)."],
    [[input('INPUT0'), input('INPUT9')], "unexpected inference input 'INPUT9' for model 'simple'"],
    [[input('INPUT0'), input('INPUT0')], "input 'INPUT0' already exists in request"],
    [[input('INPUT0'), input('INPUT1'), input('INPUT0')], "input 'INPUT0' already exists in request"],
    [[input('INPUT0', 'FP32'), input('INPUT1')], "inference input data-type is 'FP32', model expects 'INT32' for 'simple'"],
    [[input('INPUT0'), jsonInput('INPUT1', 'INT32', [1, 15], ones.slice(1))], "unexpected shape for input 'INPUT1' for model 'simple'. Expected [-1,16], got [1,15]"],
    [[input('INPUT0'), jsonInput('INPUT1', 'INT32', [16], ones)], "unexpected shape for input 'INPUT1' for model 'simple'. Expected [-1,16], got [16]"],
    [[input('INPUT0'), jsonInput('INPUT1', 'INT32', [1, 1, 16], ones)], "unexpected shape for input 'INPUT1' for model 'simple'. Expected [-1,16], got [1,1,16]"]
  ]
  for (const [inputs, message] of cases) assertError(t, await infer(app, 'simple', { inputs }), 400, message)
  t.equal(seen.length, 0)
  // -1 matches any size, 0 included.
  const batch = await infer(app, 'simple', { inputs: [jsonInput('INPUT0', 'INT32', [0, 16], []), jsonInput('INPUT1', 'INT32', [0, 16], [])] })
  t.equal(batch.body, '{"model_name":"simple","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[0,16],"data":[]},' +
    '{"name":"OUTPUT1","datatype":"INT32","shape":[0,16],"data":[]}]}')
})

t.test('the structure of the request is checked before anything else', async (t) => {
  const { app, seen } = await buildInferApp(t, [echoModel('m', ['INT32'])])
  const object = makeMappedObject(t, 4096, 'structure')
  await registerRegion(t, app, 'r', object.key, 64)
  const good = { name: 'IN_INT32', datatype: 'INT32', shape: [1], parameters: { shared_memory_region: 'r', shared_memory_byte_size: 4 } }
  const cases: Array<[unknown, string]> = [
    [[], 'the body must be a JSON object'],
    ['"text"', 'the body must be a JSON object'],
    ['null', 'the body must be a JSON object'],
    [{}, "'inputs' must be an array"],
    [{ inputs: {} }, "'inputs' must be an array"],
    [{ inputs: [5] }, "input 0 must be an object with a string 'name'"],
    [{ inputs: [good, { name: 7 }] }, "input 1 must be an object with a string 'name'"],
    [{ inputs: [{ ...good, datatype: 'INT33' }] }, "'datatype' of input 'IN_INT32' is not a KServe datatype"],
    [{ inputs: [{ ...good, datatype: undefined }] }, "'datatype' of input 'IN_INT32' is not a KServe datatype"],
    [{ inputs: [{ ...good, shape: '1' }] }, "'shape' of input 'IN_INT32' must be an array of unsigned integers"],
    [{ inputs: [{ ...good, parameters: [] }] }, "'parameters' of input 'IN_INT32' must be an object"],
    [{ inputs: [{ ...good, parameters: undefined, data: 5 }] }, "'data' of input 'IN_INT32' must be an array"],
    [{ inputs: [good], outputs: {} }, "'outputs' must be an array"],
    [{ inputs: [good], outputs: [null] }, "output 0 must be an object with a string 'name'"],
    [{ inputs: [good], outputs: [{ name: 'OUT_INT32', parameters: 'binary' }] }, "'parameters' of output 'OUT_INT32' must be an object"],
    [{ inputs: [good], parameters: 5 }, "'parameters' of the request must be an object"],
    [{ inputs: [good], id: 5 }, "'id' must be a string"],
    ['{"inputs": [', 'the JSON is not valid']
  ]
  for (const [body, reason] of cases) {
    assertError(t, await infer(app, 'm', body), 400, `Unable to parse inference request: ${reason}`)
  }
  // Triton's JSON reader fails on a dimension that is no unsigned 64-bit integer: its 500.
  for (const dim of ['-5', '1.5', '"1"', 'null', '18446744073709551616', '1e300']) {
    const body = `{"inputs":[{"name":"IN_INT32","datatype":"INT32","shape":[2,${dim}],"data":[1]}]}`
    assertError(t, await infer(app, 'm', body), 500, "Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer")
  }
  t.equal(seen.length, 0)
  t.ok(unregisterIsImmediate(app, 'r'), 'no lease was taken')
})

t.test('the size of an input sent as JSON data is checked as Triton counts it, before its data', async (t) => {
  const { app, seen } = await buildInferApp(t, [echoModel('m', ['INT32', 'BYTES', 'INT8'])])
  const data = (name: string, datatype: string, shape: string) =>
    `{"inputs":[{"name":"${name}","datatype":"${datatype}","shape":${shape},"data":[1]}]}`
  const int64Max = '9223372036854775807'
  const cases: Array<[string, string]> = [
    [data('IN_INT32', 'INT32', '[16,1152921504606846978]'),
      `invalid shape for input 'IN_INT32': shape [16,1152921504606846976] causes total element count to exceed maximum size of ${int64Max}`],
    [data('IN_BYTES', 'BYTES', '[3,4611686018427387904]'),
      `invalid shape for input 'IN_BYTES': shape [3,4611686018427387904] causes total element count to exceed maximum size of ${int64Max}`],
    [data('IN_INT32', 'INT32', '[4,1152921504606846978]'),
      `byte size overflow for input 'IN_INT32': element count (4611686018427387904) * data type size (4) exceeds maximum allowed size (${int64Max})`],
    [data('IN_INT32', 'INT32', '[1,9223372036854775808]'),
      "invalid shape for input 'IN_INT32': shape [1,9223372036854775808] contains one or more invalid dimensions"]
  ]
  for (const [body, message] of cases) assertError(t, await infer(app, 'm', body), 400, message)
  // One byte per element never overflows past the count; a 0 ends the count, as Triton's.
  assertError(t, await infer(app, 'm', data('IN_INT8', 'INT8', '[2,2305843009213693952]')), 400,
    'Failed to parse \'data\' field: shape does not match true shape')
  assertError(t, await infer(app, 'm', data('IN_INT32', 'INT32', '[0,1152921504606846978,16]')), 400,
    'Unable to parse \'data\': Shape does not match true shape of \'data\' field')
  t.equal(seen.length, 0)
})

t.test('leases', async (t) => {
  t.test('are released when the response is sent', async (t) => {
    const { app } = await buildInferApp(t, [sumModel()])
    const object = makeMappedObject(t, 4096, 'released')
    await registerRegion(t, app, 'in', object.key, 128)
    await registerRegion(t, app, 'out', object.key, 128, 128)
    const response = await infer(app, 'simple', {
      inputs: [shmInput('INPUT0', 'INT32', [1, 16], 'in', 64), shmInput('INPUT1', 'INT32', [1, 16], 'in', 64, 64)],
      outputs: [{ name: 'OUTPUT0', parameters: { shared_memory_region: 'out', shared_memory_byte_size: 64 } }]
    })
    t.equal(response.statusCode, 200, response.body)
    t.ok(unregisterIsImmediate(app, 'in'))
    t.ok(unregisterIsImmediate(app, 'out'))
  })

  t.test('are released when a later input fails', async (t) => {
    const { app } = await buildInferApp(t, [sumModel()])
    const object = makeMappedObject(t, 4096, 'failed')
    await registerRegion(t, app, 'in', object.key, 128)
    const response = await infer(app, 'simple', {
      inputs: [shmInput('INPUT0', 'INT32', [1, 16], 'in', 64), shmInput('INPUT1', 'INT32', [1, 16], 'nope', 64)]
    })
    assertError(t, response, 404, "Unable to find shared memory region: 'nope'")
    t.ok(unregisterIsImmediate(app, 'in'))
  })

  t.test('are not kept for a client that went away before its request was read', async (t) => {
    let entered!: () => void
    const inHandler = new Promise<void>((resolve) => { entered = resolve })
    let report!: (immediate: boolean) => void
    const reported = new Promise<boolean>((resolve) => { report = resolve })
    const model: TestModel = {
      signature: { name: 'm', inputs: [{ name: 'X', datatype: 'UINT8', shape: [-1] }], outputs: [] },
      execute: () => report(unregisterIsImmediate(app, 'r'))
    }
    // The host does some async work (auth, a queue) before it reads the request; the client leaves meanwhile.
    const { app } = await buildInferApp(t, [model], {
      beforeRead: async (_request, reply) => {
        entered()
        if (!reply.raw.destroyed) await once(reply.raw, 'close')
      }
    })
    const object = makeMappedObject(t, 4096, 'gone')
    await registerRegion(t, app, 'r', object.key, 16)
    await app.listen({ host: '127.0.0.1', port: 0 })
    const { port } = app.server.address() as AddressInfo
    const client = http.request({ host: '127.0.0.1', port, method: 'POST', path: inferUrl('m') })
    client.on('error', () => {})
    client.end(JSON.stringify({ inputs: [shmInput('X', 'UINT8', [4], 'r', 4)] }))
    await inHandler
    client.destroy()
    t.ok(await reported, 'the lease taken for the gone client was released at once')
  })
})

t.test('readInferRequest works with Fastify\'s own JSON parser too', async (t) => {
  const { app, seen } = await buildInferApp(t, [sumModel()], { fastifyJsonParser: true })
  const object = makeMappedObject(t, 4096, 'fastify_json')
  object.bytes.set(bytesOfValues('INT32', Array(16).fill(5)))
  await registerRegion(t, app, 'r', object.key, 64)
  const response = await infer(app, 'simple', {
    inputs: [shmInput('INPUT0', 'INT32', [1, 16], 'r', 64), jsonInput('INPUT1', 'INT32', [1, 16], Array(16).fill(2))]
  }, { 'content-type': 'application/json' })
  t.equal(response.statusCode, 200, response.body)
  t.same(JSON.parse(response.body).outputs[0].data, Array(16).fill(7))
  t.same(Array.from(seen[0].input<Int32Array>('INPUT0').data), Array(16).fill(5))
})

t.test('InferRequest tells a model that asks for an input or output its signature lacks', async (t) => {
  const asks = (what: 'input' | 'output'): TestModel => ({
    signature: { name: what, inputs: [{ name: 'X', datatype: 'INT8', shape: [-1] }], outputs: [] } satisfies ModelSignature,
    execute (infer) {
      if (what === 'input') infer.input('Y')
      else infer.output('Y', [1])
    }
  })
  const { app } = await buildInferApp(t, [asks('input'), asks('output')])
  for (const what of ['input', 'output'] as const) {
    const response = await infer(app, what, { inputs: [jsonInput('X', 'INT8', [1], [1])] })
    assertError(t, response, 500, what === 'input' ? "the request for model 'input' has no input 'Y'" : "model 'output' has no output 'Y'")
  }
})
