/**
 * The statistics of one model version, measured as Triton measures them: per request its phases
 * (waiting, reading the inputs, the run, the response) and its whole time, per batch size the
 * compute phases, failures by Triton's reasons, and the latest requests' times for summaries.
 *
 * They are counted into cells (lib/store/statistics-table.ts has the layout): the table's own, or,
 * with a shared registry, this process's block in the file every process of the service maps. A
 * request adds to this process's cells with plain stores, the same work either way; an answer
 * (Triton's shape, built only when asked for) or a scrape sums the cells of every process.
 */
import type { ModelStatistics, StatisticDuration } from '../../types/models'
import type { VersionCells } from '../store/model-store'
import {
  addCounts, BATCH_CELLS, BATCH_SLOTS, BATCH_START, CELL, changeBlock, FAILURE_REASONS, FIRST_RESPONSE_BUCKETS, type FailureReason,
  readBlock, SAMPLE_CELLS, SAMPLE_SLOTS, SAMPLE_START
} from '../store/statistics-table'

export { FAILURE_REASONS, FIRST_RESPONSE_BUCKETS, type FailureReason }

/** When each phase of one successful request began or ended, from `performance.now()`
 * (milliseconds, with the monotonic clock's sub-microsecond resolution, and no allocation). */
export interface RequestTimes {
  start: number
  read: number
  runStart: number
  ran: number
  end: number
  /** When its first response was sent; none for a decoupled request that sent none. */
  firstResponse?: number
}

/** The phases a summary reports, in the order of a sample's cells after its time. */
export const SAMPLED_PHASES = ['request', 'queue', 'compute_input', 'compute_infer', 'compute_output'] as const
export type SampledPhase = typeof SAMPLED_PHASES[number]

/** The version's counts summed over every process, in Triton's metrics' terms. */
export interface StatisticsTotals {
  success: number
  failures: Record<FailureReason, number>
  inferenceCount: number
  executionCount: number
  /** Requests between their start and their run, in the processes alive now. */
  pending: number
  /** Cumulative microseconds of each phase of the successful requests (`request`: their whole time). */
  microseconds: Record<SampledPhase, number>
  /** The successful requests' times from their start to their first response, in whole
   * milliseconds as Triton observes them: how many, their sum, and how many are at most each of
   * `FIRST_RESPONSE_BUCKETS` (cumulative, as a histogram's buckets). */
  firstResponse: { count: number, sumMs: number, buckets: number[] }
}

const DURATIONS: Record<SampledPhase, number> = {
  request: CELL.successMs,
  queue: CELL.queueMs,
  compute_input: CELL.inputMs,
  compute_infer: CELL.inferMs,
  compute_output: CELL.outputMs
}

const duration = (cells: Float64Array, count: number): StatisticDuration =>
  ({ count: cells[count], ns: Math.round(cells[count + 1] * 1e6) })

/** The batch slot of `batchSize` in `cells`, claimed if free; -1 if all are taken by other sizes. */
function batchSlot (cells: Float64Array, batchSize: number): number {
  for (let slot = BATCH_START; slot < BATCH_START + BATCH_SLOTS * BATCH_CELLS; slot += BATCH_CELLS) {
    if (cells[slot] === batchSize) return slot
    if (cells[slot] === 0) {
      cells[slot] = batchSize
      return slot
    }
  }
  return -1
}

/** Adds the batch slots of `from` into `to`, by batch size. */
function addBatches (from: Float64Array, to: Map<number, Float64Array>): void {
  for (let slot = BATCH_START; slot < BATCH_START + BATCH_SLOTS * BATCH_CELLS; slot += BATCH_CELLS) {
    const batchSize = from[slot]
    if (batchSize === 0) return
    let sum = to.get(batchSize)
    if (sum === undefined) to.set(batchSize, sum = new Float64Array(BATCH_CELLS))
    for (let cell = 1; cell < BATCH_CELLS; cell++) sum[cell] += from[slot + cell]
  }
}

export class InferenceStatistics {
  #cells: VersionCells
  #own: Float64Array
  /** This process's batch slot of each batch size it saw (a cell index of `#own`). */
  #batchSlots = new Map<number, number>()

  constructor (cells: VersionCells) {
    this.#cells = cells
    this.#own = cells.own
    this.#readBatchSlots()
  }

