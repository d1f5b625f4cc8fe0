/**
 * ModelStreamInfer for grpc-js over the model table, as Triton's stream handler
 * (src/grpc/stream_infer_handler.cc) behaves: requests in, responses out on one stream, each
 * response naming its request's id. A request that fails answers with `error_message` and the
 * stream goes on. Responses of models that are not decoupled go out in the order their requests
 * came; a decoupled model's go out as it sends them, each with Triton's `triton_final_response`
 * parameter, and its final flag as an empty response when the request asked for one
 * (`triton_enable_empty_final_response`).
 *
 * Every request holds its own leases for its run (a decoupled model's: for all its responses), so
 * an unregister meanwhile is deferred as for ModelInfer; a cancelled stream abandons its requests
 * and ends their leases; a server that stops refuses the requests not yet in flight (read after
 * the stop, or queued for their turn or an instance) and new streams. A response is written only when the stream's `write()` allows, else after
 * its `drain`; while responses wait for the client to read, or `maxRequestsInFlight` requests are
 * unanswered, the stream reads no more requests (HTTP/2 flow control then holds the client back),
 * so a client that stops reading holds a bounded part of the server's memory. Each request is
 * charged to the registry's `inFlight` budget as a ModelInfer call is (its message before it is
 * decoded, when it arrives as bytes, its outputs and their copies), until its response is written.
 */
import { EventEmitter } from 'node:events'
import type { handleBidiStreamingCall, ServerDuplexStream } from '@grpc/grpc-js'
import type { InferParameters, ModelInferRequest, ModelInferResponse, ModelStreamInferResponse } from '../../types/grpc'
import * as errors from '../errors'
import type { InFlightReservation } from '../../types/kserve'
import type { InferRequest } from '../kserve/infer-request'
import { FaceTrace } from '../models/face-trace'
import type { StreamCall } from '../models/model-table'
import { modelInferRequest } from './model-infer'
import { type ModelInferHandlerOptions, OUTPUT_COPIES } from './model-infer-handler'
import { type ReadGate, readGateOf, RefusedMessage, takeReservation } from './received-messages'
import { type RequestParameters, requestParameters } from './request-parameters'
import { toServiceError } from './status'

/** Requests of one stream read and not yet answered, by default. */
export const DEFAULT_STREAM_REQUESTS_IN_FLIGHT = 64

export interface ModelStreamInferOptions extends ModelInferHandlerOptions {
  /** Most requests of one stream read and not yet answered (their responses not yet written):
   * past it, the stream reads no more until one is. Default 64. */
  maxRequestsInFlight?: number
  /** Where the handler's streams are kept, for `OpenStreams.close()` when the server stops. */
  streams?: OpenStreams
}

/** The streams of a handler: what they hold, and their end when the server stops. */
export class OpenStreams extends EventEmitter<{ change: [] }> {
  readonly #streams = new Set<InferStream>()
  #closing = false

  /** Set by `close()`: new requests are refused. */
  get closing (): boolean {
    return this.#closing
  }

  add (stream: InferStream): void {
    this.#streams.add(stream)
    this.emit('change')
  }

