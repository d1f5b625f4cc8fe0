/**
 * Triton's raw request (qa/L0_http's many-chunks and input size tests): a body with no JSON at all
 * (`Inference-Header-Content-Length: 0`, or no body) is the data of the model's single input, its
 * shape deduced from the model's, every output answered as binary data; and the cap Triton puts on
 * the chunks of one chunked body. Chunks over a real socket: their framing is the point.
 */
import { once } from 'node:events'
import type { IncomingMessage } from 'node:http'
import { connect } from 'node:net'
import { Readable } from 'node:stream'
import t, { type Test } from 'tap'
import { buildServer } from '../example/server'
import { receivedBytes } from '../lib/http/received-bytes'
import { InFlightBytes } from '../lib/index'
import type { BytesElements, ModelSignature } from '../types'
import { assertError, postBytes } from './helpers/http'
import { buildInferApp, bytesOfValues, echoModel, inferUrl, parseInferResponse, type TestModel } from './helpers/kserve'
import { listenLocally } from './helpers/slow-client'
import { eventually } from './helpers/sync'
import { WatchedBudget } from './helpers/watched-budget'

const MiB = 1024 ** 2
const RAW = { 'inference-header-content-length': '0' }
const RAW_COUNT = (inputs: number, model: string) =>
  `[request id: <id_unknown>] Raw request must only have 1 input (found 1) to be deduced but got ${inputs} inputs in '${model}' model configuration`

/** A model of `signature` that reads its input and produces nothing, or echoes it to `OUT` when it has one. */
function readingModel (signature: ModelSignature): TestModel {
  return {
    signature,
    execute (infer) {
      const input = infer.inputs[0]
      if (signature.outputs.length > 0) (infer.output(signature.outputs[0].name, input.shape) as Uint8Array).set(input.data as Uint8Array)
    }
  }
}

const signature = (name: string, datatype: ModelSignature['inputs'][number]['datatype'], shape: number[], maxBatchSize?: number): ModelSignature =>
  ({ name, maxBatchSize, inputs: [{ name: 'IN', datatype, shape }], outputs: [] })

const post = (app: Awaited<ReturnType<typeof buildInferApp>>['app'], model: string, payload: Buffer, headers: Record<string, string> = RAW) =>
  app.inject({ method: 'POST', url: inferUrl(model), payload, headers })

t.test('Inference-Header-Content-Length: 0: the body is the data of the single input, its outputs binary data', async (t) => {
  const { app, seen } = await buildInferApp(t, [echoModel('m', ['FP32'])])
  const bytes = bytesOfValues('FP32', [1.5, -2, 1e30])
  const response = await post(app, 'm', bytes)
  t.equal(response.statusCode, 200, response.body)
  const { header, binary } = parseInferResponse(response)
  t.same(header.outputs, [{ name: 'OUT_FP32', datatype: 'FP32', shape: [3], parameters: { binary_data_size: 12 } }])
  t.same(binary.get('OUT_FP32'), bytes, 'the input\'s bytes, echoed')
  t.same(seen[0].inputs.map(({ name, datatype, shape }) => ({ name, datatype, shape })), [{ name: 'IN_FP32', datatype: 'FP32', shape: [3] }])
})

t.test('the shape is deduced as Triton\'s core deduces it', async (t) => {
  const { app, seen } = await buildInferApp(t, [
    readingModel(signature('batched', 'INT32', [-1, -1], 8)),
    readingModel(signature('fixed', 'INT16', [2, 3])),
    readingModel(signature('two_variable', 'INT8', [-1, -1])),
    readingModel(signature('zero', 'UINT8', [0, -1])),
    echoModel('m', ['FP32'])
  ])
  t.equal((await post(app, 'batched', Buffer.alloc(12))).statusCode, 200)
  t.same(seen.at(-1)?.inputs[0].shape, [1, 3], 'a batch of one, the variable dimension from the size')
  t.equal((await post(app, 'fixed', Buffer.alloc(12))).statusCode, 200)
  t.same(seen.at(-1)?.inputs[0].shape, [2, 3], 'a fixed shape as it is')
  assertError(t, await post(app, 'fixed', Buffer.alloc(10)), 400, "input byte size mismatch for input 'IN' for model 'fixed'. Expected 12, got 10")
  assertError(t, await post(app, 'm', Buffer.alloc(6)), 400, "input byte size mismatch for input 'IN_FP32' for model 'm'. Expected 4, got 6")
  assertError(t, await post(app, 'two_variable', Buffer.alloc(4)), 400,
    "[request id: <id_unknown>] The shape of the raw input 'IN' can not be deduced because there are more than one variable-sized dimension")
  assertError(t, await post(app, 'zero', Buffer.alloc(4)), 400, "input byte size mismatch for input 'IN' for model 'zero'. Expected 0, got 4")
})

