/**
 * The transports' floor over the package's own HTTP/2 parts (lib/http2: the frame reader, HPACK's
 * decoder and encoder): a server that reads a unary gRPC call's headers and message and answers a
 * fixed message with its status, its headers, message and trailers in one write, as little as
 * HTTP/2 lets a server do. Beside the node:http2 floor (bench/transport-floor.ts), it says what a
 * call would cost the server below node:http2. It takes the connection-level basics a client
 * needs to go on (SETTINGS, PING, the connection's receive window) and nothing else.
 */
import net from 'node:net'
import { FrameReader, writeFrameHeader } from '../lib/http2/frame-reader'
import { HeaderBlockDecoder } from '../lib/http2/header-block-decoder'
import { HeaderBlockEncoder } from '../lib/http2/header-block-encoder'
import { FRAME_HEADER_BYTES, FrameFlag, FrameType, Setting } from '../lib/http2/protocol'

/** The connection's receive window is refilled once this much of it is used (65,535 initially). */
const WINDOW_REFILL_BYTES = 32_768

const frame = (type: number, flags: number, streamId: number, payload: Buffer) => {
  const bytes = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.length)
  payload.copy(bytes, writeFrameHeader(bytes, 0, payload.length, type, flags, streamId))
  return bytes
}

/** A HEADERS frame's block, without its padding and priority fields. */
function headerBlock (flags: number, payload: Buffer): Buffer {
  const padding = flags & FrameFlag.PADDED ? payload[0] : 0
  const start = (flags & FrameFlag.PADDED ? 1 : 0) + (flags & FrameFlag.PRIORITY ? 5 : 0)
  return payload.subarray(start, payload.length - padding)
}

/** A server answering every stream that ends with `message` (a whole gRPC frame) and status 0. */
export function ownHttp2Floor (message: Buffer): net.Server {
  return net.createServer((socket) => {
    socket.setNoDelay(true)
    socket.on('error', () => {})
    const reader = new FrameReader()
    const decoder = new HeaderBlockDecoder()
    const encoder = new HeaderBlockEncoder()
    let unacknowledgedBytes = 0
    socket.write(frame(FrameType.SETTINGS, 0, 0, Buffer.alloc(0)))
    const answer = (streamId: number) => [
      frame(FrameType.HEADERS, FrameFlag.END_HEADERS, streamId, encoder.encode([':status', '200', 'content-type', 'application/grpc+proto'])),
      frame(FrameType.DATA, 0, streamId, message),
      frame(FrameType.HEADERS, FrameFlag.END_HEADERS | FrameFlag.END_STREAM, streamId, encoder.encode(['grpc-status', '0', 'grpc-message', 'OK']))
    ]
    socket.on('data', (chunk: Buffer) => {
      const out: Buffer[] = []
      try {
        reader.read(chunk, (type, flags, streamId, payload) => {
          if (type === FrameType.SETTINGS && !(flags & FrameFlag.ACK)) {
            for (let at = 0; at < payload.length; at += 6) if (payload.readUInt16BE(at) === Setting.HEADER_TABLE_SIZE) encoder.peerTableSizeChanged()
            out.push(frame(FrameType.SETTINGS, FrameFlag.ACK, 0, Buffer.alloc(0)))
          } else if (type === FrameType.PING && !(flags & FrameFlag.ACK)) {
            out.push(frame(FrameType.PING, FrameFlag.ACK, 0, payload))
          } else if (type === FrameType.HEADERS) {
            decoder.decode(headerBlock(flags, payload))
            if (flags & FrameFlag.END_STREAM) out.push(...answer(streamId))
          } else if (type === FrameType.DATA) {
            unacknowledgedBytes += payload.length
            if (flags & FrameFlag.END_STREAM) out.push(...answer(streamId))
          }
        })
      } catch {
        socket.destroy()
        return
      }
      if (unacknowledgedBytes >= WINDOW_REFILL_BYTES) {
        const increment = Buffer.alloc(4)
        increment.writeUInt32BE(unacknowledgedBytes)
        out.push(frame(FrameType.WINDOW_UPDATE, 0, 0, increment))
        unacknowledgedBytes = 0
      }
      if (out.length > 0) socket.write(out.length === 1 ? out[0] : Buffer.concat(out))
    })
  })
}
