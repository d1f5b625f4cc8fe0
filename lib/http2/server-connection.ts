/**
 * One client's connection to a server of the package's own HTTP/2 (RFC 9113): the preface and
 * settings, its streams, flow control both ways, and its errors. Each request's stream is handed
 * to `onStream` once its headers are in and valid; what the streams send goes out in one write per
 * turn, a unary answer's headers, message and trailers together.
 *
 * What a client can make it hold is bounded: a header block by `maxHeaderListBytes` (its frames
 * too, CONTINUATION included), streams by `maxConcurrentStreams` (one more is refused), a
 * stream's unread DATA by its window, and the answers this side makes to a client's control frames
 * (PING and SETTINGS) by `maxQueuedBytes` of them not yet handed to the kernel: past it the
 * connection is dropped, as it is for a client resetting open streams faster than 33 a second
 * after a burst of 1,000. (A large answer that waits for its client to read counts for nothing
 * here: it is the stream's own data, held to the window the client granted.) Every protocol
 * error ends the connection with GOAWAY and its code, nothing more.
 */
import type { Socket } from 'node:net'
import { inspect } from 'node:util'
import { FrameReader } from './frame-reader'
import { frame, frameHeader, goawayFrame, headerFrames, settingsFrame, wordFrame } from './frame-writer'
import { HeaderBlockDecoder } from './header-block-decoder'
import { HeaderBlockEncoder } from './header-block-encoder'
import { ConnectionError, DEFAULT_MAX_FRAME_BYTES, ErrorCode, FrameFlag, FrameType, Setting } from './protocol'
import { requestHeaders } from './request-headers'
import { Http2ServerStream, type StreamConnection } from './server-stream'
import { TokenBucket } from './token-bucket'

export interface Http2ServerOptions {
  /** Streams open at once (SETTINGS_MAX_CONCURRENT_STREAMS); default 100. */
  maxConcurrentStreams?: number
  /** A request's header list, as HTTP/2 measures it (SETTINGS_MAX_HEADER_LIST_SIZE); default 16 KiB. */
  maxHeaderListBytes?: number
  /** What a stream's client may send before this side grants more (SETTINGS_INITIAL_WINDOW_SIZE); default 65,535. */
  streamWindowBytes?: number
  /** What the connection's client may send before this side grants more; default 1 MiB, at least 65,535. */
  connectionWindowBytes?: number
  /** Answers to a client's control frames not yet handed to the kernel, before it is dropped; default 1 MiB. */
  maxQueuedBytes?: number
  /** Told of an error a stream's consumer threw, after its connection is closed (INTERNAL_ERROR);
   * by default, a process warning. */
  onError?: (error: unknown) => void
}

/** Open streams a client may reset at once, and then each second, before its connection is
 * dropped (nghttp2's defaults since the rapid reset attack). */
const RESET_BURST = 1000
const RESETS_PER_SECOND = 33

/** What a turn's writes are joined into one buffer up to, rather than handed to the kernel apart. */
const COPIED_WRITE_BYTES = 16_384

/** HTTP/2's initial windows, the largest window and the range of frame sizes (RFC 9113 §6.5.2, §6.9). */
const INITIAL_WINDOW_BYTES = 65_535
const MAX_WINDOW_BYTES = 2 ** 31 - 1
const MAX_FRAME_BYTES_LIMIT = 2 ** 24 - 1

/** A header block being received over HEADERS and CONTINUATION frames. */
interface PartialBlock { streamId: number, endStream: boolean, parts: Buffer[], bytes: number }

/** A consumer's error no one is told of: a process warning, never a crash, never silence. */
const warnOfConsumerError = (error: unknown) => process.emitWarning(`an HTTP/2 stream's consumer failed: ${inspect(error)}`)

const protocolError = (message: string) => new ConnectionError(ErrorCode.PROTOCOL_ERROR, message)
const frameSizeError = (message: string) => new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, message)

