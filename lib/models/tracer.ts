/**
 * The tracer of a model table: Triton's trace settings (trace-settings.ts), and the traces of the
 * requests they sample, written to their settings' files in Triton's JSON (`mode: triton`): one
 * object per request, one per line, with its id, model, version and timestamps (nanoseconds of a
 * monotonic clock, as Triton's), taken where the table times its statistics.
 */
import type { ModelStore } from '../store/model-store'
import { TraceFile, type TraceFileLogger } from './trace-file'
import { type TraceOptions, type TraceSampler, TraceSettings } from './trace-settings'

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

  constructor (store: ModelStore, options?: TraceOptions, log?: TraceFileLogger) {
    this.settings = new TraceSettings(store, options)
    this.#log = log
  }

  /** Keeps the settings in `store` from now on (see `TraceSettings.attach`). */
  attach (store: ModelStore): void {
    this.settings.attach(store)
  }

  /** The setting that traces a request of `model` now reaching the table, if it is traced: while
   * tracing is off, one check. */
  sample (model: string): TraceSampler | undefined {
    return this.settings.sample(model)
  }

  #ns (instant: number): string {
    return String(this.#originNs + BigInt(Math.round((instant - this.#origin) * 1e6)))
  }

  /** Writes the trace of a request `sampler` sampled. */
  record (sampler: TraceSampler, model: string, version: string, { start, read, runStart, ran, end }: RequestTimes): void {
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
