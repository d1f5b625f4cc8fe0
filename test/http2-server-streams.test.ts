/**
 * Streams of the package's own HTTP/2 server, driven frame by frame by a raw client: a stream's
 * errors answered with RST_STREAM and RFC 9113's code while the connection goes on (a PING still
 * answered), frames that are to be ignored ignored, and what a stream sends framed to the peer's
 * settings: CONTINUATION past its frame size, DATA held to its windows and sent once they open.
 */
import { once } from 'node:events'
import t, { type Test } from 'tap'
import { HeaderBlockDecoder } from '../lib/http2/header-block-decoder'
import { HeaderBlockEncoder } from '../lib/http2/header-block-encoder'
import { frame } from '../lib/http2/frame-writer'
import { ErrorCode, FrameFlag, FrameType, Setting } from '../lib/http2/protocol'
import type { Http2ServerOptions } from '../lib/http2/server-connection'
import type { Http2ServerStream } from '../lib/http2/server-stream'
import { http2Server, rawHttp2Client, type ReadFrame, setting, word } from './helpers/http2-peers'
import { bounded } from './helpers/sync'

const REQUEST = [':method', 'POST', ':scheme', 'http', ':path', '/echo']
const block = (fields: string[] = REQUEST) => new HeaderBlockEncoder().encode(fields)
const HEADERS_END = FrameFlag.END_HEADERS | FrameFlag.END_STREAM
const ping = Buffer.alloc(8, 9)
const isPingAck = (read: ReadFrame) => read.type === FrameType.PING && (read.flags & FrameFlag.ACK) !== 0

type Sent = [type: number, flags: number, streamId: number, payload?: Buffer]

async function connected (t: Test, onStream: (stream: Http2ServerStream) => void = () => {}, options: Http2ServerOptions = {}) {
  const server = await http2Server(t, onStream, options)
  const client = await rawHttp2Client(t, server.port)
  client.preface()
  const send = (frames: Sent[]) => { for (const [type, flags, streamId, payload] of frames) client.send(type, flags, streamId, payload) }
  return { server, client, send }
}

const streamErrors: Array<[string, Sent[], number, Http2ServerOptions?]> = [
  ['a header list past the limit, from a small block', [[FrameType.HEADERS, HEADERS_END, 1, Buffer.alloc(400, 0x82)]], ErrorCode.ENHANCE_YOUR_CALM],
  ['a stream past the limit of open ones',
    [[FrameType.HEADERS, FrameFlag.END_HEADERS, 1, block()], [FrameType.HEADERS, HEADERS_END, 3, block()]], ErrorCode.REFUSED_STREAM, { maxConcurrentStreams: 1 }],
  ['a malformed request', [[FrameType.HEADERS, HEADERS_END, 1, block([...REQUEST, 'X-Upper', 'a'])]], ErrorCode.PROTOCOL_ERROR],
  ['HEADERS on a closed stream (here one implicitly closed: a lower number than one opened)',
    [[FrameType.HEADERS, FrameFlag.END_HEADERS, 3, block()], [FrameType.HEADERS, HEADERS_END, 1, block()]], ErrorCode.STREAM_CLOSED],
  ['DATA after the client ended its stream', [[FrameType.HEADERS, HEADERS_END, 1, block()], [FrameType.DATA, 0, 1, Buffer.alloc(1)]], ErrorCode.STREAM_CLOSED],
  ['PRIORITY not of 5 bytes', [[FrameType.HEADERS, FrameFlag.END_HEADERS, 1, block()], [FrameType.PRIORITY, 0, 1, Buffer.alloc(4)]], ErrorCode.FRAME_SIZE_ERROR],
  ['WINDOW_UPDATE of 0 on a stream', [[FrameType.HEADERS, FrameFlag.END_HEADERS, 1, block()], [FrameType.WINDOW_UPDATE, 0, 1, word(0)]], ErrorCode.PROTOCOL_ERROR],
  ['a stream\'s window past 2^31-1',
    [[FrameType.HEADERS, FrameFlag.END_HEADERS, 1, block()], [FrameType.WINDOW_UPDATE, 0, 1, word(2 ** 31 - 65_535)]], ErrorCode.FLOW_CONTROL_ERROR]
]