export class Http2ServerConnection implements StreamConnection {
  /** What the streams may still send, over the connection. */
  sendWindow = INITIAL_WINDOW_BYTES
  readonly streamWindowBytes: number
  readonly #socket: Socket
  readonly #onStream: (stream: Http2ServerStream) => void
  readonly #maxConcurrentStreams: number
  readonly #maxHeaderListBytes: number
  readonly #connectionWindowBytes: number
  readonly #maxQueuedBytes: number
  readonly #onError: (error: unknown) => void
  readonly #reader: FrameReader
  readonly #decoder = new HeaderBlockDecoder()
  readonly #encoder = new HeaderBlockEncoder()
  readonly #streams = new Map<number, Http2ServerStream>()
  /** Streams waiting for a window to send in. */
  readonly #blocked = new Set<Http2ServerStream>()
  readonly #resets = new TokenBucket(RESET_BURST, RESETS_PER_SECOND)
  #lastStreamId = 0
  #settingsReceived = false
  #partial: PartialBlock | undefined
  /** The peer's settings that shape what this side sends. */
  #peerStreamWindow = INITIAL_WINDOW_BYTES
  #peerMaxFrameBytes = DEFAULT_MAX_FRAME_BYTES
  /** What the connection's client sent that is not granted back. */
  #ungranted = 0
  /** Frames to write, at the end of this turn, and how much of them answers control frames. */
  #out: Buffer[] = []
  #outControlBytes = 0
  /** Answers to control frames written to the socket that it has not yet handed to the kernel. */
  #unsentControlBytes = 0
  #flushScheduled = false
  #closed = false
  /** GOAWAY sent: the connection ends with its last stream. */
  #shuttingDown = false

