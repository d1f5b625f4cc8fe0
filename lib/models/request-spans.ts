/**
 * A request's trace in Triton's OpenTelemetry mode: the instants the table and the face add,
 * made into Triton's spans once the trace is done (trace-spans.ts makes each span). Under
 * `InferRequest` (with the face's instants as events: HTTP_RECV_START, INFER_RESPONSE_COMPLETE,
 * GRPC_SEND_END, ...) the model's span, from REQUEST_START to REQUEST_END with QUEUE_START, and
 * under that `compute` with the COMPUTE_ instants, or an ensemble's steps' model spans (an
 * ensemble computes nothing itself), as Triton's tracer makes them.
 */
import type * as OpenTelemetry from '@opentelemetry/api'
import type { RequestTrace, TracedRequest } from './request-trace'
import type { TraceSpans } from './trace-spans'

/** Instants (`performance.now()`) as wall-clock times, as OpenTelemetry reports them. */
type WallClock = (instant: number) => OpenTelemetry.HrTime

/** Instants of one request as wall-clock times, all through one offset taken now, as Triton takes
 * one per trace: its spans and events nest exactly (the SDK would take an offset of its own for
 * each span). */
function wallClock (): WallClock {
  const offset = Date.now() - performance.now()
  return (instant) => {
    const epochMs = offset + instant
    const seconds = Math.floor(epochMs / 1000)
    return [seconds, Math.min(Math.round((epochMs - seconds * 1000) * 1e6), 999_999_999)]
  }
}

/** The instants of the model's span; the compute span's start with COMPUTE_; the rest are the face's. */
const MODEL_INSTANTS = new Set(['REQUEST_START', 'QUEUE_START', 'REQUEST_END'])
const isCompute = (name: string): boolean => name.startsWith('COMPUTE_')

/** A step's model spans, made under its ensemble's model span (`parent`, Triton's id `parentId`). */
type StepSpans = (parent: OpenTelemetry.Context, parentId: number, at: WallClock) => void

export class RequestSpans implements RequestTrace {
  readonly id: number
  readonly #spans: TraceSpans
  /** The parent of its InferRequest span: the client's trace, or the host's active one. */
  readonly #parent: OpenTelemetry.Context
  /** The ensemble's request this one is a step of: its spans go under the ensemble's. */
  readonly #ensemble: RequestSpans | undefined
  #request: TracedRequest | undefined
  readonly #instants = new Map<string, number>()
  #failure: { error: unknown } | undefined
  readonly #steps: StepSpans[] = []
  /** The table and (once it takes it) the face, and each step still running. */
  #holders = 1

  constructor (spans: TraceSpans, id: number, parent: OpenTelemetry.Context, ensemble?: RequestSpans) {
    this.#spans = spans
    this.id = id
    this.#parent = parent
    this.#ensemble = ensemble
  }

  describe (request: TracedRequest): void {
    this.#request = request
  }

  stamp (name: string, instant: number): void {
    this.#instants.set(name, instant)
  }

  fail (error: unknown): void {
    this.#failure = { error }
  }

  hold (): void {
    this.#holders++
  }

  end (): void {
    if (--this.#holders !== 0) return
    const ensemble = this.#ensemble
    if (ensemble === undefined) return this.#made()
    ensemble.#steps.push((parent, parentId, at) => this.#modelSpans(parent, parentId, at))
    ensemble.end()
  }

  child (id: number): RequestSpans {
    this.hold()
    return new RequestSpans(this.#spans, id, this.#parent, this)
  }

  /** The InferRequest span, from the first instant to the last, and the spans under it. */
  #made (): void {
    const spans = this.#spans
    const at = wallClock()
    const instants = [...this.#instants.values()]
    const [first, last] = [at(Math.min(...instants)), at(Math.max(...instants))]
    const request = spans.start('InferRequest', first, this.#parent)
    for (const [name, instant] of this.#instants) {
      if (!MODEL_INSTANTS.has(name) && !isCompute(name)) request.addEvent(name, at(instant))
    }
    this.#modelSpans(spans.within(this.#parent, request), 0, at)
    if (this.#failure !== undefined) spans.failed(request, this.#failure.error, last)
    request.end(last)
  }

  #modelSpans (parent: OpenTelemetry.Context, parentId: number, at: WallClock): void {
    const spans = this.#spans
    const instant = (name: string): OpenTelemetry.HrTime => at(this.#instants.get(name) as number)
    const modelSpan = spans.modelSpan(parent, this.#request as TracedRequest, this.id, parentId, instant('REQUEST_START'))
    if (this.#instants.has('QUEUE_START')) modelSpan.addEvent('QUEUE_START', instant('QUEUE_START'))
    const within = spans.within(parent, modelSpan)
    for (const step of this.#steps) step(within, this.id, at)
    if (this.#instants.has('COMPUTE_START')) {
      const compute = spans.start('compute', instant('COMPUTE_START'), within)
      for (const [name, time] of this.#instants) if (isCompute(name)) compute.addEvent(name, at(time))
      compute.end(instant('COMPUTE_END'))
    }
    const end = instant('REQUEST_END')
    if (this.#failure !== undefined) spans.failed(modelSpan, this.#failure.error, end)
    modelSpan.addEvent('REQUEST_END', end)
    modelSpan.end(end)
  }
}
