/**
 * Request bodies sent compressed (`Content-Encoding: gzip` or `deflate`), as Triton takes them
 * (qa/L0_data_compression, qa/L0_http's compressed size limits): inflated before they are read,
 * within the limits a plain body has (the JSON limit, Triton's `--http-max-input-size`, for a JSON
 * or raw body; `bodyLimit` for any), each piece charged to the in-flight budget as it is inflated,
 * so a body that inflates without end costs its limit and no more; any other coding refused as
 * Triton refuses it. Over real sockets: the body's framing is the point.
 */
import { deflateSync, gzipSync } from 'node:zlib'
import t, { type Test } from 'tap'
import { buildServer } from '../example/server'
import { InFlightBytes } from '../lib/index'
import { assertError, postBytes } from './helpers/http'
import {
  binaryBody, buildInferApp, echoModel, type InferAppOptions, inferUrl, jsonInput, parseInferResponse, sumModel, type TestModel
} from './helpers/kserve'
import { listenLocally } from './helpers/slow-client'
import { eventually } from './helpers/sync'
import { WatchedBudget } from './helpers/watched-budget'

const MiB = 1024 ** 2

const CODINGS = { gzip: gzipSync, deflate: deflateSync }

async function serving (t: Test, models: TestModel[], options: InferAppOptions = {}) {
  const { app, seen } = await buildInferApp(t, models, options)
  return { app, seen, port: await listenLocally(t, app) }
}

const SIMPLE_REQUEST = JSON.stringify({
  inputs: [jsonInput('INPUT0', 'INT32', [1, 16], Array(16).fill(5)), jsonInput('INPUT1', 'INT32', [1, 16], Array(16).fill(2))]
})

/** A JSON request for echo `m` (one UINT8 input) padded with spaces to `byteSize` bytes. */
function paddedJson (byteSize: number): Buffer {
  const request = JSON.stringify({ inputs: [jsonInput('IN_UINT8', 'UINT8', [3], [1, 2, 3])] })
  return Buffer.from(request.slice(0, -1) + ' '.repeat(byteSize - request.length) + '}')
}

t.test('gzip and deflate bodies are inflated before they are read: JSON, binary data, a raw request; whole or chunked', async (t) => {
  const { port } = await serving(t, [sumModel(), echoModel('m', ['UINT8'])])
  const input = Buffer.from([1, 2, 3, 250])
  const binary = binaryBody({ inputs: [{ name: 'IN_UINT8', datatype: 'UINT8', shape: [4], parameters: { binary_data_size: 4 } }] }, [input])
  for (const [coding, compress] of Object.entries(CODINGS)) {
    for (const framing of ['whole', 'chunked']) {
      const send = (model: string, body: Buffer, headers: Record<string, string> = {}) => {
        const compressed = compress(body)
        const pieces = framing === 'whole' ? compressed : [compressed.subarray(0, 5), compressed.subarray(5)]
        return postBytes(port, inferUrl(model), { 'content-encoding': coding, ...headers }, pieces)
      }
      const json = await send('simple', Buffer.from(SIMPLE_REQUEST))
      t.equal(json.statusCode, 200, `${coding}, ${framing}: JSON (${json.body})`)
      t.same(JSON.parse(json.body).outputs.map(({ data }: { data: number[] }) => data[0]), [7, 3], 'the sums of the inflated inputs')
      // The header length counts the inflated body, as Triton's does.
      const withBinary = await send('m', binary.payload, binary.headers)
      t.equal(withBinary.statusCode, 200, `${coding}, ${framing}: binary data (${withBinary.body})`)
      t.same(JSON.parse(withBinary.body).outputs[0].data, [1, 2, 3, 250])
      const raw = await send('m', input, { 'inference-header-content-length': '0' })
      t.equal(raw.statusCode, 200, `${coding}, ${framing}: a raw request`)
      t.same(parseInferResponse(raw).binary.get('OUT_UINT8'), input)
    }
  }
  const identity = await postBytes(port, inferUrl('simple'), { 'content-encoding': 'identity' }, Buffer.from(SIMPLE_REQUEST))
  t.equal(identity.statusCode, 200, 'identity is no coding')
})

