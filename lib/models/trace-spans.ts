/**
 * Triton's OpenTelemetry trace mode (`trace_mode: opentelemetry`): spans made through
 * `@opentelemetry/api` alone (an optional peer dependency, loaded only in this mode), each of kind
 * SERVER, from tracer `triton-server`, as Triton names them: a request's (request-spans.ts
 * arranges them), and one per call of the shared memory API. The host's registered
 * TracerProvider records and exports them; with none, the API's no-op drops them.
 */
import type * as OpenTelemetry from '@opentelemetry/api'
import type { OperationSpanOptions } from '../registry/operation-spans'
import { optionalPeer } from '../util/optional-peer'
import type { TracedRequest } from './request-trace'

type Api = typeof OpenTelemetry

/** What carries a request's W3C trace context (`traceparent`, `tracestate`): its HTTP headers, or
 * its gRPC metadata as a map; read by the host's registered propagator. */
export type TraceCarrier = Readonly<Record<string, unknown>>

/** Triton's tracer name (`kTritonTracer`). */
export const TRACER_NAME = 'triton-server'

const FEATURE = 'fastify-triton-shm: trace mode opentelemetry'

/** Where a request's spans go: the client's trace, or the host's active one. */
export interface SpanParent {
  readonly context: OpenTelemetry.Context
  /** The client sent a trace context the host's propagator read (Triton traces every such request). */
  readonly sent: boolean
}

export class TraceSpans {
  readonly #api: Api
  readonly #tracer: OpenTelemetry.Tracer
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

  /** A span of one call of the shared memory API, under the trace its client sent, or the active
   * one: `end` ends it, with the error that refused the call. */
  operation ({ name, region, carrier }: OperationSpanOptions): (error?: unknown) => void {
    const span = this.#tracer.startSpan(name, {
      kind: this.#api.SpanKind.SERVER,
      ...(region !== undefined && { attributes: { 'triton.region_name': region } })
    }, this.parentOf(carrier).context)
    return (error) => {
      if (error !== undefined) this.failed(span, error)
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

  /** Starts a span named `name` at `at` under `parent`. */
  start (name: string, at: OpenTelemetry.HrTime, parent: OpenTelemetry.Context): OpenTelemetry.Span {
    return this.#tracer.startSpan(name, { kind: this.#api.SpanKind.SERVER, startTime: at }, parent)
  }

  /** `parent` with `span` as its span: the parent of `span`'s children. */
  within (parent: OpenTelemetry.Context, span: OpenTelemetry.Span): OpenTelemetry.Context {
    return this.#api.trace.setSpan(parent, span)
  }

  /** The model's span of request `id` under `parent` (`parentId`: its ensemble's Triton id, or 0),
   * with Triton's attributes and its REQUEST_START. */
  modelSpan (parent: OpenTelemetry.Context, { model, version, requestId }: TracedRequest, id: number, parentId: number,
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
  failed (span: OpenTelemetry.Span, error: unknown, at?: OpenTelemetry.HrTime): void {
    const message = error instanceof Error ? error.message : String(error)
    span.recordException(error instanceof Error ? error : message, at)
    span.setStatus({ code: this.#api.SpanStatusCode.ERROR, message })
  }
}
