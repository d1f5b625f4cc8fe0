/**
 * One inference request, read for a model: its inputs as tensors, storage for its outputs, and the
 * response. Shared memory it uses is leased until the response is finished or the client goes away.
 */
import type { Socket } from 'node:net'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Lease, SystemSharedMemoryRegistry } from '../../types'
import type { InferLimits, InferRequestWire, ModelSignature, Tensor, TensorData, TensorSpec } from '../../types/kserve'
import * as errors from '../errors'
import { HEADER_LENGTH_HEADER, InferBody } from './infer-body'
import { DEFAULT_INFER_LIMITS } from './infer-limits'
import { checkInferRequest } from './infer-wire'
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
  /** The request's inputs, in the order sent. */
  readonly inputs: Tensor[]
  readonly #plans: Map<string, OutputPlan>
  readonly #produced = new Map<string, ProducedOutput>()
  readonly #leases: Lease[] = []
  readonly #abandoned = new AbortController()
  /** Holds taken by `retain()` and not yet ended; `release()` waits for the last. */
  #holds = 0
  #releaseWaiting = false
  readonly #limits: Required<InferLimits>
  readonly #budgets: ResponseBudgets

  /** `bytes` gives the bytes of the inputs that declare them (`binary_data_size`), in order: a
   * binary body's section after its JSON, or another transport's own source. */
  constructor (body: InferRequestWire, bytes: Buffer | InputBytes, { registry, model, limits }: ReadInferRequestOptions) {
    const binary = Buffer.isBuffer(bytes) ? new BinaryCursor(bytes) : bytes
    this.id = body.id
    this.model = model
    this.#limits = { ...DEFAULT_INFER_LIMITS, ...limits }
    this.#budgets = responseBudgets(this.#limits, binary.byteLength)
    const hold = (lease: Lease) => { this.#leases.push(lease) }
    try {
      checkInputNames(body, model)
      checkBatch(body, model)
      const context = { model: model.name, registry, binary, limits: this.#limits, hold }
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
    if (tensor === undefined) throw new Error(`model '${this.model.name}' has no input '${name}'`)
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
    if (spec === undefined) throw new Error(`model '${this.model.name}' has no output '${name}'`)
    const data = outputStorage(spec, shape, this.#plans.get(name), this.#limits, this.#budgets)
    this.#produced.set(name, { spec, shape, data })
    return data as Data
  }

  /** The response for the outputs the request asked for, with the shared memory ones stored in
   * their regions: what each transport sends. */
  encode (): EncodedResponse {
    return encodeResponse({ model_name: this.model.name, id: this.id }, this.#plans, this.#produced, this.#budgets)
  }

  /**
   * The response body for the outputs the request asked for; sets the reply's headers. The body
   * holds no byte of shared memory, so the request's leases end here: a client slow to read its
   * response holds no region. One that reads nothing for `limits.sendTimeoutMs` is dropped.
   */
  respond (reply: FastifyReply): string | Buffer {
    try {
      const { header, binary } = this.encode()
      dropWhenStalled(reply, this.#limits.sendTimeoutMs)
      if (binary.length === 0) {
        reply.type('application/json')
        return header
      }
      const headerBytes = Buffer.from(header)
      reply.type('application/octet-stream').header(HEADER_LENGTH_HEADER, headerBytes.length)
      return Buffer.concat([headerBytes, ...binary])
    } finally {
      this.release()
    }
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

  /** Ends every lease of this request (once no `retain()` holds them). Called when its response is
   * finished or aborted. */
  release (): void {
    this.#releaseWaiting = this.#holds > 0
    if (this.#releaseWaiting) return
    for (const lease of this.#leases.splice(0)) lease.release()
  }
}

/** Drops the connection once no byte of the response has moved for `ms` (Node restarts a socket's
 * timeout at every write the client's reading lets through, and sets its keep-alive timeout after). */
function dropWhenStalled (reply: FastifyReply, ms: number): void {
  reply.raw.setTimeout(ms, () => {
    reply.log.warn({ sendTimeoutMs: ms }, 'the client read none of its response for the send timeout: connection dropped')
    reply.raw.destroy()
  })
}

function bodyOf (request: FastifyRequest): { header: InferRequestWire, binary: Buffer } {
  if (request.body instanceof InferBody) return request.body
  return { header: request.body as InferRequestWire, binary: Buffer.alloc(0) }
}

/**
 * Reads the infer request of `request` for `options.model`. Every lease it takes is released when
 * the reply is finished or the connection closes (also while the reply waits behind pipelined
 * ones), so a handler cannot forget one.
 */
export function readInferRequest (request: FastifyRequest, reply: FastifyReply, options: ReadInferRequestOptions): InferRequest {
  const { header, binary } = bodyOf(request)
  const infer = new InferRequest(checkInferRequest(header), binary, options)
  // A pipelined request's response waits behind the ones sent before it, and Node never closes a
  // waiting response when its connection goes: the socket's close ends the request too.
  const socket = request.raw.socket
  let forgetSocket = () => {}
  const close = () => {
    reply.raw.off('close', close)
    forgetSocket()
    if (!reply.raw.writableFinished) infer.abandon()
    infer.release()
  }
  reply.raw.once('close', close)
  if (reply.raw.destroyed || socket.destroyed) close()
  else forgetSocket = onSocketClose(socket, close)
  return infer
}

const SOCKET_CLOSES = Symbol('fastify-triton-shm: infer requests ended by this socket\'s close')

type ClosingSocket = Socket & { [SOCKET_CLOSES]?: Set<() => void> }

/** Calls `close` when `socket` closes, through one listener per socket however many requests are
 * pipelined on it (a listener each would pile up past Node's warning limit). Returns the undo. */
function onSocketClose (socket: ClosingSocket, close: () => void): () => void {
  const closes = socket[SOCKET_CLOSES] ?? watchClose(socket)
  closes.add(close)
  return () => { closes.delete(close) }
}

function watchClose (socket: ClosingSocket): Set<() => void> {
  const closes = new Set<() => void>()
  socket[SOCKET_CLOSES] = closes
  socket.once('close', () => { for (const close of closes) close() })
  return closes
}
