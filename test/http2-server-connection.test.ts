/**
 * A connection of the package's own HTTP/2 server, against nghttp2 (node:http2's client) and a
 * raw client: requests read and answered through both sides' flow control, a paused stream held
 * to its window, a unary answer's frames in one write, and every protocol error a GOAWAY or an
 * RST_STREAM with RFC 9113's code, the connection's other streams and state untouched where the
 * error is a stream's.
 */
import { once } from 'node:events'
import http2 from 'node:http2'
import t from 'tap'
import { HeaderBlockEncoder } from '../lib/http2/header-block-encoder'
import { ErrorCode, FrameFlag, FrameType, Setting } from '../lib/http2/protocol'
import type { Http2ServerStream } from '../lib/http2/server-stream'
import { http2Server, rawHttp2Client, type ReadFrame, setting, word } from './helpers/http2-peers'
import { bounded } from './helpers/sync'

const REQUEST = [':method', 'POST', ':scheme', 'http', ':path', '/echo', 'content-type', 'application/grpc']
const block = (fields: string[] = REQUEST) => new HeaderBlockEncoder().encode(fields)
const isGoaway = (read: ReadFrame) => read.type === FrameType.GOAWAY
const goawayCode = (read: ReadFrame | undefined) => read?.payload.readUInt32BE(4)

/** Answers each request with its body's length as text and trailers, once its client has sent all. */
function echoLength (stream: Http2ServerStream, answerBytes = 0): void {
  let received = 0
  stream.onData = (chunk) => { received += chunk.length }
  stream.onEnd = () => {
    stream.respond([':status', '200', 'content-type', 'application/grpc'])
    stream.write(Buffer.from(String(received)))
    if (answerBytes > 0) stream.write(Buffer.alloc(answerBytes, 7))
    stream.end(['grpc-status', '0'])
  }
}

t.test('nghttp2\'s requests read and answered, a MiB each way through both sides\' windows', async (t) => {
  const closes: number[] = []
  const server = await http2Server(t, (stream) => {
    echoLength(stream, stream.headers['x-answer'] === undefined ? 0 : Number(stream.headers['x-answer']))
    stream.onClose = (code) => closes.push(code)
  })
  const session = http2.connect(server.url)
  t.teardown(() => session.destroy())
  for (const [sent, answered] of [[0, 0], [10, 0], [1_048_576, 0], [0, 1_048_576], [3_000_000, 2_000_000]]) {
    const request = session.request({ ':method': 'POST', ':path': '/echo', 'x-answer': String(answered) })
    const chunks: Buffer[] = []
    let trailers: http2.IncomingHttpHeaders | undefined
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('trailers', (received) => { trailers = received })
    request.end(Buffer.alloc(sent, 1))
    const [headers] = await once(request, 'response') as [http2.IncomingHttpHeaders]
    await once(request, 'end')
    const body = Buffer.concat(chunks)
    t.equal(headers[':status'], 200)
    t.equal(body.subarray(0, String(sent).length).toString(), String(sent), `${sent} bytes read`)
    t.equal(body.length, String(sent).length + answered, `${answered} bytes answered`)
    t.equal(trailers?.['grpc-status'], '0')
  }
  t.same(closes, [0, 0, 0, 0, 0], 'every stream closed without an error')
  t.equal(server.connections[0].openStreams, 0)
})

t.test('a paused stream holds its client to the window it granted, and reads on once resumed', async (t) => {
  let received = 0
  let resumed = false
  let heldToWindow = true
  const server = await http2Server(t, (stream) => {
    stream.pause()
    stream.onData = (chunk) => {
      received += chunk.length
      if (!resumed && received > 65_535) heldToWindow = false
      // All the window allowed has come: the client can send no more until it is granted more.
      if (received === 65_535) {
        resumed = stream.paused
        stream.resume()
        resumed &&= !stream.paused
      }
    }
    stream.onEnd = () => {
      stream.respond([':status', '200'])
      stream.end()
    }
  })
  const session = http2.connect(server.url)
  t.teardown(() => session.destroy())
  const request = session.request({ ':method': 'POST', ':path': '/upload' })
  request.end(Buffer.alloc(300_000))
  request.resume()
  await bounded(once(request, 'end'), 'the answer')
  t.ok(resumed, 'the whole window came while paused (as `paused` said), then resumed')
  t.ok(heldToWindow, 'and no more')
  t.equal(received, 300_000, 'all came once resumed')
})

