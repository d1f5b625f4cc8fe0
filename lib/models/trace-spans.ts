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

/** Instants of one request as wall-clock times (as OpenTelemetry reports them), all through one
 * offset taken now, as Triton takes one per trace: its spans and events nest exactly (the SDK would
 * take an offset of its own for each span). */
function wallClock (): (instant: number) => OpenTelemetry.HrTime {
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

/** A sampled request in `opentelemetry` mode: its setting, and the parent of its spans. */
export class RequestSpans {
  readonly sampler: TraceSampler
  readonly parent: OpenTelemetry.Context

  constructor (sampler: TraceSampler, parent: OpenTelemetry.Context) {
    this.sampler = sampler
    this.parent = parent
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
  /** Triton's trace ids, counted from 1 (its `triton.trace_id`). */
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

  /** The spans of a request that succeeded, timed at `times`, under `trace.parent`. */
  record (trace: RequestSpans, model: string, version: string, requestId: string | undefined, times: SpanTimes): void {
    const at = wallClock()
    const [start, read, runStart, ran, end] = [times.start, times.read, times.runStart, times.ran, times.end].map(at)
    const request = this.#start('InferRequest', start, trace.parent)
    const modelSpan = this.#modelSpan(trace.parent, request, model, version, requestId, start)
    modelSpan.addEvent('QUEUE_START', read)
    const compute = this.#start('compute', runStart, this.#api.trace.setSpan(trace.parent, modelSpan))
    compute.addEvent('COMPUTE_START', runStart)
    compute.addEvent('COMPUTE_INPUT_END', runStart)
    compute.addEvent('COMPUTE_OUTPUT_START', ran)
    compute.addEvent('COMPUTE_END', end)
    compute.end(end)
    modelSpan.addEvent('REQUEST_END', end)
    modelSpan.end(end)
    request.end(end)
  }

  /** The spans of a request that failed (`error`), from `start` to now, with the error recorded. */
  fail (trace: RequestSpans, model: string, version: string, requestId: string | undefined, startedAt: number, error: unknown): void {
    const at = wallClock()
    const [start, now] = [at(startedAt), at(performance.now())]
    const request = this.#start('InferRequest', start, trace.parent)
    const modelSpan = this.#modelSpan(trace.parent, request, model, version, requestId, start)
    this.#failed(modelSpan, error, now)
    modelSpan.addEvent('REQUEST_END', now)
    modelSpan.end(now)
    this.#failed(request, error, now)
    request.end(now)
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

  /** The model's span under `request`, with Triton's attributes and its REQUEST_START. */
  #modelSpan (parent: OpenTelemetry.Context, request: OpenTelemetry.Span, model: string, version: string, requestId: string | undefined, start: OpenTelemetry.HrTime): OpenTelemetry.Span {
    const span = this.#tracer.startSpan(model, {
      kind: this.#api.SpanKind.SERVER,
      startTime: start,
      attributes: {
        'triton.model_name': model,
        'triton.model_version': Number(version),
        'triton.trace_id': ++this.#lastId,
        // Triton's parent trace: an ensemble's steps name their ensemble's; a request its own, 0.
        'triton.trace_parent_id': 0,
        ...(requestId !== undefined && requestId !== '' && { 'triton.request_id': requestId })
      }
    }, this.#api.trace.setSpan(parent, request))
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
