/**
 * What the plugin's listener receives is bounded before grpc-js holds it. Every request message
 * is charged to the registry's in-flight budget as it arrives, with what its decoded form will
 * take, and only then decoded (a compressed one is charged before it is inflated, and inflated
 * into one buffer of its size); the charge goes with the decoded message to its handler
 * (`takeReservation`), or is given back when the call is over. A stream reads its next message
 * only while its handler takes them (`readGateOf`): grpc-js would otherwise read ahead of a paused
 * stream into its own buffer, 16 messages deep, charged to nothing; held, what the client goes on
 * sending waits in HTTP/2 flow control, on its side.
 *
 * A refused message (the budget is held, or its decoded form would cost too much) ends a unary
 * call with its status, before its handler runs; on a stream it reaches the handler as a
 * `RefusedMessage`, answered as that request's error, and the stream goes on.
 */
import type { Metadata, Responder, ServerInterceptingCallInterface, ServerInterceptor, StatusObject } from '@grpc/grpc-js'
import type { InFlightBudget, InFlightReservation } from '../../types/kserve'
import { TritonError } from '../errors'
import { checkedDecodedCost } from './decoded-cost'
import { type Compression, inflateMessage } from './inflated-message'
import { grpcJs } from './peers'
import type { RequestDecoder } from './request-decoders'
import { type ErrorLogger, toServiceError } from './status'

/** A message the listener refused before its stream's handler took it: answered as that request's
 * error. Its handler takes it (`takeReservation`) as any other. */
export class RefusedMessage {
  constructor (readonly refusal: unknown) {}
}

/** How a stream's handler holds the listener's reading of its messages. */
export interface ReadGate {
  /** While held, a read grpc-js asks for waits; it is made once released. */
  hold(held: boolean): void
  /** True while a read waits for the gate. */
  readonly waiting: boolean
  /** Told each time a read starts to wait. */
  onWait?: () => void
}

const RECEIVED = Symbol('fastify-triton-shm: what a received message is charged to')
const INFLATED = Symbol('fastify-triton-shm: a message the listener inflated, or its refusal')
const READ_GATE = Symbol('fastify-triton-shm: the read gate of this call')

/** What the handler takes with a message: its charge (none for a refused one). */
interface Received { reservation?: InFlightReservation, take: () => void }
type Charged = object & { [RECEIVED]?: Received }
type Inflated = Buffer & { [INFLATED]?: { reservation: InFlightReservation } | { refusal: unknown } }
type Marked = Metadata & { [READ_GATE]?: ReadGate }

/** The reservation the listener charged `message` to; its holder from then on is the caller, who
 * gives it back (undefined for a message that did not come through the listener). */
export function takeReservation (message: unknown): InFlightReservation | undefined {
  const received = (message as Charged)[RECEIVED]
  received?.take()
  return received?.reservation
}

/** The read gate of a stream received by the listener (undefined elsewhere). */
export const readGateOf = (call: { metadata: Metadata }): ReadGate | undefined => (call.metadata as Marked)[READ_GATE]

export interface ReceivedMessagesOptions {
  inFlight: InFlightBudget
  /** The largest message received: a compressed one stops inflating past it. */
  maxMessageBytes: number
  /** How each RPC's request is measured and decoded, by its path. */
  decoderOf: (path: string) => RequestDecoder
  log?: ErrorLogger
}

/** grpc-js's inflation of a call's messages, which the listener replaces with its own. */
interface Inflating {
  decompressMessage: (framed: Buffer, encoding: string) => Buffer | Promise<Buffer>
}

/**
 * The listener's interceptor: see above. It must come first among the server's interceptors:
 * grpc-js hands the first one its own call, whose inflation it replaces.
 */
