/**
 * Outputs of an infer request (SPEC section 4): written in place into registered shared memory
 * (the response then lists only name, datatype and shape), sent as binary data after the JSON
 * header, or as JSON; and the client mistakes on the way, with Triton's messages.
 */
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs'
import t, { type Test } from 'tap'
import type { Datatype, TensorSpec } from '../types'
import { assertError } from './helpers/http'
import {
  buildInferApp, bytesOfValues, echoModel, infer, jsonInput, makeMappedObject, parseInferResponse, registerRegion,
  serializeStrings, shmInput, shmOutput, sumModel, type TestModel, unregisterIsImmediate
} from './helpers/kserve'
import { makeObject, objectPath, PAGE_SIZE } from './helpers/shm'

type Value = number | bigint | boolean | string

/** A model whose outputs are always `values` (one dummy UINT8 input `X`). FP16/BF16 values are raw bits. */
function constantModel (name: string, values: Record<string, [Datatype, Value[]]>): TestModel {
  const outputs: TensorSpec[] = Object.entries(values).map(([output, [datatype]]) => ({ name: output, datatype, shape: [-1] }))
  return {
    signature: { name, inputs: [{ name: 'X', datatype: 'UINT8', shape: [-1] }], outputs },
    execute (infer) {
      for (const [output, [datatype, elements]] of Object.entries(values)) {
        const data = infer.output(output, [elements.length])
        if (datatype === 'BYTES') elements.forEach((value, index) => { (data as Buffer[])[index] = Buffer.from(value as string) })
        else if (datatype === 'FP16' || datatype === 'BF16') (data as Uint8Array).set(bytesOfValues(datatype, elements as number[]))
        else elements.forEach((value, index) => { (data as unknown as Value[])[index] = typeof value === 'boolean' ? Number(value) : value })
      }
    }
  }
}

const X = jsonInput('X', 'UINT8', [1], [0])
const SENTINEL = 0xaa
const range = (length: number, at: (index: number) => number) => Array.from({ length }, (_, index) => at(index))
const INPUT0 = range(16, (index) => index)
const INPUT1 = range(16, (index) => 100 - 3 * index)
const simpleInputs = [jsonInput('INPUT0', 'INT32', [1, 16], INPUT0), jsonInput('INPUT1', 'INT32', [1, 16], INPUT1)]
const SUM = bytesOfValues('INT32', INPUT0.map((value, index) => value + INPUT1[index]))
const DIFFERENCE = bytesOfValues('INT32', INPUT0.map((value, index) => value - INPUT1[index]))
const SIMPLE_SHM_RESPONSE = '{"model_name":"simple","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1,16]},' +
  '{"name":"OUTPUT1","datatype":"INT32","shape":[1,16]}]}'

/** Asserts that `bytes` holds `SENTINEL` everywhere outside `[start, end)` ranges. */
function assertUntouchedOutside (t: Test, bytes: Buffer, written: Array<[number, number]>) {
  const stray = bytes.findIndex((value, index) => value !== SENTINEL && !written.some(([start, end]) => index >= start && index < end))
  t.equal(stray, -1, 'no byte outside the outputs was written')
}

t.test('outputs in shared memory are written in place and listed without data', async (t) => {
  const object = makeMappedObject(t, 4096, 'in_place')
  object.bytes.fill(SENTINEL)
  const simple = sumModel()
  let duringModel: Buffer | undefined
  const { app } = await buildInferApp(t, [{
    signature: simple.signature,
    execute (infer) {
      simple.execute(infer)
      duringModel = object.read() // before the response is made: the model wrote straight into the object
    }
  }])
  await registerRegion(t, app, 'out', object.key, 4096)
  const response = await infer(app, 'simple', {
    inputs: simpleInputs,
    outputs: [shmOutput('OUTPUT0', 'out', 64), shmOutput('OUTPUT1', 'out', 64, 64)]
  })
  t.equal(response.statusCode, 200, response.body)
  t.equal(response.body, SIMPLE_SHM_RESPONSE, 'only name, datatype and shape: no data, no parameters')
  t.match(response.headers['content-type'], /^application\/json/)
  t.equal(response.headers['inference-header-content-length'], undefined)
  t.same(duringModel?.subarray(0, 64), SUM, 'OUTPUT0 was in the object before the response')
  t.same(duringModel?.subarray(64, 128), DIFFERENCE)
  const after = object.read()
  t.same(after.subarray(0, 64), SUM)
  t.same(after.subarray(64, 128), DIFFERENCE)
  assertUntouchedOutside(t, after, [[0, 128]])
  t.ok(unregisterIsImmediate(app, 'out'), 'the output leases ended with the response')
})

