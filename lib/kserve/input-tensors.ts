/**
 * Inputs of an infer request as tensors, each from exactly one source: JSON `data`, the binary
 * body, or a registered shared memory region (a zero-copy view held by a lease).
 */
import type { Lease, SystemSharedMemoryRegistry } from '../../types'
import type { Datatype, InferInputWire, InferLimits, Tensor, TensorSpec } from '../../types/kserve'
import * as errors from '../errors'
import { bytesTensorFromJson, OFFSET_BYTES, parseBytesTensor } from './bytes-tensor'
import { copiedOver, elementBytes, exactElementCount, hasJsonForm, typedArrayFromJson, typedArrayOver } from './datatypes'
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
  /** Where the inputs that declare `binary_data_size` take their bytes, in order. */
  binary: Pick<InputBytes, 'take'>
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

/** The element count of a BYTES tensor, refused past the host's limit (none by default) before any
 * element is read. */
function bytesElementCount (tensor: string, shape: number[], context: InputContext): bigint {
  const count = exactElementCount(shape)
  const { maxBytesElements } = context.limits
  if (count > maxBytesElements) throw errors.tooManyBytesElements(tensor, count, maxBytesElements)
  return count
}

/** An input's tensor, made as one literal: a spread of its fields and then `data` would make V8
 * build a new hidden class for every tensor (a clone's map has no transitions to reuse). */
const tensorOf = (input: InferInputWire, spec: TensorSpec, data: Tensor['data']): Tensor =>
  ({ name: input.name, datatype: spec.datatype, shape: input.shape, data })

/** The tensor's elements decoded from its raw bytes, checked against its shape. */
function fromBytes (input: InferInputWire, spec: TensorSpec, bytes: Uint8Array, context: InputContext): Tensor {
  const bytesPerElement = elementBytes(spec.datatype)
  if (bytesPerElement === undefined) {
    // Each element takes 4 bytes at least: a count past a quarter of them is refused before the
    // offsets (at most twice the tensor's bytes) are charged and allocated.
    const count = bytesElementCount(input.name, input.shape, context)
    return tensorOf(input, spec, parseBytesTensor(input.name, bytes, Number(count), context.charge))
  }
  const expected = exactElementCount(input.shape) * BigInt(bytesPerElement)
  if (BigInt(bytes.byteLength) !== expected) throw errors.inputByteSizeMismatch(input.name, context.model, expected, bytes.byteLength)
  const datatype = spec.datatype as Exclude<typeof spec.datatype, 'BYTES'>
  // Bytes at an offset their typed array cannot start at (in a message, a body, a region) are copied.
  if (copiedOver(datatype, bytes)) context.charge(bytes.byteLength)
  return tensorOf(input, spec, typedArrayOver(datatype, bytes))
}

/** Triton's deepest JSON `data` (its HTTP server's `HTTP_MAX_JSON_NESTING_DEPTH`): an element
 * inside this many arrays, `data` itself counted, is refused. Tensors have a handful of dimensions,
 * and Triton, like this package, accepts data nested more deeply than its shape. */
export const MAX_DATA_DEPTH = 100

/** The element count JSON `data` of this input must have, as Triton reads it: its shape's for a
 * datatype JSON carries element by element; none for BYTES data (counted against the model later)
 * or FP16 and BF16 data (refused whatever its count). */
function jsonElementCount ({ datatype, shape }: InferInputWire): bigint | undefined {
  return datatype === 'BYTES' || !hasJsonForm(datatype as Datatype) ? undefined : exactElementCount(shape)
}

const INT64_MAX = 2n ** 63n - 1n

/**
 * The size of an input sent as JSON `data`, as Triton's HTTP server checks it before it reads
 * the data (its `GetElementCount`, then the byte size): dimensions it holds as int64_t, counted in
 * order until one is 0, within int64_t, as the element count times the datatype's size is.
 */
function checkJsonSize ({ name, datatype, shape }: InferInputWire): void {
  let count: bigint | undefined
  for (const dim of shape.map(BigInt)) {
    if (dim > INT64_MAX) throw errors.shapeInvalidDimensions(name, shape)
    if (dim === 0n) return
    if (count !== undefined && count > INT64_MAX / dim) throw errors.shapeElementCountOverflow(name, shape)
    count = (count ?? 1n) * dim
  }
  const bytesPerElement = elementBytes(datatype as Datatype) ?? 1
  if (count !== undefined && bytesPerElement > 1 && count > INT64_MAX / BigInt(bytesPerElement)) {
    throw errors.inputByteSizeOverflow(name, count, bytesPerElement)
  }
}

/**
 * The values of an input's JSON `data`, flat or nested, in order, checked as Triton's HTTP server
 * reads them: against the input's own shape (an element too many is refused as it is met, too few
 * at the end) and its nesting. Iterative, so a client's nesting never reaches the call stack.
 */
function flatten (input: InferInputWire): unknown[] {
  checkJsonSize(input)
  const count = jsonElementCount(input)
  const most = count === undefined || count > BigInt(Number.MAX_SAFE_INTEGER) ? Infinity : Number(count)
  const values: unknown[] = []
  const open: Array<{ array: unknown[], next: number }> = [{ array: input.data as unknown[], next: 0 }]
  while (open.length > 0) {
    const level = open[open.length - 1]
    if (level.next === level.array.length) {
      open.pop()
      continue
    }
    if (open.length === MAX_DATA_DEPTH) throw errors.dataTooDeep(MAX_DATA_DEPTH, input.datatype !== 'BYTES')
    const value = level.array[level.next++]
    if (Array.isArray(value)) {
      open.push({ array: value, next: 0 })
    } else if (values.length === most) {
      throw errors.dataTooManyElements()
    } else {
      values.push(value)
    }
  }
  if (count !== undefined && BigInt(values.length) < count) throw errors.dataTooFewElements()
  return values
}

/**
 * The values of each input's JSON `data` (undefined for an input sent another way), read before
 * the request is checked against its model, as Triton does: an input's source (exactly one of
 * `data`, binary data, shared memory), then its data against its own shape.
 */
export function readJsonData (inputs: InferInputWire[]): Array<unknown[] | undefined> {
  return inputs.map((input) => sourceOf(input, new Parameters(input.name, input.parameters)) === 'data' ? flatten(input) : undefined)
}

function fromJson (input: InferInputWire, spec: TensorSpec, values: unknown[], context: InputContext): Tensor {
  if (spec.datatype !== 'BYTES') return tensorOf(input, spec, typedArrayFromJson(input.name, spec.datatype, values))
  const count = bytesElementCount(input.name, input.shape, context)
  if (BigInt(values.length) !== count) throw errors.inputElementCountMismatch(input.name, context.model, count, values.length)
  context.charge(OFFSET_BYTES * (values.length + 1))
  return tensorOf(input, spec, bytesTensorFromJson(input.name, values))
}

/** Reads one input, already matched to the model's `spec`, whose source `readJsonData` checked:
 * `jsonValues` are its JSON `data` as read there, undefined for an input sent as bytes. */
export function readInput (input: InferInputWire, spec: TensorSpec, context: InputContext, jsonValues: unknown[] | undefined): Tensor {
  if (jsonValues !== undefined) return fromJson(input, spec, jsonValues, context)
  const parameters = new Parameters(input.name, input.parameters)
  if (!parameters.has('binary_data_size')) return fromBytes(input, spec, sharedMemoryBytes(input, parameters, context), context)
  const byteSize = parameters.unsigned('binary_data_size') as number
  return fromBytes(input, spec, context.binary.take(input.name, byteSize), context)
}
