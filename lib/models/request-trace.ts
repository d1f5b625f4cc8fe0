/**
 * The trace of one sampled request while it is taken, in Triton's objects (`trace_mode: triton`):
 * one object naming its model (`{"id","model_name","model_version"}`, with `request_id` and
 * `parent_id` when it has them), and one per instant (`{"id","timestamps":[{"name","ns"}]}`),
 * in the order they are added. Both the table and the face that received the request add to it
 * (Triton's core and its HTTP or gRPC server: face-trace.ts): it is written once each has ended
 * it, with the traces of an ensemble's steps (its children) after its own objects.
 */

/** What the table tells of the request a trace follows. */
export interface TracedRequest {
  model: string
  /** The version that ran (an integer, as Triton writes it). */
  version: string
  /** The request's id, if the client gave one. */
  requestId?: string
}

export class RequestTrace {
  readonly id: number
  readonly #objects: string[] = []
  readonly #children: string[] = []
  readonly #ns: (instant: number) => string
  readonly #written: (text: string) => void
  readonly #parentId: number | undefined
  /** The table and (once it takes it) the face, and each step still running. */
  #holders = 1

  /** `ns`: an instant (`performance.now()`) in Triton's nanoseconds; `written`: takes the trace's
   * objects, joined as in Triton's file, once it has ended. */
  constructor (id: number, ns: (instant: number) => string, written: (text: string) => void, parentId?: number) {
    this.id = id
    this.#ns = ns
    this.#written = written
    this.#parentId = parentId
  }

  /** Adds the request's description (Triton writes it with its REQUEST_START). */
  describe ({ model, version, requestId }: TracedRequest): void {
    const id = requestId === undefined || requestId === '' ? '' : `,"request_id":${JSON.stringify(requestId)}`
    const parent = this.#parentId === undefined ? '' : `,"parent_id":${this.#parentId}`
    this.#objects.push(`{"id":${this.id},"model_name":${JSON.stringify(model)},"model_version":${version}${id}${parent}}`)
  }

  /** Adds one instant (`performance.now()`), named as Triton names it. */
  stamp (name: string, instant: number): void {
    this.#objects.push(`{"id":${this.id},"timestamps":[{"name":"${name}","ns":${this.#ns(instant)}}]}`)
  }

  /** One more holder (the face, or a step's trace): the trace is written once each has ended it. */
  hold (): void {
    this.#holders++
  }

  /** Ends one holder's part. */
  end (): void {
    if (--this.#holders === 0) this.#written([...this.#objects, ...this.#children].join(','))
  }

  /** The trace of a step of this (ensemble's) request, numbered `id`: written with this one. */
  child (id: number): RequestTrace {
    this.hold()
    return new RequestTrace(id, this.#ns, (text) => {
      this.#children.push(text)
      this.end()
    }, this.id)
  }
}
