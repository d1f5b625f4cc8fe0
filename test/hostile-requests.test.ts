/**
 * Requests a hostile client sends, each once a crash, a stall, a 5xx or wrong data, now a clear
 * 400 that changes nothing: against the example service over a real socket where the network is
 * the point, and against test models where a model's view of its tensors is.
 */
import { request as httpRequest } from 'node:http'
import { connect } from 'node:net'
import { once } from 'node:events'
import t, { type Test } from 'tap'
import { buildServer, type ServerOptions } from '../example/server'
import Fastify, { type FastifyInstance } from 'fastify'
import { DEFAULT_INFER_LIMITS, elementCount, fastifyTritonShm, inferResponse, kserveErrorHandler, MappedRange, readBytesElements, readInferRequest, useInferBodyParser } from '../lib/index'
import type { BytesElements } from '../types'
import { assertError } from './helpers/http'
import {
  binaryBody, buildInferApp, bytesOfValues, echoModel, infer, jsonInput, makeMappedObject, registerRegion,
  serializeStrings, shmInput, shmOutput, sumModel
} from './helpers/kserve'
import { makeObject, readObjectFile, writeObjectFile } from './helpers/shm'

const MiB = 1024 ** 2

async function startExample (t: Test, options: ServerOptions = {}): Promise<{ app: FastifyInstance, baseUrl: string }> {
  const app = await buildServer(options)
  t.teardown(() => app.close())
  await app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = app.server.address() as { port: number }
  return { app, baseUrl: `http://127.0.0.1:${port}` }
}

async function postJson (url: string, body: unknown): Promise<{ status: number, body: Record<string, unknown> }> {
  const response = await fetch(url, { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body) })
  const text = await response.text()
  return { status: response.status, body: text === '' ? {} : JSON.parse(text) as Record<string, unknown> }
}

async function registerOver (t: Test, baseUrl: string, name: string, key: string, byteSize: number) {
  const { status } = await postJson(`${baseUrl}/v2/systemsharedmemory/region/${name}/register`, { key, offset: 0, byte_size: byteSize })
  t.equal(status, 200, `registered ${name}`)
}

t.test('BYTES: the attack that exhausted the heap is refused at once by the example service', async (t) => {
  const { baseUrl } = await startExample(t)
  const key = makeObject(t, 64 * MiB, 'bytes_zeros') // zeros: 16 Mi empty elements per input
  await registerOver(t, baseUrl, 'zeros', key, 64 * MiB)
  const response = await postJson(`${baseUrl}/v2/models/simple_string/infer`, {
    inputs: [shmInput('INPUT0', 'BYTES', [1048576, 16], 'zeros', 32 * MiB), shmInput('INPUT1', 'BYTES', [1048576, 16], 'zeros', 32 * MiB, 32 * MiB)]
  })
  t.same(response, { status: 400, body: { error: "inference request batch-size must be <= 8 for 'simple_string'" } })
  t.equal((await fetch(`${baseUrl}/v2/health/live`)).status, 200, 'the service answers others')
})

t.test('BYTES: an element count past its bytes (4 an element) is refused before any element is read, from shared memory or the body', async (t) => {
  const { app } = await buildInferApp(t, [echoModel('m', ['BYTES'])])
  const key = makeObject(t, 4 * MiB, 'bytes_count')
  await registerRegion(t, app, 'zeros', key, 4 * MiB)
  const elements = MiB + 1
  const malformed = "BYTES data of tensor 'IN_BYTES' is malformed: each element must be a 4-byte little-endian length followed by that many bytes, filling the tensor exactly"
  assertError(t, await infer(app, 'm', { inputs: [shmInput('IN_BYTES', 'BYTES', [elements], 'zeros', 4 * MiB)] }), 400, malformed)
  assertError(t, await infer(app, 'm', { inputs: [shmInput('IN_BYTES', 'BYTES', [2 ** 60], 'zeros', 4 * MiB)] }), 400, malformed)
  const { payload, headers } = binaryBody({
    inputs: [{ name: 'IN_BYTES', datatype: 'BYTES', shape: [elements], parameters: { binary_data_size: 512 * 1024 } }]
  }, [Buffer.alloc(512 * 1024)])
  assertError(t, await app.inject({ method: 'POST', url: '/v2/models/m/infer', payload, headers }), 400, malformed)
  assertError(t, await infer(app, 'm', { inputs: [jsonInput('IN_BYTES', 'BYTES', [elements], [])] }), 400,
    `unexpected number of elements in 'data' for input 'IN_BYTES' for model 'm'. Expected ${elements}, got 0`)
  t.equal(app.systemSharedMemory.counters().liveLeases, 0, 'no lease kept')
  t.equal(DEFAULT_INFER_LIMITS.maxBytesElements, Infinity, 'no count limit by default, as Triton')
  const filled = await infer(app, 'm', { inputs: [shmInput('IN_BYTES', 'BYTES', [elements - 1], 'zeros', 4 * MiB)] })
  t.equal(filled.statusCode, 200, 'as many empty elements as the bytes hold are served')
})

