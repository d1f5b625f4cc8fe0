/**
 * KServe datatypes: element sizes, the typed array that holds each one, and conversions between
 * raw little-endian bytes, JSON values and typed arrays.
 */
import type { BytesElements, Datatype, TensorData } from '../../types/kserve'
import * as errors from '../errors'

type TypedArray = Exclude<TensorData, Buffer[] | BytesElements>
type TypedArrayConstructor = {
  new (length: number): TypedArray
  new (buffer: ArrayBufferLike, byteOffset: number, length: number): TypedArray
  readonly BYTES_PER_ELEMENT: number
}

interface FixedSize {
  /** Bytes per element on the wire. */
  elementBytes: number
  array: TypedArrayConstructor
  /** What a JSON element must be, or undefined where JSON cannot carry the type. */
  json?: 'number' | 'boolean' | 'bigint'
  /** Integer datatypes: bits and signedness, which bound what a JSON element may hold. */
  integer?: { bits: number, signed: boolean }
}

const FIXED_SIZE: Record<Exclude<Datatype, 'BYTES'>, FixedSize> = {
  BOOL: { elementBytes: 1, array: Uint8Array, json: 'boolean' },
  UINT8: { elementBytes: 1, array: Uint8Array, json: 'number', integer: { bits: 8, signed: false } },
  UINT16: { elementBytes: 2, array: Uint16Array, json: 'number', integer: { bits: 16, signed: false } },
  UINT32: { elementBytes: 4, array: Uint32Array, json: 'number', integer: { bits: 32, signed: false } },
  UINT64: { elementBytes: 8, array: BigUint64Array, json: 'bigint', integer: { bits: 64, signed: false } },
  INT8: { elementBytes: 1, array: Int8Array, json: 'number', integer: { bits: 8, signed: true } },
  INT16: { elementBytes: 2, array: Int16Array, json: 'number', integer: { bits: 16, signed: true } },
  INT32: { elementBytes: 4, array: Int32Array, json: 'number', integer: { bits: 32, signed: true } },
  INT64: { elementBytes: 8, array: BigInt64Array, json: 'bigint', integer: { bits: 64, signed: true } },
  FP16: { elementBytes: 2, array: Uint8Array },
  BF16: { elementBytes: 2, array: Uint8Array },
  FP32: { elementBytes: 4, array: Float32Array, json: 'number' },
  FP64: { elementBytes: 8, array: Float64Array, json: 'number' }
}

export const DATATYPES = [...Object.keys(FIXED_SIZE), 'BYTES'] as Datatype[]

export const isDatatype = (value: unknown): value is Datatype => DATATYPES.includes(value as Datatype)

/** Bytes of one element, or undefined for BYTES, whose elements vary in size. */
export const elementBytes = (datatype: Datatype): number | undefined =>
  datatype === 'BYTES' ? undefined : FIXED_SIZE[datatype].elementBytes

export const elementCount = (shape: number[]): number => shape.reduce((count, dim) => count * dim, 1)

/** The element count of `shape`, exact however large (a product of safe integers may not be one). */
export const exactElementCount = (shape: number[]): bigint => shape.reduce((count, dim) => count * BigInt(dim), 1n)

/** True when `typedArrayOver` copies `bytes`: they are not aligned to the datatype's element size. */
export const copiedOver = (datatype: Exclude<Datatype, 'BYTES'>, bytes: Uint8Array): boolean =>
  bytes.byteOffset % FIXED_SIZE[datatype].array.BYTES_PER_ELEMENT !== 0

/**
 * The elements held by `bytes` as the datatype's typed array. Zero-copy where the bytes are
 * aligned to the element size (the typed array shares their memory, shared memory included);
 * copied otherwise, as typed arrays cannot start at an unaligned offset (`copiedOver`).
 */
