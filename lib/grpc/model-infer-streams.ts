/**
 * Unary ModelInfer served by the plugin's listener on the call's HTTP/2 stream itself (the
 * package's own HTTP/2, lib/http2), never reaching grpc-js: grpc-js's work per call (node:http2's
 * stream, a call object per interceptor, its metadata, message queue and decoder, its status
 * plumbing) cost about as much as the inference it carried, and a local client sends one call per
 * request. What a client sees is what grpc-js would send: the same headers, framing, statuses and
 * texts; what the server holds is bounded as grpc-js's calls are, sooner: the message is charged
 * to `inFlight` by its length prefix, refused past `maxMessageBytes` from its length prefix,
 * measured before it is decoded (the listener's send timeout watches its answer as it watches
 * every call's: send-timeout.ts). Calls it does not take are relayed to grpc-js
 * (grpc-js-relay.ts): a compressed message (`grpc-encoding`), a deadline (`grpc-timeout`), and
 * what is not a POST of gRPC content.
 */
import type { InFlightReservation } from '../../types/kserve'
import type { ModelInferRequest, ModelInferResponse } from '../../types/grpc'
import type { Http2ServerStream } from '../http2/server-stream'
import type { RequestHeaders } from '../http2/request-headers'
import type { RestrictedFeatures } from '../util/restricted-features'
import { FaceTrace } from '../models/face-trace'
import type { CancellableCall } from './model-infer'
import { answerModelInfer, type ModelInferHandlerOptions } from './model-infer-handler'
import { checkedDecodedBytes, decodeModelInferRequest } from './model-infer-message'
import { ModelInferResponseFrame } from './model-infer-response'
import { MAX_MESSAGE_BYTES, MESSAGE_PREFIX_BYTES, SERVICE } from './protocol'
import { Status, toServiceError } from './status'

export interface ModelInferStreamsOptions extends ModelInferHandlerOptions {
  /** The largest message received (grpc-js's `grpc.max_receive_message_length`). */
  maxMessageBytes: number
  /** The largest answer sent; default `MAX_MESSAGE_BYTES`, Triton's. */
  maxSendMessageBytes?: number
  /** The inference category refuses calls without its key while restricted. */
  restrictions: RestrictedFeatures
}

/** ModelInfer's path: `/inference.GRPCInferenceService/ModelInfer`. */
export const MODEL_INFER_PATH = `/${SERVICE}/ModelInfer`

/** A connection's taker of streams: true when it answers `stream`. */
export type StreamTaker = (stream: Http2ServerStream) => boolean

const takes = (headers: RequestHeaders): boolean =>
  headers[':path'] === MODEL_INFER_PATH && headers[':method'] === 'POST' && headers['grpc-timeout'] === undefined &&
  (headers['grpc-encoding'] === undefined || headers['grpc-encoding'] === 'identity') &&
  headers['content-type']?.startsWith('application/grpc') === true

/** A metadata key's value, as grpc-js's metadata gives it to the restriction check: a `-bin` key's
 * value is binary, no header's. */
function headerValue (headers: RequestHeaders, lowerCaseName: string): string | undefined {
  if (lowerCaseName.endsWith('-bin')) return undefined
  return headers[lowerCaseName]
}

/** The listener's taker of ModelInfer streams (see above). */
export function modelInferStreams (options: ModelInferStreamsOptions): StreamTaker {
  return (stream) => {
    if (!takes(stream.headers)) return false
    new ModelInferStream(stream, options).start()
    return true
  }
}

/** An answer's headers and trailers, as grpc-js sends them. */
const ANSWER_HEADERS = [':status', '200', 'content-type', 'application/grpc+proto', 'grpc-accept-encoding', 'identity,deflate,gzip', 'grpc-encoding', 'identity']
const OK_TRAILERS = ['grpc-status', '0', 'grpc-message', 'OK']

/** A status the call ends with, of the call's own making (grpc-js's texts). */
class CallStatus {
  constructor (readonly code: number, readonly details: string) {}
}

/** One ModelInfer call on its stream: read, answered, and over when the stream closes. */
class ModelInferStream implements CancellableCall {
  cancelled = false
  readonly #stream: Http2ServerStream
  readonly #options: ModelInferStreamsOptions
  readonly #reservation: InFlightReservation
  /** The length prefix, until it is whole. */
  #prefix: Buffer | undefined
  /** The message's length, once its prefix is read. */
  #length = -1
  #parts: Buffer[] = []
  #received = 0
  #request: ModelInferRequest | undefined
  /** Headers sent (an answer or a status): nothing more is read. */
  #answered = false
  #onCancel: Array<() => void> = []
  #trace: FaceTrace | undefined

  constructor (stream: Http2ServerStream, options: ModelInferStreamsOptions) {
    this.#stream = stream
    this.#options = options
    this.#reservation = options.registry.inFlight.open()
  }