t.test('BYTES: a host\'s maxBytesElements still refuses past it', async (t) => {
  const { app } = await buildInferApp(t, [echoModel('m', ['BYTES'])], { limits: { maxBytesElements: 1024 } })
  await registerRegion(t, app, 'zeros', makeObject(t, 8192, 'bytes_host_limit'), 8192)
  assertError(t, await infer(app, 'm', { inputs: [shmInput('IN_BYTES', 'BYTES', [1025], 'zeros', 4100)] }), 400,
    "tensor 'IN_BYTES' has 1025 BYTES elements, more than the server's limit of 1024")
  t.equal((await infer(app, 'm', { inputs: [shmInput('IN_BYTES', 'BYTES', [1024], 'zeros', 4096)] })).statusCode, 200, 'at the limit')
})

t.test('BYTES: an input\'s element offsets (8 bytes an element) are charged to the in-flight budget before they are allocated', async (t) => {
  // A model that reads its input and answers nothing: what is charged is the request's reading.
  const app = Fastify()
  t.teardown(() => app.close())
  app.setErrorHandler(kserveErrorHandler)
  await app.register(fastifyTritonShm, { maxInFlightBytes: MiB })
  const signature = { name: 'n', inputs: [{ name: 'S', datatype: 'BYTES' as const, shape: [-1] }], outputs: [] }
  await app.register(async (inference) => {
    useInferBodyParser(inference, { inFlight: app.systemSharedMemory.inFlight })
    inference.post('/v2/models/n/infer', async (request, reply) =>
      inferResponse(readInferRequest(request, reply, { registry: app.systemSharedMemory, model: signature }), reply))
  })
  await registerRegion(t, app, 'zeros', makeObject(t, MiB, 'bytes_offsets'), MiB)
  const request = (elements: number) => infer(app, 'n', { inputs: [shmInput('S', 'BYTES', [elements], 'zeros', 4 * elements)] })
  const refused = await request(2 ** 17)
  t.equal(refused.statusCode, 400, refused.body)
  t.match(refused.json().error, /^this request needs \d+ bytes in flight, more than the server holds for all requests together \(1048576\)/)
  t.equal((await request(2 ** 16)).statusCode, 200, 'half of it is within the budget')
})

t.test('BYTES: an output with more elements than the limit is refused', async (t) => {
  const { app } = await buildInferApp(t, [{
    signature: { name: 'm', inputs: [], outputs: [{ name: 'S', datatype: 'BYTES', shape: [-1] }] },
    execute (request) { request.output('S', [11]) }
  }], { limits: { maxBytesElements: 10 } })
  assertError(t, await infer(app, 'm', { inputs: [] }), 400, "tensor 'S' has 11 BYTES elements, more than the server's limit of 10")
})