const HEADERS_END = FrameFlag.END_HEADERS | FrameFlag.END_STREAM
t.test('shutdown: GOAWAY naming the last stream begun, a later one refused, the open one answered, then the end', async (t) => {
  const closes: number[] = []
  const server = await http2Server(t, (stream) => {
    echoLength(stream)
    stream.onClose = (code) => closes.push(code)
  })
  const client = await rawHttp2Client(t, server.port)
  client.preface()
  client.send(FrameType.HEADERS, FrameFlag.END_HEADERS, 1, block())
  client.send(FrameType.PING, 0, 0, Buffer.alloc(8))
  await client.next((read) => read.type === FrameType.PING)
  const connection = server.connections[0]
  connection.shutdown()
  connection.shutdown()
  const goaway = await client.next(isGoaway)
  t.same([goaway?.payload.readUInt32BE(0), goawayCode(goaway)], [1, ErrorCode.NO_ERROR], 'GOAWAY names stream 1, without an error')
  client.send(FrameType.HEADERS, HEADERS_END, 3, block())
  const refused = await client.next((read) => read.type === FrameType.RST_STREAM)
  t.same([refused?.streamId, refused?.payload.readUInt32BE(0)], [3, ErrorCode.REFUSED_STREAM], 'a stream begun after it is refused')
  t.equal(connection.openStreams, 1, 'the open one goes on')
  client.send(FrameType.DATA, FrameFlag.END_STREAM, 1, Buffer.alloc(10))
  const answered: number[] = []
  for (let read = await client.next(); read !== undefined; read = await client.next()) answered.push(read.type)
  t.same(answered, [FrameType.HEADERS, FrameType.DATA, FrameType.HEADERS, FrameType.GOAWAY], 'its answer, then GOAWAY again and the end')
  t.same(closes, [ErrorCode.NO_ERROR], 'it closed without an error')

  const idle = await rawHttp2Client(t, server.port)
  idle.preface()
  idle.send(FrameType.PING, 0, 0, Buffer.alloc(8))
  await idle.next((read) => read.type === FrameType.PING)
  server.connections[1].shutdown()
  t.equal(goawayCode(await idle.next(isGoaway)), ErrorCode.NO_ERROR, 'an idle connection: GOAWAY')
  t.equal(await idle.next(), undefined, 'and its end at once')
})

t.test('shutdown with a large answer queued for a client that reads it late: the whole answer, then the end', async (t) => {
  const answerBytes = 64 * 1024 * 1024
  const closed = signal()
  const server = await http2Server(t, (stream) => {
    echoLength(stream, answerBytes)
    stream.onClose = closed.resolve
  }, { maxQueuedBytes: 65_536 })
  const client = await rawHttp2Client(t, server.port)
  client.preface()
  client.send(FrameType.SETTINGS, 0, 0, setting(Setting.INITIAL_WINDOW_SIZE, 2 ** 31 - 1))
  client.send(FrameType.WINDOW_UPDATE, 0, 0, word(2 ** 31 - 1 - 65_535))
  client.send(FrameType.HEADERS, FrameFlag.END_HEADERS, 1, block())
  client.send(FrameType.PING, 0, 0, Buffer.alloc(8))
  await client.next((read) => read.type === FrameType.PING)
  server.connections[0].shutdown()
  client.socket.pause()
  client.send(FrameType.DATA, FrameFlag.END_STREAM, 1, Buffer.alloc(10))
  // The stream is over once its answer is handed to the socket: far more than the option waits there.
  await bounded(closed.promise, 'the stream\'s close')
  client.socket.resume()
  let dataBytes = 0
  const types: number[] = []
  for (let read = await client.next(); read !== undefined; read = await client.next()) {
    if (read.type === FrameType.DATA) dataBytes += read.payload.length
    else types.push(read.type)
  }
  t.equal(dataBytes, 2 + answerBytes, 'the whole answer')
  t.same(types, [FrameType.GOAWAY, FrameType.HEADERS, FrameType.HEADERS, FrameType.GOAWAY], 'its headers and trailers, GOAWAY again, and the end')
})

/** A promise and its resolver. */
function signal () {
  let resolve = () => {}
  const promise = new Promise<void>((_resolve) => { resolve = _resolve })
  return { promise, resolve }
}

