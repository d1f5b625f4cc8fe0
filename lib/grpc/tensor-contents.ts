/**
 * Typed `contents` of a gRPC input as the raw little-endian bytes the KServe helpers read: each
 * datatype has its one field (FP16 and BF16 none: they travel raw or in shared memory).
 */
import type { BytesElements, Datatype } from '../../types/kserve'
import type { InferTensorContents } from '../../types/grpc'
import * as errors from '../errors'
import { serializedSize, writeBytesTensor } from '../kserve/bytes-tensor'
import { bytesOf, typedArrayFromJson } from '../kserve/datatypes'

type ContentsField = keyof InferTensorContents

const FIELD: Record<Datatype, ContentsField | undefined> = {
  BOOL: 'bool_contents',
  UINT8: 'uint_contents',
  UINT16: 'uint_contents',
  UINT32: 'uint_contents',
  UINT64: 'uint64_contents',
  INT8: 'int_contents',
  INT16: 'int_contents',
  INT32: 'int_contents',
  INT64: 'int64_contents',
  FP16: undefined,
  BF16: undefined,
  FP32: 'fp32_contents',
  FP64: 'fp64_contents',
  BYTES: 'bytes_contents'
}

const FIELDS = Object.keys({
  bool_contents: 0, int_contents: 0, int64_contents: 0, uint_contents: 0, uint64_contents: 0, fp32_contents: 0, fp64_contents: 0, bytes_contents: 0
} satisfies Record<ContentsField, 0>) as ContentsField[]

/** True when `contents` holds an element in any field. */
export const hasContents = (contents: InferTensorContents | null): contents is InferTensorContents =>
  contents !== null && FIELDS.some((field) => contents[field].length > 0)

/** The typed array each datatype's elements arrive in from the package's decoder, where it is
 * the tensor's own: its bytes are the tensor's, with no copy. */
const NATIVE: Partial<Record<Datatype, abstract new (...args: never[]) => ArrayBufferView>> = {
  BOOL: Uint8Array,
  UINT32: Uint32Array,
  UINT64: BigUint64Array,
  INT32: Int32Array,
  INT64: BigInt64Array,
  FP32: Float32Array,
  FP64: Float64Array
}

/** The elements of `contents` as raw bytes of `datatype`. Values are range-checked as JSON `data`
 * is (an INT8 from `int_contents` must fit); 64-bit ones from proto-loader arrive as exact decimal
 * strings, from the package's decoder in typed arrays. */
export function contentsBytes (input: string, datatype: Datatype, contents: InferTensorContents): Uint8Array {
  const field = FIELD[datatype]
  if (field === undefined || FIELDS.some((other) => other !== field && contents[other].length > 0)) {
    throw errors.contentsMismatch(input, datatype, field)
  }
  const values = contents[field]
  if (datatype === 'BYTES') {
    const elements = values as Buffer[] | BytesElements
    if (!Array.isArray(elements)) return elements.serialized
    const bytes = Buffer.allocUnsafe(serializedSize(elements))
    writeBytesTensor(elements, bytes)
    return bytes
  }
  const native = NATIVE[datatype]
  if (native !== undefined && values instanceof native) return new Uint8Array(values.buffer, values.byteOffset, values.byteLength)
  switch (datatype) {
    case 'INT64':
      return bytesOf(BigInt64Array.from(values as ArrayLike<string | number>, BigInt))
    case 'UINT64':
      return bytesOf(BigUint64Array.from(values as ArrayLike<string | number>, BigInt))
    default:
      return bytesOf(typedArrayFromJson(input, datatype, values as ArrayLike<unknown>))
  }
}