t.test('outputs at non-zero and unaligned offsets land exactly there', async (t) => {
  const datatypes: Datatype[] = ['INT32', 'INT64', 'FP64', 'UINT16', 'BOOL']
  const { app } = await buildInferApp(t, [echoModel('m', datatypes)])
  const object = makeMappedObject(t, 8192, 'offsets')
  const values: Record<string, Array<number | boolean>> = {
    INT32: [-1, 2147483647, 5], INT64: [-Number.MAX_SAFE_INTEGER, 1, Number.MAX_SAFE_INTEGER], FP64: [Math.E, -0.5, 1e-300], UINT16: [65535, 0, 258], BOOL: [true, false, true]
  }
  const bytesOf = (datatype: Datatype) => bytesOfValues(datatype as Exclude<Datatype, 'BYTES'>,
    datatype === 'INT64' ? values[datatype].map((value) => BigInt(value as number)) : values[datatype])
  // The region starts at object offset 512; the outputs sit at region offsets that are multiples of
  // their element size, then at offsets that are not.
  await registerRegion(t, app, 'out', object.key, 2048, 512)
  for (const misalign of [0, 1, 3]) {
    object.bytes.fill(SENTINEL)
    const written: Array<[number, number]> = []
    const outputs = datatypes.map((datatype, index) => {
      const offset = 100 + 64 * index + misalign
      written.push([512 + offset, 512 + offset + bytesOf(datatype).length])
      return shmOutput(`OUT_${datatype}`, 'out', 40, offset)
    })
    const body = { inputs: datatypes.map((datatype) => jsonInput(`IN_${datatype}`, datatype, [3], values[datatype])), outputs }
    const response = await infer(app, 'm', body)
    t.equal(response.statusCode, 200, response.body)
    t.equal(response.body, `{"model_name":"m","outputs":[${datatypes.map((datatype) =>
      `{"name":"OUT_${datatype}","datatype":"${datatype}","shape":[3]}`).join(',')}]}`)
    const bytes = object.read()
    datatypes.forEach((datatype, index) => {
      const [start, end] = written[index]
      t.same(bytes.subarray(start, end), bytesOf(datatype),
        `${datatype} at region offset ${100 + 64 * index + misalign}`)
    })
    assertUntouchedOutside(t, bytes, written)
  }
})

t.test('an output region larger than the result keeps its spare bytes', async (t) => {
  const { app } = await buildInferApp(t, [sumModel()])
  const object = makeMappedObject(t, 4096, 'spare')
  object.bytes.fill(SENTINEL)
  await registerRegion(t, app, 'out', object.key, 4096)
  const response = await infer(app, 'simple', { inputs: simpleInputs, outputs: [shmOutput('OUTPUT1', 'out', 1000, 8)] })
  t.equal(response.body, '{"model_name":"simple","outputs":[{"name":"OUTPUT1","datatype":"INT32","shape":[1,16]}]}')
  t.same(object.read().subarray(8, 72), DIFFERENCE)
  assertUntouchedOutside(t, object.read(), [[8, 72]])
})

