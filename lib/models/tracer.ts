/**
 * The tracer of a model table: Triton's trace settings (trace-settings.ts), and the traces of the
 * requests they sample, written to their settings' files in Triton's JSON (`mode: triton`): one
 * object per request, one per line, with its id, model, version and timestamps (nanoseconds of a
 * monotonic clock, as Triton's), taken where the table times its statistics. In `opentelemetry`
 * mode they are spans instead (trace-spans.ts).
 */
import type { InferRequest } from '../kserve/infer-request'
import type { OperationSpanOptions } from '../registry/operation-spans'
import type { ModelStore } from '../store/model-store'
import { TraceFile, type TraceFileLogger } from './trace-file'
import { type TraceOptions, type TraceSampler, TraceSettings } from './trace-settings'
import { RequestSpans, type TraceCarrier, TraceSpans } from './trace-spans'

/** The instants (`performance.now()`) the table measures a request at. */
export interface RequestTimes {
  /** It reached the model table. */
  start: number
  /** Its inputs were read; it waits for its turn (Triton's QUEUE_START). */
  read: number
  /** Its model started running. */
  runStart: number
  /** Its model returned. */
  ran: number
  /** Its (last) response was built, or sent over a stream. */
  end: number
}

export class Tracer {
  readonly settings: TraceSettings
  readonly #files = new Map<string, TraceFile>()
  readonly #log: TraceFileLogger | undefined
  #lastId = 0
  /** A monotonic instant in nanoseconds, and the same instant as `performance.now()`. */
  readonly #originNs = process.hrtime.bigint()
  readonly #origin = performance.now()

  /** The traced requests that may run steps (an ensemble's), by request. */
  readonly #ensembles = new WeakMap<InferRequest, RequestSpans>()
  /** In `opentelemetry` mode: the spans, through the API loaded once the table is made. */
  readonly spans: TraceSpans | undefined

  constructor (store: ModelStore, options: TraceOptions = {}, log?: TraceFileLogger) {
    const { load, ...settings } = options
    this.settings = new TraceSettings(store, settings)
    this.spans = settings.mode === 'opentelemetry' ? new TraceSpans(load) : undefined
    this.#log = log
  }

  /** Keeps the settings in `store` from now on (see `TraceSettings.attach`). */
  attach (store: ModelStore): void {
    this.settings.attach(store)
  }

  /** The setting that traces a request of `model` now reaching the table, if it is traced: while
   * tracing is off, one check. In `opentelemetry` mode, with the parent of its spans: the trace
   * context its client sent (`carrier`: its headers or metadata), which traces it whatever the
   * rate, as in Triton. */
  sample (model: string, carrier?: () => TraceCarrier, ensemble?: InferRequest): TraceSampler | RequestSpans | undefined {
    const spans = this.spans
    // Trace files have each step of an ensemble sampled as a request of its own.
    if (spans === undefined) return this.settings.sample(model)
    if (ensemble !== undefined) return this.#ensembles.get(ensemble)?.step()
    if (!this.settings.mayTrace()) return undefined
    const parent = spans.parentOf(carrier?.())
    const sampler = this.settings.sample(model, parent.sent)
    return sampler === undefined ? undefined : new RequestSpans(sampler, parent.context)
  }

  /** Starts the span of a shared memory API call while the global setting's level is on (Triton's
   * rate and count are for inferences: every such call is traced). */
  operation (options: OperationSpanOptions): ((error?: unknown) => void) | undefined {
    return this.settings.values().level.length > 0 ? (this.spans as TraceSpans).operation(options) : undefined
  }

  /** Keeps the trace of request `infer` (sampled as `trace`), for the steps it may run as an
   * ensemble's: in `opentelemetry` mode they are traced with it, as Triton traces them. */
  enclose (trace: TraceSampler | RequestSpans, infer: InferRequest): void {
    if (trace instanceof RequestSpans) this.#ensembles.set(infer, trace)
  }

  /** Ends the spans of a sampled request that failed (a trace file has no failed requests). */
  fail (trace: TraceSampler | RequestSpans, model: string, version: string, requestId: string | undefined, start: number, error: unknown): void {
    if (trace instanceof RequestSpans) (this.spans as TraceSpans).fail(trace, model, version, requestId, start, error)
  }

  #ns (instant: number): string {
    return String(this.#originNs + BigInt(Math.round((instant - this.#origin) * 1e6)))
  }

  /** Writes the trace of a request `sampler` sampled (in `opentelemetry` mode: its spans). */
  record (sampler: TraceSampler | RequestSpans, model: string, version: string, times: RequestTimes, requestId?: string): void {
    if (sampler instanceof RequestSpans) return (this.spans as TraceSpans).record(sampler, model, version, requestId, times)
    const { start, read, runStart, ran, end } = times
    const { file, logFrequency } = sampler.values
    // Triton's activities, in its order: inputs are read before the request waits here, so
    // COMPUTE_INPUT_END is COMPUTE_START (the reading is REQUEST_START to QUEUE_START).
    const timestamps: Array<[string, number]> = [
      ['REQUEST_START', start], ['QUEUE_START', read], ['COMPUTE_START', runStart], ['COMPUTE_INPUT_END', runStart],
      ['COMPUTE_OUTPUT_START', ran], ['COMPUTE_END', end], ['REQUEST_END', end]
    ]
    const line = `{"id":${++this.#lastId},"model_name":${JSON.stringify(model)},"model_version":${version},"timestamps":[` +
      timestamps.map(([name, instant]) => `{"name":"${name}","ns":${this.#ns(instant)}}`).join(',') + ']}\n'
    let traceFile = this.#files.get(file)
    if (traceFile === undefined) this.#files.set(file, traceFile = new TraceFile(file, this.#log))
    traceFile.add(line, logFrequency)
  }

  /** Writes every trace taken so far, and closes the files (the table's server stops). */
  async close (): Promise<void> {
    await Promise.all([...this.#files.values()].map((file) => file.close()))
  }
}
