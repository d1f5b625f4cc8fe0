/**
 * One inference request, read for a model, whatever transport brought it: its inputs as tensors,
 * storage for its outputs, and the response every transport encodes in its own way. Shared memory
 * it uses is leased until its transport ends it (the response is built, or the client goes away).
 */
import type { Lease, SystemSharedMemoryRegistry } from '../../types'
import type { InferLimits, InferRequestWire, ModelSignature, Tensor, TensorData, TensorSpec } from '../../types/kserve'
import * as errors from '../errors'
import { DEFAULT_INFER_LIMITS } from './infer-limits'
import { BinaryCursor, type InputBytes, readInput } from './input-tensors'
import {
  encodeResponse, type EncodedResponse, type OutputPlan, outputStorage, planOutputs, type ProducedOutput, type ResponseBudgets,
  responseBudgets
} from './output-tensors'

export interface ReadInferRequestOptions {
  /** The registry that resolves `shared_memory_region` parameters (`app.systemSharedMemory`). */
  registry: SystemSharedMemoryRegistry
  /** The model the request is for; inputs and outputs are checked against it. */
  model: ModelSignature
  /** The version of the model that runs it, named in the response (the model table gives it). */
  modelVersion?: string
  /** What one request may cost (defaults: `DEFAULT_INFER_LIMITS`). */
  limits?: InferLimits
}

const sameShape = (spec: number[], shape: number[]) =>
  spec.length === shape.length && spec.every((dim, index) => dim === -1 || dim === shape[index])

function specOfInput (model: ModelSignature, name: string, datatype: string, shape: number[]): TensorSpec {
  const spec = model.inputs.find((input) => input.name === name)
  if (spec === undefined) throw errors.unexpectedInput(name, model.name)
  if (datatype !== spec.datatype) throw errors.inputDatatypeMismatch(datatype, spec.datatype, model.name)
  if (!sameShape(spec.shape, shape)) throw errors.inputShapeMismatch(name, model.name, spec.shape, shape)
  return spec
}

/** A name sent twice first, as Triton does: with one, the count could match while a model input is missing. */
function checkInputNames ({ inputs }: InferRequestWire, model: ModelSignature): void {
  const names = new Set<string>()
  for (const { name } of inputs) {
    if (names.has(name)) throw errors.duplicateInput(name)
    names.add(name)
  }
  if (inputs.length !== model.inputs.length) throw errors.inputCountMismatch(model.name, model.inputs.length, inputs.length)
}

/** Inputs of a batching model share their first dimension, within the model's largest batch. */
function checkBatch ({ inputs }: InferRequestWire, { maxBatchSize = 0, name }: ModelSignature): void {
  if (!(maxBatchSize > 0)) return
  const batch = inputs[0]?.shape[0]
  const differs = inputs.find(({ shape }) => shape.length === 0 || shape[0] !== batch)
  if (differs !== undefined) throw errors.batchMismatch(differs.name, name)
  if (batch > maxBatchSize) throw errors.batchTooLarge(maxBatchSize, name)
}

export class InferRequest {
  readonly id?: string
  readonly model: ModelSignature
  /** The version of the model that runs the request, when known: every response names it. */
  readonly modelVersion?: string
  /** The request's inputs, in the order sent. */
  readonly inputs: Tensor[]
  readonly #plans: Map<string, OutputPlan>
  readonly #produced = new Map<string, ProducedOutput>()
  readonly #leases: Lease[] = []
  readonly #abandoned = new AbortController()
  /** Holds taken by `retain()` and not yet ended; `release()` waits for the last. */
  #holds = 0
  #releaseWaiting = false
  /** What this request may cost (the defaults, and the limits it was read with). */
  readonly limits: Readonly<Required<InferLimits>>
  readonly #budgets: ResponseBudgets