t.test('an output region too small for the result is 400, and nothing is written', async (t) => {
  const strings = constantModel('strings', { S: ['BYTES', ['hello', 'wörld', '']] })
  const { app } = await buildInferApp(t, [sumModel(), strings])
  const object = makeMappedObject(t, 4096, 'too_small')
  object.bytes.fill(SENTINEL)
  await registerRegion(t, app, 'out', object.key, 4096)

  for (const byteSize of [1, 60, 63]) {
    const response = await infer(app, 'simple', { inputs: simpleInputs, outputs: [shmOutput('OUTPUT0', 'out', byteSize)] })
    assertError(t, response, 400,
      `shared memory size specified with the request for output 'OUTPUT0' (${byteSize} bytes) should be at least 64 bytes to hold the results`)
  }
  // BYTES: 4-byte length + 5 bytes, + 4 + 6 ("wörld" is 6 bytes in UTF-8), + 4 + 0.
  const required = serializeStrings(['hello', 'wörld', '']).length
  t.equal(required, 23)
  const response = await infer(app, 'strings', { inputs: [X], outputs: [shmOutput('S', 'out', required - 1, 16)] })
  assertError(t, response, 400,
    `shared memory size specified with the request for output 'S' (${required - 1} bytes) should be at least ${required} bytes to hold the results`)
  assertUntouchedOutside(t, object.read(), [])
  t.ok(unregisterIsImmediate(app, 'out'), 'the failed requests hold no lease')

  // Exactly the required size is enough.
  await registerRegion(t, app, 'out', object.key, 4096)
  const exact = await infer(app, 'strings', { inputs: [X], outputs: [shmOutput('S', 'out', required, 16)] })
  t.equal(exact.body, '{"model_name":"strings","outputs":[{"name":"S","datatype":"BYTES","shape":[3]}]}')
  t.same(object.read().subarray(16, 16 + required), serializeStrings(['hello', 'wörld', '']),
    'BYTES in shared memory: a 4-byte little-endian length, then the bytes, per element')
  assertUntouchedOutside(t, object.read(), [[16, 16 + required]])
})

t.test('binary_data with shared memory', async (t) => {
  const { app } = await buildInferApp(t, [sumModel()])
  const object = makeMappedObject(t, 4096, 'binary_data')
  await registerRegion(t, app, 'out', object.key, 4096)
  const response = await infer(app, 'simple', { inputs: simpleInputs, outputs: [shmOutput('OUTPUT0', 'out', 64, 0, { binary_data: true })] })
  assertError(t, response, 400, "Output can't set both 'shared_memory_region' and 'binary_data'")
  t.ok(unregisterIsImmediate(app, 'out'), 'no lease was kept')
  t.same(object.read().subarray(0, 64), Buffer.alloc(64), 'nothing written')

  await registerRegion(t, app, 'out', object.key, 4096)
  // binary_data: false is fine, and so is the request-wide binary_data_output: shared memory wins.
  const fine = await infer(app, 'simple', {
    inputs: simpleInputs,
    outputs: [shmOutput('OUTPUT0', 'out', 64, 0, { binary_data: false }), shmOutput('OUTPUT1', 'out', 64, 64)],
    parameters: { binary_data_output: true }
  })
  t.equal(fine.body, SIMPLE_SHM_RESPONSE)
  t.same(object.read().subarray(0, 128), Buffer.concat([SUM, DIFFERENCE]))
})

t.test('a region reference of an output is checked like an input\'s', async (t) => {
  const { app } = await buildInferApp(t, [sumModel()])
  const object = makeMappedObject(t, 4096, 'output_checks')
  object.bytes.fill(SENTINEL)
  await registerRegion(t, app, 'out', object.key, 256)
  const send = (parameters: string) => infer(app, 'simple',
    `{"inputs":${JSON.stringify(simpleInputs)},"outputs":[{"name":"OUTPUT0","parameters":${parameters}}]}`)
  assertError(t, await send('{"shared_memory_region":"gone","shared_memory_byte_size":64}'), 404,
    "Unable to find shared memory region: 'gone'")
  assertError(t, await send('{"shared_memory_region":"out","shared_memory_offset":256,"shared_memory_byte_size":64}'), 400,
    "Invalid offset for shared memory region: 'out'")
  // Triton's own test: offset 32, byte_size 2^64 - 32.
  const overflow = assertError(t, await send('{"shared_memory_region":"out","shared_memory_offset":32,"shared_memory_byte_size":18446744073709551584}'), 400)
  t.match(overflow, /^Integer overflow detected: byte_size \(\d+\) \+ offset \(32\) exceeds maximum value \(18446744073709551615\) for region 'out'$/)
  assertError(t, await send('{"shared_memory_region":"out","shared_memory_offset":200,"shared_memory_byte_size":64}'), 400,
    "Invalid offset + byte size for shared memory region: 'out'")
  assertError(t, await send('{"shared_memory_region":"out"}'), 400,
    "'shared_memory_byte_size' must be set with 'shared_memory_region' for tensor 'OUTPUT0'")
  assertError(t, await send('{"shared_memory_region":["out"],"shared_memory_byte_size":64}'), 400,
    "parameter 'shared_memory_region' of tensor 'OUTPUT0' must be a string")
  assertError(t, await send('{"shared_memory_region":"out","shared_memory_offset":-8,"shared_memory_byte_size":64}'), 400,
    "parameter 'shared_memory_offset' of tensor 'OUTPUT0' must be an unsigned integer")
  assertError(t, await send('{"binary_data":"true"}'), 400, "parameter 'binary_data' of tensor 'OUTPUT0' must be a boolean")
  const response = await infer(app, 'simple', { inputs: simpleInputs, parameters: { binary_data_output: 1 } })
  assertError(t, response, 400, "parameter 'binary_data_output' of tensor 'request' must be a boolean")
  assertUntouchedOutside(t, object.read(), [])
  t.ok(unregisterIsImmediate(app, 'out'))
})