t.test('other codings are refused as Triton refuses them: 501, naming the ones it takes', async (t) => {
  const { port, seen } = await serving(t, [sumModel()])
  for (const coding of ['br', 'compress', 'x-gzip', 'gzip, deflate', 'zstd']) {
    const response = await postBytes(port, inferUrl('simple'), { 'content-encoding': coding }, gzipSync(SIMPLE_REQUEST))
    assertError(t, response, 501, 'Unsupported compression type')
    t.equal(response.headers['accept-encoding'], 'gzip, deflate', `${coding}: Accept-Encoding says which codings the server takes`)
  }
  const chunked = await postBytes(port, inferUrl('simple'), { 'content-encoding': 'br' }, [gzipSync(SIMPLE_REQUEST)])
  assertError(t, chunked, 501, 'Unsupported compression type')
  t.equal(seen.length, 0, 'no model ran')
})

t.test('a body that is not what its coding says is 400; an empty one has nothing to be decompressed', async (t) => {
  const { port, seen } = await serving(t, [sumModel()])
  const compressed = gzipSync(SIMPLE_REQUEST)
  const cases: Array<[string, Buffer | Buffer[], string | RegExp]> = [
    ['gzip', Buffer.from(SIMPLE_REQUEST), 'Unable to parse inference request: the body is not valid gzip data: incorrect header check'],
    ['deflate', compressed.subarray(0, compressed.length - 12), 'Unable to parse inference request: the body is not valid deflate data: unexpected end of file'],
    ['gzip', Buffer.alloc(0), 'nothing to be decompressed'],
    ['deflate', [Buffer.alloc(0)], 'nothing to be decompressed']
  ]
  for (const [coding, body, message] of cases) {
    assertError(t, await postBytes(port, inferUrl('simple'), { 'content-encoding': coding }, body), 400, message)
  }
  t.equal(seen.length, 0, 'no model ran')
})

t.test('a JSON or raw body that inflates past the JSON limit is refused in Triton\'s words, having inflated no more', async (t) => {
  const jsonLimit = MiB
  const inFlight = new WatchedBudget(1024 * MiB)
  const { port, seen } = await serving(t, [echoModel('m', ['UINT8'])], { bodyParser: { bodyLimit: 64 * MiB, jsonLimit, inFlight } })
  const refusal = `Decompressed data size exceeds the maximum allowed value of ${jsonLimit} bytes. Use --http-max-input-size to increase the limit.`
  // 64 MiB of spaces, 64 KiB compressed: a zip bomb.
  const bomb = gzipSync(paddedJson(64 * MiB))
  for (const headers of [{}, { 'inference-header-content-length': '0' }] as Array<Record<string, string>>) {
    for (const body of [bomb, [bomb.subarray(0, 1000), bomb.subarray(1000)]]) {
      inFlight.most = 0
      const response = await postBytes(port, inferUrl('m'), { 'content-encoding': 'gzip', ...headers }, body)
      assertError(t, response, 400, refusal)
      t.ok(inFlight.most <= bomb.length + jsonLimit, `it held ${inFlight.most} bytes: its compressed bytes and at most the limit inflated`)
    }
  }
  const fits = await postBytes(port, inferUrl('m'), { 'content-encoding': 'gzip' }, gzipSync(paddedJson(jsonLimit)))
  t.equal(fits.statusCode, 200, 'a body that inflates to the limit exactly is served')
  t.equal(seen.length, 1, 'the model ran only for it')
  await eventually(() => inFlight.heldBytes === 0, 'the requests kept what they were charged')
  t.pass('everything charged was given back')
})

t.test('a body with binary data that inflates past bodyLimit is refused as a plain one is (413), having inflated no more', async (t) => {
  const bodyLimit = 2 * MiB
  const inFlight = new WatchedBudget(1024 * MiB)
  const { port } = await serving(t, [echoModel('m', ['UINT8'])], { bodyParser: { bodyLimit, inFlight } })
  const { payload, headers } = binaryBody({ inputs: [{ name: 'IN_UINT8', datatype: 'UINT8', shape: [64 * MiB], parameters: { binary_data_size: 64 * MiB } }] },
    [Buffer.alloc(64 * MiB)])
  const bomb = gzipSync(payload)
  const response = await postBytes(port, inferUrl('m'), { 'content-encoding': 'gzip', ...headers }, bomb)
  assertError(t, response, 413, 'Request body is too large')
  t.ok(inFlight.most <= bomb.length + bodyLimit, `it held ${inFlight.most} bytes: its compressed bytes and at most bodyLimit inflated`)
})

