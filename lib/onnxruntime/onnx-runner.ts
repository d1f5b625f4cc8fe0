/**
 * The ONNX runner: ONNX models run by ONNX Runtime's C API inside this package's addon, on worker
 * threads, with no tensor byte copied on the way in and outputs written in place (see OnnxModel).
 * ONNX Runtime is the shared library onnxruntime-node ships (or one the host names), opened when
 * the first model loads.
 */
import * as errors from '../errors'
import type { Abandonable } from '../util/abandonable'
import { describeOptionProblem, nonNegativeInteger, positiveInteger, type Problem, validatorOf } from '../util/options-validator'
import { Turns } from '../util/turns'
import { OnnxModel, type RunSlots } from './onnx-model'
import { bundledLibrary, loadRuntime, ortAddon, type OrtRuntimeHandle } from './ort-library'

export interface OnnxRunnerOptions {
  /** Most runs at once, of all the runner's models (default 2); more wait their turn, in order.
   * Each run takes a thread of libuv's pool (UV_THREADPOOL_SIZE, default 4) while it lasts. */
  concurrency?: number
  /** ONNX Runtime's shared library (default: the libonnxruntime.so.1 of the installed
   * onnxruntime-node). It runs in this process with its rights: never take it from a request. */
  library?: string
}

export interface OnnxSessionOptions {
  /** Threads of ORT's pool for one run's operators (default 1: runs are parallel already; 0 is one per core). */
  intraOpThreads?: number
  /** Threads for independent parts of the graph, in ORT's parallel mode (default 0: ORT's choice). */
  interOpThreads?: number
  /** How far ORT rewrites the graph when loading it (default 'all'). */
  graphOptimizationLevel?: 'disabled' | 'basic' | 'extended' | 'all'
  /** Least severe message ORT logs to stderr: 0 verbose ... 4 fatal (default 2, warnings). */
  logSeverityLevel?: 0 | 1 | 2 | 3 | 4
}

const OPTIMIZATION_LEVELS = { disabled: 0, basic: 1, extended: 2, all: 99 }

const FEATURE = 'fastify-triton-shm/onnxruntime'

const problemOfRunner = validatorOf({
  type: 'object',
  additionalProperties: false,
  properties: { concurrency: positiveInteger, library: { type: 'string', minLength: 1 } }
})

const problemOfSession = validatorOf({
  type: 'object',
  additionalProperties: false,
  properties: {
    intraOpThreads: nonNegativeInteger,
    interOpThreads: nonNegativeInteger,
    graphOptimizationLevel: { enum: Object.keys(OPTIMIZATION_LEVELS) },
    logSeverityLevel: { type: 'integer', minimum: 0, maximum: 4 }
  }
})

/** Throws `ERR_SHM_INVALID_OPTION` naming the first wrong option. */
function checkOptions (problemOf: (options: unknown) => Problem | undefined, options: object): void {
  const problem = problemOf(options)
  if (problem !== undefined) throw errors.invalidOption(FEATURE, describeOptionProblem(problem))
}

function sessionConfig (options: OnnxSessionOptions) {
  checkOptions(problemOfSession, options)
  const { intraOpThreads = 1, interOpThreads = 0, graphOptimizationLevel = 'all', logSeverityLevel = 2 } = options
  return { intraOpThreads, interOpThreads, graphOptimizationLevel: OPTIMIZATION_LEVELS[graphOptimizationLevel], logSeverityLevel }
}

export class OnnxRunner {
  readonly #library: string | undefined
  #runtime: OrtRuntimeHandle | undefined
  readonly #models: OnnxModel[] = []
  /** Runs at once: the runner's `concurrency`. */
  readonly #turns: Turns
  readonly #runs = new Set<Promise<void>>()
  #closed = false
  readonly #slots: RunSlots = { acquire: (waiter) => this.#acquire(waiter) }

  constructor (options: OnnxRunnerOptions = {}) {
    checkOptions(problemOfRunner, options)
    this.#turns = new Turns(options.concurrency ?? 2)
    this.#library = options.library
  }

  /** The ONNX Runtime the runner loaded, as it reports its version ("1.30.0"); undefined before the first model. */
  get runtimeVersion (): string | undefined {
    return this.#runtime?.version
  }

  /** Runs in progress or waiting for their turn. */
  get inFlight (): number {
    return this.#runs.size
  }

  /**
   * Loads a model from a file or from its bytes, on a worker thread (ORT reads and optimizes the
   * graph there). Refused without onnxruntime-node and without `library`, naming the package.
   */
  async load (model: string | Uint8Array, options: OnnxSessionOptions = {}): Promise<OnnxModel> {
    this.#checkOpen()
    const config = sessionConfig(options)
    this.#runtime ??= loadRuntime(this.#library ?? bundledLibrary())
    const session = await ortAddon.ortSession(this.#runtime, model, config)
    // A runner closed meanwhile has ended its models: this one would outlive it.
    if (this.#closed) ortAddon.ortRelease(session)
    this.#checkOpen()
    const loaded = new OnnxModel(session, this.#slots)
    this.#models.push(loaded)
    return loaded
  }

  #checkOpen (): void {
    if (this.#closed) throw errors.onnxRunnerClosed()
  }

  /** Refuses new runs (503), waits for those in flight, then ends every model's session. For the
   * host's `onClose` hook: `app.addHook('onClose', () => runner.close())`. */
  async close (): Promise<void> {
    this.#closed = true
    while (this.#runs.size > 0) await Promise.allSettled([...this.#runs])
    for (const model of this.#models.splice(0)) model.release()
  }

  async #acquire (waiter: Abandonable): Promise<() => void> {
    if (this.#closed) throw errors.onnxRunnerClosed()
    let finish!: () => void
    const run = new Promise<void>((resolve) => { finish = resolve })
    const forget = () => {
      this.#runs.delete(run)
      finish()
    }
    this.#runs.add(run)
    let giveBack: () => void
    try {
      // A run whose client went away keeps nothing (its request's leases, a turn) until a turn it would not use.
      giveBack = await this.#turns.take(waiter)
    } catch (error) {
      forget()
      throw error
    }
    return () => {
      forget()
      giveBack()
    }
  }
}