  constructor (socket: Socket, onStream: (stream: Http2ServerStream) => void, options: Http2ServerOptions = {}) {
    this.#socket = socket
    this.#onStream = onStream
    this.#maxConcurrentStreams = options.maxConcurrentStreams ?? 100
    this.#maxHeaderListBytes = options.maxHeaderListBytes ?? 16_384
    this.streamWindowBytes = options.streamWindowBytes ?? INITIAL_WINDOW_BYTES
    this.#connectionWindowBytes = Math.max(options.connectionWindowBytes ?? 1_048_576, INITIAL_WINDOW_BYTES)
    this.#maxQueuedBytes = options.maxQueuedBytes ?? 1_048_576
    this.#onError = options.onError ?? warnOfConsumerError
    this.#reader = new FrameReader(DEFAULT_MAX_FRAME_BYTES)
    socket.setNoDelay(true)
    socket.on('data', (chunk: Buffer) => this.#read(chunk))
    socket.on('error', () => {})
    socket.on('close', () => this.#closeAll(ErrorCode.CANCEL))
    this.#send(settingsFrame([
      [Setting.ENABLE_PUSH, 0],
      [Setting.MAX_CONCURRENT_STREAMS, this.#maxConcurrentStreams],
      [Setting.INITIAL_WINDOW_SIZE, this.streamWindowBytes],
      [Setting.MAX_HEADER_LIST_SIZE, this.#maxHeaderListBytes]
    ]))
    const increment = this.#connectionWindowBytes - INITIAL_WINDOW_BYTES
    if (increment > 0) this.#send(wordFrame(FrameType.WINDOW_UPDATE, 0, increment))
  }

  /** The streams open now. */
  get openStreams (): number {
    return this.#streams.size
  }

  /** Starts no more streams (GOAWAY with the last one begun; a later one is refused) and ends the
   * connection once the open ones are over. */
  shutdown (): void {
    if (this.#closed || this.#shuttingDown) return
    this.#shuttingDown = true
    if (this.#streams.size === 0) return this.close()
    this.#send(goawayFrame(this.#lastStreamId, ErrorCode.NO_ERROR))
  }

  /** Ends the connection: GOAWAY with `code` and the last stream begun, then the socket. */
  close (code: number = ErrorCode.NO_ERROR): void {
    if (this.#closed) return
    this.#closed = true
    this.#out.push(goawayFrame(this.#lastStreamId, code))
    this.#flush()
    // A client that does not read would hold the socket open until its queue drained: never. (A
    // graceful end waits for it: its owner bounds the wait.)
    if (code !== ErrorCode.NO_ERROR && this.#socket.writableLength > this.#maxQueuedBytes) this.#socket.destroy()
    else this.#socket.end()
    this.#closeAll(code === ErrorCode.NO_ERROR ? ErrorCode.CANCEL : code)
  }

  sendHeaders (streamId: number, fields: readonly string[], endStream: boolean): void {
    for (const headers of headerFrames(streamId, this.#encoder.encode(fields), endStream, this.#peerMaxFrameBytes)) this.#send(headers)
  }

  /** Sends as much of `data` as one frame and the connection's window take; returns how much. */
  sendData (streamId: number, data: Buffer, endStream: boolean): number {
    const length = Math.min(data.length, this.#peerMaxFrameBytes)
    this.#send(frameHeader(length, FrameType.DATA, endStream && length === data.length ? FrameFlag.END_STREAM : 0, streamId))
    if (length > 0) this.#send(data.subarray(0, length))
    this.sendWindow -= length
    return length
  }

  sendWord (type: number, streamId: number, value: number): void {
    this.#send(wordFrame(type, streamId, value))
  }

  resetStream (streamId: number, code: number): void {
    this.sendWord(FrameType.RST_STREAM, streamId, code)
    const stream = this.#streams.get(streamId)
    if (stream !== undefined) this.closeStream(stream, code)
  }

  /** A stream that has DATA to send and no window: sent on when a WINDOW_UPDATE comes. */
  blocked (stream: Http2ServerStream): void {
    this.#blocked.add(stream)
  }

  closeStream (stream: Http2ServerStream, code: number): void {
    if (this.#streams.get(stream.id) !== stream) return
    this.#streams.delete(stream.id)
    this.#blocked.delete(stream)
    stream.localEnded = true
    stream.remoteEnded = true
    stream.onClose(code)
    if (this.#shuttingDown && this.#streams.size === 0) this.close()
  }

  #send (bytes: Buffer): void {
    if (this.#closed) return
    this.#out.push(bytes)
    if (this.#flushScheduled) return
    this.#flushScheduled = true
    queueMicrotask(() => this.#flush())
  }

  #flush (): void {
    this.#flushScheduled = false
    const out = this.#out
    if (out.length === 0 || this.#socket.destroyed) return
    this.#out = []
    const sent = this.#controlSent()
    let bytes = 0
    for (const part of out) bytes += part.length
    // A turn's few small frames (a unary answer's) cost one copy less than a writev of them;
    // large DATA goes as it is, in one writev.
    if (out.length === 1 || bytes <= COPIED_WRITE_BYTES) {
      this.#socket.write(out.length === 1 ? out[0] : Buffer.concat(out, bytes), sent)
      return
    }
    this.#socket.cork()
    for (let index = 0; index < out.length - 1; index++) this.#socket.write(out[index])
    this.#socket.write(out[out.length - 1], sent)
    this.#socket.uncork()
  }

  /** Counts this turn's control answers as unsent until the callback it returns runs, once the
   * socket has handed the turn's last write to the kernel. */
  #controlSent (): (() => void) | undefined {
    const control = this.#outControlBytes
    if (control === 0) return undefined
    this.#outControlBytes = 0
    this.#unsentControlBytes += control
    return () => { this.#unsentControlBytes -= control }
  }

  #read (chunk: Buffer): void {
    try {
      this.#reader.read(chunk, (type, flags, streamId, payload) => this.#frame(type, flags, streamId, payload))
    } catch (error) {
      if (error instanceof ConnectionError) return this.close(error.code)
      // A stream's consumer failed: the connection cannot say what state it left.
      this.close(ErrorCode.INTERNAL_ERROR)
      this.#onError(error)
    }
  }

  #frame (type: number, flags: number, streamId: number, payload: Buffer): void {
    if (this.#closed) return
    if (!this.#settingsReceived && type !== FrameType.SETTINGS) throw protocolError('the first frame is not SETTINGS')
    if (this.#partial !== undefined && type !== FrameType.CONTINUATION) throw protocolError('a header block interrupted')
    switch (type) {
      case FrameType.DATA: return this.#data(flags, streamId, payload)
      case FrameType.HEADERS: return this.#headers(flags, streamId, payload)
      case FrameType.PRIORITY: return this.#priority(streamId, payload)
      case FrameType.RST_STREAM: return this.#rstStream(streamId, payload)
      case FrameType.SETTINGS: return this.#settings(flags, streamId, payload)
      case FrameType.PUSH_PROMISE: throw protocolError('PUSH_PROMISE from a client')
      case FrameType.PING: return this.#ping(flags, streamId, payload)
      case FrameType.GOAWAY: return this.#goaway(streamId)
      case FrameType.WINDOW_UPDATE: return this.#windowUpdate(streamId, payload)
      case FrameType.CONTINUATION: return this.#continuation(flags, streamId, payload)
    }
    // Frames of unknown types are ignored (§5.5).
  }

  #headers (flags: number, streamId: number, payload: Buffer): void {
    if (streamId === 0 || streamId % 2 === 0) throw protocolError(`HEADERS on stream ${streamId}`)
    const block = unpadded(flags, payload, flags & FrameFlag.PRIORITY ? 5 : 0)
    this.#partial = { streamId, endStream: (flags & FrameFlag.END_STREAM) !== 0, parts: [block], bytes: block.length }
    this.#checkBlockSize()
    if (flags & FrameFlag.END_HEADERS) this.#headerBlock()
  }

  #continuation (flags: number, streamId: number, payload: Buffer): void {
    const partial = this.#partial
    if (partial === undefined || partial.streamId !== streamId) throw protocolError('CONTINUATION without its HEADERS')
    // Empty frames add nothing to hold (a flood of them costs the client its bytes alone).
    if (payload.length > 0) partial.parts.push(payload)
    partial.bytes += payload.length
    this.#checkBlockSize()
    if (flags & FrameFlag.END_HEADERS) this.#headerBlock()
  }

  /** A compressed block is no larger than the list it decodes to, nearly: past the limit, it is refused unread. */
  #checkBlockSize (): void {
    if ((this.#partial as PartialBlock).bytes > this.#maxHeaderListBytes) throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'header block above the header list limit')
  }

  #headerBlock (): void {
    const { streamId, endStream, parts } = this.#partial as PartialBlock
    this.#partial = undefined
    const list = this.#decoder.decode(parts.length === 1 ? parts[0] : Buffer.concat(parts))
    const open = this.#streams.get(streamId)
    if (open !== undefined) {
      // Trailers: the client's last word on its stream; gRPC sends none, and none is kept.
      if (!endStream || open.remoteEnded) throw protocolError(`HEADERS again on stream ${streamId}`)
      open.endedRemotely()
      return
    }
    // A closed stream's (one this side reset may still have trailers on their way, §5.1): its
    // block is decoded, for the table's sake, and the stream refused, the connection going on.
    if (streamId <= this.#lastStreamId) return this.sendWord(FrameType.RST_STREAM, streamId, ErrorCode.STREAM_CLOSED)
    this.#lastStreamId = streamId
    if (list.bytes > this.#maxHeaderListBytes) return this.sendWord(FrameType.RST_STREAM, streamId, ErrorCode.ENHANCE_YOUR_CALM)
    if (this.#shuttingDown || this.#streams.size >= this.#maxConcurrentStreams) return this.sendWord(FrameType.RST_STREAM, streamId, ErrorCode.REFUSED_STREAM)
    const headers = requestHeaders(list.fields)
    if (typeof headers === 'string') return this.sendWord(FrameType.RST_STREAM, streamId, ErrorCode.PROTOCOL_ERROR)
    const stream = new Http2ServerStream(this, streamId, headers, this.#peerStreamWindow, this.streamWindowBytes)
    this.#streams.set(streamId, stream)
    this.#onStream(stream)
    if (endStream) stream.endedRemotely()
  }

  #data (flags: number, streamId: number, payload: Buffer): void {
    if (streamId === 0) throw protocolError('DATA on stream 0')
    if (streamId > this.#lastStreamId) throw protocolError(`DATA on idle stream ${streamId}`)
    this.#grant(payload.length)
    const stream = this.#streams.get(streamId)
    // A closed stream's DATA may still be on its way (§5.1): ignored.
    if (stream === undefined) return
    if (stream.remoteEnded) return this.resetStream(streamId, ErrorCode.STREAM_CLOSED)
    stream.receiveWindow -= payload.length
    if (stream.receiveWindow < 0) return this.resetStream(streamId, ErrorCode.FLOW_CONTROL_ERROR)
    stream.received(payload.length, unpadded(flags, payload, 0), (flags & FrameFlag.END_STREAM) !== 0)
  }

  /** Gives the client back the connection's window it used, once half of it is used: the
   * connection's DATA is read as it comes, and what bounds a client is each stream's window. */
  #grant (bytes: number): void {
    this.#ungranted += bytes
    if (this.#ungranted < this.#connectionWindowBytes / 2) return
    this.sendWord(FrameType.WINDOW_UPDATE, 0, this.#ungranted)
    this.#ungranted = 0
  }

  #priority (streamId: number, payload: Buffer): void {
    if (streamId === 0) throw protocolError('PRIORITY on stream 0')
    // Priorities are not followed (RFC 9113 §5.3.2); a malformed one costs its stream.
    if (payload.length !== 5) this.resetStream(streamId, ErrorCode.FRAME_SIZE_ERROR)
  }

  #rstStream (streamId: number, payload: Buffer): void {
    if (streamId === 0) throw protocolError('RST_STREAM on stream 0')
    if (payload.length !== 4) throw frameSizeError('RST_STREAM not of 4 bytes')
    if (streamId > this.#lastStreamId) throw protocolError(`RST_STREAM on idle stream ${streamId}`)
    const stream = this.#streams.get(streamId)
    if (stream === undefined) return
    if (!this.#resets.take()) throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'streams reset faster than the limit')
    this.closeStream(stream, payload.readUInt32BE(0))
  }

  #settings (flags: number, streamId: number, payload: Buffer): void {
    if (streamId !== 0) throw protocolError('SETTINGS on a stream')
    if (flags & FrameFlag.ACK) {
      if (payload.length !== 0) throw frameSizeError('SETTINGS acknowledgement with a payload')
      return
    }
    if (payload.length % 6 !== 0) throw frameSizeError('SETTINGS not in 6-byte settings')
    for (let at = 0; at < payload.length; at += 6) this.#setting(payload.readUInt16BE(at), payload.readUInt32BE(at + 2))
    this.#settingsReceived = true
    this.#sendControl(frame(FrameType.SETTINGS, FrameFlag.ACK, 0))
  }

  #setting (id: number, value: number): void {
    if (id === Setting.HEADER_TABLE_SIZE) this.#encoder.peerTableSizeChanged()
    if (id === Setting.ENABLE_PUSH && value > 1) throw protocolError('SETTINGS_ENABLE_PUSH not 0 or 1')
    if (id === Setting.MAX_FRAME_SIZE) {
      if (value < DEFAULT_MAX_FRAME_BYTES || value > MAX_FRAME_BYTES_LIMIT) throw protocolError('SETTINGS_MAX_FRAME_SIZE out of range')
      this.#peerMaxFrameBytes = value
    }
    if (id === Setting.INITIAL_WINDOW_SIZE) {
      if (value > MAX_WINDOW_BYTES) throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1')
      const change = value - this.#peerStreamWindow
      this.#peerStreamWindow = value
      for (const stream of this.#streams.values()) {
        stream.sendWindow += change
        if (stream.sendWindow > MAX_WINDOW_BYTES) throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'a stream\'s window above 2^31-1')
      }
      this.#unblock()
    }
  }

  #ping (flags: number, streamId: number, payload: Buffer): void {
    if (streamId !== 0) throw protocolError('PING on a stream')
    if (payload.length !== 8) throw frameSizeError('PING not of 8 bytes')
    if (!(flags & FrameFlag.ACK)) this.#sendControl(frame(FrameType.PING, FrameFlag.ACK, 0, payload))
  }

  #goaway (streamId: number): void {
    if (streamId !== 0) throw protocolError('GOAWAY on a stream')
    // The client starts no more streams; the open ones finish, and the client closes the connection.
  }

  #windowUpdate (streamId: number, payload: Buffer): void {
    if (payload.length !== 4) throw frameSizeError('WINDOW_UPDATE not of 4 bytes')
    const increment = payload.readUInt32BE(0) & 0x7fffffff
    if (streamId === 0) {
      if (increment === 0) throw protocolError('WINDOW_UPDATE of 0')
      this.sendWindow += increment
      if (this.sendWindow > MAX_WINDOW_BYTES) throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'the connection\'s window above 2^31-1')
      return this.#unblock()
    }
    const stream = this.#streams.get(streamId)
    if (stream === undefined) {
      if (streamId > this.#lastStreamId) throw protocolError(`WINDOW_UPDATE on idle stream ${streamId}`)
      return
    }
    if (increment === 0) return this.resetStream(streamId, ErrorCode.PROTOCOL_ERROR)
    stream.sendWindow += increment
    if (stream.sendWindow > MAX_WINDOW_BYTES) return this.resetStream(streamId, ErrorCode.FLOW_CONTROL_ERROR)
    this.#blocked.delete(stream)
    stream.flush()
  }

  /** Streams blocked on a window try again. */
  #unblock (): void {
    const blocked = [...this.#blocked]
    this.#blocked.clear()
    for (const stream of blocked) stream.flush()
  }

  /** An answer to the client's control frame, unless the client does not read its answers. */
  #sendControl (bytes: Buffer): void {
    const unsent = this.#unsentControlBytes + this.#outControlBytes + bytes.length
    if (unsent > this.#maxQueuedBytes) throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'control frames unread')
    this.#outControlBytes += bytes.length
    this.#send(bytes)
  }

  #closeAll (code: number): void {
    this.#closed = true
    for (const stream of [...this.#streams.values()]) this.closeStream(stream, code)
  }
}

/** A HEADERS or DATA frame's payload without its padding and `skipped` bytes after the pad length. */
function unpadded (flags: number, payload: Buffer, skipped: number): Buffer {
  if (!(flags & FrameFlag.PADDED)) return skipped === 0 ? payload : payload.subarray(skipped)
  if (payload.length < 1 + skipped + payload[0]) throw protocolError('padding longer than its frame')
  return payload.subarray(1 + skipped, payload.length - payload[0])
}