t.test('what a body inflates to is charged to the in-flight budget as it grows', async (t) => {
  const maxInFlightBytes = 4 * MiB
  const inFlight = new InFlightBytes(maxInFlightBytes)
  const { port, seen } = await serving(t, [echoModel('m', ['UINT8'])], { bodyParser: { bodyLimit: 64 * MiB, jsonLimit: 64 * MiB, inFlight } })
  const bomb = gzipSync(paddedJson(64 * MiB))
  const alone = await postBytes(port, inferUrl('m'), { 'content-encoding': 'gzip' }, bomb)
  const message = assertError(t, alone, 400, /^this request needs \d+ bytes in flight, more than the server holds for all requests together \(4194304\)/)
  const needed = Number(/needs (\d+) bytes/.exec(message)?.[1])
  t.ok(needed <= maxInFlightBytes + MiB, `refused at ${needed} bytes: the piece that passed the budget, not the whole body`)
  // With most of the budget held elsewhere, a small compressed body is told to come back.
  const elsewhere = inFlight.open()
  elsewhere.charge(maxInFlightBytes - 64 * 1024)
  const busy = await postBytes(port, inferUrl('m'), { 'content-encoding': 'deflate' }, deflateSync(paddedJson(MiB / 4)))
  assertError(t, busy, 503, /^the server holds \d+ bytes for requests in flight/)
  elsewhere.release()
  const served = await postBytes(port, inferUrl('m'), { 'content-encoding': 'deflate' }, deflateSync(paddedJson(MiB / 4)))
  t.equal(served.statusCode, 200, 'once the budget is free, the same body is served')
  t.equal(seen.length, 1)
  await eventually(() => inFlight.heldBytes === 0, 'the requests kept what they were charged')
  t.pass('everything charged was given back')
})

t.test('example service: Triton\'s data compression clients, and its compressed size limit', async (t) => {
  const app = await buildServer()
  const port = await listenLocally(t, app)
  for (const [coding, compress] of Object.entries(CODINGS)) {
    const response = await postBytes(port, inferUrl('simple'), { 'content-encoding': coding }, compress(SIMPLE_REQUEST))
    t.equal(response.statusCode, 200, coding)
    t.same(JSON.parse(response.body).outputs[0].data, Array(16).fill(7), `${coding}: the inflated request answered`)
  }
  // qa/L0_http's test_default_limit_compressed: 65 MiB of JSON, gzipped, past the 64 MiB limit.
  const over = await postBytes(port, inferUrl('simple'), { 'content-encoding': 'gzip' }, gzipSync(paddedJson(65 * MiB)))
  assertError(t, over, 400, `Decompressed data size exceeds the maximum allowed value of ${64 * MiB} bytes. Use --http-max-input-size to increase the limit.`)
})

t.test('example service: a raised JSON limit raises the in-flight budget to hold one body that size, unless it is given', async (t) => {
  // 80 MiB of JSON holds 13 times it in flight once inflated and parsed: past the default 1 GiB.
  const jsonLimit = 80 * MiB
  const body = gzipSync(SIMPLE_REQUEST.slice(0, -1) + ' '.repeat(jsonLimit - SIMPLE_REQUEST.length - MiB) + '}')
  const fixed = await listenLocally(t, await buildServer({ jsonLimit, maxInFlightBytes: 1024 ** 3 }))
  const refused = await postBytes(fixed, inferUrl('simple'), { 'content-encoding': 'gzip' }, body)
  assertError(t, refused, 400, /^this request needs \d+ bytes in flight, more than the server holds for all requests together \(1073741824\)/)
  const derived = await listenLocally(t, await buildServer({ jsonLimit }))
  const served = await postBytes(derived, inferUrl('simple'), { 'content-encoding': 'gzip' }, body)
  t.equal(served.statusCode, 200, served.body.slice(0, 200))
  t.same(JSON.parse(served.body).outputs[0].data, Array(16).fill(7))
})
