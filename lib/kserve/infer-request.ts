/**
 * One inference request, read for a model, whatever transport brought it: its inputs as tensors,
 * storage for its outputs, and the response every transport encodes in its own way. Shared memory
 * it uses is leased until its transport ends it (the response is built, or the client goes away).
 */
import type { Lease, SystemSharedMemoryRegistry } from '../../types'
import type {
  InferLimits, InFlightReservation, InferRequestWire, ModelSignature, Tensor, TensorData, TensorParameters, TensorSpec
} from '../../types/kserve'
import type { SendOptions, SequenceContext, SequenceFlags } from '../../types/sequences'
import * as errors from '../errors'
import { DEFAULT_INFER_LIMITS } from './infer-limits'
import { BinaryCursor, type InputBytes, readInput, readJsonData } from './input-tensors'
import {
  encodeGenerateResponse, encodeResponse, type EncodedResponse, type OutputPlan, outputStorage, planOutputs, type ProducedOutput, type ResponseBudgets,
  responseBudgets
} from './output-tensors'
import { modelParametersOfJson } from './request-parameters'
import { NO_SEQUENCE, sequenceFlagsOfJson } from './sequence-flags'
import { tensorDataBytes } from './tensor-data'
import type { Abandonable } from '../util/abandonable'

export interface ReadInferRequestOptions {
  /** The registry that resolves `shared_memory_region` parameters (`app.systemSharedMemory`). */
  registry: SystemSharedMemoryRegistry
  /** The model the request is for; inputs and outputs are checked against it. */
  model: ModelSignature
  /** The version of the model that runs it, named in the response (the model table gives it). */
  modelVersion?: string
  /** What one request may cost (defaults: `DEFAULT_INFER_LIMITS`). */
  limits?: InferLimits
  /** The request's sequence flags, read by its transport; default: from the JSON request's
   * `parameters`, as Triton's HTTP server reads them. */
  sequence?: SequenceFlags
  /** The request's share of what all requests in flight hold (`registry.inFlight.open()`): its
   * output storage is charged to it before it is allocated. Its transport opens it (and charged the
   * request's body or message to it first) and releases it when the request is over. Default: none,
   * nothing charged. */
  reservation?: InFlightReservation
  /** How many times the transport copies output bytes into its answer (HTTP's body once, gRPC's
   * encoding and framing twice): charged with the outputs' storage, so a request refused for what
   * it would hold is refused before any output is written. Default 0. */
  outputCopies?: number
}

/** Where a decoupled model's responses go: one response of the outputs stored since the last
 * (`final`: the request's last); resolves once the transport can take another. */
export type ResponseSender = (final: boolean) => Promise<void>

const sameShape = (spec: number[], shape: number[]) =>
  spec.length === shape.length && spec.every((dim, index) => dim === -1 || dim === shape[index])

function specOfInput (model: ModelSignature, name: string, datatype: string, shape: number[]): TensorSpec {
  const spec = model.inputs.find((input) => input.name === name)
  if (spec === undefined) throw errors.unexpectedInput(name, model.name)
  if (datatype !== spec.datatype) throw errors.inputDatatypeMismatch(datatype, spec.datatype, model.name)
  if (!sameShape(spec.shape, shape)) throw errors.inputShapeMismatch(name, model.name, spec.shape, shape)
  return spec
}

/** A name sent twice first, as Triton does: with one, the count could match while a model input
 * is missing. Then the count, between the model's required inputs and all of them. */
function checkInputNames ({ inputs }: InferRequestWire, model: ModelSignature): void {
  const names = new Set<string>()
  for (const { name } of inputs) {
    if (names.has(name)) throw errors.duplicateInput(name)
    names.add(name)
  }
  const required = model.inputs.filter(({ optional }) => optional !== true)
  if (inputs.length > model.inputs.length || inputs.length < required.length) throw inputCountError(model, names)
}

/** Triton's answer to a request without every required input of its model. */
function inputCountError (model: ModelSignature, names: Set<string>): Error {
  const required = model.inputs.filter(({ optional }) => optional !== true)
  const missing = required.filter(({ name }) => !names.has(name)).map(({ name }) => name)
  return errors.inputCountMismatch(model.name, required.length, model.inputs.length, [...names].sort(), missing)
}

/** Every required input is there (an optional one may take a required one's place in the count). */
function checkRequiredInputs ({ inputs }: InferRequestWire, model: ModelSignature): void {
  const names = new Set(inputs.map(({ name }) => name))
  if (model.inputs.some(({ name, optional }) => optional !== true && !names.has(name))) throw inputCountError(model, names)
}

