/**
 * The traces one trace setting took, on their way to its file, as Triton's setting sends them: a
 * setting without a `log_frequency` or a `trace_count` adds each to the file's array as it ends;
 * one with a `log_frequency` of N writes each N as a numbered file; one with a `trace_count`
 * keeps its traces until it has taken them all and each has ended (its rate 1: every request it
 * saw traced), then writes them as a numbered file. What a setting still keeps when it is let go
 * (changed, or the server stops) goes to a numbered file with a `log_frequency`, else to the
 * array. What is kept stays under `MAX_KEPT_TRACE_BYTES`: past it, it goes the same way at once.
 */
import type { TraceFile } from './trace-file'
import type { TraceSampler } from './trace-settings'

/** What one setting keeps, at most, before it writes it whatever its settings say. */
export const MAX_KEPT_TRACE_BYTES = 1024 * 1024

export class SettingTraces {
  readonly #sampler: TraceSampler
  readonly #file: TraceFile
  #kept: string[] = []
  #keptBytes = 0
  /** Traces of the setting that ended. */
  #collected = 0
  /** The setting was replaced: what ends now is written at once. */
  #released = false

  constructor (sampler: TraceSampler, file: TraceFile) {
    this.#sampler = sampler
    this.#file = file
  }

  /** Takes one ended trace (its objects joined by commas). */
  add (trace: string): void {
    this.#collected++
    const { logFrequency, count } = this.#sampler.values
    if (logFrequency === 0 && count === -1) return this.#file.add(trace)
    this.#kept.push(trace)
    this.#keptBytes += trace.length
    if (this.#released) return this.write()
    const allTaken = this.#sampler.remaining === 0 && this.#collected === this.#sampler.seen
    if (allTaken || (logFrequency !== 0 && this.#kept.length >= logFrequency)) this.#writeNumbered()
    else if (this.#keptBytes >= MAX_KEPT_TRACE_BYTES) this.write()
  }

  #writeNumbered (): void {
    this.#file.addNumbered(this.#kept)
    this.#kept = []
    this.#keptBytes = 0
  }

  /** The setting was replaced: writes what it keeps, and from now on each trace as it ends. */
  release (): void {
    this.#released = true
    this.write()
  }

  /** Writes what the setting keeps: as a numbered file with a `log_frequency`, else to the array. */
  write (): void {
    if (this.#kept.length === 0) return
    if (this.#sampler.values.logFrequency !== 0) return this.#writeNumbered()
    for (const trace of this.#kept) this.#file.add(trace)
    this.#kept = []
    this.#keptBytes = 0
  }
}
