/**
 * A request's trace for a trace file, in Triton's objects (`trace_mode: triton`): one object
 * naming its model (`{"id","model_name","model_version"}`, with `request_id` and `parent_id` when
 * it has them), and one per instant (`{"id","timestamps":[{"name","ns"}]}`), in the order they
 * are added. It is written once each holder has ended it, with the traces of an ensemble's steps
 * (its children) after its own objects.
 */
import type { RequestTrace, TracedRequest } from './request-trace'

export class FileTrace implements RequestTrace {
  readonly id: number
  /** Its objects so far, joined as in Triton's file (each after a comma). */
  #objects = ''
  /** Its steps' traces (an ensemble's), once each has ended. */
  #children = ''
  readonly #ns: (instant: number) => string
  readonly #written: (text: string) => void
  readonly #parentId: number | undefined
  /** The table and (once it takes it) the face, and each step still running. */
  #holders = 1

  /** `ns`: an instant (`performance.now()`) in Triton's nanoseconds, as its text; `written`: takes the trace's
   * objects, joined as in Triton's file, once it has ended. */
  constructor (id: number, ns: (instant: number) => string, written: (text: string) => void, parentId?: number) {
    this.id = id
    this.#ns = ns
    this.#written = written
    this.#parentId = parentId
  }

  describe ({ model, version, requestId }: TracedRequest): void {
    const id = requestId === undefined || requestId === '' ? '' : `,"request_id":${JSON.stringify(requestId)}`
    const parent = this.#parentId === undefined ? '' : `,"parent_id":${this.#parentId}`
    this.#objects += `,{"id":${this.id},"model_name":${JSON.stringify(model)},"model_version":${version}${id}${parent}}`
  }

  stamp (name: string, instant: number): void {
    this.#objects += `,{"id":${this.id},"timestamps":[{"name":"${name}","ns":${this.#ns(instant)}}]}`
  }

  /** Triton's trace file has no errors: a failed request's trace has the instants it reached. */
  fail (): void {}

  hold (): void {
    this.#holders++
  }

  end (): void {
    if (--this.#holders === 0) this.#written(this.#objects.slice(1) + this.#children)
  }

  child (id: number): FileTrace {
    this.hold()
    return new FileTrace(id, this.#ns, (text) => {
      this.#children += ',' + text
      this.end()
    }, this.id)
  }
}
