/**
 * BYTES tensors: elements of any length. In binary data and shared memory each element is a
 * 4-byte little-endian length followed by that many bytes; in JSON each is a string.
 *
 * Inputs are read as `BytesElements`: one 8-byte offset per element over the serialized bytes (so
 * at most twice the tensor's own bytes, as each element takes 4 at least), and a Buffer only for an
 * element a model asks for. Outputs are the model's own array of Buffers.
 */
import { isUtf8 } from 'node:buffer'
import type { BytesElements } from '../../types/kserve'
import * as errors from '../errors'

const LENGTH_BYTES = 4

/** What reading elements holds besides their bytes: one offset per element, and one more. */
export const OFFSET_BYTES = 8

class SerializedBytesElements implements BytesElements {
  readonly length: number
  readonly serialized: Uint8Array
  /** Element `i` is `serialized[starts[i] + 4, starts[i + 1])`: read once, so a client rewriting a
   * length in its region afterwards cannot move an element out of bounds. */
  readonly #starts: Float64Array

  constructor (serialized: Uint8Array, starts: Float64Array) {
    this.serialized = serialized
    this.#starts = starts
    this.length = starts.length - 1
  }

  at (index: number): Buffer | undefined {
    const position = index < 0 ? index + this.length : index
    if (!(position >= 0 && position < this.length)) return undefined
    const start = this.#starts[position] + LENGTH_BYTES
    const { buffer, byteOffset } = this.serialized
    return Buffer.from(buffer, byteOffset + start, this.#starts[position + 1] - start)
  }

  * [Symbol.iterator] (): Iterator<Buffer> {
    for (let index = 0; index < this.length; index++) yield this.at(index) as Buffer
  }
}

/**
 * The first `count` elements serialized at the start of `bytes` (zero-copy). Bytes after them are
 * not read: a client reading an output region that is larger than the result uses this. Their
 * offsets (`OFFSET_BYTES` an element) are passed to `charge` before they are allocated.
 */
export function readBytesElements (tensor: string, bytes: Uint8Array, count: number, charge?: (bytes: number) => void): BytesElements {
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  // Each element takes 4 bytes at least: checked before the offsets are charged and allocated.
  if (count > view.length / LENGTH_BYTES) throw errors.malformedBytesTensor(tensor)
  charge?.(OFFSET_BYTES * (count + 1))
  const starts = new Float64Array(count + 1)
  let position = 0
  for (let index = 0; index < count; index++) {
    starts[index] = position
    if (LENGTH_BYTES > view.length - position) throw errors.malformedBytesTensor(tensor)
    const length = view.readUInt32LE(position)
    position += LENGTH_BYTES
    if (length > view.length - position) throw errors.malformedBytesTensor(tensor)
    position += length
  }
  starts[count] = position
  return new SerializedBytesElements(bytes.subarray(0, position), starts)
}

/** The `count` elements serialized in `bytes`, which they must fill exactly (offsets charged as `readBytesElements`'). */
export function parseBytesTensor (tensor: string, bytes: Uint8Array, count: number, charge?: (bytes: number) => void): BytesElements {
  const elements = readBytesElements(tensor, bytes, count, charge)
  if (elements.serialized.byteLength !== bytes.byteLength) throw errors.malformedBytesTensor(tensor)
  return elements
}

/** Bytes needed to serialize `elements`. */
export const serializedSize = (elements: Buffer[]): number =>
  elements.reduce((total, element) => total + LENGTH_BYTES + element.length, 0)

/** Serializes `elements` at the start of `target`, which holds at least `serializedSize` bytes. */
export function writeBytesTensor (elements: Buffer[], target: Uint8Array): void {
  const view = Buffer.from(target.buffer, target.byteOffset, target.byteLength)
  let position = 0
  for (const element of elements) {
    view.writeUInt32LE(element.length, position)
    element.copy(view, position + LENGTH_BYTES)
    position += LENGTH_BYTES + element.length
  }
}

/** Elements from JSON `data`: each must be a string, stored UTF-8 encoded in one serialized buffer. */
export function bytesTensorFromJson (input: string, values: unknown[]): BytesElements {
  let byteSize = 0
  for (const value of values) {
    if (typeof value !== 'string') throw errors.invalidInputData(input, 'BYTES', 'a string')
    byteSize += LENGTH_BYTES + Buffer.byteLength(value)
  }
  const serialized = Buffer.allocUnsafe(byteSize)
  const starts = new Float64Array(values.length + 1)
  let position = 0
  values.forEach((value, index) => {
    starts[index] = position
    const length = serialized.write(value as string, position + LENGTH_BYTES)
    serialized.writeUInt32LE(length, position)
    position += LENGTH_BYTES + length
  })
  starts[values.length] = position
  return new SerializedBytesElements(serialized, starts)
}

/** JSON text of BYTES elements, as UTF-8 strings; undefined once it would pass `maxLength` characters,
 * before the text is joined (a string past V8's limit cannot be made at all). An element that is
 * not UTF-8 has no JSON string: output `tensor` is refused, never sent with its bytes replaced. */
export function jsonOfBytesTensor (tensor: string, elements: Buffer[], maxLength: number): string | undefined {
  const strings: string[] = []
  let length = 2
  for (const element of elements) {
    if (!isUtf8(element)) throw errors.bytesOutputNotUtf8(tensor)
    const text = JSON.stringify(element.toString())
    length += text.length + 1
    if (length > maxLength) return undefined
    strings.push(text)
  }
  return `[${strings.join(',')}]`
}