for (const [what, frames, code, options] of streamErrors) {
  t.test(`${what}: RST_STREAM with its code, and the connection goes on`, async (t) => {
    const { client, send } = await connected(t, () => {}, options)
    send(frames)
    const reset = await client.next((read) => read.type === FrameType.RST_STREAM)
    t.equal(reset?.payload.readUInt32BE(0), code)
    client.send(FrameType.PING, 0, 0, ping)
    t.same((await client.next())?.payload, ping, 'a PING is still answered, and nothing came before it')
  })
}

t.test('trailers still on their way to a stream this side reset: that stream refused again, the connection going on', async (t) => {
  const { client, send } = await connected(t)
  send([
    [FrameType.HEADERS, FrameFlag.END_HEADERS, 1, block([...REQUEST, 'X-Upper', 'a'])],
    [FrameType.HEADERS, HEADERS_END, 1, block(['x-trailer', 'b'])],
    [FrameType.PING, 0, 0, ping]
  ])
  const resets = [await client.next(), await client.next()]
  t.same(resets.map((read) => [read?.type, read?.streamId, read?.payload.readUInt32BE(0)]),
    [[FrameType.RST_STREAM, 1, ErrorCode.PROTOCOL_ERROR], [FrameType.RST_STREAM, 1, ErrorCode.STREAM_CLOSED]])
  t.same((await client.next())?.payload, ping, 'a PING is still answered')
})

t.test('DATA past a paused stream\'s window: RST_STREAM FLOW_CONTROL_ERROR, the stream closed with it', async (t) => {
  const closes: number[] = []
  const { client, send } = await connected(t, (stream) => {
    stream.pause()
    stream.onClose = (code) => closes.push(code)
  })
  send([[FrameType.HEADERS, FrameFlag.END_HEADERS, 1, block()]])
  for (let sent = 0; sent < 65_536; sent += 16_384) send([[FrameType.DATA, 0, 1, Buffer.alloc(Math.min(16_384, 65_536 - sent))]])
  t.equal((await client.next((read) => read.type === FrameType.RST_STREAM))?.payload.readUInt32BE(0), ErrorCode.FLOW_CONTROL_ERROR)
  t.same(closes, [ErrorCode.FLOW_CONTROL_ERROR])
})

t.test('frames to be ignored are: a closed stream\'s DATA, WINDOW_UPDATE and RST_STREAM, PRIORITY, unknown types, GOAWAY, PING acknowledgements', async (t) => {
  const { client, send } = await connected(t, (stream) => {
    stream.onEnd = () => stream.respond([':status', '200'], true)
  })
  send([
    [FrameType.HEADERS, HEADERS_END | FrameFlag.PRIORITY | FrameFlag.PADDED, 1, Buffer.concat([Buffer.from([2, 0, 0, 0, 0, 16]), block(), Buffer.alloc(2)])],
    [FrameType.DATA, 0, 1, Buffer.alloc(10)],
    [FrameType.WINDOW_UPDATE, 0, 1, word(10)],
    [FrameType.RST_STREAM, 0, 1, word(ErrorCode.CANCEL)],
    [FrameType.PRIORITY, 0, 1, Buffer.alloc(5)],
    [0x42, 0, 0, Buffer.alloc(3)],
    [FrameType.PING, FrameFlag.ACK, 0, ping],
    [FrameType.GOAWAY, 0, 0, Buffer.alloc(8)],
    [FrameType.PING, 0, 0, ping]
  ])
  const answer = await client.next()
  t.equal(answer?.type, FrameType.HEADERS, 'the padded request with a priority is answered')
  t.equal(answer?.flags, HEADERS_END, 'trailers-only: END_STREAM on its headers')
  t.same(new HeaderBlockDecoder().decode(answer?.payload as Buffer).fields, [':status', '200'])
  t.ok(isPingAck(await client.next() as ReadFrame), 'the PING is answered, and nothing came between')
})

t.test('a header block over HEADERS and CONTINUATION frames, empty ones among them, with a priority: one request', async (t) => {
  const paths: string[] = []
  const { client, send } = await connected(t, (stream) => { paths.push(stream.headers[':path']) })
  const whole = block([...REQUEST, 'x-long', 'v'.repeat(100)])
  send([
    [FrameType.HEADERS, FrameFlag.PRIORITY, 1, Buffer.concat([Buffer.from([0, 0, 0, 0, 16]), whole.subarray(0, 10)])],
    [FrameType.CONTINUATION, 0, 1, whole.subarray(10, 50)],
    ...Array.from({ length: 1000 }, (): Sent => [FrameType.CONTINUATION, 0, 1, Buffer.alloc(0)]),
    [FrameType.CONTINUATION, FrameFlag.END_HEADERS, 1, whole.subarray(50)],
    [FrameType.PING, 0, 0, ping]
  ])
  await client.next(isPingAck)
  t.same(paths, ['/echo'])
})