t.test('a model with more inputs than one is refused in Triton\'s words', async (t) => {
  const two = readingModel({ name: 'two', inputs: [{ name: 'A', datatype: 'UINT8', shape: [-1] }, { name: 'B', datatype: 'UINT8', shape: [-1] }], outputs: [] })
  const none = readingModel({ name: 'none', inputs: [], outputs: [] })
  const { app, seen } = await buildInferApp(t, [two, none])
  assertError(t, await post(app, 'two', Buffer.alloc(4)), 400, RAW_COUNT(2, 'two'))
  assertError(t, await post(app, 'none', Buffer.alloc(4)), 400, RAW_COUNT(0, 'none'))
  t.equal(seen.length, 0)
})

t.test('a BYTES input is one element, the whole body', async (t) => {
  const { app, seen } = await buildInferApp(t, [
    readingModel(signature('one', 'BYTES', [1])),
    readingModel(signature('batched', 'BYTES', [-1], 4)),
    readingModel(signature('variable', 'BYTES', [-1])),
    readingModel(signature('two', 'BYTES', [2]))
  ])
  for (const model of ['one', 'batched']) {
    t.equal((await post(app, model, Buffer.from('héllo'))).statusCode, 200, model)
    t.same([...seen.at(-1)?.input<BytesElements>('IN').data ?? []].map(String), ['héllo'])
  }
  for (const model of ['variable', 'two']) {
    assertError(t, await post(app, model, Buffer.from('x')), 400,
      "[request id: <id_unknown>] For BYTE datatype raw input 'IN', the model must have input shape [1]")
  }
})

t.test('a raw request is bounded as JSON is, by Triton\'s input size; its BYTES copy is charged', async (t) => {
  const inFlight = new InFlightBytes(3 * MiB)
  const { app } = await buildInferApp(t, [readingModel(signature('u8', 'UINT8', [-1])), readingModel(signature('text', 'BYTES', [1]))],
    { bodyParser: { jsonLimit: 2 * MiB, bodyLimit: 8 * MiB, inFlight } })
  const port = await listenLocally(t, app)
  t.equal((await post(app, 'u8', Buffer.alloc(2 * MiB))).statusCode, 200, 'the limit exactly')
  assertError(t, await post(app, 'u8', Buffer.alloc(2 * MiB + 1)), 400,
    `Raw input has a byte_size (${2 * MiB + 1} bytes) that exceeds the maximum allowed value of ${2 * MiB} bytes. Use --http-max-input-size to increase the limit.`)
  // Over a socket, so the body is charged as it arrives: 2 MiB fit the budget, twice do not.
  t.equal((await postBytes(port, inferUrl('u8'), RAW, Buffer.alloc(2 * MiB))).statusCode, 200)
  assertError(t, await postBytes(port, inferUrl('text'), RAW, Buffer.alloc(2 * MiB)), 400,
    /^this request needs \d+ bytes in flight, more than the server holds for all requests together/)
  await eventually(() => inFlight.heldBytes === 0, 'the requests kept what they were charged')
  t.pass('everything charged was given back')
})

t.test('no body at all is a raw request of no bytes, as Triton takes it', async (t) => {
  const { app, seen } = await buildInferApp(t, [readingModel(signature('u8', 'UINT8', [-1])), echoModel('two', ['INT8', 'INT16'])])
  t.equal((await app.inject({ method: 'POST', url: inferUrl('u8') })).statusCode, 200)
  t.same(seen[0].inputs[0].shape, [0], 'a zero-shape tensor')
  for (const headers of [{}, { 'content-type': 'application/json' }]) {
    assertError(t, await app.inject({ method: 'POST', url: inferUrl('two'), headers }), 400, RAW_COUNT(2, 'two'))
  }
})

/** Sends `count` one-byte chunks of a raw request to `model` and reads the answer to its end. */
async function sendChunks (port: number, model: string, count: number, keepAlive = false): Promise<{ head: string, body: string }> {
  const socket = connect(port, '127.0.0.1')
  await once(socket, 'connect')
  const received: Buffer[] = []
  socket.on('data', (chunk: Buffer) => received.push(chunk))
  // The server may close while chunks are still on their way, as Triton's does.
  socket.on('error', () => {})
  const closed = new Promise((resolve) => socket.once('close', resolve))
  socket.write(`POST ${inferUrl(model)} HTTP/1.1\r\nHost: 127.0.0.1\r\nInference-Header-Content-Length: 0\r\n` +
    `Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n${keepAlive ? '' : 'Connection: close\r\n'}\r\n`)
  socket.write('1\r\nA\r\n'.repeat(count))
  socket.end('0\r\n\r\n')
  await closed
  const text = Buffer.concat(received).toString()
  return { head: text.slice(0, text.indexOf('\r\n\r\n')), body: text.slice(text.indexOf('\r\n\r\n') + 4) }
}

