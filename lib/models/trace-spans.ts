/**
 * Triton's OpenTelemetry trace mode (`trace_mode: opentelemetry`): a sampled request's spans, made
 * through `@opentelemetry/api` alone (an optional peer dependency, loaded only in this mode). The
 * host's registered TracerProvider records and exports them; with none, the API's no-op drops
 * them. Named as Triton's tracer names them: `InferRequest`, under it the model's span (named after
 * the model, with Triton's `triton.*` attributes and its REQUEST_START, QUEUE_START and REQUEST_END
 * events), under that `compute` (COMPUTE_START, COMPUTE_INPUT_END, COMPUTE_OUTPUT_START,
 * COMPUTE_END), each span of kind SERVER, from tracer `triton-server`.
 */
import type * as OpenTelemetry from '@opentelemetry/api'
import type { OperationSpanOptions } from '../registry/operation-spans'
import { optionalPeer } from '../util/optional-peer'
import type { TraceSampler } from './trace-settings'

type Api = typeof OpenTelemetry

/** A request's instants (`performance.now()`): the tracer's `RequestTimes`. */
interface SpanTimes { start: number, read: number, runStart: number, ran: number, end: number }

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

/** What carries a request's W3C trace context (`traceparent`, `tracestate`): its HTTP headers, or
 * its gRPC metadata as a map; read by the host's registered propagator. */
export type TraceCarrier = Readonly<Record<string, unknown>>

/** Triton's tracer name (`kTritonTracer`). */
export const TRACER_NAME = 'triton-server'

const FEATURE = 'fastify-triton-shm: trace mode opentelemetry'

/** Makes the spans of one request under `parent` (its InferRequest's, or its ensemble's model
 * span), `parentId` its parent's Triton trace id, timed through `at`. */
type ModelSpans = (parent: OpenTelemetry.Context, parentId: number, at: WallClock) => void

/** A sampled request in `opentelemetry` mode: its setting, and the parent of its spans; a step
 * of an ensemble, its ensemble's request. */
export class RequestSpans {
  readonly sampler: TraceSampler
  readonly parent: OpenTelemetry.Context
  /** The ensemble's request this one is a step of: its spans go under the ensemble's. */
  readonly ensemble: RequestSpans | undefined
  /** Its steps' spans (an ensemble's), made under its model span once it ends. */
  readonly steps: ModelSpans[] = []

  constructor (sampler: TraceSampler, parent: OpenTelemetry.Context, ensemble?: RequestSpans) {
    this.sampler = sampler
    this.parent = parent
    this.ensemble = ensemble
  }

  /** A step of this (an ensemble's) request: traced with it, as Triton traces an ensemble's steps. */
  step (): RequestSpans {
    return new RequestSpans(this.sampler, this.parent, this)
  }
}

/** Where a request's spans go: the client's trace, or the host's active one. */
export interface SpanParent {
  readonly context: OpenTelemetry.Context
  /** The client sent a trace context the host's propagator read (Triton traces every such request). */
  readonly sent: boolean
}

export class TraceSpans {
  readonly #api: Api
  readonly #tracer: OpenTelemetry.Tracer
  /** Triton's trace ids, counted from 1 (its `triton.trace_id`), as its spans are made. */
  #lastId = 0

  /** Loads @opentelemetry/api (`load`: `require`, or a stand-in): throws
   * `ERR_SHM_MISSING_PEER_DEPENDENCY` naming it when it is not installed. */
  constructor (load?: (name: string) => unknown) {
    this.#api = optionalPeer<Api>('@opentelemetry/api', FEATURE, load)
    // The API's proxy tracer: it follows whichever provider the host registers, even later.
    this.#tracer = this.#api.trace.getTracer(TRACER_NAME)
  }

  /**
   * The parent of a request's spans. Triton's rule: the trace context its client sent, read by
   * the host's registered propagator (the API alone has none, and reads nothing). A host whose own
   * instrumentation (e.g. @fastify/otel) already continues that trace has its span active: it is
   * the parent then, so the spans sit under the host's route span. Without one sent, the active
   * context (the host's span, if any).
   */
  parentOf (carrier: TraceCarrier | undefined): SpanParent {
    const { context, trace, ROOT_CONTEXT } = this.#api
    const active = context.active()
    const sent = carrier === undefined ? undefined : this.#extract(carrier)
    if (sent === undefined || !trace.isSpanContextValid(sent)) return { context: active, sent: false }
    const host = trace.getSpanContext(active)
    if (host?.traceId === sent.traceId) return { context: active, sent: true }
    return { context: trace.setSpanContext(ROOT_CONTEXT, sent), sent: true }
  }