t.test('BYTES: elements are read lazily, as views of the client\'s bytes', async (t) => {
  const object = makeMappedObject(t, 4096, 'lazy')
  const strings = serializeStrings(['one', '', 'three'])
  object.bytes.set(strings, 16)
  let seen: string[] = []
  const { app } = await buildInferApp(t, [{
    signature: { name: 'm', inputs: [{ name: 'S', datatype: 'BYTES', shape: [-1] }], outputs: [] },
    execute (request) {
      const { data } = request.input<BytesElements>('S')
      seen = [data.length, data.at(0), data.at(-1), data.at(3), data.at(-4)].map(String)
      object.bytes[16 + 4] = 'O'.charCodeAt(0)
      seen.push(String(data.at(0)), [...data].map(String).join('|'))
      t.equal(data.serialized.byteLength, strings.length, 'the serialized bytes are exactly the tensor')
    }
  }])
  await registerRegion(t, app, 'r', object.key, 4096)
  const response = await infer(app, 'm', { inputs: [shmInput('S', 'BYTES', [3], 'r', strings.length, 16)], outputs: [] })
  t.equal(response.statusCode, 200, response.body)
  t.same(seen, ['3', 'one', 'three', 'undefined', 'undefined', 'One', 'One||three'])
})

t.test('BYTES: a shape claiming more elements than the bytes can hold allocates nothing first', async (t) => {
  const { app } = await buildInferApp(t, [echoModel('m', ['BYTES'])])
  const bytes = serializeStrings(['a'])
  const { payload, headers } = binaryBody({ inputs: [{ name: 'IN_BYTES', datatype: 'BYTES', shape: [1000000], parameters: { binary_data_size: bytes.length } }] }, [bytes])
  assertError(t, await app.inject({ method: 'POST', url: '/v2/models/m/infer', payload, headers }), 400, /is malformed/)
})

t.test('JSON data nested far deeper than any tensor is 400, and a little deeper than the shape still works', async (t) => {
  const { app } = await startExample(t)
  const deep = `{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":${'['.repeat(7000)}1${']'.repeat(7000)}},` +
    `{"name":"INPUT1","datatype":"INT32","shape":[1,16],"data":${JSON.stringify(new Array(16).fill(1))}}]}`
  const response = await app.inject({ method: 'POST', url: '/v2/models/simple/infer', payload: deep })
  assertError(t, response, 400, "Unable to parse 'data': JSON nesting depth exceeds maximum allowed limit (100)")
  const values = Array.from({ length: 16 }, (_, index) => [index])
  const overNested = await app.inject({
    method: 'POST',
    url: '/v2/models/simple/infer',
    payload: { inputs: [jsonInput('INPUT0', 'INT32', [1, 16], [values]), jsonInput('INPUT1', 'INT32', [1, 16], [values])] }
  })
  t.equal(overNested.statusCode, 200, 'nested one level more than the shape, as Triton accepts')
})

t.test('JSON: a request whose JSON passes the limit is 400 before it is parsed', async (t) => {
  const { app } = await startExample(t)
  const data = new Array(16).fill(0)
  const padding = ' '.repeat(64 * MiB)
  const payload = `{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":${JSON.stringify(data)}}]${padding}}`
  assertError(t, await app.inject({ method: 'POST', url: '/v2/models/simple/infer', payload }), 400,
    `request JSON size of ${payload.length} bytes exceeds the maximum allowed input size of ${64 * MiB} bytes. ` +
    'Use --http-max-input-size to increase the limit.')
})

t.test("an output's JSON is charged as written: its text, not the worst case of its elements", async (t) => {
  const elements = 70_000 // more than one slice of text
  // 70,000 threes: the digits, 69,999 commas and two brackets (at worst, 12 characters each)
  const textLength = 2 * elements + 1
  const inputs = [jsonInput('INPUT0', 'INT32', [elements], new Array(elements).fill(1)),
    jsonInput('INPUT1', 'INT32', [elements], new Array(elements).fill(2))]
  const answer = async (maxJsonResponseChars: number) => {
    const { app } = await buildInferApp(t, [sumModel('simple', 'INT32', [-1])], { limits: { maxJsonResponseChars } })
    return await infer(app, 'simple', { inputs, outputs: [{ name: 'OUTPUT0' }] })
  }
  const fits = await answer(textLength)
  t.equal(fits.statusCode, 200, fits.body)
  t.same(JSON.parse(fits.body).outputs[0].data, new Array(elements).fill(3))
  assertError(t, await answer(textLength - 1), 400,
    `output 'OUTPUT0' is too large to send as JSON (a response holds at most ${textLength - 1} characters of JSON): ` +
    "ask for it as binary data ('binary_data': true) or in shared memory")
})

