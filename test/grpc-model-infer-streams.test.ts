/**
 * The plugin's listener serves unary ModelInfer on the call's HTTP/2 stream itself, without grpc-js:
 * over real connections, a client cannot tell it from grpc-js (the same headers, message, trailers
 * and texts as a grpc-js server with `modelInferHandler` sends for the same call), the message is
 * read however its bytes are split into frames, and what a unary call must not be (no message,
 * two, a compressed one without its encoding, an answer past the send limit) ends with its status.
 * Calls it does not take (compressed, with a deadline, not gRPC) are relayed to grpc-js.
 */
import http2 from 'node:http2'
import { once } from 'node:events'
import { type AddressInfo, createServer } from 'node:net'
import { status } from '@grpc/grpc-js'
import t, { type Test } from 'tap'
import { inferenceService } from '../lib/grpc'
import { MODEL_INFER_PATH, modelInferStreams } from '../lib/grpc/model-infer-streams'
import { Http2ServerConnection } from '../lib/http2/server-connection'
import { Registry } from '../lib/index'
import { RestrictedFeatures } from '../lib/util/restricted-features'
import { listenGrpcPlugin, modelTable, startHostServer } from './helpers/grpc'
import { sumModel } from './helpers/kserve'
import { framed } from './helpers/raw-grpc'

const service = inferenceService().service
const encodedInfer = (request: object): Buffer => (service.ModelInfer.requestSerialize as (value: object) => Buffer)(request)

/** `simple` with `elements` ones in each input, its inputs' bytes in the message. */
const sumOf = (elements: number) => encodedInfer({
  model_name: 'simple',
  inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, elements] })),
  raw_input_contents: [Buffer.alloc(4 * elements, 1), Buffer.alloc(4 * elements, 1)]
})
const sumRequest = sumOf(16)

interface Exchange {
  headers: http2.IncomingHttpHeaders
  body: Buffer
  trailers?: http2.IncomingHttpHeaders
}

/** One call to `path` on 127.0.0.1:`port`, `pieces` written one by one, each reaching the server
 * before the next is sent (a PING's answer comes once the server read what was sent before it). */
async function exchange (t: Test, port: number, pieces: Buffer[], headers: http2.OutgoingHttpHeaders = {}, path = MODEL_INFER_PATH): Promise<Exchange> {
  const session = http2.connect(`http://127.0.0.1:${port}`)
  t.teardown(() => { session.destroy() })
  const stream = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', ...headers })
  const chunks: Buffer[] = []
  stream.on('data', (chunk: Buffer) => chunks.push(chunk))
  const [responseHeaders] = await Promise.all([
    once(stream, 'response').then(([received]) => received as http2.IncomingHttpHeaders),
    (async () => {
      for (const piece of pieces) {
        // Handed to the session first: a PING would go ahead of DATA still queued.
        await new Promise((resolve) => stream.write(piece, resolve))
        await new Promise((resolve) => session.ping(resolve))
      }
      stream.end()
    })()
  ])
  let trailers: http2.IncomingHttpHeaders | undefined
  stream.on('trailers', (received) => { trailers = received })
  await once(stream, 'close')
  return { headers: withoutDate(responseHeaders), body: Buffer.concat(chunks), trailers }
}

const withoutDate = ({ date, ...headers }: http2.IncomingHttpHeaders) => headers

/** What a client sees of the call, the same whoever answers: its headers, message and trailers. */
const seen = ({ headers, body, trailers }: Exchange) => ({ headers, body: body.toString('hex'), trailers: trailers === undefined ? undefined : withoutDate(trailers) })

/** The plugin's listener and a grpc-js server (`modelInferHandler`), both serving `simple`. */
async function bothServers (t: Test) {
  const { app, port } = await listenGrpcPlugin(t, [sumModel('simple', 'INT32', [1, -1])])
  const host = await startHostServer(t, app.systemSharedMemory, [sumModel('simple', 'INT32', [1, -1])])
  return { listener: port, grpcJs: host.port }
}

t.test('a ModelInfer call is answered as grpc-js answers it: headers, message and trailers, and every error status', async (t) => {
  const { listener, grpcJs } = await bothServers(t)
  const frame = framed(sumRequest)
  const cases: Array<[string, Buffer[], http2.OutgoingHttpHeaders?]> = [
    ['served', [frame]],
    ['its frame split into three DATA frames, the length prefix split too', [frame.subarray(0, 3), frame.subarray(3, 40), frame.subarray(40)]],
    ['no message', []],
    ['two messages', [Buffer.concat([frame, frame])]],
    ['a second message in a DATA frame of its own', [frame, frame]],
    ['an empty message: a request for no model', [framed(Buffer.alloc(0))]],
    ['an unknown model', [framed(encodedInfer({ model_name: 'nothing' }))]],
    ['explicitly uncompressed', [frame], { 'grpc-encoding': 'identity' }]
  ]
  for (const [what, pieces, headers] of cases) {
    const direct = seen(await exchange(t, listener, pieces, headers))
    t.same(direct, seen(await exchange(t, grpcJs, pieces, headers)), `${what}: as grpc-js answers it`)
    if (what === 'served') {
      t.equal(direct.trailers?.['grpc-status'], '0')
      t.ok(service.ModelInfer.responseDeserialize(Buffer.from(direct.body, 'hex').subarray(5)), 'a ModelInferResponse')
    }
  }
  // The listener's own grpc-js path (a call with a deadline takes it) measures a message first,
  // as the direct one does: bytes that are no message are the client's error there.
  const malformed = [framed(Buffer.from([0x0a, 0x05, 0x61]))]
  const refused = seen(await exchange(t, listener, malformed))
  t.same(refused, seen(await exchange(t, listener, malformed, { 'grpc-timeout': '100S' })), 'bytes that are no message: as the listener\'s grpc-js path answers them')
  t.equal(decodeURI(String(refused.headers['grpc-message'])), 'the ModelInferRequest message is not valid protobuf: a field runs past the end of its message')
  const [none, two] = [await exchange(t, listener, []), await exchange(t, listener, [Buffer.concat([frame, frame])])]
  t.same([none.headers['grpc-status'], decodeURI(String(none.headers['grpc-message']))],
    [String(status.UNIMPLEMENTED), 'Received no request message for server streaming method /inference.GRPCInferenceService/ModelInfer'])
  t.same([two.headers['grpc-status'], decodeURI(String(two.headers['grpc-message']))],
    [String(status.UNIMPLEMENTED), 'Received a second request message for server streaming method /inference.GRPCInferenceService/ModelInfer'])
})