t.test('a client\'s reset, its connection\'s end and the server\'s close reach the streams', async (t) => {
  const closes: number[] = []
  const opened = [signal(), signal(), signal()]
  const closed = [signal(), signal(), signal()]
  let streams = 0
  const server = await http2Server(t, (stream) => {
    opened[streams++].resolve()
    stream.onClose = (code) => {
      closes.push(code)
      closed[closes.length - 1].resolve()
    }
  })
  const session = http2.connect(server.url)
  const reset = session.request({ ':method': 'POST', ':path': '/a' })
  await bounded(opened[0].promise, 'the first stream')
  reset.close(ErrorCode.CANCEL)
  await bounded(closed[0].promise, 'the reset')
  t.same(closes, [ErrorCode.CANCEL], 'the reset stream closed with the client\'s code')
  session.request({ ':method': 'POST', ':path': '/b' })
  await bounded(opened[1].promise, 'the second stream')
  session.destroy()
  await bounded(closed[1].promise, 'the connection\'s end')
  t.same(closes, [ErrorCode.CANCEL, ErrorCode.CANCEL], 'the open one closed with its connection')

  const client = await rawHttp2Client(t, server.port)
  client.preface()
  client.send(FrameType.HEADERS, FrameFlag.END_HEADERS, 1, block())
  await bounded(opened[2].promise, 'the raw client\'s stream')
  server.connections[1].close()
  const goaway = await client.next(isGoaway)
  t.equal(goaway?.payload.readUInt32BE(0), 1, 'GOAWAY names the last stream begun')
  t.equal(goawayCode(goaway), ErrorCode.NO_ERROR)
  t.equal(closes[2], ErrorCode.CANCEL, 'its open stream is closed')
  client.send(FrameType.PING, 0, 0, Buffer.alloc(8))
  server.connections[1].resetStream(1, ErrorCode.CANCEL)
  t.equal(await client.next(), undefined, 'the connection ends: nothing more is read or sent')
  server.connections[1].close()
})

type Sent = [type: number, flags: number, streamId: number, payload?: Buffer]
const ping = Buffer.alloc(8, 1)

/** Connection errors: what the raw client sends after its preface and SETTINGS, and the code of
 * the GOAWAY that ends the connection. */
