/**
 * The plugin's gRPC listener held to the bounds the HTTP face keeps, over real connections on
 * 127.0.0.1: a client that stops reading its answer is dropped after the send timeout and gives
 * back what it held, `close()` ends in bounded time whatever its clients do, and messages are
 * bounded before they are decoded.
 */
import http2 from 'node:http2'
import net from 'node:net'
import { status } from '@grpc/grpc-js'
import t from 'tap'
import { grpcClient, listenGrpcPlugin } from './helpers/grpc'
import { echoModel, heldSum, sumModel, type TestModel } from './helpers/kserve'
import { echoRegion, encodedInfer, framed, holdCallsOpen, rawGrpc } from './helpers/raw-grpc'
import { bounded, eventually } from './helpers/sync'

const MiB = 1024 ** 2

t.test('a client that stops reading its answer is dropped after the send timeout; its memory goes back', async (t) => {
  const sendTimeoutMs = 1500
  // ModelInfer served on its stream, and by grpc-js (a call with a deadline is grpc-js's).
  for (const [how, metadata] of [['on its stream', {}], ['by grpc-js', { 'grpc-timeout': '100S' }]] as const) {
    const { app, port } = await listenGrpcPlugin(t, [echoModel('echo', ['UINT8'])], { grpc: { limits: { sendTimeoutMs } } })
    const request = await echoRegion(t, app, 32 * MiB)
    let stoppedAt = 0
    const answer = await bounded(rawGrpc(t, port).call('ModelInfer', framed(request), {
      metadata,
      stopReadingAfter: 1,
      onStopped: () => { stoppedAt = Date.now() }
    }), `${how}: the stalled call was never dropped`, 20 * sendTimeoutMs)
    const after = Date.now() - stoppedAt
    t.ok(answer.received < 32 * MiB, `${how}: it got ${answer.received} bytes of its answer, then the call ended (${answer.ended})`)
    t.ok(after >= sendTimeoutMs - 200, `${how}: not before the send timeout (${after} ms after it stopped reading)`)
    await eventually(() => app.systemSharedMemory.inFlight.heldBytes === 0, `${how}: the bytes the dropped call held were never given back`)
    t.pass(`${how}: the bytes it held are given back`)
    t.same(await grpcClient(t, port).call('ServerLive'), { live: true }, `${how}: the listener serves others`)
  }
})

t.test('close() ends in bounded time: a run in flight finishes, a stalled reader and a call never sent whole are cut', async (t) => {
  const sendTimeoutMs = 3000
  const { model: slow, reached: running, release } = heldSum()
  const { app, port } = await listenGrpcPlugin(t, [echoModel('echo', ['UINT8']), slow], { grpc: { limits: { sendTimeoutMs } } })
  const request = await echoRegion(t, app, 32 * MiB)
  const { stalled } = await holdCallsOpen(rawGrpc(t, port), request)
  const inFlight = grpcClient(t, port).call('ModelInfer', {
    model_name: 'slow',
    inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16] })),
    raw_input_contents: [Buffer.alloc(64, 1), Buffer.alloc(64, 2)]
  })
  await running
  const started = Date.now()
  const closing = app.close()
  setTimeout(release, 300)
  t.same((await inFlight).outputs.map(({ name }: { name: string }) => name), ['OUTPUT0', 'OUTPUT1'], 'the run in flight was answered')
  await bounded(closing, 'close() never ended', 20 * sendTimeoutMs)
  const took = Date.now() - started
  t.ok(took >= sendTimeoutMs - 200, `close() waited for the send timeout (${took} ms) for the call never sent whole, then cut it`)
  t.not((await stalled).status, status.OK, 'the stalled reader was cut')
  await eventually(() => app.systemSharedMemory.inFlight.heldBytes === 0, 'something was still held')
  t.pass('nothing is held')
})

t.test('close() ends when a client resets its connection while the listener waits for its call', async (t) => {
  const { model: slow, reached: running, release } = heldSum()
  t.teardown(release)
  const { app, port } = await listenGrpcPlugin(t, [slow])
  const socket = net.connect(port, '127.0.0.1')
  const session = http2.connect(`http://127.0.0.1:${port}`, { createConnection: () => socket })
  session.on('error', () => {})
  t.teardown(() => { session.destroy() })
  const call = session.request({ ':method': 'POST', ':path': '/inference.GRPCInferenceService/ModelInfer', 'content-type': 'application/grpc', te: 'trailers' })
  call.on('error', () => {})
  call.end(framed(encodedInfer({ model_name: 'slow', inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16] })), raw_input_contents: [Buffer.alloc(64), Buffer.alloc(64)] })))
  await running
  const closing = app.close()
  // Its socket's error (ECONNRESET) comes before its close: the stop waits for the close alone.
  socket.resetAndDestroy()
  release()
  await bounded(closing, 'close() never ended')
  t.pass('closed')
})

/** A ModelInfer of `sum` (INT32 [1, elements]) with raw contents: `elements` 4-byte values each. */
const sumRequest = (elements: number, value = 1) => encodedInfer({
  model_name: 'simple',
  inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, elements] })),
  raw_input_contents: [Buffer.alloc(4 * elements, value), Buffer.alloc(4 * elements, value)]
})

