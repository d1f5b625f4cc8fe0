/**
 * Protocol buffers' wire format, read without allocating: varints and lengths, never past the end
 * of the field or message they belong to, and a message's fields visited one by one. The package's
 * decoders measure what a message will take with it before they decode it. Bytes that are no such
 * message are refused with `ERR_SHM_MALFORMED_MESSAGE`, naming the message they were sent as.
 */
import * as errors from '../errors'

export const VARINT = 0
export const FIXED64 = 1
export const DELIMITED = 2
export const FIXED32 = 5

/** The words of the varint `readVarint` read last, as two 32-bit words: read them before it reads
 * another. (Module state rather than an object per read: a message's fields are read without
 * allocating.) */
let varintLow = 0
let varintHigh = 0

/** Reads the varint at `position` of `bytes`, never past `end`, into `varintLow` and `varintHigh`
 * (its bits past the 64th, which protobuf drops, dropped); returns where it ends. */
function readVarint (bytes: Uint8Array, position: number, end: number, message: string): number {
  let low = 0
  let high = 0
  for (let shift = 0; shift < 70; shift += 7) {
    if (position >= end) throw errors.malformedMessage(message, 'a varint runs past the end of its field')
    const byte = bytes[position++]
    const bits = byte & 0x7f
    if (shift < 28) low |= bits << shift
    else if (shift === 28) {
      low |= bits << 28
      high |= bits >>> 4
    } else high |= bits << (shift - 32) // the 10th byte: only its lowest bit is left in 64
    if (byte < 0x80) {
      varintLow = low >>> 0
      varintHigh = high >>> 0
      return position
    }
  }
  throw errors.malformedMessage(message, 'a varint is longer than 10 bytes')
}

/** The varint `readVarint` read last, which must fit in 31 bits: tags and lengths. */
function small (message: string, what: string): number {
  if (varintHigh !== 0 || varintLow > 0x7fffffff) throw errors.malformedMessage(message, `${what} is too large`)
  return varintLow
}

/** Reads the varints of `bytes` one after another, from `position` on, never past `end` (packed
 * elements); a failure names `message`. */
export class Cursor {
  /** The last 64-bit varint read, as two 32-bit words. */
  low = 0
  high = 0

  constructor (readonly bytes: Uint8Array, public position: number, readonly end: number, readonly message: string) {}

  /** Reads a varint into `low` and `high` (its bits past the 64th, which protobuf drops, dropped). */
  varint (): void {
    this.position = readVarint(this.bytes, this.position, this.end, this.message)
    this.low = varintLow
    this.high = varintHigh
  }
}

/** Called for each field of a message: its number, wire type, and where its value lies (a
 * delimited field's payload, or the bytes of a number). */
export type Visit = (field: number, wire: number, start: number, end: number) => void

/** The wire types each field of a message may come in (`wireTypes`); fields not listed are
 * skipped. Without it, every field is visited, whatever its wire type. */
export type Expected = Record<number, number>

/** The wire types a field may come in, as `Expected` holds them: one bit each. */
export const wireTypes = (...types: number[]): number => types.reduce((mask, type) => mask | (1 << type), 0)

/** Visits the fields of the message `message` in `[start, end)` of `bytes`. */
export function eachField (message: string, bytes: Uint8Array, start: number, end: number, expected: Expected | undefined, visit: Visit): void {
  let position = start
  while (position < end) {
    position = readVarint(bytes, position, end, message)
    const tag = small(message, 'a field tag')
    const field = tag >>> 3
    const wire = tag & 7
    if (field === 0) throw errors.malformedMessage(message, 'a field has number 0')
    let from = position
    if (wire === VARINT) position = readVarint(bytes, position, end, message)
    else if (wire === FIXED64 || wire === FIXED32) position = skipped(message, position, wire === FIXED64 ? 8 : 4, end)
    else if (wire === DELIMITED) {
      position = readVarint(bytes, position, end, message)
      const length = small(message, 'a field length')
      from = position
      position = skipped(message, position, length, end)
    } else throw errors.malformedMessage(message, `wire type ${wire} is not used by this protocol`)
    if (expected !== undefined) {
      const wires = expected[field]
      if (wires === undefined) continue
      if ((wires & (1 << wire)) === 0) throw errors.malformedMessage(message, `field ${field} has wire type ${wire}`)
    }
    visit(field, wire, from, position)
  }
}

/** Where `bytes` bytes from `position` end, if not past `end`. */
function skipped (message: string, position: number, bytes: number, end: number): number {
  if (bytes > end - position) throw errors.malformedMessage(message, 'a field runs past the end of its message')
  return position + bytes
}
