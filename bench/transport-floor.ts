/**
 * The transports' own floor, served by the bench's server child beside the example: a bare
 * node:http server that reads a POST's body and answers fixed bytes, and a bare node:http2 server
 * that reads a unary gRPC call's message and answers a fixed message with its status, as little
 * as each protocol lets a server do. The same lean clients measured against them (bench/grpc-stream.ts)
 * say how near one gRPC call per request can come to one HTTP request with Node on both ends,
 * whatever the server does beside; a third, of the package's own HTTP/2
 * (bench/own-http2-floor.ts), what the same call costs below node:http2.
 */
import { once } from 'node:events'
import http from 'node:http'
import http2 from 'node:http2'
import type { AddressInfo } from 'node:net'
import { ownHttp2Floor } from './own-http2-floor'

/** About the sizes of `simple`'s answers with its outputs in shared memory. */
const HTTP_ANSWER = Buffer.alloc(164, 0x20)
const GRPC_MESSAGE_BYTES = 110

export interface TransportFloorServers {
  httpPort: number
  grpcPort: number
  ownGrpcPort: number
  close(): void
}

export async function startTransportFloor (): Promise<TransportFloorServers> {
  const httpServer = http.createServer((request, response) => {
    request.resume()
    request.on('end', () => {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': HTTP_ANSWER.length })
      response.end(HTTP_ANSWER)
    })
  })
  const frame = Buffer.alloc(5 + GRPC_MESSAGE_BYTES)
  frame.writeUInt32BE(GRPC_MESSAGE_BYTES, 1)
  const grpcServer = http2.createServer()
  grpcServer.on('stream', (stream) => {
    stream.resume()
    stream.on('end', () => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc+proto' }, { waitForTrailers: true })
      stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0', 'grpc-message': 'OK' }))
      stream.end(frame)
    })
  })
  const ownGrpcServer = ownHttp2Floor(frame)
  const servers = [httpServer, grpcServer, ownGrpcServer]
  for (const server of servers) server.listen(0, '127.0.0.1')
  await Promise.all(servers.map((server) => once(server, 'listening')))
  return {
    httpPort: (httpServer.address() as AddressInfo).port,
    grpcPort: (grpcServer.address() as AddressInfo).port,
    ownGrpcPort: (ownGrpcServer.address() as AddressInfo).port,
    close: () => {
      for (const server of servers) server.close()
    }
  }
}