t.test('messages received: at most a quarter of the budget by default, compressed ones once inflated; gzip and deflate within it served', async (t) => {
  const { port } = await listenGrpcPlugin(t, [sumModel('simple', 'INT32', [1, -1])], { maxInFlightBytes: 16 * MiB })
  const grpc = rawGrpc(t, port)
  for (const compression of ['identity', 'gzip', 'deflate'] as const) {
    const served = await grpc.call('ModelInfer', framed(sumRequest(16 * 1024), compression), { compression })
    t.equal(served.status, status.OK, `${compression}: a 128 KiB message is served`)
    t.ok(served.received > 2 * 64 * 1024, 'with its answer')
  }
  const over = await grpc.call('ModelInfer', framed(sumRequest(MiB / 2 + 1)))
  t.equal(over.status, status.RESOURCE_EXHAUSTED, `a message past 4 MiB: ${over.details}`)
  t.match(over.details, /^Received message larger than max \(\d+ vs 4194304\)$/)
  const bomb = framed(sumRequest(2 * MiB, 0), 'gzip')
  t.ok(bomb.length < 64 * 1024, `16 MiB of zeros in ${bomb.length} bytes of gzip`)
  const inflated = await grpc.call('ModelInfer', bomb, { compression: 'gzip' })
  t.equal(inflated.status, status.RESOURCE_EXHAUSTED, 'inflated no further than the limit')
  t.equal(inflated.details, 'Received message that decompresses to a size larger than 4194304')
})

t.test('the message limit can be set; a message is charged before it is decoded, and bytes that are no message are INVALID_ARGUMENT', async (t) => {
  const { app, port } = await listenGrpcPlugin(t, [sumModel('simple', 'INT32', [1, -1])], { maxInFlightBytes: 64 * MiB, grpc: { maxMessageBytes: MiB } })
  const grpc = rawGrpc(t, port)
  const over = await grpc.call('ModelInfer', framed(sumRequest(MiB / 8 + 1)))
  t.match(over.details, /^Received message larger than max \(\d+ vs 1048576\)$/, 'maxMessageBytes: 1 MiB')
  const elsewhere = app.systemSharedMemory.inFlight.open()
  elsewhere.charge(64 * MiB - 256 * 1024)
  const busy = await grpc.call('ModelInfer', framed(sumRequest(MiB / 16)))
  t.equal(busy.status, status.RESOURCE_EXHAUSTED, `with the budget held elsewhere, a 512 KiB message is refused: ${busy.details}`)
  // Refused for the message itself and what its decoding takes: before it is decoded.
  t.match(busy.details, /^the server holds 66846720 bytes for requests in flight, of its limit of 67108864: this request needs 5\d{5} more/)
  elsewhere.release()
  t.equal((await grpc.call('ModelInfer', framed(sumRequest(MiB / 16)))).status, status.OK, 'and served once it is free')
  const malformed = await grpc.call('ModelInfer', framed(Buffer.from([0x0a, 0x05, 0x61])))
  t.equal(malformed.status, status.INVALID_ARGUMENT)
  t.equal(malformed.details, 'the ModelInferRequest message is not valid protobuf: a field runs past the end of its message')
  await eventually(() => app.systemSharedMemory.inFlight.heldBytes === 0, 'a call kept what it was charged')
  t.pass('nothing held once they are answered')
})

t.test('a call cancelled, or whose connection went, while its model runs: what it held is given back, and no one is dropped for it', async (t) => {
  const releases: Array<() => void> = []
  let started = () => {}
  const slow: TestModel = {
    signature: { ...sumModel().signature, name: 'slow' },
    async execute (infer) {
      started()
      await new Promise<void>((resolve) => { releases.push(resolve) })
      return sumModel().execute(infer)
    }
  }
  const { app, port } = await listenGrpcPlugin(t, [slow], { grpc: { limits: { sendTimeoutMs: 500 } } })
  const request = {
    model_name: 'slow',
    inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16] })),
    raw_input_contents: [Buffer.alloc(64, 1), Buffer.alloc(64, 2)]
  }
  const client = grpcClient(t, port)
  const running = () => new Promise<void>((resolve) => { started = resolve })

  let run = running()
  const cancelled = client.start('ModelInfer', request)
  await run
  t.ok(app.systemSharedMemory.inFlight.heldBytes > 0, 'a call holds its message while its model runs')
  cancelled.cancel()
  await t.rejects(cancelled.outcome, { code: status.CANCELLED }, 'the client cancels it')

  run = running()
  const raw = rawGrpc(t, port)
  const gone = raw.call('ModelInfer', framed(encodedInfer(request)))
  await run
  raw.session.destroy()
  t.ok((await gone).ended !== undefined, 'another client closes its connection')

  for (const release of releases) release()
  await eventually(() => app.systemSharedMemory.inFlight.heldBytes === 0, 'a call that left kept what it held')
  t.pass('the models finished, and nothing is held')
  await new Promise<void>((resolve) => setTimeout(resolve, 1000))
  t.same(await client.call('ServerLive'), { live: true }, 'the client that cancelled still has its connection, a send timeout later')
})