t.test('an empty output is two characters of JSON', async (t) => {
  const { app } = await buildInferApp(t, [sumModel('simple', 'INT32', [-1])], { limits: { maxJsonResponseChars: 4 } })
  const inputs = [jsonInput('INPUT0', 'INT32', [0], []), jsonInput('INPUT1', 'INT32', [0], [])]
  const both = await infer(app, 'simple', { inputs })
  t.equal(both.statusCode, 200, both.body)
  t.same(JSON.parse(both.body).outputs.map((output: { data: unknown[] }) => output.data), [[], []])
})

t.test('an output the request did not ask for costs no JSON', async (t) => {
  const { app } = await buildInferApp(t, [sumModel('simple', 'INT32', [-1])], { limits: { maxJsonResponseChars: 300 } })
  // OUTPUT0: 100 threes (201 characters); OUTPUT1: 100 minus ones (301)
  const inputs = [jsonInput('INPUT0', 'INT32', [100], new Array(100).fill(1)), jsonInput('INPUT1', 'INT32', [100], new Array(100).fill(2))]
  const one = await infer(app, 'simple', { inputs, outputs: [{ name: 'OUTPUT0' }] })
  t.equal(one.statusCode, 200, 'one output fits the JSON limit, the other is not sent')
  assertError(t, await infer(app, 'simple', { inputs }), 400, /^output 'OUTPUT1' is too large to send as JSON/)
})