t.test('binary outputs follow the JSON header, whose length is in Inference-Header-Content-Length', async (t) => {
  const { app } = await buildInferApp(t, [sumModel()])
  const response = await infer(app, 'simple', {
    id: 'binary-1',
    inputs: simpleInputs,
    outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }, { name: 'OUTPUT1' }]
  })
  t.equal(response.statusCode, 200)
  t.equal(response.headers['content-type'], 'application/octet-stream')
  const headerText = '{"id":"binary-1","model_name":"simple","outputs":[' +
    '{"name":"OUTPUT0","datatype":"INT32","shape":[1,16],"parameters":{"binary_data_size":64}},' +
    `{"name":"OUTPUT1","datatype":"INT32","shape":[1,16],"data":[${INPUT0.map((value, index) => value - INPUT1[index]).join(',')}]}]}`
  t.equal(response.headers['inference-header-content-length'], String(Buffer.byteLength(headerText)))
  t.same(response.rawPayload, Buffer.concat([Buffer.from(headerText), SUM]), 'the header, then OUTPUT0\'s little-endian bytes')
})

t.test('binary_data_output makes every output the request does not list binary; a listed one is JSON unless it says binary_data: true', async (t) => {
  const strings = constantModel('strings', { S: ['BYTES', ['x', 'yz']], N: ['INT16', [-2, 300]] })
  const { app } = await buildInferApp(t, [sumModel(), strings])
  const all = parseInferResponse(await infer(app, 'simple', { inputs: simpleInputs, parameters: { binary_data_output: true } }))
  t.equal(all.headerText, '{"model_name":"simple","outputs":[' +
    '{"name":"OUTPUT0","datatype":"INT32","shape":[1,16],"parameters":{"binary_data_size":64}},' +
    '{"name":"OUTPUT1","datatype":"INT32","shape":[1,16],"parameters":{"binary_data_size":64}}]}')
  t.same(all.binary.get('OUTPUT0'), SUM)
  t.same(all.binary.get('OUTPUT1'), DIFFERENCE)

  const unlisted = parseInferResponse(await infer(app, 'strings', { inputs: [X], outputs: [], parameters: { binary_data_output: true } }))
  t.equal(unlisted.headerText, '{"model_name":"strings","outputs":[' +
    '{"name":"S","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":11}},' +
    '{"name":"N","datatype":"INT16","shape":[2],"parameters":{"binary_data_size":4}}]}', 'an empty list lists none')
  t.same(unlisted.binary.get('S'), serializeStrings(['x', 'yz']), 'BYTES as binary data: length-prefixed elements')

  // As Triton (qa/L0_http): the flag covers only the outputs the request does not list.
  const listed = parseInferResponse(await infer(app, 'strings', {
    inputs: [X],
    outputs: [{ name: 'N', parameters: { binary_data: false } }, { name: 'S' }],
    parameters: { binary_data_output: true }
  }))
  t.equal(listed.headerText, '{"model_name":"strings","outputs":[' +
    '{"name":"N","datatype":"INT16","shape":[2],"data":[-2,300]},' +
    '{"name":"S","datatype":"BYTES","shape":[2],"data":["x","yz"]}]}')
  const asked = parseInferResponse(await infer(app, 'simple', {
    inputs: simpleInputs,
    outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }, { name: 'OUTPUT1' }],
    parameters: { binary_data_output: true }
  }))
  t.equal(asked.headerText, '{"model_name":"simple","outputs":[' +
    '{"name":"OUTPUT0","datatype":"INT32","shape":[1,16],"parameters":{"binary_data_size":64}},' +
    `{"name":"OUTPUT1","datatype":"INT32","shape":[1,16],"data":[${INPUT0.map((value, index) => value - INPUT1[index]).join(',')}]}]}`)
  t.same(asked.binary.get('OUTPUT0'), SUM)

  const off = await infer(app, 'simple', { inputs: simpleInputs, parameters: { binary_data_output: false } })
  t.match(off.headers['content-type'], /^application\/json/)
  t.equal(off.headers['inference-header-content-length'], undefined)
  t.same(JSON.parse(off.body).outputs.map((output: { data: unknown[] }) => output.data.length), [16, 16])
})

