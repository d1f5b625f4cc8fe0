/**
 * The package's own HTTP/2 parts against nghttp2 (node:http2's client) over a real connection: a
 * server of the frame reader and the HPACK decoder and encoder alone reads what the client sends
 * (Huffman-coded strings, its dynamic table filled, evicted and resized as nghttp2 chooses) and
 * answers with the request's fields; the client reads them back as they were sent.
 */
import { once } from 'node:events'
import http2 from 'node:http2'
import net, { type AddressInfo } from 'node:net'
import fc from 'fast-check'
import t from 'tap'
import { FrameReader } from '../lib/http2/frame-reader'
import { frame } from '../lib/http2/frame-writer'
import { HeaderBlockDecoder } from '../lib/http2/header-block-decoder'
import { HeaderBlockEncoder } from '../lib/http2/header-block-encoder'
import { FrameFlag, FrameType, Setting } from '../lib/http2/protocol'

/** A HEADERS frame's block, without its padding and priority fields. */
function headerBlock (flags: number, payload: Buffer): Buffer {
  const padding = flags & FrameFlag.PADDED ? payload[0] : 0
  const start = (flags & FrameFlag.PADDED ? 1 : 0) + (flags & FrameFlag.PRIORITY ? 5 : 0)
  return payload.subarray(start, payload.length - padding)
}

/**
 * Answers each request (HEADERS ending its stream, in one frame) with its own fields after
 * `:status`, pseudo-headers left out, and tells `received` what it decoded. Other frames are read
 * and left, but for SETTINGS, which are acknowledged (a table size tells the encoder).
 */
async function echoServer (received: string[][]) {
  const sockets = new Set<net.Socket>()
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    const reader = new FrameReader()
    const decoder = new HeaderBlockDecoder()
    const encoder = new HeaderBlockEncoder()
    socket.write(frame(FrameType.SETTINGS, 0, 0, Buffer.alloc(0)))
    socket.on('data', (chunk: Buffer) => reader.read(chunk, (type, flags, streamId, payload) => {
      if (type === FrameType.SETTINGS && !(flags & FrameFlag.ACK)) {
        for (let at = 0; at < payload.length; at += 6) if (payload.readUInt16BE(at) === Setting.HEADER_TABLE_SIZE) encoder.peerTableSizeChanged()
        socket.write(frame(FrameType.SETTINGS, FrameFlag.ACK, 0, Buffer.alloc(0)))
      }
      if (type !== FrameType.HEADERS) return
      const { fields } = decoder.decode(headerBlock(flags, payload))
      received.push(fields)
      const answer = [':status', '200', ...fields.filter((_, index) => !fields[index - (index % 2)].startsWith(':'))]
      socket.write(frame(FrameType.HEADERS, FrameFlag.END_HEADERS | FrameFlag.END_STREAM, streamId, encoder.encode(answer)))
    }))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => {
      for (const socket of sockets) socket.destroy()
      server.close()
    }
  }
}

/** Sends `fields` in a request without a body; resolves with the answer's headers. */
function ask (session: http2.ClientHttp2Session, fields: Record<string, string>) {
  return new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
    const request = session.request({ ':method': 'POST', ':path': '/inference.GRPCInferenceService/ModelInfer', ...fields }, { endStream: true })
    request.on('response', resolve)
    request.on('error', reject)
    request.resume()
  })
}

const customFields = fc.dictionary(
  fc.stringMatching(/^x-[a-z0-9-]{1,30}$/),
  // RFC 9113 §8.2.1: a value neither starts nor ends with a space (nghttp2 drops such a field).
  fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((code) => String.fromCharCode(code)), maxLength: 300 }).map((value) => value.trim()),
  { maxKeys: 10 })

for (const headerTableSize of [undefined, 0, 256]) {
  t.test(`nghttp2's header blocks decoded, and the answers' encoded, over one connection (its table: ${headerTableSize ?? 'default'})`, async (t) => {
    const received: string[][] = []
    const server = await echoServer(received)
    const session = http2.connect(server.url, headerTableSize === undefined ? {} : { settings: { headerTableSize } })
    t.teardown(() => {
      session.destroy()
      server.close()
    })
    const requests = [
      { 'content-type': 'application/grpc', 'x-long': 'e'.repeat(1000) },
      ...fc.sample(customFields, { numRuns: 60, seed: 7 })
    ]
    for (const fields of requests) {
      const answer = await ask(session, fields)
      const sent = received.at(-1) as string[]
      const pseudo = { ':method': 'POST', ':path': '/inference.GRPCInferenceService/ModelInfer', ':scheme': 'http', ':authority': server.url.slice('http://'.length) }
      t.same(Object.fromEntries(sent.flatMap((field, index) => index % 2 === 0 ? [[field, sent[index + 1]]] : [])), { ...pseudo, ...fields }, 'the server read what was sent')
      t.equal(sent.length, 2 * Object.keys({ ...pseudo, ...fields }).length, 'each field once')
      const { ':status': status, ...echoed } = Object.fromEntries(Object.entries(answer))
      t.equal(status, 200)
      t.same(echoed, fields, 'the client read what the server sent')
    }
  })
}
