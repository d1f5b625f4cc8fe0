/**
 * The calls the listener does not serve on its own HTTP/2 streams (every call but a plain unary
 * ModelInfer) are grpc-js's. grpc-js serves a call on a node:http2 server stream; the listener
 * hands it the call's stream of the package's HTTP/2 dressed as one: the part of node:http2's
 * stream grpc-js uses (`data`, `end`, `close` and `wantTrailers`, `pause` and `resume`, `respond`,
 * `write` with its callback, `end`, `sendTrailers`, `closed`, `rstCode`, and `session.socket`, the
 * accepted socket, by which grpc-js names the call's connection). It is handed to grpc-js's
 * server below its HTTP/2 server (`_streamHandler`, grpc-js's own stream listener): the one
 * place the package reaches into grpc-js. A grpc-js without it has every such call relayed over
 * an in-process HTTP/2 connection instead (grpc-js-relay.ts): public API only, slower.
 *
 * What node:http2 promises, this keeps: a paused stream emits no `data` (what arrives waits here,
 * held by the client's window, which a paused stream does not grant) and `end` only once its data
 * is read; a write's callback runs once its bytes are in the connection's writes, past the
 * client's windows; events come after the call that caused them returns.
 */
import { EventEmitter } from 'node:events'
import type { Socket } from 'node:net'
import type { OutgoingHttpHeaders } from 'node:http2'
import type { Server } from '@grpc/grpc-js'
import type { Http2ServerStream } from '../http2/server-stream'

/** grpc-js's listener of its HTTP/2 server's streams. */
type StreamHandler = (this: Server, extraInterceptors: unknown[], stream: GrpcJsStream, headers: Record<string, string>) => void

/** Headers as the package's HTTP/2 sends them: pseudo-header fields first, names and values in turn. */
export function fieldsOf (headers: OutgoingHttpHeaders): string[] {
  const pseudo: string[] = []
  const regular: string[] = []
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue
    const fields = name.startsWith(':') ? pseudo : regular
    for (const one of Array.isArray(value) ? value : [value]) fields.push(name, String(one))
  }
  return pseudo.concat(regular)
}

/** How `server` serves a stream of the listener's, or undefined when this grpc-js has no way (see above). */
export function grpcJsStreams (server: Server): ((stream: Http2ServerStream, socket: Socket) => void) | undefined {
  const handler = (server as unknown as { _streamHandler?: StreamHandler })._streamHandler
  if (typeof handler !== 'function' || handler.length !== 3) return undefined
  return (stream, socket) => handler.call(server, [], new GrpcJsStream(stream, socket), stream.headers)
}

/** A stream of the package's HTTP/2, as grpc-js serves a call on it (see above). */
export class GrpcJsStream extends EventEmitter {
  readonly session: { readonly socket: Socket }
  rstCode: number | undefined
  readonly #stream: Http2ServerStream
  #paused = false
  /** What arrived while paused. */
  readonly #unread: Buffer[] = []
  /** The client sent all; `end` is emitted once what it sent is read. */
  #remoteEnded = false
  #endEmitted = false
  /** Write callbacks waiting for their bytes to get past the client's windows. */
  #unsent: Array<() => void> = []

  constructor (stream: Http2ServerStream, socket: Socket) {
    super()
    this.#stream = stream
    this.session = { socket }
    stream.handle({
      onData: (chunk) => {
        if (this.#paused || this.#unread.length > 0) this.#unread.push(chunk)
        else this.emit('data', chunk)
      },
      onEnd: () => {
        this.#remoteEnded = true
        this.#flow()
      },
      onDrain: () => this.#sent(),
      onClose: (code) => {
        this.rstCode = code
        this.#sent()
        process.nextTick(() => this.emit('close'))
      }
    })
  }

  get closed (): boolean {
    return this.#stream.closed
  }

  get destroyed (): boolean {
    return this.#stream.closed
  }

  pause (): this {
    this.#paused = true
    this.#stream.pause()
    return this
  }

  resume (): this {
    this.#paused = false
    this.#stream.resume()
    process.nextTick(() => this.#flow())
    return this
  }

  respond (headers: OutgoingHttpHeaders, options: { endStream?: boolean } = {}): void {
    this.#stream.respond(fieldsOf(headers), options.endStream === true)
  }

  write (chunk: Buffer, callback: () => void): boolean {
    this.#stream.write(chunk)
    if (this.#stream.pendingBytes > 0) this.#unsent.push(callback)
    else process.nextTick(callback)
    return true
  }

  /** The answer's messages are all written: grpc-js is asked for its trailers. */
  end (): void {
    process.nextTick(() => this.emit('wantTrailers'))
  }

  sendTrailers (trailers: OutgoingHttpHeaders): void {
    this.#stream.end(fieldsOf(trailers))
  }

  /** Hands on what waited, while the stream flows, then its end. */
  #flow (): void {
    while (!this.#paused && this.#unread.length > 0) this.emit('data', this.#unread.shift())
    if (this.#paused || !this.#remoteEnded || this.#endEmitted) return
    this.#endEmitted = true
    this.emit('end')
  }

  /** What was written is out (or never will be: the stream closed). */
  #sent (): void {
    for (const callback of this.#unsent.splice(0)) callback()
  }
}