t.test('JSON outputs: 64-bit integers exact, BOOL as true/false, BYTES as strings', async (t) => {
  const model = constantModel('kinds', {
    I64: ['INT64', [9007199254740993n, -9223372036854775808n, 9223372036854775807n]],
    U64: ['UINT64', [18446744073709551615n, 0n]],
    B: ['BOOL', [true, false, true]],
    S: ['BYTES', ['ab', '', 'héllo']],
    F32: ['FP32', [1.5, -0.1]],
    F64: ['FP64', [Number.NaN, Number.POSITIVE_INFINITY, 0.1]],
    U8: ['UINT8', [255]],
    I8: ['INT8', [-128]],
    H: ['FP16', [0x3c00, 0xc000]]
  })
  const { app } = await buildInferApp(t, [model])
  const response = parseInferResponse(await infer(app, 'kinds', { id: 'json', inputs: [X] }))
  t.equal(response.headerText, '{"id":"json","model_name":"kinds","outputs":[' +
    '{"name":"I64","datatype":"INT64","shape":[3],"data":[9007199254740993,-9223372036854775808,9223372036854775807]},' +
    '{"name":"U64","datatype":"UINT64","shape":[2],"data":[18446744073709551615,0]},' +
    '{"name":"B","datatype":"BOOL","shape":[3],"data":[true,false,true]},' +
    '{"name":"S","datatype":"BYTES","shape":[3],"data":["ab","","héllo"]},' +
    `{"name":"F32","datatype":"FP32","shape":[2],"data":[1.5,${Math.fround(-0.1)}]},` +
    '{"name":"F64","datatype":"FP64","shape":[3],"data":[null,null,0.1]},' +
    '{"name":"U8","datatype":"UINT8","shape":[1],"data":[255]},' +
    '{"name":"I8","datatype":"INT8","shape":[1],"data":[-128]},' +
    // JSON cannot carry FP16: it goes as binary data even though nobody asked.
    '{"name":"H","datatype":"FP16","shape":[2],"parameters":{"binary_data_size":4}}]}')
  t.same(response.binary.get('H'), Buffer.from([0x00, 0x3c, 0x00, 0xc0]))
})

