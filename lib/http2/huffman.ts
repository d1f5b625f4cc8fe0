/**
 * HPACK's Huffman code (RFC 7541 §5.2, Appendix B), decoding only: the package's encoder sends
 * strings as they are. The code is canonical (codes assigned in order of length, then of symbol),
 * so its lengths define it: a code read bit by bit is a symbol once it falls within its length's
 * run of codes.
 */
import { ConnectionError, ErrorCode } from './protocol'

/** Appendix B's code lengths, symbol by symbol (256 is EOS). */
const CODE_LENGTHS = [
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
  28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
  6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,
  5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
  13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
  7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
  15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,
  6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
  20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
  24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
  22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
  21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
  26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
  19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
  20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
  26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
  30
]

const EOS = 256
const LONGEST = 30

/** The symbols in code order; for each length, its first code and where its symbols start. */
const SYMBOLS = Array.from(CODE_LENGTHS.keys()).sort((a, b) => CODE_LENGTHS[a] - CODE_LENGTHS[b] || a - b)
const FIRST_CODE = new Int32Array(LONGEST + 1)
const FIRST_SYMBOL = new Int32Array(LONGEST + 1)
const CODES_OF_LENGTH = new Int32Array(LONGEST + 1)
for (const symbol of SYMBOLS) CODES_OF_LENGTH[CODE_LENGTHS[symbol]]++
for (let length = 1, code = 0, index = 0; length <= LONGEST; length++) {
  FIRST_CODE[length] = code
  FIRST_SYMBOL[length] = index
  code = (code + CODES_OF_LENGTH[length]) << 1
  index += CODES_OF_LENGTH[length]
}

/** Decoded bytes, reused: a string's Huffman form is at least 5/8 of its length. */
let scratch = Buffer.allocUnsafe(256)

/** The string whose Huffman code is `bytes[start, end)`, its octets as Latin-1. Padding that is
 * longer than 7 bits or not EOS's prefix, and EOS itself, are a COMPRESSION_ERROR (§5.2). */
export function decodeHuffman (bytes: Uint8Array, start: number, end: number): string {
  const most = Math.ceil((end - start) * 8 / 5)
  if (scratch.length < most) scratch = Buffer.allocUnsafe(most)
  let decoded = 0
  let code = 0
  let length = 0
  for (let index = start; index < end; index++) {
    const byte = bytes[index]
    for (let bit = 7; bit >= 0; bit--) {
      code = (code << 1) | ((byte >> bit) & 1)
      length++
      const offset = code - FIRST_CODE[length]
      if (offset >= CODES_OF_LENGTH[length]) continue
      const symbol = SYMBOLS[FIRST_SYMBOL[length] + offset]
      if (symbol === EOS) throw new ConnectionError(ErrorCode.COMPRESSION_ERROR, 'Huffman-coded string holds EOS')
      scratch[decoded++] = symbol
      code = 0
      length = 0
    }
  }
  if (length > 7 || code !== (1 << length) - 1) throw new ConnectionError(ErrorCode.COMPRESSION_ERROR, 'Huffman-coded string is padded wrongly')
  return scratch.toString('latin1', 0, decoded)
}