  /** The spans of a request that succeeded, timed at `times`: its model's span with its events,
   * and under it `compute`, or an ensemble's steps' spans (an ensemble computes nothing itself). */
  record (trace: RequestSpans, model: string, version: string, requestId: string | undefined, times: SpanTimes): void {
    this.#end(trace, times.start, times.end, undefined, (parent, parentId, at) => {
      const [start, read, runStart, ran, end] = [times.start, times.read, times.runStart, times.ran, times.end].map(at)
      const id = ++this.#lastId
      const modelSpan = this.#modelSpan(parent, parentId, id, model, version, requestId, start)
      modelSpan.addEvent('QUEUE_START', read)
      const within = this.#api.trace.setSpan(parent, modelSpan)
      if (!this.#steps(trace, within, id, at)) {
        const compute = this.#start('compute', runStart, within)
        compute.addEvent('COMPUTE_START', runStart)
        compute.addEvent('COMPUTE_INPUT_END', runStart)
        compute.addEvent('COMPUTE_OUTPUT_START', ran)
        compute.addEvent('COMPUTE_END', end)
        compute.end(end)
      }
      modelSpan.addEvent('REQUEST_END', end)
      modelSpan.end(end)
    })
  }

  /** The spans of a request that failed (`error`), from `startedAt` to now, with the error recorded. */
  fail (trace: RequestSpans, model: string, version: string, requestId: string | undefined, startedAt: number, error: unknown): void {
    const failedAt = performance.now()
    this.#end(trace, startedAt, failedAt, { error }, (parent, parentId, at) => {
      const [start, now] = [at(startedAt), at(failedAt)]
      const id = ++this.#lastId
      const modelSpan = this.#modelSpan(parent, parentId, id, model, version, requestId, start)
      this.#steps(trace, this.#api.trace.setSpan(parent, modelSpan), id, at)
      this.#failed(modelSpan, error, now)
      modelSpan.addEvent('REQUEST_END', now)
      modelSpan.end(now)
    })
  }

  /** Ends a request: a step's spans wait for its ensemble's model span; a request's go under its
   * InferRequest span, from `start` to `end`, failed with `failure`'s error if given. */
  #end (trace: RequestSpans, start: number, end: number, failure: { error: unknown } | undefined, spans: ModelSpans): void {
    if (trace.ensemble !== undefined) {
      trace.ensemble.steps.push(spans)
      return
    }
    const at = wallClock()
    const request = this.#start('InferRequest', at(start), trace.parent)
    spans(this.#api.trace.setSpan(trace.parent, request), 0, at)
    if (failure !== undefined) this.#failed(request, failure.error, at(end))
    request.end(at(end))
  }

  /** Makes the spans of an ensemble's steps under its model span (`within`); false for a request
   * that had none. */
  #steps (trace: RequestSpans, within: OpenTelemetry.Context, id: number, at: WallClock): boolean {
    for (const spans of trace.steps) spans(within, id, at)
    return trace.steps.length > 0
  }

  /** A span of one call of the shared memory API, under the trace its client sent, or the active
   * one: `end` ends it, with the error that refused the call. */
  operation ({ name, region, carrier }: OperationSpanOptions): (error?: unknown) => void {
    const span = this.#tracer.startSpan(name, {
      kind: this.#api.SpanKind.SERVER,
      ...(region !== undefined && { attributes: { 'triton.region_name': region } })
    }, this.parentOf(carrier).context)
    return (error) => {
      if (error !== undefined) this.#failed(span, error)
      span.end()
    }
  }

  /** The span context the client sent, as the host's propagator reads it: a propagator that
   * throws reads none (tracing never fails a request). */
  #extract (carrier: TraceCarrier): OpenTelemetry.SpanContext | undefined {
    const { propagation, trace, ROOT_CONTEXT } = this.#api
    try {
      return trace.getSpanContext(propagation.extract(ROOT_CONTEXT, carrier))
    } catch {
      return undefined
    }
  }

  #start (name: string, at: OpenTelemetry.HrTime, parent: OpenTelemetry.Context): OpenTelemetry.Span {
    return this.#tracer.startSpan(name, { kind: this.#api.SpanKind.SERVER, startTime: at }, parent)
  }

  /** The model's span under `parent`, with Triton's attributes and its REQUEST_START. */
  #modelSpan (parent: OpenTelemetry.Context, parentId: number, id: number, model: string, version: string, requestId: string | undefined,
    start: OpenTelemetry.HrTime): OpenTelemetry.Span {
    const span = this.#tracer.startSpan(model, {
      kind: this.#api.SpanKind.SERVER,
      startTime: start,
      attributes: {
        'triton.model_name': model,
        'triton.model_version': Number(version),
        'triton.trace_id': id,
        // Triton's parent trace: an ensemble's steps name their ensemble's; a request, 0.
        'triton.trace_parent_id': parentId,
        ...(requestId !== undefined && requestId !== '' && { 'triton.request_id': requestId })
      }
    }, parent)
    span.addEvent('REQUEST_START', start)
    return span
  }

  /** Records `error` on `span` (a model may throw anything: what is no Error, as its text). */
  #failed (span: OpenTelemetry.Span, error: unknown, at?: OpenTelemetry.HrTime): void {
    const message = error instanceof Error ? error.message : String(error)
    span.recordException(error instanceof Error ? error : message, at)
    span.setStatus({ code: this.#api.SpanStatusCode.ERROR, message })
  }
}
