/**
 * The receive timeout: a gRPC call that does not send its request in time is cancelled. First the
 * rule itself, on the streams of a bare server of the package's HTTP/2 (`watchReceiving`); then the plugin's
 * listener, over real connections on 127.0.0.1, whoever serves the call (its own ModelInfer,
 * grpc-js's compressed calls and streams): the client sees its stream reset, what the call held
 * is given back, the cancel is logged, and the listener serves others.
 */
import { once } from 'node:events'
import http2 from 'node:http2'
import { type AddressInfo, createServer } from 'node:net'
import { performance } from 'node:perf_hooks'
import Fastify from 'fastify'
import t, { type Test } from 'tap'
import { inferenceService } from '../lib/grpc'
import { watchReceiving } from '../lib/grpc/receive-timeout'
import { Http2ServerConnection } from '../lib/http2/server-connection'
import type { Http2ServerStream } from '../lib/http2/server-stream'
import { fastifyTritonShm } from '../lib/index'
import { modelTable } from './helpers/grpc'
import { heldSum, sumModel, type TestModel } from './helpers/kserve'
import { LogCapture } from './helpers/observe'
import { framed, rawGrpc } from './helpers/raw-grpc'
import { bounded, eventually } from './helpers/sync'

const RECEIVE_TIMEOUT_MS = 500
const LATE = 'a gRPC client did not send its request in the receive timeout: call cancelled'

/** Waits `ms`: for what must not happen within it (a slower machine only waits longer). */
const quietFor = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** A ModelInferRequest of `model` (`simple`'s signature) with raw contents (INT32 [1, 16]), as grpc-js encodes it. */
const sumRequest = (model = 'simple'): Buffer => (inferenceService().service.ModelInfer.requestSerialize as (value: object) => Buffer)({
  model_name: model,
  inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16] })),
  raw_input_contents: [Buffer.alloc(64, 1), Buffer.alloc(64, 2)]
})

/** A call from a raw HTTP/2 client, written by hand; `reset` resolves with its RST code once it closes. */
function openCall (t: Test, port: number, method: string, headers: http2.OutgoingHttpHeaders = {}) {
  const session = http2.connect(`http://127.0.0.1:${port}`)
  session.on('error', () => {})
  t.teardown(() => { session.destroy() })
  const stream = session.request({
    ':method': 'POST', ':path': `/inference.GRPCInferenceService/${method}`, 'content-type': 'application/grpc', te: 'trailers', ...headers
  })
  stream.on('error', () => {})
  const reset = new Promise<number>((resolve) => stream.on('close', () => resolve(stream.rstCode as number)))
  return { stream, reset, opened: performance.now() }
}

/** A bare server of the package's HTTP/2 whose every stream is read as it arrives, and watched
 * (`streaming` as given); `read` is told of each chunk, as it is read. */
async function watchedServer (t: Test, streaming: boolean, read = (_stream: Http2ServerStream, _chunk: Buffer) => {}) {
  const late: Http2ServerStream[] = []
  const streams: Http2ServerStream[] = []
  const server = createServer((socket) => new Http2ServerConnection(socket, (stream) => {
    stream.onData = (chunk) => read(stream, chunk)
    watchReceiving(stream, streaming, { ms: RECEIVE_TIMEOUT_MS, late: (cancelled) => { late.push(cancelled) } })
    streams.push(stream)
  }))
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => { server.close() })
  return { port: (server.address() as AddressInfo).port, late, streams }
}

t.test('a stream: each message within the timeout of its first byte, whatever its pieces; idle between messages as long as it likes', async (t) => {
  const { port, late, streams } = await watchedServer(t, true)
  const { stream, reset } = openCall(t, port, 'ModelStreamInfer')
  const message = framed(sumRequest())
  for (const piece of [message.subarray(0, 3), message.subarray(3, 9), message.subarray(9)]) stream.write(piece)
  // The end of one message and the start of the next in one write: the next is timed from there.
  stream.write(Buffer.concat([framed(Buffer.alloc(0)), framed(sumRequest())]))
  await quietFor(4 * RECEIVE_TIMEOUT_MS)
  t.same([late.length, streams[0]?.closed], [0, false], 'whole messages, then idle: never late')
  const started = performance.now()
  stream.write(message.subarray(0, 20))
  t.equal(await bounded(reset, 'a message never finished was not cancelled'), http2.constants.NGHTTP2_CANCEL, 'one left half way is cancelled (RST_STREAM CANCEL)')
  t.ok(performance.now() - started >= RECEIVE_TIMEOUT_MS - 20, 'not before the timeout')
  t.same(late, streams, 'and told of')
})