t.test('a client\'s DATA, padded, and its trailers reach the stream', async (t) => {
  const chunks: string[] = []
  let ended = false
  const { client, send } = await connected(t, (stream) => {
    stream.onData = (chunk) => chunks.push(chunk.toString())
    stream.onEnd = () => { ended = true }
  })
  send([
    [FrameType.HEADERS, FrameFlag.END_HEADERS, 1, block()],
    [FrameType.DATA, FrameFlag.PADDED, 1, Buffer.from('\x03abc\0\0\0', 'latin1')],
    [FrameType.DATA, 0, 1, Buffer.alloc(0)],
    [FrameType.HEADERS, HEADERS_END, 1, block(['x-trailer', 'yes'])],
    [FrameType.PING, 0, 0, ping]
  ])
  await client.next(isPingAck)
  t.same(chunks, ['abc'], 'the padding is not data, an empty frame no chunk')
  t.ok(ended, 'the trailers end the stream')
})

t.test('handlers given in parts (handle): each hears its event, one given later leaves the others', async (t) => {
  const heard: string[] = []
  const { client, send } = await connected(t, (stream) => {
    stream.handle({ onData: (chunk) => heard.push(`data ${chunk.toString()}`), onClose: (code) => heard.push(`close ${code}`) })
    stream.handle({
      onEnd: () => {
        heard.push('end')
        stream.respond([':status', '200'], true)
      }
    })
  })
  send([
    [FrameType.HEADERS, FrameFlag.END_HEADERS, 1, block()],
    [FrameType.DATA, FrameFlag.END_STREAM, 1, Buffer.from('abc')]
  ])
  await client.next((read) => read.type === FrameType.HEADERS)
  t.same(heard, ['data abc', 'end', `close ${ErrorCode.NO_ERROR}`])
})

t.test('what a stream sends is framed to the peer\'s settings and held to its windows', async (t) => {
  const streams: Http2ServerStream[] = []
  const { client, send } = await connected(t, (stream) => { streams.push(stream) })
  send([
    [FrameType.SETTINGS, 0, 0, Buffer.concat([setting(Setting.INITIAL_WINDOW_SIZE, 0), setting(Setting.HEADER_TABLE_SIZE, 0)])],
    [FrameType.HEADERS, HEADERS_END, 1, block()]
  ])
  await client.next((read) => read.type === FrameType.SETTINGS && (read.flags & FrameFlag.ACK) !== 0)
  const stream = streams[0]
  t.throws(() => stream.write(Buffer.alloc(1)), { message: 'response headers not sent' })
  t.throws(() => stream.end(), { message: 'response headers not sent' })
  stream.respond([':status', '200', 'x-long', 'v'.repeat(40_000)])
  t.throws(() => stream.respond([':status', '200']), { message: 'response headers sent already' })
  const headers = await client.next()
  t.equal(headers?.type, FrameType.HEADERS)
  t.equal(headers?.flags, 0, 'a block past 16 KiB continues')
  const parts = [headers?.payload as Buffer]
  for (let next = await client.next(); ; next = await client.next()) {
    t.equal(next?.type, FrameType.CONTINUATION)
    parts.push(next?.payload as Buffer)
    if ((next?.flags as number) & FrameFlag.END_HEADERS) break
  }
  t.equal(parts.length, 3, 'in three frames')
  t.equal(parts[0][0], 0x20, 'the block first says the encoder\'s table is empty, as the client asked')
  t.same(new HeaderBlockDecoder().decode(Buffer.concat(parts)).fields, [':status', '200', 'x-long', 'v'.repeat(40_000)])

  stream.write(Buffer.alloc(40_000, 1))
  stream.end(['grpc-status', '0'])
  stream.write(Buffer.alloc(1))
  stream.end()
  client.send(FrameType.PING, 0, 0, ping)
  t.ok(isPingAck(await client.next() as ReadFrame), 'no DATA: the stream\'s window is 0')
  client.send(FrameType.SETTINGS, 0, 0, setting(Setting.INITIAL_WINDOW_SIZE, 20_000))
  const first = await client.next()
  t.same([first?.type, first?.payload.length], [FrameType.DATA, 16_384], 'a larger window lets out a frame of the peer\'s size')
  const second = await client.next()
  t.same([second?.type, second?.payload.length], [FrameType.DATA, 3_616], 'and the rest of the window')
  client.send(FrameType.WINDOW_UPDATE, 0, 1, word(100_000))
  const sizes: number[] = []
  for (let next = await client.next(); next?.type === FrameType.DATA; next = await client.next()) {
    sizes.push(next.payload.length)
    if (sizes.length === 2) {
      t.equal((await client.next())?.type, FrameType.HEADERS, 'the trailers follow the data')
      break
    }
  }
  t.same(sizes, [16_384, 3_616], 'the stream\'s window opened: the rest, and no write after the end')
  t.equal(sizes.reduce((a, b) => a + b) + 20_000, 40_000)
})

