/**
 * BYTES tensors: elements of any length. In binary data and shared memory each element is a
 * 4-byte little-endian length followed by that many bytes; in JSON each is a string.
 */
import * as errors from '../errors'

const LENGTH_BYTES = 4

/**
 * The first `count` elements serialized at the start of `bytes`, as Buffers sharing its memory
 * (zero-copy), and the bytes they take. Bytes after them are not read: a client reading an output
 * region that is larger than the result uses this.
 */
export function readBytesElements (tensor: string, bytes: Uint8Array, count: number): { elements: Buffer[], byteSize: number } {
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const elements: Buffer[] = []
  let position = 0
  while (elements.length < count) {
    if (LENGTH_BYTES > view.length - position) throw errors.malformedBytesTensor(tensor)
    const length = view.readUInt32LE(position)
    position += LENGTH_BYTES
    if (length > view.length - position) throw errors.malformedBytesTensor(tensor)
    elements.push(view.subarray(position, position + length))
    position += length
  }
  return { elements, byteSize: position }
}

/** The `count` elements serialized in `bytes`, which they must fill exactly. */
export function parseBytesTensor (tensor: string, bytes: Uint8Array, count: number): Buffer[] {
  const { elements, byteSize } = readBytesElements(tensor, bytes, count)
  if (byteSize !== bytes.byteLength) throw errors.malformedBytesTensor(tensor)
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

/** Elements from JSON `data`: each must be a string (UTF-8 encoded). */
export function bytesTensorFromJson (input: string, values: unknown[]): Buffer[] {
  return values.map((value) => {
    if (typeof value !== 'string') throw errors.invalidInputData(input, 'BYTES', 'a string')
    return Buffer.from(value)
  })
}

/** JSON text of BYTES elements, as UTF-8 strings. */
export const jsonOfBytesTensor = (elements: Buffer[]): string =>
  JSON.stringify(elements.map((element) => element.toString()))