t.test('which outputs a response lists', async (t) => {
  const { app } = await buildInferApp(t, [sumModel()])
  const names = async (body: unknown) => JSON.parse((await infer(app, 'simple', body)).body).outputs.map(({ name }: { name: string }) => name)
  t.same(await names({ inputs: simpleInputs }), ['OUTPUT0', 'OUTPUT1'], 'no outputs: all of the model\'s, in its order')
  t.same(await names({ inputs: simpleInputs, outputs: [] }), ['OUTPUT0', 'OUTPUT1'], 'an empty list: all of them too, as Triton does')
  t.same(await names({ inputs: simpleInputs, outputs: [{ name: 'OUTPUT1' }] }), ['OUTPUT1'], 'only those asked for')
  t.same(await names({ inputs: simpleInputs, outputs: [{ name: 'OUTPUT1' }, { name: 'OUTPUT0' }] }), ['OUTPUT1', 'OUTPUT0'], 'in the order asked')
  const unknown = await infer(app, 'simple', { inputs: simpleInputs, outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT7' }] })
  assertError(t, unknown, 400, "unexpected inference output 'OUTPUT7' for model 'simple'")
})

t.test('a model that does not produce a requested output is a server error', async (t) => {
  const lazy: TestModel = {
    signature: sumModel().signature,
    execute (infer) { infer.output('OUTPUT0', [1, 16]) }
  }
  const { app } = await buildInferApp(t, [lazy])
  assertError(t, await infer(app, 'simple', { inputs: simpleInputs }), 500, "the model did not produce output 'OUTPUT1'")
  t.equal((await infer(app, 'simple', { inputs: simpleInputs, outputs: [{ name: 'OUTPUT0' }] })).statusCode, 200)
})

t.test('a region registered at offset PAGE*1023 of a PAGE*1024 object: reads and writes land at the right place', async (t) => {
  const { app } = await buildInferApp(t, [sumModel()])
  const key = makeObject(t, PAGE_SIZE * 1024, 'last_page')
  const base = PAGE_SIZE * 1023
  // Another program (here: plain file I/O on /dev/shm) writes the inputs into the last page.
  const fd = openSync(objectPath(key), 'r+')
  try {
    writeSync(fd, bytesOfValues('INT32', INPUT0), 0, 64, base + 256)
    writeSync(fd, bytesOfValues('INT32', INPUT1), 0, 64, base + 256 + 64)
  } finally {
    closeSync(fd)
  }
  await registerRegion(t, app, 'last', key, PAGE_SIZE, base)
  const response = await infer(app, 'simple', {
    inputs: [shmInput('INPUT0', 'INT32', [1, 16], 'last', 64, 256), shmInput('INPUT1', 'INT32', [1, 16], 'last', 64, 320)],
    outputs: [shmOutput('OUTPUT0', 'last', 64, PAGE_SIZE - 128), shmOutput('OUTPUT1', 'last', 64, PAGE_SIZE - 64)]
  })
  t.equal(response.statusCode, 200, response.body)
  t.equal(response.body, SIMPLE_SHM_RESPONSE)
  const bytes = readFileSync(objectPath(key))
  t.same(bytes.subarray(base + PAGE_SIZE - 128, base + PAGE_SIZE - 64), SUM, 'OUTPUT0 in the last 128..64 bytes of the object')
  t.same(bytes.subarray(base + PAGE_SIZE - 64), DIFFERENCE, 'OUTPUT1 in its last 64 bytes')
  const written = new Set([...range(128, (index) => base + 256 + index), ...range(128, (index) => base + PAGE_SIZE - 128 + index)])
  t.equal(bytes.findIndex((value, index) => value !== 0 && !written.has(index)), -1, 'every other byte of the object is still 0')
  // The region ends with the object: one byte further is out of bounds.
  assertError(t, await infer(app, 'simple', {
    inputs: simpleInputs, outputs: [shmOutput('OUTPUT0', 'last', 64, PAGE_SIZE - 63)]
  }), 400, "Invalid offset + byte size for shared memory region: 'last'")
})

t.test('inputs and outputs in one region: the result replaces the inputs in place', async (t) => {
  const { app } = await buildInferApp(t, [sumModel()])
  const object = makeMappedObject(t, 4096, 'in_out')
  object.bytes.set(Buffer.concat([bytesOfValues('INT32', INPUT0), bytesOfValues('INT32', INPUT1)]))
  await registerRegion(t, app, 'io', object.key, 128)
  const response = await infer(app, 'simple', {
    inputs: [shmInput('INPUT0', 'INT32', [1, 16], 'io', 64), shmInput('INPUT1', 'INT32', [1, 16], 'io', 64, 64)],
    outputs: [shmOutput('OUTPUT0', 'io', 64, 0)]
  })
  t.equal(response.body, '{"model_name":"simple","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1,16]}]}')
  // The model computes element by element, so each sum overwrites an input element it already read.
  t.same(object.read().subarray(0, 64), SUM)
  t.same(object.read().subarray(64, 128), bytesOfValues('INT32', INPUT1))
})
