/**
 * Inputs of an infer request as tensors, each from exactly one source: JSON `data`, the binary
 * body, or a registered shared memory region (a zero-copy view held by a lease).
 */
import type { Lease, SystemSharedMemoryRegistry } from '../../types'
import type { InferInputWire, InferLimits, Tensor, TensorSpec } from '../../types/kserve'
import * as errors from '../errors'
import { bytesTensorFromJson, parseBytesTensor } from './bytes-tensor'
import { copiedOver, elementBytes, exactElementCount, typedArrayFromJson, typedArrayOver } from './datatypes'
import { Parameters } from './infer-wire'

/** Where the inputs sent as bytes (not in shared memory) get them, one input after another. */
export interface InputBytes {
  /** Bytes of input data the request carries in all (what its response may match in binary outputs). */
  readonly byteLength: number
  /** The next input's bytes, of `byteSize` bytes as its request declares. */
  take(input: string, byteSize: number): Uint8Array
  /** Throws if bytes are left over. */
  finish(): void
}

/** Hands out the binary section of a body in order, one input after another. */
export class BinaryCursor implements InputBytes {
  #position = 0

  constructor (private readonly binary: Buffer) {}

  get byteLength (): number {
    return this.binary.length
  }

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
  binary: InputBytes
  limits: Required<InferLimits>
  /** Keeps a lease until the response is finished. */
  hold(lease: Lease): void
  /** Charges the request's share of the in-flight budget, before an allocation. */
  charge(bytes: number): void
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

/** The element count of a BYTES tensor, refused before any element is read when over the limit. */
function bytesElementCount (tensor: string, shape: number[], limits: Required<InferLimits>): number {
  const count = exactElementCount(shape)
  if (count > limits.maxBytesElements) throw errors.tooManyBytesElements(tensor, count, limits.maxBytesElements)
  return Number(count)
}

/** The tensor's elements decoded from its raw bytes, checked against its shape. */
function fromBytes (input: InferInputWire, spec: TensorSpec, bytes: Uint8Array, context: InputContext): Tensor {
  const bytesPerElement = elementBytes(spec.datatype)
  const tensor = { name: input.name, datatype: spec.datatype, shape: input.shape }
  if (bytesPerElement === undefined) {
    return { ...tensor, data: parseBytesTensor(input.name, bytes, bytesElementCount(input.name, input.shape, context.limits)) }
  }
  const expected = exactElementCount(input.shape) * BigInt(bytesPerElement)
  if (BigInt(bytes.byteLength) !== expected) throw errors.inputByteSizeMismatch(input.name, context.model, expected, bytes.byteLength)
  const datatype = spec.datatype as Exclude<typeof spec.datatype, 'BYTES'>
  // Bytes at an offset their typed array cannot start at (in a message, a body, a region) are copied.
  if (copiedOver(datatype, bytes)) context.charge(bytes.byteLength)
  return { ...tensor, data: typedArrayOver(datatype, bytes) }
}

/** Deepest JSON `data` accepted: tensors have a handful of dimensions, and Triton, like this
 * package, accepts data nested more deeply than its shape. */
export const MAX_DATA_DEPTH = 64

/**
 * The values of JSON `data`, flat or nested, in order. Iterative, so a client's nesting never
 * reaches the call stack; nesting deeper than `MAX_DATA_DEPTH` is refused.
 */
function flatten (input: InferInputWire): unknown[] {
  const values: unknown[] = []
  const open: Array<{ array: unknown[], next: number }> = [{ array: input.data as unknown[], next: 0 }]
  while (open.length > 0) {
    const level = open[open.length - 1]
    if (level.next === level.array.length) {
      open.pop()
      continue
    }
    const value = level.array[level.next++]
    if (!Array.isArray(value)) {
      values.push(value)
    } else if (open.length === MAX_DATA_DEPTH) {
      throw errors.dataTooDeep(input.name, MAX_DATA_DEPTH)
    } else {
      open.push({ array: value, next: 0 })
    }
  }
  return values
}

function fromJson (input: InferInputWire, spec: TensorSpec, context: InputContext): Tensor {
  const values = flatten(input)
  const count = spec.datatype === 'BYTES' ? bytesElementCount(input.name, input.shape, context.limits) : exactElementCount(input.shape)
  if (BigInt(values.length) !== BigInt(count)) throw errors.inputElementCountMismatch(input.name, context.model, count, values.length)
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
      return fromJson(input, spec, context)
    case 'binary_data_size': {
      const byteSize = parameters.unsigned('binary_data_size') as number
      return fromBytes(input, spec, context.binary.take(input.name, byteSize), context)
    }
    case 'shared_memory_region':
      return fromBytes(input, spec, sharedMemoryBytes(input, parameters, context), context)
  }
}
