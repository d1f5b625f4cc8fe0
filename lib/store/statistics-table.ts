/**
 * The statistics of every process of a shared registry, in a file beside the store
 * (`<store>-statistics`) that each of them maps, as the lease table: one block of counters per
 * (process slot, model version slot). A process adds to its own blocks only, with plain stores (one
 * writer per block: no atomics, no store write, no lock); whoever answers a statistics request or
 * a scrape sums the blocks of every process slot that was ever used, so a process that died keeps
 * its counts in the totals. A slot taken over by a new process goes on adding to what the dead one
 * left. The first process of a service starts a new file, so statistics start at zero with the
 * service, as Triton's do when it starts.
 *
 * The layout of one block (`Float64Array` cells; times in milliseconds, as `performance.now()`
 * gives them: exact to well below a nanosecond per request, and never wrapping):
 *
 *   0..31     the version's counts: see `CELL` (23..28: the first-response histogram)
 *   32..191   32 batch slots of 5 cells: batch size (0: free), requests, compute input, infer,
 *             output times. A process keeps the first 32 batch sizes it sees; requests of further
 *             sizes count everywhere but in `batch_stats` (`CELL.batchOverflow` counts them)
 *   192..503  the latest 52 requests (a ring of 6 cells each: the time it ended, in milliseconds
 *             since the epoch, then its request, queue, compute input, infer and output times in
 *             microseconds), which summaries' quantiles are computed from
 *
 * A block is one 4 KiB page: a process dirties only its own pages, and a reader touches only the
 * pages of processes that served.
 */
import { closeSync, constants, ftruncateSync, openSync, rmSync } from 'node:fs'
import { mapFile, unmapObject } from '../addon/posix-shm'
import { PROCESS_SLOTS } from './lease-table'

/** Most model versions the processes of one service can declare between them. */
export const MODEL_SLOTS = 256
export const BLOCK_CELLS = 512

/** The counts of a block. Durations are a count then a total time. */
export const CELL = {
  lastInference: 0,
  inferenceCount: 1,
  executionCount: 2,
  /** Requests of this process between their start and their run (a gauge: read from live processes only). */
  pending: 3,
  successCount: 4,
  successMs: 5,
  failCount: 6,
  failMs: 7,
  queueCount: 8,
  queueMs: 9,
  inputCount: 10,
  inputMs: 11,
  inferCount: 12,
  inferMs: 13,
  outputCount: 14,
  outputMs: 15,
  /** Failures by Triton's reasons: REJECTED, CANCELED, BACKEND, OTHER (in `FAILURE_REASONS` order). */
  failReasons: 16,
  batchOverflow: 20,
  /** Requests written into the ring so far (the next one goes to this modulo `SAMPLE_SLOTS`). */
  samplesWritten: 21,
  /** Bumped before and after each change of the counts (odd while one is under way), a 32-bit
   * integer in this cell (`changeCounter`): a reader in another process copies the block again
   * until it sees an even value, the same before and after its copy, so that no answer shows half
   * of a request (an execution counted, its batch not yet). */
  writes: 22,
  /** The first-response histogram: requests observed, their total whole milliseconds, then how
   * many took at most each of `FIRST_RESPONSE_BUCKETS` (cumulative, as Prometheus' buckets). */
  firstResponseCount: 23,
  firstResponseMs: 24,
  firstResponseBuckets: 25
} as const

/** Triton's default buckets of `nv_inference_first_response_histogram_ms` (metric_model_reporter.h), in milliseconds. */
export const FIRST_RESPONSE_BUCKETS: readonly number[] = Object.freeze([100, 500, 2000, 5000])

export const FAILURE_REASONS = ['REJECTED', 'CANCELED', 'BACKEND', 'OTHER'] as const
export type FailureReason = typeof FAILURE_REASONS[number]

/** The counts summed over processes: every cell up to here (the gauge and the max aside)... */
export const SUMMED_CELLS = 21
/** ...and the histogram's. */
export const HISTOGRAM_CELLS = { start: CELL.firstResponseCount, end: CELL.firstResponseBuckets + FIRST_RESPONSE_BUCKETS.length }

/** Adds the summed counts of block `from` into `to`. */
export function addCounts (from: Float64Array, to: Float64Array): void {
  for (let cell = 1; cell < SUMMED_CELLS; cell++) to[cell] += from[cell]
  for (let cell = HISTOGRAM_CELLS.start; cell < HISTOGRAM_CELLS.end; cell++) to[cell] += from[cell]
}

export const BATCH_START = 32
export const BATCH_SLOTS = 32
export const BATCH_CELLS = 5
export const SAMPLE_START = BATCH_START + BATCH_SLOTS * BATCH_CELLS
export const SAMPLE_SLOTS = 52
export const SAMPLE_CELLS = 6

/** The header's page: the layout's mark, then whether each process slot has ever served. */
const HEADER_CELLS = 512
/** Written by the first process, checked by the others: a process of a version of this package
 * with another layout must not read these counters as its own. */
const LAYOUT = 0x54_53_48_03
export const BYTE_SIZE = (HEADER_CELLS + PROCESS_SLOTS * MODEL_SLOTS * BLOCK_CELLS) * Float64Array.BYTES_PER_ELEMENT

