/**
 * HPACK (RFC 7541) as the package's own HTTP/2 decodes and encodes it: the RFC's examples, the
 * dynamic table's evictions and size updates, every malformed block refused as a
 * COMPRESSION_ERROR, and any fields the encoder writes decoded back as they were.
 */
import fc from 'fast-check'
import t from 'tap'
import { HeaderBlockDecoder } from '../lib/http2/header-block-decoder'
import { HeaderBlockEncoder } from '../lib/http2/header-block-encoder'
import { decodeHuffman } from '../lib/http2/huffman'
import { ConnectionError, ErrorCode } from '../lib/http2/protocol'

const hex = (text: string) => Buffer.from(text.replaceAll(' ', ''), 'hex')
const pairs = (fields: string[]) => fields.flatMap((field, index) => index % 2 === 0 ? [[field, fields[index + 1]]] : [])
const compressionError = (message: string | RegExp) => ({ name: 'ConnectionError', code: ErrorCode.COMPRESSION_ERROR, message })

/** RFC 7541 C.3's and C.4's three requests, decoded. */
const FIRST = [[':method', 'GET'], [':scheme', 'http'], [':path', '/'], [':authority', 'www.example.com']]
const SECOND = [...FIRST, ['cache-control', 'no-cache']]
const THIRD = [[':method', 'GET'], [':scheme', 'https'], [':path', '/index.html'], [':authority', 'www.example.com'], ['custom-key', 'custom-value']]

t.test('RFC 7541 C.3: requests without Huffman coding, one decoder for the three', async (t) => {
  const decoder = new HeaderBlockDecoder()
  t.same(pairs(decoder.decode(hex('8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d')).fields), FIRST)
  t.same(pairs(decoder.decode(hex('8286 84be 5808 6e6f 2d63 6163 6865')).fields), SECOND)
  const third = decoder.decode(hex('8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65'))
  t.same(pairs(third.fields), THIRD)
  t.equal(third.bytes, 5 * 32 + 7 + 3 + 7 + 5 + 5 + 11 + 10 + 15 + 10 + 12, 'a header list counts its octets and 32 a field')
  // The table now holds custom-key, cache-control and :authority, newest first.
  t.same(pairs(decoder.decode(hex('be bf c0')).fields), [['custom-key', 'custom-value'], ['cache-control', 'no-cache'], [':authority', 'www.example.com']])
  t.throws(() => decoder.decode(hex('c1')), compressionError('header field index 65 is not in the table'))
})

t.test('RFC 7541 C.4: the same requests Huffman-coded', async (t) => {
  const decoder = new HeaderBlockDecoder()
  t.same(pairs(decoder.decode(hex('8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff')).fields), FIRST)
  t.same(pairs(decoder.decode(hex('8286 84be 5886 a8eb 1064 9cbf')).fields), SECOND)
  t.same(pairs(decoder.decode(hex('8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf')).fields), THIRD)
})

/** A literal with incremental indexing of a new name (§6.2.1), not Huffman-coded, short strings. */
const indexed = (name: string, value: string) => Buffer.concat([Buffer.from([0x40, name.length]), Buffer.from(name), Buffer.from([value.length]), Buffer.from(value)])

t.test('the dynamic table evicts its oldest entries to stay within its size', async (t) => {
  const decoder = new HeaderBlockDecoder(100)
  decoder.decode(indexed('a', 'x'.repeat(30)))
  t.same(decoder.decode(hex('be')).fields, ['a', 'x'.repeat(30)])
  decoder.decode(indexed('b', 'y'.repeat(30)))
  t.same(decoder.decode(hex('be')).fields, ['b', 'y'.repeat(30)], 'the newest is 62')
  t.throws(() => decoder.decode(hex('bf')), compressionError('header field index 63 is not in the table'), 'the oldest went: both did not fit')
})

t.test('an entry larger than the table empties it and is not added', async (t) => {
  const decoder = new HeaderBlockDecoder(64)
  decoder.decode(indexed('a', 'x'))
  t.same(decoder.decode(indexed('b', 'y'.repeat(40))).fields, ['b', 'y'.repeat(40)], 'the field itself is decoded')
  t.throws(() => decoder.decode(hex('be')), compressionError('header field index 62 is not in the table'))
})

