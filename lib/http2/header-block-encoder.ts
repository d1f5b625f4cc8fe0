/**
 * HPACK encoding (RFC 7541) of this side's header blocks, without a dynamic table: a field the
 * static table holds whole is its index, one whose name it holds is that index and the value,
 * any other is its name and value, none of them added to the peer's table. What the package
 * sends (a status, a content type, gRPC's status and message) is short, mostly static, and
 * different per call where it is not: a dynamic table would save a few bytes at the cost of a
 * table per connection kept in step with the peer's settings.
 */
import { STATIC_TABLE } from './static-table'

/** Each static name's first index, and each static name and value's index. */
const NAME_INDEX = new Map<string, number>()
const FIELD_INDEX = new Map<string, Map<string, number>>()
STATIC_TABLE.forEach(([name, value], position) => {
  const index = position + 1
  if (!NAME_INDEX.has(name)) NAME_INDEX.set(name, index)
  if (value !== '') {
    const values = FIELD_INDEX.get(name) ?? new Map<string, number>()
    values.set(value, index)
    FIELD_INDEX.set(name, values)
  }
})

/** A representation's first byte's pattern: an indexed field, a literal without indexing. */
const INDEXED = 0x80
const LITERAL = 0x00

export class HeaderBlockEncoder {
  /** The peer changed its table's size: the next block says this side's table is empty (§4.2). */
  #announceEmptyTable = false

  /** Told of a SETTINGS_HEADER_TABLE_SIZE from the peer. */
  peerTableSizeChanged (): void {
    this.#announceEmptyTable = true
  }

  /** The block for `fields`, names and values in turn: lower-case names, values of Latin-1
   * octets, both checked by the caller. */
  encode (fields: readonly string[]): Buffer {
    let bytes = this.#announceEmptyTable ? 1 : 0
    // A field takes at most a byte, two 5-byte lengths and its octets.
    for (let index = 0; index < fields.length; index += 2) bytes += 11 + fields[index].length + fields[index + 1].length
    const block = Buffer.allocUnsafe(bytes)
    let at = 0
    if (this.#announceEmptyTable) {
      block[at++] = 0x20
      this.#announceEmptyTable = false
    }
    for (let index = 0; index < fields.length; index += 2) {
      const name = fields[index]
      const value = fields[index + 1]
      const fieldIndex = FIELD_INDEX.get(name)?.get(value)
      if (fieldIndex !== undefined) {
        at = writeInteger(block, at, INDEXED, 7, fieldIndex)
        continue
      }
      const nameIndex = NAME_INDEX.get(name)
      if (nameIndex !== undefined) {
        at = writeInteger(block, at, LITERAL, 4, nameIndex)
      } else {
        block[at++] = LITERAL
        at = writeString(block, at, name)
      }
      at = writeString(block, at, value)
    }
    return block.subarray(0, at)
  }
}

/** An integer with an N-bit prefix after `pattern`'s bits (§5.1): at most 5 bytes below 2^28. */
function writeInteger (block: Buffer, at: number, pattern: number, prefixBits: number, value: number): number {
  const mask = (1 << prefixBits) - 1
  if (value < mask) {
    block[at++] = pattern | value
    return at
  }
  block[at++] = pattern | mask
  let rest = value - mask
  while (rest >= 0x80) {
    block[at++] = (rest & 0x7f) | 0x80
    rest = Math.floor(rest / 0x80)
  }
  block[at++] = rest
  return at
}

/** A string literal, not Huffman-coded. */
function writeString (block: Buffer, at: number, text: string): number {
  at = writeInteger(block, at, 0x00, 7, text.length)
  return at + block.write(text, at, 'latin1')
}