t.test('a BYTES output too large for JSON is 400', async (t) => {
  const { app } = await buildInferApp(t, [echoModel('m', ['BYTES'])], { limits: { maxJsonResponseChars: 20 } })
  const fits = await infer(app, 'm', { inputs: [jsonInput('IN_BYTES', 'BYTES', [2], ['abc', 'def'])] })
  t.equal(fits.statusCode, 200, fits.body)
  assertError(t, await infer(app, 'm', { inputs: [jsonInput('IN_BYTES', 'BYTES', [3], ['abcdefgh', 'abcdefgh', 'x'])] }), 400,
    /^output 'OUT_BYTES' is too large to send as JSON \(a response holds at most 20 characters/)
})

t.test('a refused request changes no byte of any region: BYTES outputs are all checked first', async (t) => {
  const { baseUrl } = await startExample(t)
  const object = makeMappedObject(t, 4096, 'all_or_nothing')
  const strings = serializeStrings(Array.from({ length: 16 }, (_, index) => String(index)))
  object.bytes.set(strings)
  object.bytes.fill(0xee, 1024)
  await registerOver(t, baseUrl, 'io', object.key, 4096)
  const response = await postJson(`${baseUrl}/v2/models/simple_string/infer`, {
    inputs: [shmInput('INPUT0', 'BYTES', [1, 16], 'io', strings.length), shmInput('INPUT1', 'BYTES', [1, 16], 'io', strings.length)],
    outputs: [shmOutput('OUTPUT0', 'io', 1024, 1024), shmOutput('OUTPUT1', 'io', 8, 2048)]
  })
  t.equal(response.status, 400)
  t.match(response.body.error, /^shared memory size specified with the request for output 'OUTPUT1' \(8 bytes\)/)
  t.ok(object.bytes.subarray(1024).every((byte) => byte === 0xee), 'OUTPUT0\'s region was not written')
})

t.test('a fixed-size output whose region is too small is refused before the model writes any output', async (t) => {
  const { baseUrl } = await startExample(t)
  const object = makeMappedObject(t, 4096, 'fixed_small')
  object.bytes.set(bytesOfValues('INT32', new Array(32).fill(3)))
  object.bytes.fill(0xee, 1024)
  await registerOver(t, baseUrl, 'io', object.key, 4096)
  const response = await postJson(`${baseUrl}/v2/models/simple/infer`, {
    inputs: [shmInput('INPUT0', 'INT32', [1, 16], 'io', 64), shmInput('INPUT1', 'INT32', [1, 16], 'io', 64, 64)],
    outputs: [shmOutput('OUTPUT0', 'io', 64, 1024), shmOutput('OUTPUT1', 'io', 60, 2048)]
  })
  t.same(response, { status: 400, body: { error: "shared memory size specified with the request for output 'OUTPUT1' (60 bytes) should be at least 64 bytes to hold the results" } })
  t.ok(object.bytes.subarray(1024).every((byte) => byte === 0xee), 'OUTPUT0\'s region was not written')
})

t.test('outputs overlapping inputs get the values computed from the inputs as they were', async (t) => {
  const { baseUrl } = await startExample(t)
  const object = makeMappedObject(t, 4096, 'alias')
  const a = Array.from({ length: 16 }, (_, index) => index * 10)
  const b = Array.from({ length: 16 }, (_, index) => index)
  object.bytes.set(bytesOfValues('INT32', [...a, ...b]))
  await registerOver(t, baseUrl, 'io', object.key, 4096)
  // The same object registered again under another name (and key spelling), at an offset.
  await registerOver(t, baseUrl, 'twin', `/${object.key}`, 4096)
  const response = await postJson(`${baseUrl}/v2/models/simple/infer`, {
    inputs: [shmInput('INPUT0', 'INT32', [1, 16], 'io', 64), shmInput('INPUT1', 'INT32', [1, 16], 'io', 64, 64)],
    // OUTPUT0 over INPUT1, OUTPUT1 half over INPUT0 through the twin region
    outputs: [shmOutput('OUTPUT0', 'io', 64, 64), shmOutput('OUTPUT1', 'twin', 64, 32)]
  })
  t.equal(response.status, 200, JSON.stringify(response.body))
  const int32 = (offset: number) => Array.from(new Int32Array(object.bytes.buffer, object.bytes.byteOffset + offset, 16))
  t.same(int32(32), a.map((value, index) => value - b[index]), 'OUTPUT1 = INPUT0 - INPUT1 of the original inputs')
  t.same(int32(64).slice(8), a.map((value, index) => value + b[index]).slice(8), 'OUTPUT0 = INPUT0 + INPUT1 beyond OUTPUT1')
})

t.test('BYTES outputs overlapping their inputs are serialized through scratch, from the inputs as they were', async (t) => {
  const { baseUrl } = await startExample(t)
  const object = makeMappedObject(t, 4096, 'alias_bytes')
  const inputs = [serializeStrings(Array.from({ length: 16 }, (_, index) => String(index * 100))), serializeStrings(new Array(16).fill('7'))]
  object.bytes.set(inputs[0])
  object.bytes.set(inputs[1], 512)
  await registerOver(t, baseUrl, 'io', object.key, 4096)
  const response = await postJson(`${baseUrl}/v2/models/simple_string/infer`, {
    inputs: [shmInput('INPUT0', 'BYTES', [1, 16], 'io', inputs[0].length), shmInput('INPUT1', 'BYTES', [1, 16], 'io', inputs[1].length, 512)],
    outputs: [shmOutput('OUTPUT0', 'io', 512, 0), shmOutput('OUTPUT1', 'io', 512, 512)]
  })
  t.equal(response.status, 200, JSON.stringify(response.body))
  const read = (offset: number) => [...readBytesElements('OUTPUT', object.bytes.subarray(offset, offset + 512), 16)].map(String)
  t.same(read(0), Array.from({ length: 16 }, (_, index) => String(index * 100 + 7)), 'OUTPUT0 over INPUT0')
  t.same(read(512), Array.from({ length: 16 }, (_, index) => String(index * 100 - 7)), 'OUTPUT1 over INPUT1')
})

t.test('outputs overlapping no input are written in place, never through scratch', async (t) => {
  const object = makeMappedObject(t, 4096, 'no_alias')
  let views: boolean[] = []
  const simple = sumModel()
  const { app } = await buildInferApp(t, [{
    signature: simple.signature,
    execute (request) {
      const input = request.input<Int32Array>('INPUT0').data
      views = ['OUTPUT0', 'OUTPUT1'].map((name) => request.output<Int32Array>(name, [1, 16]).buffer === input.buffer)
      simple.execute(request)
    }
  }])
  await registerRegion(t, app, 'io', object.key, 4096)
  const response = await infer(app, 'simple', {
    inputs: [shmInput('INPUT0', 'INT32', [1, 16], 'io', 64), shmInput('INPUT1', 'INT32', [1, 16], 'io', 64, 64)],
    outputs: [shmOutput('OUTPUT0', 'io', 64, 128), shmOutput('OUTPUT1', 'io', 64, 64)]
  })
  t.equal(response.statusCode, 200, response.body)
  t.same(views, [true, false], 'OUTPUT0 is a view of the region; OUTPUT1, over INPUT1, is scratch')
})

t.test('duplicate output names are 400, as duplicate inputs are', async (t) => {
  const { app } = await startExample(t)
  const response = await app.inject({
    method: 'POST',
    url: '/v2/models/simple/infer',
    payload: {
      inputs: [jsonInput('INPUT0', 'INT32', [1, 16], new Array(16).fill(1)), jsonInput('INPUT1', 'INT32', [1, 16], new Array(16).fill(1))],
      outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT1' }, { name: 'OUTPUT0', parameters: { binary_data: true } }]
    }
  })
  assertError(t, response, 400, "output 'OUTPUT0' already exists in request")
})

t.test('inputs of one batch must agree on its size, within the model\'s largest batch', async (t) => {
  const { app } = await startExample(t)
  const send = (model: string, datatype: string, shapes: number[][], value: unknown) => app.inject({
    method: 'POST',
    url: `/v2/models/${model}/infer`,
    payload: {
      inputs: shapes.map((shape, index) =>
        jsonInput(`INPUT${index}`, datatype, shape, new Array(shape.reduce((count, dim) => count * dim, 1)).fill(value)))
    }
  })
  assertError(t, await send('simple', 'INT32', [[2, 16], [1, 16]], 1), 400, "input 'INPUT1' batch size does not match other inputs for 'simple'")
  assertError(t, await send('simple_string', 'BYTES', [[1, 16], [2, 16]], '1'), 400,
    "input 'INPUT1' batch size does not match other inputs for 'simple_string'")
  assertError(t, await send('add_sub_fp32', 'FP32', [[3], [1]], 1), 400, 'INPUT0 and INPUT1 must have one shape, got [3] and [1]')
  assertError(t, await send('simple', 'INT32', [[9, 16], [9, 16]], 1), 400, "inference request batch-size must be <= 8 for 'simple'")
  t.equal((await send('simple', 'INT32', [[8, 16], [8, 16]], 1)).statusCode, 200, 'a full batch is served')
})

t.test('messages print sizes past 2^53 exactly', async (t) => {
  const { app } = await buildInferApp(t, [echoModel('m', ['INT64'], [-1, -1])])
  const object = makeMappedObject(t, 4096, 'exact')
  await registerRegion(t, app, 'r', object.key, 4096)
  // (2^30 + 3)^2 elements: a double rounds the count, and the byte count with it
  const dim = 2 ** 30 + 3
  const count = BigInt(dim) * BigInt(dim)
  t.not(String(dim * dim * 8), String(count * 8n), 'the double is inexact')
  const response = await infer(app, 'm', { inputs: [shmInput('IN_INT64', 'INT64', [dim, dim], 'r', 8)] })
  assertError(t, response, 400, `input byte size mismatch for input 'IN_INT64' for model 'm'. Expected ${count * 8n}, got 8`)
  const json = await infer(app, 'm', { inputs: [jsonInput('IN_INT64', 'INT64', [dim, dim], [1])] })
  assertError(t, json, 400, `byte size overflow for input 'IN_INT64': element count (${count}) * data type size (8) exceeds maximum allowed size (9223372036854775807)`)
  t.equal(elementCount([2, 3, 4]), 24, 'elementCount, for models, is the product of the dimensions')
})

t.test('example service: a body trickled byte by byte is cut off by the request timeout', async (t) => {
  const { app } = await startExample(t, { requestTimeoutMs: 300 })
  const { port } = app.server.address() as { port: number }
  const socket = connect(port, '127.0.0.1')
  await once(socket, 'connect')
  const chunks: Buffer[] = []
  socket.on('data', (chunk: Buffer) => chunks.push(chunk))
  const declared = 1_000_000
  socket.write(`POST /v2/models/simple/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ${declared}\r\n\r\n{`)
  const closed = once(socket, 'close')
  // A byte every 20 ms would take hours to finish the body: only the server's timeout ends this.
  let sent = 1
  const trickle = setInterval(() => { if (!socket.destroyed) socket.write(' ', () => {}); sent++ }, 20)
  await closed
  clearInterval(trickle)
  t.ok(sent < declared, `the server closed the connection before the body was complete (${sent} of ${declared} bytes)`)
  t.match(Buffer.concat(chunks).toString(), /^HTTP\/1\.1 408 /, 'answered 408 Request Timeout')
})

t.test('example service: a malformed percent-encoding is answered in the API\'s shape, on every path', async (t) => {
  const { app } = await startExample(t)
  const { port } = app.server.address() as { port: number }
  for (const path of ['/v2/systemsharedmemory/region/%ZZ/register', '/v2/systemsharedmemory/region/%ZZ/status', '/v2/models/%ZZ/infer']) {
    const answer = await new Promise<{ status: number, body: string }>((resolve, reject) => {
      const request = httpRequest({ host: '127.0.0.1', port, path, method: path.endsWith('status') ? 'GET' : 'POST' }, (response) => {
        let body = ''
        response.on('data', (chunk) => { body += chunk })
        response.on('end', () => resolve({ status: response.statusCode as number, body }))
      })
      request.on('error', reject)
      request.end()
    })
    t.equal(answer.status, 400, path)
    t.same(Object.keys(JSON.parse(answer.body)), ['error'], `${path}: {"error"} and nothing else`)
  }
})

t.test('example service: unknown and malformed model versions are refused as Triton refuses them', async (t) => {
  const { baseUrl } = await startExample(t)
  for (const route of ['', '/ready']) {
    const unknown = await fetch(`${baseUrl}/v2/models/simple/versions/999${route}`)
    t.equal(unknown.status, 404, `version 999${route}`)
    t.same(await unknown.json(), { error: "Request for unknown model: 'simple' version 999 is not found" })
    const malformed = await fetch(`${baseUrl}/v2/models/simple/versions/abc${route}`)
    t.equal(malformed.status, 400, `version abc${route}`)
    t.same(await malformed.json(), { error: "Invalid model version: 'abc' is not a number" })
  }
  const infer = await postJson(`${baseUrl}/v2/models/simple/versions/999/infer`, { inputs: [] })
  t.same(infer, { status: 404, body: { error: "Request for unknown model: 'simple' version 999 is not found" } })
})

t.test('leases larger than one ArrayBuffer are refused over HTTP inference, not crashed on', { skip: MappedRange.maxWindowBytes > 8 * 1024 ** 3 && 'this Node makes ArrayBuffers larger than the test can map' }, async (t) => {
  const { app } = await buildInferApp(t, [echoModel('m', ['UINT8'])])
  const byteSize = MappedRange.maxWindowBytes + 1
  const key = makeObject(t, byteSize, 'lease_big')
  await registerRegion(t, app, 'big', key, byteSize)
  writeObjectFile(key, byteSize - 1, [5])
  assertError(t, await infer(app, 'm', { inputs: [shmInput('IN_UINT8', 'UINT8', [byteSize], 'big', byteSize)] }), 400,
    new RegExp(`^shared memory byte size ${byteSize} for region 'big' exceeds the largest single view`))
  const tail = await infer(app, 'm', { inputs: [shmInput('IN_UINT8', 'UINT8', [1], 'big', 1, byteSize - 1)] })
  t.same(JSON.parse(tail.body).outputs[0].data, [5], 'the last byte is served')
  t.same(readObjectFile(key, byteSize - 1, 1), [5])
})