t.test('DATA held by a window is pending; once it is all out, the stream\'s consumer is told, once', async (t) => {
  const streams: Http2ServerStream[] = []
  const { client, send } = await connected(t, (stream) => { streams.push(stream) })
  send([
    [FrameType.SETTINGS, 0, 0, setting(Setting.INITIAL_WINDOW_SIZE, 100)],
    [FrameType.HEADERS, HEADERS_END, 1, block()]
  ])
  await client.next((read) => read.type === FrameType.SETTINGS && (read.flags & FrameFlag.ACK) !== 0)
  const stream = streams[0]
  let drains = 0
  stream.onDrain = () => drains++
  stream.respond([':status', '200'])
  stream.write(Buffer.alloc(60))
  t.same([stream.pendingBytes, drains], [0, 0], 'what the window takes goes out: nothing pending, nothing to tell')
  stream.write(Buffer.alloc(100))
  t.same([stream.pendingBytes, drains], [60, 0], 'past the window: pending')
  const windowUpdate = async (bytes: number) => {
    send([[FrameType.WINDOW_UPDATE, 0, 1, word(bytes)], [FrameType.PING, 0, 0, ping]])
    await client.next(isPingAck)
  }
  await windowUpdate(30)
  t.same([stream.pendingBytes, drains], [30, 0], 'part of it let out')
  await windowUpdate(1000)
  t.same([stream.pendingBytes, drains], [0, 1], 'all of it: told')
  await windowUpdate(1000)
  t.equal(drains, 1, 'once')
  t.notOk(stream.closed, 'the stream is open: this side has not ended it')
  stream.end()
  t.ok(stream.closed, 'ended by both sides: closed')
})

t.test('a larger SETTINGS_MAX_FRAME_SIZE: DATA frames of that size', async (t) => {
  const { client, send } = await connected(t, (stream) => {
    stream.respond([':status', '200'])
    stream.write(Buffer.alloc(50_000))
    stream.end()
  })
  send([
    [FrameType.SETTINGS, 0, 0, Buffer.concat([setting(Setting.MAX_FRAME_SIZE, 32_768), setting(Setting.INITIAL_WINDOW_SIZE, 100_000)])],
    [FrameType.WINDOW_UPDATE, 0, 0, word(100_000)],
    [FrameType.HEADERS, HEADERS_END, 1, block()]
  ])
  t.equal((await client.next())?.type, FrameType.HEADERS)
  const sizes = [(await client.next())?.payload.length, (await client.next())?.payload.length, (await client.next())?.payload.length]
  t.same(sizes, [32_768, 17_232, 0])
})

t.test('the connection\'s window holds what the streams send, and opens with WINDOW_UPDATE', async (t) => {
  const streams: Http2ServerStream[] = []
  const { client, send } = await connected(t, (stream) => { streams.push(stream) })
  send([
    [FrameType.SETTINGS, 0, 0, setting(Setting.INITIAL_WINDOW_SIZE, 1_000_000)],
    [FrameType.HEADERS, HEADERS_END, 1, block()]
  ])
  await client.next((read) => read.type === FrameType.SETTINGS && (read.flags & FrameFlag.ACK) !== 0)
  streams[0].respond([':status', '200'])
  streams[0].write(Buffer.alloc(70_000))
  streams[0].end()
  let received = 0
  await client.next()
  while (received < 65_535) received += (await client.next())?.payload.length as number
  t.equal(received, 65_535, 'the connection\'s initial window, and no more')
  client.send(FrameType.WINDOW_UPDATE, 0, 0, word(10_000))
  while (received < 70_000) received += (await client.next())?.payload.length as number
  const end = await client.next()
  t.same([end?.type, end?.flags, end?.payload.length], [FrameType.DATA, FrameFlag.END_STREAM, 0], 'then an empty DATA frame ends the stream')
})

