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

/** Reads varints and lengths of `bytes`, from `position` on, never past `end`; a failure names `message`. */
export class Cursor {
  /** The last 64-bit varint read, as two 32-bit words. */
  low = 0
  high = 0

  constructor (readonly bytes: Uint8Array, public position: number, readonly end: number, readonly message: string) {}

  malformed (reason: string): Error {
    return errors.malformedMessage(this.message, reason)
  }

  /** Reads a varint into `low` and `high` (its bits past the 64th, which protobuf drops, dropped). */
  varint (): void {
    const { bytes, end } = this
    let low = 0
    let high = 0
    for (let shift = 0; shift < 70; shift += 7) {
      if (this.position >= end) throw this.malformed('a varint runs past the end of its field')
      const byte = bytes[this.position++]
      const bits = byte & 0x7f
      if (shift < 28) low |= bits << shift
      else if (shift === 28) {
        low |= bits << 28
        high |= bits >>> 4
      } else high |= bits << (shift - 32) // the 10th byte: only its lowest bit is left in 64
      if (byte < 0x80) {
        this.low = low >>> 0
        this.high = high >>> 0
        return
      }
    }
    throw this.malformed('a varint is longer than 10 bytes')
  }

  /** A varint that must fit in 31 bits: tags and lengths. */
  small (what: string): number {
    this.varint()
    if (this.high !== 0 || this.low > 0x7fffffff) throw this.malformed(`${what} is too large`)
    return this.low
  }

  skip (bytes: number): void {
    if (bytes > this.end - this.position) throw this.malformed('a field runs past the end of its message')
    this.position += bytes
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
  const cursor = new Cursor(bytes, start, end, message)
  while (cursor.position < end) {
    const tag = cursor.small('a field tag')
    const field = tag >>> 3
    const wire = tag & 7
    if (field === 0) throw cursor.malformed('a field has number 0')
    let from = cursor.position
    if (wire === VARINT) cursor.varint()
    else if (wire === FIXED64) cursor.skip(8)
    else if (wire === FIXED32) cursor.skip(4)
    else if (wire === DELIMITED) {
      const length = cursor.small('a field length')
      from = cursor.position
      cursor.skip(length)
    } else throw cursor.malformed(`wire type ${wire} is not used by this protocol`)
    if (expected !== undefined) {
      const wires = expected[field]
      if (wires === undefined) continue
      if ((wires & (1 << wire)) === 0) throw cursor.malformed(`field ${field} has wire type ${wire}`)
    }
    visit(field, wire, from, cursor.position)
  }
}
