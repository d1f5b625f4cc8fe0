/**
 * The statistics of one model version, measured as Triton measures them: per request its phases
 * (waiting, reading the inputs, the run, the response) and its whole time, and per batch size the
 * compute phases. Triton's shape is built only when asked for.
 */
import type { ModelStatistics, StatisticDuration } from '../../types/models'

/** When each phase of one successful request ended, from `process.hrtime.bigint()`. */
export interface RequestTimes {
  start: bigint
  read: bigint
  runStart: bigint
  ran: bigint
  end: bigint
}

class Duration {
  count = 0
  ns = 0

  add (ns: bigint): void {
    this.count++
    this.ns += Number(ns)
  }

  toJSON (): StatisticDuration {
    return { count: this.count, ns: this.ns }
  }
}

class ComputeDurations {
  readonly input = new Duration()
  readonly infer = new Duration()
  readonly output = new Duration()

  add ({ start, read, runStart, ran, end }: RequestTimes): void {
    this.input.add(read - start)
    this.infer.add(ran - runStart)
    this.output.add(end - ran)
  }
}

const NEVER = { count: 0, ns: 0 }

export class InferenceStatistics {
  #lastInferenceMs = 0
  #inferenceCount = 0
  readonly #success = new Duration()
  readonly #fail = new Duration()
  readonly #queue = new Duration()
  readonly #compute = new ComputeDurations()
  readonly #batches = new Map<number, ComputeDurations>()

  /** A request that got its response: `batchSize` elements inferred in one run. */
  succeeded (times: RequestTimes, batchSize: number): void {
    this.#lastInferenceMs = Date.now()
    this.#inferenceCount += batchSize
    this.#success.add(times.end - times.start)
    this.#queue.add(times.runStart - times.read)
    this.#compute.add(times)
    let batch = this.#batches.get(batchSize)
    if (batch === undefined) this.#batches.set(batchSize, batch = new ComputeDurations())
    batch.add(times)
  }

  /** A request that failed after its model was found (its inputs, its run or its response). */
  failed (start: bigint): void {
    this.#lastInferenceMs = Date.now()
    this.#fail.add(process.hrtime.bigint() - start)
  }

  /** Triton's statistics of this version (`model_stats[]` entry). */
  toJSON (name: string, version: string): ModelStatistics {
    const compute = this.#compute
    return {
      name,
      version,
      last_inference: this.#lastInferenceMs,
      inference_count: this.#inferenceCount,
      execution_count: this.#success.count,
      inference_stats: {
        success: this.#success.toJSON(),
        fail: this.#fail.toJSON(),
        queue: this.#queue.toJSON(),
        compute_input: compute.input.toJSON(),
        compute_infer: compute.infer.toJSON(),
        compute_output: compute.output.toJSON(),
        cache_hit: { ...NEVER },
        cache_miss: { ...NEVER }
      },
      response_stats: {},
      batch_stats: [...this.#batches].sort(([a], [b]) => a - b).map(([batchSize, batch]) => ({
        batch_size: batchSize,
        compute_input: batch.input.toJSON(),
        compute_infer: batch.infer.toJSON(),
        compute_output: batch.output.toJSON()
      })),
      memory_usage: []
    }
  }
}
