/**
 * The package's own HTTP/2 frame reader: the client's preface checked as it arrives, however it
 * is split; frames handed on whole, in order, however their bytes are split; a frame too large
 * refused from its header, before its payload is held.
 */
import t from 'tap'
import { FrameReader } from '../lib/http2/frame-reader'
import { frame } from '../lib/http2/frame-writer'
import { CONNECTION_PREFACE, ConnectionError, ErrorCode, FRAME_HEADER_BYTES, FrameFlag, FrameType } from '../lib/http2/protocol'

type Read = [type: number, flags: number, streamId: number, payload: string]

/** What `reader` hands on from `chunks`, read in turn. */
function readAll (reader: FrameReader, chunks: Buffer[]): Read[] {
  const frames: Read[] = []
  for (const chunk of chunks) reader.read(chunk, (type, flags, streamId, payload) => frames.push([type, flags, streamId, payload.toString('hex')]))
  return frames
}

const settings = frame(FrameType.SETTINGS, 0, 0, Buffer.from('000400010000', 'hex'))
const headers = frame(FrameType.HEADERS, FrameFlag.END_HEADERS, 1, Buffer.from('8286', 'hex'))
const data = frame(FrameType.DATA, FrameFlag.END_STREAM, 1, Buffer.alloc(300, 7))
const stream = Buffer.concat([CONNECTION_PREFACE, settings, headers, data])
const expected: Read[] = [
  [FrameType.SETTINGS, 0, 0, '000400010000'],
  [FrameType.HEADERS, FrameFlag.END_HEADERS, 1, '8286'],
  [FrameType.DATA, FrameFlag.END_STREAM, 1, '07'.repeat(300)]
]

t.test('a frame\'s bytes: a 24-bit length, its type, its flags, a 31-bit stream, its payload', async (t) => {
  t.equal(frame(FrameType.HEADERS, FrameFlag.END_HEADERS, 0x01020304, Buffer.from('8286', 'hex')).toString('hex'), '000002' + '01' + '04' + '01020304' + '8286')
  t.equal(frame(FrameType.DATA, 0, 1, Buffer.alloc(70_000)).subarray(0, 3).toString('hex'), '011170', '70,000 in three bytes')
})

t.test('a connection\'s bytes in one chunk, byte by byte, and split at every point', async (t) => {
  t.same(readAll(new FrameReader(), [stream]), expected)
  t.same(readAll(new FrameReader(), Array.from(stream, (byte) => Buffer.from([byte]))), expected, 'byte by byte')
  for (let at = 1; at < stream.length; at++) {
    t.same(readAll(new FrameReader(), [stream.subarray(0, at), stream.subarray(at)]), expected, `split at ${at}`)
  }
})

t.test('a stream identifier\'s reserved bit is not part of it', async (t) => {
  const reserved = frame(FrameType.WINDOW_UPDATE, 0, 0x80000003, Buffer.from('00000001', 'hex'))
  t.same(readAll(new FrameReader(), [CONNECTION_PREFACE, reserved]), [[FrameType.WINDOW_UPDATE, 0, 3, '00000001']])
})

t.test('anything but the preface first is a PROTOCOL_ERROR, as soon as a byte differs', async (t) => {
  const protocolError = { code: ErrorCode.PROTOCOL_ERROR, message: 'connection preface expected' }
  t.throws(() => readAll(new FrameReader(), [Buffer.from('GET / HTTP/1.1\r\n\r\n')]), protocolError)
  t.throws(() => readAll(new FrameReader(), [CONNECTION_PREFACE.subarray(0, 10), Buffer.from('X')]), protocolError, 'in a later chunk')
  const error = t.throws(() => readAll(new FrameReader(), [Buffer.from('P'), Buffer.from('X')]))
  t.ok(error instanceof ConnectionError)
})

t.test('a frame larger than the limit is a FRAME_SIZE_ERROR from its header alone', async (t) => {
  const reader = new FrameReader(100)
  t.same(readAll(reader, [CONNECTION_PREFACE, frame(FrameType.DATA, 0, 1, Buffer.alloc(100))]), [[FrameType.DATA, 0, 1, '00'.repeat(100)]], '100 bytes pass')
  const header = frame(FrameType.DATA, 0, 1, Buffer.alloc(101)).subarray(0, FRAME_HEADER_BYTES)
  t.throws(() => readAll(reader, [header]), { code: ErrorCode.FRAME_SIZE_ERROR, message: 'frame of 101 bytes above 100' })
})
