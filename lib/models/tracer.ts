/**
 * The tracer of a model table: Triton's trace settings (trace-settings.ts), and the traces of the
 * requests they sample (request-trace.ts), with the instants the table times its statistics at.
 * In `triton` mode, written to their settings' files as Triton writes them (file-trace.ts,
 * setting-traces.ts, trace-file.ts), in nanoseconds of a monotonic clock (as Triton's); with a
 * shared registry, each process writes files of its own (`<file>.pid<pid>`): each is one
 * process's traces, numbered by it, in Triton's format. In `opentelemetry` mode, as spans
 * (request-spans.ts, trace-spans.ts).
 */
import type { OperationSpanOptions } from '../registry/operation-spans'
import type { ModelStore } from '../store/model-store'
import { FileTrace } from './file-trace'
import { RequestSpans } from './request-spans'
import type { RequestTrace, TracedRequest } from './request-trace'
import { SettingTraces } from './setting-traces'
import { TraceFile, type TraceFileLogger } from './trace-file'
import { type TraceOptions, type TraceSampler, TraceSettings } from './trace-settings'
import { type TraceCarrier, TraceSpans } from './trace-spans'

/** The instants (`performance.now()`) the table measured a request at; those it did not reach
 * (it failed before) are absent. */
export interface RequestTimes {
  /** It reached the model table. */
  start: number
  /** Its inputs were read; it waits for its turn (Triton's QUEUE_START). */
  read?: number
  /** Its model started running. */
  runStart?: number
  /** Its model returned. */
  ran?: number
  /** Its (last) response was built, or sent over a stream; or it failed. */
  end: number
}

export class Tracer {
  readonly settings: TraceSettings
  /** In `opentelemetry` mode: the spans, through the API loaded once the table is made. */
  readonly spans: TraceSpans | undefined
  readonly #files = new Map<string, TraceFile>()
  readonly #traces = new Map<TraceSampler, SettingTraces>()
  /** The trace of each traced ensemble request, for its steps'. */
  readonly #ensembles = new WeakMap<object, RequestTrace>()
  readonly #log: TraceFileLogger | undefined
  /** Appended to each file's name: each process of a shared registry writes its own. */
  #suffix = ''
  #lastId = 0
  /** A monotonic instant in nanoseconds, and the same instant as `performance.now()`. */
  readonly #originNs = process.hrtime.bigint()
  readonly #origin = performance.now()

  constructor (store: ModelStore, options: TraceOptions = {}, log?: TraceFileLogger) {
    const { load, ...settings } = options
    this.settings = new TraceSettings(store, settings, (samplers) => this.#letGo(samplers))
    this.spans = settings.mode === 'opentelemetry' ? new TraceSpans(load) : undefined
    this.#log = log
  }

  /** Keeps the settings in `store` from now on (see `TraceSettings.attach`); a shared store's
   * processes each write files of their own. */
  attach (store: ModelStore): void {
    this.#suffix = `.pid${process.pid}`
    this.settings.attach(store)
  }

  // A BigInt's text is quicker to make than a large double's.
  readonly #ns = (instant: number): string => String(this.#originNs + BigInt(Math.round((instant - this.#origin) * 1e6)))

  /** Starts the trace of a request of `model` now reaching the table, if a setting samples it:
   * while tracing is off, one check. In `opentelemetry` mode its spans' parent is the trace
   * context its client sent (`carrier`: its headers or metadata), which traces it whatever the
   * rate, as in Triton. */
  start (model: string, carrier?: () => TraceCarrier): RequestTrace | undefined {
    const spans = this.spans
    if (spans === undefined) {
      const sampler = this.settings.sample(model)
      if (sampler === undefined) return undefined
      const traces = this.#tracesOf(sampler)
      return new FileTrace(++this.#lastId, this.#ns, (text) => traces.add(text))
    }
    if (!this.settings.mayTrace()) return undefined
    const parent = spans.parentOf(carrier?.())
    return this.settings.sample(model, parent.sent) === undefined ? undefined : new RequestSpans(spans, ++this.#lastId, parent.context)
  }

  /** Starts the trace of a step of the ensemble request `parent` traces: Triton traces an
   * ensemble's steps with it (each with its `parent_id`), never on their own. */
  startStep (parent: RequestTrace): RequestTrace {
    return parent.child(++this.#lastId)
  }

  /** Keeps `trace` as the trace of the ensemble request `infer`, for its steps. */
  follow (infer: object, trace: RequestTrace): void {
    this.#ensembles.set(infer, trace)
  }

  /** The trace of the ensemble request `infer`, if it is traced. */
  traceOf (infer: object): RequestTrace | undefined {
    return this.#ensembles.get(infer)
  }

  /** Starts the span of a shared memory API call while the global setting's level is on (Triton's
   * rate and count are for inferences: every such call is traced). */
  operation (options: OperationSpanOptions): ((error?: unknown) => void) | undefined {
    return this.settings.values().level.length > 0 ? (this.spans as TraceSpans).operation(options) : undefined
  }

  #tracesOf (sampler: TraceSampler): SettingTraces {
    let traces = this.#traces.get(sampler)
    if (traces === undefined) this.#traces.set(sampler, traces = new SettingTraces(sampler, this.#fileOf(sampler.values.file)))
    return traces
  }

  #fileOf (name: string): TraceFile {
    const path = name + this.#suffix
    let file = this.#files.get(path)
    if (file === undefined) this.#files.set(path, file = new TraceFile(path, this.#log))
    return file
  }

  /** Settings replaced by a change: what they keep is written, as Triton writes it then. */
  #letGo (samplers: TraceSampler[]): void {
    for (const sampler of samplers) {
      this.#traces.get(sampler)?.release()
      this.#traces.delete(sampler)
    }
  }

  /**
   * Adds the table's part of a request's trace, Triton's core's: the request's description and
   * the instants it reached, in Triton's order (an ensemble's request has no compute of its own),
   * and the error it failed with, then ends that part. Inputs are read before the request waits
   * here, so COMPUTE_INPUT_END is COMPUTE_START (the reading is REQUEST_START to QUEUE_START); a
   * compute that failed ends with the request.
   */
  record (trace: RequestTrace, request: TracedRequest, { start, read, runStart, ran, end }: RequestTimes, ensemble: boolean,
    failure?: { error: unknown }): void {
    trace.describe(request)
    trace.stamp('REQUEST_START', start)
    if (read !== undefined) trace.stamp('QUEUE_START', read)
    if (runStart !== undefined && !ensemble) {
      trace.stamp('COMPUTE_START', runStart)
      trace.stamp('COMPUTE_INPUT_END', runStart)
      if (ran !== undefined) trace.stamp('COMPUTE_OUTPUT_START', ran)
      trace.stamp('COMPUTE_END', end)
    }
    trace.stamp('REQUEST_END', end)
    if (failure !== undefined) trace.fail(failure.error)
    trace.end()
  }

  /** Writes every trace taken so far, and completes the files (the table's server stops). */
  async close (): Promise<void> {
    for (const traces of this.#traces.values()) traces.write()
    await Promise.all([...this.#files.values()].map((file) => file.close()))
  }
}