export function receivedMessages ({ inFlight, maxMessageBytes, decoderOf, log }: ReceivedMessagesOptions): ServerInterceptor {
  const grpc = grpcJs()

  /** A call whose stream reads a message only once its handler took the one before, and not
   * while the handler holds it. (grpc-js's stream asks for the next message before it hands the
   * last one to the handler, and goes on asking until 16 wait in its buffer.) */
  class GatedCall extends grpc.ServerInterceptingCall implements ReadGate {
    #held = false
    /** Messages passed on that the handler has not taken yet. */
    #untaken = 0
    /** grpc-js asked for a message that is not read yet. */
    #asked = false
    onWait?: () => void

    constructor (next: ServerInterceptingCallInterface, responder: Responder, private readonly gated: boolean) {
      super(next, responder)
    }

    get waiting (): boolean {
      return this.#asked && this.#held
    }

    hold (held: boolean): void {
      this.#held = held
      // Not now: the handler that releases it is in the middle of taking a message.
      if (!held) process.nextTick(() => this.#read())
    }

    passedOn (): void {
      this.#untaken++
    }

    took (): void {
      this.#untaken--
      process.nextTick(() => this.#read())
    }

    override startRead (): void {
      if (!this.gated) return super.startRead()
      this.#asked = true
      this.#read()
    }

    #read (): void {
      if (!this.#asked || this.#untaken > 0) return
      if (this.#held) return this.onWait?.()
      this.#asked = false
      super.startRead()
    }
  }

  return (method, call) => {
    const decoder = decoderOf(method.path)
    /** Charged here and not yet taken by a handler: given back when the call is over. */
    const untaken = new Set<InFlightReservation>()
    const open = () => {
      const reservation = inFlight.open()
      untaken.add(reservation)
      return reservation
    }
    const release = (reservation: InFlightReservation) => {
      untaken.delete(reservation)
      reservation.release()
    }
    let refused = false
    /** Hands `message` to the handler, which takes it (and its charge) with `takeReservation`. */
    const passOn = (message: Charged, reservation: InFlightReservation | undefined, next: (message: unknown) => void) => {
      message[RECEIVED] = {
        reservation,
        take: () => {
          if (reservation !== undefined) untaken.delete(reservation)
          gated.took()
        }
      }
      gated.passedOn()
      next(message)
    }

    inflateHere(call, async (payload, compression) => {
      const reservation = open()
      let message: Inflated
      try {
        message = await inflateMessage(payload, compression, maxMessageBytes, reservation)
      } catch (error) {
        release(reservation)
        // grpc-js's own statuses end the call, as its own inflation does; the budget's refusal is the message's.
        if (!(error instanceof TritonError)) throw error
        return Object.assign(Buffer.alloc(0), { [INFLATED]: { refusal: error } })
      }
      message[INFLATED] = { reservation }
      return message
    })

    const receive = (bytes: Inflated): { message: Charged, reservation: InFlightReservation } | { refusal: unknown } => {
      const inflated = bytes[INFLATED]
      if (inflated !== undefined && 'refusal' in inflated) return inflated
      const reservation = inflated?.reservation ?? open()
      try {
        // An inflated message is charged already; its decoded form is allowed less.
        const compressed = inflated !== undefined
        const decoded = checkedDecodedCost(decoder.message, bytes.length, decoder.decodedBytes(bytes), compressed)
        reservation.charge((compressed ? 0 : bytes.length) + decoded)
        return { message: decoder.decode(bytes) as Charged, reservation }
      } catch (error) {
        release(reservation)
        return { refusal: error }
      }
    }

    const gated: GatedCall = new GatedCall(call, {
      start: (next) => next({
        onReceiveMetadata: (metadata: Marked, next) => {
          metadata[READ_GATE] = gated
          next(metadata)
        },
        onReceiveMessage: (bytes: Inflated, next) => {
          const received = receive(bytes)
          if ('message' in received) return passOn(received.message, received.reservation, next)
          if (method.requestStream) return passOn(new RefusedMessage(received.refusal), undefined, next)
          refused = true
          call.sendStatus(toServiceError(received.refusal, log) as StatusObject)
        },
        // A unary call refused has its status: its handler never runs.
        onReceiveHalfClose: (next) => { if (!refused) next() },
        onCancel: () => {
          for (const reservation of untaken) reservation.release()
          untaken.clear()
        }
      })
    }, method.requestStream)
    return gated
  }
}

/** Makes grpc-js hand `call`'s compressed messages to `inflate`, their other encodings to its own. */
function inflateHere (call: ServerInterceptingCallInterface, inflate: (payload: Buffer, compression: Compression) => Promise<Buffer>): void {
  const base = call as unknown as Inflating
  const grpcJsOwn = base.decompressMessage
  const decompressMessage: Inflating['decompressMessage'] = (framed, encoding) => encoding === 'gzip' || encoding === 'deflate'
    ? inflate(framed.subarray(5), encoding)
    : grpcJsOwn.call(base, framed, encoding)
  base.decompressMessage = decompressMessage
}