t.test('a paused stream is not late: the listener reads no further, so its client cannot send; once resumed, it is', async (t) => {
  // Paused as soon as a message has begun: its time is running.
  let begun = false
  const { port, late, streams } = await watchedServer(t, true, (stream) => {
    begun = true
    stream.pause()
  })
  const { stream, reset } = openCall(t, port, 'ModelStreamInfer')
  stream.write(framed(sumRequest()).subarray(0, 20))
  await eventually(() => begun, 'the message\'s first bytes never arrived')
  await quietFor(4 * RECEIVE_TIMEOUT_MS)
  t.same([late.length, streams[0].closed], [0, false], 'not cancelled while paused')
  streams[0].resume()
  t.equal(await bounded(reset, 'never cancelled once resumed'), http2.constants.NGHTTP2_CANCEL, 'cancelled once resumed')
  t.equal(late.length, 1)
})

t.test('a unary call: its whole request, message and end, within the timeout of its start', async (t) => {
  const { port, late } = await watchedServer(t, false)
  const ended = openCall(t, port, 'ModelInfer')
  ended.stream.end(framed(sumRequest()))
  await quietFor(4 * RECEIVE_TIMEOUT_MS)
  t.equal(late.length, 0, 'a request ended in time is never late')
  ended.stream.close()
  await ended.reset

  const unended = openCall(t, port, 'ModelInfer')
  unended.stream.write(framed(sumRequest()))
  t.equal(await bounded(unended.reset, 'a request never ended was not cancelled'), http2.constants.NGHTTP2_CANCEL, 'a whole message without its end is late')
  t.ok(performance.now() - unended.opened >= RECEIVE_TIMEOUT_MS - 20, 'not before the timeout')
  t.equal(late.length, 1)
})

/** The plugin's listener with `models` (`simple` by default), its warnings captured. */
async function listener (t: Test, models: TestModel[] = [sumModel('simple', 'INT32', [1, -1])]) {
  const logs = new LogCapture()
  const app = Fastify({ logger: { level: 'warn', stream: logs.stream } })
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm, { grpc: { port: 0, models: modelTable(models), receiveTimeoutMs: RECEIVE_TIMEOUT_MS } })
  await app.ready()
  return { app, port: app.tritonGrpc.port as number, logs }
}

t.test('the listener cancels a call late with its request, whoever serves it, and gives back what it held', async (t) => {
  const { app, port, logs } = await listener(t)
  const message = framed(sumRequest())
  const compressed = framed(sumRequest(), 'gzip')
  for (const [how, method, bytes, headers] of [
    ['ModelInfer, served by the listener', 'ModelInfer', message, {}],
    ['a compressed ModelInfer, served by grpc-js', 'ModelInfer', compressed, { 'grpc-encoding': 'gzip' }],
    ['a ModelStreamInfer stream, served by grpc-js', 'ModelStreamInfer', message, {}]
  ] as const) {
    logs.clear()
    const { stream, reset } = openCall(t, port, method, headers)
    stream.write(bytes.subarray(0, bytes.length - 10))
    t.equal(await bounded(reset, `${how}: never cancelled`), http2.constants.NGHTTP2_CANCEL, `${how}: cancelled`)
    await eventually(() => app.systemSharedMemory.inFlight.heldBytes === 0, `${how}: something was still held`)
    t.match(logs.withMessage(LATE), [{ level: 40, receiveTimeoutMs: RECEIVE_TIMEOUT_MS, client: /^127\.0\.0\.1:\d+$/ }], `${how}: logged`)
  }
  const served = await rawGrpc(t, port).call('ModelInfer', message)
  t.equal(served.status, 0, 'the listener serves the next call')
})

t.test('a call whose request arrived whole is never late, however long it runs', async (t) => {
  const { model, reached, release } = heldSum('slow')
  const { port, logs } = await listener(t, [model])
  const request = sumRequest('slow')
  const calls = [
    rawGrpc(t, port).call('ModelInfer', framed(request)),
    rawGrpc(t, port).call('ModelInfer', framed(request, 'gzip'), { compression: 'gzip' })
  ]
  await reached
  await quietFor(3 * RECEIVE_TIMEOUT_MS)
  release()
  t.same((await Promise.all(calls)).map(({ status }) => status), [0, 0], 'both answered, by the listener and by grpc-js')
  t.same(logs.withMessage(LATE), [], 'neither was late')
})

t.test('receiveTimeoutMs is checked at registration', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await t.rejects(async () => { await app.register(fastifyTritonShm, { grpc: { receiveTimeoutMs: 0 } }) },
    { message: "fastify-triton-shm: option 'grpc.receiveTimeoutMs' must be >= 1" })
})