t.test('a compressed message without a grpc-encoding is INTERNAL; calls it does not take are grpc-js\'s', async (t) => {
  const { listener } = await bothServers(t)
  const flagged = framed(sumRequest)
  flagged[0] = 1
  const internal = await exchange(t, listener, [flagged])
  t.same([internal.headers['grpc-status'], decodeURI(String(internal.headers['grpc-message']))],
    [String(status.INTERNAL), 'Received a compressed message without a "grpc-encoding" header'])

  const deadline = await exchange(t, listener, [framed(sumRequest)], { 'grpc-timeout': '10S' })
  t.equal(deadline.trailers?.['grpc-status'], '0', 'with a deadline: served by grpc-js')
  const gzip = await exchange(t, listener, [framed(sumRequest, 'gzip')], { 'grpc-encoding': 'gzip' })
  t.equal(gzip.trailers?.['grpc-status'], '0', 'compressed: served by grpc-js')
  const json = await exchange(t, listener, [framed(sumRequest)], { 'content-type': 'application/json' })
  t.equal(json.headers[':status'], 415, 'not gRPC: grpc-js\'s 415')
  const get = await exchange(t, listener, [], { ':method': 'GET' })
  t.equal(get.headers['grpc-status'], String(status.UNIMPLEMENTED), 'a GET: grpc-js\'s answer to a unary call without a message')
  const other = await exchange(t, listener, [framed(Buffer.alloc(0))], {}, '/inference.GRPCInferenceService/ServerLive')
  t.equal(other.trailers?.['grpc-status'], '0', 'other RPCs: grpc-js\'s')
})

t.test('restricted inference: refused without its key, as grpc-js\'s handler refuses it; a -bin key is binary, never a match', async (t) => {
  for (const header of ['infer-key', 'infer-key-bin']) {
    const { port } = await listenGrpcPlugin(t, [sumModel('simple', 'INT32', [1, -1])],
      { grpc: { restrictedProtocols: [{ categories: ['inference'], header, value: 'secret' }] } })
    const refused = await exchange(t, port, [framed(sumRequest)])
    t.same([refused.headers['grpc-status'], decodeURI(String(refused.headers['grpc-message']))],
      [String(status.UNAVAILABLE), `This protocol is restricted, expecting header '${header}'`], `${header}: without it`)
    const keyed = await exchange(t, port, [framed(sumRequest)], { [header]: header.endsWith('-bin') ? Buffer.from('secret').toString('base64') : 'secret' })
    t.equal(keyed.trailers?.['grpc-status'] ?? keyed.headers['grpc-status'], header.endsWith('-bin') ? String(status.UNAVAILABLE) : '0', `${header}: with it`)
  }
})

t.test('an answer past the send limit is RESOURCE_EXHAUSTED, as is a message past the receive limit', async (t) => {
  const registry = new Registry()
  t.teardown(() => registry.close())
  const take = modelInferStreams({
    registry,
    models: modelTable([sumModel('simple', 'INT32', [1, -1])]),
    maxMessageBytes: 1024,
    maxSendMessageBytes: 512,
    restrictions: new RestrictedFeatures([], 'grpc', 'test')
  })
  const listener = createServer((socket) => new Http2ServerConnection(socket, (stream) => {
    if (!take(stream)) t.fail('every call here is a ModelInfer')
  }))
  listener.listen(0, '127.0.0.1')
  await once(listener, 'listening')
  t.teardown(() => { listener.close() })
  const port = (listener.address() as AddressInfo).port
  t.equal((await exchange(t, port, [framed(sumOf(16))])).trailers?.['grpc-status'], '0', 'an answer of 200 bytes or so: sent')
  const big = await exchange(t, port, [framed(sumOf(64))])
  t.equal(big.headers['grpc-status'], String(status.RESOURCE_EXHAUSTED), 'one of 600 or so: refused')
  t.match(decodeURI(String(big.headers['grpc-message'])), /^Sent message larger than max \(\d+ vs\. 512\)$/, 'grpc-js\'s text')
  t.equal(registry.inFlight.heldBytes, 0, 'nothing held')
  const tooLarge = await exchange(t, port, [framed(Buffer.alloc(2048))])
  t.same([tooLarge.headers['grpc-status'], decodeURI(String(tooLarge.headers['grpc-message']))],
    [String(status.RESOURCE_EXHAUSTED), 'Received message larger than max (2048 vs 1024)'])
})