  delete (stream: InferStream): void {
    if (this.#streams.delete(stream)) this.emit('change')
  }

  /** What the open streams hold: requests read and not yet answered; streams not reading
   * (`paused`), of them those whose client reads too slowly for their responses (`blocked`), and
   * those whose next request the plugin's listener holds back in HTTP/2 flow control (`held`:
   * grpc-js asked for it, the stream did not). */
  counters (): { streams: number, requestsInFlight: number, paused: number, blocked: number, held: number } {
    let requestsInFlight = 0
    let paused = 0
    let blocked = 0
    let held = 0
    for (const stream of this.#streams) {
      requestsInFlight += stream.inFlight
      if (stream.paused) paused++
      if (stream.paused && stream.blocked) blocked++
      if (stream.held) held++
    }
    return { streams: this.#streams.size, requestsInFlight, paused, blocked, held }
  }

  /**
   * Refuses new requests on every stream (Triton's UNAVAILABLE text), and new streams with it as
   * their status; refuses so too each request read and still queued (waiting for its sequence's
   * turn or a model instance: not yet in flight); ends each stream once its requests are
   * answered: with status OK if its client ended its side, else with the refusal as its status. Resolves true once all have ended, or false after
   * `graceMs` if some have not (a client that reads nothing): the server then cancels them.
   */
  async close (graceMs: number): Promise<boolean> {
    this.#closing = true
    for (const stream of [...this.#streams]) stream.endWhenAnswered()
    if (this.#streams.size === 0) return true
    let timer: NodeJS.Timeout | undefined
    let listener: (() => void) | undefined
    try {
      return await new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), graceMs)
        listener = () => { if (this.#streams.size === 0) resolve(true) }
        this.on('change', listener)
      })
    } finally {
      clearTimeout(timer)
      this.off('change', listener as () => void)
    }
  }
}

type Call = ServerDuplexStream<ModelInferRequest | RefusedMessage, ModelStreamInferResponse>

const NO_BYTES = new Uint8Array(0)

/** The ModelInferResponse of `infer`'s outputs (in their regions, or in `raw_output_contents`). */
function inferResponse (infer: InferRequest): ModelInferResponse {
  const { outputs } = infer.encode()
  return {
    model_name: infer.model.name,
    // The model table always names the version it runs.
    model_version: infer.modelVersion as string,
    id: infer.id ?? '',
    outputs: outputs.map(({ name, datatype, shape }) => ({ name, datatype, shape })),
    raw_output_contents: outputs.map(({ binary }) => binary ?? NO_BYTES)
  }
}

const finalParameter = (final: boolean): InferParameters => ({ triton_final_response: { bool_param: final } })

/** One response of a request, as Triton sends it on a stream: `response`, made for this message
 * alone, takes its final flag (set on it, not on a copy: see CONTRIBUTING.md's "The request path"). */
function streamResponse (response: ModelInferResponse, final: boolean): ModelStreamInferResponse {
  return { error_message: '', infer_response: Object.assign(response, { parameters: finalParameter(final) }) }
}

/** A failed request's response: its id (and, once it ran, its model, version and final flag), as Triton's. */
function errorResponse ({ id, model_name: model, model_version: version }: ModelInferRequest, message: string, ran: boolean): ModelStreamInferResponse {
  return {
    error_message: message,
    infer_response: ran ? { id, model_name: model, model_version: version, parameters: finalParameter(true) } : { id }
  }
}

/** A response of a model that is not decoupled, waiting for the responses of the requests before
 * it, and what its request holds until it is written. */
interface Ordered {
  message?: ModelStreamInferResponse
  reservation: InFlightReservation
}

/** What a request's failure names of it when its message could not be decoded. */
const UNREAD: ModelInferRequest = { id: '', model_name: '', model_version: '' } as ModelInferRequest

class InferStream {
  #inFlight = 0
  /** The responses of models that are not decoupled, in the order their requests came. */
  readonly #ordered: Ordered[] = []
  /** Responses waiting for `write()` to allow them. */
  readonly #writes: Array<{ message: ModelStreamInferResponse, written: () => void }> = []
  readonly #requests = new Set<InferRequest>()
  /** Of those, the ones whose run has not begun. */
  readonly #queued = new Set<InferRequest>()
  readonly #maxInFlight: number
  /** The first failure closes the stream with its status instead (Triton's `triton_grpc_error` header). */
  readonly #grpcErrors: boolean
  #blocked = false
  #reportedBlocked = false
  #paused = false
  #readEnded = false
  #ended = false
  /** The plugin's listener: how the stream stops grpc-js reading ahead while paused. */
  readonly #gate: ReadGate | undefined

  constructor (private readonly call: Call, private readonly options: ModelStreamInferOptions, private readonly streams: OpenStreams) {
    this.#maxInFlight = options.maxRequestsInFlight ?? DEFAULT_STREAM_REQUESTS_IN_FLIGHT
    this.#grpcErrors = call.metadata.get('triton_grpc_error')[0] === 'true'
    this.#gate = readGateOf(call)
    if (this.#gate !== undefined) {
      const changed = () => streams.emit('change')
      this.#gate.onWait = changed
    }
    streams.add(this)
    call.on('data', this.#onData)
    call.on('end', () => {
      this.#readEnded = true
      this.#endIfAnswered()
    })
    call.on('drain', () => {
      this.#blocked = false
      this.#flush()
    })
    call.once('cancelled', () => this.#cancel())
    // Ended once its last response is flushed to the client, not when it is handed to the stream.
    call.once('finish', () => streams.delete(this))
    // The client may go without a cancel grpc-js reports (a reset, a closed connection).
    call.once('close', () => this.#cancel())
    if (streams.closing) this.endWhenAnswered()
  }

  get inFlight (): number {
    return this.#inFlight
  }

  get paused (): boolean {
    return this.#paused
  }

  get blocked (): boolean {
    return this.#blocked
  }

  get held (): boolean {
    return this.#gate?.waiting === true
  }

  /** The server is stopping: the requests still queued are refused, and the stream ends once
   * every request read is answered. */
  endWhenAnswered (): void {
    for (const infer of this.#queued) infer.abandon(errors.streamShuttingDown())
    this.#endIfAnswered()
  }

  /** Ends the stream with Triton's refusal as its status: the server is stopping. */
  #refuse (): void {
    this.#stopReading()
    this.call.emit('error', toServiceError(errors.streamShuttingDown()))
    this.streams.delete(this)
  }

  /** Requests are read until the stream ends, at either end. */
  readonly #onData = (message: ModelInferRequest | RefusedMessage) => this.#receive(message)

  #receive (message: ModelInferRequest | RefusedMessage): void {
    this.#inFlight++
    this.#updateFlow()
    this.streams.emit('change')
    // The plugin's listener charged the message and its decoded form already.
    const reservation = takeReservation(message) ?? this.options.registry.inFlight.open()
    let request = UNREAD
    let parameters: RequestParameters
    try {
      if (message instanceof RefusedMessage) throw message.refusal
      request = message
      if (this.streams.closing) throw errors.streamShuttingDown()
      parameters = requestParameters(request.parameters)
    } catch (error) {
      return this.#failOrdered(this.#reserve(reservation), request, error, false)
    }
    let decoupled = false
    try {
      decoupled = this.options.models.isDecoupled(request.model_name, request.model_version === '' ? undefined : request.model_version)
    } catch {
      // An unknown model or version: the table answers it, in its place in the order.
    }
    this.#infer(request, parameters, decoupled, reservation)
  }

  #infer (request: ModelInferRequest, parameters: RequestParameters, decoupled: boolean, reservation: InFlightReservation): void {
    const { registry, models, limits } = this.options
    const slot = decoupled ? undefined : this.#reserve(reservation)
    let infer: InferRequest | undefined
    let ran = false
    // The message is in: Triton's gRPC server has read it (GRPC_WAITREAD_START to _END).
    const trace = new FaceTrace('grpc')
    const call: StreamCall<ModelInferResponse> = {
      traced: (taken) => trace.take(taken),
      read: (signature, modelVersion) => {
        infer = modelInferRequest(request,
          { registry, model: signature, modelVersion, limits, sequence: parameters.sequence, reservation, outputCopies: OUTPUT_COPIES })
        this.#requests.add(infer)
        this.#queued.add(infer)
        return infer
      },
      beforeRun: () => { ran = true },
      // The stream's metadata: every request of a stream continues the trace its client sent.
      traceCarrier: () => this.call.metadata.getMap(),
      started: (read) => { this.#queued.delete(read) },
      respond: (read) => {
        const response = inferResponse(read)
        // A single response holds no byte of shared memory: its leases end now.
        if (!decoupled) read.release()
        return response
      },
      send: async (response, final) => {
        if (!decoupled) {
          (slot as Ordered).message = streamResponse(response as ModelInferResponse, final)
          return
        }
        if (response !== undefined) await this.#write(streamResponse(response, final))
        else if (parameters.emptyFinalResponse) {
          const { id, model_name: model, model_version: version } = request
          await this.#write(streamResponse({ id, model_name: model, model_version: version } as ModelInferResponse, true))
        }
      }
    }
    const version = request.model_version === '' ? undefined : request.model_version
    models.stream(request.model_name, version, call).then(() => {
      trace.sending(true)
      if (slot !== undefined) this.#flushOrdered()
      else this.#answered()
    }, (error: unknown) => {
      trace.sending(false)
      // A stream that ended (cancelled, or closed by a failure) answers nothing more.
      if (this.#ended) return
      if (slot !== undefined) return this.#failOrdered(slot, request, error, ran)
      this.#fail(request, error, ran, (message) => this.#write(message).then(() => this.#answered()))
    }).finally(() => {
      // Its last response handed to grpc-js (a decoupled model's, written).
      trace.sent()
      // A decoupled model's responses are all written (or dropped) by now.
      if (decoupled) reservation.release()
      if (infer === undefined) return
      this.#requests.delete(infer)
      this.#queued.delete(infer)
      infer.release()
    })
  }

  /** A place in the order of responses, for a request whose model is not decoupled. */
  #reserve (reservation: InFlightReservation): Ordered {
    const slot: Ordered = { reservation }
    this.#ordered.push(slot)
    return slot
  }

  #failOrdered (slot: Ordered, request: ModelInferRequest, error: unknown, ran: boolean): void {
    this.#fail(request, error, ran, (message) => {
      slot.message = message
      this.#flushOrdered()
    })
  }

  /** Answers a failed request with `answer(message)`, or with `triton_grpc_error` closes the stream with its status. */
  #fail (request: ModelInferRequest, error: unknown, ran: boolean, answer: (message: ModelStreamInferResponse) => void): void {
    const status = toServiceError(error, this.options.log)
    if (!this.#grpcErrors) return answer(errorResponse(request, status.details as string, ran))
    this.#stopReading()
    for (const infer of this.#requests) infer.abandon()
    this.#dropWrites()
    this.call.emit('error', status)
    this.streams.delete(this)
  }

  /** Writes the responses at the head of the order that are ready. */
  #flushOrdered (): void {
    while (this.#ordered.length > 0 && this.#ordered[0].message !== undefined) {
      const { message, reservation } = this.#ordered.shift() as Required<Ordered>
      this.#write(message).then(() => {
        reservation.release()
        this.#answered()
      }, () => {})
    }
  }

