/**
 * HPACK decoding (RFC 7541) of a peer's header blocks, with the dynamic table they build: one
 * decoder per connection, blocks in the order they arrive. Every malformed block is a
 * COMPRESSION_ERROR, which ends the connection (the table's state is lost with it). What a block
 * decodes to is bounded by its bytes: a string at most 8/5 of its Huffman form, a table entry's
 * size at most the table's.
 */
import { decodeHuffman } from './huffman'
import { ConnectionError, ErrorCode } from './protocol'
import { STATIC_TABLE } from './static-table'

/** An entry's size in the table and in a header list: its name's and value's octets, and 32. */
export const ENTRY_OVERHEAD_BYTES = 32

/** HPACK's default table size, which this decoder never raises (SETTINGS_HEADER_TABLE_SIZE). */
export const DEFAULT_TABLE_BYTES = 4096

/** A decoded block: its fields' names and values in turn, and its size as a header list (RFC 9113
 * §6.5.2: the measure SETTINGS_MAX_HEADER_LIST_SIZE bounds). */
export interface HeaderList {
  fields: string[]
  bytes: number
}

/** Integers past this are a peer's mistake or attack: nothing in a header block comes near. */
const LARGEST_INTEGER = 2 ** 28

/** What the decoder holds between blocks: none of the last one. */
const NO_BLOCK = Buffer.alloc(0)

const compressionError = (message: string) => new ConnectionError(ErrorCode.COMPRESSION_ERROR, message)

export class HeaderBlockDecoder {
  /** The dynamic table, oldest first: index 62 is the last. */
  readonly #names: string[] = []
  readonly #values: string[] = []
  #tableBytes = 0
  #maxTableBytes: number
  /** What the peer may raise the table to (what this side's settings said). */
  readonly #tableLimit: number
  #block: Buffer = NO_BLOCK
  #at = 0

  constructor (tableLimit = DEFAULT_TABLE_BYTES) {
    this.#tableLimit = tableLimit
    this.#maxTableBytes = tableLimit
  }

  decode (block: Buffer): HeaderList {
    this.#block = block
    this.#at = 0
    const fields: string[] = []
    let bytes = 0
    while (this.#at < block.length) {
      const first = block[this.#at]
      if ((first & 0xe0) === 0x20) {
        if (fields.length > 0) throw compressionError('dynamic table size update after a header field')
        this.#resize(this.#integer(5))
        continue
      }
      let name: string
      let value: string
      if (first & 0x80) {
        [name, value] = this.#entry(this.#integer(7))
      } else {
        const indexing = (first & 0xc0) === 0x40
        const nameIndex = this.#integer(indexing ? 6 : 4)
        name = nameIndex === 0 ? this.#string() : this.#entry(nameIndex)[0]
        value = this.#string()
        if (indexing) this.#insert(name, value)
      }
      fields.push(name, value)
      bytes += name.length + value.length + ENTRY_OVERHEAD_BYTES
    }
    this.#block = NO_BLOCK
    return { fields, bytes }
  }

  /** An integer with an N-bit prefix (§5.1). */
  #integer (prefixBits: number): number {
    const block = this.#block
    const mask = (1 << prefixBits) - 1
    let value = block[this.#at++] & mask
    if (value < mask) return value
    let byte: number
    let shift = 0
    do {
      if (this.#at >= block.length) throw compressionError('header block ends within an integer')
      byte = block[this.#at++]
      value += (byte & 0x7f) * 2 ** shift
      if (value > LARGEST_INTEGER) throw compressionError('integer too large in a header block')
      shift += 7
    } while (byte & 0x80)
    return value
  }

  /** A string literal (§5.2), Huffman-coded or not. */
  #string (): string {
    if (this.#at >= this.#block.length) throw compressionError('header block ends before a string')
    const huffman = (this.#block[this.#at] & 0x80) !== 0
    const length = this.#integer(7)
    const start = this.#at
    const end = start + length
    if (end > this.#block.length) throw compressionError('string runs past its header block')
    this.#at = end
    return huffman ? decodeHuffman(this.#block, start, end) : this.#block.toString('latin1', start, end)
  }

  /** The static or dynamic table's entry at `index` (§2.3.3). */
  #entry (index: number): readonly [string, string] {
    if (index === 0) throw compressionError('header field index 0')
    if (index <= STATIC_TABLE.length) return STATIC_TABLE[index - 1]
    const position = this.#names.length - 1 - (index - STATIC_TABLE.length - 1)
    if (position < 0) throw compressionError(`header field index ${index} is not in the table`)
    return [this.#names[position], this.#values[position]]
  }

  #insert (name: string, value: string): void {
    const size = name.length + value.length + ENTRY_OVERHEAD_BYTES
    this.#evictTo(this.#maxTableBytes - size)
    // An entry larger than the table empties it and is not added (§4.4).
    if (size > this.#maxTableBytes) return
    this.#names.push(name)
    this.#values.push(value)
    this.#tableBytes += size
  }

  #resize (bytes: number): void {
    if (bytes > this.#tableLimit) throw compressionError(`dynamic table size update to ${bytes} above ${this.#tableLimit}`)
    this.#maxTableBytes = bytes
    this.#evictTo(bytes)
  }

  #evictTo (bytes: number): void {
    while (this.#tableBytes > bytes && this.#names.length > 0) {
      this.#tableBytes -= this.#names[0].length + this.#values[0].length + ENTRY_OVERHEAD_BYTES
      this.#names.shift()
      this.#values.shift()
    }
  }
}
