/**
 * Where grpc-js cannot be handed the listener's streams (grpc-js-stream.ts), the calls the listener
 * does not serve itself go to grpc-js relayed, unchanged, by its public API alone. grpc-js serves
 * the connections it is handed (its connection injector) over node:http2: so each of the
 * listener's connections gets, on its first such call, an in-process HTTP/2 connection to grpc-js
 * (a duplex pair, one end handed to grpc-js, a node:http2 client session on the other), and each
 * call becomes a request on it: headers, messages, trailers and resets passed both ways as they
 * come, each side's flow control holding the other (a stream this side cannot send on stops
 * reading grpc-js's answer, and a relayed request that does not drain stops the client's stream).
 *
 * grpc-js names a call's connection by its socket's four ends, and a relayed call's socket is an
 * in-process stream without any: so the relay names the connection a call came on in a header of
 * its own (`RELAYED_CONNECTION_HEADER`, whatever a client sent under that name replaced), where
 * the listener finds the call's socket (the peer rule, the send timeout).
 */
import http2, { type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2'
import type { Duplex } from 'node:stream'
import type { Http2ServerStream } from '../http2/server-stream'
import { duplexPair } from '../util/duplex-pair'
import { fieldsOf } from './grpc-js-stream'

/** The header naming a relayed call's connection to the listener. */
export const RELAYED_CONNECTION_HEADER = 'x-fastify-triton-shm-connection'

const { NGHTTP2_CANCEL, NGHTTP2_FLAG_END_STREAM } = http2.constants

/** What serves a connection's calls on grpc-js: each stream the listener does not serve itself. */
export interface GrpcJsConnection {
  serve(stream: Http2ServerStream): void
  /** The connection is gone: what is still open of it on grpc-js's side is cancelled. */
  close(): void
}

/** Relays for the connections of a listener, each named as the listener knows it, to the grpc-js
 * server of `injector`. */
export function relayedConnections (injector: { injectConnection(connection: Duplex): void }): (socket: unknown, name: string) => GrpcJsConnection {
  return (_socket, name) => new GrpcJsRelay(name, (inner) => injector.injectConnection(inner))
}

/** One connection's relay to grpc-js. */
export class GrpcJsRelay implements GrpcJsConnection {
  readonly #connection: string
  readonly #inject: (connection: Duplex) => void
  #session: ClientHttp2Session | undefined

  /** `connection`: the name the listener knows the connection by; `inject` hands grpc-js a connection. */
  constructor (connection: string, inject: (connection: Duplex) => void) {
    this.#connection = connection
    this.#inject = inject
  }

  serve (stream: Http2ServerStream): void {
    const headers: Record<string, string> = { ...stream.headers }
    // The client session sets its own.
    delete headers[':scheme']
    headers[RELAYED_CONNECTION_HEADER] = this.#connection
    this.#session ??= this.#connect()
    const request = this.#session.request(headers)
    relayRequest(stream, request)
    relayAnswer(request, stream)
  }

  close (): void {
    this.#session?.destroy()
  }

  #connect (): ClientHttp2Session {
    const [inner, outer] = duplexPair()
    this.#inject(inner)
    const session = http2.connect('http://localhost', { createConnection: () => outer as never })
    session.on('error', () => {})
    return session
  }
}

/** The client's side of a call, into its relayed request. */
function relayRequest (stream: Http2ServerStream, request: ClientHttp2Stream): void {
  stream.handle({
    onData: (chunk) => {
      if (request.write(chunk)) return
      stream.pause()
      request.once('drain', () => stream.resume())
    },
    onEnd: () => request.end(),
    onClose: (code) => {
      if (code !== 0 && !request.closed) request.close(code)
    }
  })
}

/** grpc-js's answer, onto the client's stream. */
function relayAnswer (request: ClientHttp2Stream, stream: Http2ServerStream): void {
  // node:http2 may hand an answer's first message before its headers.
  const early: Buffer[] = []
  let responded = false
  let ended = false
  const write = (chunk: Buffer) => {
    stream.write(chunk)
    // What the client's windows hold back stops grpc-js's answer, until it is out.
    if (stream.pendingBytes > 0) request.pause()
  }
  stream.handle({ onDrain: () => request.resume() })
  request.on('response', (headers, flags) => {
    ended = (flags & NGHTTP2_FLAG_END_STREAM) !== 0
    stream.respond(fieldsOf(headers), ended)
    responded = true
    for (const chunk of early.splice(0)) write(chunk)
  })
  request.on('data', (chunk: Buffer) => {
    if (responded) write(chunk)
    else early.push(chunk)
  })
  request.on('trailers', (trailers) => {
    ended = true
    stream.end(fieldsOf(trailers))
  })
  request.on('error', () => {})
  // Over without its status (reset, or its connection to grpc-js gone): the client's call is cancelled.
  request.on('close', () => {
    if (!ended) stream.reset(NGHTTP2_CANCEL)
  })
}