const connectionErrors: Array<[string, Sent[], number]> = [
  ['HEADERS on stream 0', [[FrameType.HEADERS, HEADERS_END, 0, block()]], ErrorCode.PROTOCOL_ERROR],
  ['HEADERS on an even stream', [[FrameType.HEADERS, HEADERS_END, 2, block()]], ErrorCode.PROTOCOL_ERROR],
  ['a header block interrupted', [[FrameType.HEADERS, 0, 1, block()], [FrameType.PING, 0, 0, ping]], ErrorCode.PROTOCOL_ERROR],
  ['CONTINUATION without HEADERS', [[FrameType.CONTINUATION, FrameFlag.END_HEADERS, 1, block()]], ErrorCode.PROTOCOL_ERROR],
  ['CONTINUATION of another stream', [[FrameType.HEADERS, 0, 1, block()], [FrameType.CONTINUATION, FrameFlag.END_HEADERS, 3, block()]], ErrorCode.PROTOCOL_ERROR],
  ['a header block past the limit over CONTINUATION frames',
    [[FrameType.HEADERS, 0, 1, Buffer.alloc(10_000, 0x82)], [FrameType.CONTINUATION, 0, 1, Buffer.alloc(10_000, 0x82)]], ErrorCode.ENHANCE_YOUR_CALM],
  ['a header block HPACK cannot decode', [[FrameType.HEADERS, HEADERS_END, 1, Buffer.from([0x80])]], ErrorCode.COMPRESSION_ERROR],
  ['HEADERS again on an open stream, not ending it',
    [[FrameType.HEADERS, FrameFlag.END_HEADERS, 1, block()], [FrameType.HEADERS, FrameFlag.END_HEADERS, 1, block()]], ErrorCode.PROTOCOL_ERROR],
  ['padding longer than its frame', [[FrameType.HEADERS, HEADERS_END | FrameFlag.PADDED, 1, Buffer.from([200, 0x82])]], ErrorCode.PROTOCOL_ERROR],
  ['DATA on stream 0', [[FrameType.DATA, 0, 0, Buffer.alloc(1)]], ErrorCode.PROTOCOL_ERROR],
  ['DATA on an idle stream', [[FrameType.DATA, 0, 1, Buffer.alloc(1)]], ErrorCode.PROTOCOL_ERROR],
  ['PRIORITY on stream 0', [[FrameType.PRIORITY, 0, 0, Buffer.alloc(5)]], ErrorCode.PROTOCOL_ERROR],
  ['RST_STREAM on stream 0', [[FrameType.RST_STREAM, 0, 0, word(8)]], ErrorCode.PROTOCOL_ERROR],
  ['RST_STREAM not of 4 bytes', [[FrameType.HEADERS, FrameFlag.END_HEADERS, 1, block()], [FrameType.RST_STREAM, 0, 1, Buffer.alloc(3)]], ErrorCode.FRAME_SIZE_ERROR],
  ['RST_STREAM on an idle stream', [[FrameType.RST_STREAM, 0, 5, word(8)]], ErrorCode.PROTOCOL_ERROR],
  ['SETTINGS on a stream', [[FrameType.SETTINGS, 0, 1]], ErrorCode.PROTOCOL_ERROR],
  ['a SETTINGS acknowledgement with a payload', [[FrameType.SETTINGS, FrameFlag.ACK, 0, Buffer.alloc(6)]], ErrorCode.FRAME_SIZE_ERROR],
  ['SETTINGS not in 6-byte settings', [[FrameType.SETTINGS, 0, 0, Buffer.alloc(5)]], ErrorCode.FRAME_SIZE_ERROR],
  ['SETTINGS_ENABLE_PUSH of 2', [[FrameType.SETTINGS, 0, 0, setting(Setting.ENABLE_PUSH, 2)]], ErrorCode.PROTOCOL_ERROR],
  ['SETTINGS_MAX_FRAME_SIZE below 16 KiB', [[FrameType.SETTINGS, 0, 0, setting(Setting.MAX_FRAME_SIZE, 16_383)]], ErrorCode.PROTOCOL_ERROR],
  ['SETTINGS_MAX_FRAME_SIZE of 2^24', [[FrameType.SETTINGS, 0, 0, setting(Setting.MAX_FRAME_SIZE, 2 ** 24)]], ErrorCode.PROTOCOL_ERROR],
  ['SETTINGS_INITIAL_WINDOW_SIZE of 2^31', [[FrameType.SETTINGS, 0, 0, setting(Setting.INITIAL_WINDOW_SIZE, 2 ** 31)]], ErrorCode.FLOW_CONTROL_ERROR],
  ['an open stream\'s window past 2^31-1',
    [[FrameType.HEADERS, FrameFlag.END_HEADERS, 1, block()], [FrameType.WINDOW_UPDATE, 0, 1, word(2 ** 31 - 65_536)],
      [FrameType.SETTINGS, 0, 0, setting(Setting.INITIAL_WINDOW_SIZE, 65_536)]], ErrorCode.FLOW_CONTROL_ERROR],
  ['PUSH_PROMISE from a client', [[FrameType.PUSH_PROMISE, FrameFlag.END_HEADERS, 1, Buffer.alloc(5)]], ErrorCode.PROTOCOL_ERROR],
  ['PING on a stream', [[FrameType.PING, 0, 1, ping]], ErrorCode.PROTOCOL_ERROR],
  ['PING not of 8 bytes', [[FrameType.PING, 0, 0, Buffer.alloc(7)]], ErrorCode.FRAME_SIZE_ERROR],
  ['GOAWAY on a stream', [[FrameType.GOAWAY, 0, 1, Buffer.alloc(8)]], ErrorCode.PROTOCOL_ERROR],
  ['WINDOW_UPDATE not of 4 bytes', [[FrameType.WINDOW_UPDATE, 0, 0, Buffer.alloc(5)]], ErrorCode.FRAME_SIZE_ERROR],
  ['WINDOW_UPDATE of 0 on the connection', [[FrameType.WINDOW_UPDATE, 0, 0, word(0)]], ErrorCode.PROTOCOL_ERROR],
  ['the connection\'s window past 2^31-1', [[FrameType.WINDOW_UPDATE, 0, 0, word(2 ** 31 - 65_535)]], ErrorCode.FLOW_CONTROL_ERROR],
  ['WINDOW_UPDATE on an idle stream', [[FrameType.WINDOW_UPDATE, 0, 1, word(1)]], ErrorCode.PROTOCOL_ERROR],
  ['HEADERS after the stream\'s end', [[FrameType.HEADERS, HEADERS_END, 1, block()], [FrameType.HEADERS, HEADERS_END, 1, block()]], ErrorCode.PROTOCOL_ERROR]
]

for (const [what, frames, code] of connectionErrors) {
  t.test(`${what}: GOAWAY with its code, and the connection ends`, async (t) => {
    const server = await http2Server(t, () => {})
    const client = await rawHttp2Client(t, server.port)
    client.preface()
    for (const [type, flags, streamId, payload] of frames) client.send(type, flags, streamId, payload)
    t.equal(goawayCode(await client.next(isGoaway)), code)
    t.equal(await client.next(() => true), undefined, 'nothing follows')
  })
}

t.test('a frame before SETTINGS, and a frame above 16 KiB: GOAWAY', async (t) => {
  const server = await http2Server(t, () => {})
  const early = await rawHttp2Client(t, server.port)
  early.socket.write(Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'))
  early.send(FrameType.PING, 0, 0, ping)
  t.equal(goawayCode(await early.next(isGoaway)), ErrorCode.PROTOCOL_ERROR)
  const large = await rawHttp2Client(t, server.port)
  large.preface()
  large.send(FrameType.HEADERS, FrameFlag.END_HEADERS, 1, block())
  large.send(FrameType.DATA, 0, 1, Buffer.alloc(16_385))
  t.equal(goawayCode(await large.next(isGoaway)), ErrorCode.FRAME_SIZE_ERROR)
})
