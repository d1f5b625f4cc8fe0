/**
 * The listener hands grpc-js the calls it does not serve itself on its own HTTP/2 streams; where
 * grpc-js cannot take them so (a grpc-js without the server method the listener calls), they are
 * relayed to it over an in-process HTTP/2 connection (a grpc-js whose stream handler has a shape
 * the listener does not know). Both ways, over real connections: unary
 * calls, a stream both ways, answers and requests larger than every window (each side's flow
 * control holding the other), a client's reset, and the peer rule, which a client cannot fool by
 * naming another connection in the relay's header.
 */
import http2 from 'node:http2'
import { Server, status } from '@grpc/grpc-js'
import t, { type Test } from 'tap'
import { inferenceService } from '../lib/grpc'
import { RELAYED_CONNECTION_HEADER } from '../lib/grpc/grpc-js-relay'
import { fieldsOf } from '../lib/grpc/grpc-js-stream'
import { grpcClient, listenGrpcPlugin } from './helpers/grpc'
import { echoModel, heldSum, makeMappedObject, sumModel } from './helpers/kserve'
import { framed, rawGrpc, rawStream } from './helpers/raw-grpc'
import { bounded, eventually } from './helpers/sync'

const MiB = 1024 ** 2
const service = inferenceService().service
const encoded = (method: 'ModelInfer', request: object): Buffer => (service[method].requestSerialize as (value: object) => Buffer)(request)
const sumRequest = (model = 'simple') => encoded('ModelInfer', {
  model_name: model,
  inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16] })),
  raw_input_contents: [Buffer.alloc(64, 1), Buffer.alloc(64, 2)]
})
/** echo's answer of `bytes`, from a request that carries them: larger than every window both ways. */
const echoRequest = (bytes: number) => encoded('ModelInfer', {
  model_name: 'echo',
  inputs: [{ name: 'IN_UINT8', datatype: 'UINT8', shape: [bytes] }],
  raw_input_contents: [Buffer.alloc(bytes, 7)]
})

/** Until the test ends, grpc-js's stream handler has a shape the listener does not know (as another
 * grpc-js's might): the listener relays instead. */
function withoutStreamHandler (t: Test): void {
  const prototype = Server.prototype as unknown as { _streamHandler: (...args: unknown[]) => void }
  const own = prototype._streamHandler
  prototype._streamHandler = function (this: Server, ...args: unknown[]) { own.apply(this, args) }
  t.teardown(() => { prototype._streamHandler = own })
}

for (const how of ['handed to grpc-js', 'relayed to grpc-js']) {
  t.test(`${how}: unary calls, a stream, messages past every window each way, and the peer rule`, async (t) => {
    if (how === 'relayed to grpc-js') withoutStreamHandler(t)
    const { app, port } = await listenGrpcPlugin(t, [sumModel('simple', 'INT32', [1, -1]), echoModel('echo', ['UINT8'])])
    const client = grpcClient(t, port)
    t.same(await client.call('ServerLive'), { live: true }, 'a unary call')

    const raw = rawGrpc(t, port)
    const stream = rawStream(raw, 'ModelStreamInfer')
    for (let index = 0; index < 3; index++) stream.write(framed(sumRequest()))
    await bounded(stream.until(3), 'the stream\'s answers')
    t.equal((await stream.end()).status, status.OK, 'a stream: three answers, then OK')

    // A deadline keeps ModelInfer on grpc-js: 4 MiB in, 4 MiB out.
    const echoed = await raw.call('ModelInfer', framed(echoRequest(4 * MiB)), { metadata: { 'grpc-timeout': '100S' } })
    t.same([echoed.status, echoed.received > 4 * MiB], [status.OK, true], '4 MiB each way, through both sides\' windows')

    // The relay names the connection in its header: a client's own is replaced, never believed.
    const object = makeMappedObject(t, 64, 'relay')
    const register = { name: 'forged', key: object.key, offset: 0, byte_size: 64 }
    t.same(await client.call('SystemSharedMemoryRegister', register, { [RELAYED_CONNECTION_HEADER]: 'unix:/elsewhere 1 undefined undefined' }), {},
      'registered: judged by its own connection')
    await client.call('SystemSharedMemoryUnregister', { name: 'forged' })
    t.equal(app.systemSharedMemory.inFlight.heldBytes, 0, 'nothing held')
  })

  t.test(`${how}: a client's reset reaches the call, and what it held is let go while its model runs`, async (t) => {
    if (how === 'relayed to grpc-js') withoutStreamHandler(t)
    const { model, reached, release } = heldSum('slow')
    t.teardown(release)
    const { app, port } = await listenGrpcPlugin(t, [model])
    const session = http2.connect(`http://127.0.0.1:${port}`)
    t.teardown(() => { session.destroy() })
    // A deadline keeps ModelInfer on grpc-js.
    const call = session.request({
      ':method': 'POST', ':path': '/inference.GRPCInferenceService/ModelInfer', 'content-type': 'application/grpc', te: 'trailers', 'grpc-timeout': '100S'
    })
    call.on('error', () => {})
    call.end(framed(sumRequest('slow')))
    await bounded(reached, 'the call never reached its model')
    t.ok(app.systemSharedMemory.inFlight.heldBytes > 0, 'the running call holds its message')
    call.close(http2.constants.NGHTTP2_CANCEL)
    await eventually(() => app.systemSharedMemory.inFlight.heldBytes === 0, 'the reset never reached the call')
    t.pass('let go, the model still running')
  })
}

t.test('headers as grpc-js gives them, in the order HTTP/2 asks: pseudo-header fields first, a list as repeated fields', async (t) => {
  t.same(fieldsOf({ 'grpc-status': 0, ':status': 200, 'x-list': ['a', 'b'], 'x-none': undefined }),
    [':status', '200', 'grpc-status', '0', 'x-list', 'a', 'x-list', 'b'])
})