t.test('a stream reset by its consumer: RST_STREAM CANCEL, its queue dropped, nothing more sent', async (t) => {
  const closes: number[] = []
  const streams: Http2ServerStream[] = []
  const { client, send } = await connected(t, (stream) => {
    streams.push(stream)
    stream.onClose = (code) => closes.push(code)
  })
  send([[FrameType.SETTINGS, 0, 0, setting(Setting.INITIAL_WINDOW_SIZE, 0)], [FrameType.HEADERS, HEADERS_END, 1, block()]])
  await client.next((read) => read.type === FrameType.SETTINGS && (read.flags & FrameFlag.ACK) !== 0)
  const stream = streams[0]
  stream.respond([':status', '200'])
  stream.write(Buffer.alloc(10))
  stream.reset()
  stream.reset()
  stream.respond([':status', '500'])
  t.equal((await client.next())?.type, FrameType.HEADERS)
  t.equal((await client.next())?.payload.readUInt32BE(0), ErrorCode.CANCEL)
  t.same(closes, [ErrorCode.CANCEL])
  client.send(FrameType.SETTINGS, 0, 0, setting(Setting.INITIAL_WINDOW_SIZE, 100))
  client.send(FrameType.PING, 0, 0, ping)
  t.ok(isPingAck(await client.next() as ReadFrame), 'no DATA after the reset')
})

