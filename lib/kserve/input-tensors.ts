/**
 * Inputs of an infer request as tensors, each from exactly one source: JSON `data`, the binary
 * body, or a registered shared memory region (a zero-copy view held by a lease).
 */
import type { Lease, SystemSharedMemoryRegistry } from '../../types'
import type { InferInputWire, Tensor, TensorSpec } from '../../types/kserve'
import * as errors from '../errors'
import { bytesTensorFromJson, parseBytesTensor } from './bytes-tensor'
import { elementBytes, elementCount, typedArrayFromJson, typedArrayOver } from './datatypes'
import { Parameters } from './infer-wire'

/** Hands out the binary section of a body in order, one input after another. */
export class BinaryCursor {
  #position = 0

  constructor (private readonly binary: Buffer) {}

  take (input: string, byteSize: number): Uint8Array {
    if (byteSize > this.binary.length - this.#position) {
      throw errors.invalidInferRequest(`the binary data of input '${input}' runs past the end of the body`)
    }
    this.#position += byteSize
    return this.binary.subarray(this.#position - byteSize, this.#position)
  }

  /** Throws if bytes are left over: an input's size was declared wrong. */
  finish (): void {
    if (this.#position !== this.binary.length) {
      throw errors.invalidInferRequest('the body holds more binary data than the inputs declare')
    }
  }
}

export interface InputContext {
  model: string
  registry: SystemSharedMemoryRegistry
  binary: BinaryCursor
  /** Keeps a lease until the response is finished. */
  hold(lease: Lease): void
}

const SOURCES = ['data', 'binary_data_size', 'shared_memory_region'] as const

function sourceOf (input: InferInputWire, parameters: Parameters): typeof SOURCES[number] {
  const set = SOURCES.filter((source) => source === 'data' ? input.data !== undefined : parameters.has(source))
  if (set.length !== 1) throw errors.inputSourceCount(set)
  return set[0]
}

function sharedMemoryBytes (input: InferInputWire, parameters: Parameters, context: InputContext): Uint8Array {
  const byteSize = parameters.unsigned('shared_memory_byte_size')
  if (byteSize === undefined) throw errors.missingSharedMemoryByteSize(input.name)
  const region = parameters.string('shared_memory_region') as string
  const lease = context.registry.acquire(region, parameters.unsigned('shared_memory_offset') ?? 0, byteSize)
  context.hold(lease)
  return lease.buffer
}

/** The tensor's elements decoded from its raw bytes, checked against its shape. */
function fromBytes (input: InferInputWire, spec: TensorSpec, bytes: Uint8Array, model: string): Tensor {
  const count = elementCount(input.shape)
  const bytesPerElement = elementBytes(spec.datatype)
  const tensor = { name: input.name, datatype: spec.datatype, shape: input.shape }
  if (bytesPerElement === undefined) return { ...tensor, data: parseBytesTensor(input.name, bytes, count) }
  if (bytes.byteLength !== count * bytesPerElement) {
    throw errors.inputByteSizeMismatch(input.name, model, count * bytesPerElement, bytes.byteLength)
  }
  return { ...tensor, data: typedArrayOver(spec.datatype as Exclude<typeof spec.datatype, 'BYTES'>, bytes) }
}

function fromJson (input: InferInputWire, spec: TensorSpec, model: string): Tensor {
  const values = (input.data as unknown[]).flat(Infinity)
  const count = elementCount(input.shape)
  if (values.length !== count) throw errors.inputElementCountMismatch(input.name, model, count, values.length)
  const data = spec.datatype === 'BYTES'
    ? bytesTensorFromJson(input.name, values)
    : typedArrayFromJson(input.name, spec.datatype, values)
  return { name: input.name, datatype: spec.datatype, shape: input.shape, data }
}

/** Reads one input, already matched to the model's `spec`. */
export function readInput (input: InferInputWire, spec: TensorSpec, context: InputContext): Tensor {
  const parameters = new Parameters(input.name, input.parameters)
  switch (sourceOf(input, parameters)) {
    case 'data':
      return fromJson(input, spec, context.model)
    case 'binary_data_size': {
      const byteSize = parameters.unsigned('binary_data_size') as number
      return fromBytes(input, spec, context.binary.take(input.name, byteSize), context.model)
    }
    case 'shared_memory_region':
      return fromBytes(input, spec, sharedMemoryBytes(input, parameters, context), context.model)
  }
}
