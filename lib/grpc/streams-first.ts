/**
 * The plugin's listener serves some calls on their HTTP/2 streams itself, below grpc-js (the
 * unary ModelInfer: `model-infer-streams.ts`), and hands grpc-js every other. grpc-js makes one
 * HTTP/2 server per connection injector and answers each stream that server opens; it has no way
 * to hand a call over. So the listener asks grpc-js's server to let it see each stream first: the
 * one place this package reaches into grpc-js's server (its `createHttp2Server`, and the `stream`
 * listeners it puts on what that returns). Without them (another grpc-js), every call stays
 * grpc-js's, as before: slower, never different.
 */
import type { Http2Server, IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2'
import type { Server } from '@grpc/grpc-js'

/** Takes a stream (true: it answers it) or leaves it to grpc-js (false). */
export type StreamTaker = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => boolean

interface GrpcJsInternals {
  createHttp2Server?: (this: Server, credentials: unknown) => Http2Server
}

type StreamListener = (this: Http2Server, stream: ServerHttp2Stream, headers: IncomingHttpHeaders, ...rest: unknown[]) => void

/** Puts `take` before grpc-js on every HTTP/2 server `server` makes from now on (call it before
 * `createConnectionInjector`); false if this grpc-js makes them otherwise, and nothing changed. */
export function offerStreamsFirst (server: Server, take: StreamTaker): boolean {
  const internals = server as unknown as GrpcJsInternals
  const createHttp2Server = internals.createHttp2Server
  if (typeof createHttp2Server !== 'function') return false
  internals.createHttp2Server = function (credentials) {
    const http2Server = createHttp2Server.call(this, credentials)
    const grpcJsOwn = http2Server.listeners('stream') as StreamListener[]
    http2Server.removeAllListeners('stream')
    http2Server.on('stream', function (this: Http2Server, stream: ServerHttp2Stream, headers: IncomingHttpHeaders, ...rest: unknown[]) {
      if (take(stream, headers)) return
      for (const listener of grpcJsOwn) listener.call(this, stream, headers, ...rest)
    })
    return http2Server
  }
  return true
}