/** Inputs of a batching model share their first dimension, within the model's largest batch. */
function checkBatch ({ inputs }: InferRequestWire, { maxBatchSize = 0, name }: ModelSignature): void {
  if (!(maxBatchSize > 0)) return
  const batch = inputs[0]?.shape[0]
  const differs = inputs.find(({ shape }) => shape.length === 0 || shape[0] !== batch)
  if (differs !== undefined) throw errors.batchMismatch(differs.name, name)
  if (batch > maxBatchSize) throw errors.batchTooLarge(maxBatchSize, name)
}

export class InferRequest implements Abandonable {
  readonly id?: string
  readonly model: ModelSignature
  /** The version of the model that runs the request, when known: every response names it. */
  readonly modelVersion?: string
  /** The request's inputs, in the order sent (a stateful model's control inputs after them). */
  readonly inputs: Tensor[]
  /** What the request says of its sequence (Triton's `sequence_id`, `sequence_start`, `sequence_end`). */
  readonly sequenceFlags: SequenceFlags
  /** The request's parameters that are the model's: all but those the server takes for itself
   * (the sequence flags, `priority`, `timeout`, `binary_data_output`, the `triton_` keys). */
  readonly parameters: Readonly<TensorParameters>
  /** For a run of a stateful model (a declaration's `sequenceBatching`): its sequence, with the
   * state the model keeps. Set by the model table. */
  sequence?: SequenceContext
  readonly #plans: Map<string, OutputPlan>
  readonly #produced = new Map<string, ProducedOutput>()
  readonly #leases: Lease[] = []
  readonly #registry: SystemSharedMemoryRegistry
  /** Why the request was abandoned, once it is; and the controller of `signal`, made when first
   * asked for (an AbortController costs several microseconds, more than the rest of a small
   * request's reading: most requests are never abandoned, and their signal never read). */
  #abandonedBy?: Error
  #abandoned?: AbortController
  /** Told of the abandonment (`onAbandoned`): cheaper than a signal's listeners. */
  #onAbandoned?: Array<(reason: Error) => void>
  /** Holds taken by `retain()` and not yet ended; `release()` waits for the last. */
  #holds = 0
  #releaseWaiting = false
  /** Its leases ended: the request is over, whatever its transport says afterwards. */
  #over = false
  /** What this request may cost (the defaults, and the limits it was read with). */
  readonly limits: Readonly<Required<InferLimits>>
  #budgets: ResponseBudgets
  /** What the request's own reading charged (its reservation, its bytes, the copies its transport
   * makes): a decoupled model's next response is budgeted from them (`#nextBudgets`). */
  readonly #reservation?: InFlightReservation
  readonly #ownBytes: number
  readonly #outputCopies: number
  /** What a decoupled model's latest response holds, given back as the next one begins. */
  #responseReservation?: InFlightReservation
  #sender?: ResponseSender
  #finalSent = false
  /** The request as its transport read it, and the bytes its inputs took from it, in order: what
   * another process needs to run it (`forwardable`). */
  readonly #wire: InferRequestWire
  readonly #inputBytes: Uint8Array[] = []
  /** A response another process made for it (`answerWith`). */
  #answer?: EncodedResponse
  /** A request made by `forModel`: its reservation, and how it stops following its parent's abandonment. */
  #stepReservation?: InFlightReservation
  #detach?: () => void