export function typedArrayOver (datatype: Exclude<Datatype, 'BYTES'>, bytes: Uint8Array): TypedArray {
  const ArrayType = FIXED_SIZE[datatype].array
  const length = bytes.byteLength / ArrayType.BYTES_PER_ELEMENT
  if (!copiedOver(datatype, bytes)) return new ArrayType(bytes.buffer, bytes.byteOffset, length)
  // Not bytes.slice(): on a Buffer (a binary request body) it is a view, not a copy.
  return new ArrayType(new Uint8Array(bytes).buffer, 0, length)
}

/** A new zero-filled typed array for `count` elements. */
export function newTypedArray (datatype: Exclude<Datatype, 'BYTES'>, count: number): TypedArray {
  const { array: ArrayType, elementBytes } = FIXED_SIZE[datatype]
  return new ArrayType(count * elementBytes / ArrayType.BYTES_PER_ELEMENT)
}

/** The raw bytes of a typed array (no copy). */
export const bytesOf = (data: TypedArray): Uint8Array => new Uint8Array(data.buffer, data.byteOffset, data.byteLength)

/** The largest magnitude a JSON number carries exactly: JSON.parse rounds longer integers to the
 * nearest double (9007199254740993 arrives as ...992), so a 64-bit element beyond it is refused,
 * never stored as a silently different number. */
const EXACT_IN_JSON = 2 ** 53

/** The integers a datatype holds exactly in JSON, as `[min, limit)`: exact as numbers, so the check
 * costs two comparisons per element. A typed array would silently wrap or truncate other values. */
function integerRange ({ bits, signed }: { bits: number, signed: boolean }): [number, number] {
  if (bits === 64) return [signed ? 1 - EXACT_IN_JSON : 0, EXACT_IN_JSON]
  return signed ? [-(2 ** (bits - 1)), 2 ** (bits - 1)] : [0, 2 ** bits]
}

function rangeText ([min, limit]: [number, number], bits: number): string {
  const range = `an integer from ${BigInt(min)} to ${BigInt(limit) - 1n}`
  return bits === 64 ? `${range} (larger 64-bit integers are not exact in JSON: send them as binary data or in shared memory)` : range
}

const inRange = (value: number, [min, limit]: [number, number]) => Number.isInteger(value) && value >= min && value < limit

/** Elements from a JSON `data` array (already flattened), checked one by one. */
export function typedArrayFromJson (input: string, datatype: Exclude<Datatype, 'BYTES'>, values: ArrayLike<unknown>): TypedArray {
  const { json, integer } = FIXED_SIZE[datatype]
  if (json === undefined) throw errors.datatypeNotJson(input, datatype)
  const data = newTypedArray(datatype, values.length)
  const isBoolean = json === 'boolean'
  const range = integer === undefined ? undefined : integerRange(integer)
  for (let index = 0; index < values.length; index++) {
    const value = values[index]
    if (isBoolean ? typeof value !== 'boolean' : typeof value !== 'number') {
      throw errors.invalidInputData(input, datatype, isBoolean ? 'a boolean' : 'a number')
    }
    if (range !== undefined && !inRange(value as number, range)) {
      throw errors.invalidInputData(input, datatype, rangeText(range, (integer as { bits: number }).bits))
    }
    if (json === 'bigint') {
      data[index] = BigInt(value as number)
    } else {
      data[index] = Number(value)
    }
  }
  return data
}

/** False for FP16 and BF16, which JSON numbers cannot carry: they travel as binary data only. */
export const hasJsonForm = (datatype: Datatype): boolean =>
  datatype === 'BYTES' || FIXED_SIZE[datatype].json !== undefined

/** JSON text of a typed array's elements, comma-separated, without the brackets: exact for 64-bit
 * integers, null for non-finite floats. Only for datatypes that `hasJsonForm`. */
export function jsonElementsOf (datatype: Exclude<Datatype, 'BYTES'>, data: TypedArray): string {
  if (datatype === 'BOOL') return Array.from(data as Uint8Array, (value) => value !== 0).join(',')
  if (FIXED_SIZE[datatype].json === 'bigint') return data.join(',')
  const text = JSON.stringify(Array.from(data as Float64Array))
  return text.slice(1, -1)
}
