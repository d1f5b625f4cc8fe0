/**
 * The transports' floor over the package's own HTTP/2 (lib/http2's server connection: frames,
 * HPACK, streams, flow control): a server that reads a unary gRPC call and answers a fixed
 * message with its status, its headers, message and trailers in one write, as little as HTTP/2
 * lets a server do. Beside the node:http2 floor (bench/transport-floor.ts), it says what a call
 * costs the server below node:http2.
 */
import net from 'node:net'
import { Http2ServerConnection } from '../lib/http2/server-connection'

const HEADERS = [':status', '200', 'content-type', 'application/grpc+proto']
const TRAILERS = ['grpc-status', '0', 'grpc-message', 'OK']

/** A server answering every stream, once its client has sent all, with `message` (a whole gRPC frame) and status 0. */
export function ownHttp2Floor (message: Buffer): net.Server {
  return net.createServer((socket) => new Http2ServerConnection(socket, (stream) => {
    stream.handle({
      onEnd: () => {
        stream.respond(HEADERS)
        stream.write(message)
        stream.end(TRAILERS)
      }
    })
  }))
}