  /** `bytes` gives the bytes of the inputs that declare them (`binary_data_size`), in order: a
   * binary body's section after its JSON, or another transport's own source. */
  constructor (body: InferRequestWire, bytes: Buffer | InputBytes,
    { registry, model, modelVersion, limits, sequence, reservation, outputCopies = 0 }: ReadInferRequestOptions) {
    const binary = Buffer.isBuffer(bytes) ? new BinaryCursor(bytes) : bytes
    this.#wire = body
    this.id = body.id
    this.#registry = registry
    this.model = model
    this.modelVersion = modelVersion
    this.limits = { ...DEFAULT_INFER_LIMITS, ...limits }
    const ownBytes = binary.byteLength
    this.#budgets = responseBudgets(this.limits, ownBytes, (bytes) => reservation?.charge(bytes), outputCopies)
    this.#reservation = reservation
    this.#ownBytes = ownBytes
    this.#outputCopies = outputCopies
    const hold = (lease: Lease) => { this.#leases.push(lease) }
    try {
      this.sequenceFlags = sequence ?? sequenceFlagsOfJson(body.parameters)
      this.parameters = modelParametersOfJson(body.parameters)
      // As Triton's HTTP server: each input's JSON data is read against its own shape first,
      // before the request is checked against the model.
      const jsonData = readJsonData(body.inputs)
      checkInputNames(body, model)
      checkBatch(body, model)
      const taken = this.#inputBytes
      const recorded: Pick<InputBytes, 'take'> = {
        take: (input, byteSize) => {
          const inputBytes = binary.take(input, byteSize)
          taken.push(inputBytes)
          return inputBytes
        }
      }
      const charge = (bytes: number) => reservation?.charge(bytes)
      const context = { model: model.name, registry, binary: recorded, limits: this.limits, hold, charge }
      const specs = body.inputs.map((input) => specOfInput(model, input.name, input.datatype, input.shape))
      checkRequiredInputs(body, model)
      this.inputs = body.inputs.map((input, index) => readInput(input, specs[index], context, jsonData[index]))
      binary.finish()
      this.#plans = planOutputs(body, model, registry, hold, [...this.#leases])
    } catch (error) {
      this.release()
      throw error
    }
  }

  /** Budgets for a decoupled model's next response, charged to a reservation of its own. A method,
   * not a closure made in the constructor: a closure kept on the request would hold the
   * constructor's whole context, and V8 then keeps every request's objects past the young
   * generation (allocation-site pretenuring), which doubled a small request's cost. */
  #nextBudgets (): ResponseBudgets {
    this.#responseReservation?.release()
    // Once the request is over (its client gone), what its run still stores is never sent, and
    // no reservation may outlive it.
    const next = this.#responseReservation = this.#over ? undefined : this.#reservation && this.#registry.inFlight.open()
    return responseBudgets(this.limits, this.#ownBytes, (bytes) => next?.charge(bytes), this.#outputCopies)
  }

  /** The outputs the response carries, in the order the request asked for them (all of the
   * model's when it named none). A model may compute only these. */
  get requestedOutputs (): string[] {
    return [...this.#plans.keys()]
  }

  /** The input named `name`: the model's signature guarantees a required one was sent; an
   * optional one the request left out throws (look for it in `inputs` first). */
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

  /** The outputs the model stored since its last response (`output()`), as tensors. */
  get storedOutputs (): Tensor[] {
    return [...this.#produced.values()].map(({ spec, shape, data }) => ({ name: spec.name, datatype: spec.datatype, shape, data }))
  }

  /**
   * A request of this one's for another model (an ensemble's step): `inputs` as it takes them,
   * every output in `outputs` asked for as binary data, this request's id, parameters, limits and
   * registry. Its output storage is charged to a reservation of its own, given back when it is
   * released; it is abandoned when this request is. The caller releases it.
   */
  forModel (model: ModelSignature, modelVersion: string, inputs: Tensor[], outputs: string[]): InferRequest {
    const bytes = inputs.map(({ data }) => tensorDataBytes(data))
    const wire: InferRequestWire = {
      ...(this.id !== undefined && { id: this.id }),
      parameters: this.parameters,
      inputs: inputs.map(({ name, datatype, shape }, index) => ({ name, datatype, shape, parameters: { binary_data_size: bytes[index].byteLength } })),
      outputs: outputs.map((name) => ({ name, parameters: { binary_data: true } }))
    }
    const registry = this.#registry
    const reservation = registry.inFlight.open()
    let position = 0
    const inputBytes: InputBytes = { byteLength: 0, take: () => bytes[position++], finish: () => {} }
    let request: InferRequest
    try {
      request = new InferRequest(wire, inputBytes, { registry, model, modelVersion, limits: this.limits, sequence: NO_SEQUENCE, reservation })
    } catch (error) {
      reservation.release()
      throw error
    }
    request.#stepReservation = reservation
    request.#detach = this.onAbandoned(() => request.abandon())
    return request
  }

  /** The response for the outputs the request asked for, with the shared memory ones stored in
   * their regions: what each transport sends. A transport ends the request's leases once it has
   * it (`release()`): the response holds no byte of shared memory. */
  encode (): EncodedResponse {
    if (this.#answer !== undefined) return this.#answer
    const head = { id: this.id, model_name: this.model.name, model_version: this.modelVersion }
    return encodeResponse(head, this.#plans, this.#produced, this.#budgets)
  }

  /** The response of Triton's generate extension (`encodeGenerateResponse`) for the outputs the
   * model stored since its last response; the model table gives every such request its version. */
  encodeGenerate (): string {
    const head = { id: this.id ?? '', model_name: this.model.name, model_version: this.modelVersion as string }
    return encodeGenerateResponse(head, this.#produced, this.#budgets)
  }

  /** The request as its transport read it (its inputs in shared memory name their regions), and
   * the bytes of its other inputs, in order: what another process of the service needs to run it
   * (the one that owns its sequence). */
  get forwardable (): { wire: InferRequestWire, inputBytes: Uint8Array[] } {
    return { wire: this.#wire, inputBytes: this.#inputBytes }
  }

  /**
   * Answers with a response another process made for this request (the one that owns its
   * sequence ran it, and wrote its shared memory outputs into the regions both processes map):
   * `encode()` gives it from now on. The bytes it carries are charged as binary outputs are; those
   * of a decoupled model's earlier response are given back, as `send()` gives them back.
   */
  answerWith (response: EncodedResponse): void {
    if (this.#answer !== undefined) this.#budgets = this.#nextBudgets()
    this.#budgets.hold(response.binary.reduce((total, part) => total + part.byteLength, 0))
    this.#answer = response
  }

  /**
   * A decoupled model's response (Triton's `model_transaction_policy.decoupled`): the outputs
   * stored since the last response (`output()`), sent now, in their regions or in the response.
   * Resolves once the transport can take another response: a client slow to read holds the model
   * here, so a run that awaits each send never piles responses up. After it, `output()` gives
   * storage for the next response (an output in shared memory: the same region part, which the
   * client must read before the next response overwrites it). Rejects for a model that is not
   * decoupled, after the final response or the run's end, and once the client has gone.
   */
  async send ({ final = false }: SendOptions = {}): Promise<void> {
    if (this.#finalSent) throw errors.responseAfterFinal(this.model.name)
    const sender = this.#sender
    if (sender === undefined) throw errors.notDecoupled(this.model.name)
    this.throwIfAbandoned()
    this.#finalSent = final
    try {
      await sender(final)
    } finally {
      this.#produced.clear()
      this.#budgets = this.#nextBudgets()
    }
  }

  /** Where `send()` sends (the model table sets it for a decoupled model's run). */
  sendResponsesTo (sender: ResponseSender): void {
    this.#sender = sender
  }

  /** Ends `send()`: once the run is over, or its final response sent. True if the final one was. */
  endResponses (): boolean {
    this.#sender = undefined
    const finalSent = this.#finalSent
    this.#finalSent = true
    return finalSent
  }

  /**
   * Aborted when the client goes away before the response is sent: its regions may be unmapped
   * from then on, so a long model run should stop (`signal.throwIfAborted()` throws a 499 error).
   */
  get signal (): AbortSignal {
    if (this.#abandoned === undefined) {
      this.#abandoned = new AbortController()
      if (this.#abandonedBy !== undefined) this.#abandoned.abort(this.#abandonedBy)
    }
    return this.#abandoned.signal
  }

  /** Throws once the request is abandoned (`signal.throwIfAborted()`, without making the signal). */
  throwIfAbandoned (): void {
    if (this.#abandonedBy !== undefined) throw this.#abandonedBy
  }

  /**
   * Calls `listener` with the reason once the request is abandoned (at once if it is already);
   * returns the way to stop listening. As `signal.addEventListener('abort', ...)`, without making
   * the signal: what a model that stops its own work needs of it, for a fraction of its cost.
   */
  onAbandoned (listener: (reason: Error) => void): () => void {
    if (this.#abandonedBy !== undefined) {
      listener(this.#abandonedBy)
      return () => {}
    }
    const listeners = this.#onAbandoned ??= []
    listeners.push(listener)
    return () => {
      const index = listeners.indexOf(listener)
      if (index >= 0) listeners.splice(index, 1)
    }
  }

  /** Marks the request abandoned by its client (see `signal`), or by its transport with `reason`
   * (a stream's request still queued when the server stops). Nothing to do once its leases have
   * ended (grpc-js reports every unary call that ended as cancelled): the default reason, an
   * error with its stack, is made only for a request abandoned indeed. */
  abandon (reason?: Error): void {
    if (this.#over || this.#abandonedBy !== undefined) return
    const abandonedBy = this.#abandonedBy = reason ?? errors.clientClosedRequest()
    this.#abandoned?.abort(abandonedBy)
    for (const listener of this.#onAbandoned?.splice(0) ?? []) listener(abandonedBy)
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
    this.#over = true
    this.#responseReservation?.release()
    this.#stepReservation?.release()
    this.#detach?.()
    for (const lease of this.#leases.splice(0)) lease.release()
  }
}
