/**
 * HTTP/2 frames as bytes (RFC 9113 §4.1, §6): a header before each payload. A payload is never
 * copied where it can be sent as it is: `frameHeader` makes the 9 bytes alone, for a DATA
 * frame's header to go beside its tensor bytes in one writev.
 */
import { ErrorCode, FRAME_HEADER_BYTES, FrameFlag, FrameType } from './protocol'

/** Writes a frame's header at `at`; returns where its payload goes. */
export function writeFrameHeader (target: Buffer, at: number, length: number, type: number, flags: number, streamId: number): number {
  target.writeUIntBE(length, at, 3)
  target[at + 3] = type
  target[at + 4] = flags
  target.writeUInt32BE(streamId, at + 5)
  return at + FRAME_HEADER_BYTES
}

/** A frame's header alone. */
export function frameHeader (length: number, type: number, flags: number, streamId: number): Buffer {
  const header = Buffer.allocUnsafe(FRAME_HEADER_BYTES)
  writeFrameHeader(header, 0, length, type, flags, streamId)
  return header
}

/** A whole frame, its payload copied behind its header. */
export function frame (type: number, flags: number, streamId: number, payload: Uint8Array = EMPTY): Buffer {
  const bytes = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.length)
  bytes.set(payload, writeFrameHeader(bytes, 0, payload.length, type, flags, streamId))
  return bytes
}

const EMPTY = Buffer.alloc(0)

/** A header block as a HEADERS frame and as many CONTINUATION frames as the peer's frame size asks. */
export function headerFrames (streamId: number, block: Buffer, endStream: boolean, maxFrameBytes: number): Buffer[] {
  const end = endStream ? FrameFlag.END_STREAM : 0
  if (block.length <= maxFrameBytes) return [frame(FrameType.HEADERS, end | FrameFlag.END_HEADERS, streamId, block)]
  const frames = [frame(FrameType.HEADERS, end, streamId, block.subarray(0, maxFrameBytes))]
  for (let at = maxFrameBytes; at < block.length; at += maxFrameBytes) {
    const last = at + maxFrameBytes >= block.length
    frames.push(frame(FrameType.CONTINUATION, last ? FrameFlag.END_HEADERS : 0, streamId, block.subarray(at, at + maxFrameBytes)))
  }
  return frames
}

/** A 32-bit value's frame: RST_STREAM's error code, WINDOW_UPDATE's increment. */
export function wordFrame (type: number, streamId: number, value: number): Buffer {
  const bytes = Buffer.allocUnsafe(FRAME_HEADER_BYTES + 4)
  bytes.writeUInt32BE(value, writeFrameHeader(bytes, 0, 4, type, 0, streamId))
  return bytes
}

/** GOAWAY: the last stream this side began to process, and why (no debug data: nothing internal
 * is sent). */
export function goawayFrame (lastStreamId: number, code: number = ErrorCode.NO_ERROR): Buffer {
  const bytes = Buffer.allocUnsafe(FRAME_HEADER_BYTES + 8)
  const at = writeFrameHeader(bytes, 0, 8, FrameType.GOAWAY, 0, 0)
  bytes.writeUInt32BE(lastStreamId, at)
  bytes.writeUInt32BE(code, at + 4)
  return bytes
}

/** SETTINGS with `settings`' identifiers and values. */
export function settingsFrame (settings: ReadonlyArray<readonly [id: number, value: number]>): Buffer {
  const payload = Buffer.allocUnsafe(6 * settings.length)
  settings.forEach(([id, value], index) => {
    payload.writeUInt16BE(id, 6 * index)
    payload.writeUInt32BE(value, 6 * index + 2)
  })
  return frame(FrameType.SETTINGS, 0, 0, payload)
}
