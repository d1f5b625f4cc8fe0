/**
 * ModelInfer over the KServe helpers: a `ModelInferRequest` becomes the same `InferRequest` as an
 * HTTP infer request (inputs from shared memory, `raw_input_contents` or typed `contents`), and
 * the request's outputs become a `ModelInferResponse` (each in shared memory or, aligned with the
 * outputs, in `raw_output_contents`). Every check is the helpers' own.
 */
import type { ServerUnaryCall } from '@grpc/grpc-js'
import type { InferInputWire, InferRequestWire } from '../../types/kserve'
import type { InferInputTensor, ModelInferRequest, ModelInferResponse } from '../../types/grpc'
import * as errors from '../errors'
import { isDatatype } from '../kserve/datatypes'
import { InferRequest, type ReadInferRequestOptions } from '../kserve/infer-request'
import { checkInferRequest } from '../kserve/infer-wire'
import type { InputBytes } from '../kserve/input-tensors'
import { classificationParameter, sharedMemoryParameters } from './infer-parameters'
import { modelParameters, requestParameters } from './request-parameters'
import { contentsBytes, hasContents } from './tensor-contents'

/** The bytes of the inputs not in shared memory, one entry per input, in order. */
class InputBytesList implements InputBytes {
  readonly byteLength: number
  #next = 0

  constructor (private readonly entries: Uint8Array[]) {
    this.byteLength = entries.reduce((total, entry) => total + entry.byteLength, 0)
  }

  take (): Uint8Array {
    return this.entries[this.#next++]
  }

  finish (): void {}
}

const EMPTY = new Uint8Array(0)

/** Each input's shared memory parameters, or its bytes (`binary_data_size` for the helpers). */
function inputsOf ({ model_name: model, inputs, raw_input_contents: raw }: ModelInferRequest): { inputs: InferInputWire[], bytes: Uint8Array[] } {
  const parameters = inputs.map(({ name, parameters }) => sharedMemoryParameters(name, parameters))
  const inMemory = (index: number) => parameters[index].shared_memory_region !== undefined
  const typed = inputs.filter(({ contents }) => hasContents(contents))
  if (raw.length > 0 && typed.length > 0) throw errors.rawAndTypedContents(typed[0].name)
  const rawCount = inputs.filter((_input, index) => !inMemory(index)).length
  if (raw.length > 0 && raw.length !== rawCount) throw errors.rawInputContentsCount(model, rawCount, raw.length)
  const bytes: Uint8Array[] = []
  const wire = inputs.map((input: InferInputTensor, index): InferInputWire => {
    const { name, datatype } = input
    const shape = input.shape.map(Number)
    if (inMemory(index)) {
      if (hasContents(input.contents)) throw errors.contentsAndSharedMemory(name)
      return { name, datatype, shape, parameters: parameters[index] }
    }
    const data = raw.length > 0
      ? raw[bytes.length]
      : hasContents(input.contents) && isDatatype(datatype) ? contentsBytes(name, datatype, input.contents) : EMPTY
    bytes.push(data)
    return { name, datatype, shape, parameters: { binary_data_size: data.byteLength } }
  })
  return { inputs: wire, bytes }
}

/** An output as the helpers read it: raw unless it goes to shared memory (`binary_data_output`
 * covers only the outputs a request does not list). */
function outputOf ({ name, parameters }: ModelInferRequest['outputs'][number]) {
  const inMemory = sharedMemoryParameters(name, parameters)
  const classification = classificationParameter(parameters, inMemory.shared_memory_region !== undefined)
  if (classification !== undefined) return { name, parameters: { classification, binary_data: true } }
  if (inMemory.shared_memory_region === undefined) inMemory.binary_data = true
  return { name, parameters: inMemory }
}

/** The request as the helpers read it: every output not in shared memory is sent raw. */
function wireOf (request: ModelInferRequest): { wire: InferRequestWire, bytes: Uint8Array[] } {
  const { inputs, bytes } = inputsOf(request)
  const outputs = request.outputs.map(outputOf)
  const parameters = modelParameters(request.parameters)
  parameters.binary_data_output = true
  const wire = { id: request.id === '' ? undefined : request.id, parameters, inputs, outputs }
  return { wire: checkInferRequest(wire), bytes }
}

/** The `InferRequest` of a `ModelInferRequest` for `options.model`, with every check of the HTTP helpers. */
export function modelInferRequest (request: ModelInferRequest, options: ReadInferRequestOptions): InferRequest {
  const { wire, bytes } = wireOf(request)
  return new InferRequest(wire, new InputBytesList(bytes), { sequence: requestParameters(request.parameters).sequence, ...options })
}

/** What reading a call's request needs of the call: whether it is cancelled, and the word when it
 * is (a grpc-js call is one; so is the listener's own ModelInfer stream). */
export interface CancellableCall {
  readonly cancelled: boolean
  once(event: 'cancelled', listener: () => void): unknown
}

/**
 * Reads the ModelInfer call for `options.model` (its message: a grpc-js call's `request`, or
 * `message` when the handler decoded it itself). Its leases end when the call is cancelled (the
 * request's `signal` aborts then), or when `modelInferResponse` builds its answer; a handler that
 * fails must call `infer.release()` itself.
 */
export function readModelInferRequest (call: ServerUnaryCall<ModelInferRequest, ModelInferResponse>, options: ReadInferRequestOptions,
  message?: ModelInferRequest): InferRequest
export function readModelInferRequest (call: CancellableCall, options: ReadInferRequestOptions, message: ModelInferRequest): InferRequest
export function readModelInferRequest (call: CancellableCall & { request?: ModelInferRequest }, options: ReadInferRequestOptions,
  message = call.request as ModelInferRequest): InferRequest {
  const infer = modelInferRequest(message, options)
  const cancel = () => {
    infer.abandon()
    infer.release()
  }
  if (call.cancelled) cancel()
  else call.once('cancelled', cancel)
  return infer
}

const NO_BYTES = new Uint8Array(0)

/** The response listing each output the request asked for, shared memory ones stored in their
 * regions, naming the version that ran; the request's leases end once it is built. */
export function modelInferResponse (infer: InferRequest): ModelInferResponse {
  try {
    const { outputs } = infer.encode()
    return {
      model_name: infer.model.name,
      model_version: infer.modelVersion ?? '',
      id: infer.id ?? '',
      outputs: outputs.map(({ name, datatype, shape }) => ({ name, datatype, shape })),
      raw_output_contents: outputs.map(({ binary }) => binary ?? NO_BYTES)
    }
  } finally {
    infer.release()
  }
}