t.test('a consumer\'s throw ends its connection with INTERNAL_ERROR and is told', async (t) => {
  const errors: unknown[] = []
  const failure = new Error('the consumer failed')
  const { client, send } = await connected(t, () => { throw failure }, { onError: (error) => errors.push(error) })
  send([[FrameType.HEADERS, HEADERS_END, 1, block()]])
  t.equal((await client.next((read) => read.type === FrameType.GOAWAY))?.payload.readUInt32BE(4), ErrorCode.INTERNAL_ERROR)
  t.same(errors, [failure])
  const other = await connected(t, () => { throw failure })
  const warned = once(process, 'warning')
  other.send([[FrameType.HEADERS, HEADERS_END, 1, block()]])
  t.equal((await other.client.next((read) => read.type === FrameType.GOAWAY))?.payload.readUInt32BE(4), ErrorCode.INTERNAL_ERROR, 'without a listener too')
  const [warning] = await bounded(warned, 'no warning') as [Error]
  t.match(warning.message, /^an HTTP\/2 stream's consumer failed: Error: the consumer failed/, 'and a process warning says so')
})

/** A client that grants the server windows of 2^31-1, opens stream 1, and then reads nothing; the
 * server queues 64 KiB of control answers unread. */
async function notReading (t: Test, onStream: (stream: Http2ServerStream) => void) {
  const { client, send } = await connected(t, onStream, { maxQueuedBytes: 65_536 })
  send([
    [FrameType.SETTINGS, 0, 0, setting(Setting.INITIAL_WINDOW_SIZE, 2 ** 31 - 1)],
    [FrameType.WINDOW_UPDATE, 0, 0, word(2 ** 31 - 1 - 65_535)],
    [FrameType.HEADERS, HEADERS_END, 1, block()]
  ])
  await client.next((read) => read.type === FrameType.SETTINGS && (read.flags & FrameFlag.ACK) !== 0)
  client.socket.pause()
  return client
}

t.test('a client that reads none of its answers and asks for more: dropped with ENHANCE_YOUR_CALM', async (t) => {
  const streams: Http2ServerStream[] = []
  let closed: (code: number) => void = () => {}
  const closing = new Promise<number>((resolve) => { closed = resolve })
  const client = await notReading(t, (stream) => {
    streams.push(stream)
    stream.onClose = closed
  })
  streams[0].respond([':status', '200'])
  // Far more than a socket's buffers hold: the rest waits in the server, since the client reads none.
  streams[0].write(Buffer.alloc(64 * 1024 * 1024))
  // PINGs whose answers, 17 bytes each, are more than the 64 KiB the server queues unread.
  client.socket.write(Buffer.concat(Array.from({ length: 4000 }, () => frame(FrameType.PING, 0, 0, ping))))
  t.equal(await bounded(closing, 'the stream\'s close'), ErrorCode.ENHANCE_YOUR_CALM, 'its stream closed with the code')
  client.socket.resume()
  await bounded(new Promise((resolve) => client.socket.once('close', resolve)), 'the connection\'s end')
  t.pass('its socket ended without the queue drained')
})

t.test('a client that reads a large answer slowly: its PING answered after it, the connection going on', async (t) => {
  const streams: Http2ServerStream[] = []
  let secondOpened = () => {}
  const opening = new Promise<void>((resolve) => { secondOpened = resolve })
  const client = await notReading(t, (stream) => {
    streams.push(stream)
    if (stream.id === 3) secondOpened()
  })
  const answerBytes = 64 * 1024 * 1024
  streams[0].respond([':status', '200'])
  // Far more than a socket's buffers hold, and than the option: the rest waits in the server.
  streams[0].write(Buffer.alloc(answerBytes))
  streams[0].end()
  // A gRPC client probes its bandwidth with PINGs while it reads; the next stream says the server read this one.
  client.send(FrameType.PING, 0, 0, ping)
  client.send(FrameType.HEADERS, FrameFlag.END_HEADERS, 3, block())
  await bounded(opening, 'the second stream')
  client.socket.resume()
  let dataBytes = 0
  let read = await client.next(() => true)
  for (; read !== undefined && !isPingAck(read); read = await client.next(() => true)) {
    if (read.type === FrameType.DATA && read.streamId === 1) dataBytes += read.payload.length
  }
  t.ok(read !== undefined && isPingAck(read), 'the PING is answered')
  t.equal(dataBytes, answerBytes, 'after the whole answer queued before it')
  client.send(FrameType.PING, 0, 0, Buffer.alloc(8, 7))
  t.same((await client.next(isPingAck))?.payload, Buffer.alloc(8, 7), 'and the connection goes on')
})

t.test('the connection\'s window is raised up front to the option\'s size, never below HTTP/2\'s initial 65,535', async (t) => {
  const opening = async (options: Http2ServerOptions) => {
    const { client } = await connected(t, () => {}, options)
    client.send(FrameType.PING, 0, 0, ping)
    const frames: Array<[number, number, number]> = []
    for (let next = await client.next(() => true); next !== undefined; next = await client.next(() => true)) {
      frames.push([next.type, next.flags, next.type === FrameType.WINDOW_UPDATE ? next.payload.readUInt32BE(0) : 0])
      if (next.type === FrameType.PING) break
    }
    return frames
  }
  t.same(await opening({}), [[FrameType.SETTINGS, 0, 0], [FrameType.WINDOW_UPDATE, 0, 1_048_576 - 65_535], [FrameType.SETTINGS, FrameFlag.ACK, 0], [FrameType.PING, FrameFlag.ACK, 0]])
  t.same(await opening({ connectionWindowBytes: 1000 }), [[FrameType.SETTINGS, 0, 0], [FrameType.SETTINGS, FrameFlag.ACK, 0], [FrameType.PING, FrameFlag.ACK, 0]])
})

t.test('a client resetting open streams past a burst of 1,000: GOAWAY ENHANCE_YOUR_CALM', async (t) => {
  let opened = 0
  const { client } = await connected(t, () => { opened++ })
  // Each stream opened and reset at once, as the rapid reset attack does. The burst is refilled at
  // 33 a second: 2,000 resets would need 30 s of refills to pass.
  const frames: Buffer[] = []
  for (let streamId = 1; streamId < 4000; streamId += 2) {
    frames.push(frame(FrameType.HEADERS, FrameFlag.END_HEADERS, streamId, block()), frame(FrameType.RST_STREAM, 0, streamId, word(ErrorCode.CANCEL)))
  }
  client.socket.write(Buffer.concat(frames))
  const goaway = await client.next((read) => read.type === FrameType.GOAWAY)
  t.equal(goaway?.payload.readUInt32BE(4), ErrorCode.ENHANCE_YOUR_CALM)
  t.ok(opened > 1000 && opened < 2000, `the connection went once the burst was spent (${opened} streams)`)
})