  /** A process that takes over a dead one's slot goes on with the batch sizes it had seen. */
  #readBatchSlots (): void {
    this.#batchSlots = new Map()
    for (let slot = BATCH_START; slot < BATCH_START + BATCH_SLOTS * BATCH_CELLS && this.#own[slot] !== 0; slot += BATCH_CELLS) {
      this.#batchSlots.set(this.#own[slot], slot)
    }
  }

  /** Counts into `cells` from now on (a table that starts sharing a registry's statistics),
   * adding what was counted so far. */
  moveTo (cells: VersionCells): void {
    const from = this.#own
    const to = cells.own
    changeBlock(to, () => {
      // The pending gauge too: a request counted pending here ends its wait in the new cells.
      addCounts(from, to)
      to[CELL.lastInference] = Math.max(to[CELL.lastInference], from[CELL.lastInference])
      const batches = new Map<number, Float64Array>()
      addBatches(from, batches)
      for (const [batchSize, sum] of batches) {
        const slot = batchSlot(to, batchSize)
        if (slot === -1) {
          to[CELL.batchOverflow] += sum[1]
        } else {
          for (let cell = 1; cell < BATCH_CELLS; cell++) to[slot + cell] += sum[cell]
        }
      }
    })
    this.#cells = cells
    this.#own = to
    this.#readBatchSlots()
  }

  /** A request for this version began: it is pending until its run starts (or it fails before). */
  started (): void {
    this.#own[CELL.pending]++
  }

  /** The request's run starts: it is no longer pending. */
  running (): void {
    this.#own[CELL.pending]--
  }

  /** A request that got its response: `batchSize` elements inferred in one run. */
  succeeded (times: RequestTimes, batchSize: number): void {
    changeBlock(this.#own, () => this.#countSuccess(times, batchSize))
  }

  #countSuccess ({ start, read, runStart, ran, end, firstResponse }: RequestTimes, batchSize: number): void {
    const cells = this.#own
    const now = Date.now()
    cells[CELL.lastInference] = now
    cells[CELL.inferenceCount] += batchSize
    cells[CELL.executionCount]++
    const request = end - start
    const queue = runStart - read
    const input = read - start
    const infer = ran - runStart
    const output = end - ran
    cells[CELL.successCount]++
    cells[CELL.successMs] += request
    cells[CELL.queueCount]++
    cells[CELL.queueMs] += queue
    cells[CELL.inputCount]++
    cells[CELL.inputMs] += input
    cells[CELL.inferCount]++
    cells[CELL.inferMs] += infer
    cells[CELL.outputCount]++
    cells[CELL.outputMs] += output
    if (firstResponse !== undefined) this.#observeFirstResponse(Math.floor(firstResponse - start))
    let slot = this.#batchSlots.get(batchSize)
    if (slot === undefined) {
      slot = batchSlot(cells, batchSize)
      this.#batchSlots.set(batchSize, slot)
    }
    if (slot === -1) {
      cells[CELL.batchOverflow]++
    } else {
      cells[slot + 1]++
      cells[slot + 2] += input
      cells[slot + 3] += infer
      cells[slot + 4] += output
    }
    // The time it ended goes last: a reader takes a sample whose time is in its window.
    const sample = SAMPLE_START + (cells[CELL.samplesWritten]++ % SAMPLE_SLOTS) * SAMPLE_CELLS
    cells[sample + 1] = request * 1000
    cells[sample + 2] = queue * 1000
    cells[sample + 3] = input * 1000
    cells[sample + 4] = infer * 1000
    cells[sample + 5] = output * 1000
    cells[sample] = now
  }

  /** Triton's first-response histogram: whole milliseconds, counted in every bucket whose bound
   * holds them (Prometheus' buckets are cumulative). */
  #observeFirstResponse (milliseconds: number): void {
    const cells = this.#own
    cells[CELL.firstResponseCount]++
    cells[CELL.firstResponseMs] += milliseconds
    FIRST_RESPONSE_BUCKETS.forEach((bound, index) => { cells[CELL.firstResponseBuckets + index] += Number(milliseconds <= bound) })
  }

  /** A request that failed after its model was found (its inputs, its run or its response), for
   * one of Triton's reasons; `pending` if it failed before its run. */
  failed (start: number, reason: FailureReason, pending: boolean): void {
    const cells = this.#own
    changeBlock(cells, () => {
      cells[CELL.lastInference] = Date.now()
      cells[CELL.failCount]++
      cells[CELL.failMs] += performance.now() - start
      cells[CELL.failReasons + FAILURE_REASONS.indexOf(reason)]++
    })
    if (pending) cells[CELL.pending]--
  }

  /** The counts of every process summed, and the latest of their last inferences. */
  #sum (): { sum: Float64Array, batches: Map<number, Float64Array> } {
    const sum = new Float64Array(SAMPLE_START)
    const batches = new Map<number, Float64Array>()
    for (const block of this.#cells.all()) {
      // Read whole, between two changes of its writer: its counts agree with one another.
      const cells = readBlock(block)
      // A process that never ran this version has nothing more to add.
      if (cells[CELL.successCount] === 0 && cells[CELL.failCount] === 0) continue
      addCounts(cells, sum)
      sum[CELL.lastInference] = Math.max(sum[CELL.lastInference], cells[CELL.lastInference])
      addBatches(cells, batches)
    }
    return { sum, batches }
  }

  /** Triton's statistics of this version (`model_stats[]` entry), of every process. */
  toJSON (name: string, version: string): ModelStatistics {
    const { sum, batches } = this.#sum()
    return {
      name,
      version,
      last_inference: sum[CELL.lastInference],
      inference_count: sum[CELL.inferenceCount],
      execution_count: sum[CELL.executionCount],
      inference_stats: {
        success: duration(sum, CELL.successCount),
        fail: duration(sum, CELL.failCount),
        queue: duration(sum, CELL.queueCount),
        compute_input: duration(sum, CELL.inputCount),
        compute_infer: duration(sum, CELL.inferCount),
        compute_output: duration(sum, CELL.outputCount),
        cache_hit: { count: 0, ns: 0 },
        cache_miss: { count: 0, ns: 0 }
      },
      response_stats: {},
      batch_stats: [...batches].sort(([a], [b]) => a - b).map(([batchSize, batch]) => ({
        batch_size: batchSize,
        compute_input: { count: batch[1], ns: Math.round(batch[2] * 1e6) },
        compute_infer: { count: batch[1], ns: Math.round(batch[3] * 1e6) },
        compute_output: { count: batch[1], ns: Math.round(batch[4] * 1e6) }
      })),
      memory_usage: []
    }
  }

  /** The totals Triton's metrics report, of every process (the pending gauge: of the live ones). */
  totals (): StatisticsTotals {
    const { sum } = this.#sum()
    let pending = 0
    for (const cells of this.#cells.live()) pending += cells[CELL.pending]
    const failures = Object.fromEntries(FAILURE_REASONS.map((reason, index) => [reason, sum[CELL.failReasons + index]])) as Record<FailureReason, number>
    const microseconds = Object.fromEntries(SAMPLED_PHASES.map((phase) => [phase, Math.round(sum[DURATIONS[phase]] * 1000)])) as Record<SampledPhase, number>
    const buckets = FIRST_RESPONSE_BUCKETS.map((_bound, index) => sum[CELL.firstResponseBuckets + index])
    const firstResponse = { count: sum[CELL.firstResponseCount], sumMs: sum[CELL.firstResponseMs], buckets }
    return {
      success: sum[CELL.successCount], failures, inferenceCount: sum[CELL.inferenceCount], executionCount: sum[CELL.executionCount], pending, microseconds, firstResponse
    }
  }

  /** The microseconds of each phase of the latest successful requests of every process that ended
   * at or after `sinceMs` (milliseconds since the epoch), for summaries' quantiles. */
  samples (sinceMs: number): Record<SampledPhase, number[]> {
    const samples = Object.fromEntries(SAMPLED_PHASES.map((phase) => [phase, [] as number[]])) as Record<SampledPhase, number[]>
    for (const cells of this.#cells.all()) {
      for (let sample = SAMPLE_START; sample < SAMPLE_START + SAMPLE_SLOTS * SAMPLE_CELLS; sample += SAMPLE_CELLS) {
        const ended = cells[sample]
        if (ended === 0 || ended < sinceMs) continue
        SAMPLED_PHASES.forEach((phase, index) => samples[phase].push(cells[sample + 1 + index]))
      }
    }
    return samples
  }
}