/** How long a reader waits for a block's writer to finish its change before it takes the block as
 * it is: a writer changes a block in well under a microsecond, but one the system paused in the
 * middle of a change (a busy machine) can keep its readers waiting for milliseconds; only one that
 * died mid-change waits this long, and only once (`readBlock`). */
const MAX_READ_WAIT_MS = 200
/** Tries between two looks at the clock. */
const TRIES_PER_LOOK = 1000

const counters = new WeakMap<Float64Array, Int32Array>()

/**
 * A block's change counter (`CELL.writes`), read and bumped only with Atomics: a compiler may
 * neither drop an atomic access nor move other accesses of the block across it. Plain ones it may
 * (V8's optimizing compilers do): a change's two marks merged into one store after it, a reader's
 * second look at the mark answered from its first, and a torn block read as whole.
 */
export function changeCounter (cells: Float64Array): Int32Array {
  // A block unmapped (its store closed as the server stops) is written and read as nothing (a
  // detached array), and Atomics refuse a detached array: its mark is one nobody else sees.
  if (cells.length === 0) return new Int32Array(1)
  let counter = counters.get(cells)
  if (counter === undefined) {
    counter = new Int32Array(cells.buffer, cells.byteOffset + CELL.writes * Float64Array.BYTES_PER_ELEMENT, 1)
    counters.set(cells, counter)
  }
  return counter
}

/** Runs `change` on a block this process writes, marked as under way for readers (`CELL.writes`). */
export function changeBlock (cells: Float64Array, change: () => void): void {
  const counter = changeCounter(cells)
  Atomics.add(counter, 0, 1)
  try {
    change()
  } finally {
    Atomics.add(counter, 0, 1)
  }
}

/** The odd change count each block was left at by a writer that never finished its change. */
const abandoned = new WeakMap<Float64Array, number>()

/** A copy of a block's counts and batch slots (its first `SAMPLE_START` cells) as they were between
 * two changes of its writer, however busy that writer (in another process) is. A block whose
 * writer died in the middle of a change is taken as it is, once waited for. */
export function readBlock (cells: Float64Array): Float64Array {
  const counter = changeCounter(cells)
  const since = performance.now()
  let before: number
  let copy: Float64Array
  let tries = 0
  do {
    before = Atomics.load(counter, 0)
    copy = cells.slice(0, SAMPLE_START)
    if (before === Atomics.load(counter, 0) && (before % 2 === 0 || abandoned.get(cells) === before)) return copy
  } while (++tries % TRIES_PER_LOOK !== 0 || performance.now() - since < MAX_READ_WAIT_MS)
  // Its writer never finished its change: taken as it is, now and until it changes again.
  abandoned.set(cells, before)
  return copy
}

export class StatisticsTable {
  readonly #buffer: ArrayBuffer
  readonly #header: Float64Array
  /** Views made once, by process slot then model slot. */
  readonly #blocks: Array<Array<Float64Array | undefined>> = Array.from({ length: PROCESS_SLOTS }, () => [])

  /** Maps the table at `path`, made (sparse, mode 0600) by the first process that needs it. Never
   * follows a symbolic link. Throws if the file holds another layout. */
  constructor (path: string) {
    const fd = openSync(path, constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW, 0o600)
    try {
      // Every process sets the same size: one that arrives second changes nothing.
      ftruncateSync(fd, BYTE_SIZE)
    } finally {
      closeSync(fd)
    }
    this.#buffer = mapFile(path, BYTE_SIZE)
    this.#header = new Float64Array(this.#buffer, 0, HEADER_CELLS)
    if (this.#header[0] === 0) this.#header[0] = LAYOUT
    if (this.#header[0] !== LAYOUT) {
      this.close()
      throw new Error(`the statistics file beside the store has another layout (${this.#header[0]}): ` +
        'it was made by another version of fastify-triton-shm; restart every process of the service')
    }
  }

  static remove (path: string): void {
    rmSync(path, { force: true })
  }

  /** The block a process writes for a model slot; the slot counts as used from now on. A change
   * that a dead process of the slot left under way is closed: this process is its writer now. */
  own (processSlot: number, modelSlot: number): Float64Array {
    this.#header[1 + processSlot] = 1
    const block = this.#block(processSlot, modelSlot)
    const counter = changeCounter(block)
    if (Atomics.load(counter, 0) % 2 === 1) Atomics.add(counter, 0, 1)
    return block
  }

  /** The blocks of a model slot in every process slot that ever served (in `processSlots`, if given). */
  blocks (modelSlot: number, processSlots?: readonly number[]): Float64Array[] {
    const blocks: Float64Array[] = []
    for (const processSlot of processSlots ?? Array.from({ length: PROCESS_SLOTS }, (_, slot) => slot)) {
      if (this.#header[1 + processSlot] === 1) blocks.push(this.#block(processSlot, modelSlot))
    }
    return blocks
  }

  #block (processSlot: number, modelSlot: number): Float64Array {
    const offset = (HEADER_CELLS + (processSlot * MODEL_SLOTS + modelSlot) * BLOCK_CELLS) * Float64Array.BYTES_PER_ELEMENT
    const row = this.#blocks[processSlot]
    return (row[modelSlot] ??= new Float64Array(this.#buffer, offset, BLOCK_CELLS))
  }

  close (): void {
    unmapObject(this.#buffer)
  }
}