t.test('example service: a chunked body of 65 536 chunks is read; one more is refused, and the connection closed', async (t) => {
  const app = await buildServer()
  const port = await listenLocally(t, app)
  const atCap = await sendChunks(port, 'simple', 65_536)
  t.match(atCap.head, /^HTTP\/1\.1 400 /)
  t.same(JSON.parse(atCap.body), { error: RAW_COUNT(2, 'simple') }, 'every chunk read: the request is the raw request it is')
  const overCap = { error: 'Chunked request body exceeds maximum of 65536 non-empty chunks. Send fewer or larger HTTP chunks.' }
  for (const count of [65_537, 1_000_000]) {
    const over = await sendChunks(port, 'simple', count, true)
    t.match(over.head, /^HTTP\/1\.1 400 /, `${count} chunks`)
    t.match(over.head, /\r\nconnection: close/i, 'the server closes the connection, though the client would keep it')
    t.same(JSON.parse(over.body), overCap)
  }
  const empty = await app.inject({ method: 'POST', url: inferUrl('simple') })
  assertError(t, empty, 400, RAW_COUNT(2, 'simple'))
})

t.test('chunks are charged to the in-flight budget as they arrive; a refused body holds no more than its cap', async (t: Test) => {
  const inFlight = new WatchedBudget(1024 * MiB)
  const { app } = await buildInferApp(t, [readingModel(signature('u8', 'UINT8', [-1]))], { bodyParser: { inFlight } })
  const port = await listenLocally(t, app)
  const heldAtClose: number[] = []
  app.server.on('request', (request: IncomingMessage) => request.socket.once('close', () => heldAtClose.push(request.readableLength)))
  const served = await sendChunks(port, 'u8', 1000)
  t.match(served.head, /^HTTP\/1\.1 200 /)
  t.ok(inFlight.most >= 1000, `the chunks were charged (${inFlight.most} bytes held)`)
  inFlight.most = 0
  const refused = await sendChunks(port, 'u8', 200_000)
  t.match(refused.head, /^HTTP\/1\.1 400 /)
  t.equal(inFlight.most, 65_536, 'the 65 536 chunks read before the refusal: one byte each, and no more')
  await eventually(() => heldAtClose.length === 2, 'both connections closed')
  t.equal(heldAtClose[1], 0, 'nothing of the refused body was held to the end: what came after it was read and dropped')
  await eventually(() => inFlight.heldBytes === 0, 'the requests kept what they were charged')
  t.pass('everything charged was given back')
})

t.test('a chunked body\'s pieces are counted and charged one by one, and passed on joined, small ones together', async (t) => {
  const read = async (pieces: Buffer[]) => {
    const charged: number[] = []
    const body = receivedBytes(Readable.from(pieces), true, (bytes) => charged.push(bytes))
    const out: Buffer[] = []
    body.on('data', (piece: Buffer) => out.push(piece))
    await once(body, 'end')
    return { out, charged, received: body.receivedEncodedLength }
  }
  const pairs = Array.from({ length: 35_000 }, (_, index) => Buffer.from([index % 256, 7]))
  const small = await read(pairs)
  t.same(small.out.map((piece) => piece.length), [64 * 1024, 70_000 - 64 * 1024], 'copied into one Buffer per 64 KiB')
  t.same(Buffer.concat(small.out), Buffer.concat(pairs), 'every byte, in order')
  t.same(small.charged, new Array(35_000).fill(2), 'each piece charged as it came')
  t.equal(small.received, 70_000)
  const large = Buffer.alloc(70 * 1024, 7)
  const big = await read([Buffer.from('ab'), large, large])
  t.same(big.out.map((piece) => piece.length), [2, 70 * 1024, 70 * 1024], 'what was joined goes first')
  t.equal(big.out[1], large, 'a large piece alone is passed on as it is')
  const halves = await read([Buffer.alloc(40 * 1024, 1), Buffer.alloc(40 * 1024, 2)])
  t.same(halves.out.map((piece) => piece[0]), [1, 2], 'a piece that does not fit beside what is joined starts the next Buffer')
  t.same((await read([])).out, [], 'no body, nothing passed on')
  const plain = receivedBytes(Readable.from([Buffer.from('x')]), false, () => { throw new Error('never charged') })
  t.same(await plain.toArray(), [Buffer.from('x')], 'a body with a length passes through, uncharged')
})
