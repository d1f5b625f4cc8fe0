/**
 * A face's part of a request's trace (Triton's HTTP or gRPC server's): made for each request, it
 * holds nothing until the table tells it the request is traced (`take`, the call's `traced`).
 * Then it adds the instants the request began to arrive and was whole (the face made it), and, once the face answers, that
 * its response was complete (when it succeeded), and when its sending started and ended.
 */
import type { RequestTrace } from './request-trace'

/** The face's own instants, in Triton's names (its HTTP and gRPC servers'). */
export const FACE_INSTANTS = {
  http: { received: 'HTTP_RECV_START', read: 'HTTP_RECV_END', sending: 'HTTP_SEND_START', sent: 'HTTP_SEND_END' },
  grpc: { received: 'GRPC_WAITREAD_START', read: 'GRPC_WAITREAD_END', sending: 'GRPC_SEND_START', sent: 'GRPC_SEND_END' }
} as const

export class FaceTrace {
  readonly #names: typeof FACE_INSTANTS[keyof typeof FACE_INSTANTS]
  readonly #received: number
  /** The face has the whole request: now. */
  readonly #read = performance.now()
  #trace: RequestTrace | undefined

  /** `received`: the instant (`performance.now()`) the request began to arrive (default: now). */
  constructor (transport: keyof typeof FACE_INSTANTS, received?: number) {
    this.#names = FACE_INSTANTS[transport]
    this.#received = received ?? this.#read
  }

  /** Whether the request is traced. */
  get traced (): boolean {
    return this.#trace !== undefined
  }

  /** The table's call `traced`: the request, read, is traced. */
  take (trace: RequestTrace): void {
    this.#trace = trace
    trace.hold()
    trace.stamp(this.#names.received, this.#received)
    trace.stamp(this.#names.read, this.#read)
  }

  /** The face starts sending its answer: `responded` if it is a response (not an error). */
  sending (responded: boolean): void {
    if (this.#trace === undefined) return
    const now = performance.now()
    if (responded) this.#trace.stamp('INFER_RESPONSE_COMPLETE', now)
    this.#trace.stamp(this.#names.sending, now)
  }

  /** The answer is sent (or the client went away): the face's part ends. */
  sent (): void {
    if (this.#trace === undefined) return
    this.#trace.stamp(this.#names.sent, performance.now())
    this.#trace.end()
  }
}
