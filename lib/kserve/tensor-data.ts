/**
 * A tensor's elements handed from one request to another (an ensemble's steps): as the bytes
 * another request reads them from, and copied into another request's output storage. Elements are
 * in any of the forms a request holds them: a typed array, a BYTES input's `BytesElements`, or a
 * BYTES output's array of Buffers.
 */
import type { BytesElements, TensorData } from '../../types/kserve'
import { serializedSize, writeBytesTensor } from './bytes-tensor'

type TypedArray = Exclude<TensorData, Buffer[] | BytesElements>

const isBytesElements = (data: TensorData): data is BytesElements => !ArrayBuffer.isView(data) && !Array.isArray(data)

/** The raw bytes of a typed array (no copy). */
const bytesOfArray = (data: TypedArray): Uint8Array => new Uint8Array(data.buffer, data.byteOffset, data.byteLength)

/** The elements as bytes on the wire: a typed array's own bytes, BYTES serialized (a BYTES input's
 * are already; an output's array of Buffers is serialized into a new buffer). */
export function tensorDataBytes (data: TensorData): Uint8Array {
  if (ArrayBuffer.isView(data)) return bytesOfArray(data)
  if (isBytesElements(data)) return data.serialized
  const bytes = Buffer.allocUnsafe(serializedSize(data))
  writeBytesTensor(data, bytes)
  return bytes
}

/** Copies the elements of `from` into `to`, an output's storage of the same datatype and shape
 * (BYTES: the Buffers are shared, not copied: a model's outputs are its own). */
export function copyTensorData (from: TensorData, to: TensorData): void {
  if (ArrayBuffer.isView(to)) {
    bytesOfArray(to).set(bytesOfArray(from as TypedArray))
    return
  }
  const elements = to as Buffer[]
  for (let index = 0; index < elements.length; index++) {
    elements[index] = isBytesElements(from) ? from.at(index) as Buffer : (from as Buffer[])[index]
  }
}