  /** Follows the stream: the call is read, run on its half-close, and over when the stream closes. */
  start (): void {
    const stream = this.#stream
    stream.handle({ onClose: () => this.#close() })
    try {
      this.#options.restrictions.check('inference', (name) => headerValue(stream.headers, name))
    } catch (error) {
      this.#fail(error)
      return
    }
    stream.handle({ onData: (chunk) => this.#receive(chunk), onEnd: () => this.#halfClosed() })
  }

  once (_event: 'cancelled', listener: () => void): this {
    this.#onCancel.push(listener)
    return this
  }

  #receive (chunk: Buffer): void {
    if (this.#answered) return
    try {
      let offset = 0
      while (offset < chunk.length) {
        if (this.#request !== undefined) throw new CallStatus(Status.UNIMPLEMENTED, `Received a second request message for server streaming method ${MODEL_INFER_PATH}`)
        offset = this.#length < 0 ? this.#readPrefix(chunk, offset) : this.#readMessage(chunk, offset)
      }
    } catch (error) {
      this.#fail(error)
    }
  }

  /** Reads the prefix's bytes from `offset`; returns where the message starts (or the chunk ends). */
  #readPrefix (chunk: Buffer, offset: number): number {
    const missing = MESSAGE_PREFIX_BYTES - (this.#prefix?.length ?? 0)
    const taken = chunk.subarray(offset, offset + missing)
    this.#prefix = this.#prefix === undefined ? taken : Buffer.concat([this.#prefix, taken])
    if (this.#prefix.length < MESSAGE_PREFIX_BYTES) return chunk.length
    if (this.#prefix[0] !== 0) throw new CallStatus(Status.INTERNAL, 'Received a compressed message without a "grpc-encoding" header')
    const length = this.#prefix.readUInt32BE(1)
    const { maxMessageBytes } = this.#options
    if (length > maxMessageBytes) throw new CallStatus(Status.RESOURCE_EXHAUSTED, `Received message larger than max (${length} vs ${maxMessageBytes})`)
    // Charged as declared, as an HTTP body of known length is: a message the budget has no room
    // for is refused before its bytes are held.
    this.#reservation.charge(length)
    this.#length = length
    if (length === 0) this.#decode(Buffer.alloc(0))
    return offset + taken.length
  }

  /** Reads the message's bytes from `offset`; decodes it once whole. */
  #readMessage (chunk: Buffer, offset: number): number {
    const part = chunk.subarray(offset, offset + this.#length - this.#received)
    this.#received += part.length
    if (this.#received < this.#length) {
      this.#parts.push(part)
    } else {
      this.#decode(this.#parts.length === 0 ? part : Buffer.concat([...this.#parts, part], this.#length))
      this.#parts = []
    }
    return offset + part.length
  }

  /** Decodes the message, what that takes charged first. */
  #decode (bytes: Buffer): void {
    this.#reservation.charge(checkedDecodedBytes(bytes))
    this.#request = decodeModelInferRequest(bytes)
  }

  /** The client sent all: the call runs, as grpc-js runs a unary handler, on its half-close. */
  #halfClosed (): void {
    if (this.#answered) return
    const request = this.#request
    if (request === undefined) {
      this.#send(new CallStatus(Status.UNIMPLEMENTED, `Received no request message for server streaming method ${MODEL_INFER_PATH}`))
      return
    }
    // The message is in: Triton's gRPC server has read it (GRPC_WAITREAD_START to _END).
    this.#trace = new FaceTrace('grpc')
    const call = { call: this, request, reservation: this.#reservation, metadata: () => this.#stream.headers }
    answerModelInfer(this.#options, call, this.#trace)
      .then((response) => this.#respond(response))
      .catch((error: unknown) => this.#fail(error))
  }

  /** The stream can no longer be answered: its client or connection went away. */
  get #gone (): boolean {
    return this.#stream.localEnded
  }

  #respond (response: ModelInferResponse): void {
    if (this.#gone) return
    const frame = new ModelInferResponseFrame(response)
    const maxSendMessageBytes = this.#options.maxSendMessageBytes ?? MAX_MESSAGE_BYTES
    if (frame.messageBytes > maxSendMessageBytes) {
      return this.#send(new CallStatus(Status.RESOURCE_EXHAUSTED, `Sent message larger than max (${frame.messageBytes + MESSAGE_PREFIX_BYTES} vs. ${maxSendMessageBytes})`))
    }
    const stream = this.#stream
    this.#answered = true
    stream.respond(ANSWER_HEADERS)
    stream.write(frame.write())
    stream.end(OK_TRAILERS)
  }

  #fail (error: unknown): void {
    if (error instanceof CallStatus) return this.#send(error)
    const { code = Status.INTERNAL, details = 'Unknown Error' } = toServiceError(error, this.#options.log)
    this.#send(new CallStatus(code, details))
  }

  /** Ends the call with `status` alone (a trailers-only answer, as grpc-js sends an error). */
  #send ({ code, details }: CallStatus): void {
    if (this.#gone || this.#answered) return
    this.#answered = true
    this.#stream.respond([':status', '200', 'content-type', 'application/grpc+proto', 'grpc-status', String(code), 'grpc-message', encodeURI(details)], true)
  }

  /** The call is over: sent, refused, or its client or connection went away before its answer. */
  #close (): void {
    this.#reservation.release()
    if (!this.#answered) {
      this.cancelled = true
      for (const cancel of this.#onCancel) cancel()
    }
    this.#trace?.sent()
  }
}
