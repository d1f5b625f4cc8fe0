/**
 * A connection's bytes as HTTP/2 frames (RFC 9113 §4): the client's preface first, then whole
 * frames, each handed on as its header's fields and a view of its payload (of bytes never
 * reused: holding it holds them). What it buffers is at most one frame: a frame larger
 * than this side's SETTINGS_MAX_FRAME_SIZE is a FRAME_SIZE_ERROR from its header alone.
 */
import { CONNECTION_PREFACE, ConnectionError, DEFAULT_MAX_FRAME_BYTES, ErrorCode, FRAME_HEADER_BYTES } from './protocol'

export type FrameHandler = (type: number, flags: number, streamId: number, payload: Buffer) => void

export class FrameReader {
  readonly #maxFrameBytes: number
  /** How much of the preface has arrived; its length once it has. */
  #prefaceBytes = 0
  /** The chunks of a frame that has not all arrived, and how many bytes they must reach before
   * they are joined: the header's 9, then the whole frame. A frame that comes a byte at a time
   * is copied twice, not once a byte. */
  #pending: Buffer[] = []
  #pendingBytes = 0
  #needed = 0

  constructor (maxFrameBytes = DEFAULT_MAX_FRAME_BYTES) {
    this.#maxFrameBytes = maxFrameBytes
  }

  /** Hands `onFrame` each frame `chunk` completes, in order. */
  read (chunk: Buffer, onFrame: FrameHandler): void {
    let bytes = chunk
    if (this.#pending.length > 0) {
      this.#pending.push(chunk)
      this.#pendingBytes += chunk.length
      if (this.#pendingBytes < this.#needed) return
      bytes = Buffer.concat(this.#pending, this.#pendingBytes)
      this.#pending = []
    }
    if (this.#prefaceBytes < CONNECTION_PREFACE.length) {
      bytes = this.#readPreface(bytes)
    }
    let at = 0
    let needed = FRAME_HEADER_BYTES
    while (bytes.length - at >= FRAME_HEADER_BYTES) {
      const length = bytes.readUIntBE(at, 3)
      if (length > this.#maxFrameBytes) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, `frame of ${length} bytes above ${this.#maxFrameBytes}`)
      const end = at + FRAME_HEADER_BYTES + length
      if (end > bytes.length) {
        needed = FRAME_HEADER_BYTES + length
        break
      }
      onFrame(bytes[at + 3], bytes[at + 4], bytes.readUInt32BE(at + 5) & 0x7fffffff, bytes.subarray(at + FRAME_HEADER_BYTES, end))
      at = end
    }
    if (at < bytes.length) {
      this.#pending = [bytes.subarray(at)]
      this.#pendingBytes = bytes.length - at
      this.#needed = needed
    }
  }

  /** Checks the preface's bytes in `bytes`; returns what follows them. */
  #readPreface (bytes: Buffer): Buffer {
    const expected = CONNECTION_PREFACE.subarray(this.#prefaceBytes)
    const compared = Math.min(expected.length, bytes.length)
    if (bytes.compare(expected, 0, compared, 0, compared) !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'connection preface expected')
    this.#prefaceBytes += compared
    return bytes.subarray(compared)
  }
}