  /** `bytes` gives the bytes of the inputs that declare them (`binary_data_size`), in order: a
   * binary body's section after its JSON, or another transport's own source. */
  constructor (body: InferRequestWire, bytes: Buffer | InputBytes, { registry, model, modelVersion, limits }: ReadInferRequestOptions) {
    const binary = Buffer.isBuffer(bytes) ? new BinaryCursor(bytes) : bytes
    this.id = body.id
    this.model = model
    this.modelVersion = modelVersion
    this.limits = { ...DEFAULT_INFER_LIMITS, ...limits }
    this.#budgets = responseBudgets(this.limits, binary.byteLength)
    const hold = (lease: Lease) => { this.#leases.push(lease) }
    try {
      checkInputNames(body, model)
      checkBatch(body, model)
      const context = { model: model.name, registry, binary, limits: this.limits, hold }
      this.inputs = body.inputs.map((input) => readInput(input, specOfInput(model, input.name, input.datatype, input.shape), context))
      binary.finish()
      this.#plans = planOutputs(body, model, registry, hold, [...this.#leases])
    } catch (error) {
      this.release()
      throw error
    }
  }

  /** The outputs the response carries, in the order the request asked for them (all of the
   * model's when it named none). A model may compute only these. */
  get requestedOutputs (): string[] {
    return [...this.#plans.keys()]
  }

  /** The input named `name` (the model's signature guarantees it was sent). */
  input<Data extends TensorData = TensorData> (name: string): Tensor<Data> {
    const tensor = this.inputs.find((input) => input.name === name)
    if (tensor === undefined) throw errors.noSuchInput(this.model.name, name)
    return tensor as Tensor<Data>
  }

  /**
   * Storage for output `name` of `shape`, for the model to fill: a view straight into the client's
   * shared memory when the request put the output there, a new array otherwise (also where that
   * memory overlaps an input's: it is copied in after the model ran). BYTES outputs are an array of
   * Buffers, one per element. Throws a 400 when the output cannot be sent as asked (its region is
   * too small, it has too many BYTES elements, or too much JSON): ask for every output's storage
   * before writing any, and a refused request changes no byte of any region.
   */
  output<Data extends TensorData = TensorData> (name: string, shape: number[]): Data {
    const spec = this.model.outputs.find((output) => output.name === name)
    if (spec === undefined) throw errors.noSuchOutput(this.model.name, name)
    const data = outputStorage(spec, shape, this.#plans.get(name), this.limits, this.#budgets)
    this.#produced.set(name, { spec, shape, data })
    return data as Data
  }

  /** The response for the outputs the request asked for, with the shared memory ones stored in
   * their regions: what each transport sends. A transport ends the request's leases once it has
   * it (`release()`): the response holds no byte of shared memory. */
  encode (): EncodedResponse {
    const head = { id: this.id, model_name: this.model.name, model_version: this.modelVersion }
    return encodeResponse(head, this.#plans, this.#produced, this.#budgets)
  }

  /**
   * Aborted when the client goes away before the response is sent: its regions may be unmapped
   * from then on, so a long model run should stop (`signal.throwIfAborted()` throws a 499 error).
   */
  get signal (): AbortSignal {
    return this.#abandoned.signal
  }

  /** Marks the request abandoned by its client (see `signal`). */
  abandon (): void {
    this.#abandoned.abort(errors.clientClosedRequest())
  }

  /**
   * Keeps this request's leases past its reply's close until the returned function is called (once;
   * later calls do nothing): for a model whose threads still read and write the request's memory
   * after its client went away. `release()` meanwhile waits for every hold to end.
   */
  retain (): () => void {
    this.#holds++
    let held = true
    return () => {
      if (!held) return
      held = false
      if (--this.#holds === 0 && this.#releaseWaiting) this.release()
    }
  }

  /** Ends every lease of this request (once no `retain()` holds them). Its transport calls it when
   * the response is built or the client went away. */
  release (): void {
    this.#releaseWaiting = this.#holds > 0
    if (this.#releaseWaiting) return
    for (const lease of this.#leases.splice(0)) lease.release()
  }
}