  /** Resolves once `message` is handed to the stream (at once, dropped, on a stream that ended). */
  #write (message: ModelStreamInferResponse): Promise<void> {
    if (this.#ended) return Promise.resolve()
    return new Promise((resolve) => {
      this.#writes.push({ message, written: resolve })
      this.#flush()
    })
  }

  #flush (): void {
    while (!this.#blocked && this.#writes.length > 0) {
      const { message, written } = this.#writes.shift() as { message: ModelStreamInferResponse, written: () => void }
      this.#blocked = !this.call.write(message)
      written()
    }
    this.#updateFlow()
  }

  /** One request fully answered: its last response handed to the stream. */
  #answered (): void {
    this.#inFlight--
    this.#updateFlow()
    this.#endIfAnswered()
  }

  /** Reads requests only while their responses can be written and fewer than the limit are unanswered. */
  #updateFlow (): void {
    if (this.#ended) return
    const pause = this.#blocked || this.#inFlight >= this.#maxInFlight
    if (pause === this.#paused && this.#blocked === this.#reportedBlocked) return
    this.#reportedBlocked = this.#blocked
    const changed = pause !== this.#paused
    if (changed) {
      this.#paused = pause
      if (pause) this.call.pause()
      else this.call.resume()
    }
    this.streams.emit('change')
    // Last: released, the gate may hand over the next request at once.
    if (changed) this.#gate?.hold(pause)
  }

  /** Ends the stream once every request read is answered: OK when its client ended its side;
   * else (the server is stopping) with Triton's refusal, so that a client still sending learns
   * that what it sends now is not read, instead of waiting for answers. */
  #endIfAnswered (): void {
    if (this.#ended || this.#inFlight > 0 || !(this.#readEnded || this.streams.closing)) return
    if (!this.#readEnded) return this.#refuse()
    this.#stopReading()
    this.call.end()
  }

  /** The stream has ended: no more requests are read, no more responses written. */
  #stopReading (): void {
    this.#ended = true
    this.call.off('data', this.#onData)
  }

  #dropWrites (): void {
    for (const { written } of this.#writes.splice(0)) written()
    for (const { reservation } of this.#ordered.splice(0)) reservation.release()
  }

  /** The client went: every request is abandoned (its run stopped where it looks), its leases end. */
  #cancel (): void {
    if (!this.#ended) {
      this.#stopReading()
      for (const infer of this.#requests) {
        infer.abandon()
        infer.release()
      }
      this.#dropWrites()
    }
    this.streams.delete(this)
  }
}

/** ModelStreamInfer over `options.models`, for `server.addService(inferenceService().service, ...)`. */
export function modelStreamInferHandler (options: ModelStreamInferOptions): handleBidiStreamingCall<ModelInferRequest | Buffer, ModelStreamInferResponse> {
  const streams = options.streams ?? new OpenStreams()
  return (call) => { new InferStream(call, options, streams) } // eslint-disable-line no-new
}
