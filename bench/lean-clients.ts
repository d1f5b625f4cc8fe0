/**
 * Lean clients, one request in flight at a time, as perf_analyzer's C++ clients send them: the
 * request's bytes made once, so what a run measures is the server. Each reaches the server over
 * TCP, or over a Unix domain socket when given its path.
 */
import http from 'node:http'
import http2 from 'node:http2'
import net from 'node:net'
import { inferenceService } from '../lib/grpc'

export interface LeanClient { send(): Promise<Buffer>, close(): void }

/** Where a lean client connects: `host:port`, or a Unix socket's path. */
export type Endpoint = { address: string } | { socketPath: string }

/** POSTs of the JSON `request` to `path` over node:http, one kept-alive connection. */
export function httpClient (endpoint: Endpoint, path: string, request: object): LeanClient {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  const body = Buffer.from(JSON.stringify(request))
  const target = 'socketPath' in endpoint
    ? { socketPath: endpoint.socketPath }
    : { hostname: endpoint.address.split(':')[0], port: Number(endpoint.address.split(':')[1]) }
  const send = () => new Promise<Buffer>((resolve, reject) => {
    const outgoing = http.request({ agent, ...target, method: 'POST', path, headers: { 'content-length': body.length } }, (response) => {
      const chunks: Buffer[] = []
      response.on('data', (chunk: Buffer) => chunks.push(chunk))
      response.on('end', () => response.statusCode === 200 ? resolve(Buffer.concat(chunks)) : reject(new Error(`HTTP ${response.statusCode}: ${Buffer.concat(chunks)}`)))
    })
    outgoing.on('error', reject)
    outgoing.end(body)
  })
  return { send, close: () => agent.destroy() }
}

/** ModelInfer calls over one HTTP/2 connection (node:http2), the message encoded once: a call's
 * headers, its length-prefixed message, and its end. */
export function modelInferClient (endpoint: Endpoint, request: object): LeanClient {
  const { service } = inferenceService() as unknown as { service: Record<string, { path: string, requestSerialize(value: object): Buffer }> }
  const { path: rpcPath, requestSerialize } = service.ModelInfer
  const message = requestSerialize(request)
  const frame = Buffer.alloc(5 + message.length)
  frame.writeUInt32BE(message.length, 1)
  message.copy(frame, 5)
  const session = 'socketPath' in endpoint
    ? http2.connect('http://localhost', { createConnection: () => net.connect(endpoint.socketPath) })
    : http2.connect(`http://${endpoint.address}`)
  const headers = { ':method': 'POST', ':path': rpcPath, 'content-type': 'application/grpc', te: 'trailers' }
  const send = () => new Promise<Buffer>((resolve, reject) => {
    const stream = session.request(headers)
    const chunks: Buffer[] = []
    let grpcStatus: string | undefined
    stream.on('data', (chunk: Buffer) => chunks.push(chunk))
    stream.on('trailers', (trailers) => { grpcStatus = String(trailers['grpc-status']) })
    stream.on('end', () => grpcStatus === '0' ? resolve(Buffer.concat(chunks)) : reject(new Error(`grpc-status ${grpcStatus}`)))
    stream.on('error', reject)
    stream.end(frame)
  })
  return { send, close: () => session.close() }
}