t.test('a size update at a block\'s start shrinks the table; one past the limit or after a field is refused', async (t) => {
  const decoder = new HeaderBlockDecoder()
  decoder.decode(indexed('a', 'x'))
  t.same(decoder.decode(hex('20 3f e1 1f 82')).fields, [':method', 'GET'], 'to 0, then back to 4096')
  t.throws(() => decoder.decode(hex('be')), compressionError('header field index 62 is not in the table'), 'the entry went with the table')
  decoder.decode(indexed('a', 'x'))
  t.same(decoder.decode(hex('be')).fields, ['a', 'x'], 'the table takes entries again')
  t.throws(() => decoder.decode(hex('3f e2 1f')), compressionError('dynamic table size update to 4097 above 4096'))
  t.throws(() => decoder.decode(hex('82 20')), compressionError('dynamic table size update after a header field'))
})

t.test('every malformed block is a COMPRESSION_ERROR', async (t) => {
  const cases: Array<[string, string]> = [
    ['80', 'header field index 0'],
    ['be', 'header field index 62 is not in the table'],
    ['ff', 'header block ends within an integer'],
    ['ff ff ff ff ff 7f', 'integer too large in a header block'],
    ['40', 'header block ends before a string'],
    ['40 05 61', 'string runs past its header block'],
    ['00 84 ff ff ff ff', 'Huffman-coded string holds EOS'],
    ['00 81 ff', 'Huffman-coded string is padded wrongly'],
    ['00 81 18', 'Huffman-coded string is padded wrongly']
  ]
  for (const [block, message] of cases) {
    const error = t.throws(() => new HeaderBlockDecoder().decode(hex(block)), compressionError(message), block)
    t.ok(error instanceof ConnectionError, `${block}: a ConnectionError`)
  }
})

t.test('Huffman: strings with and without padding, within a larger buffer, and longer than the decoder\'s first buffer', async (t) => {
  // 'a' is 00011 and ' ' 010100: "a a" is 00011 010100 00011, 2 bytes; "aa" is 00011 00011 and a
  // pad of 6 ones.
  t.equal(decodeHuffman(hex('1a 83'), 0, 2), 'a a')
  t.equal(decodeHuffman(hex('18 ff'), 0, 2), 'aa')
  t.equal(decodeHuffman(hex('00 18 ff 00'), 1, 3), 'aa', 'within a larger buffer')
  t.equal(decodeHuffman(Buffer.alloc(0), 0, 0), '')
  // 'e' is 00101: eight of them are 40 bits, 5 bytes; a thousand are 625.
  const eight = hex('29 4a 52 94 a5')
  t.equal(decodeHuffman(eight, 0, 5), 'eeeeeeee')
  const thousand = Buffer.concat(Array.from({ length: 125 }, () => eight))
  t.equal(decodeHuffman(thousand, 0, thousand.length), 'e'.repeat(1000))
})

t.test('the encoder: static fields by index, static names with their values, other fields as they are', async (t) => {
  const encoder = new HeaderBlockEncoder()
  t.same(encoder.encode([':status', '200']), hex('88'))
  t.same(encoder.encode(['content-type', 'application/grpc']), Buffer.concat([hex('0f 10 10'), Buffer.from('application/grpc')]))
  t.same(encoder.encode(['grpc-status', '0']), Buffer.concat([hex('00 0b'), Buffer.from('grpc-status'), hex('01'), Buffer.from('0')]))
  const long = 'v'.repeat(300)
  t.same(encoder.encode(['x', long]), Buffer.concat([hex('00 01'), Buffer.from('x'), hex('7f ad 01'), Buffer.from(long)]), 'a length past its prefix takes more bytes')
})

t.test('after the peer changes its table\'s size, the next block says this side\'s is empty, once', async (t) => {
  const encoder = new HeaderBlockEncoder()
  encoder.peerTableSizeChanged()
  t.same(encoder.encode([':status', '200']), hex('20 88'))
  t.same(encoder.encode([':status', '200']), hex('88'))
})

t.test('whatever the encoder writes decodes back as it was', async () => {
  const name = fc.oneof(fc.constantFrom(':status', 'content-type', 'grpc-status', 'grpc-message', 'date', ':method'), fc.stringMatching(/^[a-z0-9-]{1,40}$/))
  const value = fc.oneof(fc.constantFrom('200', 'GET', 'POST', '', 'gzip, deflate'), fc.string({ unit: fc.integer({ min: 0x20, max: 0xff }).map((code) => String.fromCharCode(code)), maxLength: 400 }))
  const decoder = new HeaderBlockDecoder()
  const encoder = new HeaderBlockEncoder()
  fc.assert(fc.property(fc.array(fc.tuple(name, value), { maxLength: 12 }), fc.boolean(), (fields, changed) => {
    if (changed) encoder.peerTableSizeChanged()
    const flat = fields.flat()
    const decoded = decoder.decode(encoder.encode(flat))
    return decoded.fields.length === flat.length && decoded.fields.every((field, index) => field === flat[index])
  }), { numRuns: 500 })
})
